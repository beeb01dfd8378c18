"""Deliberate changes to a run (a tuning, an injected slowdown): parsed strictly, named apart, read from the
environment the asv processes inherit."""

from __future__ import annotations

import pytest

from fusedbench.catalog.deliberate import Deliberate, deliberate_from_environment, gpu_machine
from fusedbench.catalog.injection import INJECT_VARIABLE, Injection, Target, parse_injection
from fusedbench.catalog.model import CellKey
from fusedbench.catalog.suites import GROUPS
from fusedbench.catalog.tuning import TUNE_VARIABLE, Tuning, parse_tuning, tuning_from_environment
from fusedbench.errors import FusedbenchError

SEED_CELL = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused"


def test_a_tuning_parses_and_names_its_own_machine():
    tuning = parse_tuning("fused:algorithm=3")
    assert tuning == Tuning("fused", "algorithm", 3)
    assert tuning.label == "fused:algorithm=3"
    assert Deliberate(tuning).machine("h100-80gb-hbm3") == "h100-80gb-hbm3-tuned-fused-algorithm-3"
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


def test_a_marked_machine_belongs_to_its_gpu_and_any_other_machine_to_itself():
    tuned = Deliberate(parse_tuning("fused:algorithm=3")).machine("h100-80gb-hbm3")
    injected = Deliberate(None, parse_injection("Quick=5%")).machine("h100-80gb-hbm3")
    assert injected == f"h100-80gb-hbm3-inject-{parse_injection('Quick=5%').digest}" and len(injected) == 30
    assert gpu_machine(tuned) == gpu_machine(injected) == "h100-80gb-hbm3"
    assert gpu_machine("h200-141gb") == Deliberate().machine("h200-141gb") == "h200-141gb"


def test_an_injection_parses_cells_and_groups_and_slows_the_cells_it_names():
    injection = parse_injection([f"{SEED_CELL}=5%", "Fp16Seed = 2.5 %"])
    assert injection == Injection((Target(SEED_CELL, 0.05), Target("Fp16Seed", 0.025)))
    assert injection.label == f"{SEED_CELL}=5%;Fp16Seed=2.5%"
    assert parse_injection(injection.label) == injection  # the variable's form reads back the same
    assert injection.to_json() == [{"target": SEED_CELL, "fraction": 0.05}, {"target": "Fp16Seed", "fraction": 0.025}]
    cell = CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "fused")
    assert injection.fraction(cell, "Quick") == 0.05  # the cell wherever it is timed
    assert injection.fraction(CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "unfused"), "Quick") == 0
    assert injection.fraction(CellKey("BIAS", "fp16", 4096, 4096, 4096, "gemm"), "Fp16Seed") == 0.025
    assert injection.fraction(CellKey("BIAS", "fp16", 4096, 4096, 4096, "gemm"), "Fp16Llm") == 0
    assert parse_injection("Quick=5%").digest != parse_injection("Quick=6%").digest


def test_an_injection_names_the_targets_that_would_slow_nothing():
    injection = parse_injection([f"{SEED_CELL}=5%", "Fp16Llm=2%", "RELU_BIAS/fp16/(1,2)x(2,3)/fused=5%"])
    assert injection.missing_from([GROUPS["Quick"]]) == ["Fp16Llm=2%", "RELU_BIAS/fp16/(1,2)x(2,3)/fused=5%"]
    assert injection.missing_from([GROUPS["Quick"], GROUPS["Fp16Llm"]]) == ["RELU_BIAS/fp16/(1,2)x(2,3)/fused=5%"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Quick", "is not of the form TARGET=P%"),
        ("Quick=5", "is not of the form TARGET=P%"),
        ("Quick=0%", "0% is outside (0, 100]"),
        ("Quick=150%", "150% is outside (0, 100]"),
        ("Quik=5%", "'Quik' is neither a cell EPILOG/DTYPE/SHAPE/PROVIDER nor a group"),
        ("RELU/fp17/(8,4)x(4,8)/fused=5%", "unknown dtype 'fp17'"),
        (" ; ", "names no target"),
    ],
)
def test_a_bad_injection_is_one_line_naming_the_value_and_the_form(text, says):
    with pytest.raises(FusedbenchError) as raised:
        parse_injection(text)
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_the_environment_asks_for_a_tuning_or_an_injection_never_both():
    assert deliberate_from_environment({}) == Deliberate() and not Deliberate()
    asked = deliberate_from_environment({INJECT_VARIABLE: "Quick=5%"})
    assert asked.injection == parse_injection("Quick=5%") and asked.tuning is None
    assert asked.environment() == {INJECT_VARIABLE: "Quick=5%"} and asked.flags == " --inject 'Quick=5%'"
    assert asked.to_json() == {"injection": [{"target": "Quick", "fraction": 0.05}]}
    tuned = Deliberate(parse_tuning("gemm:workspace=0"))
    assert tuned.environment() == {TUNE_VARIABLE: "gemm:workspace=0"} and tuned.flags == " --tune gemm:workspace=0"
    assert tuned.to_json() == {"tuning": {"provider": "gemm", "setting": "workspace", "value": 0}}
    assert Deliberate().to_json() == {} and Deliberate().environment() == {} and Deliberate().flags == ""
    with pytest.raises(FusedbenchError, match=r"^FUSEDBENCH_INJECT: injection 'x' is not of the form"):
        deliberate_from_environment({INJECT_VARIABLE: "x"})
    with pytest.raises(FusedbenchError, match=r"tuned .* or injected .*, not both"):
        deliberate_from_environment({INJECT_VARIABLE: "Quick=5%", TUNE_VARIABLE: "gemm:workspace=0"})
