"""The report's section on the peers suite: the alternatives to cuBLASLt's epilogs, timed beside the ladder.

From each machine's newest run of each of the peers suite's groups (`fusedbench run --suite peers`): the triton
groups time the whole ladder, torch-compile's and the seed walkthrough's groups fused and unfused beside them
(each peer's ratios paired within its own group, joined per workload by `analysis.peers_speedups`). Per dtype the
epilog x shape heatmap with a view per peer (fused over the peer: above 1x cuBLASLt's epilog is faster) and
the provider ladder with the peers on it; a table of each peer's time over fused and over unfused, with the
shapes where it beats both and what compiling and autotuning it cost; and the TwoPass control, unfused's
one-pass backward over the two passes it replaced. The default suite's sections never show these groups, so
a peers run does not hide a machine's newest default run.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from fusedbench.analysis.speedups import (
    interval_columns,
    ladder_cells,
    peer_ratio_column,
    peers_speedups,
    speedup_column,
)
from fusedbench.catalog.providers import CONTROL_OF_UNFUSED, PEERS, UNFUSED
from fusedbench.catalog.shapes import shape_label
from fusedbench.catalog.suites import PEER_ONLY_GROUPS, SUITES
from fusedbench.report.figures import dtype_views, heatmap_views, ladder_figure
from fusedbench.report.tables import anchor, folded, not_run_table, table_html
from fusedbench.results.derived import OK, paired_ratios

PEERS_SUITE_GROUPS = frozenset(SUITES["peers"])
_SHAPE = ["m", "k", "n"]
# The name a machine's figures list its peers runs' views under ('peers fp16: fused over triton'): the peers'
# heatmap and ladder are views of the machine's own (figures.merge_views).
PEERS_VIEW = "peers "
# The peers a user would pick instead of cuBLASLt's epilogs: their tables open; the seed walkthrough's rungs
# (einsum, numba), which lose by tens of times everywhere, folded.
OPEN_PEERS = ("triton", "torch-compile", "cutlass-evt")


def in_peers_suite(cells: pd.DataFrame) -> pd.Series:
    """Which cells belong to the peers suite's groups (the peers beside the ladder, and the TwoPass control)."""
    return cells["group"].isin(PEERS_SUITE_GROUPS)


def peer_rows(table: pd.DataFrame, cells: pd.DataFrame, peer: str) -> pd.DataFrame:
    """Per dtype and epilog (`table`: analysis.peers_speedups of the runs shown): the peer's time over fused and
    over unfused (median over the shapes, and their range), the shapes where it beats both, told apart (both
    paired intervals wholly below 1x) and by how much at best (the faster of fused and unfused over the peer),
    the config or mode it ran most often, and the seconds compiling (the most over the shapes: a group's first
    cells compile what later ones find in the compiler's caches) and autotuning (the median) took."""
    over_fused, over_unfused = speedup_column(peer), peer_ratio_column(peer)
    timed = table.dropna(subset=[over_fused])
    mine = cells[(cells["provider"] == peer) & (cells["status"] == OK)]
    spent_by = dict(list(mine.groupby(["dtype", "epilog"], sort=False)))  # one split, not a filter per row
    none = mine.iloc[:0]
    rows = []
    for (dtype, epilog), part in timed.groupby(["dtype", "epilog"], sort=False):
        wins = part[(part[interval_columns(over_fused)[1]] < 1) & (part[interval_columns(over_unfused)[1]] < 1)]
        gain = 1 / np.maximum(wins[over_fused], wins[over_unfused])  # from the peer's own paired ratios
        spent = spent_by.get((dtype, epilog), none)
        rows.append(
            {
                "dtype": dtype,
                "epilog": epilog,
                f"{peer} / fused": _median_range(part[over_fused]),
                f"{peer} / unfused": _median_range(part[over_unfused]),
                "beats both": f"{len(wins)} of {len(part)}",
                "best win": f"{gain.max():.2f}x at {wins.loc[gain.idxmax(), 'shape']}" if len(wins) else "",
                "config (most chosen)": spent["algorithm"].mode().iloc[0] if len(spent) else "",
                "compile s": spent["compile_s"].max(),
                "autotune s": spent["autotune_s"].median(),
            }
        )
    return pd.DataFrame(rows)


def peers_beside(ladder: pd.DataFrame, own: pd.DataFrame) -> pd.DataFrame:
    """The cells of the groups that time peers beside fused and unfused alone (`own`) to draw on the ladders: the
    peers' own, beside the ladder group's providers, and every provider's where no ladder group timed the workload
    (the walkthrough's fp32)."""
    workload = ["dtype", "epilog", "m", "k", "n"]
    laddered = own.set_index(workload).index.isin(ladder.set_index(workload).index)
    return own[own["provider"].isin(PEERS) | ~laddered]


def _runs(newest: dict[str, str]) -> dict[str, list[str]]:
    """commit -> the groups whose newest run it is, in the suite's order."""
    runs: dict[str, list[str]] = {}
    for group in sorted(newest, key=SUITES["peers"].index):
        runs.setdefault(newest[group], []).append(group)
    return runs


def _median_range(values: pd.Series) -> str:
    values = values.dropna()
    if values.empty:
        return ""
    return f"{values.median():.2f}x ({values.min():.2f}-{values.max():.2f})"


def two_pass_rows(cells: pd.DataFrame, detail: pd.DataFrame) -> pd.DataFrame:
    """The TwoPass control of one run: per epilog and shape, unfused's one-pass backward and the two passes it
    replaced, in ms, and the two passes' time over the one pass, paired by round (above 1x: one pass is faster)."""
    control = cells[cells["group"] == "TwoPass"]
    if control.empty:
        return pd.DataFrame()
    ratios = paired_ratios(control, list(detail.loc[control.index, "raw"]), detail.loc[control.index, "paired"],
                           UNFUSED, CONTROL_OF_UNFUSED)  # fmt: skip
    rows = []
    for (epilog, m, k, n), part in control.groupby(["epilog", *_SHAPE], sort=False):
        times = part.set_index("provider")["time_s"]
        ratio = ratios.loc[part[part["provider"] == CONTROL_OF_UNFUSED].index]
        if ratio.empty or UNFUSED not in times:
            continue
        ratio = ratio.iloc[0]
        rows.append(
            {
                "epilog": epilog,
                "shape": shape_label(m, k, n),
                "one pass (unfused) ms": times[UNFUSED] * 1e3,
                "two passes ms": times.get(CONTROL_OF_UNFUSED, np.nan) * 1e3,
                "two passes / one pass": f"{ratio['ratio']:.2f}x"
                + (f" ({ratio['low']:.2f}-{ratio['high']:.2f})" if pd.notna(ratio["low"]) else ""),
            }
        )
    return pd.DataFrame(rows)


def _peer_tables(table: pd.DataFrame, ladder: pd.DataFrame) -> list[str]:
    """Each peer's table (`peer_rows`), folded, the most informative peers' open."""
    parts = []
    for peer in PEERS:
        rows = peer_rows(table, ladder, peer)
        if not rows.empty:
            summary = (
                f"{peer}: its time over fused and over unfused, per dtype and epilog, the median over the shapes it "
                f"ran and (their range) ({len(rows)} rows)"
            )
            body = table_html(rows, breakable=("config (most chosen)",))
            parts.append(folded(summary, body, len(rows), opened=peer in OPEN_PEERS))
    return parts


def peers_intro(heading) -> list[str]:
    """The peers section's heading and what each peer is (`heading(level, ident, text)` is the report's own)."""
    return [
        heading(2, "peers", "Peers: other ways to fuse the epilog, on the same cells"),
        "<p>The peers suite times each peer on the blog's shape and the memory-bound ones, at fp16 and bf16 (the "
        "seed walkthrough's rungs at fp16 and fp32), every result verified against float64 first. "
        "<b>triton</b>, timed beside the whole ladder: a Triton matmul "
        "applying the epilog to its fp32 accumulator, autotuned per workload (compiling and autotuning happen "
        "before the timing; their seconds are in the table). <b>torch-compile</b>, timed beside fused and unfused "
        "in groups of its own (its ratios paired within those): the epilog written as torch code and compiled by "
        "torch.compile in max-autotune mode, without the CUDA graphs no other provider gets. The seed walkthrough's "
        "rungs, in groups of their own at fp16 and fp32 on its six forward epilogs: <b>einsum</b> then the "
        "textbook's statements, and its numba CUDA kernels with the epilog fused, <b>numba-naive</b> (one thread "
        "an output) and <b>numba-tiled</b> (shared-memory tiles), skipped where a call would take seconds. "
        "<b>cutlass-evt</b>, in groups of its own: a CUTLASS 3 Hopper GEMM whose epilogue is an epilogue visitor "
        "tree (EVT) traced from the epilog written in Python and compiled by nvcc, on the ten epilogs its trees "
        "compute (all but cuBLASLt's ReLU bit-mask and the operand sums; runs before 6006c05 timed seven, without "
        "DEFAULT, DGELU and DGELU_BGRAD), so its other epilogs are n/a. A peer timed in groups of its own is "
        "paired with those groups' fused, in another run than the ladder's: its heatmap view, hover and table give "
        "that pairing, while the ladder draws its time beside the ladder run's. <b>unfused</b> runs "
        "DRELU_BGRAD / DGELU_BGRAD as the training stacks do: the plain GEMM, then one pass applying dReLU / dGELU "
        "and reducing the bias gradient; the TwoPass control times it against the two passes it replaced. A "
        "heatmap's peer view is fused over the peer: above 1x cuBLASLt's epilog is faster, below 1x the peer is.</p>",
    ]


def machine_peers(cells: pd.DataFrame, detail: pd.DataFrame, roofs: pd.DataFrame, machine: str,
                  newest: dict[str, str], heading, figure_div, *, beside: bool = False) -> tuple:  # fmt: skip
    """One machine's part of the peers section (`newest`: group -> its newest run): the heatmap and ladder with the
    peers, the peers' tables and the TwoPass control; and the two figures. `beside`: the machine's own section
    draws the figures' views beside its own (`figures.merge_views`), so this part links there rather than drawing
    them. `heading(level, ident, text)` and `figure_div(figure, ident)` are the report's own."""
    current = cells[(cells["machine"] == machine) & (cells["commit"] == cells["group"].map(newest))]
    table = peers_speedups(current, detail.loc[current.index])
    ladder = ladder_cells(current)
    ladder = pd.concat([ladder, peers_beside(ladder, current[current["group"].isin(PEER_ONLY_GROUPS)])])
    figures = (
        heatmap_views(table, machine=machine, suite="peers"),
        ladder_figure(ladder, roofs, machine=machine, suite="peers"),
    )
    runs = ", ".join(f"{html.escape(commit[:8])} ({', '.join(groups)})" for commit, groups in _runs(newest).items())
    parts = [heading(3, anchor(machine, "peers"), f"{machine}: the peers") + f"<p class='muted'>commits {runs}</p>"]
    if beside:
        groups = " or ".join(f"<i>{PEERS_VIEW}{' and '.join(dtypes)}</i>" for dtypes in dtype_views(table))
        mine = html.escape(machine)
        parts.append(
            f"<p>Their heatmap and ladder are views of {mine}'s own: choose {groups} in the view switch of "
            f"<a href='#{anchor(machine, 'heatmap')}-view'>{mine}'s heatmap</a> and of "
            f"<a href='#{anchor(machine, 'ladder')}-view'>{mine}'s ladder</a>.</p>"
        )
    else:
        parts.append(figure_div(figures[0], anchor(machine, "peers", "heatmap")))
        parts.append(figure_div(figures[1], anchor(machine, "peers", "ladder")))
    parts += _peer_tables(table, ladder)
    parts.append(
        "<p>The cells of these groups that did not run, and why (a numba cell past half a second a "
        "call is skipped with the time its probe measured):</p>" + not_run_table(current)
    )
    control = two_pass_rows(current, detail)
    if not control.empty:
        summary = "the one-pass backward (unfused) against the two passes it replaced (the TwoPass control)"
        parts.append(folded(summary, table_html(control), len(control)))
    return parts, figures
