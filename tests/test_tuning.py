"""The tuned-run setting: parsed strictly, named apart, read from the environment the asv processes inherit."""

from __future__ import annotations

import pytest

from fusedbench.catalog.tuning import TUNE_VARIABLE, Tuning, parse_tuning, tuning_from_environment
from fusedbench.errors import FusedbenchError


def test_a_tuning_parses_and_names_its_own_machine():
    tuning = parse_tuning("fused:algorithm=3")
    assert tuning == Tuning("fused", "algorithm", 3)
    assert tuning.label == "fused:algorithm=3"
    assert tuning.machine("h100-80gb-hbm3") == "h100-80gb-hbm3-tuned-fused-algorithm-3"
    assert parse_tuning("gemm:workspace=0").to_json() == {"provider": "gemm", "setting": "workspace", "value": 0}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("fused", "is not of the form PROVIDER:SETTING=N"),
        ("fused:algorithm=-1", "is not of the form"),
        ("torch:algorithm=2", "provider 'torch' is not planned by cuBLASLt's heuristic; choose from fused, gemm"),
        ("fused-autotuned:algorithm=2", "choose from fused, gemm"),
        ("fused:algo=2", "unknown setting 'algo'; choose from algorithm, workspace"),
    ],
)
def test_a_bad_tuning_is_one_line_naming_the_value_and_the_form(text, says):
    with pytest.raises(FusedbenchError, match="tuning") as raised:
        parse_tuning(text)
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_the_environment_variable_is_the_tuning_or_nothing():
    assert tuning_from_environment({}) is None
    assert tuning_from_environment({TUNE_VARIABLE: " "}) is None
    assert tuning_from_environment({TUNE_VARIABLE: "gemm:workspace=0"}) == Tuning("gemm", "workspace", 0)
    with pytest.raises(FusedbenchError, match=f"^{TUNE_VARIABLE}: tuning 'x'"):
        tuning_from_environment({TUNE_VARIABLE: "x"})


def test_a_tuned_machine_belongs_to_its_gpu_and_any_other_machine_to_itself():
    from fusedbench.catalog.tuning import gpu_machine

    assert gpu_machine(parse_tuning("fused:algorithm=3").machine("h100-80gb-hbm3")) == "h100-80gb-hbm3"
    assert gpu_machine("h200-141gb") == "h200-141gb"
