"""The report's section on the seed notebook's MLP: what fusion buys in a whole training step (the mlp suite).

Every number comes from `ResultSet.mlp`, the newest mlp run of each machine: the wall clock of a step (what a
training loop pays), the GPU time of its kernels, and the host's overhead between them. A speedup is a
baseline's median over fused's (above 1x: the fused step is faster). Its cell is greyed where asv's 99%
intervals of the two wall-clock medians overlap; the GPU-time view has no interval (CUPTI's per-step sums).
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fusedbench.catalog.model import Status
from fusedbench.catalog.suites import MLP_DTYPES, MLP_EPOCH, MLP_LAYERS, MLP_STEP
from fusedbench.report.figures import (
    CELL_TEXT,
    LEAN_TEMPLATE,
    SPEEDUP_COLORBAR,
    SPEEDUP_LOG2_RANGE,
    add_dropdown,
    add_title_line,
    grey_cover,
    rounded,
)
from fusedbench.report.tables import anchor, folded, table_html
from fusedbench.results.runs import cells_of_runs, mlp_cells, order_runs
from fusedbench.results.runs import newest_runs as newest_group_runs

UNFUSED = "unfused"
BASELINES = (UNFUSED, "textbook", "torch")
CLOCKS = {"wall": "wall clock per step", "gpu": "GPU time of the step's kernels"}
VERSIONS = ("fused", *BASELINES)
OK = Status.OK.value
FUSION_PAYS = 1.0  # a speedup over unfused above this, told apart from it, is where fusion pays


def step_speedup(baseline: str, clock: str = "wall") -> str:
    """The step table's column of fused's speedup over `baseline` by a clock: 'over_unfused' (wall clock),
    'gpu_over_unfused' (the kernels' GPU time)."""
    return ("gpu_" if clock == "gpu" else "") + "over_" + baseline


def newest_runs(mlp: pd.DataFrame) -> pd.DataFrame:
    """The rows of each mlp group's newest run on each machine (`results.runs`), timed or not."""
    return cells_of_runs(mlp, newest_group_runs(order_runs(mlp_cells(mlp))))


def step_table(mlp: pd.DataFrame) -> pd.DataFrame:
    """One row per machine, layers, batch and dtype of the newest runs' steps: each version's wall and GPU ms,
    fused's host overhead, and fused's speedup over each baseline by both clocks (NaN where either side was not
    timed); `{baseline}_distinct` says whether the two wall-clock intervals are apart."""
    steps = newest_runs(mlp)
    steps = steps[(steps["workload"] == MLP_STEP) & (steps["status"] == OK)]
    keys = ["machine", "commit", "layers", "hidden", "inputs", "batch", "dtype"]
    if steps.empty:
        return pd.DataFrame(columns=keys)
    # One row per step size, a column per clock and version (an all-NaN clock kept: CUPTI may have recorded none).
    wide = steps.set_index([*keys, "version"])[["time_s", "gpu_s", "ci_low_s", "ci_high_s"]].unstack("version")
    table = wide.index.to_frame(index=False)
    for version in VERSIONS:
        for column, unit in (("time_s", "ms"), ("gpu_s", "gpu_ms"), ("ci_low_s", "low_ms"), ("ci_high_s", "high_ms")):
            timed = version in wide[column]
            table[f"{version}_{unit}"] = wide[column][version].to_numpy(dtype=float) * 1e3 if timed else np.nan
    # The two clocks are medians of different calls: where the kernels' median is above the wall's, the host's
    # share was not measured (NaN, shown blank), not negative.
    table["fused_overhead_ms"] = (table["fused_ms"] - table["fused_gpu_ms"]).where(lambda host: host >= 0)
    for baseline in BASELINES:
        table[step_speedup(baseline)] = table[f"{baseline}_ms"] / table["fused_ms"]
        table[step_speedup(baseline, "gpu")] = table[f"{baseline}_gpu_ms"] / table["fused_gpu_ms"]
        table[f"{baseline}_distinct"] = (table[f"{baseline}_low_ms"] > table["fused_high_ms"]) | (
            table[f"{baseline}_high_ms"] < table["fused_low_ms"]
        )
    order = {layers: i for i, layers in enumerate(MLP_LAYERS)}
    dtypes = {dtype: i for i, dtype in enumerate(MLP_DTYPES)}
    table = table.assign(_l=table["layers"].map(order), _d=table["dtype"].map(dtypes))
    return table.sort_values(["machine", "_d", "_l", "batch"]).drop(columns=["_l", "_d"]).reset_index(drop=True)


def _view(rows: pd.DataFrame, baseline: str, clock: str) -> list[dict]:
    """Layers x batch of one dtype: fused's speedup over `baseline` by `clock`, written in each cell; where the
    intervals overlap (wall clock), a grey cover under the text, as the epilog heatmaps grey theirs, so that a cell
    not timed (n/a) stays the background's colour, not grey."""
    speedup = step_speedup(baseline, clock)
    layers = [label for label in MLP_LAYERS if label in set(rows["layers"])]
    batches = sorted(set(rows["batch"]))
    grid = rows.set_index(["layers", "batch"])
    value = lambda layer, batch, column: grid[column].get((layer, batch), math.nan)  # noqa: E731
    suffix = "gpu_ms" if clock == "gpu" else "ms"
    z, text, hover = [], [], []
    for layer in layers:
        speeds = [value(layer, batch, speedup) for batch in batches]
        z.append([math.log2(s) if s > 0 else math.nan for s in speeds])
        text.append([f"{s:.2f}x" if s == s else "n/a" for s in speeds])
        hover.append(
            [
                rounded(
                    [
                        value(layer, batch, f"fused_{suffix}"),
                        value(layer, batch, f"{baseline}_{suffix}"),
                        value(layer, batch, "fused_ms"),
                        value(layer, batch, "fused_gpu_ms"),
                        value(layer, batch, "fused_overhead_ms"),
                    ]
                )
                for batch in batches
            ]
        )
    greyed = [  # wall clock: the intervals overlap; the GPU clock has no interval to grey by
        [clock == "wall" and z[i][j] == z[i][j] and not bool(value(layer, batch, f"{baseline}_distinct"))
         for j, batch in enumerate(batches)]
        for i, layer in enumerate(layers)
    ]  # fmt: skip
    z = [[None if grey else v for v, grey in zip(*pair, strict=True)] for pair in zip(z, greyed, strict=True)]
    x = [f"batch {b}" for b in batches]
    hovertemplate = (
        f"%{{y}}, %{{x}}<br>fused %{{customdata[0]:.4g}} ms, {baseline} %{{customdata[1]:.4g}} ms"
        "<br>fused's step: %{customdata[2]:.4g} ms wall, %{customdata[3]:.4g} ms of kernels, "
        "%{customdata[4]:.4g} ms host overhead<extra></extra>"
    )
    cover = grey_cover(greyed, x, layers, hover, hovertemplate) if any(map(any, greyed)) else None
    values = {
        "type": "heatmap",
        "z": z,
        "x": x,
        "y": layers,
        "text": text,
        "texttemplate": "%{text}",
        "textfont": CELL_TEXT,
        "customdata": hover,
        "hovertemplate": hovertemplate,
        "colorscale": "RdBu",
        "zmin": -SPEEDUP_LOG2_RANGE,
        "zmax": SPEEDUP_LOG2_RANGE,
        "colorbar": SPEEDUP_COLORBAR,
        "xgap": 2,
        "ygap": 2,
    }
    return [cover | {"xgap": 2, "ygap": 2}, values] if cover else [values]


def step_figure(table: pd.DataFrame, machine: str) -> go.Figure | None:
    """One machine's layers x batch heatmap of fused's step speedup, a dropdown over dtype, baseline and clock
    (fp16 over unfused by wall clock first); None where the machine has no fused step timed."""
    if "fused_ms" not in table:  # no step was timed at all
        return None
    rows = table[(table["machine"] == machine) & table["fused_ms"].notna()]
    suffix = {"wall": "ms", "gpu": "gpu_ms"}
    views = [
        (dtype, baseline, clock)
        for dtype in MLP_DTYPES
        for baseline in BASELINES
        for clock in CLOCKS
        if rows[rows["dtype"] == dtype][[f"fused_{suffix[clock]}", f"{baseline}_{suffix[clock]}"]]
        .notna()
        .all(axis=1)
        .any()
    ]
    if not views:
        return None
    views.sort(key=lambda view: view != ("fp16", "unfused", "wall"))
    traces, titles, owner = [], [], []  # owner: the view of each trace
    for index, (dtype, baseline, clock) in enumerate(views):
        for trace in _view(rows[rows["dtype"] == dtype], baseline, clock):
            traces.append(trace | {"visible": index == 0})
            owner.append(index)
        grey = "; grey: the 99% intervals of the two medians overlap" if clock == "wall" else ""
        titles.append(
            f"{machine} MLP training step, {dtype}: fused over {baseline}, {CLOCKS[clock]} (>1x: fusion pays)"
            f"<br><sup>{MLP_LAYERS[0]} is the notebook's network (digits' 64 inputs); n/a: not timed{grey}</sup>"
        )
    figure = go.Figure(data=traces, layout={"template": LEAN_TEMPLATE})  # validated once, all its traces together
    figure.update_layout(
        title=titles[0],
        xaxis={"title": "batch", "type": "category", "showgrid": False},
        yaxis={
            "title": "layers: inputs-hidden-outputs",
            "type": "category",
            "autorange": "reversed",
            "showgrid": False,
        },
    )
    labels = [f"{dtype}, over {baseline}, {clock}" for dtype, baseline, clock in views]
    restyles = [{"visible": [view == i for view in owner]} for i in range(len(views))]
    add_dropdown(figure, labels, restyles, [{"title.text": title} for title in titles])
    return figure


def step_png_figure(table: pd.DataFrame, machine: str) -> tuple[go.Figure | None, str]:
    """The figure's first view alone, for a PNG (which has no dropdown), naming its commit; and the view in a
    file name ('fp16-fused-over-unfused-wall')."""
    figure = step_figure(table, machine)
    if figure is None:
        return None, ""
    commit = table[table["machine"] == machine]["commit"].iloc[0]
    dtype, baseline, clock = figure.layout.updatemenus[0].buttons[0].label.replace("over ", "").split(", ")
    figure.data = [trace for trace in figure.data if trace.visible]  # the first view's
    figure.layout.updatemenus = ()
    add_title_line(figure, f"commit {commit[:8]}")
    return figure, f"{dtype}-fused-over-{baseline}-{clock}"


def where_fusion_stops_paying(table: pd.DataFrame, machine: str) -> str:
    """One paragraph per dtype: the sizes where the fused step beats unfused (intervals apart), those where it
    loses, and how much of fused's step at the notebook's size is the host's."""
    rows = table[(table["machine"] == machine) & table[step_speedup(UNFUSED)].notna()]
    parts = []
    for dtype in MLP_DTYPES:
        mine = rows[rows["dtype"] == dtype]
        if mine.empty:
            continue
        label = lambda r: f"{r.layers} at batch {r.batch} ({r.over_unfused:.2f}x)"  # noqa: E731
        distinct = mine[mine["unfused_distinct"]]
        wins = [label(r) for r in distinct[distinct[step_speedup(UNFUSED)] > FUSION_PAYS].itertuples()]
        losses = [label(r) for r in distinct[distinct[step_speedup(UNFUSED)] < FUSION_PAYS].itertuples()]
        even = len(mine) - len(wins) - len(losses)
        parts.append(
            f"<li><b>{dtype}</b>: the fused step beats unfused at {', '.join(wins) or 'no size'}; it loses at "
            f"{', '.join(losses) or 'no size'}; {even} of {len(mine)} sizes are not told apart.</li>"
        )
    notebook = rows[
        (rows["layers"] == MLP_LAYERS[0]) & (rows["batch"] == rows["batch"].min()) & (rows["dtype"] == "fp32")
    ]
    host = ""
    for row in notebook[notebook["fused_overhead_ms"].notna()].itertuples():  # the notebook's size and dtype
        host = (
            f"<p>At the notebook's size and dtype ({row.layers}, batch {row.batch}, fp32) "
            f"{row.fused_overhead_ms / row.fused_ms:.0%} of fused's step is the host's (Python, nvmath's operand "
            f"resets, launches): its kernels take {row.fused_gpu_ms:.3f} ms of {row.fused_ms:.3f} ms.</p>"
        )
    return host + f"<ul>{''.join(parts)}</ul>"


def step_rows_html(table: pd.DataFrame, machine: str) -> str:
    """Every step of the machine in one folded table: each version's wall ms, fused's GPU ms and overhead, and
    the speedups by both clocks."""
    rows = table[table["machine"] == machine]
    shown = pd.DataFrame(
        {
            "layers": rows["layers"],
            "batch": rows["batch"],
            "dtype": rows["dtype"],
            **{f"{v} ms": rows[f"{v}_ms"].map(_ms) for v in VERSIONS},
            "fused GPU ms": rows["fused_gpu_ms"].map(_ms),
            "fused host ms": rows["fused_overhead_ms"].map(_ms),
            **{f"over {b}": _pairs(rows[step_speedup(b)], rows[step_speedup(b, "gpu")]) for b in BASELINES},
        }
    )
    note = (
        "<p class='muted'>over X: X's median over fused's, wall clock / GPU time (above 1x: fusion pays). fused host "
        "ms: its wall ms less its GPU ms, blank where the kernels' median is above the wall clock's (medians of "
        "different calls).</p>"
    )
    return folded(f"{machine}: every step timed ({len(shown)} rows)", note + table_html(shown), len(shown))


def epoch_rows_html(mlp: pd.DataFrame, machine: str) -> str:
    """The epoch group: each version's ms per digits epoch and the test accuracy it trained to."""
    runs = newest_runs(mlp)
    epochs = runs[(runs["machine"] == machine) & (runs["workload"] == MLP_EPOCH)]
    if epochs.empty:
        return ""
    shown = pd.DataFrame(
        {
            "dtype": epochs["dtype"],
            "version": epochs["version"],
            "ms per epoch": epochs["time_s"].map(lambda s: _ms(s * 1e3)),
            "test accuracy": epochs["test_accuracy"].map(lambda a: "" if a != a else f"{a:.3f}"),
            "status, or why not": [
                s if s == OK else f"{s}: {r}" for s, r in zip(epochs["status"], epochs["reason"], strict=True)
            ],
        }
    )
    return (
        f"<p>One epoch of the notebook's training on sklearn's digits ({MLP_LAYERS[0]}, batch 256, every epoch "
        "after the first; the accuracy after the timed training):</p>" + table_html(shown)
    )


def _ms(value: float) -> str:
    return "" if value != value else f"{value:.3f}"


def _pairs(wall: pd.Series, gpu: pd.Series) -> list[str]:
    return ["" if w != w else f"{w:.2f}x / {g:.2f}x" for w, g in zip(wall, gpu, strict=True)]


def mlp_section(mlp: pd.DataFrame, heading, figure_div) -> list[str]:
    """The report's MLP section: per machine the speedup figure, where fusion stops paying, every step, the
    epoch table. `heading(level, ident, text)` and `figure_div(figure, ident)` are the report's own."""
    table = step_table(mlp)
    runs = newest_runs(mlp)
    if runs.empty:
        return []
    parts = [
        heading(2, "mlp", "The seed notebook's MLP: a whole training step"),
        "<p>Forward, backward and the SGD update of the notebook's network (one hidden ReLU layer, a sigmoid "
        "output, fp32 master weights) in four versions: <b>fused</b> (nvmath's stateful Matmuls with "
        "RELU_AUX_BIAS, BIAS and DRELU_BGRAD, as the notebook), <b>unfused</b> (the same GEMMs, one cupy pass per "
        "piece of pointwise work), <b>textbook</b> (one cupy statement per operation) and <b>torch</b> "
        "(nn.Linear, autograd, autocast). Each version's gradients were checked against float64 at the timed "
        "size before it was timed. cupy has no bfloat16: at bf16 only torch runs.</p>",
    ]
    for machine in dict.fromkeys(runs["machine"]):
        mine = runs[runs["machine"] == machine]
        commits = ", ".join(f"{c[:8]} ({', '.join(dict.fromkeys(g))})" for c, g in mine.groupby("commit")["group"])
        parts.append(
            heading(3, f"{anchor(machine)}-mlp", f"{machine}: the training step")
            + f"<p class='muted'>commit {html.escape(commits)}</p>"
        )
        figure = step_figure(table, machine)
        if figure is not None:
            parts.append(figure_div(figure, f"{anchor(machine)}-mlp-step"))
            parts.append(where_fusion_stops_paying(table, machine))
            parts.append(step_rows_html(table, machine))
        parts.append(epoch_rows_html(mlp, machine))
    return parts
