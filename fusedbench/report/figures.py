"""Plotly figures of the tidy results table: pure functions from DataFrames to figures.

Every number a figure shows comes from one row of `fusedbench.results.loader`. Figures stay light, since
a report holds dozens of them: hover text is a template filled from `customdata` (not a string per
point), numbers are rounded to the digits shown, choices between shapes or dtypes are plotly
dropdowns over one figure's traces, and every figure carries `LEAN_TEMPLATE` instead of plotly's
7 KB default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusedbench.analysis.speedups import (
    EPILOG_COST,
    OVER_UNFUSED,
    indistinct,
    interval_columns,
    machine_pairs,
    paired_fused_column,
    provider_column,
    speedup_column,
    with_shape,
)
from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.epilogs import EPILOGS
from fusedbench.catalog.model import Status
from fusedbench.catalog.providers import BASELINES, FUSED, LADDER, PEERS, PROVIDERS, UNFUSED, WALKTHROUGH

EPILOG_ORDER = [spec.name for spec in EPILOGS.values()]
OK = Status.OK.value
LEAN_TEMPLATE = go.layout.Template(
    layout={
        "font": {"family": "system-ui, sans-serif", "size": 13},
        "plot_bgcolor": "#f7f7f9",
        # "allow": plotly's default for a numeric axis hides a tick label past the figure's edge, and measures
        # every label again as it places each one (its time grows with the square of the labels)
        "xaxis": {"gridcolor": "#e2e2e6", "zeroline": False, "automargin": True, "ticklabeloverflow": "allow"},
        "yaxis": {"gridcolor": "#e2e2e6", "zeroline": False, "automargin": True, "ticklabeloverflow": "allow"},
        "hoverlabel": {"align": "left"},
        "margin": {"t": 70, "r": 30},
    }
)
DIGITS = 4  # significant digits of every number a figure carries (hover shows at most 4)
# Every speedup heatmap shares one colour range, so one colour means one speedup on every page: log2 of
# 0.5x-2x, clipped beyond. Cells whose paired interval includes 1x are greyed over.
SPEEDUP_LOG2_RANGE = 1.0
SPEEDUP_COLORBAR = {
    "title": {"text": "fused speedup", "side": "right"},
    "tickvals": [-1, -0.5, 0, 0.5, 1],
    "ticktext": ["0.5x or less", "0.71x", "1x", "1.41x", "2x or more"],
}
# Not told apart: a light grey, no heavier than the palest significant cells (a heavier one drew the eye to the
# cells that say least), yet apart from the plot's background, where a cell was not timed (n/a).
INDISTINCT_GREY = "rgb(228, 228, 228)"
GREY_NAME = "interval includes 1x"
# A heatmap cell's value with a halo of the opposite colour: plotly writes it dark or light by the cell's brightness,
# and on the colour scale's mid tones (about 1.41x or 0.71x) either alone is under 3.5:1 against the cell.
CELL_TEXT = {"shadow": "auto"}
MULTI_KERNEL_MARK = "*"  # after a cell's value: the fused call launched more than one kernel
# The epilog's cost over the plain GEMM, in %: sequential, 0 (free) to COST_RANGE_PCT, every cost beyond drawn in
# the darkest colour (the colour bar says so, and each cell's number is its own: +712% reads +712%).
COST_RANGE_PCT = 40.0
COST_COLORBAR = {
    "title": {"text": "cost over the GEMM", "side": "right"},
    "tickvals": [0, 10, 20, 30, COST_RANGE_PCT],
    "ticktext": ["0% or less", "10%", "20%", "30%", f"{COST_RANGE_PCT:.0f}% or more"],
}
SHAPE_AXIS = "shape (M,K)x(K,N), by the GEMM's arithmetic intensity (2MNK / (MK + KN + MN)), low to high"
# Colours of the dtypes where machines are compared, from Okabe and Ito's palette (told apart under the common
# colour blindnesses), none of them the heatmaps' "loss" red, each with a marker shape of its own as well.
DTYPE_COLORS = {"fp16": "#0072B2", "bf16": "#E69F00", "tf32": "#009E73", "fp8": "#CC79A7", "fp32": "#000000"}
DTYPE_SYMBOLS = {"fp16": "circle", "bf16": "square", "tf32": "diamond", "fp8": "triangle-up", "fp32": "x"}
# The machines of the headline figure, in the order shown: a colour and a marker shape each (Okabe and Ito).
SHIFT_COLOR = "#D55E00"  # Okabe and Ito's vermillion: where a trend's series shifted (a change point)
MACHINE_MARKS = [("#0072B2", "circle"), ("#D55E00", "square"), ("#009E73", "diamond"), ("#CC79A7", "triangle-up")]
HEADLINE_TICKS = [0.25, 0.35, 0.5, 0.71, 0.8, 0.9, 1, 1.1, 1.25, 1.41, 1.6, 2, 2.83, 4]
SPEEDUP_TICKS = [0.25, 0.35, 0.5, 0.71, 1, 1.41, 2, 2.83, 4, 8, 16, 32, 64]
TEXTBOOK = "textbook"
# Drawn at the ladder's top with their value written where far above the rest: the textbook, and the seed
# walkthrough's rungs (tens to hundreds of times fused's time), which would otherwise flatten every other point.
CAPPED = (TEXTBOOK, *WALKTHROUGH)
CAPPED_STEP = 0.07  # of the axis, between the capped providers' rows of numbers
VIEW_GROUP = ": "  # between a view's group and its name in a dropdown's label ('fp16: fused over unfused')
UNPAIRED = " (this run did not pair samples by round: no interval)"
TREND_BAND_REACH = 1.25  # a trend's y axis reaches past its cell's points this far at most, for the grey band
LADDER_HEADROOM = 1.15  # the ladder's axis ends this far above the highest non-textbook interval


def rounded(values, digits: int = DIGITS) -> list:
    """Numbers to `digits` significant digits, NaN to None (JSON null): what a figure's JSON carries."""
    out = []
    for value in np.asarray(values, dtype=float).ravel():
        out.append(None if not math.isfinite(value) else float(f"{value:.{digits}g}"))
    return out


def whole(values) -> list:
    """Numbers rounded to integers, NaN to None: a percentage a colour shows."""
    return [None if not math.isfinite(v) else round(v) for v in np.asarray(values, dtype=float).ravel()]


def _grid(frame: pd.DataFrame, columns: list[str]) -> list:
    """Per row of `frame`, its `columns` rounded: a heatmap row's customdata."""
    return [rounded(row) for row in frame[columns].to_numpy(dtype=float)] if len(frame) else []


def _in_ms(rows: pd.DataFrame, providers) -> pd.DataFrame:
    return rows.assign(**{f"{provider}_ms": rows[provider] * 1e3 for provider in providers})


def _columns(rows: pd.DataFrame) -> pd.DataFrame:
    """The heatmap's column label of each row: its shape, or 'dtype shape' where several dtypes share a figure."""
    order = {dtype: i for i, dtype in enumerate(DTYPES)}
    rows = rows.assign(dtype_order=rows["dtype"].map(order)).sort_values(["dtype_order", "intensity", "size"])
    several = rows["dtype"].nunique() > 1
    return rows.assign(column=rows["dtype"] + "<br>" + rows["shape"] if several else rows["shape"])


def _epilog_by_shape(
    rows: pd.DataFrame,
    column: str,
    *,
    label,
    z,
    scale: dict,
    title: str,
    hover: str,
    hover_columns: list[str],
    greyed=frozenset(),
) -> dict:
    """An epilog x shape heatmap of `column` as a figure dict (plotly validates it once, where a figure is made of
    it: validating every view's traces again as they joined one figure took half a second a figure), each cell's
    label written in it (MULTI_KERNEL_MARK after it where the fused call launched more than one kernel, "n/a" where
    the cell was not timed) and `hover` (a template over `hover_columns` as customdata) on hover; the (epilog,
    column) cells in `greyed` are covered in grey."""
    rows = _columns(rows)
    shapes = list(dict.fromkeys(rows["column"]))
    epilogs = [e for e in EPILOG_ORDER if e in set(rows["epilog"])]
    indexed = rows.set_index(["epilog", "column"])
    full = pd.MultiIndex.from_product([epilogs, shapes])
    values = indexed[column].reindex(full).to_numpy(dtype=float).reshape(len(epilogs), len(shapes))
    custom = _grid(indexed.reindex(full), hover_columns)
    customdata = [custom[i * len(shapes) : (i + 1) * len(shapes)] for i in range(len(epilogs))]
    kernels = indexed["fused_kernels"].reindex(full).to_numpy(dtype=float).reshape(len(epilogs), len(shapes))
    text = _cell_texts(values, kernels, label)
    # A greyed cell has no colour of its own: the grey cover is drawn first, under the values' text, and
    # carries the cell's hover (one text layer: a second one would double the drawing time).
    cover = [[(epilog, shape) in greyed for shape in shapes] for epilog in epilogs]
    grid = [
        rounded([z(v) if math.isfinite(v) and not grey else math.nan for v, grey in zip(row, mask, strict=True)])
        for row, mask in zip(values, cover, strict=True)
    ]
    hovertemplate = "%{y} %{x}<br>" + hover + "<extra></extra>"
    heatmap = {
        "type": "heatmap",
        "z": grid,
        "x": shapes,
        "y": epilogs,
        "text": text,
        "texttemplate": "%{text}",
        "textfont": CELL_TEXT,
        "customdata": customdata,
        "hovertemplate": hovertemplate,
        "hoverongaps": False,
        "name": column,
        **scale,
    }
    return {
        "data": [grey_cover(cover, shapes, epilogs, customdata, hovertemplate), heatmap] if greyed else [heatmap],
        "layout": _epilog_layout(title, len(epilogs), several_dtypes=rows["dtype"].nunique() > 1),
    }


def _epilog_layout(title: str, epilogs: int, *, several_dtypes: bool) -> dict:
    """An epilog x shape heatmap's layout: a row of 26 px per epilog, its x axis the shapes (dtype and shape where
    several dtypes share it)."""
    return {
        "template": LEAN_TEMPLATE,
        "title": {"text": title},
        "height": 210 + 26 * epilogs,
        "xaxis": {"title": {"text": "dtype and shape" if several_dtypes else SHAPE_AXIS}, "type": "category"},
        "yaxis": {"title": {"text": "epilog"}, "autorange": "reversed"},
        "margin": {"l": 140},
    }


def _cell_texts(values, kernels, label) -> list[list[str]]:
    """Each heatmap cell's label: its value, MULTI_KERNEL_MARK where fused launched more than one kernel, "n/a"."""
    return [
        [
            "n/a" if math.isnan(v) else label(v) + (MULTI_KERNEL_MARK if k > 1 else "")
            for v, k in zip(*pair, strict=True)
        ]
        for pair in zip(values, kernels, strict=True)
    ]


def grey_cover(cover, x, y, customdata, hovertemplate: str) -> dict:
    """The grey drawn under the covered cells' text (a heatmap's values draw over it), carrying their hover: grey
    means one thing in every heatmap, two timings not told apart, and a cell not timed is left the background's.
    A trace dict, validated where its figure is made."""
    return {
        "type": "heatmap",
        "z": [[1 if grey else None for grey in mask] for mask in cover],
        "x": x,
        "y": y,
        "customdata": [
            [cell if grey else None for cell, grey in zip(row, mask, strict=True)]
            for row, mask in zip(customdata, cover, strict=True)
        ],
        "hovertemplate": hovertemplate,
        "hoverongaps": False,
        "colorscale": [[0, INDISTINCT_GREY], [1, INDISTINCT_GREY]],
        "showscale": False,
        "name": GREY_NAME,
    }


def _which(machine: str, dtypes: list[str], suite: str = "") -> str:
    """'h100-80gb-hbm3 fp16', or 'h100-80gb-hbm3 peers fp16' where the figure is a suite's of its own."""
    return " ".join([machine, *([suite] if suite else []), " and ".join(dtypes)])


def _above_one(baseline: str) -> str:
    """What a speedup above 1x says: over a baseline, that fusion pays; over a peer (which fuses too), that
    cuBLASLt's epilog is the faster way to fuse."""
    return f">1x: cuBLASLt's epilog beats {baseline}" if baseline in PEERS else ">1x: fusion pays"


def speedup_heatmap(
    table: pd.DataFrame, *, machine: str, dtypes: list[str], baseline: str, suite: str = ""
) -> go.Figure:
    """Epilog x shape (x dtype, where several are given), fused's speedup over `baseline`, the value written in
    each cell, on the shared colour range; greyed where the paired interval includes 1x."""
    return go.Figure(_speedup_view(table, machine=machine, dtypes=dtypes, baseline=baseline, suite=suite))


def _speedup_view(table: pd.DataFrame, *, machine: str, dtypes: list[str], baseline: str, suite: str = "") -> dict:
    """`speedup_heatmap` as a figure dict."""
    rows = table[(table["machine"] == machine) & table["dtype"].isin(dtypes)]
    # a peer timed in groups of its own is paired with the fused of its group's run, which the hover shows
    fused = paired_fused_column(baseline) if paired_fused_column(baseline) in rows else FUSED
    rows = _in_ms(_columns(rows), [fused, baseline])
    unclear = rows[indistinct(rows, baseline)]
    greyed = frozenset(zip(unclear["epilog"], unclear["column"], strict=True))
    speedup = speedup_column(baseline)
    low, high = interval_columns(speedup)
    paired = rows[low].notna().any()
    return _epilog_by_shape(
        rows,
        speedup,
        label=lambda v: f"{v:.2f}x",
        z=lambda v: math.log2(v) if v > 0 else math.nan,
        scale={
            "colorscale": "RdBu",
            "zmin": -SPEEDUP_LOG2_RANGE,
            "zmax": SPEEDUP_LOG2_RANGE,
            "colorbar": SPEEDUP_COLORBAR,
        },
        hover=f"fused %{{customdata[0]:.4g}} ms, {baseline} %{{customdata[1]:.4g}} ms<br>"
        "speedup %{customdata[2]:.3f}x"
        + (", paired 95% interval %{customdata[3]:.3f}-%{customdata[4]:.3f}" if paired else UNPAIRED),
        hover_columns=[f"{fused}_ms", f"{baseline}_ms", speedup, low, high][: 5 if paired else 3],
        greyed=greyed,
        title=f"{_which(machine, dtypes, suite)}: fused over {baseline} ({_above_one(baseline)})<br><sup>grey: the "
        f"paired 95% interval includes 1x; {MULTI_KERNEL_MARK}: the fused call launched more than one kernel; n/a: "
        "not timed (see the cells that did not run)</sup>",
    )


def epilog_cost_figure(table: pd.DataFrame, *, machine: str, dtypes: list[str], suite: str = "") -> go.Figure:
    """What each fused epilog costs over the plain GEMM of its workload: fused / gemm - 1, in %, with the
    interval of its round-by-round ratios where the run paired them; greyed, as a speedup is, where that interval
    includes no cost (fused and the GEMM not told apart)."""
    return go.Figure(_cost_view(table, machine=machine, dtypes=dtypes, suite=suite))


def _cost_view(table: pd.DataFrame, *, machine: str, dtypes: list[str], suite: str = "") -> dict:
    """`epilog_cost_figure` as a figure dict."""
    rows = table[(table["machine"] == machine) & table["dtype"].isin(dtypes)]
    rows = _columns(_in_ms(rows, ["fused", "gemm"])).assign(
        cost_pct=rows[EPILOG_COST] * 100,
        cost_low_pct=(rows[provider_column(FUSED, "gemm_ratio_low")] - 1) * 100,
        cost_high_pct=(rows[provider_column(FUSED, "gemm_ratio_high")] - 1) * 100,
    )
    unclear = rows[(rows["cost_low_pct"] <= 0) & (rows["cost_high_pct"] >= 0)]
    paired = rows["cost_low_pct"].notna().any()
    return _epilog_by_shape(
        rows,
        "cost_pct",
        label=lambda v: f"{round(v):+d}%",
        z=lambda v: v,
        scale={
            "colorscale": "Oranges",
            "zmin": 0,
            "zmax": COST_RANGE_PCT,
            "colorbar": COST_COLORBAR,
        },
        hover="fused %{customdata[0]:.4g} ms, gemm %{customdata[1]:.4g} ms<br>epilog cost %{customdata[2]:+.1f}%"
        + (", paired 95% interval %{customdata[3]:+.1f}% to %{customdata[4]:+.1f}%" if paired else UNPAIRED),
        hover_columns=["fused_ms", "gemm_ms", "cost_pct", "cost_low_pct", "cost_high_pct"][: 5 if paired else 3],
        greyed=frozenset(zip(unclear["epilog"], unclear["column"], strict=True)),
        title=f"{_which(machine, dtypes, suite)}: the epilog's own cost, fused - gemm, as % of gemm<br><sup>grey: the "
        f"paired 95% interval includes 0%; colour from 0 to {COST_RANGE_PCT:.0f}% or more, the number the cell's own; "
        f"{MULTI_KERNEL_MARK}: the fused call launched more than one kernel; n/a: not timed</sup>",
    )


def dtype_views(table: pd.DataFrame) -> list[list[str]]:
    """The dtypes drawn together: each dtype timed at several shapes on its own, those timed at one shape
    side by side in one epilog x dtype view (a single column each would stretch across the page)."""
    shapes = table.groupby("dtype")["shape"].nunique().reindex([d for d in DTYPES if d in set(table["dtype"])])
    single = [dtype for dtype, count in shapes.items() if count == 1]
    views = [[dtype] for dtype, count in shapes.items() if count > 1]
    return views + ([single] if single else [])


def heatmap_views(table: pd.DataFrame, *, machine: str, dtypes=None, suite: str = "") -> go.Figure:
    """One epilog x shape figure of a machine's `dtypes` (all it has where not given), its views a dropdown: per
    group of `dtype_views`, fused over unfused (the first group's shown first), over the textbook, over each peer
    the run timed, and the epilog's cost; a view whose numbers no cell has (the textbook and the GEMM at fp32,
    timed by the walkthrough's groups only) is left out. `suite` names a suite drawn apart in its titles ('peers'),
    so they differ from the main heatmaps'. Only the view shown is drawn, so the page opens as quickly as for one
    dtype: a figure per dtype cost its drawing each."""
    rows = table[(table["machine"] == machine) & table["dtype"].isin(dtypes or DTYPES)]
    views = {}
    for group in dtype_views(rows):
        named = _metric_views(rows[rows["dtype"].isin(group)], machine, group, suite)
        views.update({f"{' and '.join(group)}{VIEW_GROUP}{name}": view for name, view in named})
    if not views:
        return go.Figure(layout={"template": LEAN_TEMPLATE, "title": f"{machine}: no cells"})
    owner = [index for index, view in enumerate(views.values()) for _ in view["data"]]
    traces = [trace | {"visible": index == 0} for index, view in enumerate(views.values()) for trace in view["data"]]
    figure = go.Figure(data=traces, layout=next(iter(views.values()))["layout"])
    # as tall as its tallest view: a view's own height would leave a blank band under a shorter one (the page's
    # box keeps the height it was drawn at) and fix the figure's width where it was (plotly's autosize off)
    figure.update_layout(height=max(view["layout"]["height"] for view in views.values()))
    restyles = [{"visible": [o == index for o in owner]} for index in range(len(views))]
    layouts = [
        {"title.text": v["layout"]["title"]["text"], "xaxis.title.text": v["layout"]["xaxis"]["title"]["text"]}
        for v in views.values()
    ]
    add_dropdown(figure, list(views), restyles, layouts)
    return figure


def _metric_views(rows: pd.DataFrame, machine: str, dtypes: list[str], suite: str) -> list[tuple[str, dict]]:
    """One dtype group's heatmaps (`rows`: its cells) as figure dicts, named: fused over unfused, over the textbook
    and each peer timed, the epilog's cost."""

    def timed(column: str) -> bool:
        return column in rows and rows[column].notna().any()

    others = [name for name in (*reversed(BASELINES), *PEERS) if name != UNFUSED and timed(speedup_column(name))]
    views = [
        (f"fused over {name}", _speedup_view(rows, machine=machine, dtypes=dtypes, baseline=name, suite=suite))
        for name in (UNFUSED, *others)
    ]
    if timed(EPILOG_COST):
        views.append(("epilog cost", _cost_view(rows, machine=machine, dtypes=dtypes, suite=suite)))
    return views


def merge_views(figures: list[go.Figure], names: list[str]) -> go.Figure:
    """One figure holding the views of several (`figures[0]`, changed in place, then the others'), each figure's
    traces drawn only in its own views, its views listed under its name ('peers ' + 'fp16: fused over triton'):
    a figure the page draws costs its drawing, a hidden trace nothing. A figure without views is left out. The
    figure is as tall as the tallest (as `heatmap_views` makes it); each view names its source's axis titles, and
    its floor lines where the sources' differ."""
    kept = [(figure, name) for figure, name in zip(figures, names, strict=True) if figure.layout.updatemenus]
    if not kept:
        return figures[0]
    figures, names = [figure for figure, _ in kept], [name for _, name in kept]
    first, counts = figures[0], [len(figure.data) for figure in figures]
    if len(figures) == 1:
        return first
    shapes = {str(figure.layout.shapes) for figure in figures}
    labels, restyles, layouts, start = [], [], [], 0
    for figure, name, count in zip(figures, names, counts, strict=True):
        before, after = [None] * start, [None] * (sum(counts) - start - count)
        own = {
            "xaxis.title.text": figure.layout.xaxis.title.text,
            "yaxis.title.text": figure.layout.yaxis.title.text,
        } | ({"shapes": [shape.to_plotly_json() for shape in figure.layout.shapes]} if len(shapes) > 1 else {})
        for button in figure.layout.updatemenus[0].buttons:
            restyle, relayout = button.args
            visible = restyle.get("visible", [True] * count)
            restyle = {key: [*before, *values, *after] for key, values in restyle.items() if key != "visible"}
            restyles.append(restyle | {"visible": [False] * start + list(visible) + [False] * len(after)})
            labels.append(name + button.label)
            layouts.append(own | relayout)
        start += count
    first.add_traces([trace.update(visible=False) for figure in figures[1:] for trace in figure.data])
    first.layout.height = max(figure.layout.height or 0 for figure in figures) or None
    add_dropdown(first, labels, restyles, layouts)
    return first


def add_title_line(figure: go.Figure, text: str) -> None:
    """A further small line under the figure's title (a PNG names its commits so), the top margin grown to hold
    it rather than the line drawn over the plot."""
    top = figure.layout.margin.t or LEAN_TEMPLATE.layout.margin.t
    figure.update_layout(title=f"{figure.layout.title.text}<br><sup>{text}</sup>", margin={"t": top + 22})


def add_dropdown(figure: go.Figure, labels: list[str], restyles: list[dict], layouts: list[dict]) -> None:
    """The figure's views: choosing a label applies its restyle (trace attributes, a list per trace) and layout. They
    are kept as a plotly dropdown, which the page turns into a <select> beside the figure (`report.views`), so the
    plot needs no room for it; a label 'group: view' (`VIEW_GROUP`) is listed there as `view` under `group`."""
    buttons = [
        {"label": label, "method": "update", "args": [restyle, layout]}
        for label, restyle, layout in zip(labels, restyles, layouts, strict=True)
    ]
    # assigned, not updated: an update merges a figure's dropdown of before into this one, button by button
    figure.layout.updatemenus = [{"buttons": buttons, "x": 0, "xanchor": "left", "y": 1.01, "yanchor": "bottom"}]


def _ladder_points(part: np.ndarray, floor: np.ndarray, top: float, provider: str, measured: bool) -> dict:
    """One provider's points at one shape: time over the floor, its 99% CI as error bars, its time in ms for the
    hover. A provider that is drawn capped (the textbook or a walkthrough rung, often far above the rest; its place
    in CAPPED sets its level) has a point above `top` drawn near the top as an up-triangle with its value written,
    each such provider a step lower than the one before, so that their numbers do not overwrite each other; its
    hover reads (ms, ratio). A point below its floor (where there is one) is drawn open, as the title says."""
    time, low, high = part  # seconds by epilog: the median and its 99% CI
    over = time / floor
    level = CAPPED.index(provider) if provider in CAPPED else None
    beyond = (over > top) if level is not None else np.zeros(len(over), dtype=bool)
    below = (over < 1 - 1e-9) if measured else np.zeros(len(over), dtype=bool)  # the roof's own cell is at 1
    symbol = PROVIDERS[provider].symbol
    return {
        "y": rounded(np.where(beyond, top * (0.97 - CAPPED_STEP * (level or 0)), over), 3),
        "error_y.array": rounded(np.where(beyond, np.nan, high / floor - over), 2),
        "error_y.arrayminus": rounded(np.where(beyond, np.nan, over - low / floor), 2),
        "customdata": [rounded(pair) for pair in zip(time * 1e3, over, strict=True)]
        if level is not None
        else rounded(time * 1e3),
        "text": [f"{v:.3g}x" if b else "" for v, b in zip(over, beyond, strict=True)] if level is not None else None,
        "showlegend": bool(not np.isnan(time).all()),  # in the legend where the view draws it
        # every view names each trace's shape: a restyle without it would draw the default circle (one name for
        # every point where no point differs: a list per trace and view weighed 100 KB a page)
        "marker.symbol": [
            "triangle-up" if high else f"{symbol}-open" if low else symbol
            for high, low in zip(beyond, below, strict=True)
        ]
        if beyond.any() or below.any()
        else symbol,
    }


def ladder_figure(cells: pd.DataFrame, roofs: pd.DataFrame, *, machine: str, dtypes=None, suite: str = "") -> go.Figure:
    """Every provider's time over its workload's floor per epilog, one shape of one of `dtypes` (all the machine's
    where not given) at a time, a dropdown picking it, on a linear axis: 1 is the floor, marked under each epilog
    (every shape in ms where the machine's runs measured no ceilings for one of them: `roofs`,
    `results.machine_roofs`). A textbook or walkthrough rung far above the rest is drawn at the axis' top with its
    value written; a point below its floor is drawn open, its hover saying why; the hover gives each provider's time
    and the floor's.

    The traces are drawn once; each shape is a restyle of their numbers (no per-shape copies of the traces)."""
    rows = with_shape(cells[(cells["machine"] == machine) & (cells["status"] == OK)])
    dtypes = [d for d in DTYPES if d in set(rows["dtype"]) and d in (dtypes or DTYPES)]
    rows = rows[rows["dtype"].isin(dtypes)]
    ladder = _Ladder.of(rows, roofs, machine, dtypes, suite)
    figure = go.Figure()
    _ladder_traces(figure, ladder)
    figure.update_layout(**_ladder_layout(ladder, machine, dtypes))
    if ladder.choices:  # a dropdown even of one shape: its view, where other figures' views join it (merge_views)
        labels = [f"{dtype}{VIEW_GROUP}{shape}" for dtype, shape in ladder.choices]
        add_dropdown(figure, labels, ladder.restyles, ladder.layouts)
    return figure


@dataclass(frozen=True)
class _Ladder:
    """What a ladder figure draws: its epilogs and providers, and per (dtype, shape) choice the traces' numbers
    (`restyles`) and the axis and title (`layouts`)."""

    epilogs: list[str]
    providers: list[str]
    choices: list[tuple[str, str]]
    measured: bool  # whether the machine's runs measured ceilings (a floor to divide by) for every shape
    restyles: list[dict]
    layouts: list[dict]

    @classmethod
    def of(cls, rows: pd.DataFrame, roofs: pd.DataFrame, machine: str, dtypes: list[str], suite: str) -> _Ladder:
        epilogs = [e for e in EPILOG_ORDER if e in set(rows["epilog"])]
        # The workload's floor (the epilog's FLOPs and bytes under the machine's roofs); the gemm cell's own is lower.
        floors = rows[rows["provider"] != "gemm"].dropna(subset=["floor_s"])
        floors = floors.groupby(["dtype", "shape", "epilog"])["floor_s"].first()
        choices = [
            (dtype, shape)
            for dtype in dtypes
            for shape in dict.fromkeys(rows[rows["dtype"] == dtype].sort_values(["intensity", "size"])["shape"])
        ]
        # over floors where every shape has one; in ms where the machine measured no ceilings for a dtype
        measured = bool(choices) and set(choices) <= {(dtype, shape) for dtype, shape, _ in floors.index}
        providers = [p for p in (*LADDER, *PEERS) if p in set(rows["provider"])]
        under = {dtype: _roof(roofs, machine, dtype) for dtype in dtypes}
        restyles, layouts = [], []
        # every choice's providers' epilogs in one reindex, each (choice, provider) a block of len(epilogs) rows
        blocks = [(*choice, p, e) for choice in choices for p in providers for e in epilogs]
        grid = rows.set_index(["dtype", "shape", "provider", "epilog"])[["time_s", "ci_low_s", "ci_high_s"]]
        full = pd.MultiIndex.from_tuples(blocks, names=["dtype", "shape", "provider", "epilog"])
        # choice x provider x (time, low, high) x epilog, in seconds: numpy, not a frame sliced per provider
        seconds = grid.reindex(full).to_numpy(dtype=float) if blocks else np.empty((0, 3))
        seconds = seconds.reshape(len(choices), len(providers), len(epilogs), 3).transpose(0, 1, 3, 2)
        for number, (dtype, shape) in enumerate(choices):
            unit = floors.loc[(dtype, shape)].reindex(epilogs).to_numpy() if measured else np.full(len(epilogs), 1e-3)
            parts = dict(zip(providers, seconds[number], strict=True))
            restyle, top = _ladder_restyle(parts, epilogs, unit, measured)
            restyles.append(restyle)
            title = _ladder_title(_which(machine, [dtype], suite), shape, under[dtype])
            layouts.append({"yaxis.range": [0, top], "title.text": title})
        return cls(epilogs, providers, choices, measured, restyles, layouts)


def _ladder_restyle(parts: dict, epilogs, unit, measured: bool) -> tuple[dict, float]:
    """One shape's numbers for every trace (the floor's first, where there is one), and the axis' top; `parts`: each
    provider's seconds (time, CI low, CI high) by epilog, in `epilogs`' order."""
    highest = [
        float(np.nanmax(part[2] / unit)) for p, part in parts.items() if p not in CAPPED and not np.isnan(part[2]).all()
    ]
    top = max([2.0 if measured else 0.0, *(h * LADDER_HEADROOM for h in highest)])
    capped = [CAPPED.index(p) for p, part in parts.items() if p in CAPPED and not np.isnan(part[0]).all()]
    if capped and highest:  # the lowest row of capped values above every measured point, not among them
        top = max(top, max(highest) * LADDER_HEADROOM / (0.97 - CAPPED_STEP * max(capped)))
    points = [_ladder_points(part, unit, top, p, measured) for p, part in parts.items()]
    restyle = {key: [point[key] for point in points] for key in points[0]}
    if measured:  # the floor's trace comes first: at 1, its time in ms for the hover, never in the legend
        floor = {"y": [1] * len(epilogs), "customdata": rounded(unit * 1e3), "showlegend": False}
        restyle = {key: [floor.get(key), *values] for key, values in restyle.items()}
    return restyle, top


def _ladder_traces(figure: go.Figure, ladder: _Ladder) -> None:
    """The floor's hover trace, then a trace per provider with the first choice's numbers."""
    epilogs, restyles = ladder.epilogs, ladder.restyles
    if ladder.measured:
        figure.add_scatter(  # the floor's time, for the hover (its mark is a line under each epilog)
            name="floor",
            x=epilogs,
            y=[1] * len(epilogs),
            mode="markers",
            marker={"opacity": 0},
            showlegend=False,
            customdata=restyles[0]["customdata"][0],
            hovertemplate="floor %{customdata:.4g} ms<extra></extra>",
        )
    ratio = "x its floor" if ladder.measured else " ms"
    for provider in ladder.providers:
        first = {key: values[len(figure.data)] for key, values in restyles[0].items()} if restyles else {}
        hover = (
            ": %{customdata[0]:.4g} ms, %{customdata[1]:.3g}"
            if provider in CAPPED
            else ": %{customdata:.4g} ms, %{y:.3g}"
        )
        figure.add_scatter(
            name=provider,
            x=epilogs,
            y=first.get("y"),
            mode="markers+text" if provider in CAPPED else "markers",
            showlegend=first.get("showlegend"),
            text=first.get("text"),
            textposition="bottom center",
            marker={"color": PROVIDERS[provider].color, "size": 9, "symbol": first.get("marker.symbol")},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": first.get("error_y.array"),
                "arrayminus": first.get("error_y.arrayminus"),
                "thickness": 1.5,
            },
            customdata=first.get("customdata"),
            hovertemplate=provider + hover + ratio + "<extra></extra>",
        )


def _ladder_layout(ladder: _Ladder, machine: str, dtypes: list[str]) -> dict:
    """The first choice's title and axis, and the floor's line under each epilog's group of points."""
    first = ladder.layouts[0] if ladder.layouts else {}
    floor_line = {"type": "line", "xref": "x", "yref": "y", "y0": 1, "y1": 1, "line": {"color": "black", "width": 2}}
    return {
        "template": LEAN_TEMPLATE,
        "title": first.get("title.text", f"{machine} {' and '.join(dtypes)}: no cells"),
        "scattermode": "group",
        "hovermode": "x unified",
        "xaxis": {"title": "epilog", "type": "category"},
        "yaxis": {
            "title": "time over the workload's floor (1 = the floor)"
            if ladder.measured
            else "ms (no floor: no ceilings)",
            "range": first.get("yaxis.range"),
        },
        "height": 520,
        "margin": {"t": 130},
        "legend": {"orientation": "h", "y": -0.3},
        "shapes": [
            floor_line | {"x0": i - 0.42, "x1": i + 0.42} for i in range(len(ladder.epilogs) if ladder.measured else 0)
        ],
    }


def _roof(roofs: pd.DataFrame, machine: str, dtype: str) -> str:
    """What the machine's floors stand on for the dtype: the best GEMM rate and copy bandwidth any of its runs saw."""
    roof = roofs[(roofs["machine"] == machine) & (roofs["dtype"] == dtype)]
    if roof.empty:
        return "none: no ceilings measured on this machine"
    best = roof.iloc[0]
    return (
        f"max(FLOPs / {best['gemm_tflops']:.0f} TFLOP/s, bytes / {best['copy_tbps']:.2f} TB/s), the best GEMM and copy "
        f"of the machine's {best['runs']} runs with ceilings"
    )


def _ladder_title(which: str, shape: str, under: str) -> str:
    return (
        f"{which} {shape}: each provider's time over its floor<br><sup>floor (black line): {under}<br>"
        "open marker: below its floor (the GEMM alone skips the epilog's reads and writes); error bars: 99% CI</sup>"
    )


def headline_figure(tables: dict[str, pd.DataFrame]) -> go.Figure:
    """The answer before the prose: per dtype, each workload's fused over unfused speedup on each machine (a point
    each, the box their quartiles), against 1x, so where fusion pays and by how much reads at a glance."""
    figure = go.Figure()
    shown = [d for d in DTYPES if any(d in set(t["dtype"]) for t in tables.values())]
    for index, (machine, table) in enumerate(tables.items()):
        color, symbol = MACHINE_MARKS[index % len(MACHINE_MARKS)]
        rows = table[table[OVER_UNFUSED].notna() & (table[OVER_UNFUSED] > 0)]
        figure.add_box(
            name=machine,
            x=rounded(rows[OVER_UNFUSED]),
            y=list(rows["dtype"]),
            orientation="h",
            boxpoints="all",
            jitter=0.5,
            pointpos=0,
            fillcolor="rgba(0,0,0,0)",
            line={"color": color, "width": 1.5},
            marker={"color": color, "symbol": symbol, "size": 6, "opacity": 0.75},
            text=[f"{e} {s}" for e, s in zip(rows["epilog"], rows["shape"], strict=True)],
            hovertemplate=f"{machine} %{{y}} %{{text}}: fused %{{x:.3f}}x unfused<extra></extra>",
        )
    values = [v for t in tables.values() for v in t[OVER_UNFUSED].dropna() if v > 0]
    low, high = min([*values, 0.9]) / 1.05, max([*values, 1.1]) * 1.05  # 1x always inside
    ticks = [t for t in HEADLINE_TICKS if low <= t <= high]
    figure.add_vline(x=1, line={"color": "#333", "dash": "dash", "width": 1})
    figure.update_layout(
        template=LEAN_TEMPLATE,
        title={
            "text": "What fusion buys: fused epilogs over the best unfused version, per workload<br><sup>right "
            "of the dashed line fusion pays; each point a workload of the newest runs, the box its dtype's "
            "quartiles</sup>"
        },
        boxmode="group",
        xaxis={
            "type": "log",
            "tickvals": ticks,
            "ticktext": [f"{t:g}x" for t in ticks],
            "range": [math.log10(low), math.log10(high)],
            "title": {"text": "fused over unfused (time ratio)"},
        },
        yaxis={"categoryorder": "array", "categoryarray": shown[::-1], "title": {"text": "dtype"}},
        height=140 + 60 * len(shown) * max(1, len(tables)) ** 0.5,
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def _dtype_marker(dtype: str) -> dict:
    return {
        "color": DTYPE_COLORS.get(dtype, "#444"),
        "symbol": DTYPE_SYMBOLS.get(dtype, "circle"),
        "size": 7,
        "opacity": 0.8,
    }


def machines_figure(table: pd.DataFrame, *, reference: str, other: str) -> go.Figure:
    """Per workload, fused's speedup on one machine against another, over each baseline in turn (a dropdown
    picks it: unfused first), log axes, y = x where the machines agree; a colour per dtype."""
    figure, owner, layouts = go.Figure(), [], []
    for index, baseline in enumerate(reversed(BASELINES)):
        both = machine_pairs(table, reference, other, baseline)
        both = both[(both["x"] > 0) & (both["y"] > 0)]
        for dtype in [d for d in DTYPES if d in set(both.index.get_level_values("dtype"))]:
            part = both.loc[dtype]
            figure.add_scatter(
                name=dtype,
                legendgroup=dtype,
                visible=index == 0,
                x=rounded(part["x"]),
                y=rounded(part["y"]),
                mode="markers",
                marker=_dtype_marker(dtype),
                text=[f"{epilog} {shape}" for epilog, shape in part.index],
                hovertemplate=f"{dtype} %{{text}}<br>{reference} %{{x:.3f}}x, {other} %{{y:.3f}}x<extra></extra>",
            )
            owner.append(index)
        values = both[["x", "y"]].to_numpy().ravel()
        low, high = (float(values.min()) / 1.1, float(values.max()) * 1.1) if len(values) else (0.5, 2.0)
        figure.add_scatter(
            name="y = x: the machines agree",
            visible=index == 0,
            x=[low, high],
            y=[low, high],
            mode="lines",
            line={"color": "#333", "dash": "dash", "width": 1},
            hoverinfo="skip",
        )
        owner.append(index)
        shown = [t for t in SPEEDUP_TICKS if low <= t <= high]
        span = [math.log10(low), math.log10(high)]
        layouts.append(
            {
                "title.text": f"fused over {baseline}, per workload: {other} against {reference}<br><sup>above the "
                f"line: fusion pays more on {other}</sup>",
                **{
                    f"{axis}.{key}": value
                    for axis in ("xaxis", "yaxis")
                    for key, value in (("tickvals", shown), ("ticktext", [f"{t:g}x" for t in shown]), ("range", span))
                },
                "xaxis.title.text": f"{reference}: fused over {baseline}",
                "yaxis.title.text": f"{other}: fused over {baseline}",
            }
        )
    figure.update_layout(
        template=LEAN_TEMPLATE,
        xaxis={"type": "log"},
        yaxis={"type": "log", "scaleanchor": "x"},
        height=600,  # the width is the page's (a phone's too): scaleanchor keeps the plot square
    )
    figure.update_layout({key: value for key, value in layouts[0].items()} if layouts else {})
    restyles = [{"visible": [o == index for o in owner]} for index in range(len(layouts))]
    add_dropdown(figure, [f"over {b}" for b in reversed(BASELINES)], restyles, layouts)
    return figure


def trend_figure(series: pd.DataFrame, *, machine: str, commits: list[str]) -> go.Figure:
    """Chosen cells' median time at every commit that timed them (oldest run first), a small plot each, as Bencher
    and Conbench draw a benchmark's history: the grey band is the gate's threshold for the cell around its median
    over these runs (inside it a change is not told apart from noise, the grey of every view), and a dotted line
    marks a commit whose benchmark measures differently (a step there is the method's, not the code's), a dashed one
    where the cell's series (or its group's common factor) shifted, with the shift. `series`: cell (its label),
    commit, time_s, changed (bool: its benchmark version differs from its run before), threshold (a fraction; NaN
    where no preset judges the cell), shift (optional: the change where a shift starts, else NaN)."""
    cells = list(dict.fromkeys(series["cell"]))
    gates = series.groupby("cell", sort=False)["threshold"].first()
    titles = [
        cell + (f" (gate: ±{gates[cell]:.1%})" if gates[cell] == gates[cell] else " (not judged)") for cell in cells
    ]
    figure = make_subplots(
        rows=len(cells), cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.5 / len(cells)
    )
    for row, cell in enumerate(cells, start=1):
        part = series[series["cell"] == cell]
        median = float(part["time_s"].median()) * 1e3
        x = [commit[:7] for commit in part["commit"]]
        figure.add_scatter(
            x=x,
            y=rounded(part["time_s"] * 1e3),
            mode="lines+markers",
            marker={"color": DTYPE_COLORS["fp16"], "symbol": "circle"},
            line={"color": DTYPE_COLORS["fp16"]},
            name=cell,
            showlegend=False,
            hovertemplate="%{x}: %{y} ms<extra>" + cell + "</extra>",
            row=row,
            col=1,
        )
        times = part["time_s"] * 1e3
        bottom, top = times.min() * 0.97, times.max() * 1.03
        threshold = float(part["threshold"].iloc[0])
        if threshold == threshold:  # drawn after the line: plotly skips a shape on a subplot with no trace yet
            low, high = max(median * (1 - threshold), 0.0), median * (1 + threshold)  # a time is never negative
            figure.add_hrect(y0=low, y1=high, row=row, col=1, fillcolor=INDISTINCT_GREY, line_width=0, layer="below")
            # the band shown up to TREND_BAND_REACH beyond the cell's points: a wider one fills the plot
            bottom, top = max(min(bottom, low), bottom / TREND_BAND_REACH), min(max(top, high), top * TREND_BAND_REACH)
        for commit in part.loc[part["changed"], "commit"]:
            figure.add_vline(x=commit[:7], row=row, col=1, line={"color": "black", "width": 1.5, "dash": "dot"})
        shifted = part[part["shift"].notna()] if "shift" in part else part.iloc[0:0]
        for commit, shift, time in zip(shifted["commit"], shifted["shift"], shifted["time_s"] * 1e3, strict=True):
            figure.add_vline(x=commit[:7], row=row, col=1, line={"color": SHIFT_COLOR, "width": 2, "dash": "dash"})
            figure.add_annotation(x=commit[:7], y=float(time), text=f"{shift:+.1%}", showarrow=True, row=row, col=1,
                                  arrowcolor=SHIFT_COLOR, font={"color": SHIFT_COLOR})  # fmt: skip
        figure.update_yaxes(title_text="ms", range=[bottom, top], row=row, col=1)
    shown = [commit[:7] for commit in commits if commit in set(series["commit"])]
    figure.update_xaxes(type="category", categoryorder="array", categoryarray=shown, tickangle=-90)
    figure.update_layout(
        template=LEAN_TEMPLATE,
        height=170 + 170 * len(cells),
        margin={"t": 150},
        title=f"{machine}: chosen cells over commits (oldest run first)<br><sup>each cell's median time; grey: the "
        "gate's threshold for the cell around its median (a change inside it is not told apart from noise; none<br>"
        "where no preset judges it); dotted: its measurement changed there; dashed: its series shifted there "
        "(fusedbench changes)</sup>",
    )
    return figure
