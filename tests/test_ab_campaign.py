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
from pathlib import Path

import pytest
from conftest import finding

from fusedbench.regressions.compare import Verdict
from fusedbench.regressions.gate import default_choice, judge
from fusedbench.results.loader import load_results

ROOT = Path(__file__).parent.parent
CAMPAIGN = ROOT / "docs" / "findings" / "2026-11-28-ab-paired-runs"
BANDS = (("5% or more", 0.05, 1.0), ("3% to 5%", 0.03, 0.05), ("under 3%", 0.0, 0.03))


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
def manifest() -> dict:
    return json.loads((CAMPAIGN / "campaign.json").read_text())


@functools.cache
def slowed(patch: str) -> dict[tuple[str, str], int]:
    """The cells a regression build slows, (epilog, provider) -> K: two passes over 1/K of D's rows."""
    text = (CAMPAIGN / patch).read_text()
    return ast.literal_eval(re.search(r"slower = (\{.*?\})\.get", text).group(1))


@functools.cache
def verdicts() -> dict:
    """Each campaign machine's verdict, as `fusedbench alert --machine M` gives it."""
    runs = manifest()["builds"] + manifest()["sizes"]
    results = load_results(str(ROOT / "results"), machines=[run["machine"] for run in runs])
    return {run["machine"]: judge(results, default_choice(results, run["machine"], suites=("quick",))) for run in runs}


def time_rows(machine: str):
    (suite,) = verdicts()[machine].suites
    cells = suite.groups[0].judged.comparison.cells
    return {(row.epilog, row.provider): row for row in cells[cells["metric"] == "time"].itertuples()}


def card(machine: str) -> str:
    results = load_results(str(ROOT / "results"), machines=[machine])
    (uuid,) = {record.environment["gpu"]["uuid"][:12] for record in results.records}
    return uuid


def detection_rows() -> list[dict]:
    """A row per slowed cell the build measured: its true size (the 100-round run's change and interval) and whether
    the build's 10-round verdict caught it (its time slower)."""
    sizes = {(s["patch"], card(s["machine"])): s["machine"] for s in manifest()["sizes"] if s["rounds"] == 100}
    rows = []
    for build in (b for b in manifest()["builds"] if b["kind"] == "regression"):
        measured, truth = time_rows(build["machine"]), time_rows(sizes[(build["patch"], card(build["machine"]))])
        for cell, k in sorted(slowed(build["patch"]).items()):
            if cell not in measured:  # a cell the build does not time (torch has no op for it)
                continue
            true = truth[cell]
            rows.append({
                "cell": "/".join(cell), "k": k, "build": build["machine"][-4:], "seen": measured[cell].ratio,
                "true": true.ratio, "true_low": true.ci_low, "true_high": true.ci_high,
                "caught": measured[cell].verdict is Verdict.SLOWER,
            })  # fmt: skip
    return rows


def rendered_detection() -> list[str]:
    lines = [
        f"| {r['cell']} | 1/{r['k']} | {r['build']} | x{r['true']:.3f} [{r['true_low']:.3f}, {r['true_high']:.3f}] | "
        f"x{r['seen']:.3f} | {'caught' if r['caught'] else 'missed'} |"
        for r in sorted(detection_rows(), key=lambda r: -r["true"])
    ]
    for band, low, high in BANDS:
        inside = [r for r in detection_rows() if low <= r["true"] - 1 < high]
        hits = sum(r["caught"] for r in inside)
        lo, hi = rate_interval(hits, len(inside))
        lines.append(f"true size {band}: {hits} of {len(inside)} caught, 95% interval [{lo:.0%}, {hi:.0%}]")
    return lines


def rendered_false_alarms() -> list[str]:
    """The A/A builds' outcomes and falsely alerted cells, and the regression builds' alerts on cells nothing
    slowed."""
    aa = [b for b in manifest()["builds"] if b["kind"] == "aa"]
    red = [b for b in aa if verdicts()[b["machine"]].outcome.value == "red"]
    compared = sum(verdicts()[b["machine"]].suites[0].compared for b in aa)
    alerted = sum(len(verdicts()[b["machine"]].suites[0].alerts) for b in aa)
    lo, hi = rate_interval(len(red), len(aa))
    cell_lo, cell_hi = rate_interval(alerted, compared)
    lines = [
        f"A/A builds red: {len(red)} of {len(aa)}, 95% interval [{lo:.0%}, {hi:.0%}]",
        f"A/A cells falsely alerted: {alerted} of {compared} compared, 95% interval [{cell_lo:.1%}, {cell_hi:.1%}]",
    ]
    for build in (b for b in manifest()["builds"] if b["kind"] == "regression"):
        (suite,) = verdicts()[build["machine"]].suites
        cells = suite.alerts[suite.alerts["epilog"].notna()]
        wrong = sorted({f"{e}/{p}" for e, p in zip(cells["epilog"], cells["provider"], strict=True)}
                       - {"/".join(c) for c in slowed(build["patch"])})  # fmt: skip
        lines.append(f"build {build['machine'][-4:]}: alerts on cells nothing slowed: {', '.join(wrong) or 'none'}")
    return lines


@pytest.mark.parametrize("line", rendered_detection() + rendered_false_alarms())
def test_the_findings_page_quotes_the_tables_the_committed_paired_runs_give(line):
    assert " ".join(line.split()) in finding("ab-paired-runs")


def test_every_campaign_machine_is_committed_with_both_sides_and_a_record_naming_the_pair():
    for run in manifest()["builds"] + manifest()["sizes"]:
        folder = ROOT / "results" / run["machine"]
        records = [json.loads(p.read_text()) for p in folder.glob("*.fbenv")]
        sides = {r["environment"]["paired"]["side"]: r["commit"] for r in records}
        assert set(sides) == {"baseline", "candidate"} and len(list(folder.glob("*-existing-*.json"))) == 2
        assert all(r["environment"]["paired"]["rounds"] == run["rounds"] for r in records)


def test_the_report_judges_a_paired_session_as_alert_does():
    from fusedbench.regressions.gate import PAIRED_LINE, judge_every_suite
    from fusedbench.regressions.render import to_json

    machine = manifest()["builds"][0]["machine"]
    (verdict,) = judge_every_suite(load_results(str(ROOT / "results"), machines=[machine]), [machine])
    assert to_json(verdict) == to_json(verdicts()[machine]) and verdict.suites[0].preset_line == PAIRED_LINE


def test_a_rates_interval_is_wilsons_and_stays_open_at_none_and_all():
    low, high = rate_interval(19, 20)
    assert (round(low, 3), round(high, 3)) == (0.764, 0.991)  # Wilson's 95% score interval of 19 in 20
    assert rate_interval(0, 20)[0] == 0.0 and 0.15 < rate_interval(0, 20)[1] < 0.17
    assert rate_interval(20, 20)[1] == 1.0 and math.isnan(rate_interval(0, 0)[0])


@pytest.mark.parametrize("held_out", ["GPU-c1c6f432", "GPU-6961b72d"])
def test_the_paired_aa_sessions_earn_margins_and_the_held_out_cards_sessions_are_judged_by_them(held_out):
    from fusedbench.regressions.margins import earn_paired_margins

    sessions = [b["machine"] for b in manifest()["builds"] if b["kind"] == "aa"]
    results = load_results(str(ROOT / "results"), machines=sessions)
    preset, held = earn_paired_margins(results, sessions, held_out)
    alerts = sum(len(judged.alerts) for _, judged in held)
    cells = sum(int((judged.comparison.cells["metric"] == "time").sum()) for _, judged in held)
    red = sum(judged.failed for _, judged in held)
    line = (
        f"`{preset.name}`, a cell's time at 5 ms or more past {preset.threshold('time', 'large'):.1%}; held out "
        f"{held_out}: {red} of {len(held)} sessions red by these margins, {alerts} alerts over {cells} cells' times "
        "compared"
    )
    assert preset.pairs == 2 and " ".join(line.split()) in finding("ab-paired-runs").replace("earn `", "`")
