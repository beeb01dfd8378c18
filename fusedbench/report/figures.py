"""Plotly figures of the tidy results table: pure functions from DataFrames to figures.

Every number a figure shows comes from one row of `fusedbench.results` (hover text names the
cell: machine, commit, epilog, dtype, shape, provider, samples and confidence interval).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fusedbench.analysis import geometric_mean, indistinct, with_shape
from fusedbench.epilogs import EPILOGS
from fusedbench.model import Status
from fusedbench.providers import BASELINES, LADDER, PROVIDERS

EPILOG_ORDER = [spec.name for spec in EPILOGS.values()]
OK = Status.OK.value
# Every speedup heatmap shares one colour range, so one colour means one speedup on every page: log2 of
# 0.5x-2x, clipped beyond. Cells whose paired interval includes 1x are greyed over.
SPEEDUP_LOG2_RANGE = 1.0
SPEEDUP_COLORBAR = {
    "title": {"text": "fused speedup", "side": "right"},
    "tickvals": [-1, -0.5, 0, 0.5, 1],
    "ticktext": ["0.5x or less", "0.71x", "1x", "1.41x", "2x or more"],
}
INDISTINCT_GREY = "rgba(150, 150, 150, 0.75)"
# The epilog's cost over the plain GEMM, in %: sequential, 0 (free) to COST_RANGE_PCT (clipped beyond).
COST_RANGE_PCT = 40.0
SHAPE_AXIS = "shape (M,K)x(K,N), by the GEMM's arithmetic intensity (2MNK / (MK + KN + MN)), low to high"


def _timing(cell, provider: str) -> str:
    """'fused 26.0 ms (99% CI 25.8-26.3, 10 samples)' for one cell of a speedups row."""
    if math.isnan(cell[provider]):
        return f"{provider}: not measured"
    return (
        f"{provider} {cell[provider] * 1e3:.3f} ms (99% CI {cell[f'{provider}_ci_low'] * 1e3:.3f}-"
        f"{cell[f'{provider}_ci_high'] * 1e3:.3f}, {int(cell[f'{provider}_samples'])} samples)"
    )


def _epilog_by_shape(
    rows: pd.DataFrame, column: str, *, label, hover, z, scale: dict, title: str, greyed=frozenset()
) -> go.Figure:
    """An epilog x shape heatmap of `column`, each cell's label written in it and its timings on hover; the
    (epilog, shape) cells in `greyed` are covered in grey. `scale`: the heatmap's colour settings."""
    rows = rows.sort_values(["intensity", "size"])
    shapes = list(dict.fromkeys(rows["shape"]))
    epilogs = [e for e in EPILOG_ORDER if e in set(rows["epilog"])]
    cells = {(row["epilog"], row["shape"]): row for _, row in rows.iterrows()}
    grid, text, hovers = [], [], []
    for epilog in epilogs:
        values = [cells[(epilog, shape)][column] if (epilog, shape) in cells else math.nan for shape in shapes]
        grid.append([None if math.isnan(v) else z(v) for v in values])
        text.append(["" if math.isnan(v) else label(v) for v in values])
        hovers.append(
            [
                f"{epilog} {cells[(epilog, shape)]['dtype']} {shape}<br>{hover(cells[(epilog, shape)])}"
                if (epilog, shape) in cells
                else f"{epilog} {shape}: not measured"
                for shape in shapes
            ]
        )
    figure = go.Figure(
        go.Heatmap(
            z=grid, x=shapes, y=epilogs, text=text, texttemplate="%{text}", hovertext=hovers, hoverinfo="text"
        ).update(scale)
    )
    if greyed:
        cover = [[1 if (epilog, shape) in greyed else None for shape in shapes] for epilog in epilogs]
        figure.add_heatmap(
            z=cover,
            x=shapes,
            y=epilogs,
            text=[[t if c else "" for t, c in zip(*pair, strict=True)] for pair in zip(text, cover, strict=True)],
            texttemplate="%{text}",
            hovertext=hovers,
            hoverinfo="text",
            colorscale=[[0, INDISTINCT_GREY], [1, INDISTINCT_GREY]],
            showscale=False,
            name="interval includes 1x",
        )
    figure.update_layout(
        title=title,
        height=160 + 28 * len(epilogs),
        xaxis={"title": SHAPE_AXIS},
        yaxis={"title": "epilog", "autorange": "reversed"},
        margin={"l": 140},
    )
    return figure


def speedup_heatmap(table: pd.DataFrame, *, machine: str, dtype: str, baseline: str) -> go.Figure:
    """Epilog x shape, fused's speedup over `baseline`, the value written in each cell, on the shared colour
    range; greyed where the paired interval includes 1x."""
    rows = table[(table["machine"] == machine) & (table["dtype"] == dtype)]
    unclear = rows[indistinct(rows, baseline)]
    greyed = frozenset(zip(unclear["epilog"], unclear["shape"], strict=True))
    return _epilog_by_shape(
        rows,
        f"over_{baseline}",
        label=lambda v: f"{v:.2f}x",
        hover=lambda cell: (
            f"{_timing(cell, 'fused')}<br>{_timing(cell, baseline)}<br>speedup "
            + (f"{cell[f'over_{baseline}']:.2f}x" if cell[f"over_{baseline}"] > 0 else "n/a")
        ),
        z=lambda v: math.log2(v) if v > 0 else None,
        scale={
            "colorscale": "RdBu",
            "zmin": -SPEEDUP_LOG2_RANGE,
            "zmax": SPEEDUP_LOG2_RANGE,
            "colorbar": SPEEDUP_COLORBAR,
        },
        greyed=greyed,
        title=f"{machine} {dtype}: fused over {baseline} (>1x: fusion pays; grey: the 95% interval includes 1x)",
    )


def ladder_figure(cells: pd.DataFrame, *, machine: str, dtype: str, shape: str) -> go.Figure:
    """Every provider's time per epilog at one shape, with asv's 99% confidence interval and the floor."""
    rows = with_shape(cells)
    rows = rows[(rows["machine"] == machine) & (rows["dtype"] == dtype) & (rows["shape"] == shape)]
    figure = go.Figure()
    for provider in LADDER:
        part = rows[(rows["provider"] == provider) & (rows["status"] == OK)]
        part = part.set_index("epilog").reindex([e for e in EPILOG_ORDER if e in set(part["epilog"])])
        figure.add_bar(
            name=provider,
            x=list(part.index),
            y=part["time_s"] * 1e3,
            marker_color=PROVIDERS[provider].color,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": (part["ci_high_s"] - part["time_s"]) * 1e3,
                "arrayminus": (part["time_s"] - part["ci_low_s"]) * 1e3,
            },
            customdata=np.stack([part["samples"], part["rel_iqr"], part["time_s"] / part["floor_s"]], axis=-1)
            if len(part)
            else None,
            hovertemplate="%{x} " + provider + ": %{y:.3f} ms, %{customdata[2]:.2f}x its floor<br>"
            "samples %{customdata[0]}, relative IQR %{customdata[1]:.1%}<extra></extra>",
        )
    # The workload's floor (the epilog's FLOPs and bytes under the run's ceilings); the gemm cell's own is lower.
    floors = rows[rows["provider"] != "gemm"].groupby("epilog")["floor_s"].first().dropna()
    floors = floors.reindex([e for e in EPILOG_ORDER if e in floors.index])
    if len(floors):
        figure.add_scatter(
            name="floor: max(FLOPs / GEMM rate, bytes / copy bandwidth)",
            x=list(floors.index),
            y=floors.values * 1e3,
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 60, "color": "black", "line": {"width": 2}},
            hovertemplate="%{x} floor: %{y:.3f} ms<extra></extra>",
        )
    figure.update_layout(
        title=f"{machine} {dtype} {shape}: the provider ladder (ms, log scale, 99% CI)",
        barmode="group",
        yaxis={"title": "ms", "type": "log"},  # textbook cells are 10-100x the rest
        height=460,
    )
    return figure


def _cost_interval(cell) -> str:
    """How the epilog cost was estimated: paired by round with its interval, or from the medians."""
    low, high = cell["fused_gemm_ratio_low"], cell["fused_gemm_ratio_high"]
    if math.isnan(low):
        return "from the two medians (this run did not pair samples by round)"
    return f"median of round-by-round ratios, 95% interval {(low - 1) * 100:+.1f}% to {(high - 1) * 100:+.1f}%"


def epilog_cost_figure(table: pd.DataFrame, *, machine: str, dtype: str) -> go.Figure:
    """What each fused epilog costs over the plain GEMM of its workload: fused / gemm - 1, in %."""
    rows = table[(table["machine"] == machine) & (table["dtype"] == dtype)]
    rows = rows.assign(cost_pct=rows["epilog_cost"] * 100)
    return _epilog_by_shape(
        rows,
        "cost_pct",
        label=lambda v: f"{round(v):+d}%",
        hover=lambda cell: (
            f"{_timing(cell, 'fused')}<br>{_timing(cell, 'gemm')}<br>epilog cost {cell['cost_pct']:+.1f}%, "
            + _cost_interval(cell)
        ),
        z=lambda v: v,
        scale={
            "colorscale": "Oranges",
            "zmin": 0,
            "zmax": COST_RANGE_PCT,
            "colorbar": {"title": "cost over the GEMM", "ticksuffix": "%"},
        },
        title=f"{machine} {dtype}: the epilog's own cost, fused - gemm, as % of gemm (clipped at 0 and "
        f"{COST_RANGE_PCT:.0f}%)",
    )


def roofline_figure(cells: pd.DataFrame, ceilings: pd.DataFrame, *, machine: str, dtype: str) -> go.Figure:
    """Achieved TFLOP/s against arithmetic intensity (FLOPs per fused byte), under the run's ceilings."""
    rows = with_shape(cells[(cells["machine"] == machine) & (cells["dtype"] == dtype) & (cells["status"] == OK)])
    rows = rows.assign(intensity=rows["flops"] / rows["bytes"])
    figure = go.Figure()
    for provider in LADDER:
        part = rows[rows["provider"] == provider]
        figure.add_scatter(
            name=provider,
            x=part["intensity"],
            y=part["tflops"],
            mode="markers",
            marker={"color": PROVIDERS[provider].color, "size": 7},
            text=[f"{r.epilog} {r.shape}" for r in part.itertuples()],
            hovertemplate="%{text} " + provider + "<br>%{y:.0f} TFLOP/s at %{x:.0f} FLOP/B<extra></extra>",
        )
    ceiling = ceilings[
        (ceilings["machine"] == machine) & (ceilings["dtype"] == dtype) & ceilings["commit"].isin(set(rows["commit"]))
    ]
    title = f"{machine} {dtype}: achieved TFLOP/s against arithmetic intensity"
    if len(ceiling) and len(rows):
        roof = ceiling.iloc[-1]
        rate, bandwidth = float(roof["gemm_tflops"]), float(roof["copy_tbps"])
        span = np.geomspace(max(rows["intensity"].min() / 2, 1.0), rows["intensity"].max() * 2, 64)
        title += f"<br><sup>roof: best GEMM {rate:.0f} TFLOP/s (at {roof['gemm_at']}), copy {bandwidth:.2f} TB/s</sup>"
        figure.add_scatter(
            name="roof: min(GEMM rate, bandwidth x intensity)",
            x=span,
            y=np.minimum(rate, bandwidth * span),
            mode="lines",
            line={"color": "black", "dash": "dash"},
        )
    else:
        title += " (no ceilings measured in this run)"
    figure.update_layout(
        title=title,
        xaxis={"title": "FLOP per byte the fused kernel must move", "type": "log"},
        yaxis={"title": "TFLOP/s", "type": "log"},
        height=460,
    )
    return figure


def machines_figure(table: pd.DataFrame, *, dtype: str, baseline: str) -> go.Figure:
    """Machines side by side: fused's geometric-mean speedup over `baseline` per epilog (over shapes)."""
    rows = table[table["dtype"] == dtype]
    figure = go.Figure()
    for machine in dict.fromkeys(rows["machine"]):
        per_epilog = rows[rows["machine"] == machine].groupby("epilog")[f"over_{baseline}"].apply(geometric_mean)
        per_epilog = per_epilog.reindex([e for e in EPILOG_ORDER if e in per_epilog.index])
        commits = ", ".join(sorted({c[:8] for c in rows[rows["machine"] == machine]["commit"]}))
        figure.add_bar(name=f"{machine} ({commits})", x=list(per_epilog.index), y=per_epilog.values)
    figure.add_hline(y=1.0, line_dash="dot")
    figure.update_layout(
        title=f"{dtype}: fused over {baseline}, machines side by side (geometric mean over shapes)",
        barmode="group",
        yaxis_title="speedup",
        height=420,
    )
    return figure


def history_figure(table: pd.DataFrame, *, machine: str, commits: list[str]) -> go.Figure:
    """A machine's geometric-mean speedups per dtype across commits, in run order."""
    rows = table[table["machine"] == machine]
    figure = go.Figure()
    for dtype in dict.fromkeys(rows["dtype"]):
        for baseline in BASELINES:
            means = [
                geometric_mean(rows[(rows["dtype"] == dtype) & (rows["commit"] == c)][f"over_{baseline}"])
                for c in commits
            ]
            figure.add_scatter(
                name=f"{dtype} over {baseline}", x=[c[:8] for c in commits], y=means, mode="lines+markers"
            )
    figure.update_layout(title=f"{machine}: fused's speedups across commits", yaxis_title="geometric mean speedup")
    return figure
