"""The paired campaign's tables, recomputed from the committed paired runs (results/<gpu>-paired-*) and the campaign's
manifest and patches (docs/findings/2026-11-28-ab-paired-runs/): each regression build's slowed cells, caught or not,
beside their true size (a 100-round paired run of the same build on the same card), and the A/A builds' false alarms.
The findings page quotes every line these tests render."""

from __future__ import annotations

import ast
import functools
import json
import math
import re
import statistics
from pathlib import Path

import pytest
from conftest import finding

from fusedbench.measure.sampling import SAMPLES
from fusedbench.regressions.compare import Verdict
from fusedbench.regressions.gate import default_choice, judge
from fusedbench.results.loader import load_results

ROOT = Path(__file__).parent.parent
FINDINGS = ROOT / "docs" / "findings"
# the campaigns: each a findings page and a folder beside it (the first two on H100s, the third to fifth on H200s, the
# fifth with a cell that moved timed again in a second preparation)
FIRST, SECOND, THIRD, FOURTH = "ab-paired-runs", "ab-paired-campaign-2", "ab-paired-campaign-3", "ab-paired-campaign-4"
FIFTH = "ab-paired-campaign-5"
BANDS = (("5% or more", 0.05, 1.0), ("3% to 5%", 0.03, 0.05), ("under 3%", 0.0, 0.03))
QUICK_SHAPE = (65536, 16384, 8192)


def folder(campaign: str) -> Path:
    (found,) = FINDINGS.glob(f"????-??-??-{campaign}")
    return found


def rate_interval(hits: int, trials: int) -> tuple[float, float]:
    """The Wilson score 95% interval of a rate of `hits` in `trials` (a detection or false-alarm rate): it stays
    inside [0, 1] and is not empty at 0 or `trials` hits, where the normal one collapses. NaNs for no trials."""
    if trials == 0:
        return math.nan, math.nan
    z = 1.959963984540054
    rate = hits / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


@functools.cache
def manifest(campaign: str) -> dict:
    return json.loads((folder(campaign) / "campaign.json").read_text())


@functools.cache
def slowed(campaign: str, patch: str) -> dict[tuple, str]:
    """The cells a regression build slows, (epilog, provider, m, k, n) -> how much extra work: the first campaign's
    patches two passes over 1/K of D's rows of quick's cells, the second's over D's first R rows of any shape."""
    text = (folder(campaign) / patch).read_text()
    if campaign == FIRST:
        table = ast.literal_eval(re.search(r"slower = (\{.*?\})\.get", text).group(1))
        return {(e, p, *QUICK_SHAPE): f"1/{k}" for (e, p), k in table.items()}
    table = ast.literal_eval(re.search(r"rows = (\{.*?\})\.get", text).group(1))
    return {key: f"{rows} rows" for key, rows in table.items()}


CAMPAIGNS = (FIRST, SECOND, THIRD, FOURTH, FIFTH)


@functools.cache
def campaign_results():
    """Every campaign's sessions, loaded once (a verdict or a margin reads the sessions it names alone)."""
    runs = [run for c in CAMPAIGNS for run in manifest(c)["builds"] + manifest(c)["sizes"]]
    return load_results(str(ROOT / "results"), machines=[run["machine"] for run in runs])


@functools.cache
def verdicts(campaign: str) -> dict:
    """Each campaign machine's verdict, as `fusedbench alert --machine M --suite S` gives it."""
    runs = manifest(campaign)["builds"] + manifest(campaign)["sizes"]
    results = campaign_results()
    return {
        run["machine"]: judge(results, default_choice(results, run["machine"], suites=(run.get("suite", "quick"),)))
        for run in runs
    }


def time_rows(campaign: str, machine: str, judged_only: bool = False) -> dict[tuple, object]:
    """The machine's compared cells by time, keyed (epilog, provider, m, k, n), over every group it measured (or only
    those the verdict judged: a group without margins of its own is compared and shown, not judged)."""
    (suite,) = verdicts(campaign)[machine].suites
    found = {}
    for group in suite.groups:
        if group.judged is not None and not (judged_only and group.not_judged):
            cells = group.judged.comparison.cells
            for row in cells[cells["metric"] == "time"].itertuples():
                found[(row.epilog, row.provider, row.m, row.k, row.n)] = row
    return found


def card(campaign: str, machine: str) -> str:
    """The card a campaign's session ran on, as its records say."""
    (uuid,) = {r.environment["gpu"]["uuid"][:12] for r in campaign_results().records if r.machine == machine}
    return uuid


def shape_set(patch: str) -> str:
    return re.match(r"(?:h200)?([a-z]+)", patch).group(1).replace("regression", "quick")


def sized_builds(campaign: str) -> list[dict]:
    """The regression builds whose true sizes were measured (a 100-round run of the same patch on the same card)."""
    sized = {(s["patch"], card(campaign, s["machine"])) for s in manifest(campaign)["sizes"] if s["rounds"] == 100}
    regressions = (b for b in manifest(campaign)["builds"] if b["kind"] == "regression")
    return [b for b in regressions if (b["patch"], card(campaign, b["machine"])) in sized]


def slowed_cell_rows(campaign: str, build: dict, truth: tuple[str, str]) -> list[dict]:
    """A row per cell the build slows and measured: its true size (the 100-round run `truth`, a campaign and its
    machine) and whether the build's 10-round verdict caught it (its time slower, judged)."""
    measured = time_rows(campaign, build["machine"])
    judged = time_rows(campaign, build["machine"], judged_only=True)
    sizes = time_rows(*truth)
    rows = []
    for cell, extra in sorted(slowed(campaign, build["patch"]).items()):
        if cell not in measured:  # a cell the build does not time (torch has no op for it)
            continue
        true = sizes[cell]
        rows.append({
            "cell": "/".join(cell[:2]), "extra": extra, "build": build["machine"][-4:],
            "set": shape_set(build["patch"]), "seen": measured[cell].ratio, "true": true.ratio,
            "true_low": true.ci_low, "true_high": true.ci_high,
            "caught": cell in judged and measured[cell].verdict is Verdict.SLOWER,
            "margin": measured[cell].threshold if cell in judged else math.nan,
        })  # fmt: skip
    return rows


@functools.cache
def detection_rows(campaign: str) -> tuple[dict, ...]:
    """Every sized build's slowed cells, each beside the 100-round run of the same code on the same card."""
    sizes = {
        (s["patch"], card(campaign, s["machine"])): s["machine"]
        for s in manifest(campaign)["sizes"]
        if s["rounds"] == 100
    }
    return tuple(
        row
        for build in sized_builds(campaign)
        for row in slowed_cell_rows(
            campaign, build, (campaign, sizes[build["patch"], card(campaign, build["machine"])])
        )
    )


def bands(rows, skip_empty: bool = False) -> list[tuple[str, int, int, float, float]]:
    """Per true-size band: (band, caught, cells, and the caught rate's 95% interval)."""
    found = []
    for band, low, high in BANDS:
        inside = [r for r in rows if low <= r["true"] - 1 < high]
        if inside or not skip_empty:
            hits = sum(r["caught"] for r in inside)
            found.append((band, hits, len(inside), *rate_interval(hits, len(inside))))
    return found


def band_lines(rows, prefix: str = "true size", skip_empty: bool = False) -> list[str]:
    return [
        f"{prefix} {band}: {hits} of {n} caught, 95% interval [{lo:.0%}, {hi:.0%}]"
        for band, hits, n, lo, hi in bands(rows, skip_empty)
    ]


def rendered_detection(campaign: str = FIRST) -> list[str]:
    """The first campaign's table and its bands."""
    lines = [
        f"| {r['cell']} | {r['extra']} | {r['build']} | x{r['true']:.3f} [{r['true_low']:.3f}, {r['true_high']:.3f}] | "
        f"x{r['seen']:.3f} | {'caught' if r['caught'] else 'missed'} |"
        for r in sorted(detection_rows(campaign), key=lambda r: -r["true"])
    ]
    return lines + band_lines(detection_rows(campaign))


def margin_text(margin: float) -> str:
    return "not judged" if math.isnan(margin) else f"{margin:.1%}"


def rendered_detection_table(campaign: str = SECOND) -> list[str]:
    """A campaign's table (its folder's detection.md): every slowed cell, by shape set and true size."""
    return [
        f"| {r['set']} | {r['cell']} | {r['extra']} | {r['build']} | x{r['true']:.3f} [{r['true_low']:.3f}, "
        f"{r['true_high']:.3f}] | x{r['seen']:.3f} | {margin_text(r['margin'])} | "
        f"{'caught' if r['caught'] else 'missed'} |"
        for r in sorted(detection_rows(campaign), key=lambda r: (r["set"], -r["true"]))
    ]


def rendered_detection_bands(campaign: str = SECOND) -> list[str]:
    """A campaign's bands, over all its cells and by shape set, and those of it and the campaigns before it."""
    rows = detection_rows(campaign)
    lines = band_lines(rows)
    for name in ("quick", "membound", "llm"):
        lines += band_lines([r for r in rows if r["set"] == name], f"{name}: true size")
    if campaign == SECOND:
        return lines + band_lines(rows + detection_rows(FIRST), "both campaigns: true size")
    every = [r for c in (FIRST, SECOND, THIRD) for r in detection_rows(c)]
    lines += band_lines(every, "all three campaigns (H100 and H200): true size")
    return lines + band_lines([r for r in every if r["set"] == "quick"], "all three campaigns, quick: true size")


def rendered_false_alarms(campaign: str = FIRST) -> list[str]:
    """The A/A builds' outcomes and falsely alerted cells, and the regression builds' alerts on cells nothing
    slowed."""
    aa = [b for b in manifest(campaign)["builds"] if b["kind"] == "aa"]
    judged = [verdicts(campaign)[b["machine"]] for b in aa]
    red = [v for v in judged if v.outcome.value == "red"]
    compared = sum(v.suites[0].compared for v in judged)
    alerted = sum(len(v.suites[0].alerts) for v in judged)
    lo, hi = rate_interval(len(red), len(aa))
    cell_lo, cell_hi = rate_interval(alerted, compared)
    lines = [
        f"A/A builds red: {len(red)} of {len(aa)}, 95% interval [{lo:.0%}, {hi:.0%}]",
        f"A/A cells falsely alerted: {alerted} of {compared} compared, 95% interval [{cell_lo:.1%}, {cell_hi:.1%}]",
    ]
    for build in (b for b in manifest(campaign)["builds"] if b["kind"] == "regression"):
        (suite,) = verdicts(campaign)[build["machine"]].suites
        cells = suite.alerts[suite.alerts["epilog"].notna()]
        keys = zip(cells["epilog"], cells["provider"], cells["m"], cells["k"], cells["n"], strict=True)
        wrong = sorted({"/".join(map(str, key[:2])) for key in keys if key not in slowed(campaign, build["patch"])})
        lines.append(f"build {build['machine'][-4:]}: alerts on cells nothing slowed: {', '.join(wrong) or 'none'}")
    return lines


def group_gate(campaign: str, machine: str):
    """The whole-group gate of a build's verdict: its median time change against the group's margin."""
    (suite,) = verdicts(campaign)[machine].suites
    (gate,) = [g for g in suite.groups[0].judged.comparison.groups.itertuples()
               if g.provider == "*" and g.metric == "time"]  # fmt: skip
    return suite, gate


def rendered_group_builds(campaign: str = SECOND) -> list[str]:
    """Each whole-group build: its verdict and the group gate's median change."""
    lines = []
    for build in (b for b in manifest(campaign)["builds"] if b["kind"] == "group"):
        suite, gate = group_gate(campaign, build["machine"])
        lines.append(
            f"build {build['machine'][-4:]} ({build['patch'][:-6]}): {suite.outcome.value}, the group's median "
            f"x{gate.ratio:.4f} [{gate.ci_low:.4f}, {gate.ci_high:.4f}] against its {gate.threshold:.1%}"
        )
    return lines


@pytest.mark.parametrize("line", rendered_detection() + rendered_false_alarms())
def test_the_findings_page_quotes_the_tables_the_committed_paired_runs_give(line):
    assert " ".join(line.split()) in finding(FIRST)


@pytest.mark.parametrize("line", rendered_detection_bands() + rendered_false_alarms(SECOND) + rendered_group_builds())
def test_the_second_campaigns_page_quotes_its_rates_false_alarms_and_group_builds(line):
    assert " ".join(line.split()) in finding(SECOND)


def test_the_second_campaigns_detection_table_is_the_committed_runs():
    kept = [line for line in (folder(SECOND) / "detection.md").read_text().splitlines() if line.startswith("| ")]
    assert kept[1:] == rendered_detection_table() and len(kept) - 1 == 200  # below the header


@pytest.mark.parametrize(
    "line", rendered_detection_bands(THIRD) + rendered_false_alarms(THIRD) + rendered_group_builds(THIRD)
)
def test_the_third_campaigns_page_quotes_its_rates_false_alarms_and_group_builds(line):
    assert " ".join(line.split()) in finding(THIRD)


def test_the_third_campaigns_detection_table_is_the_committed_runs():
    kept = [line for line in (folder(THIRD) / "detection.md").read_text().splitlines() if line.startswith("| ")]
    assert kept[1:] == rendered_detection_table(THIRD) and len(kept) - 1 == 80  # below the header


def test_every_campaign_machine_is_committed_with_both_sides_and_a_record_naming_the_pair():
    for run in (r for c in CAMPAIGNS for r in manifest(c)["builds"] + manifest(c)["sizes"]):
        folder = ROOT / "results" / run["machine"]
        records = [json.loads(p.read_text()) for p in folder.glob("*.fbenv")]
        sides = {r["environment"]["paired"]["side"]: r["commit"] for r in records}
        assert set(sides) == {"baseline", "candidate"} and len(list(folder.glob("*-existing-*.json"))) == 2
        assert all(r["environment"]["paired"]["rounds"] == run["rounds"] for r in records)


@pytest.mark.parametrize(
    "campaign, patch",
    [
        (FIRST, "regression-0.patch"),
        (SECOND, "membound-0.patch"),
        (THIRD, "h200membound-0.patch"),
        (THIRD, "h200llm-0.patch"),  # judged by the llm cells' margins the fourth campaign earned
    ],
)
def test_the_report_judges_a_paired_session_as_alert_does(capsys, campaign, patch):
    """The report's verdict of a paired session is `fusedbench alert --machine <session>`'s, suite by suite: for a
    narrowed Fp16Membound session, each suite that holds the group, judged over the cells it was asked for."""
    from test_alert_cli import run_cli

    from fusedbench.regressions.gate import PAIRED_LINE, judge_every_suite
    from fusedbench.regressions.render import to_json

    (machine,) = [b["machine"] for b in manifest(campaign)["builds"] if b.get("patch") == patch]
    (verdict,) = judge_every_suite(load_results(str(ROOT / "results"), machines=[machine]), [machine])
    code, out, _ = run_cli(capsys, "alert", "--machine", machine, "--format", "json")
    assert code == 1 and to_json(verdict)["suites"] == json.loads(out)["suites"]
    assert all(suite.preset_line == PAIRED_LINE for suite in verdict.suites)
    assert campaign != FIRST or to_json(verdict) == to_json(verdicts(FIRST)[machine])
    assert campaign == FIRST or all((s.cells, s.compared) == (96, 96) for s in verdict.suites)


def test_a_rates_interval_is_wilsons_and_stays_open_at_none_and_all():
    low, high = rate_interval(19, 20)
    assert (round(low, 3), round(high, 3)) == (0.764, 0.991)  # Wilson's 95% score interval of 19 in 20
    assert rate_interval(0, 20)[0] == 0.0 and 0.15 < rate_interval(0, 20)[1] < 0.17
    assert rate_interval(20, 20)[1] == 1.0 and math.isnan(rate_interval(0, 0)[0])


def aa_sessions(*campaigns: str, selection: str = "quick") -> list[str]:
    """The campaigns' A/A sessions of one selection (the first two timed quick's alone)."""
    return [
        b["machine"]
        for c in campaigns
        for b in manifest(c)["builds"]
        if b["kind"] == "aa" and b.get("selection", "quick") == selection
    ]


@functools.cache
def held_out_margins(sessions: tuple[str, ...], card: str | None):
    """The margins the sessions off `card` earn (`calibrate --paired ... --held-out-card`), its figures among them:
    computed once for the page's lines and the totals that share them."""
    from fusedbench.regressions.margins import earn_paired_margins

    return earn_paired_margins(campaign_results(), list(sessions), card)[0]


def held_out_totals(name: str, sessions: list[str]) -> str:
    """Every session judged by margins earned without it: those the sessions of the other cards earn
    (`calibrate --paired ... --held-out-card`), each card held out in turn."""
    cards = cards_of(sessions)
    held = [held_out_margins(tuple(sessions), card).rates["held_out"] for card in cards]
    red = sorted(s[-4:] for out in held for s in out["red"])
    alerts, cells = sum(out["alerts"] for out in held), sum(out["cells"] for out in held)
    lo, hi = rate_interval(len(red), len(sessions))
    cell_lo, cell_hi = rate_interval(alerts, cells)
    return (
        f"{name}: {len(sessions)} A/A sessions on {len(cards)} cards, each judged by the margins the other cards' "
        f"sessions earn: {len(red)} red{' (' + ', '.join(red) + ')' if red else ''}, 95% interval [{lo:.0%}, "
        f"{hi:.0%}]; {alerts} alerts over {cells} cells' times compared, 95% interval [{cell_lo:.1%}, {cell_hi:.1%}]"
    )


OUT_OF_SAMPLE = {  # a page's line: the campaigns whose A/A sessions of a selection are judged, each card held out
    THIRD: {
        "H100 quick": ((FIRST, SECOND), "quick"),
        "H200 quick": ((THIRD,), "quick"),
        "H200 membound": ((THIRD,), "membound"),
    },
    FOURTH: {
        "H200 llm": ((FOURTH,), "llm"),
        "H200 membound, campaigns 3 and 4": ((THIRD, FOURTH), "membound"),
    },
    FIFTH: {"H200 membound, campaign 5": ((FIFTH,), "membound")},
}


def rendered_out_of_sample(page: str) -> list[str]:
    return [
        held_out_totals(name, aa_sessions(*campaigns, selection=selection))
        for name, (campaigns, selection) in OUT_OF_SAMPLE[page].items()
    ]


def cards_of(sessions: list[str]) -> list[str]:
    """The cards the sessions ran on, as their records say."""
    from fusedbench.regressions.margins import session_card

    return sorted({session_card(campaign_results(), s)[:12] for s in sessions})


def held_out_line(sessions: list[str], held_out: str, medium: bool = False) -> str:
    """The margins the sessions off one card earn (`calibrate --paired ... --held-out-card`), and that card's sessions
    judged by them."""
    preset = held_out_margins(tuple(sessions), held_out)
    out = preset.rates["held_out"]
    between = f", at 1-5 ms past {preset.threshold('time', 'medium'):.1%}" if medium else ""
    return (
        f"held out {held_out}: {preset.pairs} sessions earn a cell's time at 5 ms or more past "
        f"{preset.threshold('time', 'large'):.1%}{between}, a group's median past "
        f"{preset.threshold('time', 'group'):.1%}; "
        f"{len(out['red'])} of {len(out['sessions'])} held-out sessions red, {out['alerts']} alerts over "
        f"{out['cells']} cells' times compared"
    )


@pytest.mark.parametrize(
    "campaigns, held_out",
    [
        ((FIRST,), "GPU-c1c6f432"),
        ((FIRST,), "GPU-6961b72d"),
        *(
            ((FIRST, SECOND), card)
            for card in ("GPU-2678c090", "GPU-32ecb179", "GPU-5bf2aa0d", "GPU-6961b72d", "GPU-c1c6f432")
        ),
    ],
)
def test_the_paired_aa_sessions_earn_margins_and_the_held_out_cards_sessions_are_judged_by_them(campaigns, held_out):
    page = FIRST if campaigns == (FIRST,) else SECOND
    assert " ".join(held_out_line(aa_sessions(*campaigns), held_out).split()) in finding(page)


def rendered_held_out(campaign: str, selection: str, medium: bool) -> list[str]:
    """Each card of the campaign's A/A sessions of a selection held out in turn."""
    sessions = aa_sessions(campaign, selection=selection)
    return [f"{selection}: {held_out_line(sessions, card, medium)}" for card in cards_of(sessions)]


@pytest.mark.parametrize(
    "line",
    rendered_held_out(THIRD, "quick", False)
    + rendered_held_out(THIRD, "membound", True)
    + rendered_out_of_sample(THIRD),
)
def test_the_third_campaigns_page_gives_each_h200_cards_held_out_figures_and_every_session_judged_out_of_sample(line):
    assert " ".join(line.split()) in finding(THIRD)


def test_the_h200s_margins_in_force_hold_out_a_card_of_the_second_lease_and_narrowed_ones_judge_their_cells_alone():
    """presets.json keeps what `calibrate --paired <the H200's A/A sessions of one selection> --held-out-card <the
    second lease's card 0 or the one with most of them> --write` earns now (quick's from the third campaign, llm's from
    the fourth, membound's from the fifth: sessions that time a cell that moved again in a second preparation); the
    narrowed sessions' margins judge sessions of their cells, never the whole group; sessions of two selections earn
    nothing together."""
    from fusedbench.catalog.suites import ASV_VERSIONS
    from fusedbench.errors import FusedbenchError
    from fusedbench.regressions.margins import earn_paired_margins
    from fusedbench.regressions.thresholds import margins_for

    def regex(campaign: str, selection: str) -> str:
        return manifest(campaign)["selections"][selection].split("--cells ")[1]

    machine = "h200-141gb-paired-x"
    for campaign, selection, group, card, cells in (
        (THIRD, "quick", "Quick", "GPU-cf359efd", ""),
        (FIFTH, "membound", "Fp16Membound", "GPU-fd372753", regex(FIFTH, "membound")),
        (FOURTH, "llm", "Fp16Llm", "GPU-1d910957", regex(FOURTH, "llm")),
    ):
        earned = held_out_margins(tuple(aa_sessions(campaign, selection=selection)), card)
        in_force = margins_for(machine, group, ASV_VERSIONS[group], cells)
        assert in_force.to_json() == earned.to_json() and in_force.cells == cells
        if cells:  # the whole group: not them
            assert margins_for(machine, group, ASV_VERSIONS[group]).cells == ""
    both = aa_sessions(THIRD)[:2] + aa_sessions(THIRD, selection="membound")[:2]
    with pytest.raises(FusedbenchError, match=r"names sessions of 2 sets of cells \(whole groups: .*; --cells "):
        earn_paired_margins(campaign_results(), both)


def test_the_margins_in_force_are_those_the_sessions_off_gpu_2678c090_earn_each_class_the_worst_a_session_showed():
    """presets.json keeps what `calibrate --paired <both campaigns' A/A sessions> --held-out-card GPU-2678c090 --write`
    earned: each class's margin the worst change the gate itself finds in those sessions, both ways, among those whose
    interval lies above no change, half a per cent more, rounded up to the half per cent (recomputed here from the
    gate's comparisons, not from the calibration's code)."""
    from fusedbench.catalog.suites import ASV_VERSIONS
    from fusedbench.regressions.calibration import STEP, rounded_up
    from fusedbench.regressions.compare import compare_runs
    from fusedbench.regressions.margins import paired_sides, session_card
    from fusedbench.regressions.metrics import WORSE_WHEN_LOWER
    from fusedbench.regressions.thresholds import margins_for

    sessions = aa_sessions(FIRST, SECOND)
    results = load_results(str(ROOT / "results"), machines=sessions)
    kept = [s for s in sessions if not session_card(results, s).startswith("GPU-2678c090")]
    in_force = margins_for("h100-80gb-hbm3-paired-x", "Quick", ASV_VERSIONS["Quick"])
    assert in_force.pairs == len(kept) == 24 and in_force.rates["held_out"]["card"] == "GPU-2678c090"
    assert in_force.rates["left_out_red"] == 0 and in_force.rates["sessions_by_group"] == {"Quick": 24}
    worst: dict[tuple[str, str], float] = {}
    for session in kept:
        base, cand = paired_sides(results, session)
        for one, other in ((base, cand), (cand, base)):
            comparison = compare_runs(one, other, in_force, replicates=200)
            rows = [
                (m, "large", r, lo, hi)
                for m, r, lo, hi in comparison.cells[["metric", "ratio", "ci_low", "ci_high"]]
                .dropna()
                .itertuples(index=False)
            ]  # every quick cell is of 5 ms or more
            rows += list(comparison.groups[["metric", "gate", "ratio", "ci_low", "ci_high"]].itertuples(index=False))
            for metric, klass, ratio, low, high in rows:
                worse, worse_low = (1 / ratio, 1 / high) if metric in WORSE_WHEN_LOWER else (ratio, low)
                could = worse - 1 if worse_low > 1 else 0.0
                worst[(metric, klass)] = max(worst.get((metric, klass), 0.0), could)
    assert {key: rounded_up(value + STEP) for key, value in worst.items()} == {
        key: in_force.threshold(*key) for key in worst
    }
    assert in_force.threshold("time", "large") == 0.02


def test_calibrate_paired_says_how_many_sessions_left_out_the_margins_turn_red_and_what_the_held_out_card_did(capsys):
    from test_alert_cli import run_cli

    sessions = ",".join(aa_sessions(FIRST, SECOND))
    code, out, _ = run_cli(capsys, "calibrate", str(ROOT / "results"), "--paired", sessions, "--held-out-card",
                           "GPU-2678c090")  # fmt: skip
    folded = " ".join(out.split())
    assert code == 0 and "0 of 24 sessions red by the margins the others earn, each left out in turn (0.0%" in folded
    assert "held out GPU-2678c090: 0 of 5 sessions red by these margins, 0 alerts over 140 cells' times compared" in out


def test_a_confirmation_of_a_narrowed_session_is_decided_by_the_margins_its_cells_earned():
    """`alert --confirm` of an `ab --cells` session re-judges its flagged workloads by the margins its first look
    used, those the sessions of its regex earned, not the whole group's."""
    from fusedbench.regressions.confirm import flag, judge_confirmation

    (build,) = [b["machine"] for b in manifest(THIRD)["builds"] if b.get("patch") == "h200membound-0.patch"]
    results = campaign_results()
    (group,) = verdicts(THIRD)[build].suites[0].groups
    first_look = group.judged.comparison.preset
    (flagged,) = flag(verdicts(THIRD)[build])
    sides = [[cell for r in results.records if (r.machine, r.commit) == (build, run.commit) for cell in r.cells]
             for run in (group.baseline, group.candidate)]  # fmt: skip
    confirmation = judge_confirmation(flagged, "side by side", *sides, rounds=10, seconds=1.0, calls=1)
    assert first_look.cells and confirmation.decided_by == first_look.name


# The fourth campaign (H200s, two more leases): Fp16Llm's and Fp16Membound's cells' A/A sessions, whole-group builds.
def rendered_fourth_sessions_judged() -> list[str]:
    """The fourth campaign's membound sessions judged by the margins in force, which the third's earned without
    them, and its Fp16Seed session by the H200's side-by-side margins, as `fusedbench alert --machine` judges them."""
    membound = [verdicts(FOURTH)[s] for s in aa_sessions(FOURTH, selection="membound")]
    red = sorted(v.suites[0].groups[0].candidate.machine[-4:] for v in membound if v.outcome.value == "red")
    alerts = sum(len(v.suites[0].alerts) for v in membound)
    compared = sum(v.suites[0].compared for v in membound)
    (seed,) = [verdicts(FOURTH)[s] for s in aa_sessions(FOURTH, selection="seed")]
    (group,) = seed.suites[0].groups
    return [
        f"campaign 4's {len(membound)} membound A/A sessions, judged by the margins in force (earned without them): "
        f"{len(red)} red ({', '.join(red) or 'none'}), {alerts} alerts over {compared} cells' times compared",
        f"the paired Fp16Seed A/A session ({group.candidate.machine[-4:]}): {seed.outcome.value}, "
        f"{len(seed.suites[0].alerts)} alerts over {seed.suites[0].compared} cells compared, judged by "
        f"{group.judged.comparison.preset.name}",
    ]


def rendered_group_totals() -> list[str]:
    """Every whole-group build of the campaigns (H100s and H200s), caught when its group gate put it slower."""
    builds = [(c, b["machine"]) for c in (SECOND, THIRD, FOURTH) for b in manifest(c)["builds"] if b["kind"] == "group"]
    caught = sum(group_gate(c, m)[1].verdict is Verdict.SLOWER for c, m in builds)
    lo, hi = rate_interval(caught, len(builds))
    return [
        f"whole-group builds caught by the group gate: {caught} of {len(builds)}, 95% interval [{lo:.0%}, {hi:.0%}]"
    ]


SET_ROWS = {"quick": ("quick",), "membound": ("membound",), "llm": ("llm",), "quick and llm": ("quick", "llm"),
            "all": ("quick", "membound", "llm")}  # fmt: skip


def rendered_detection_by_gpu(h200: tuple[str, ...] = (THIRD,)) -> list[str]:
    """Every sized build of the campaigns (the H200's of `h200`), re-judged by the margins in force: a row per GPU
    model, shape set and true-size band."""
    by_gpu = {"H100": [r for c in (FIRST, SECOND) for r in detection_rows(c)],
              "H200": [r for c in h200 for r in detection_rows(c)]}  # fmt: skip
    by_gpu["both"] = by_gpu["H100"] + by_gpu["H200"]
    return [
        f"| {gpu} | {name} | {band} | {hits} of {n} | [{lo:.0%}, {hi:.0%}] |"
        for gpu, rows in by_gpu.items()
        for name, sets in SET_ROWS.items()
        for band, hits, n, lo, hi in bands([r for r in rows if r["set"] in sets], skip_empty=True)
    ]


def rendered_cross_card_sizes() -> list[str]:
    """The third campaign's second quick build (3d9d) beside its cells' sizes measured by the fourth on another card:
    not the same card, so outside the tables above."""
    (build,) = [b for b in manifest(THIRD)["builds"] if b.get("patch") == "h200quick-1.patch"]
    (sizes,) = manifest(FOURTH)["sizes"]
    rows = slowed_cell_rows(THIRD, build, (FOURTH, sizes["machine"]))
    return band_lines(rows, f"3d9d ({card(THIRD, build['machine'])}) beside sizes on {sizes['card']}: true size", True)


@pytest.mark.parametrize(
    "line",
    rendered_held_out(FOURTH, "llm", True)
    + rendered_out_of_sample(FOURTH)
    + rendered_fourth_sessions_judged()
    + rendered_group_builds(FOURTH)
    + rendered_group_totals()
    + rendered_detection_by_gpu()
    + rendered_cross_card_sizes(),
)
def test_the_fourth_campaigns_page_gives_the_llm_margins_held_out_group_builds_and_detection_by_gpu(line):
    assert " ".join(line.split()) in finding(FOURTH)


@pytest.mark.parametrize(("page", "h200"), [(FOURTH, (THIRD,)), (FIFTH, (THIRD, FIFTH))])
def test_a_campaigns_table_by_gpu_is_exactly_the_rendered_rows(page, h200):
    """The fourth campaign's table, its H200 rows the third's builds; the fifth's, the third's and its own."""
    rows = [line for line in finding(page, folded=False).splitlines() if line.startswith("| H") or
            line.startswith("| both")]  # fmt: skip
    assert rows == rendered_detection_by_gpu(h200)


def second_preparations(selection: str) -> list[dict]:
    """The fifth campaign's A/A sessions of a selection: each cell timed again in a second preparation (its rounds
    past the first 10), with its change over the first preparation's rounds, the second's and all of them (a cell
    whose two sides ran different picks left out: the pick, not the preparation, would move it)."""
    from fusedbench.regressions.margins import paired_sides

    rows = []
    for session in aa_sessions(FIFTH, selection=selection):
        base, cand = paired_sides(campaign_results(), session)
        keys = ["epilog", "dtype", "m", "k", "n", "provider"]
        both = base.cells.merge(cand.cells, on=keys, suffixes=("_base", "_cand"))
        for row in both.itertuples():
            before, after = row.raw_base, row.raw_cand
            if row.algorithm_base != row.algorithm_cand or min(len(before), len(after)) <= SAMPLES:
                continue
            looks = {"first": slice(SAMPLES), "second": slice(SAMPLES, None), "all": slice(None)}
            change = {look: statistics.median(after[cut]) / statistics.median(before[cut]) - 1
                      for look, cut in looks.items()}  # fmt: skip
            rows.append({"session": session[-4:], "cell": f"{row.epilog}/{row.provider}",
                         "ms": statistics.median(before) * 1e3, **change})  # fmt: skip
    return rows


def rendered_second_preparations() -> list[str]:
    """Per selection, how many cells were timed again and what the second preparation made of those whose first 10
    rounds moved 2% or more; then each of those cells."""
    lines, moved = [], []
    for selection in ("quick", "membound", "llm"):
        rows = second_preparations(selection)
        far = [r for r in rows if abs(r["first"]) >= 0.02]
        moved += [(selection, r) for r in far]
        lines.append(
            f"{selection}: {len(rows)} cells of {len(aa_sessions(FIFTH, selection=selection))} A/A sessions timed "
            f"again in a second preparation; {len(far)} had moved 2% or more in their first 10 rounds, of which "
            f"{sum(abs(r['second']) >= 0.01 for r in far)} moved 1% or more in the second's 20 and "
            f"{sum(abs(r['all']) >= 0.015 for r in far)} stayed 1.5% or more over all 30"
        )
    lines += [
        f"{selection} {r['session']}, {r['cell']} ({r['ms']:.2f} ms): first {r['first']:+.2%}, second "
        f"{r['second']:+.2%}, all 30 rounds {r['all']:+.2%}"
        for selection, r in sorted(moved, key=lambda m: -abs(m[1]["first"]))
    ]
    return lines


def rendered_fifth_sessions_judged() -> list[str]:
    """The fifth campaign's A/A sessions judged by the margins in force (quick's and llm's earned without them), and
    the earlier campaigns' membound sessions (one preparation a cell) by the membound margins the fifth earned."""
    lines = []
    for selection in ("quick", "llm", "membound"):
        judged = [verdicts(FIFTH)[s] for s in aa_sessions(FIFTH, selection=selection)]
        red = sorted(v.suites[0].groups[0].candidate.machine[-4:] for v in judged if v.outcome.value == "red")
        lines.append(
            f"campaign 5's {len(judged)} {selection} A/A sessions, judged by the margins in force: {len(red)} red"
            f"{' (' + ', '.join(red) + ')' if red else ''}, {sum(len(v.suites[0].alerts) for v in judged)} alerts "
            f"over {sum(v.suites[0].compared for v in judged)} cells compared"
        )
    earlier = [verdicts(c)[s] for c in (THIRD, FOURTH) for s in aa_sessions(c, selection="membound")]
    red = sorted(v.suites[0].groups[0].candidate.machine[-4:] for v in earlier if v.outcome.value == "red")
    lines.append(
        f"campaigns 3 and 4's {len(earlier)} membound A/A sessions (one preparation a cell), judged by the margins "
        f"campaign 5 earned: {len(red)} red{' (' + ', '.join(red) + ')' if red else ''}"
    )
    return lines


@pytest.mark.parametrize(
    "line",
    rendered_held_out(FIFTH, "membound", True)
    + rendered_out_of_sample(FIFTH)
    + rendered_fifth_sessions_judged()
    + rendered_second_preparations()
    + band_lines(detection_rows(FIFTH), "membound builds: true size", skip_empty=True)
    + rendered_group_totals(),
)
def test_the_fifth_campaigns_page_gives_the_second_preparations_the_membound_margins_and_detection(line):
    assert " ".join(line.split()) in finding(FIFTH)
