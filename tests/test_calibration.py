"""The committed presets are what their A/A runs give: recomputed here from the committed results, with the
false-alarm and detection rates docs/regressions.md reports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import finding

from fusedbench.catalog.deliberate import PAIRED_MARK
from fusedbench.regressions.calibration import ALPHA, DETECT, GOALS, calibrate, detection, red_builds, replicate_builds
from fusedbench.regressions.compare import Run
from fusedbench.regressions.margins import earn_margins, earn_paired_margins, read_side_by_side
from fusedbench.regressions.thresholds import MARGINS_SUITE, Preset, presets
from fusedbench.results.loader import load_results as load

ROOT = Path(__file__).parent.parent

QUICK_SESSIONS = (  # the measurement code of b96c8da, a fresh lease and card each
    "17e9ce1,b42dd54,2ce804d,b4ffa58,586478c",
    "09bfe98,ec5ed52,a4236bd,e0248e1,4e54cb3",
    "fa3e093,9a62ad6,21bd30a,f3f4a52,80ea650",
)


@pytest.fixture(scope="module")
def results(committed_results):
    return committed_results


CALIBRATED: dict = {}  # (machine, runs) -> every suite's preset: runs of two suites give two, computed once


@pytest.mark.parametrize("name", sorted(presets()))
def test_a_committed_preset_is_exactly_what_its_a_a_runs_give(results, name):
    committed = presets()[name]
    machine, suite = name.split("@")[0].split("/")
    asked = (committed.calibrated_on, committed.runs)
    if suite == MARGINS_SUITE and PAIRED_MARK in committed.runs[0][0]:  # earned from paired A/A sessions
        asked = (*asked, name)
        held = committed.rates.get("held_out", {})
        sessions = [*committed.runs[0], *held.get("sessions", [])]
        earned, _ = earn_paired_margins(load(str(ROOT / "results"), machines=sessions), sessions, held.get("card"))
        assert earned.rates["held_out"] == held
        CALIBRATED[asked] = {suite: earned}
    elif suite == MARGINS_SUITE:  # a GPU's confirmation margins: its side-by-side records (of some groups: `:groups`)
        asked = (*asked, name)
        records = read_side_by_side(str(ROOT / "results"), committed.calibrated_on, list(committed.runs[0]))
        groups = sorted(committed.versions) if ":" in name else None
        CALIBRATED[asked] = {suite: earn_margins(committed.calibrated_on, records, groups)}
    if asked not in CALIBRATED:
        CALIBRATED[asked] = calibrate(results, committed.calibrated_on, [list(commits) for commits in committed.runs])
    again = CALIBRATED[asked]
    assert suite in again and machine == committed.calibrated_on  # runs of two suites teach a preset each
    again = again[suite]
    assert again.name == name and again.runs == committed.runs
    assert again.thresholds == committed.thresholds
    assert again.noise == committed.noise and again.pairs == committed.pairs
    assert again.by_cells == committed.by_cells and again.protocol == committed.protocol
    assert again.rates["pairs_by_suite"] == committed.rates["pairs_by_suite"] == {suite: committed.pairs}
    assert again.rates["false_alarm_by_suite"] == pytest.approx(committed.rates["false_alarm_by_suite"])
    assert again.rates["detection"] == pytest.approx(committed.rates["detection"])
    assert again.rates["minimum_detectable"] == committed.rates["minimum_detectable"]


def test_the_h100_presets_are_the_burst_runs_of_three_sessions_and_a_default_pair():
    quick, default = presets()["h100-80gb-hbm3/quick@17e9ce1"], presets()["h100-80gb-hbm3/default@6fd4f0d"]
    assert [",".join(c[:7] for c in commits) for commits in quick.runs] == [",".join(QUICK_SESSIONS)]
    assert [[c[:7] for c in commits] for commits in default.runs] == [["6fd4f0d", "8fda10a"]]
    assert (quick.pairs, default.pairs) == (105, 1)  # 15 runs: 30 pairs within a session, 75 across cards
    for preset in (quick, default):
        assert preset.rates["false_alarm_per_build"] <= ALPHA  # the goal: met
    # The quick suite's large cells: every threshold at or under the 8% goal but the epilog cost's
    assert [quick.threshold(m, "large") for m in ("time", "epilog-cost", "fusion-speedup")] == [0.075, 0.095, 0.08]
    assert quick.rates["detection"]["a 10% slowdown of one cell >= 5 ms (time)"] >= DETECT
    assert quick.rates["detection"]["a 3% slowdown of a whole group (time)"] >= DETECT
    # The default suite's ~900 large cells of one pair across two cards: far wider (docs/regressions.md says why)
    assert [default.threshold(m, "large") for m in ("time", "epilog-cost", "fusion-speedup")] == [0.315, 0.32, 0.3]
    assert default.rates["detection"]["a 3% slowdown of a whole group (time)"] < DETECT


def test_the_thresholds_in_docs_regressions_are_the_committed_presets():
    from fusedbench.cli.calibrate import effect
    from fusedbench.regressions.thresholds import CLASSES, GATES

    docs = finding("threshold-presets", folded=False)
    quick, default = presets()["h100-80gb-hbm3/quick@17e9ce1"], presets()["h100-80gb-hbm3/default@6fd4f0d"]
    for metric in ("time", "epilog-cost", "fusion-speedup"):
        for klass in (*(c for c, _ in CLASSES), *GATES):
            key = f"{metric}/{klass}"
            cells = [
                f"{p.threshold(metric, klass):.1%} | {effect(p.rates['minimum_detectable'][key])}"
                for p in (quick, default)
            ]
            assert f"| {key} | {cells[0]} | {cells[1]} |" in docs


def test_a_pair_is_judged_both_ways_so_a_faster_candidate_teaches_the_gate_too():
    base, cand = _synthetic_pair(shift=0.97)  # the candidate's card 3% faster: forward, nothing got worse
    forward = replicate_builds(base, cand, replicates=400)
    backward = forward.reversed()
    assert np.array_equal(backward.reversed().log_worse, forward.log_worse)
    assert np.array_equal(backward.reversed().log_worse_low, forward.log_worse_low)
    from fusedbench.regressions.calibration import make_preset

    alone = make_preset("forward", "m", ("a", "b"), [forward])
    both = make_preset("both", "m", ("a", "b"), [forward, backward])
    assert alone.threshold("time", "group") < 0.01  # the faster candidate moved nothing the worse way
    assert both.threshold("time", "group") >= 0.03  # its baseline, judged as the candidate, is 3% slower


def _synthetic_pair(shift: float = 1.0, noise: float = 0.01):
    """Two runs of 40 workloads x 3 providers, 10 rounds each, `noise` per sample, the candidate x `shift`."""
    import pandas as pd

    rng = np.random.default_rng(7)
    rows = {commit: [] for commit in ("a" * 40, "b" * 40)}
    for commit, factor in zip(rows, (1.0, shift), strict=True):
        for index in range(40):
            for provider, seconds in (("gemm", 10e-3), ("fused", 10.3e-3), ("unfused", 12e-3)):
                raw = tuple(seconds * factor * (1 + noise * rng.standard_normal(10)))
                rows[commit].append(
                    {
                        "epilog": "RELU",
                        "dtype": "fp16",
                        "m": 1024 + index,
                        "k": 4096,
                        "n": 8192,
                        "provider": provider,
                        "status": "ok",
                        "group": "Fp16Seed",
                        "version": "v",
                        "raw": raw,
                    }
                )
    return [Run("m", commit, pd.DataFrame(cells)) for commit, cells in rows.items()]


def test_calibration_on_pure_noise_gives_thresholds_that_keep_its_own_builds_green_and_catch_what_they_should():
    base, cand = _synthetic_pair()
    builds = replicate_builds(base, cand, replicates=400)
    from fusedbench.regressions.calibration import make_preset, rates

    preset = make_preset("synthetic", "m", ("a", "b"), [builds])
    assert isinstance(preset, Preset)
    assert 0.01 < preset.threshold("time", "large") < 0.10  # 1% noise per sample: a few per cent at the worst cell
    assert preset.threshold("time", "group") < preset.threshold("time", "large")  # a median over 120 cells is steadier
    assert red_builds(builds, preset).mean() <= ALPHA
    found = rates([builds], preset)
    assert found["detection"]["a 3% slowdown of a whole group (time)"] >= DETECT
    rng = np.random.default_rng(0)
    assert detection(builds, preset, "time", ("large",), 0.0, rng) <= ALPHA  # no effect, (almost) no detection
    assert detection(builds, preset, "time", ("large",), 0.5, rng) == 1.0  # a 50% slowdown: always
    assert set(found["minimum_detectable"]) == {"/".join(key) for key in preset.thresholds}
    assert set(GOALS) == set(found["detection"])


# The docs' A/A spread rows: the runs, the cells left out, the row's figures
H100_SPREADS = [
    (["67306e2", "2e91ff2", "3ea010d", "884f601", "95e3ed8"], (), "| 2.84% | 4.20% | 5.10% |"),
    (["b6a0e09", "738499d", "d3648e8", "e90144d", "9abafbe"], (), "| 0.60% | 6.33% | 7.50% |"),
    (["b6a0e09", "738499d", "d3648e8", "e90144d", "9abafbe"], ("fused-autotuned",), "| 0.53% | 0.97% | 0.99% |"),
    (["17e9ce1", "b42dd54", "2ce804d", "b4ffa58", "586478c"], (), "| 0.58% | 1.03% | 1.15% |"),
    (["09bfe98", "ec5ed52", "a4236bd", "e0248e1", "4e54cb3"], (), "| 0.80% | 1.92% | 2.89% |"),
    (
        [
            "17e9ce1",
            "b42dd54",
            "2ce804d",
            "b4ffa58",
            "586478c",
            "09bfe98",
            "ec5ed52",
            "a4236bd",
            "e0248e1",
            "4e54cb3",
        ],
        (),
        "| 1.21% | 1.91% | 2.89% |",
    ),
    (["fa3e093", "9a62ad6", "21bd30a", "f3f4a52", "80ea650"], (), "| 0.71% | 1.19% | 1.25% |"),
    (",".join(QUICK_SESSIONS).split(","), (), "| 1.61% | 2.18% | 2.90% |"),
    (["6fd4f0d", "8fda10a"], (), "| 2.40% | 4.64% | 10.81% |"),
]
H200_SESSION_5 = ["7aa40b3", "3d8884d", "747a128", "fdfa1f8", "e537c30", "3e4ba4b"]  # the H200's first A/A set
# the plain quick runs of issue 30's machine sessions 1 to 3 (two runs each, on three cards)
H200_ISSUE_30 = ["b12b205", "df50c75", "2904471", "2c530d9", "744d22f", "6222822"]


@pytest.mark.parametrize(
    ("machine", "commits", "leave_out", "row"),
    [("h100-80gb-hbm3", *case) for case in H100_SPREADS]
    + [("h200-141gb", H200_SESSION_5, (), "| 0.48% | 1.16% | 3.19% |")]
    + [("h200-141gb", H200_ISSUE_30, (), "| 4.79% | 6.17% | 7.02% |")],
)
def test_the_a_a_spreads_in_the_docs_come_from_the_committed_runs(results, machine, commits, leave_out, row):
    from fusedbench.regressions.calibration import aa_spreads

    spreads = aa_spreads(results, machine, commits, leave_out=leave_out)
    assert len(spreads) == (23 if leave_out else 28 if len(commits) > 2 else 1742)  # the default pair: 1,742 cells
    figures = [spreads.median(), spreads.quantile(0.95, interpolation="linear"), spreads.max()]
    assert " | ".join(f"{100 * figure:.2f}%" for figure in figures) in row
    assert row in finding("aa-spread", folded=False)
    elsewhere = "c8c600b" if len(commits) > 2 else "67306e2"  # a run of the other suite: no cell in every run
    assert aa_spreads(results, machine, [*commits, elsewhere]).empty


BURST_SESSIONS = (
    ["b6a0e09", "738499d", "d3648e8", "e90144d", "9abafbe"],  # the code of 8ce8385, nvmath's autotune
    ["17e9ce1", "b42dd54", "2ce804d", "b4ffa58", "586478c"],  # the code of b96c8da, on another card
    ["09bfe98", "ec5ed52", "a4236bd", "e0248e1", "4e54cb3"],  # b96c8da again, a third card
)


def test_cards_of_one_model_differ_by_more_than_the_a_a_runs_on_one_card(results):
    """docs/measurement.md: outside fused-autotuned, sessions 2 and 3's cards ran every quick cell 1.8-3.9% faster
    than session 1's, and agree with each other to within 1.0% on every cell."""
    cells = results.cells
    cells = cells[(cells.machine == "h100-80gb-hbm3") & (cells.status == "ok") & (cells.provider != "fused-autotuned")]
    medians = [
        cells[cells.commit.str[:7].isin(commits)].groupby(["epilog", "provider"]).time_s.median()
        for commits in BURST_SESSIONS
    ]
    second, third = (medians[1] / medians[0]).dropna(), (medians[2] / medians[0]).dropna()
    assert len(second) == len(third) == 23
    assert [round(second.median(), 3), round(third.median(), 3)] == [0.975, 0.970]
    assert (
        round(1 - max(second.max(), third.max()), 3) == 0.018 and round(1 - min(second.min(), third.min()), 3) == 0.039
    )
    between = (medians[2] / medians[1]).dropna()
    assert round(between.median(), 3) == 0.996 and round(1 - between.min(), 3) == 0.010 and between.max() < 1.001


def test_calibrate_prints_each_sets_a_a_spread(results):
    from fusedbench.cli.calibrate import spread_lines

    burst, gone = ["b6a0e09", "738499d", "d3648e8", "e90144d", "9abafbe"], ["b6a0e09", "c8c600b"]
    assert spread_lines(results, "h100-80gb-hbm3", [burst, gone]) == [
        "A/A spread over b6a0e09,738499d,d3648e8,e90144d,9abafbe, 28 cells of at least 1 ms: median 0.60%, "
        "95th percentile 6.33%, max 7.50%",
        "A/A spread over b6a0e09,c8c600b: no epilog cell of at least 1 ms was timed in every run",
    ]


def test_the_h200s_quick_suite_is_judged_by_its_own_preset_as_the_findings_say(results):
    from fusedbench.regressions.gate import Choice, Outcome, judge

    (verdict,) = judge(results, Choice("h200-141gb", ("quick",))).suites
    (group,) = verdict.groups
    runs = [group.candidate.commit[:7], group.baseline.commit[:7]]
    assert runs == ["8b825b9", "9329934"] and verdict.outcome == Outcome.GREEN  # session 7's plain runs, not earned on
    assert verdict.preset.calibrated_on == "h200-141gb"
    assert [[c[:7] for c in commits] for commits in verdict.preset.runs] == [H200_SESSION_5, H200_ISSUE_30]
    assert verdict.preset.pairs == 30
    findings = finding("report-and-gate-on-committed-results")
    assert (
        f"quick suite is judged green by its own preset, earned on {verdict.preset.pairs} A/A pairs of twelve runs "
        f"in four machine sessions (its last two A/A runs, {runs[0]} against {runs[1]}, out of sample" in findings
    )


def test_the_h100s_peers_preset_is_earned_on_two_sets_of_runs_and_judges_every_group(results):
    """Fifteen groups have their A/A pair at 028e8a3/7479c6f (the code of 27fc475), the two membound Compiled groups
    theirs at fcf16cf/57d8a23 (other measurement code, so another set): one peers preset of two pairs, which knows all
    seventeen groups and is the one in force."""
    from fusedbench.catalog.suites import SUITES
    from fusedbench.regressions.calibration import suite_named
    from fusedbench.regressions.thresholds import preset_for

    peers = presets()["h100-80gb-hbm3/peers@028e8a3"]
    assert set(peers.versions) == set(SUITES["peers"]) and peers.pairs == 2
    assert [[c[:7] for c in commits] for commits in peers.runs] == [["028e8a3", "7479c6f"], ["fcf16cf", "57d8a23"]]
    assert suite_named(set(peers.versions)) == "peers" and suite_named({"Fp16Llm"}) == "default"
    in_force, why = preset_for("h100-80gb-hbm3", "peers", versions=dict(peers.versions))
    assert in_force is peers and "this GPU's own A/A runs of the peers suite" in why
    # Two presets fit a candidate: the one earned on more of its groups is in force, whatever their pairs
    narrow = Preset(
        "h100-80gb-hbm3/peers@narrow",
        peers.thresholds,
        "h100-80gb-hbm3",
        pairs=9,
        suite="peers",
        versions={"TwoPass": peers.versions["TwoPass"]},
    )
    presets()[narrow.name] = narrow
    try:
        assert preset_for("h100-80gb-hbm3", "peers", versions=dict(peers.versions))[0] is peers
        assert preset_for("h100-80gb-hbm3", "peers", versions={"TwoPass": peers.versions["TwoPass"]})[0] is narrow
    finally:
        del presets()[narrow.name]


def test_the_h200s_default_suite_is_judged_by_its_own_preset_on_all_nine_groups(results):
    """Session 18's 57d8a23 gives Tf32Seed and Fp8Seed their pair with 32f0587: the H200's default preset, earned again
    on eight pairs, judges all nine groups (session 17's seven judged, those two "no earlier run")."""
    from fusedbench.catalog.suites import SUITES
    from fusedbench.regressions.gate import Choice, Outcome, judge

    (verdict,) = judge(results, Choice("h200-141gb", ("default",))).suites
    assert verdict.preset.name == "h200-141gb/default@32f0587" and verdict.preset.calibrated_on == "h200-141gb"
    assert verdict.preset.pairs == 8 and verdict.outcome == Outcome.GREEN
    judged = {g.group for g in verdict.groups if g.judged is not None and not g.not_judged}
    assert judged == set(SUITES["default"]) == set(verdict.preset.versions)
    latest = {g.group: (g.candidate.commit[:7], g.baseline.commit[:7]) for g in verdict.groups}
    assert latest["Tf32Seed"] == latest["Fp8Seed"] == ("57d8a23", "32f0587")
    findings = finding("report-and-gate-on-committed-results")
    assert (
        "the H200's default suite is judged green by its own preset, `h200-141gb/default@32f0587`, earned on "
        f"{verdict.preset.pairs} A/A pairs of six runs" in findings
    )


def test_the_h200s_peers_suite_is_judged_by_its_own_preset_on_every_group(results):
    """One cross-session pair (fcf16cf, the whole suite; 57d8a23, every group, over sessions 18 to 20): the H200's
    peers preset is in force and judges all seventeen groups; the findings say so."""
    from fusedbench.catalog.suites import SUITES
    from fusedbench.regressions.gate import Choice, Outcome, judge

    (verdict,) = judge(results, Choice("h200-141gb", ("peers",))).suites
    assert verdict.preset.name == "h200-141gb/peers@fcf16cf" and verdict.preset.calibrated_on == "h200-141gb"
    assert verdict.preset.pairs == 1 and verdict.outcome == Outcome.GREEN
    judged = {g.group for g in verdict.groups if g.judged is not None and not g.not_judged}
    assert judged == set(SUITES["peers"]) == set(verdict.preset.versions)
    assert {(g.candidate.commit[:7], g.baseline.commit[:7]) for g in verdict.groups} == {("57d8a23", "fcf16cf")}
    findings = finding("report-and-gate-on-committed-results")
    said = "the H200's, `h200-141gb/peers@fcf16cf`, on all 17 (57d8a23 against fcf16cf, in-sample), both green"
    assert said in findings
