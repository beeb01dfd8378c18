"""A GPU's confirmation margins: side-by-side A/A records measured (a stand-in worker on the CPU), read back, and
turned into margins that decide its confirmations, and replays that keep the margins a record was decided by."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import finding, make_checkout
from test_alert_cli import run_cli
from test_confirm import FAKE, _remeasured
from test_confirm import tuned_verdict as tuned_verdict  # a fixture

from fusedbench.catalog.formats import SIDE_BY_SIDE_FORMAT
from fusedbench.catalog.model import Cell
from fusedbench.catalog.suites import GROUPS
from fusedbench.measure import confirm as measure
from fusedbench.regressions.confirm import cells_of, confirmed, flag, judge_confirmation, replay, to_record
from fusedbench.regressions.margins import earn_margins, record_runs, requests_for
from fusedbench.regressions.thresholds import CONFIRMATION, Preset, margins_for, presets

MACHINE = "h100-80gb-hbm3"


def test_measuring_side_by_side_times_every_workload_with_the_checkouts_code_on_both_sides_and_keeps_the_record(
    capsys, tmp_path, monkeypatch
):
    import fusedbench.cli.calibrate
    import fusedbench.measure.machine

    repo = make_checkout(tmp_path / "repo")
    monkeypatch.chdir(repo)
    monkeypatch.setattr(measure.Worker, "entry", (str(FAKE),))
    monkeypatch.setattr(fusedbench.cli.calibrate, "require_gpu", lambda *_: None)
    monkeypatch.setattr(fusedbench.measure.machine, "gpu_machine_name", lambda: MACHINE)
    code, out, err = run_cli(capsys, "calibrate", "results", "--measure-side-by-side", "--suite", "quick")
    assert code == 0, err
    workloads = GROUPS["Quick"].workloads()
    cells = len(workloads) * len(GROUPS["Quick"].providers)
    assert f"1 group(s), {cells} cells x 20 rounds a side" in out and f"({cells * 40} timed calls)" in out
    (path,) = (repo / "results" / MACHINE).glob("*-side-by-side-*.fbaa")
    record = json.loads(path.read_text())
    assert record["shard"] == "0/1"
    assert record["protocol"] == 3 and record["picks"] == []  # both sides' autotuning picked rank 0
    assert record["format"] == SIDE_BY_SIDE_FORMAT and record["machine"] == MACHINE and record["rounds"] == 20
    assert record["groups"]["Quick"]["version"] == "v1"  # the worker's benchmark version of the group
    base, cand = record_runs(record)
    assert len(base.cells) == len(cand.cells) == cells and base.groups == cand.groups == {"Quick": "v1"}
    code, out, err = run_cli(capsys, "calibrate", "results", "--measure-side-by-side", "--shard", "1/2")
    assert code == 0, err
    halves = len(workloads) // 2 * len(GROUPS["Quick"].providers)  # workloads 1 and 3 of five
    assert f"1 group(s), {halves} cells x 20 rounds a side" in out
    for bad in ("2/2", "1", "a/b"):
        with pytest.raises(SystemExit) as exited:
            run_cli(capsys, "calibrate", "results", "--measure-side-by-side", "--shard", bad)
        assert exited.value.code == 2 and "expected K/N with 0 <= K < N" in capsys.readouterr().err
    (repo / "benchmarks" / "cells.py").write_text("# changed, not committed\n")
    code, out, err = run_cli(capsys, "calibrate", "results", "--measure-side-by-side")
    assert code == 2 and "benchmarks/cells.py" in err and len(err.strip().splitlines()) == 1


def _record(commit: str, noisy: float, seed: int, *, pinned: bool = False) -> dict:
    """A side-by-side A/A record of the Quick group: every cell 1% noise a round, one cell's rounds `noisy` apart
    between the sides' halves (a cell that wanders as the H100's textbook did)."""
    rng = np.random.default_rng(seed)
    sides: dict[str, list] = {"baseline": [], "candidate": []}
    for request in requests_for([GROUPS["Quick"]]):
        for provider in request.providers:
            key = request.key(provider)
            for side in sides:
                times = 0.006 * np.exp(rng.normal(0, 0.01, 20))
                if provider == "textbook" and request.epilog == "RELU_BIAS" and side == "candidate":
                    times = times * (1 + noisy)
                sides[side].append(Cell.measured(key, times).to_json())
    return {
        "format": SIDE_BY_SIDE_FORMAT,
        "machine": MACHINE,
        "commit": commit * 40,
        "rounds": 20,
        "groups": {"Quick": {"version": "v1", "cells": sides}},
        "path": f"{commit}.fbaa",
    } | ({"pinned": {}} if pinned else {})


def test_margins_earned_side_by_side_cover_the_noise_they_saw_and_decide_the_gpus_confirmations(monkeypatch):
    quiet = earn_margins(MACHINE, [_record("a", 0.0, 1), _record("b", 0.0, 2)])
    wandering = earn_margins(MACHINE, [_record("a", 0.0, 1), _record("c", 0.03, 3)])
    assert quiet.name == f"{MACHINE}/confirmation@aaaaaaa+bbbbbbb" and quiet.suite == "confirmation"
    assert quiet.pairs == 2
    assert quiet.versions == {"Quick": "v1"} and quiet.runs == (("a" * 40, "b" * 40),)
    assert quiet.threshold("time", "large") < 0.03 < wandering.threshold("time", "large")
    with pytest.raises(Exception, match="two benchmark versions"):
        other = _record("d", 0.0, 4)
        other["groups"]["Quick"]["version"] = "v2"
        earn_margins(MACHINE, [_record("a", 0.0, 1), other])
    monkeypatch.setitem(presets(), wandering.name, wandering)
    assert margins_for(f"{MACHINE}-tuned-fused-algorithm-7", "Quick", "v1") is wandering  # its GPU's margins
    assert margins_for(MACHINE, "Quick", "v2") is CONFIRMATION  # not earned at that version: the fixed margins
    assert margins_for("h200-141gb", "Quick", "v1") is CONFIRMATION


def test_margins_measured_with_the_algorithm_pinned_narrow_with_fewer_cells_judged_and_are_preferred(monkeypatch):
    """A confirmation of one workload judges a few cells, whose worst wanders less than a whole group's: margins from
    pinned records (protocol 2) are earned per number of cells, never wider than the whole group's, and decide a
    GPU's confirmations before margins from more records measured unpinned."""
    records = [_record("a", 0.03, 1, pinned=True), _record("b", 0.0, 2, pinned=True)]
    pinned = earn_margins(MACHINE, records)
    assert pinned.protocol == 2 and set(pinned.by_cells) >= {"time/large", "epilog-cost/large"}
    ladder = pinned.by_cells["time/large"]
    assert sorted(ladder) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    margins = [ladder[k] for k in sorted(ladder)]
    assert margins == sorted(margins) and margins[0] < margins[-1] <= pinned.threshold("time", "large")
    assert ladder[1] < pinned.threshold("time", "large")  # one cell's worst is not the noisy cell's whole tail
    few = pinned.for_cells({("time", "large"): 3})
    assert few.threshold("time", "large") == ladder[4] and few.threshold("epilog-cost", "large") == pinned.threshold(
        "epilog-cost", "large"
    )  # a class not judged keeps its margin
    assert pinned.for_cells({("time", "large"): 9999}).thresholds == pinned.thresholds
    unpinned = earn_margins(MACHINE, [_record("c", 0.0, 3), _record("d", 0.0, 4), _record("e", 0.0, 5)])
    assert unpinned.protocol == 1 and unpinned.by_cells == {}  # earlier margins keep the rule they decided by
    with pytest.raises(Exception, match="measured at worker protocols 1 and 2: fused-autotuned is pinned in one"):
        earn_margins(MACHINE, [*records, _record("c", 0.0, 3)])
    monkeypatch.setitem(presets(), unpinned.name, unpinned)
    monkeypatch.setitem(presets(), pinned.name, pinned)
    assert unpinned.pairs > pinned.pairs and margins_for(MACHINE, "Quick", "v1") is pinned


def test_margins_earned_over_some_cells_judge_paired_sessions_of_those_cells_alone(monkeypatch):
    """A paired session narrowed by `ab --cells R` is judged by margins sessions of R earned, else by those of whole
    groups (whose worst covers the worst of fewer cells); margins of R never judge a whole group, another regex's
    cells, or a confirmation."""
    earned = earn_margins(MACHINE, [_record("a", 0.0, 1), _record("b", 0.0, 2)])
    side = replace(earned, protocol=3, pairs=99)  # side-by-side records: more pairs, the newest protocol
    sessions = replace(earned, name="whole", rates={"sessions": 20}, pairs=20, protocol=3)
    narrowed = replace(sessions, name="narrowed", cells="/\\(32768,1024\\)/", pairs=19)
    for preset in (side, sessions, narrowed):
        monkeypatch.setitem(presets(), preset.name, preset)
    paired = f"{MACHINE}-paired-20261128T043501Z-d08d"
    assert margins_for(paired, "Quick", "v1", narrowed.cells) is narrowed  # its own cells' first, though fewer pairs
    assert margins_for(paired, "Quick", "v1") is sessions  # a paired session: its sessions' before side-by-side ones
    assert margins_for(paired, "Quick", "v1", "/BIAS/") is sessions  # another regex: the whole groups' margins
    assert margins_for(MACHINE, "Quick", "v1", narrowed.cells) is side  # a confirmation: side-by-side records' only
    monkeypatch.delitem(presets(), sessions.name)
    assert margins_for(paired, "Quick", "v1", "/BIAS/") is side
    assert Preset.from_json(narrowed.to_json()) == narrowed and "cells" not in sessions.to_json()


def test_a_confirmation_of_a_few_cells_is_decided_by_the_margins_for_that_many(tuned_verdict):
    (flagged,) = flag(tuned_verdict)
    target = "GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
    sides = _remeasured(flagged, {target: 0.035})
    whole = replace(CONFIRMATION, name="m", thresholds={**CONFIRMATION.thresholds, ("time", "medium"): 0.05})
    judged = []
    for ladder in ({}, {"time/medium": {k: 0.02 for k in (8, 64)}}, {"time/medium": {4: 0.02}}):
        margins = replace(whole, by_cells=ladder)
        confirmation = judge_confirmation(
            flagged, "side by side", sides["baseline"], sides["candidate"], rounds=20, seconds=1, calls=1,
            margins=margins,
        )  # fmt: skip
        rows = confirmation.judged.comparison.cells
        row = rows[(rows["metric"] == "time") & (rows["provider"] == "fused") & (rows["epilog"] == "GELU_AUX_BIAS")]
        judged.append((row["threshold"].iloc[0], row["verdict"].iloc[0].value))
    cells = len(sides["candidate"])
    assert 8 < cells <= 64  # the flagged workloads' cells (1 ms): the ladder's 64 covers them, its 8 and 4 do not
    assert judged == [(0.05, "same"), (0.02, "slower"), (0.05, "same")]  # none; the 64's; the 4's does not cover


def test_margins_earned_on_some_groups_name_them_and_judge_only_those(capsys, tmp_path):
    """`--side-by-side C --bench REGEX`: the records' groups matching it only, named after the preset's commits."""
    records = [_record("a", 0.0, 1), _record("b", 0.0, 2)]
    some = earn_margins(MACHINE, records, ["Quick"])
    assert some.name == f"{MACHINE}/confirmation@aaaaaaa+bbbbbbb:Quick" and some.versions == {"Quick": "v1"}
    assert some.thresholds == earn_margins(MACHINE, records).thresholds  # the same rows: the same margins
    with pytest.raises(Exception, match=r"hold no group Fp16Llm \(they hold Quick\)"):
        earn_margins(MACHINE, records, ["Fp16Llm"])
    (tmp_path / MACHINE).mkdir()
    for record in records:
        (tmp_path / MACHINE / f"{record['commit'][:8]}-side-by-side-1.fbaa").write_text(json.dumps(record))
    argv = ("calibrate", str(tmp_path), "--machine", MACHINE, "--side-by-side", "a,b", "--bench")
    code, out, err = run_cli(capsys, *argv, "^Qu")
    assert code == 0 and f"preset {MACHINE}/confirmation@aaaaaaa+bbbbbbb:Quick: 2 A/A pair(s)" in out, err
    code, out, err = run_cli(capsys, *argv, "Llm")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "no group of the side-by-side records matches --bench 'Llm'; they hold Quick" in err


def test_a_confirmation_is_decided_by_its_gpus_margins_and_a_replay_by_the_margins_its_record_names(
    tuned_verdict, monkeypatch
):
    """A 2.5% slowdown side by side: confirmed by the fixed 2% margins, not by margins of 3%; the record keeps which
    decided it, so replaying it gives the same verdict whatever margins are in force later."""
    from fusedbench.regressions.thresholds import Preset

    (flagged,) = flag(tuned_verdict)
    target = "GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
    sides = _remeasured(flagged, {target: 0.025})
    version = flagged.judgement.candidate.groups[flagged.group]
    wide = Preset(f"{MACHINE}/confirmation@wide", {k: 0.03 for k in CONFIRMATION.thresholds}, MACHINE, pairs=3,
                  suite="confirmation", versions={flagged.group: version})  # fmt: skip

    def judged():
        return judge_confirmation(flagged, "side by side", sides["baseline"], sides["candidate"], rounds=20,
                                  seconds=1.0, calls=10)  # fmt: skip

    fixed = judged()
    assert fixed.decided_by == "confirmation" and confirmed(tuned_verdict, [fixed]).outcome.value == "red"
    monkeypatch.setitem(presets(), wide.name, wide)
    earned = judged()
    assert earned.decided_by == wide.name and confirmed(tuned_verdict, [earned]).outcome.value == "green"
    record = json.loads(json.dumps(to_record(tuned_verdict, confirmed(tuned_verdict, [fixed]), [fixed])))
    assert record["groups"][0]["decided_by"] == "confirmation"
    assert cells_of(record["groups"][0], "baseline") is not None
    monkeypatch.setattr("fusedbench.regressions.gate.default_choice", lambda *_, **__: None)
    monkeypatch.setattr("fusedbench.regressions.gate.judge", lambda *_: tuned_verdict)  # the first look, again
    _, after, (again,) = replay(None, record | {"path": "x.fbconfirm"})
    assert again.decided_by == "confirmation" and after.outcome.value == "red"  # wide margins in force, not used
    record = json.loads(json.dumps(to_record(tuned_verdict, confirmed(tuned_verdict, [earned]), [earned])))
    _, after, (again,) = replay(None, record | {"path": "y.fbconfirm"})
    assert again.decided_by == wide.name and after.outcome.value == "green"  # decided by the margins it names


POOLED = f"{MACHINE}/confirmation@69b1f94+6e67b21:Fp16Membound+Fp16Seed+Quick"
LLM = f"{MACHINE}/confirmation@6e67b21:Fp16Llm"
H200 = "h200-141gb/confirmation@89a4235"
H200_PINNED = "h200-141gb/confirmation@e6d25b0:Fp16Seed+Quick"


def test_the_h100s_margins_are_its_side_by_side_records_of_two_sessions_and_the_docs_give_them():
    """Recomputed from the committed records by `test_calibration`; here: which records, and the docs' figures."""
    from pathlib import Path

    from fusedbench.regressions.margins import read_side_by_side

    records = read_side_by_side(str(Path(__file__).parent.parent / "results"), MACHINE, ["69b1f94", "6e67b21"])
    groups = [(r["commit"][:7], g, r.get("shard", "0/1")) for r in records for g in r["groups"]]
    assert groups == [
        ("69b1f94", "Quick", "0/1"),
        ("69b1f94", "Fp16Seed", "0/1"),
        ("69b1f94", "Fp16Membound", "0/1"),
        ("6e67b21", "Fp16Llm", "0/2"),
        ("6e67b21", "Fp16Llm", "1/2"),
        ("6e67b21", "Quick", "0/1"),
        ("6e67b21", "Fp16Seed", "0/1"),
        ("6e67b21", "Fp16Membound", "0/1"),
    ]
    first, pooled, llm = presets()[f"{MACHINE}/confirmation@69b1f94"], presets()[POOLED], presets()[LLM]
    assert (first.pairs, pooled.pairs, llm.pairs) == (3, 6, 2)
    assert set(first.versions) == set(pooled.versions) == {"Fp16Membound", "Fp16Seed", "Quick"}
    assert set(llm.versions) == {"Fp16Llm"}
    docs = finding("confirmation")
    for margins in (first, pooled, llm):
        large, medium, small = (margins.threshold("time", k) for k in ("large", "medium", "small"))
        detected = margins.rates["minimum_detectable"]["time/large"]
        said = docs[docs.index(f"**`{margins.name}`**") :][:700]
        assert (
            f"a cell's time is confirmed past {large:.1%} at >= 5 ms (caught 95% of the time from {detected:.1%}), "
            f"{medium:.1%} at 1-5 ms and {small:.1%} under 1 ms" in said
        )
    assert pooled.protocol == llm.protocol == 1 and not pooled.by_cells  # measured unpinned: the whole-group rule
    assert margins_for(MACHINE, "Fp16Llm", "another version") is CONFIRMATION


def test_whole_group_a_a_confirmations_are_red_by_the_fixed_margins_and_green_by_the_h100s_own():
    """Why the H100 earns its margins, and the llm group apart: each side-by-side A/A record judged as a whole-group
    confirmation (its replicate builds, both ways), the share red, as docs/regressions.md gives it."""
    from pathlib import Path

    from fusedbench.regressions.calibration import red_builds, replicate_builds
    from fusedbench.regressions.margins import read_side_by_side

    records = read_side_by_side(str(Path(__file__).parent.parent / "results"), MACHINE, ["69b1f94", "6e67b21"])
    red: dict[tuple[str, str], list[float]] = {}
    for record in records:
        (group,) = record["groups"]
        builds = replicate_builds(*record_runs(record))
        for name, margins in (("fixed", CONFIRMATION), ("pooled", presets()[POOLED]), ("llm", presets()[LLM])):
            shares = [red_builds(b, margins).mean() for b in (builds, builds.reversed())]
            red.setdefault((group, name), []).append(max(shares))
    worst = {key: max(shares) for key, shares in red.items()}
    assert worst[("Fp16Llm", "fixed")] >= 0.95 and worst[("Fp16Membound", "fixed")] >= 0.95
    assert worst[("Fp16Llm", "pooled")] == 1.0  # the other groups' margins do not hold the llm group's noise
    assert worst[("Fp16Llm", "llm")] <= 0.05
    for group in ("Quick", "Fp16Seed", "Fp16Membound"):
        assert worst[(group, "pooled")] <= 0.05
    docs = finding("confirmation")
    for group in ("Quick", "Fp16Seed", "Fp16Membound", "Fp16Llm"):
        own = "llm" if group == "Fp16Llm" else "pooled"
        row = "| " + " | ".join([group, *(f"{worst[(group, name)]:.0%}" for name in ("fixed", "pooled", "llm"))]) + " |"
        assert row in docs, row
        assert worst[(group, own)] <= 0.05


@pytest.mark.parametrize(
    ("machine", "margins"),
    [("h100-80gb-hbm3", f"{MACHINE}/confirmation@1fc6d58:Fp16Seed+Quick"), ("h200-141gb", H200_PINNED)],
)
def test_dump_thresholds_names_the_margins_that_decide_each_groups_confirmation(capsys, machine, margins):
    """Each GPU's newest quick run is at the version its margins were earned at."""
    from pathlib import Path

    results = str(Path(__file__).parent.parent / "results")
    code, out, _ = run_cli(capsys, "alert", results, "--machine", machine, "--suite", "quick", "--dump-thresholds")
    assert code == 0 and json.loads(out)["quick"]["confirmation_margins"] == {"Quick": margins}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "side-by-side record {path} cannot be read (not JSON"),
        ('{"format": "other"}', "{path} cannot be read (format: Input should be 'fusedbench-side-by-side-aa/1'"),
        ('{"format": "fusedbench-side-by-side-aa/1"}', "{path} cannot be read (machine: Field required)"),
        (None, "--side-by-side abcdef1: no side-by-side A/A record of it in"),
    ],
)
def test_a_side_by_side_record_that_cannot_be_read_is_one_line_naming_it(capsys, tmp_path, text, says):
    path = tmp_path / MACHINE / "abcdef12-side-by-side-1.fbaa"
    path.parent.mkdir()
    if text is not None:
        path.write_text(text)
    code, out, err = run_cli(capsys, "calibrate", str(tmp_path), "--machine", MACHINE, "--side-by-side", "abcdef1")
    assert code == 2 and out == "" and says.format(path=path) in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--machine", MACHINE, "--runs", "a,b", "--bench", "Quick"],
            "--bench goes with --measure-side-by-side or --side-by-side only",
        ),
        (
            ["--machine", MACHINE, "--side-by-side", "abc", "--shard", "0/2"],
            "--shard goes with --measure-side-by-side only",
        ),
        (["--measure-side-by-side", "--write"], "--write does not go with --measure-side-by-side"),
        (["--measure-side-by-side", "--machine", MACHINE], "--machine does not go with --measure-side-by-side"),
    ],
)
def test_a_calibrate_flag_of_another_job_is_refused_in_one_line_not_ignored(capsys, tmp_path, argv, says):
    code, out, err = run_cli(capsys, "calibrate", str(tmp_path), *argv)
    assert code == 2 and out == "" and says in err and len(err.strip().splitlines()) == 1


def test_by_the_h100s_llm_margins_the_session_8_injections_time_is_not_confirmed_and_one_fusion_speedup_is(
    committed_results,
):
    """docs/regressions.md's what-if: the session-8 Fp16Llm record judged again by the llm group's own margins."""
    from pathlib import Path

    from fusedbench.regressions.confirm import read_confirmations

    results = Path(__file__).parent.parent / "results"
    (record,) = [r for r in read_confirmations(str(results)) if f"{MACHINE}-inject-8ec0625c" in r["path"]]
    _, kept, _ = replay(committed_results, record)
    assert kept.outcome.value == "red"  # as decided then, by the fixed margins
    asked = record | {"groups": [group | {"decided_by": LLM} for group in record["groups"]]}
    _, after, (confirmation,) = replay(committed_results, asked)
    assert confirmation.decided_by == LLM
    (alerts,) = [suite.alerts for suite in after.suites if len(suite.alerts)]
    assert alerts[["epilog", "provider", "metric"]].values.tolist() == [["RELU_AUX", "fused", "fusion-speedup"]]
    assert round(float(alerts["ratio"].iloc[0]), 3) == 0.950 and after.outcome.value == "red"


def test_the_h200s_margins_are_its_two_side_by_side_records_and_hold_its_whole_group_confirmations_green():
    """docs/regressions.md's H200 table: each record judged as a whole-group confirmation, by the fixed margins and
    by the H200's own, the worse of both ways."""
    from pathlib import Path

    from fusedbench.regressions.calibration import red_builds, replicate_builds
    from fusedbench.regressions.margins import read_side_by_side

    margins = presets()[H200]
    records = read_side_by_side(str(Path(__file__).parent.parent / "results"), "h200-141gb", ["89a4235"])
    assert [g for r in records for g in r["groups"]] == ["Quick", "Fp16Seed"] and margins.pairs == 2
    # the pinned records of session 16 decide its confirmations now
    assert margins_for("h200-141gb", "Fp16Seed", margins.versions["Fp16Seed"]) is presets()[H200_PINNED]
    docs = finding("confirmation")
    said = docs[docs.index(f"**The H200's, `{H200}`**") :][:700]
    detected = margins.rates["minimum_detectable"]["time/large"]
    large = margins.threshold("time", "large")
    assert (
        f"a cell's time is confirmed past {large:.1%} at >= 5 ms (caught 95% of the time from {detected:.1%})" in said
    )
    for record in records:
        (group,) = record["groups"]
        builds = replicate_builds(*record_runs(record))
        fixed, own = (
            max(red_builds(b, m).mean() for b in (builds, builds.reversed())) for m in (CONFIRMATION, margins)
        )
        assert own <= 0.05
        assert f"| {group} | {fixed:.0%} | {own:.0%} |" in docs


PINNED = {
    (MACHINE, "Quick"): f"{MACHINE}/confirmation@1fc6d58:Fp16Seed+Quick",
    (MACHINE, "Fp16Seed"): f"{MACHINE}/confirmation@1fc6d58:Fp16Seed+Quick",
    (MACHINE, "Fp16Membound"): f"{MACHINE}/confirmation@1fc6d58+eac78e9:Fp16Membound",
    (MACHINE, "Fp16Llm"): f"{MACHINE}/confirmation@1fc6d58:Fp16Llm",
    ("h200-141gb", "Quick"): H200_PINNED,
    ("h200-141gb", "Fp16Seed"): H200_PINNED,
    ("h200-141gb", "Fp16Membound"): "h200-141gb/confirmation@e6d25b0:Fp16Membound",
}


def test_each_gpus_pinned_margins_decide_its_confirmations_by_cells_judged_and_the_docs_give_them():
    """Side-by-side records with fused-autotuned pinned (the H100's of session 15, membound on two cards; the
    H200's of session 16) earn margins per number of cells judged, by group family; they decide each GPU's
    confirmations now, and the docs give a workload's and a whole group's."""
    docs = finding("confirmation")
    for (machine, group), name in PINNED.items():
        margins = presets()[name]
        assert margins.protocol == 2 and margins_for(machine, group, margins.versions[group]) is margins
        few = [
            margins.by_cells.get(f"time/{k}", {}).get(8, margins.threshold("time", k))
            for k in ("large", "medium", "small")
        ]
        whole = [margins.threshold("time", k) for k in ("large", "medium", "small")]
        said = docs[docs.index(f"**`{name}`**") :][:600]
        assert (
            f"up to 8 cells of a class: {few[0]:.1%} at >= 5 ms, {few[1]:.1%} at 1-5 ms, {few[2]:.1%} under 1 ms; "
            f"a whole group's: {whole[0]:.1%}, {whole[1]:.1%}, {whole[2]:.1%}" in said
        ), said


def _label(row) -> str:
    return f"{row.epilog}/{row.dtype}/({row.m},{row.k})x({row.k},{row.n})/{row.provider}"


def injected_by_margins_now(results, machine: str = MACHINE) -> list[str]:
    """A GPU's single-cell injected runs' confirmations judged again by the margins in force now (pinned, by cells
    judged): a docs table row each."""
    from fusedbench.regressions.confirm import read_confirmations

    rows = []
    for record in read_confirmations(str(Path(__file__).parent.parent / "results")):
        candidate = record["groups"][0]["candidate"]
        if not candidate["machine"].startswith(f"{machine}-inject-"):
            continue
        targets = [
            target["target"]
            for run in results.records
            if (run.machine, run.commit) == (candidate["machine"], candidate["commit"])
            for target in run.environment["injection"]
        ]
        if not all("/" in target for target in targets):  # a whole group made slower: another table's
            continue
        first, _, confirmations = replay(results, record)
        for confirmation, kept in zip(confirmations, record["groups"], strict=True):
            version = confirmation.flagged.judgement.candidate.groups[confirmation.group]
            margins = margins_for(candidate["machine"], confirmation.group, version)
            again = judge_confirmation(
                confirmation.flagged, confirmation.how, cells_of(kept, "baseline"), cells_of(kept, "candidate"),
                rounds=confirmation.rounds, seconds=confirmation.seconds, calls=confirmation.calls, margins=margins,
            )  # fmt: skip
            cells = again.judged.comparison.cells
            timed = cells[(cells["metric"] == "time") & cells["ratio"].notna()]
            slower = timed[timed["verdict"].map(lambda v: v.value) == "slower"]
            injected = set(targets)
            caught = [r for r in slower.itertuples() if _label(r) in injected]
            rows.append(
                f"| `{candidate['machine']}` | {confirmation.group} | `{margins.name}` | "
                f"{len(caught)} of 5 (x{min(r.ratio for r in caught):.3f}-{max(r.ratio for r in caught):.3f}, "
                f"margins {min(r.threshold for r in caught):.1%}-{max(r.threshold for r in caught):.1%}) | "
                f"{len(slower) - len(caught)} of {len(timed) - len(caught)} | "
                f"{confirmed(first, [again]).outcome.value} |"
            )
    return rows


def test_the_h100s_injected_confirmations_judged_by_the_margins_now_in_force_are_the_docs_table(committed_results):
    docs = finding("confirmation", folded=False)
    rows = injected_by_margins_now(committed_results)
    print("\n".join(rows))
    assert len(rows) == 5
    for row in rows:
        assert row in docs, row


def test_the_h200s_injected_confirmations_judged_by_its_pinned_margins_are_the_docs_table(committed_results):
    docs = finding("confirmation", folded=False)
    rows = injected_by_margins_now(committed_results, "h200-141gb")
    print("\n".join(rows))
    assert len(rows) >= 4
    for row in rows:
        assert row in docs, row


def test_the_picks_margin_is_the_widest_the_sessions_picks_came_apart_and_leaving_one_out_counts_them():
    """Two autotunings of one code came out 14.1% and 13.9% apart in two of four sessions: the picks' margin is 15%
    (the widest, half a per cent more, rounded up), and neither is red by the other's; one session alone that far
    apart is red by the 11% the others leave; picks of 5% apart keep 11%."""
    import math
    from types import SimpleNamespace

    import pandas as pd

    from fusedbench.regressions.margins import with_earned_picks
    from fusedbench.regressions.picks import PICK_MARGIN, pick_margins, worst_pick

    preset = Preset("x", {("time", "large"): 0.03}, "gpu", rates={"sessions": 4, "left_out_red_sessions": [],
                                                                   "false_alarm_by_suite": {"quick": 0.0}})  # fmt: skip
    two = with_earned_picks(preset, [math.log(1.141), math.log(1.139), 0.0, 0.0])
    assert two.picks == pytest.approx(0.15) and two.rates["left_out_red"] == 0
    assert pick_margins(two).threshold("time", "large") == pytest.approx(0.15)
    assert Preset.from_json(json.loads(json.dumps(two.to_json()))).picks == two.picks
    alone = with_earned_picks(preset, [math.log(1.141), 0.0, 0.0, 0.0])
    assert alone.rates["left_out_red_sessions"] == [0] and alone.rates["false_alarm_by_suite"] == {"quick": 0.25}
    narrow = with_earned_picks(preset, [math.log(1.05), 0.0, 0.0, 0.0])
    assert pick_margins(narrow).threshold("time", "large") == PICK_MARGIN and narrow.rates["left_out_red"] == 0
    cells = pd.DataFrame({"metric": ["time", "time", "time", "epilog-cost"], "ratio": [1.10, 0.85, 1.2, 2.0],
                          "ci_low": [1.08, 0.84, 0.95, 1.9], "ci_high": [1.12, 0.86, 1.4, 2.1]})  # fmt: skip
    assert worst_pick(SimpleNamespace(cells=cells)) == pytest.approx(math.log(1 / 0.85))
    assert worst_pick(SimpleNamespace(cells=cells.iloc[2:])) == 0.0
