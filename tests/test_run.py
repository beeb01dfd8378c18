"""`fusedbench run`'s pure parts: machine names, the asv command line, suites."""

import re

import pytest

from fusedbench.errors import FusedbenchError
from fusedbench.run import asv_command, machine_name
from fusedbench.suites import GROUPS, SUITES, suite_bench_regex, suite_groups


def test_machine_name_carries_the_gpu_model_and_memory():
    assert machine_name("NVIDIA H100 80GB HBM3", 85_520_809_984) == "h100-80gb-hbm3"
    assert machine_name("NVIDIA H200", 143771 * 2**20) == "h200-141gb"


def test_asv_runs_in_the_existing_environment_with_the_real_commit_and_samples():
    command = asv_command(suite="quick", bench=None, machine="h200-141gb", commit="abc123", launch_method="spawn")
    joined = " ".join(command)
    for expected in ("asv run", "--set-commit-hash abc123", "--machine h200-141gb", "--record-samples"):
        assert expected in joined
    assert command[command.index("--launch-method") + 1] == "spawn"
    assert command[command.index("--environment") + 1].startswith("existing:")


def test_unknown_launch_method_and_suite_are_refused():
    with pytest.raises(FusedbenchError, match="unknown launch method 'fork'"):
        asv_command(suite="quick", bench=None, machine="m", commit="c", launch_method="fork")
    with pytest.raises(FusedbenchError, match="unknown suite 'huge'; choose from quick, default, full"):
        suite_groups("huge")


def test_suite_regex_selects_its_classes_and_the_ceilings_only():
    pattern = suite_bench_regex("default")
    assert re.search(pattern, "cells.Fp16Seed.time_cell")
    assert re.search(pattern, "cells.Bf16Membound.time_cell")
    assert re.search(pattern, "ceilings.GemmCeiling.time_gemm")
    assert not re.search(pattern, "cells.Quick.time_cell")
    assert not re.search(pattern, "cells.Fp32Llm.time_cell")
    narrowed = suite_bench_regex("default", "Bf16")
    assert re.search(narrowed, "cells.Bf16Seed.time_cell") and not re.search(narrowed, "cells.Fp16Seed.time_cell")
    assert re.search(narrowed, "ceilings.CopyCeiling.time_copy")  # floors need the ceilings of every run


def test_default_suite_covers_every_epilog_at_16_bit_on_seed_llm_and_membound():
    default = {GROUPS[name].dtype + "/" + GROUPS[name].shape_set for name in SUITES["default"]}
    for dtype in ("fp16", "bf16"):
        for shapes in ("seed", "llm", "membound"):
            assert f"{dtype}/{shapes}" in default
    assert all(len(GROUPS[name].epilogs) == 16 for name in SUITES["default"])
