"""Margins reserved before plotly draws (report.plot_margins): what each side gets from the labels, legend and
colour bar the figure holds. Whether plotly then finds them enough is the browser test's (`RESIZED`)."""

import plotly.graph_objects as go
import pytest

from fusedbench.report.figures import LEAN_TEMPLATE, SPEEDUP_COLORBAR
from fusedbench.report.plot_margins import FIGURE_WIDTH, FONT_SIZE, reserve_margins, text_px


def _margins(figure: go.Figure) -> tuple:
    margin = reserve_margins(figure).layout.margin
    return margin.l, margin.r, margin.t, margin.b


def test_a_label_is_as_wide_as_its_widest_line_and_its_characters():
    assert text_px("MMMM") > text_px("RELU") > text_px("iiii") > 0
    assert text_px("ab") == pytest.approx(2 * text_px("a"))
    assert text_px("tf32<br>(65536,16384)x(16384,8192)") == text_px("(65536,16384)x(16384,8192)")
    assert text_px("a<br />bb") == text_px("a<br/>bb") == text_px("bb")
    assert text_px("<b>BIAS</b>") == text_px("BIAS") and text_px("BIAS", 26) == 2 * text_px("BIAS")


def test_the_left_margin_fits_the_widest_y_label_and_the_axis_title():
    def left(labels, title=None):
        figure = go.Figure(go.Heatmap(z=[[1]] * len(labels), x=["a"], y=labels))
        figure.update_layout(template=LEAN_TEMPLATE, margin={"l": 0}, yaxis={"title": title})
        return _margins(figure)[0]

    short, wide = left(["BIAS", "RELU"]), left(["BIAS", "RELU_AUX_BIAS"])
    assert wide - short == pytest.approx(text_px("RELU_AUX_BIAS") - text_px("RELU"), abs=1)
    assert left(["BIAS", "RELU_AUX_BIAS"], "epilog") > wide > text_px("RELU_AUX_BIAS")


def test_a_given_margin_wider_than_needed_is_kept():
    figure = go.Figure(go.Scatter(x=[1, 2], y=[1, 2]))
    figure.update_layout(template=LEAN_TEMPLATE, margin={"l": 300, "b": 250})
    left, right, top, bottom = _margins(figure)
    assert (left, top, bottom) == (300, LEAN_TEMPLATE.layout.margin.t, 250) and right == LEAN_TEMPLATE.layout.margin.r


def _bottom_under(label: str, columns: int) -> int:
    """The bottom margin of a heatmap of `columns` columns, each labelled `label` (numbered)."""
    figure = go.Figure(go.Heatmap(z=[list(range(columns))], x=[f"{label}{i}" for i in range(columns)], y=["a"]))
    figure.update_layout(template=LEAN_TEMPLATE, margin={"b": 0}, xaxis={"type": "category"})
    return _margins(figure)[3]


def test_x_labels_too_wide_to_stand_side_by_side_are_turned_and_the_bottom_grows_for_them():
    shape = "(65536,16384)x(16384,8192)"
    assert _bottom_under(shape, 2) < 2 * FONT_SIZE + 20  # one line under the plot
    assert _bottom_under(shape, 14) > text_px(shape) / 2  # turned 30 degrees: half its width goes down
    assert text_px(shape) * 14 > FIGURE_WIDTH > text_px(shape) * 2


def test_a_colour_bar_and_a_legend_below_push_their_sides():
    heatmap = go.Figure(go.Heatmap(z=[[1]], colorbar=SPEEDUP_COLORBAR))
    heatmap.update_layout(template=LEAN_TEMPLATE, height=626)
    assert _margins(heatmap)[1] > text_px("0.5x or less") + 30  # the bar, its widest tick label and its title
    short = go.Figure(go.Heatmap(z=[[1]], colorbar=SPEEDUP_COLORBAR))
    short.update_layout(template=LEAN_TEMPLATE, height=300)  # a bar shorter than its title: plotly sets it apart
    assert _margins(short)[1] > _margins(heatmap)[1]

    def legend_bottom(entries):
        figure = go.Figure([go.Scatter(x=[1], y=[1], name=f"a provider of a long name {i}") for i in range(entries)])
        figure.update_layout(
            template=LEAN_TEMPLATE, height=520, margin={"b": 0}, legend={"orientation": "h", "y": -0.3}
        )
        return _margins(figure)[3]

    one_row, rows = legend_bottom(2), legend_bottom(12)
    assert 0.3 * (520 - 70) / 1.3 < one_row < rows  # the legend hangs 30% of the plot below it, more rows lower


def test_a_legend_beside_the_plot_pushes_the_right_margin():
    figure = go.Figure([go.Scatter(x=[1], y=[1], name=n) for n in ("fp16", "y = x: the machines agree")])
    figure.update_layout(template=LEAN_TEMPLATE)
    assert _margins(figure)[1] > text_px("y = x: the machines agree")


def test_many_labels_that_would_not_clear_each_other_at_30_degrees_are_reserved_upright():
    two_lines = "tf32<br>(65536,16384)x(16384,8192)"
    # 30 degrees at 6 columns; at 40, 90: the label's whole width goes down
    assert _bottom_under(two_lines, 6) < text_px(two_lines) < _bottom_under(two_lines, 40)


def test_a_horizontal_legend_where_plotly_puts_it_by_default_is_below_the_plot_and_one_inside_pushes_nothing():
    def bottom(**legend):
        figure = go.Figure([go.Scatter(x=[1], y=[1], name=n) for n in ("fused", "unfused")])
        figure.update_layout(template=LEAN_TEMPLATE, margin={"b": 0}, legend={"orientation": "h", **legend})
        return _margins(figure)[3]

    assert bottom() == bottom(y=-0.1) > bottom(y=1.05)  # y unset: plotly's -0.1, below the plot
    inside = go.Figure([go.Scatter(x=[1], y=[1], name=n) for n in ("fused", "unfused")])
    inside.update_layout(template=LEAN_TEMPLATE, legend={"x": 0.99, "xanchor": "right"})
    assert _margins(inside)[1] == LEAN_TEMPLATE.layout.margin.r


def test_boxes_at_their_names_count_hidden_axes_do_not_and_traces_of_no_axes_are_passed_over():
    boxes = go.Figure([go.Box(x=[1, 2], name="a box of a long name"), go.Box(x=[1, 2], name="b")])
    boxes.update_layout(template=LEAN_TEMPLATE, margin={"l": 0})
    assert _margins(boxes)[0] > text_px("a box of a long name")
    hidden = go.Figure(go.Heatmap(z=[[1]], x=["a"], y=["RELU_AUX_BIAS_AND_MORE"]))
    hidden.update_layout(template=LEAN_TEMPLATE, margin={"l": 0}, yaxis={"visible": False})
    assert _margins(hidden)[0] == 0
    mixed = go.Figure([go.Pie(values=[1, 2]), go.Bar(x=[["a", "a"], ["b", "c"]], y=[1, 2])])  # multicategory x
    assert all(side >= 0 for side in _margins(mixed.update_layout(template=LEAN_TEMPLATE)))


def test_each_view_gets_the_margins_of_the_traces_it_shows():
    from fusedbench.report.figures import add_dropdown

    long = [f"({n},16384)x(16384,8192)" for n in range(14)]  # turned: they do not fit side by side
    figure = go.Figure([go.Heatmap(z=[[1] * 14], x=long, y=["RELU"]), go.Heatmap(z=[[1]], x=["a"], y=["RELU"])])
    figure.update_layout(template=LEAN_TEMPLATE, height=400)
    add_dropdown(figure, ["long", "short"], [{"visible": [True, False]}, {"visible": [False, True]}], [{}, {}])
    figure.data[1].visible = False
    first = _margins(figure)
    views = [button.args[1] for button in figure.layout.updatemenus[0].buttons]
    assert views[0] == {f"margin.{side}": px for side, px in zip("lrtb", first, strict=True)}  # back to the first
    assert views[1]["margin.b"] < first[3]  # the short labels' view leaves no blank band under its plot
    alone = go.Figure(go.Heatmap(z=[[1]], x=["a"], y=["RELU"])).update_layout(template=LEAN_TEMPLATE, height=400)
    assert views[1]["margin.b"] == _margins(alone)[3]  # as though it were a figure of its own
