"""`fusedbench ab BASE`: refusals before anything is measured, then both codes measured in lock-step (a worker that
needs no GPU stands in, tests/fixtures/fake_confirm_worker.py) and judged by the GPU's side-by-side margins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import git, make_checkout

from fusedbench.catalog.suites import ASV_VERSIONS
from fusedbench.cli import main
from fusedbench.measure import confirm as measure
from fusedbench.regressions.confirm import CONFIRMATION, margins_for

ROOT = Path(__file__).parent.parent
FAKE = ROOT / "tests" / "fixtures" / "fake_confirm_worker.py"
MACHINE = "h100-80gb-hbm3"
TARGET = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
PYPROJECT = '[project]\nname = "fusedbench"\ndependencies = ["numpy>=1.25"]\n'
WORKER = "PROTOCOL = 2\n"


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A fusedbench checkout of two commits, base and candidate, with the worker's entry point in both."""
    root = make_checkout(
        tmp_path / "candidate",
        {"pyproject.toml": PYPROJECT, "fusedbench/measure/gpu/confirm_worker.py": WORKER, "fusedbench/x.py": "A = 1\n"},
    )
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "fusedbench" / "x.py").write_text("A = 2\n")
    git(root, "commit", "-qam", "the change")
    monkeypatch.chdir(root)
    return root, base


@pytest.fixture
def fake_gpu(monkeypatch):
    import fusedbench.cli.ab as ab_cli
    import fusedbench.measure.machine

    monkeypatch.setattr(measure.Worker, "command", (sys.executable, str(FAKE)))
    monkeypatch.setattr(ab_cli, "require_gpu", lambda what, instead: None)
    monkeypatch.setattr(fusedbench.measure.machine, "gpu_machine_name", lambda: MACHINE)
    monkeypatch.setenv("FAKE_HELLO", json.dumps({"benchmark_versions": dict(ASV_VERSIONS)}))
    assert margins_for(MACHINE, "Quick", ASV_VERSIONS["Quick"]) is not CONFIRMATION  # the H100 earned Quick's


def run(capsys, *argv):
    code = main(["ab", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["nosuchcommit"], "BASE 'nosuchcommit' is no commit of"),
        (["HEAD"], "BASE 'HEAD' is the candidate itself"),
        (["HEAD~1", "--suite", "mlp"], "ab measures epilog cells side by side; the mlp suite's training steps"),
        (["HEAD~1", "--bench", "NoSuchGroup"], "no group of suite 'quick' matches --bench 'NoSuchGroup'"),
        (["HEAD~1", "--rounds", "1"], "--rounds 1: a paired interval needs 2 rounds a side at least"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_is_measured(checkout, capsys, argv, says):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.startswith("error: ") and says in err and err.count("\n") == 1


def test_a_dirty_checkout_or_a_base_of_other_dependencies_is_refused(checkout, capsys):
    from fusedbench.paired.ab import dependency_changes

    root, base = checkout
    (root / "pyproject.toml").write_text(PYPROJECT + '[project.optional-dependencies]\ndev = ["pytest>=8"]\n')
    git(root, "commit", "-qam", "a test tool")
    assert dependency_changes(str(root), base, "HEAD") == []  # the tests' tools: nothing measured imports them
    (root / "pyproject.toml").write_text(PYPROJECT.replace("numpy>=1.25", "numpy>=2"))
    code, _, err = run(capsys, base)
    assert code == 2 and "the checkout has uncommitted changes (pyproject.toml)" in err
    git(root, "commit", "-qam", "numpy 2")
    code, _, err = run(capsys, base)
    assert code == 2 and f"the base {base[:8]} depends on other packages than the candidate" in err
    assert "(required): numpy>=1.25 -> numpy>=2" in err


def test_an_unchanged_cell_is_green_and_a_cell_5_percent_slower_on_the_candidate_side_is_red(
    checkout, fake_gpu, capsys, monkeypatch
):
    _, base = checkout
    code, out, _ = run(capsys, base, "--rounds", "4")
    assert code == 0 and out.startswith("fusedbench ab: green"), out
    assert f"measured: {base[:8]} (base) beside" in out and "30 cells a side, 4 rounds" in out
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}=5%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")  # the checkout's folder: the change is the candidate's
    code, out, _ = run(capsys, base, "--rounds", "4", "--format", "json")
    verdict = json.loads(out)
    assert code == 1 and verdict["outcome"] == "red"
    (suite,) = verdict["suites"]
    alerted = {(a["epilog"], a["provider"], a["metric"]) for a in suite["alerts"]}
    assert ("RELU_BIAS", "fused", "time") in alerted
    assert all(epilog == "RELU_BIAS" for epilog, _, _ in alerted)  # nothing else moved


def test_a_group_without_margins_of_its_gpu_is_compared_and_not_judged(checkout, fake_gpu, capsys, monkeypatch):
    import fusedbench.measure.machine

    monkeypatch.setattr(fusedbench.measure.machine, "gpu_machine_name", lambda: "a100-sxm4-80gb")
    _, base = checkout
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}=5%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    code, out, _ = run(capsys, base, "--rounds", "4", "--format", "json")
    (suite,) = json.loads(out)["suites"]
    assert code == 0 and suite["outcome"] == "not judged" and "no side-by-side margins" in suite["reason"]


def test_a_cell_timed_in_two_groups_is_judged_in_each_with_its_own_samples():
    """The Blog control and Fp16Seed both time the textbook's RELU_BIAS at the seed shape: each group's verdict is
    of the cells measured in it, here slower in Blog only."""
    from fusedbench.catalog.model import Cell, CellKey
    from fusedbench.measure.confirm import Measured
    from fusedbench.paired.ab import Pair, judge_pair

    key = CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "textbook")
    steady = [0.036 + 0.0001 * (i % 3) for i in range(10)]
    cells = {"baseline": [Cell.measured(key, steady)] * 2,
             "candidate": [Cell.measured(key, steady), Cell.measured(key, [t * 1.2 for t in steady])]}  # fmt: skip
    groups = {side: ["Fp16Seed", "Blog"] for side in cells}
    hello = {"benchmark_versions": dict(ASV_VERSIONS), "device": "fake"}
    measured = Measured(cells, groups, {"baseline": hello, "candidate": hello}, [], 1.0, 40)
    (suite,) = judge_pair(MACHINE, "default", Pair("a" * 40, "b" * 40), measured).suites
    slower = {g.group: sorted({v.value for v in g.judged.comparison.cells["verdict"]}) for g in suite.groups}
    assert slower == {"Fp16Seed": ["same"], "Blog": ["slower"]}
