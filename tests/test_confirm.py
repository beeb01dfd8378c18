"""Confirmation on the CPU: what the first look flags, the lock-step of two worker processes (a stand-in worker that
speaks the protocol), the refusals, and the verdict after re-measured cells are judged."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from conftest import finding, git, make_checkout
from test_alert_cli import MACHINE, run_cli, tuned_results

from fusedbench.catalog.model import Cell, Request
from fusedbench.cli.gating import judged
from fusedbench.measure import confirm as measure
from fusedbench.measure.confirm import ConfirmError, Side, export_source, measure_again
from fusedbench.regressions.confirm import cells_of, confirmation_lines, confirmed, flag, judge_confirmation, to_record
from fusedbench.regressions.gate import Outcome
from fusedbench.regressions.thresholds import CONFIRMATION

ROOT = Path(__file__).parent.parent
FAKE = ROOT / "tests" / "fixtures" / "fake_confirm_worker.py"
SEED = (65536, 16384, 8192)
TARGET = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused"


@pytest.fixture
def fake_worker(monkeypatch, tmp_path):
    monkeypatch.setattr(measure.Worker, "entry", (str(FAKE),))
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    sides = []
    for name in ("baseline", "candidate"):
        (tmp_path / name).mkdir()
        sides.append(Side(name, str(tmp_path / name)))
    return sides, log


def test_the_sides_time_each_cell_in_lock_step_the_first_alternating_and_an_injection_stretches_its_cell(
    fake_worker,
):
    (base, cand), log = fake_worker
    cand = Side("candidate", cand.source, {"FUSEDBENCH_INJECT": f"{TARGET}=5%"})
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("unfused", "fused", "gemm"))
    measured = measure_again([request], [base, cand], rounds=4)
    assert measured.calls == 24 and measured.not_measured == []
    calls = [line.split() for line in log.read_text().splitlines()]
    pairs = [calls[i : i + 2] for i in range(0, len(calls), 2)]
    assert all(a[1] == b[1] and a[0] != b[0] for a, b in pairs)  # each cell's call on one side, then the other's
    firsts = [pairs[r * 3][0][0] for r in range(4)]
    assert firsts == ["baseline", "candidate", "baseline", "candidate"]  # who goes first alternates by round
    by_side = {side: {c.key.provider: c.samples for c in cells} for side, cells in measured.cells.items()}
    assert by_side["baseline"] == {p: (0.001,) * 4 for p in ("unfused", "fused", "gemm")}
    assert by_side["candidate"]["fused"] == pytest.approx((0.00105,) * 4)
    assert by_side["candidate"]["gemm"] == (0.001,) * 4


def test_each_side_autotunes_and_where_the_picks_differ_both_are_timed_on_both_sides(fake_worker, monkeypatch):
    (base, cand), _ = fake_worker
    monkeypatch.setenv("FAKE_RANK_COST", "0.02")  # each rank 2% slower: the candidate's pick, rank 3, costs 6%
    cand = Side("candidate", cand.source, {"FAKE_RANK": "3", "FAKE_INJECT_SIDE": "candidate"})
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("fused", "fused-autotuned"))
    measured = measure_again([request], [base, cand], rounds=2)
    label = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused-autotuned"
    assert measured.not_measured == [] and measured.calls == 2 * 2 * 3  # fused and both picks, on both sides
    held = {side: {c.key.provider: c.samples for c in cells} for side, cells in measured.cells.items()}
    assert held["baseline"]["fused-autotuned"] == held["candidate"]["fused-autotuned"] == pytest.approx((0.00106,) * 2)
    (pick,) = measured.picks
    assert pick.key.label == label and pick.algorithms == {"baseline": "id=0", "candidate": "id=3"}
    assert pick.samples["baseline"] == {"baseline": [0.001] * 2, "candidate": [0.001] * 2}
    assert pick.samples["candidate"]["baseline"] == pytest.approx([0.00106] * 2)
    own = {c.key.provider: c.samples for c in measured.own_cells("baseline")}
    assert own["fused-autotuned"] == (0.001,) * 2 and own["fused"] == (0.001,) * 2  # what the base's code runs
    assert {c.provenance["algorithm"] for c in measured.cells["baseline"]} == {"id=0", "id=3"}


def test_a_pick_one_side_cannot_plan_is_not_compared_and_the_cell_is_measured_at_each_sides_own(fake_worker):
    (base, cand), _ = fake_worker
    cand = Side("candidate", cand.source, {"FAKE_RANK": "3", "FAKE_INJECT_SIDE": "candidate"})
    base = Side("baseline", base.source, {"FAKE_ALGORITHM": "id=9"})  # its plan lacks the candidate's algorithm
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("fused", "fused-autotuned"))
    measured = measure_again([request], [base, cand], rounds=2)
    assert measured.not_measured == [
        "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused-autotuned: the candidate's pick (rank 3: id=3) cannot be "
        "timed on the baseline side ({'rank': 3, 'algorithm': 'id=9'}): the picks are not compared"
    ]
    assert measured.picks == [] and [c.key.provider for c in measured.cells["baseline"]] == ["fused", "fused-autotuned"]
    alone = measure_again([request], [cand], rounds=2)  # one side: nothing to compare picks with
    assert alone.picks == [] and len(alone.cells["candidate"]) == 2


def test_a_cell_failing_the_check_on_one_side_is_failed_there_and_timed_on_the_other_alone(fake_worker):
    (base, cand), _ = fake_worker
    cand = Side("candidate", cand.source, {"FAKE_CHECK_FAIL": "RELU_BIAS/fp16/fused"})
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("unfused", "fused"))
    check = {"epilogs": ["RELU_BIAS"], "dtypes": ["fp16"], "providers": ["unfused", "fused"]}
    measured = measure_again([request], [base, cand], rounds=2, asked=measure.Asked(check=check, ceilings=["fp16"]))
    assert measured.checked["candidate"]["checked"] == 2 and measured.checked["baseline"]["failures"] == []
    cells = {side: {c.key.provider: c for c in found} for side, found in measured.cells.items()}
    assert cells["candidate"]["fused"].status.value == "failed"
    assert cells["candidate"]["fused"].reason.startswith("failed the check against float64 on the candidate side")
    assert cells["baseline"]["fused"].samples == (0.001,) * 2 and measured.calls == 2 * 2 + 2
    assert dict(cells["baseline"]["fused"].telemetry) == {"power_w": [700] * 2}  # the probe's series: one a call
    assert set(measured.ceilings) == {"baseline", "candidate"} and measured.ceilings["candidate"]["copy"]


def test_more_rounds_go_to_the_cells_asked_for_in_the_same_lock_step(fake_worker):
    (base, cand), log = fake_worker
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("unfused", "fused", "gemm"))
    seen = []

    def more(asked, samples):
        seen.append({side: {p: len(s) for p, s in found.items()} for side, found in samples.items()})
        return {"fused": 3}

    measured = measure_again([request], [base, cand], rounds=2, asked=measure.Asked(more=more))
    assert seen == [{side: {"unfused": 2, "fused": 2, "gemm": 2} for side in ("baseline", "candidate")}]
    lengths = {c.key.provider: len(c.samples) for c in measured.cells["candidate"]}
    assert lengths == {"unfused": 2, "fused": 5, "gemm": 2} and measured.extra_rounds == {("Quick", TARGET): 3}
    calls = [line.split() for line in log.read_text().splitlines()][-6:]
    assert [c[0] for c in calls] == ["baseline", "candidate", "candidate", "baseline", "baseline", "candidate"]


def test_the_extra_rounds_are_timed_in_a_fresh_preparation_on_both_sides_their_picks_held_to_the_first(
    fake_worker, tmp_path, monkeypatch
):
    """A preparation that timed the base's fused cell 9% slow for its life is outvoted by the second preparation's
    rounds; the second autotuning's other choice is pinned back to the first's, so the cell is one algorithm."""
    (base, cand), _ = fake_worker
    prepared = tmp_path / "prepared.log"
    monkeypatch.setenv("FAKE_PREPARE_LOG", str(prepared))
    monkeypatch.setenv("FAKE_RANK_COST", "0.02")
    monkeypatch.setenv("FAKE_RANK_AGAIN", "2")  # autotuning, asked again, picks rank 2 (4% slower) on both sides
    base = Side("baseline", base.source, {"FAKE_OFFSET_ONCE": f"{TARGET}=9%", "FAKE_INJECT_SIDE": "baseline"})
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("unfused", "fused", "fused-autotuned"))
    measured = measure_again([request], [base, cand], rounds=2,
                             asked=measure.Asked(more=lambda *_: {"fused": 4, "fused-autotuned": 4}))  # fmt: skip
    assert prepared.read_text().splitlines() == [
        "baseline prepare unfused,fused,fused-autotuned", "candidate prepare unfused,fused,fused-autotuned",
        "baseline prepare fused,fused-autotuned", "baseline pin fused-autotuned 0",
        "candidate prepare fused,fused-autotuned", "candidate pin fused-autotuned 0",
    ]  # fmt: skip
    cells = {c.key.provider: c for c in measured.cells["baseline"]}
    assert cells["fused"].samples == pytest.approx((0.00109,) * 2 + (0.001,) * 4)  # the first preparation's 2 slow
    assert cells["fused-autotuned"].samples == pytest.approx((0.001,) * 6)  # rank 0 throughout, never rank 2's
    assert cells["unfused"].samples == (0.001,) * 2 and measured.not_measured == []
    assert cells["fused"].telemetry == {"power_w": [700] * 6} and cells["unfused"].telemetry == {"power_w": [700] * 2}
    assert measured.extra_rounds == {("Quick", TARGET): 4, ("Quick", TARGET + "-autotuned"): 4}


def test_a_workload_that_cannot_be_prepared_again_keeps_its_first_rounds_and_says_so(fake_worker, monkeypatch):
    (base, cand), _ = fake_worker
    monkeypatch.setenv("FAKE_PREPARE_AGAIN_ERROR", "1")
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("unfused", "fused"))
    measured = measure_again([request], [base, cand], rounds=2, asked=measure.Asked(more=lambda *_: {"fused": 4}))
    assert measured.not_measured == [
        "RELU_BIAS/fp16/(65536,16384)x(16384,8192) (Quick): not prepared again on the baseline side (OutOfMemoryError: "
        "out of memory allocating 1,073,741,824 bytes): its cells that moved keep their first rounds"
    ]
    assert {len(c.samples) for c in measured.cells["candidate"]} == {2} and measured.extra_rounds == {}


def test_a_call_that_raises_leaves_its_cell_unmeasured_on_both_sides_and_the_others_measured(fake_worker):
    (base, cand), log = fake_worker
    cand = Side("candidate", cand.source, {"FAKE_FAIL": TARGET})
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("unfused", "fused", "gemm"))
    measured = measure_again([request], [base, cand], rounds=4)
    assert measured.not_measured == [
        f"{TARGET} on the candidate side: failed in round 2: RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED"
    ]
    for cells in measured.cells.values():
        assert {c.key.provider: len(c.samples) for c in cells} == {"unfused": 4, "gemm": 4}
    asked = [line.split()[1] for line in log.read_text().splitlines()]
    assert asked.count(TARGET) == 3 and measured.calls == 16 + 3  # not asked again after its failure


@pytest.mark.parametrize(
    ("hello", "says"),
    [
        ({"protocol": 1}, "the baseline side speaks protocol 1, not 3"),
        ({"fusedbench": "/elsewhere"}, "the baseline side imported fusedbench from /elsewhere, not from its source"),
        ({"versions": {"cupy": "1"}}, "the sides differ in versions"),
    ],
)
def test_a_side_that_would_time_other_code_or_another_stack_is_refused(fake_worker, monkeypatch, hello, says):
    (base, cand), _ = fake_worker
    base = Side("baseline", base.source, {"FAKE_HELLO": json.dumps(hello)})
    with pytest.raises(ConfirmError, match="^" + says.replace("(", r"\(")):
        measure_again([Request("Quick", "BIAS", "fp16", *SEED, ("fused",))], [base, cand], rounds=2)


def test_a_group_whose_benchmark_version_differs_is_left_out_and_a_worker_that_dies_is_named(fake_worker, monkeypatch):
    (base, cand), _ = fake_worker
    base = Side("baseline", base.source, {"FAKE_HELLO": json.dumps({"benchmark_versions": {"Quick": "v0"}})})
    measured = measure_again([Request("Quick", "BIAS", "fp16", *SEED, ("fused",))], [base, cand], rounds=2)
    assert measured.not_measured == ["Quick: its benchmark version differs between the sides"] and not measured.calls
    monkeypatch.setattr(measure.Worker, "entry", ("-c", "import sys; sys.exit('no GPU here')"))
    with pytest.raises(ConfirmError, match=r"^the baseline side's worker exited \(1\): no GPU here"):
        measure_again([], [base], rounds=2)


def test_the_baseline_source_is_its_commits_package_and_one_without_the_worker_predates_confirmation(tmp_path):
    old = make_checkout(tmp_path / "repo", files={"fusedbench/__init__.py": ""})
    commit = git(old, "rev-parse", "HEAD").strip()
    with pytest.raises(ConfirmError, match=f"^the baseline {commit[:8]} predates the confirmation entry point"):
        export_source(str(old), commit, str(tmp_path / "a"))
    (old / measure.WORKER_PATH).parent.mkdir(parents=True)
    (old / measure.WORKER_PATH).write_text("PROTOCOL = 1\n")
    git(old, "add", ".")
    git(old, "commit", "-qm", "the first worker")
    first = git(old, "rev-parse", "HEAD").strip()
    with pytest.raises(ConfirmError, match=f"^the baseline {first[:8]}'s confirmation entry point speaks protocol 1, "):
        export_source(str(old), first, str(tmp_path / "old"))
    (old / measure.WORKER_PATH).write_text(f"PROTOCOL = {measure.PROTOCOL}\n")
    git(old, "commit", "-qam", "the worker")
    later = git(old, "rev-parse", "HEAD").strip()
    (old / measure.WORKER_PATH).write_text("PROTOCOL = 99\n")  # the checkout moves on: the baseline is its commit's
    source = export_source(str(old), later, str(tmp_path / "b"))
    assert (Path(source) / measure.WORKER_PATH).read_text() == f"PROTOCOL = {measure.PROTOCOL}\n"
    assert not (Path(source) / "benchmarks").exists()  # the package only
    with pytest.raises(ConfirmError, match=r"^git archive of the baseline"):
        export_source(str(old), "0" * 40, str(tmp_path / "c"))


def _remeasured(flagged, slower: dict[str, float], rounds: int = 20):
    """Cells for each side as a confirmation would measure them: every call 1 ms, the candidate's `slower` cells
    (label -> fraction) stretched, a little round-to-round noise shared by both sides."""
    sides = {"baseline": [], "candidate": []}
    for request in flagged.requests():
        for provider in request.providers:
            key = request.key(provider)
            noise = [1 + 0.002 * ((i * 7) % 5 - 2) for i in range(rounds)]
            sides["baseline"].append(Cell.measured(key, [0.001 * x for x in noise]))
            stretch = 1 + slower.get(key.label, 0.0)
            sides["candidate"].append(Cell.measured(key, [0.001 * x * stretch for x in noise]))
    return sides


@pytest.fixture
def tuned_verdict(tmp_path):
    """The first look at a run with fused's 8th algorithm forced: GELU_AUX_BIAS's fused cell 18% slower."""
    tuned, results = tuned_results(tmp_path, "algorithm-7")
    return judged(
        results_dirs=[str(results)],
        machine=None,
        suite=None,
        baseline=f"{MACHINE}@7dd23c5",
        candidate=f"{tuned}@",
        preset=None,
        strict=False,
        gate=True,
    )


def test_the_first_look_flags_below_its_thresholds_and_whole_groups_for_a_gate(tuned_verdict):
    assert tuned_verdict.outcome is Outcome.RED
    (flagged,) = flag(tuned_verdict)
    gelu = ("GELU_AUX_BIAS", "fp16", *SEED)
    assert gelu in flagged.workloads and flagged.group == "Quick"
    assert any(why.startswith("GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused time x1.1") for why in flagged.why)
    (request,) = [r for r in flagged.requests() if (r.epilog, r.dtype, r.m, r.k, r.n) == gelu]
    assert request.providers == ("textbook", "unfused", "fused", "fused-autotuned", "gemm")  # torch refused it
    assert flagged.whole_group == any(why.startswith("group Quick") for why in flagged.why)


def test_a_slowdown_confirmed_side_by_side_stays_red_and_one_that_vanishes_turns_green(tuned_verdict):
    (flagged,) = flag(tuned_verdict)
    gelu_fused = "GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
    for slower, outcome in (({gelu_fused: 0.05}, Outcome.RED), ({}, Outcome.GREEN)):
        sides = _remeasured(flagged, slower)
        confirmation = judge_confirmation(
            flagged, "side by side", sides["baseline"], sides["candidate"], rounds=20, seconds=3.0, calls=99
        )
        after = confirmed(tuned_verdict, [confirmation])
        assert after.outcome is outcome
        alerts = after.suites[0].alerts
        if outcome is Outcome.RED:  # only the re-measured 5%, as the confirmation found it, in each metric it moves
            cells = alerts[alerts["epilog"].notna()]
            assert set(cells["provider"]) == {"fused"} and set(cells["epilog"]) == {"GELU_AUX_BIAS"}
            assert set(cells["metric"]) == {"time", "epilog-cost", "fusion-speedup"}
            time = cells[cells["metric"] == "time"].iloc[0]
            assert time["ratio"] == pytest.approx(1.05) and time["reason"] == "confirmed side by side"
        lines = confirmation_lines([confirmation])
        assert lines[0].startswith(f"confirmation: 1 group(s), {len(sides['candidate'])} cells measured again, 3 s")
        assert any(line.strip().startswith(f"{gelu_fused} time: x1.0") for line in lines)


def test_a_confirmation_record_gives_back_its_cells_and_the_same_verdict(tuned_verdict):
    (flagged,) = flag(tuned_verdict)
    sides = _remeasured(flagged, {"GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused": 0.05})
    confirmation = judge_confirmation(
        flagged, "side by side", sides["baseline"], sides["candidate"], rounds=20, seconds=3.0, calls=99
    )
    after = confirmed(tuned_verdict, [confirmation])
    record = json.loads(json.dumps(to_record(tuned_verdict, after, [confirmation])))
    assert (record["first_look"], record["confirmed"]) == ("red", "red")
    (group,) = record["groups"]
    assert group["rounds"] == 20 and group["why"] == list(flagged.why)
    again = judge_confirmation(
        flagged, group["how"], cells_of(group, "baseline"), cells_of(group, "candidate"), rounds=20, seconds=0, calls=0
    )
    assert confirmed(tuned_verdict, [again]).alerts == after.alerts
    assert CONFIRMATION.threshold("time", "large") == 0.02


def test_an_a_a_pair_flags_nothing_and_confirmation_then_measures_nothing(capsys, tmp_path):
    from test_alert_cli import copy_runs

    results = copy_runs(tmp_path / "results", ("e0248e11", "fa3e093b"))  # under the burst protocol, in one session
    verdict = judged(
        results_dirs=[str(results)], machine=None, suite=None, baseline=None, candidate=None, preset=None,
        strict=False, gate=True,
    )  # fmt: skip
    assert verdict.outcome is Outcome.GREEN and flag(verdict) == []
    assert confirmation_lines([]) == ["confirmation: nothing flagged, nothing measured again (0 GPU seconds)"]


def test_confirm_without_a_gpu_refuses_in_one_line(capsys, tmp_path):
    code, out, err = run_cli(capsys, "alert", "results", "--confirm")
    assert code == 2 and out == ""
    assert err.startswith("error: --confirm measures flagged cells again on this machine's GPU, and there is none")
    assert err.count("\n") == 1


# Issue 30's runs on the H200: (injected machine's commit, machine session, card) and the A/A pairs it confirmed.
SESSIONS = {"b12b205": (1, "GPU-dad8f06a"), "df50c75": (1, "GPU-dad8f06a"), "2904471": (2, "GPU-c46da574"),
            "2c530d9": (2, "GPU-c46da574"), "3e4ba4b": (5, "GPU-240fee33"),
            **dict.fromkeys(["744d22f", "306bacc", "fa5ab81", "d038e97", "6222822", "f3623a8", "6b905a0", "b4b5c71"],
                            (3, "GPU-35ad6f73")),
            **dict.fromkeys(["829a4b6", "853c540"], (4, "GPU-67e6a1fd")),
            **dict.fromkeys(["3549059", "6b083c3", "dad4464", "da473d2", "aa83ad8", "d9cb97e", "f9a2505"],
                            (6, "GPU-1904c5c6")),
            **dict.fromkeys(["b4c4ddb", "1421861", "14aa305", "9329934", "7c6e02e", "3680f83", "87e6dae", "797d545",
                             "8b825b9", "5fa3018", "e0d9e27", "8a7d9c8"], (7, "GPU-19c6ba1e")),
            "4971522": (8, "GPU-03c8d1a6"),
            **dict.fromkeys(["d0eecb8", "a19b8fc", "510bed9"], (13, "GPU-ec9199c8")),
            "59c132d": (15, "GPU-657915a6")}  # fmt: skip
H100_SESSIONS = {8, 13, 15}  # the rest ran on H200s
AA_PAIRS = [("b12b205", "3e4ba4b"), ("df50c75", "b12b205"), ("2904471", "df50c75"), ("2c530d9", "2904471"),
            ("744d22f", "2c530d9"), ("6222822", "744d22f"),
            # sessions 6 and 7: the plain runs the injected ones were judged against, no A/A alert run on the GPU
            ("dad4464", "6222822"), ("aa83ad8", "dad4464"), ("b4c4ddb", "aa83ad8"), ("9329934", "b4c4ddb"),
            ("8b825b9", "9329934"),
            # session 13, on an H100: the plain runs the injected ones were judged against, A/A alerts on the GPU
            ("a19b8fc", "d0eecb8"), ("510bed9", "a19b8fc")]  # fmt: skip


def _machine(commit: str) -> str:
    return "h100-80gb-hbm3" if SESSIONS[commit][0] in H100_SESSIONS else "h200-141gb"


def _time_rows(verdict_or_judged, labels):
    from fusedbench.regressions.gate import where

    cells = verdict_or_judged.comparison.cells
    cells = cells[(cells["metric"] == "time") & cells["ratio"].notna()]
    mine = cells[cells.apply(where, axis=1).isin(labels)]
    return mine, cells[~cells.index.isin(mine.index)]


def _span(rows) -> str:
    return f"x{rows['ratio'].min():.3f}-{rows['ratio'].max():.3f}"


def injected_records(results, *, whole_groups: bool, side_by_side: bool = True):
    """Each injected run's confirmation record, replayed, with its targets: of the runs that slowed cells, or of
    those that slowed whole groups; confirmed side by side, or (`side_by_side` False) by the fallback."""
    from fusedbench.catalog.deliberate import Deliberate
    from fusedbench.catalog.suites import GROUPS
    from fusedbench.regressions.confirm import read_confirmations, replay

    for record in read_confirmations(str(ROOT / "results")):
        machine, commit = record["groups"][0]["candidate"].values()
        if "-inject-" not in machine:
            continue
        (environment,) = [r.environment for r in results.records if (r.machine, r.commit) == (machine, commit)]
        targets = {t.what for t in Deliberate.from_json(environment).injection.targets}
        fallback = record["groups"][0]["how"].startswith("candidate again")
        if all(t in GROUPS for t in targets) == whole_groups and fallback != side_by_side:
            yield machine, commit, record, replay(results, record), targets


def detection_rows(results) -> list[str]:
    """The docs' detection table, a row per run with injected cells, from its confirmation record and the runs."""
    from fusedbench.regressions.gate import where

    rows = []
    for machine, commit, _, (first, after, (confirmation,)), targets in injected_records(results, whole_groups=False):
        (group,) = [g for g in first.suites[0].groups if g.group == confirmation.group]
        first_rows, _ = _time_rows(group.judged, targets)
        again, others = _time_rows(confirmation.judged, targets)
        alerts = after.suites[0].alerts
        alerted = set(alerts[alerts["epilog"].notna()].apply(where, axis=1))
        caught_first = first.suites[0].alerts
        caught_first = set(caught_first[caught_first["epilog"].notna()].apply(where, axis=1)) & targets
        session, card = SESSIONS[commit[:7]]
        cells, rounds = len(confirmation.candidate.cells), confirmation.rounds
        rows.append(
            f"| `{machine}` | {confirmation.group} | {commit[:7]} | {session}, {card} | {first.outcome.value}: "
            f"{len(caught_first)} of {len(targets)} "
            f"({_span(first_rows)}) | {len(alerted & targets)} of {len(targets)} ({_span(again)}; others "
            f"{_span(others)}) | {len(alerted - targets)} of {len(others)} | {cells} cells x {rounds} rounds a side, "
            f"{confirmation.seconds:.0f} s |"
        )
    return rows


def _group_gate(comparison) -> str:
    gates = comparison.groups
    (row,) = gates[(gates["provider"] == "*") & (gates["metric"] == "time")].itertuples()
    return f"x{row.ratio:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]"


def group_trial_rows(results, *, side_by_side: bool = True) -> list[str]:
    """The docs' whole-group table: a row per run with every cell of a group injected, oldest first (confirmed side
    by side, or by the fallback)."""
    from fusedbench.regressions.gate import where

    rows = []
    trials = injected_records(results, whole_groups=True, side_by_side=side_by_side)
    for _, commit, record, (first, after, (confirmation,)), _ in sorted(
        trials, key=lambda t: t[2]["path"].rsplit("-confirm-")[1]
    ):
        baseline = record["groups"][0]["baseline"]["commit"]
        session, card = SESSIONS[commit[:7]]
        alerts = after.suites[0].alerts
        cells = alerts[alerts["epilog"].notna()]
        gate = alerts[(alerts["epilog"].isna()) & (alerts["provider"] == "*") & (alerts["metric"] == "time")]
        judged = first.suites[0].groups[0].judged
        across = f"{SESSIONS[baseline[:7]][0]} -> " if SESSIONS[baseline[:7]][0] != session else ""
        rows.append(
            f"| {commit[:7]} against {baseline[:7]} | {across}{session}, {card} | {first.outcome.value}, group "
            f"{_group_gate(judged.comparison)} | {'caught' if len(gate) else 'missed'}: {after.outcome.value}, "
            f"group {_group_gate(confirmation.judged.comparison)} | {len(set(cells.apply(where, axis=1)))} of "
            f"{len(confirmation.candidate.cells)} | {confirmation.rounds} rounds{' a side' if side_by_side else ''}, "
            f"{confirmation.seconds:.0f} s |"
        )
    return rows


def aa_rows(results) -> list[str]:
    """The docs' A/A table: each of issue 30's plain runs against the one before it, confirmed where flagged."""
    from fusedbench.regressions.confirm import flag, read_confirmations, replay
    from fusedbench.regressions.gate import Choice, judge

    records = {r["groups"][0]["candidate"]["commit"][:7]: r for r in read_confirmations(str(ROOT / "results"))
               if "-inject-" not in r["groups"][0]["candidate"]["machine"]}  # fmt: skip
    rows = []
    for candidate, baseline in AA_PAIRS:
        sessions = {SESSIONS[c][0] for c in (candidate, baseline)}
        across = f"{SESSIONS[baseline][0]} -> {SESSIONS[candidate][0]} (two cards)" if len(sessions) > 1 else ""
        where_run = across or str(sessions.pop())
        if candidate in records:
            first, after, (confirmation,) = replay(results, records[candidate])
            _, again = _time_rows(confirmation.judged, set())
            flagged = "; ".join(confirmation.flagged.why[:1]) + (
                " (the whole group)" if confirmation.flagged.whole_group else ""
            )
            outcome = f"{after.outcome.value} (side by side {_span(again)})"
            cells = len(confirmation.candidate.cells)
            cost = f"{cells} cells x {confirmation.rounds} rounds a side, {confirmation.seconds:.0f} s"
        else:
            full = {
                c: next(x for x in results.cells["commit"].unique() if x.startswith(c)) for c in (candidate, baseline)
            }
            first = judge(results, Choice(_machine(candidate), ("quick",), full[candidate], full[baseline]))
            flags = flag(first)
            flagged, outcome, cost = "nothing", first.outcome.value, "nothing"
            if flags:  # no confirmation was run on the GPU for it: the first look's verdict stands
                (found,) = flags
                flagged = found.why[0] + (" (the whole group)" if found.whole_group else "")
                outcome, cost = f"{first.outcome.value} (not measured again)", "not run"
        preset = first.suites[0].preset.name
        look = f"{first.outcome.value} ({first.alerts} alerts, `{preset}`)"
        rows.append(f"| {candidate} against {baseline} | {where_run} | {look} | {flagged} | {outcome} | {cost} |")
    return rows


def test_the_detection_and_false_alarm_tables_in_the_docs_are_the_committed_runs(committed_results):
    results = committed_results
    docs = finding("confirmation", folded=False)
    rows = detection_rows(results)
    assert len(rows) == 11 and all(": 0 of 5 (" in row and " 5 of 5 (" in row for row in rows)
    others_alerted = [row.split(" | ")[6] for row in rows]  # the docs name the one: the H100's RELU textbook
    assert sum(int(cell.split(" of ")[0]) for cell in others_alerted) == 1
    assert "of the 287 cells around them one alerted" in " ".join(docs.split())
    assert sum(int(cell.split(" of ")[1]) for cell in others_alerted) == 287
    own = [row for row in rows if "GPU-ec9199c8" in row or "GPU-657915a6" in row]  # by the H100's own margins
    assert len(own) == 4 and all(row.split(" | ")[6] == "0 of 23" for row in own)
    deciders = {r["groups"][0]["decided_by"] for _, c, r, _, _ in injected_records(results, whole_groups=False)
                if SESSIONS[c[:7]][0] == 13}  # fmt: skip
    assert deciders == {"h100-80gb-hbm3/confirmation@69b1f94"}
    trials = group_trial_rows(results)
    assert len(trials) == 20 and all(" | caught: red, group x1.02" in row for row in trials)
    (fallback,) = group_trial_rows(results, side_by_side=False)
    assert " | missed: green, group x1.02" in fallback  # the record's margins are the preset's: 2% is under them
    pairs = aa_rows(results)
    for row in rows + trials + [fallback] + pairs:
        assert row in docs, row
    from fusedbench.regressions.thresholds import presets

    gate = presets()["h200-141gb/quick@7aa40b3"].threshold("time", "group")
    flat = " ".join(docs.split())
    assert f"stays green: the H200's group threshold is {gate:.1%}" in flat
    assert f"under the H200's {gate:.1%} group threshold" in finding("confirmation")
    earlier = sum(len(commits) - 1 for commits in EARLIER_AA.values())
    assert f"With this issue's thirteen: {len(pairs) + earlier} A/A pairs in eleven machine sessions" in docs
    from collections import Counter

    injected = Counter(
        target["target"].rsplit("/", 1)[1]
        for record in results.records
        if record.machine.startswith("h200-141gb-inject-") and record.group == "Quick"  # sessions 1 and 2's
        for target in record.environment["injection"]
        if "/" in target["target"]  # a cell's, not a whole group's
    )
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    assert injected["fused"] == injected["unfused"]
    counts = (f"fused and unfused {words[injected['fused']]} times each",
              *(f"{p} {words[injected[p]]}" for p in ("gemm", "textbook", "fused-autotuned", "torch")))  # fmt: skip
    assert f"over the four runs {', '.join(counts)})" in " ".join(docs.split())


EARLIER_AA = {  # the burst-protocol A/A quick runs before confirmation, in run order
    "h100-80gb-hbm3": ["17e9ce1", "b42dd54", "2ce804d", "b4ffa58", "586478c", "09bfe98", "ec5ed52", "a4236bd",
                       "e0248e1", "4e54cb3", "fa3e093", "9a62ad6", "21bd30a", "f3f4a52", "80ea650"],
    "h200-141gb": ["7aa40b3", "3d8884d", "747a128", "fdfa1f8", "e537c30", "3e4ba4b"],
}  # fmt: skip


def earlier_aa_text(results) -> str:
    """The docs' sentence on the A/A pairs made before confirmation: each run against the one before it."""
    from fusedbench.regressions.confirm import flag
    from fusedbench.regressions.gate import Choice, judge

    parts = []
    for machine, commits in EARLIER_AA.items():
        full = {c: next(x for x in results.cells["commit"].unique() if x.startswith(c)) for c in commits}
        red, flagged = 0, []
        for baseline, candidate in itertools.pairwise(commits):
            verdict = judge(results, Choice(machine, ("quick",), full[candidate], full[baseline]))
            red += verdict.outcome.value == "red"
            flagged += [f"{candidate}: {'; '.join(f.why)}" for f in flag(verdict)]
        parts.append(
            f"`{machine}`, {len(commits) - 1} pairs ({commits[0]} ... {commits[-1]}): {red} red, "
            f"{len(flagged)} flagged ({'; '.join(flagged)})"
        )
    return "; ".join(parts)


def h200_preset_text() -> str:
    from fusedbench.regressions.thresholds import presets

    preset = presets()["h200-141gb/quick@7aa40b3"]
    caught = preset.rates["minimum_detectable"]
    phrases = [
        f"{what}'s time alerts past {preset.threshold('time', klass):.1%} (caught 95% of the time from "
        f"{caught['time/' + klass]:.1%})"
        for what, klass in (("a large cell", "large"), ("a whole group", "group"), ("one provider", "provider"))
    ]
    return "; ".join(phrases) + f"; A/A builds red {preset.rates['false_alarm_per_build']:.2%} of the time (in-sample)"


def margins_text(results) -> str:
    """The docs' sentence on the confirmation margins against every A/A confirmation: the same code side by side."""
    from fusedbench.regressions.compare import worse_ratio
    from fusedbench.regressions.confirm import read_confirmations, replay

    cells, gates, records = [], [], 0
    for record in read_confirmations(str(ROOT / "results")):
        if "-inject-" in record["groups"][0]["candidate"]["machine"]:
            continue
        records += 1
        for confirmation in replay(results, record)[2]:
            compared = confirmation.judged.comparison
            measured = compared.cells[compared.cells["ratio"].notna()]
            cells += list(worse_ratio(measured["ratio"].astype(float).to_numpy(), measured["metric"]))
            gates += list(worse_ratio(compared.groups["ratio"].astype(float).to_numpy(), compared.groups["metric"]))
    cell_margin, gate_margin = CONFIRMATION.threshold("time", "large"), CONFIRMATION.threshold("time", "group")
    assert max(cells) - 1 < cell_margin and max(gates) - 1 < gate_margin  # else the margins no longer stand clear
    return (
        f"over the {records} A/A confirmations ({len(cells)} cell rows, {len(gates)} gates measured side by side) the "
        f"worst cell came out {max(cells) - 1:+.1%} and the worst gate {max(gates) - 1:+.1%}, inside the "
        f"{cell_margin:.0%} and {gate_margin:.0%} margins"
    )


def test_the_earlier_a_a_pairs_and_the_h200_preset_in_the_docs_are_the_committed_ones(committed_results):
    docs = finding("confirmation")
    assert earlier_aa_text(committed_results) in docs
    assert h200_preset_text() in finding("threshold-presets")
    assert margins_text(committed_results) in docs


def test_a_slowdown_a_sessions_drift_hides_is_flagged_beside_its_groups_change(committed_results):
    """The injected run of session 1 against the plain run of session 2, whose card ran the whole group 3.5% slower:
    the five 5% slowdowns come out x1.007-1.038, four of them under the flag bar, and each stands out beside the
    group's change."""
    from fusedbench.regressions.confirm import flagged_cells
    from fusedbench.regressions.gate import Choice, judge, where

    runs = {
        c: next(x for x in committed_results.cells["commit"].unique() if x.startswith(c))
        for c in ("2904471", "b12b205")
    }
    choice = Choice("h200-141gb-inject-ec3abea0", ("quick",), runs["b12b205"], runs["2904471"], "h200-141gb")
    verdict = judge(committed_results, choice)
    comparison = verdict.suites[0].groups[0].judged.comparison
    injected = {f"{e}/fp16/(65536,16384)x(16384,8192)/{p}" for e, p in (("RELU_BIAS", "fused"), ("DEFAULT", "gemm"),
                ("BIAS", "unfused"), ("GELU_AUX_BIAS", "textbook"), ("DRELU_BGRAD", "fused-autotuned"))}  # fmt: skip
    mine, _ = _time_rows(verdict.suites[0].groups[0].judged, injected)
    assert len(mine) == 5 and sum(mine["ratio"] < 1.025) == 4 and mine["ratio"].max() < 1.04
    flagged = flagged_cells(comparison)
    flagged = flagged[flagged["metric"] == "time"]
    assert injected <= set(flagged.apply(where, axis=1))


def test_a_gate_is_decided_again_only_by_a_confirmation_of_its_whole_group_and_a_failure_never(tuned_verdict):
    from dataclasses import replace

    import pandas as pd

    (flagged,) = flag(tuned_verdict)
    gate = pd.Series({"epilog": None, "group": "Quick", "provider": "*", "metric": "time", "kind": "regression"})
    cell = pd.Series({"epilog": "GELU_AUX_BIAS", "dtype": "fp16", "m": 65536, "k": 16384, "n": 8192,
                      "provider": "fused", "group": "Quick", "metric": "time", "kind": "regression"})  # fmt: skip
    for whole in (True, False):
        mine = replace(flagged, whole_group=whole)
        sides = _remeasured(mine, {})
        confirmation = judge_confirmation(
            mine, "side by side", sides["baseline"], sides["candidate"], rounds=20, seconds=1.0, calls=1
        )
        assert confirmation.covers(gate) is whole  # a few re-measured workloads are not the group's gate
        assert confirmation.covers(cell) and not confirmation.covers(pd.Series(cell.to_dict() | {"kind": "failed"}))


def test_alert_confirm_prints_what_it_measured_again_writes_its_record_and_exits_by_the_confirmed_verdict(
    capsys, tmp_path, monkeypatch
):
    """The CLI around a confirmation (the GPU's part replaced by cells as it would measure them): the first look's
    red turns green where the slowdown is gone side by side, stays red where it is confirmed, and the record written
    beside the candidate's results judges the same again."""
    import fusedbench.cli.alert
    import fusedbench.paired.confirm as paired
    import fusedbench.regressions.confirm as confirming
    from fusedbench.results.loader import load_results

    tuned, results = tuned_results(tmp_path, "algorithm-7")
    monkeypatch.setattr(fusedbench.cli.alert, "require_gpu", lambda *_: None)
    gelu_fused = "GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
    for slower, code in (({}, 0), ({gelu_fused: 0.05}, 1)):

        def measured_again(verdict, results, repo, slower=slower):
            confirmations = []
            for flagged in flag(verdict):
                sides = _remeasured(flagged, slower)
                base, cand = sides["baseline"], sides["candidate"]
                confirmations.append(
                    judge_confirmation(flagged, "side by side", base, cand, rounds=20, seconds=2.0, calls=10)
                )
            return confirmed(verdict, confirmations), confirmations

        monkeypatch.setattr(paired, "confirm_verdict", measured_again)
        argv = ["alert", results, "--baseline", f"{MACHINE}@7dd23c5", "--candidate", f"{tuned}@", "--confirm"]
        exit_code, out, _ = run_cli(capsys, *argv, "--format", "json")
        assert exit_code == code
        document = json.loads(out)
        assert document["outcome"] == ("red" if code else "green")
        assert document["confirmation"][
            0
        ] == f"first look: red (2 alerts); after confirmation: {document['outcome']}" + (
            f" ({sum(len(s['alerts']) for s in document['suites'])} alerts)"
        )
        record_line = document["confirmation"][-1]
        assert record_line.startswith(f"confirmation record: {results}/{tuned}/") and record_line.endswith(".fbconfirm")
        (record,) = [r for r in confirming.read_confirmations(str(results)) if r["path"] == record_line.split(": ")[1]]
        first, after, _ = confirming.replay(load_results(str(results)), record)
        assert (first.outcome.value, after.outcome.value) == ("red", document["outcome"])
        for path in (results / tuned).glob("*.fbconfirm"):
            path.unlink()


def test_where_the_baseline_cannot_be_rebuilt_the_candidate_measured_again_is_judged_against_its_record(
    tuned_verdict,
):
    """No baseline side: the re-measured candidate against the baseline's recorded run, by the first look's preset
    (the sessions differ, so its thresholds stand, not the side-by-side margins)."""
    (flagged,) = flag(tuned_verdict)
    recorded = flagged.judgement.baseline.cells.set_index(["epilog", "provider"])["raw"]
    gelu_fused = "GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
    for slower, outcome in (({}, Outcome.GREEN), ({gelu_fused: 0.30}, Outcome.RED)):
        again = []
        for request in flagged.requests():
            for provider in request.providers:
                key = request.key(provider)
                samples = [s * (1 + slower.get(key.label, 0.0)) for s in recorded[(request.epilog, provider)]]
                again.append(Cell.measured(key, samples * 3))
        confirmation = judge_confirmation(
            flagged, "candidate again against its record", None, again, rounds=60, seconds=1.0, calls=1
        )
        assert set(confirmation.remeasured) == {"candidate"}
        assert confirmation.judged.comparison.preset is flagged.preset
        assert confirmed(tuned_verdict, [confirmation]).outcome is outcome


def test_a_cell_one_side_cannot_prepare_keeps_its_status_there_and_is_timed_on_the_other_alone(fake_worker):
    """As a plain run keeps a refused cell, and a workload a side cannot prepare at all fails on that side: a cell
    that no longer runs on the candidate's side is a failed cell there, never a cell left out of both."""
    (base, cand), _ = fake_worker
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("unfused", "fused"))
    refusing = Side("candidate", cand.source, {"FAKE_NOT_READY": "fused", "FAKE_INJECT_SIDE": "candidate"})
    measured = measure_again([request], [base, refusing], rounds=2)
    cells = {side: {c.key.provider: c for c in found} for side, found in measured.cells.items()}
    assert cells["candidate"]["fused"].status.value == "unsupported" and cells["candidate"]["fused"].reason
    assert cells["baseline"]["fused"].samples == (0.001,) * 2 and measured.calls == 2 * 2 + 2
    broken = Side("candidate", cand.source, {"FAKE_PREPARE_ERROR": "1", "FAKE_INJECT_SIDE": "candidate"})
    measured = measure_again([request], [base, broken], rounds=2)
    assert {c.status.value for c in measured.cells["candidate"]} == {"failed"}
    assert "OutOfMemoryError" in measured.cells["candidate"][0].reason
    assert [len(c.samples) for c in measured.cells["baseline"]] == [2, 2]  # timed on the side that could


def test_the_bases_own_pick_keeps_its_own_kernels_and_a_slot_failing_in_its_extra_rounds_is_not_counted(
    fake_worker, monkeypatch
):
    (base, cand), _ = fake_worker
    cand = Side("candidate", cand.source, {"FAKE_RANK": "3", "FAKE_INJECT_SIDE": "candidate"})
    request = Request("Quick", "RELU_BIAS", "fp16", *SEED, ("fused", "fused-autotuned"))
    measured = measure_again([request], [base, cand], rounds=2)
    own = {c.key.provider: c for c in measured.own_cells("baseline")}
    assert own["fused-autotuned"].provenance == {"algorithm": "id=0"}  # its own pick's, not the candidate's id=3
    monkeypatch.setenv("FAKE_FAIL", TARGET)  # fails from its second call on: in the extra rounds
    (base, cand), _ = fake_worker
    measured = measure_again([request], [base, cand], rounds=1, asked=measure.Asked(more=lambda r, s: {"fused": 3}))
    assert measured.extra_rounds == {} and any("failed in round 2" in line for line in measured.not_measured)


def test_a_side_that_never_answers_is_stopped_and_named(fake_worker, monkeypatch):
    (base, cand), _ = fake_worker
    monkeypatch.setattr(measure, "REPLY_TIMEOUT_S", 1)
    hung = Side("candidate", cand.source, {"FAKE_HANG": "1"})
    with pytest.raises(ConfirmError, match=r"^the (baseline|candidate) side's worker gave no reply in 1 s: stopped"):
        measure_again([Request("Quick", "BIAS", "fp16", *SEED, ("fused",))], [base, hung], rounds=2)
