"""`fusedbench report`: one self-contained HTML file from asv results, light enough to open at once.

The report only draws: every number comes from `fusedbench.analysis.speedups` on the tidy table of
`fusedbench.results.loader`. Every section and figure has a stable HTML id named after what it shows
(`#h100-80gb-hbm3-heatmap`), so links into a report keep working and the same results
give the same bytes. plotly.js is embedded once: a bundle of the trace types the report draws (scatter, heatmap,
box), vendored beside this file, where plotly.py writes figures for the same version.
"""

from __future__ import annotations

import html
import importlib.util
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from fusedbench.analysis.speedups import (
    INVERSION,
    INVERSIONS_COLUMN,
    OVER_UNFUSED,
    headline,
    ladder_cells,
    machine_pairs,
    speedups,
    with_shape,
)
from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.suites import CONTROL_GROUPS, PEER_ONLY_GROUPS
from fusedbench.errors import FusedbenchError
from fusedbench.files import check_writable_file, check_writable_folder, write_bytes_atomically, write_text_atomically
from fusedbench.regressions.changes import GROUP_SERIES
from fusedbench.regressions.gate import judge_every_suite
from fusedbench.regressions.thresholds import cell_class
from fusedbench.report.figures import (
    add_title_line,
    dtype_views,
    headline_figure,
    heatmap_views,
    ladder_figure,
    machines_figure,
    merge_views,
    speedup_heatmap,
    trend_figure,
)
from fusedbench.report.forked import in_child
from fusedbench.report.mlp import mlp_section, step_png_figure, step_table
from fusedbench.report.peers import PEERS_VIEW, in_peers_suite, machine_peers, peers_intro
from fusedbench.report.plot_margins import reserve_margins
from fusedbench.report.tables import (
    SORTABLE,
    TABLE_SCRIPT,
    advice_section,
    anchor,
    compared_rows,
    csv_link,
    environment_card,
    history_table,
    multi_kernel_table,
    noisy_table,
    not_run_table,
    plural,
    status_strip,
    table_html,
    verdict_section,
)
from fusedbench.report.views import VIEW_SCRIPT, figure_label, take_view_selects
from fusedbench.results.loader import ResultSet, select_cells
from fusedbench.results.runs import cells_of_runs, commits_in_order, gpu_machines, group_runs, newest_runs

REPORT_NAME = "index.html"
PNG_WIDTH, PNG_SCALE = 1100, 2  # sharp on HiDPI screens
# plotly.js built with only the trace types the report draws (plotly.js's custom bundle: its package.json, entry.js
# and build.js are beside it, with plotly.js's LICENSE): it loads in a third of the time of the cartesian bundle
VENDORED_PLOTLY = Path(__file__).parent / "plotlyjs"
TREND_CELLS = 8  # at most this many cells drawn over commits per machine: where fusion pays most and least, alerted

GLOSSARY = {
    "textbook": "the seed blog's naive code: the matmul, then each pointwise step as its own cupy (or torch) "
    "statement, in the blog's layout",
    "unfused": "the best honest version without fusion: the same cuBLASLt GEMM, then one pass at copy bandwidth "
    "for all the pointwise work, and one row reduction per bias gradient",
    "fused": "the cuBLASLt epilog through nvmath-python, the algorithm cuBLASLt's heuristic ranks first",
    "fused-autotuned": "the same epilog with the fastest algorithm the heuristic offers, timed as the cells are",
    "gemm": "the plain GEMM alone, no epilog: what the epilog's cost is measured against",
    "DEFAULT": "the epilog that does nothing: the plain GEMM through the fused provider (a control)",
    "AUX": "an epilog that also writes its pre-activation (GELU) or ReLU bit-mask for the backward pass",
    "DRELU / DGELU": "the backward epilogs: the gradient masked by ReLU's mask or scaled by GELU's derivative",
    "BGRADA / BGRADB": "the bias gradient of A or B: a row sum of an operand, fused into the weight-gradient GEMM",
    "speedup": "the baseline's time over fused's time (above 1x: fusion pays), the median of round-by-round "
    "ratios where the run paired its samples",
    "grey cell": "a speedup's paired 95% interval includes 1x, or an epilog cost's includes 0%: the two timings are "
    "not told apart",
    "epilog cost": "fused / gemm - 1: what the epilog adds to the plain GEMM",
    "floor": "max(FLOPs / GEMM rate, bytes / copy bandwidth), the best the machine's runs saw for the dtype: the least "
    "time the work can take; a ladder point below it is drawn open (the GEMM alone skips the epilog's bytes)",
    "arithmetic intensity": "the GEMM's FLOPs per element of A, B and D it moves, 2MNK / (MK + KN + MN)",
    "multi-kernel (*)": "a fused cell whose call launched more than one kernel: the fused API, run unfused",
    "n/a": "a cell that was not timed: its reason is in the machine's 'cells that did not run'",
    "measurement change": "a commit whose benchmarks time differently (asv's benchmark version changed): steps "
    "in the history there are the method's, not the code's",
}

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; padding: 0 1rem; max-width: 1200px; color: #222;
  overflow-wrap: break-word; }  /* a cell's label longer than a phone's line breaks there, not the page */
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.3rem; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
table, [role=figure] { display: block; max-width: 100%; overflow-x: auto; }  /* they scroll, not the page */
/* a figure keeps the width its labels and cell values need and scrolls inside its box on a narrower screen (a
   phone), rather than squeezing its plot into a sliver between the epilog names and the colour bar */
[role=figure] .plotly-graph-div { min-width: 900px; }
/* side padding small enough that the headline tables fit 1280 px */
th, td { border: 1px solid #ddd; padding: 0.25rem 0.45rem; text-align: left; vertical-align: top; }
.nobr { white-space: nowrap; }  /* a name with a hyphen (fused-autotuned) is not broken there */
th.n, td.n { text-align: right; font-variant-numeric: tabular-nums; }  /* numbers line up by their digits */
th { background: #f5f5f5; }
.card { display: inline-block; vertical-align: top; margin: 0 1rem 1rem 0; max-width: calc(100% - 1rem); }
.muted { color: #666; font-size: 0.9rem; } #summary p { font-size: 1.05rem; max-width: 60rem; }
.toc { columns: 3; font-size: 0.9rem; } .toc .level-3 { margin-left: 1rem; }
.glossary dt { font-weight: 600; } .glossary dd { margin: 0 0 0.4rem 1rem; }
details summary { cursor: pointer; margin: 0.3rem 0; }
.views { margin: 0.5rem 0 -0.5rem; position: relative; z-index: 1; }  /* above the plot's top margin, not under */
.views select { font-size: 0.95rem; padding: 0.15rem; margin-right: 1rem; }
#status { display: flex; flex-wrap: wrap; gap: 0.5rem; margin: 1rem 0; }
#status a { display: block; padding: 0.4rem 0.7rem; border: 2px solid #999; border-radius: 4px; color: #222;
  text-decoration: none; min-width: 9.5rem; font-size: 0.9rem; background: #f5f5f5; }
#status a.green { border-color: #1a7f37; background: #e6f4ea; }
#status a.red { border-color: #b3261e; background: #fce8e6; }
th > button { font: inherit; font-weight: 600; color: inherit; background: none; border: 0; padding: 0;
  cursor: pointer; text-align: inherit; }  /* a sortable table's header: a button, read as the header it was */
th[aria-sort=ascending] > button::after { content: " \\25B2"; }
th[aria-sort=descending] > button::after { content: " \\25BC"; }
input[type=search] { font-size: 0.9rem; margin: 0.3rem 0 0; }
#status .word { font-weight: 600; text-transform: uppercase; } #status .runs { color: #555; font-size: 0.8rem; }
"""


def plotly_bundle() -> tuple[str, str]:
    """(plotly.js, which bundle): the vendored partial bundle where its version is the one plotly.py's figures
    are written for; else plotly.py's full bundle (heavier, never wrong)."""
    vendored = json.loads((VENDORED_PLOTLY / "package.json").read_text())["dependencies"]["plotly.js"]
    if vendored == get_plotlyjs_version():
        bundle = (VENDORED_PLOTLY / "plotly-fusedbench.min.js").read_text()
        return bundle, f"plotly.js {vendored} (scatter, heatmap, box)"
    return get_plotlyjs(), f"plotly.js {get_plotlyjs_version()} (full: the vendored bundle is {vendored})"


def newest_cells(cells: pd.DataFrame, runs: pd.DataFrame, machine: str) -> pd.DataFrame:
    """A machine's cells of each group's newest run (`results.runs`), less a ladder group whose every workload a
    larger group's newest run also timed (the Quick group beside Fp16Seed)."""
    mine = cells_of_runs(cells[cells["machine"] == machine], newest_runs(runs, machines=[machine]))
    shown = set(ladder_cells(mine, across_commits=True)["group"]) | CONTROL_GROUPS | PEER_ONLY_GROUPS
    return mine[mine["group"].isin(shown)]


def newest_by_group(cells: pd.DataFrame, runs: pd.DataFrame, machine: str) -> dict[str, str]:
    """Each group's newest run on a machine, of the groups `cells` holds: group -> commit."""
    newest = newest_runs(runs, machines=[machine], groups=set(cells["group"]))
    return dict(zip(newest["group"], newest["commit"], strict=True))


def commit_note(cells: pd.DataFrame) -> str:
    """The commits a section's cells come from, with their groups where there are several."""
    commits = list(dict.fromkeys(cells["commit"]))
    if len(commits) == 1:
        return f"commit {commits[0][:8]}"
    groups = cells.groupby("commit", sort=False)["group"].unique()
    return "commits " + ", ".join(f"{c[:8]} ({', '.join(groups[c])})" for c in commits)


# Nothing leaves the page: plotly.js draws "Share chart..." (its sendChartToCloud button), which uploads the figure's
# data to Plotly's cloud after one dialog, unless showSendToCloud is off. The toolbar keeps the picture download and
# the zoom reset only: each of its buttons is a tab stop, and a page of figures had hundreds of them.
FIGURE_CONFIG = {"displaylogo": False, "showSendToCloud": False, "modeBarButtons": [["toImage", "resetScale2d"]]}


class _Figures:
    """Figures as HTML divs with the stable id they are given (so the same results give the same bytes)."""

    def __init__(self) -> None:
        self.count = 0
        self.selects = 0  # figures whose views switch through the page's <select>s (report.views)

    def __call__(self, figure: go.Figure, div_id: str) -> str:
        self.count += 1
        label = figure_label(figure, div_id)
        reserve_margins(figure)  # each view's, in its dropdown's buttons, which the page's <select>s then carry
        selects = take_view_selects(figure, div_id)
        self.selects += bool(selects)
        body = figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=FIGURE_CONFIG)
        return f"<div role='figure' aria-label='{html.escape(label)}'>{selects}{body}</div>"


def summary(headlines: dict[str, pd.DataFrame], tables: dict[str, pd.DataFrame]) -> str:
    """The answer in a few sentences, from each machine's headline table: what fusion buys against the best
    unfused version and the textbook, where it loses, and how the machines differ."""
    sentences = []
    for machine, top in headlines.items():
        rows = in_dtype_order(top[top["worst"] != ""]).to_dict("records")
        if not rows:
            continue
        unfused = ", ".join(
            f"{r['fused over unfused (geomean)']} at {r['dtype']} ({r['fused over unfused (range)']})" for r in rows
        )
        textbook = ", ".join(f"{r['fused over textbook (geomean)']} at {r['dtype']}" for r in rows)
        losses = ", ".join(f"{r[INVERSIONS_COLUMN]} at {r['dtype']}" for r in rows)
        table = tables[machine]
        best, worst = (table.loc[table[OVER_UNFUSED].idxmax()], table.loc[table[OVER_UNFUSED].idxmin()])
        sentences.append(
            f"On <b>{html.escape(machine)}</b>, fused epilogs over the best unfused version: {unfused} (geometric "
            f"means over the workloads, their range in brackets); over the textbook: {textbook}. Fusion pays most "
            f"in {_workload(best)} and loses (below {INVERSION:g}x, told apart from 1x) in {losses} workloads; "
            f"the worst is {_workload(worst)}."
        )
    first, *others = list(tables) or [None]
    for other in others:
        pairs = machine_pairs(pd.concat([tables[first], tables[other]]), first, other, "unfused")
        more, less = [], []
        for dtype in [d for d in DTYPES if d in set(pairs.index.get_level_values("dtype"))]:
            paired = pairs.loc[dtype]
            more.append(f"{int((paired['y_low'] > paired['x_high']).sum())} of {len(paired)} {dtype}")
            less.append(f"{int((paired['y_high'] < paired['x_low']).sum())} {dtype}")
        if more:
            sentences.append(
                f"Fusion pays more on <b>{html.escape(other)}</b> than on <b>{html.escape(first)}</b> in "
                f"{', '.join(more)} workloads and less in {', '.join(less)} (fused over unfused, counted where the "
                "two machines' paired 95% intervals do not overlap; the rest are not told apart)."
            )
    if sentences:
        sentences.append(
            "The textbook is the blog's statements in cupy at fp16 and fp32 and in torch at bf16 and fp8 (cupy has "
            "neither), so its speedups differ by library as well as by dtype."
        )
    return "".join(f"<p>{sentence}</p>" for sentence in sentences)


def _workload(row) -> str:
    """'RELU_BIAS fp16 (65536,16384)x(16384,8192) at 1.05x': a workload of the speedups table, fused over unfused."""
    return f"{html.escape(row['epilog'])} {row['dtype']} {row['shape']} at {row[OVER_UNFUSED]:.2f}x"


def in_dtype_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in the catalog's dtype order (fp16, bf16, fp32, tf32, fp8)."""
    return frame.sort_values("dtype", key=lambda d: d.map({name: i for i, name in enumerate(DTYPES)}), kind="stable")


def _glossary() -> str:
    rows = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in GLOSSARY.items())
    return f"<dl class='glossary'>{rows}</dl>"


def measurement_changes(cells: pd.DataFrame, detail: pd.DataFrame, commits: list[str]) -> dict[str, str]:
    """commit -> what changed in how it measures, where a group's benchmark version differs from that group's at its
    run before (a version that says why it was bumped is quoted; asv's code hashes are not); a change of some of the
    commit's groups only names them."""
    versions = cells[["commit", "group"]].assign(version=detail.loc[cells.index, "version"]).dropna()
    versions = versions.drop_duplicates(["commit", "group"])
    by_commit = {
        commit: dict(zip(mine["group"], mine["version"], strict=True)) for commit, mine in versions.groupby("commit")
    }
    changes, before = {}, {}
    for commit in commits:
        mine = by_commit.get(commit, {})
        changed = {group: v for group, v in mine.items() if group in before and before[group] != v}
        if changed:
            said = sorted(
                {f"benchmark version {v}" for v in changed.values() if not re.fullmatch(r"[0-9a-f]{64}", str(v))}
            )
            changes[commit] = "; ".join(said) or "the benchmark code changed (asv's version hash)"
            if len(changed) < len(mine):
                changes[commit] += f" ({len(changed)} of {len(mine)} groups: {', '.join(sorted(changed))})"
        before |= mine
    return changes


def trend_rows(results: ResultSet, cells: pd.DataFrame, commits: list[str]) -> pd.DataFrame:
    """A machine's ladder cells at every commit that timed them, oldest run first, with their group's benchmark
    version and whether it differs from the cell's run before in the same group (`changed`: the rule of
    `measurement_changes`, so a quick run between two default ones marks nothing)."""
    rows = with_shape(ladder_cells(cells)).dropna(subset=["time_s"])
    rows = rows.assign(version=results.detail.loc[rows.index, "version"], _order=rows["commit"].map(commits.index))
    rows = rows.sort_values("_order", kind="stable")
    before = rows.groupby(["epilog", "dtype", "shape", "provider", "group"], sort=False)["version"].shift()
    return rows.assign(changed=before.notna() & (before != rows["version"])).drop(columns="_order")


def trend_cells(table: pd.DataFrame, verdict) -> list[tuple]:
    """The cells a machine's trend draws, (epilog, dtype, shape, provider): fused where fusion pays most and least
    over unfused (the headline's best and worst), then each cell the gate alerted on; at most TREND_CELLS."""
    chosen = []
    paying = table.dropna(subset=[OVER_UNFUSED])
    if not paying.empty:
        for row in (paying.loc[paying[OVER_UNFUSED].idxmax()], paying.loc[paying[OVER_UNFUSED].idxmin()]):
            chosen.append((row["epilog"], row["dtype"], row["shape"], "fused"))
    for suite in verdict.suites if verdict is not None else ():
        alerts = with_shape(suite.alerts[suite.alerts["epilog"].notna()])
        chosen += list(zip(alerts["epilog"], alerts["dtype"], alerts["shape"], alerts["provider"], strict=True))
    return list(dict.fromkeys(chosen))[:TREND_CELLS]


def gate_threshold(verdict, group: str, version: str, seconds: float) -> float:
    """The time threshold the gate judges this cell by (the preset in force for its suite, where that preset was
    earned at the group's version), NaN where none judges it."""
    for suite in verdict.suites if verdict is not None else ():
        if any(judged.group == group for judged in suite.groups) and suite.preset.earned_at(group, version):
            return suite.preset.threshold("time", cell_class(seconds))
    return float("nan")


def trend_series(rows: pd.DataFrame, chosen: list[tuple], verdict, shifts: Sequence = ()) -> pd.DataFrame:
    """`trend_figure`'s series: each chosen cell timed at two commits or more, labelled, with its gate threshold and,
    at the commit a shift of it (or of its group's common factor) starts, the shift (`shifts`: change points)."""
    starts = {(p.group, p.cell, p.commit_after): p.change for p in reversed(list(shifts))}  # a cell's own wins
    frames = []
    for epilog, dtype, shape, provider in chosen:
        mine = rows[(rows["epilog"] == epilog) & (rows["dtype"] == dtype) & (rows["shape"] == shape)]
        mine = mine[mine["provider"] == provider]
        if mine["commit"].nunique() < 2:
            continue
        newest = mine.iloc[-1]
        threshold = gate_threshold(verdict, newest["group"], newest["version"], float(mine["time_s"].median()))
        label = f"{epilog} {dtype} {shape} {provider}"
        own = f"{epilog}/{dtype}/{shape}/{provider}"
        shift = [starts.get((group, own, commit), starts.get((group, GROUP_SERIES, commit), math.nan))
                 for group, commit in zip(mine["group"], mine["commit"], strict=True)]  # fmt: skip
        frames.append(mine[["commit", "time_s", "changed"]].assign(cell=label, threshold=threshold, shift=shift))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def shown_cells(results: ResultSet, *, machines=None, commits=None) -> pd.DataFrame:
    """The cells the report draws: those selected, without the tuned machines unless named (a tuned run
    degrades a provider on purpose)."""
    cells = select_cells(results.cells, machines=machines or (), commits=commits or (), known=results.runs())
    if not machines and not cells.empty:
        cells = cells[cells["machine"].isin(gpu_machines(cells["machine"]))]
    return cells


def shown_mlp(results: ResultSet, *, machines=None, commits=None) -> pd.DataFrame:
    """The mlp suite's cells the report draws: those of the chosen machines and commits."""
    return select_cells(results.mlp, machines=machines or (), commits=commits or (), known=results.runs())


class _Page:
    """The page being written: its sections, the contents they add headings to, and its figure divs."""

    def __init__(self) -> None:
        self.sections: list[str] = []
        self.contents: list[tuple[int, str, str]] = []
        self.div = _Figures()

    def heading(self, level: int, ident: str, text: str, note: str = "") -> str:
        self.contents.append((level, ident, text))
        return f"<h{level} id='{ident}'>{html.escape(text)}{note}</h{level}>"

    def add(self, *parts: str) -> None:
        self.sections.extend(parts)

    def extend(self, other: _Page) -> None:
        """Append a part written on a page of its own (in a child process, or before what goes above it)."""
        self.sections.extend(other.sections)
        self.contents.extend(other.contents)
        self.div.count += other.div.count
        self.div.selects += other.div.selects


def render_report(results: ResultSet, *, machines=None, commits=None) -> str:
    """The whole report as one HTML string: the answer, the headline tables, contents and glossary above the
    fold, then a section per machine (its gate verdicts, figures, kernels, advice, what did not run, noise,
    history), the peers and MLP sections and the machines side by side."""
    shown = shown_cells(results, machines=machines, commits=commits)
    peers = shown[in_peers_suite(shown)]
    cells = shown[~in_peers_suite(shown)]  # a machine's sections: its newest runs of the other suites
    runs = group_runs(results)
    mlp = shown_mlp(results, machines=machines, commits=commits)
    chosen = replace(results, cells=shown, detail=results.detail.loc[shown.index])  # what `advise` reads
    judged = shown_machines(shown, mlp, machines)
    # every part in a child of its own: a machine's section with its verdicts, history and part of the peers
    # section; a machine's with only peers or mlp runs; the MLP section (the parent only puts the page together)
    newest_peers = {machine: newest_by_group(peers, runs, machine) for machine in dict.fromkeys(peers["machine"])}
    pending_machines = {
        machine: in_child(
            machine_page, results, chosen, cells, runs, machine, machine in judged, peers, newest_peers.get(machine, {})
        )
        for machine in dict.fromkeys(cells["machine"])
    }
    pending_verdicts = [in_child(judge_every_suite, results, [m]) for m in judged if m not in pending_machines]
    pending_peers = {  # the peers of a machine with no section of its own
        machine: in_child(peers_page, peers, results.detail, results.roofs, machine, newest)
        for machine, newest in newest_peers.items()
        if machine not in pending_machines
    }
    pending_mlp = in_child(mlp_page, mlp)
    page, headlines, tables, found, peers_parts = _Page(), {}, {}, {}, {}
    if shown.empty and mlp.empty:
        page.add("<p>No fusedbench results yet: <code>fusedbench run</code> on a GPU machine writes them.</p>")
    for machine, pending in pending_machines.items():
        part, peers_parts[machine], verdicts, tables[machine], headlines[machine] = pending()
        page.extend(part)
        found |= {v.machine: v for v in verdicts}
    found |= {v.machine: v for pending in pending_verdicts for v in pending()}
    verdicts = {machine: found[machine] for machine in judged if machine in found}  # the machines' order
    if newest_peers:
        page.add(*peers_intro(page.heading))
    for machine in newest_peers:
        page.extend(pending_peers[machine]() if machine in pending_peers else peers_parts[machine])
    page.extend(pending_mlp())
    for machine, verdict in verdicts.items():
        if machine not in tables:  # a machine with only peers or mlp runs: its verdicts still shown
            page.add(page.heading(2, anchor(machine), machine), alerts_html(page, verdict))
    if len(tables) > 1:
        page.add(page.heading(2, "machines", "Machines side by side"))
        newest = pd.concat(tables.values())
        reference, *others = tables
        for other in others:
            page.add(page.div(machines_figure(newest, reference=reference, other=other), anchor("machines", other)))
    first = page.div(headline_figure(tables), "headline-figure") if tables else ""
    apart = "" if machines else set_apart_note(results)
    return page_html(page, status_strip(verdicts.values()) + apart + first + above_the_fold(page, headlines, tables))


def set_apart_note(results: ResultSet) -> str:
    """The machines of deliberate runs (tuned, injected) and of paired sessions (`fusedbench ab`), which the page
    does not show as machines: named, so a reader knows they exist and how to see them."""
    apart = [m for m in dict.fromkeys(results.runs()["machine"]) if m not in gpu_machines([m])]
    if not apart:
        return ""
    return (
        f"<p class='muted' id='set-apart'>Not shown as machines: {plural(len(apart), 'machine')} of deliberate runs "
        "(tuned or injected slowdowns) and paired sessions (a change measured beside its base by fusedbench ab), "
        f"kept apart from the history: {html.escape(', '.join(sorted(apart)))}. "
        "<code>fusedbench report results/ --machine NAME</code> draws one.</p>"
    )


def shown_machines(cells: pd.DataFrame, mlp: pd.DataFrame, machines) -> list[str]:
    """The machines the report shows verdicts for: those named, else every untuned machine with results shown."""
    found = list(dict.fromkeys([*cells["machine"], *mlp["machine"]]))
    return found if machines else gpu_machines(found)


def mlp_page(mlp: pd.DataFrame) -> _Page:
    """The MLP section on a page of its own (`report.forked` computes it beside the rest)."""
    page = _Page()
    page.add(*mlp_section(mlp, page.heading, page.div))
    return page


def peers_page(peers: pd.DataFrame, detail: pd.DataFrame, roofs: pd.DataFrame, machine: str, newest: dict) -> _Page:
    """The peers part of a machine with no section of its own (only peers runs), on a page of its own
    (`report.forked` computes it beside the rest), its figures drawn there."""
    page = _Page()
    page.add(*machine_peers(peers, detail, roofs, machine, newest, page.heading, page.div)[0])
    return page


def machine_page(results: ResultSet, chosen: ResultSet, cells: pd.DataFrame, runs: pd.DataFrame, machine: str,
                 judged: bool, peers: pd.DataFrame, newest_peers: dict) -> tuple:  # fmt: skip
    """A machine's section on a page of its own (`report.forked` computes it beside the rest): its newest runs'
    section (`machine_section`; `chosen`: every cell shown) with its peers runs' views in its figures, the gate's
    verdicts where `judged`, and its history; and its part of the peers section (`newest_peers`: group -> the
    newest run of each peers group it ran; none: no part). Returns both pages, the verdicts, the speedups table
    and the headline."""
    page, below, peers_part, beside = _Page(), _Page(), _Page(), ()
    if newest_peers:
        parts, beside = machine_peers(peers, results.detail, results.roofs, machine, newest_peers, peers_part.heading,
                                      peers_part.div, beside=True)  # fmt: skip
        peers_part.add(*parts)
    table, headline = machine_section(page, below, chosen, newest_cells(cells, runs, machine), beside)
    verdicts = judge_every_suite(results, [machine]) if judged else []
    for verdict in verdicts:
        page.add(alerts_html(page, verdict))
    page.extend(below)
    mine = cells[cells["machine"] == machine]
    history_section(page, results, mine, runs, machine, table, verdicts[0] if verdicts else None)
    return page, peers_part, verdicts, table, headline


def machine_section(above: _Page, below: _Page, results: ResultSet, current: pd.DataFrame, beside=()) -> tuple:
    """One machine's section from its newest runs (`current`; `results`: every cell shown, which `advise` reads):
    on `above` the environment, on `below` (after the gate's verdicts) the heatmap and ladder (each a view per
    dtype, and the views of `beside`'s heatmap and ladder, its peers runs', under 'peers'), the kernels, advice,
    what did not run, noise. Returns its speedups table and headline."""
    machine = current["machine"].iloc[0]
    newest_commit = current.loc[current.join(results.detail["started_ms"])["started_ms"].idxmax(), "commit"]
    ladder = ladder_cells(current, across_commits=True)  # each workload's providers once
    table = speedups(ladder, results.detail.loc[ladder.index])
    note = f" <span class='muted'>{html.escape(commit_note(current))}</span>"
    above.add(
        above.heading(2, anchor(machine), machine, note),
        "<div class='card'><h3>Environment</h3>"
        + environment_card(results.records, machine, newest_commit)
        + f"<p>These runs' cells as gzipped CSV: {csv_link(current, machine, newest_commit)}</p></div>",
    )
    figures = heatmap_views(table, machine=machine), ladder_figure(ladder, results.roofs, machine=machine)
    if beside:  # the peers runs' views in the same figures
        figures = [merge_views([mine, theirs], ["", PEERS_VIEW]) for mine, theirs in zip(figures, beside, strict=True)]
    heatmap, ladder_of_providers = figures
    below.add(
        below.heading(3, anchor(machine, "epilogs"), f"{machine}: every epilog, dtype by dtype"),
        below.div(heatmap, anchor(machine, "heatmap")),
        below.div(ladder_of_providers, anchor(machine, "ladder")),
        below.heading(3, anchor(machine, "kernels"), f"{machine}: fused cells that launch more than one kernel"),
        multi_kernel_table(current),
        below.heading(3, anchor(machine, "advice"), f"{machine}: when to fuse (fusedbench advise)"),
        advice_section(results, machine),
        below.heading(3, anchor(machine, "not-run"), f"{machine}: cells that did not run"),
        not_run_table(current),
        below.heading(3, anchor(machine, "noisy"), f"{machine}: noisy cells"),
        noisy_table(current),
    )
    return table, in_dtype_order(headline(ladder, table, machine)).assign(_note=note)


def alerts_html(page: _Page, verdict) -> str:
    """The machine's gate verdicts (`fusedbench alert --machine M --suite S`, suite by suite) under their heading."""
    machine = verdict.machine
    return page.heading(3, anchor(machine, "alerts"), f"{machine}: the gate, suite by suite") + verdict_section(verdict)


def history_section(
    page: _Page, results: ResultSet, cells: pd.DataFrame, runs: pd.DataFrame, machine: str, table, verdict
) -> None:
    """A machine's cells over commits: the chosen cells as lines against the gate's threshold (`trend_figure`), the
    commits where the measurement changed, and every cell's history as a sortable table."""
    timed = set(cells["commit"])
    commits = [c for c in commits_in_order(runs, machine) if c in timed]
    if len(commits) <= 1:
        return
    rows = trend_rows(results, cells, commits)
    shifts = change_points_of(results, machine)
    series = trend_series(rows, trend_cells(table, verdict), verdict, shifts or ())
    history = history_table(rows, commits)
    if not len(series) and not history:  # no cell timed at two commits
        return
    changes = measurement_changes(cells, results.detail, commits)
    listed = "".join(f"<li>{c[:8]}: {html.escape(what)}</li>" for c, what in changes.items())
    page.add(
        page.heading(3, anchor(machine, "history"), f"{machine} across commits"),
        page.div(trend_figure(series, machine=machine, commits=commits), anchor(machine, "trend"))
        if len(series)
        else "",
        f"<p>The measurement changed at:</p><ul>{listed}</ul>" if changes else "",
        page.heading(4, anchor(machine, "shifts"), f"{machine}: where a series shifted"),
        shifts_html(shifts),
        history,
    )


def change_points_of(results: ResultSet, machine: str) -> list | None:
    """The machine's change points (`fusedbench changes`); None where the change-point library is not installed."""
    if importlib.util.find_spec("otava") is None:
        return None
    from fusedbench.regressions.changes import find_changes, series_inputs

    return find_changes(*series_inputs(results, [machine]))


def shifts_html(points: list | None) -> str:
    """The machine's change points (`change_points_of`), each with the commits and what changed around it; a line
    where there are none, or where the change-point library is not installed."""
    if points is None:
        return "<p>Where a series shifted needs the change-point library: <code>pip install -e '.[changes]'</code>.</p>"
    if not points:
        return ("<p>No series of six runs or more shifted by 1% or more (e-divisive change points of each cell, the "
                "runs' common factor taken out; <code>fusedbench changes</code>).</p>")  # fmt: skip
    rows = pd.DataFrame(
        [(p.group, p.cell, f"{p.run} of {p.runs}", f"{p.commit_before[:8]} -> {p.commit_after[:8]}",
          f"{p.change:+.1%}", round(p.pvalue, 3), p.what_changed()) for p in points],
        columns=["group", "cell", "run", "commits", "change", "p", "what changed"],
    )  # fmt: skip
    return ("<p>Each cell's series over runs (one group, version and protocol) with the runs' common factor taken out, "
            "and that factor as a series of its own (every cell: a card, driver or library), split by e-divisive; a "
            "shift of 1% or more kept (<code>fusedbench changes</code>).</p>" + table_html(rows))  # fmt: skip


def above_the_fold(page: _Page, headlines: dict, tables: dict) -> str:
    """The answer in sentences, the headline tables, the contents and the glossary."""
    toc = "".join(
        f"<li class='level-{level}'><a href='#{ident}'>{html.escape(text)}</a></li>"
        for level, ident, text in page.contents
    )
    heads = "".join(
        f"<h3>{html.escape(m)}{top['_note'].iloc[0]}</h3>" + table_html(top.drop(columns="_note"))
        for m, top in headlines.items()
        if not top.empty
    )
    return (
        "<div id='summary'>"
        + summary({m: top.drop(columns="_note") for m, top in headlines.items()}, tables)
        + "</div>"
        + ("<h2 id='headline'>Headline</h2>" if headlines else "")
        + heads
        + (f"<h2 id='contents'>Contents</h2><ul class='toc'>{toc}</ul>" if page.contents else "")
        + "<h2 id='glossary'>Glossary</h2>"
        + _glossary()
    )


def comparison_page(verdict) -> str:
    """`fusedbench compare --format html`: the report's kind of page for any two runs. The verdict at a glance (the
    status strip, then suite by suite as `alert` says it), then each group's compared rows, its gates and cells with
    their change, interval and threshold, in tables that sort and filter."""
    page = _Page()
    for suite in verdict.suites:
        for group in suite.groups:
            if group.judged is None:
                continue
            comparison = group.judged.comparison
            found = [frame for frame in (comparison.groups, comparison.cells) if not frame.empty]
            page.add(
                page.heading(
                    3,
                    anchor(verdict.machine, suite.suite, group.group),
                    f"{group.group}: {comparison.candidate.label} against {comparison.baseline.label}",
                ),
                table_html(compared_rows(pd.concat(found))) if found else "<p>Nothing compared.</p>",
            )
    above = status_strip([verdict]) + alerts_html(page, verdict) + "<h2 id='rows'>Every compared row</h2>"
    return page_html(page, above, title=f"fusedbench compare: {verdict.machine}")


def page_html(page: _Page, above: str, title: str = "fusedbench: what fusing epilogs into the matmul buys") -> str:
    script, bundle = plotly_bundle() if page.div.count else ("", "")  # no plotly.js for no figures
    plotly = f"<script type='text/javascript'>{script}</script>" if page.div.count else ""
    body = "\n".join(page.sections)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style>{plotly}</head><body>"
        f"<h1>{html.escape(title)}</h1>"
        "<p class='muted'>cuBLASLt epilogs through nvmath-python against the same work unfused; every cell "
        "verified against float64 before it was timed; times are medians of asv's recorded samples"
        + (f"; figures drawn by {html.escape(bundle)}, embedded.</p>" if page.div.count else ".</p>")
        + above
        + body
        + (f"<script type='text/javascript'>{VIEW_SCRIPT}</script>" if page.div.selects else "")
        + (f"<script type='text/javascript'>{TABLE_SCRIPT}</script>" if SORTABLE in above + body else "")
        + "</body></html>"
    )


def key_figures(results: ResultSet, *, machines=None, commits=None) -> dict[str, go.Figure]:
    """The figures worth a PNG for the README: each machine's fused-over-unfused heatmap per dtype, and its MLP
    training step's fp16 fused over unfused by wall clock."""
    cells = shown_cells(results, machines=machines, commits=commits)
    cells = cells[~in_peers_suite(cells)]  # the README's heatmaps: each machine's newest runs of the other suites
    runs = group_runs(results)
    figures = {}
    for machine in dict.fromkeys(cells["machine"]):
        chosen = ladder_cells(newest_cells(cells, runs, machine), across_commits=True)
        table = speedups(chosen, results.detail.loc[chosen.index])
        started = [r.started for r in results.records if r.machine == machine and r.commit in set(chosen["commit"])]
        when = f", run {max(started)[:10]}" if started else ""
        for dtypes in dtype_views(table):
            figure = speedup_heatmap(table, machine=machine, dtypes=dtypes, baseline="unfused")
            # A PNG travels without the page: it names its commits and the run's date.
            add_title_line(figure, f"{commit_note(chosen)}{when}")
            figures[f"{machine}-{'-'.join(dtypes)}-fused-over-unfused.png"] = figure
    table = step_table(shown_mlp(results, machines=machines, commits=commits))
    for machine in dict.fromkeys(table["machine"]):
        figure, view = step_png_figure(table, machine)
        if figure is not None:
            figures[f"{machine}-mlp-step-{view}.png"] = figure
    return figures


def check_report_outputs(*, out_dir: str, export: str | None = None, png: bool = False) -> None:
    """Refuse, before any work, an output the report could not write: a bad -o or --export path, a missing
    Parquet engine, or --png without kaleido and a Chrome for it to drive."""
    check_writable_folder(out_dir, "-o")
    page = os.path.join(out_dir, REPORT_NAME)
    if os.path.isdir(page):
        raise FusedbenchError(f"-o {out_dir!r}: {page} is a folder, where the report goes; move it or name another")
    if export:
        if not export.endswith((".csv", ".parquet")):
            raise FusedbenchError(f"--export {export!r}: name a .csv or .parquet file")
        check_writable_file(export, "--export")
        if export.endswith(".parquet") and not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
            raise FusedbenchError(f"--export {export!r} needs pyarrow (pip install pyarrow); or --export a .csv")
    if png:
        _check_png_renderer()


def _check_png_renderer() -> None:
    if importlib.util.find_spec("kaleido") is None:
        raise FusedbenchError("--png needs kaleido (pip install -e '.[dev]' or pip install kaleido)")
    try:
        from choreographer.browsers.chromium import Chromium  # what kaleido drives

        browser = Chromium.find_browser(skip_local=False)
    except Exception:  # another choreographer: leave the check to kaleido itself
        return
    if browser is None:
        raise FusedbenchError(
            "--png needs Chrome or Chromium for kaleido (apt-get install chromium, or `kaleido_get_chrome`)"
        )


def render_pngs(figures: dict[str, go.Figure]) -> dict[str, bytes]:
    """PNG bytes of each figure, rendered by kaleido (which drives a local Chrome or Chromium)."""
    images = {}
    for name, figure in figures.items():
        try:
            # without the cells' halo (CELL_TEXT): at a PNG's size it doubles the file for what reads as well
            plain = go.Figure(figure).update_traces(textfont_shadow="none", selector={"type": "heatmap"})
            images[name] = plain.to_image(format="png", width=PNG_WIDTH, scale=PNG_SCALE)
        except Exception as exc:  # kaleido missing, or no Chrome for it to drive
            raise FusedbenchError(f"--png needs kaleido and Chrome or Chromium ({type(exc).__name__}: {exc})") from None
    return images


def write_pngs(figures: dict[str, go.Figure], out_dir: str) -> list[str]:
    """Render every figure first, then write them all (a failed render leaves no file)."""
    paths = []
    for name, image in render_pngs(figures).items():
        paths.append(os.path.join(out_dir, name))
        write_bytes_atomically(paths[-1], image)
    return paths


def write_report(
    results: ResultSet,
    *,
    out_dir: str,
    machines=None,
    commits=None,
    export: str | None = None,
    png: bool = False,
) -> str:
    """Write `out_dir/index.html` atomically (the tidy table to `export`, CSV or Parquet; PNGs if asked). Every
    output is made before the first is written, and results with nothing to show replace no earlier report."""
    check_report_outputs(out_dir=out_dir, export=export, png=png)
    path = os.path.join(out_dir, REPORT_NAME)
    if results.cells.empty and results.mlp.empty and os.path.exists(path):
        raise FusedbenchError(
            f"the results hold no fusedbench runs, so the report already in {path} was left as it is; pass the "
            "results folder `fusedbench run` writes (results/)"
        )
    page = render_report(results, machines=machines, commits=commits)
    images = render_pngs(key_figures(results, machines=machines, commits=commits)) if png else {}
    known = results.runs()
    cells = select_cells(results.cells, machines=machines or (), commits=commits or (), known=known)
    table = (
        (cells.to_csv(index=False).encode() if export.endswith(".csv") else cells.to_parquet(index=False))
        if export
        else b""
    )
    write_text_atomically(path, page)
    for name, image in images.items():
        write_bytes_atomically(os.path.join(out_dir, name), image)
    if export:
        write_bytes_atomically(export, table)
    return path
