"""`fusedbench run`'s pure parts: machine names, the asv command line, suites."""

import re
import shutil
from pathlib import Path

import pytest

from fusedbench.errors import FusedbenchError
from fusedbench.run import asv_command, machine_name, run_targets
from fusedbench.suites import GROUPS, SUITES, suite_groups

FIXTURE_RESULTS = Path(__file__).parent / "fixtures" / "results-h200"


def test_machine_name_carries_the_gpu_model_and_memory():
    assert machine_name("NVIDIA H100 80GB HBM3", 85_520_809_984) == "h100-80gb-hbm3"
    assert machine_name("NVIDIA H200", 143771 * 2**20) == "h200-141gb"


def test_asv_runs_in_the_existing_environment_with_the_real_commit_and_samples():
    command = asv_command(bench_regex="^x", machine="h200-141gb", commit="abc123", launch_method="spawn")
    joined = " ".join(command)
    for expected in ("asv run", "--set-commit-hash abc123", "--machine h200-141gb", "--record-samples", "--bench ^x"):
        assert expected in joined
    assert command[command.index("--launch-method") + 1] == "spawn"
    assert command[command.index("--environment") + 1].startswith("existing:")


def test_unknown_launch_method_suite_and_bench_are_refused():
    with pytest.raises(FusedbenchError, match="unknown launch method 'fork'"):
        asv_command(bench_regex="^x", machine="m", commit="c", launch_method="fork")
    with pytest.raises(FusedbenchError, match="unknown suite 'huge'; choose from quick, default, full"):
        suite_groups("huge")
    with pytest.raises(FusedbenchError, match="no group of suite 'quick' matches --bench 'Bf16'"):
        run_targets("quick", "Bf16")


def test_a_run_is_the_ceilings_then_one_asv_invocation_per_group():
    targets = run_targets("default", None)
    assert targets[0][0] == "ceilings" and re.search(targets[0][1], "ceilings.GemmCeiling.time_gemm")
    assert [label for label, _, _ in targets[1:]] == list(SUITES["default"])
    label, regex, cells = targets[1]
    assert re.search(regex, f"cells.{label}.time_cell") and not re.search(regex, "cells.Quick.time_cell")
    assert cells == GROUPS[label].cell_count
    assert [label for label, _, _ in run_targets("default", "Bf16")] == [
        "ceilings",
        "Bf16Seed",
        "Bf16Llm",
        "Bf16Membound",
    ]


def test_default_suite_covers_every_epilog_at_16_bit_on_seed_llm_and_membound():
    default = {GROUPS[name].dtype + "/" + GROUPS[name].shape_set for name in SUITES["default"]}
    for dtype in ("fp16", "bf16"):
        for shapes in ("seed", "llm", "membound"):
            assert f"{dtype}/{shapes}" in default
    assert all(len(GROUPS[name].epilogs) == 16 for name in SUITES["default"])


class _FakeTelemetry:
    """Stands in for the NVML sampler."""

    def __init__(self):
        from fusedbench.telemetry import TelemetrySummary

        self.summary = TelemetrySummary()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def device_facts(self):
        return {"name": "fake GPU"}


def test_an_interrupt_keeps_finished_groups_and_the_environment(tmp_path, monkeypatch):
    import json
    import subprocess
    from types import SimpleNamespace

    import fusedbench.check
    import fusedbench.gpu
    import fusedbench.run as run
    import fusedbench.telemetry

    stack = SimpleNamespace(device_name="NVIDIA H200", cupy=None, torch=None, cublaslt_version=130100)
    monkeypatch.setattr(fusedbench.gpu, "load_gpu_stack", lambda command: stack)
    monkeypatch.setattr(fusedbench.check, "run_check", lambda **kw: SimpleNamespace(cells=[]))
    monkeypatch.setattr(fusedbench.telemetry, "TelemetrySampler", _FakeTelemetry)
    monkeypatch.setattr(fusedbench.telemetry, "nvml_memory_bytes", lambda: 143771 * 2**20)
    monkeypatch.setattr(run, "current_commit", lambda repo: "c0ffee" * 6 + "c0ff")
    monkeypatch.setattr(run, "software_versions", lambda stack: {"cublaslt": 130100})
    invoked, echoed = [], []
    real_run = subprocess.run

    def fake_run(command, **kwargs):
        if "asv" not in command:  # e.g. platform.processor() running `uname -p`
            return real_run(command, **kwargs)
        if "machine" in command:
            return SimpleNamespace(returncode=0)
        invoked.append(command[command.index("--bench") + 1])
        if len(invoked) == 3:  # Ctrl-C during the second group
            raise KeyboardInterrupt
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    shutil.copytree(FIXTURE_RESULTS, tmp_path / "results")  # an earlier run's results, for the report
    code = run.run_suite(
        suite="default", bench="Fp16", launch_method="forkserver", repo=str(tmp_path), echo=echoed.append
    )
    assert code == 130
    assert len(invoked) == 3  # ceilings, Fp16Seed, then Fp16Llm interrupted; Fp16Membound never started
    (env_file,) = [p for p in (tmp_path / "results" / "h200-141gb").glob("*.fbenv") if "c0ffeec0" in p.name]
    payload = json.loads(env_file.read_text())
    assert payload["asv_exit_codes"] == {"ceilings": 0, "Fp16Seed": 0, "Fp16Llm": 130}
    assert payload["machine"] == "h200-141gb" and payload["gpu"] == {"name": "fake GPU"}
    assert payload["sampling"] == "williams-rounds"  # tells the results loader it may pair samples by round
    assert echoed[-1] == f"report: {tmp_path / 'reports' / 'index.html'}"
    assert (tmp_path / "reports" / "index.html").stat().st_size > 1_000_000


def test_a_run_with_no_results_yet_says_so_instead_of_a_report(tmp_path):
    from fusedbench.run import write_run_report

    (tmp_path / "results").mkdir()
    echoed = []
    write_run_report(str(tmp_path), echoed.append)
    assert echoed == ["no report written: no fusedbench results yet; `fusedbench run` on a GPU machine writes them"]


def test_progress_line_reads_the_newest_group_file(tmp_path):
    import json
    import os
    import time

    from fusedbench.run import progress_line

    assert progress_line(str(tmp_path)) is None
    (tmp_path / "Fp16Seed.progress").write_text(json.dumps({"group": "Fp16Seed", "done": 96, "total": 96, "last": "a"}))
    older = time.time() - 60
    os.utime(tmp_path / "Fp16Seed.progress", (older, older))
    (tmp_path / "Fp16Llm.progress").write_text(json.dumps({"group": "Fp16Llm", "done": 36, "total": 864, "last": "b"}))
    (tmp_path / "Fp16Seed.json").write_text("{}")  # statuses are not progress
    assert progress_line(str(tmp_path)) == "measuring Fp16Llm: 36/864 cells (b)"
