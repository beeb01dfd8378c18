"""`fusedbench ab BASE`: refusals before anything is measured, then both codes measured in lock-step (a worker that
needs no GPU stands in, tests/fixtures/fake_confirm_worker.py) and judged by the GPU's side-by-side margins."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, make_checkout
from test_alert_cli import run_cli

from fusedbench.catalog.suites import ASV_VERSIONS
from fusedbench.cli import main
from fusedbench.measure import confirm as measure
from fusedbench.regressions.thresholds import CONFIRMATION, margins_for, presets

ROOT = Path(__file__).parent.parent
FAKE = ROOT / "tests" / "fixtures" / "fake_confirm_worker.py"
MACHINE = "h100-80gb-hbm3"
TARGET = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
PYPROJECT = '[project]\nname = "fusedbench"\ndependencies = ["numpy>=1.25"]\n'
WORKER = "PROTOCOL = 3\n"


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
    (root / "results").mkdir()
    shutil.copy(ROOT / "results" / "benchmarks.json", root / "results")  # asv's description of the suite
    monkeypatch.chdir(root)
    return root, base


@pytest.fixture
def fake_gpu(monkeypatch):
    import fusedbench.cli.ab as ab_cli
    import fusedbench.measure.machine

    monkeypatch.setattr(measure.Worker, "entry", (str(FAKE),))
    monkeypatch.setattr(ab_cli, "require_gpu", lambda what, instead: None)
    monkeypatch.setattr(fusedbench.measure.machine, "gpu_machine_name", lambda: MACHINE)
    monkeypatch.setenv("FAKE_HELLO", json.dumps({"benchmark_versions": dict(ASV_VERSIONS)}))
    assert margins_for(MACHINE, "Quick", ASV_VERSIONS["Quick"]) is not CONFIRMATION  # the H100 earned Quick's


def run(capsys, *argv):
    try:
        code = main(["ab", *argv])
    except SystemExit as exited:  # argparse's own refusals
        code = exited.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["nosuchcommit"], "BASE 'nosuchcommit' is no commit of"),
        (["HEAD"], "BASE 'HEAD' is the candidate itself"),
        (["HEAD~1", "--suite", "mlp"], "ab measures epilog cells side by side; the mlp suite's training steps"),
        (["HEAD~1", "--bench", "NoSuchGroup"], "no group of suite 'quick' matches --bench 'NoSuchGroup'"),
        (["HEAD~1", "--cells", "RELU_BIAS/(fp16"], "--cells 'RELU_BIAS/(fp16' is not a regular expression"),
        (["HEAD~1", "--cells", "/bf16/"], "no cell of the chosen groups matches --cells '/bf16/'; cells are written"),
        (
            ["HEAD~1", "--rounds", "1"],
            "argument --rounds: expected a whole number of rounds a side, 2 or more, got '1'",
        ),
        (["HEAD~1", "--rounds", "2.5"], "argument --rounds: expected a whole number of rounds a side, 2 or more"),
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


def test_cells_narrows_the_run_to_the_cells_it_finds_and_only_they_are_kept_and_judged(
    checkout, fake_gpu, capsys, monkeypatch
):
    root, base = checkout
    chosen = "RELU_BIAS/.*/fused$|^BIAS/.*/unfused$"
    code, out, _ = run(capsys, base, "--rounds", "4", "--cells", chosen, "--format", "json")
    (suite,) = json.loads(out)["suites"]  # judged over the two cells asked for, not 30 of which 28 never ran
    assert code == 0 and suite["outcome"] == "green" and (suite["cells"], suite["compared"]) == (2, 2)
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}=5%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    code, out, _ = run(capsys, base, "--rounds", "4", "--cells", chosen, "--format", "json")
    verdict = json.loads(out)
    assert code == 1 and "2 cells a side, 4 rounds" in verdict["measured"][0]
    (suite,) = verdict["suites"]
    cells = {(a["epilog"], a["provider"]) for a in suite["alerts"] if a["metric"] == "time" and a["epilog"]}
    assert cells == {("RELU_BIAS", "fused")}
    gated = [a["reason"] for a in suite["alerts"] if a["epilog"] is None]  # the group's gates: of the cells measured
    assert gated and all(re.match(r"the median change of the group's [12] ", reason) for reason in gated)
    candidate = git(root, "rev-parse", "HEAD").strip()
    from asv.results import iter_results_for_machine

    red = re.search(r"kept as machine (\S+)", verdict["measured"][0]).group(1)
    (kept,) = [r for r in iter_results_for_machine(str(root / "results"), red) if r.commit_hash == candidate]
    params = kept.get_result_params("cells.Quick.time_cell")
    values = dict(zip(itertools.product(*params), kept.get_result_value("cells.Quick.time_cell", params), strict=True))
    timed = {combo for combo, value in values.items() if value is not None}
    assert timed == {("'RELU_BIAS'", "'(65536,16384)x(16384,8192)'", "'fused'"),
                     ("'BIAS'", "'(65536,16384)x(16384,8192)'", "'unfused'")}  # fmt: skip
    (record,) = [json.loads(p.read_text()) for p in (root / "results" / red).glob(f"{candidate[:8]}-Quick-*.fbenv")]
    assert record["environment"]["paired"]["cells"] == chosen  # the record says the run was narrowed, and how


def test_a_group_of_a_large_suite_is_judged_over_that_group_alone(checkout, fake_gpu, capsys, monkeypatch):
    """`--suite default --bench '^Fp16Seed$'`: the session measured one of the suite's groups, and is judged by it, not
    left "not judged" for the groups it was never asked for."""
    _, base = checkout
    code, out, _ = run(capsys, base, "--rounds", "4", "--suite", "default", "--bench", "^Fp16Seed$", "--format", "json")
    (suite,) = json.loads(out)["suites"]
    assert code == 0 and suite["outcome"] == "green" and [g["group"] for g in suite["groups"]] == ["Fp16Seed"]
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}=5%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    code, out, _ = run(capsys, base, "--rounds", "4", "--suite", "default", "--bench", "^Fp16Seed$", "--format", "json")
    assert code == 1 and json.loads(out)["outcome"] == "red"


def test_a_group_without_margins_of_its_gpu_is_compared_and_not_judged(checkout, fake_gpu, capsys, monkeypatch):
    import fusedbench.measure.machine

    monkeypatch.setattr(fusedbench.measure.machine, "gpu_machine_name", lambda: "a100-sxm4-80gb")
    _, base = checkout
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}=5%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    code, out, _ = run(capsys, base, "--rounds", "4", "--format", "json")
    (suite,) = json.loads(out)["suites"]
    assert code == 0 and suite["outcome"] == "not judged" and "no margins of this GPU's for it" in suite["reason"]


def paired_folder(root: Path) -> Path:
    (folder,) = (root / "results").glob(f"{MACHINE}-paired-*")
    return folder


def test_the_pair_is_kept_as_asv_results_of_a_machine_of_its_own_and_alert_gives_the_same_verdict(
    checkout, fake_gpu, capsys, monkeypatch
):
    root, base = checkout
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}=5%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    code, out, _ = run(capsys, base, "--rounds", "4", "--format", "json")
    folder = paired_folder(root)
    assert code == 1 and f"kept as machine {folder.name}" in json.loads(out)["measured"][0]
    candidate = git(root, "rev-parse", "HEAD").strip()
    from asv.results import iter_results_for_machine

    results = {r.commit_hash: r for r in iter_results_for_machine(str(root / "results"), folder.name)}
    assert set(results) == {base, candidate}  # asv reads both sides, each a commit of the session's machine
    asked = "cells.Quick.time_cell"
    params = results[candidate].get_result_params(asked)
    combos = list(itertools.product(*params))
    index = combos.index(("'RELU_BIAS'", "'(65536,16384)x(16384,8192)'", "'fused'"))
    samples = results[candidate].get_result_samples(asked, params)[index]
    assert len(samples) >= 4 and samples == pytest.approx([0.00105] * len(samples))  # the candidate's own samples
    assert results[base].get_result_value("ceilings.CopyCeiling.time_copy", []) == [0.001]
    gemm = results[candidate].get_result_params("ceilings.GemmCeiling.time_gemm")
    assert None not in results[candidate].get_result_value("ceilings.GemmCeiling.time_gemm", gemm)  # every dtype's
    compared = subprocess.run([sys.executable, "-m", "asv", "compare", base, candidate, "--machine", folder.name],
                              cwd=root, capture_output=True, text=True)  # fmt: skip
    assert compared.returncode == 0 and "RELU_BIAS" in compared.stdout and "1.05" in compared.stdout
    (record,) = [json.loads(p.read_text()) for p in folder.glob(f"{candidate[:8]}-Quick-*.fbenv")]
    paired = record["environment"]["paired"]
    assert (paired["baseline"], paired["candidate"], paired["side"], paired["rounds"]) == (
        base,
        candidate,
        "candidate",
        4,
    )
    assert paired["order"].startswith("lock-step") and paired["check"]["failures"] == []
    assert paired["code"]["baseline"] != paired["code"]["candidate"]  # fusedbench/x.py changed: no A/A pair
    refused, _, err = run_cli(capsys, "calibrate", "results", "--paired", folder.name)
    assert refused == 2 and "is no A/A session: its candidate's code differs from its base's" in err
    again, out_again, _ = run_cli(capsys, "alert", "--machine", folder.name, "--format", "json")
    assert again == 1 and json.loads(out_again)["suites"] == json.loads(out)["suites"]  # one verdict, wherever shown
    run(capsys, base, "--rounds", "4")  # another session of the same pair: a machine of its own, nothing overwritten
    assert len(list((root / "results").glob(f"{MACHINE}-paired-*"))) == 2


def test_a_slower_pick_of_the_candidates_autotuning_is_its_own_alert_and_the_cell_is_judged_at_one_pick(
    checkout, fake_gpu, capsys, monkeypatch
):
    from fusedbench.regressions.picks import PICK_MARGIN

    _, base = checkout
    monkeypatch.setenv("FAKE_RANK", "3")  # the candidate's autotuning picks rank 3, the base's rank 0
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    monkeypatch.setenv("FAKE_RANK_COST", "0.02")  # 6% slower: within autotuning's own spread
    code, out, _ = run(capsys, base, "--rounds", "4", "--format", "json")
    verdict = json.loads(out)
    assert code == 0 and verdict["outcome"] == "green" and PICK_MARGIN > 0.06
    assert sum(line.startswith("autotuning: ") for line in verdict["measured"]) == 5  # said, both timed on both sides
    monkeypatch.setenv("FAKE_RANK_COST", "0.05")  # 15% slower: beyond it
    code, out, _ = run(capsys, base, "--rounds", "4", "--format", "json")
    (suite,) = json.loads(out)["suites"]
    assert code == 1 and {a["provider"] for a in suite["alerts"]} == {"fused-autotuned"}
    assert all("the candidate's autotuning picked id=3, slower than the base's id=0" in a["reason"]
               for a in suite["alerts"])  # fmt: skip
    assert len(suite["alerts"]) == 5  # one a workload: the cells themselves, at one pick, did not move


def test_cells_near_their_margin_get_more_rounds_and_a_cell_failing_the_check_on_the_candidate_side_is_red(
    checkout, fake_gpu, capsys, monkeypatch
):
    _, base = checkout
    margin = margins_for(f"{MACHINE}-paired-x", "Quick", ASV_VERSIONS["Quick"]).threshold("time", "small")
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}={margin * 100:.2f}%")  # right at its margin
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    monkeypatch.setenv("FAKE_CHECK_FAIL", "GELU_AUX_BIAS/fp16/unfused")
    code, out, _ = run(capsys, base, "--rounds", "4", "--format", "json")
    verdict = json.loads(out)
    assert "1 that moved given 26 more in a fresh preparation" in verdict["measured"][0]
    failed = [a for a in verdict["suites"][0]["alerts"] if a["verdict"] == "failed"]
    assert code == 1 and [(a["epilog"], a["provider"]) for a in failed] == [("GELU_AUX_BIAS", "unfused")]
    assert "failed the check against float64 on the candidate side" in failed[0]["reason"]


def test_a_session_narrowed_by_cells_is_judged_and_given_rounds_by_the_margins_its_cells_earned(
    checkout, fake_gpu, capsys, monkeypatch
):
    """`ab --cells R`: the margins sessions of R earned (a quarter of the whole group's, here) take the cell near
    them to more rounds and judge it; the same change in a session of the whole group stays within its margins."""
    _, base = checkout
    chosen = "^RELU_BIAS/.*/fused$"
    whole = margins_for(f"{MACHINE}-paired-x", "Quick", ASV_VERSIONS["Quick"])
    quarter = {key: value / 4 for key, value in whole.thresholds.items()}
    narrowed = dataclasses.replace(whole, name="narrowed", cells=chosen, thresholds=quarter)
    monkeypatch.setitem(presets(), narrowed.name, narrowed)
    change = 1.4 * narrowed.threshold("time", "large")  # within 1.5x the narrowed margin, far below the whole's
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}={change * 100:.2f}%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    code, out, _ = run(capsys, base, "--rounds", "4", "--cells", chosen, "--format", "json")
    verdict = json.loads(out)
    assert code == 1 and "1 that moved given 26 more in a fresh preparation" in verdict["measured"][0], out
    (alert,) = [a for a in verdict["suites"][0]["alerts"] if a["metric"] == "time" and a["epilog"]]
    assert alert["threshold"] == narrowed.threshold("time", "large")
    session = re.search(r"kept as machine (\S+)", verdict["measured"][0]).group(1)
    code, out, _ = run_cli(capsys, "alert", "--machine", session, "--suite", "quick", "--dump-thresholds")
    assert code == 0 and json.loads(out)["quick"]["confirmation_margins"] == {"Quick": "narrowed"}
    code, out, _ = run(capsys, base, "--rounds", "4", "--format", "json")
    assert code == 0 and "moved" not in json.loads(out)["measured"][0]


def test_picks_are_compared_over_the_rounds_both_took_on_each_side():
    """The candidate's pick is the cell's own slot and may take extra rounds near its margin; the base's pick does
    not: each side's samples are cut to the rounds both picks took there, so round i still meets round i."""
    from fusedbench.catalog.model import CellKey, Pick
    from fusedbench.regressions.picks import pick_comparison

    key = CellKey("BIAS", "fp16", 65536, 16384, 8192, "fused-autotuned")
    base_pick = {"baseline": [0.010] * 10, "candidate": [0.010] * 10}
    cand_pick = {side: [0.012] * 10 + [0.090] * 20 for side in ("baseline", "candidate")}
    algorithms = {"baseline": "id=0", "candidate": "id=3"}
    pick = Pick(key, "Quick", algorithms, {"baseline": base_pick, "candidate": cand_pick})
    compared = pick_comparison(MACHINE, {"baseline": "a" * 40, "candidate": "b" * 40}, "v1", [pick], CONFIRMATION)
    time = compared.cells[compared.cells["metric"] == "time"]
    assert time["ratio"].tolist() == pytest.approx([1.2])


def test_a_damaged_benchmarks_json_is_exit_2_never_a_verdict(checkout, fake_gpu, capsys, monkeypatch):
    """asv's description of the suite cannot be read nor made again (this checkout's benchmarks/ are a stand-in):
    one error line and exit 2 before anything is measured, never a verdict, for 1 says "regression" and nothing
    else."""
    root, base = checkout
    (root / "results" / "benchmarks.json").write_text("{not json")
    monkeypatch.setenv("HOME", str(root.parent))  # asv's machine file: keep the user's untouched
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{TARGET}=5%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "candidate")
    code, out, err = run(capsys, base, "--rounds", "4")
    assert code == 2 and out == "" and err.startswith("error: asv could not describe the benchmarks of"), err
    assert err.count("\n") == 1 and not list((root / "results").glob("*-paired-*"))


def test_a_cell_that_moved_either_way_or_nears_its_margin_gets_rounds_in_a_fresh_preparation_and_one_unmoved_none():
    """1% either way, or from margin / 1.5 slower on: a preparation can be a few per cent off for its life, the same
    code on both sides, so a cell clearly slower, or faster, is timed again as well as one near its margin."""
    from fusedbench.catalog.model import Request
    from fusedbench.paired.ab import NearMargin
    from fusedbench.regressions.thresholds import cell_class

    machine = f"{MACHINE}-paired-x"
    margin = margins_for(machine, "Quick", ASV_VERSIONS["Quick"]).threshold("time", cell_class(0.02))
    request = Request("Quick", "RELU_BIAS", "fp16", 65536, 16384, 8192, ("unfused", "fused", "gemm", "textbook"))
    changes = {"unfused": -0.012, "fused": 0.3, "gemm": min(0.01, margin / 1.5) * 0.9, "textbook": margin / 1.4}
    samples = {"baseline": {p: [0.02] * 10 for p in changes},
               "candidate": {p: [0.02 * (1 + c)] * 10 for p, c in changes.items()}}  # fmt: skip
    assert NearMargin(machine, 10)(request, samples) == {"unfused": 20, "fused": 20, "textbook": 20}
    assert NearMargin(machine, 30)(request, samples) == {"unfused": 0, "fused": 0, "textbook": 0}
