"""Margins reserved before plotly draws, so that it draws each figure once.

plotly grows a margin to fit what it finds there (tick labels, axis titles, a legend, a colour bar), but only
after drawing the whole figure, and then draws it all again (its `autoexpand`): on the report that second drawing
was a third of the page's load. `reserve_margins` estimates what each side will need at the page's figure width
and sets it first. plotly still grows a side the estimate falls short of (a phone's narrow figure turns its labels
further), at the old cost and only there; the browser test holds that no figure of the committed report needs it.

Text widths come from the advance widths of DejaVu Sans, the face Chromium's `system-ui` resolves to on Linux and
among the widest of the common ones, rounded up by class: a narrower face leaves a few pixels spare.
"""

from __future__ import annotations

import math
import re

import plotly.graph_objects as go

from fusedbench.report.figures import LEAN_TEMPLATE

FIGURE_WIDTH = 1200  # the report's body is at most 1200 px wide (its CSS max-width) and a figure fills it
FONT_SIZE = LEAN_TEMPLATE.layout.font.size
LINE_HEIGHT = 1.3  # plotly's line spacing, in font sizes
_EM = {
    **dict.fromkeys(" '!()-,./:;[]\\|fijlrtIJ", 0.40),
    **dict.fromkeys("KVBRXZCAUHNDGOQ&", 0.79),
    **dict.fromkeys("Mw#+<=>^~", 0.86),
    **dict.fromkeys("%mW@", 1.0),
}
_EM_OTHERWISE = 0.64  # digits, the lower case and the rest of the upper case
_TAG = re.compile(r"<[^>]+>")
_BREAK = re.compile(r"<br\s*/?>")
NUMBER_LABEL = "0.000"  # a numeric axis's tick label as the report's axes show them (no thousands, no dates)
LABEL_GAP = 2  # px between two tick labels side by side, below which plotly turns them
# What plotly adds around the text, in px (fitted to its margins in Chromium, rounded up): beside an axis's tick
# labels, and for its title's line; a colour bar's bar, padding and title; a legend entry's symbol and gap.
TICK_GAP = 18
TITLE_GAP = 18
COLORBAR_BODY = 70
COLORBAR_SHORT = 28  # more, where the bar is shorter than 1.5 times its title (plotly sets the title apart)
LEGEND_ENTRY = 46
LEGEND_ROW = 21
LEGEND_PAD = 21


def text_px(text: str, size: float = FONT_SIZE) -> float:
    """The widest line of a label in px (plotly's `<br>` breaks a line; other tags are markup)."""
    lines = _TAG.sub("", _BREAK.sub("\n", str(text))).split("\n")
    return size * max(sum(_EM.get(c, _EM_OTHERWISE) for c in line) for line in lines)


def _lines(text: str) -> int:
    return len(_BREAK.findall(str(text))) + 1


def _axis_labels(traces, layout) -> list[str]:
    """The tick labels an axis may show, over the `traces` drawn on it."""
    if layout.showticklabels is False:
        return []
    if layout.ticktext:
        return [str(t) for t in layout.ticktext]
    name = layout.plotly_name
    letter, ref = name[0], name[0] + name[5:]
    values: list = list(layout.categoryarray or [])
    for trace in traces:
        if f"{letter}axis" not in trace or (trace[f"{letter}axis"] or letter) != ref:
            continue  # a trace of no cartesian axes (a pie, a table), or of another axis
        if trace[letter] is not None:
            values.extend(trace[letter])
        elif trace.type == "box" and trace.name:  # a box without positions sits at its name
            values.append(trace.name)
    labels = list(dict.fromkeys(v for v in values if isinstance(v, str)))
    return labels or [NUMBER_LABEL]


def _title_px(layout) -> float:
    """An axis title's line, where the axis has one."""
    text = layout.title.text if layout.title else None
    return TITLE_GAP * _lines(text) if text else 0.0


def _left(figure: go.Figure, traces) -> float:
    """Widest y tick label and the axis title beside it, over the y axes."""
    needed = 0.0
    for layout in figure.select_yaxes():
        if layout.side != "right" and layout.visible is not False:
            width = max((text_px(label) for label in _axis_labels(traces, layout)), default=0.0)
            needed = max(needed, width + TICK_GAP + _title_px(layout))
    return needed


def _bottom(figure: go.Figure, traces, left: float, right: float) -> float:
    """The x tick labels and the axis title under them, over the x axes: the labels at their set angle, else flat
    where they fit side by side at the figure's width, else turned as plotly turns them (30 degrees where their
    lines clear each other so, 90 where not)."""
    needed, plot_width = 0.0, FIGURE_WIDTH - left - right
    for layout in figure.select_xaxes():
        if layout.side == "top" or layout.visible is False:
            continue
        labels = _axis_labels(traces, layout)
        if not labels:
            needed = max(needed, _title_px(layout))
            continue
        width = max(text_px(label) for label in labels)
        height = max(_lines(label) for label in labels) * FONT_SIZE * LINE_HEIGHT
        angle, spacing = layout.tickangle, plot_width / len(labels)
        if angle is None:
            clear_at_30 = math.cos(math.radians(30)) <= spacing / math.hypot(spacing, 1.25 * height / LINE_HEIGHT)
            angle = 0 if width + LABEL_GAP <= spacing else 30 if clear_at_30 else 90
        turn = math.radians(abs(float(angle)))
        block = width * math.sin(turn) + height * math.cos(turn)
        needed = max(needed, block + TICK_GAP + _title_px(layout))
    return needed


def _colorbar(traces, plot_height: float) -> float:
    """The widest colour bar a heatmap draws, upright at the plot's right with its title beside it, a bar as long
    as the plot is high: its tick labels, bar and title."""
    needed = 0.0
    for trace in traces:
        if trace.type == "heatmap" and trace.showscale is not False:
            ticks = trace.colorbar.ticktext or [NUMBER_LABEL]
            title = trace.colorbar.title.text
            body = COLORBAR_BODY - (0 if title else TITLE_GAP)
            body += COLORBAR_SHORT if title and 1.5 * text_px(title) > plot_height else 0
            needed = max(needed, max(text_px(t) for t in ticks) + body)
    return needed


def _legend_entries(figure: go.Figure, traces) -> list[str]:
    """The names a legend shows: plotly shows one for two traces or more in it, or where the layout asks."""
    if figure.layout.showlegend is False or figure.layout.legend.visible is False:
        return []
    shown = [t.name or "" for t in traces if t.showlegend is not False and t.type != "heatmap"]
    return list(dict.fromkeys(shown)) if len(shown) > 1 or figure.layout.showlegend else []


def _paper_push(size: float, fraction: float, other: float, extent: float) -> float:
    """The margin that fits `size` px placed `fraction` of the plot beyond its edge, where the plot spans
    `extent` less this margin and `other` (plotly's paper coordinates)."""
    return (size + fraction * (extent - other)) / (1 + fraction)


def _given(figure: go.Figure, side: str, default: int) -> int:
    """A side's margin as the figure or its template sets it, else plotly's default."""
    for margin in (figure.layout.margin, figure.layout.template.layout.margin):
        if margin[side] is not None:
            return margin[side]
    return default


def _legend_rows(entries: list[str]) -> int:
    """How many rows a horizontal legend takes: entries side by side, a row as wide as the figure."""
    row, rows = 0.0, 1
    for entry in entries:
        width = text_px(entry) + LEGEND_ENTRY
        rows, row = (rows + 1, width) if row + width > FIGURE_WIDTH and row else (rows, row + width)
    return rows


def reserve_margins(figure: go.Figure) -> go.Figure:
    """The figure, changed in place, with its left, right and bottom margins at least what plotly will find they
    need at FIGURE_WIDTH (the top is the builder's: a title, and no legend above the plot, go there). A figure
    whose views (its dropdown's buttons) show different traces gets each view's own margins in the view, so that
    one view's long labels leave no blank band under another's."""
    height = float(figure.layout.height or 450)
    margins = [_margins(figure, traces, height) for traces in _views(figure)]
    figure.update_layout(margin=margins[0])
    if any(margin != margins[0] for margin in margins):
        for button, margin in zip(figure.layout.updatemenus[0].buttons, margins, strict=True):
            restyle, relayout = button.args
            button.args = [restyle, {**relayout, **{f"margin.{side}": px for side, px in margin.items()}}]
    return figure


def _views(figure: go.Figure) -> list[list]:
    """The traces each view draws: the first dropdown's buttons where they switch traces on and off, else the figure
    as it is drawn (no view changes a figure's height: `figures.merge_views`)."""
    menus = figure.layout.updatemenus
    buttons = menus[0].buttons if len(menus) == 1 else ()
    if not buttons or not all("visible" in (button.args[0] or {}) for button in buttons):
        return [[trace for trace in figure.data if trace.visible is not False]]
    masks = [button.args[0]["visible"] for button in buttons]
    return [[trace for trace, on in zip(figure.data, mask, strict=True) if on] for mask in masks]


def _margins(figure: go.Figure, traces, height: float) -> dict[str, int]:
    """The margins `traces` need in a figure `height` px high (the top as the figure gives it)."""
    top = _given(figure, "t", 100)
    left = max(_given(figure, "l", 80), _left(figure, traces))
    # the colour bar as beside a tall plot first (the x labels' angle depends on the plot's width), then as beside
    # the plot the bottom margin leaves
    right = max(_given(figure, "r", 80), _paper_push(_colorbar(traces, math.inf), 0.02, left, FIGURE_WIDTH))
    entries, legend = _legend_entries(figure, traces), figure.layout.legend
    beside = legend.x is None or legend.x >= 1
    if entries and legend.orientation != "h" and beside:  # a column at the plot's right, 2% of its width beyond
        width = max(text_px(e) for e in entries) + LEGEND_ENTRY
        right = max(right, _paper_push(width, 0.02, left, FIGURE_WIDTH))
    bottom = max(_given(figure, "b", 80), _bottom(figure, traces, left, right))
    below = -(legend.y if legend.y is not None else -0.1)  # plotly puts a horizontal legend 10% below by default
    if entries and legend.orientation == "h" and below > 0:
        legend_height = _legend_rows(entries) * LEGEND_ROW + LEGEND_PAD
        bottom = max(bottom, _paper_push(legend_height, below, top, height))
    right = max(right, _paper_push(_colorbar(traces, height - top - bottom), 0.02, left, FIGURE_WIDTH))
    return {"l": math.ceil(left), "r": math.ceil(right), "t": top, "b": math.ceil(bottom)}
