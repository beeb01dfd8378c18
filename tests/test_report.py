"""The HTML report's structure, from the real H200 results kept in tests/fixtures (no GPU)."""

import dataclasses
import html
import json
import math
import os
import re

import numpy as np
import pandas as pd
import pytest

from fusedbench.analysis.speedups import geometric_mean, speedups
from fusedbench.catalog.providers import LADDER, PROVIDERS
from fusedbench.cli import main
from fusedbench.errors import FusedbenchError
from fusedbench.regressions.changes import GROUP_SERIES, ChangePoint
from fusedbench.report import (
    PNG_SCALE,
    PNG_WIDTH,
    VENDORED_PLOTLY,
    key_figures,
    plotly_bundle,
    render_report,
    write_pngs,
    write_report,
)
from fusedbench.report.figures import ladder_figure, speedup_heatmap
from fusedbench.report.views import VIEW_SCRIPT
from fusedbench.results.loader import load_results

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results-h200")
MACHINE = "h200-141gb"


@pytest.fixture(scope="module")
def results():
    return load_results(FIXTURE)


@pytest.fixture(scope="module")
def page(results):
    return render_report(results)


def test_plotly_is_embedded_once_and_nothing_is_fetched(page):
    bundle, which = plotly_bundle()
    assert which == "plotly.js 4.1.1 (scatter, heatmap, box)"  # the vendored bundle, not plotly.py's full one
    assert page.count(bundle) == 1  # inline, once
    assert page.count("<script type='text/javascript'>") == 2  # plotly.js, then the view switches' few lines
    assert page.endswith(f"<script type='text/javascript'>{VIEW_SCRIPT}</script></body></html>")
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+href=[\"']http", page)  # the bundle's own URLs are code, not requests


def test_the_vendored_plotly_js_is_the_version_plotly_py_writes_figures_for_with_its_licence():
    from plotly.offline import get_plotlyjs_version

    package = json.loads((VENDORED_PLOTLY / "package.json").read_text())
    version = package["dependencies"]["plotly.js"]
    assert version == get_plotlyjs_version()  # rebuild it (npm install && npm run build) when plotly is upgraded
    script = (VENDORED_PLOTLY / "plotly-fusedbench.min.js").read_text()
    assert f"plotly.js (scatter, heatmap, box - minified) v{version}" in script[:200]
    assert "Permission is hereby granted" in (VENDORED_PLOTLY / "LICENSE").read_text()


def test_the_vendored_bundle_registers_every_trace_type_the_report_draws(page):
    """A figure of a trace type the bundle lacks would be drawn empty: every type on the page is registered."""
    drawn = set(re.findall(r'"type":"(\w+)"', page)) - {"category", "log", "line", "rect", "data", "linear"}
    entry = (VENDORED_PLOTLY / "entry.js").read_text()
    assert drawn and all(t == "scatter" or f"traces/{t}'" in entry for t in drawn), drawn


def test_a_plotly_py_of_another_plotly_js_gets_its_own_full_bundle(monkeypatch):
    import fusedbench.report as report

    monkeypatch.setattr(report, "get_plotlyjs_version", lambda: "9.9.9")
    monkeypatch.setattr(report, "get_plotlyjs", lambda: "/* the full bundle */")
    assert plotly_bundle() == (
        "/* the full bundle */",
        "plotly.js 9.9.9 (full: the vendored bundle is 4.1.1)",
    )


def test_the_report_has_a_section_per_machine_with_headline_and_environment(page):
    assert f"<h2 id='{MACHINE}'>{MACHINE}" in page
    assert "Headline" in page and "Environment" in page
    assert "NVIDIA H200" in page and "<td>13.1.0</td>" in page  # GPU and cuBLASLt 130100 from the .fbenv file


def test_the_headline_counts_fusion_inversions_and_names_the_worst(results, page):
    from fusedbench.analysis.speedups import headline

    table = speedups(results.cells)
    inverted = table[table["over_unfused"] < 0.95]
    worst = table.loc[table["over_unfused"].idxmin()]
    (row,) = headline(results.cells, table, MACHINE).to_dict("records")
    assert row["fused < 0.95x unfused, told apart"] == f"{len(inverted)} of {table['over_unfused'].notna().sum()}"
    assert len(inverted) > 0
    assert row["worst"] == f"{worst['epilog']} {worst['shape']}: {worst['over_unfused']:.2f}x"
    assert row["fused over unfused (range)"] == f"{worst['over_unfused']:.2f}x-{table['over_unfused'].max():.2f}x"
    assert f"at fp16 ({row['fused over unfused (range)']})" in page  # the summary says it too
    assert f"the worst is {worst['epilog']} fp16 {worst['shape']} at {worst['over_unfused']:.2f}x" in page
    assert (row["ok"], row["unsupported"], row["skipped"], row["failed"]) == (344, 40, 0, 0)
    assert f"<td>{row['worst']}</td>" in page
    assert worst["epilog"] in ("DRELU_BGRAD", "DGELU_BGRAD")  # cuBLASLt's fused bias gradients lose here
    best = table.loc[table["over_unfused"].idxmax()]
    assert row["best"] == f"{best['epilog']} {best['shape']}: {best['over_unfused']:.2f}x"
    assert f"Fusion pays most in {best['epilog']} fp16 {best['shape']} at {best['over_unfused']:.2f}x" in page
    assert list(row)[1:3] == ["fused over unfused (geomean)", "fused over textbook (geomean)"]  # the user's baseline


def test_the_first_figure_is_the_headline_every_workloads_fusion_speedup_against_one(results, page):
    from fusedbench.report.figures import headline_figure

    figures = re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page)
    assert figures[0] == "headline-figure" and page.index(figures[0]) < page.index("<div id='summary'>")
    table = speedups(results.cells).assign(machine=MACHINE)
    (box,) = headline_figure({MACHINE: table}).data
    assert box.name == MACHINE and box.orientation == "h" and box.boxpoints == "all"
    measured = table[table["over_unfused"].notna()]
    assert sorted(box.x) == sorted(round(v, 4 - 1 - math.floor(math.log10(v))) for v in measured["over_unfused"])
    assert list(box.y) == list(measured["dtype"])


def test_machines_are_said_to_differ_only_where_their_intervals_do_not_overlap(results):
    from fusedbench.report import summary

    table = speedups(results.cells).assign(machine=MACHINE)
    table = table.assign(over_unfused_low=table["over_unfused"] * 0.99, over_unfused_high=table["over_unfused"] * 1.01)
    columns = ["over_unfused", "over_unfused_low", "over_unfused_high"]
    other = table.assign(machine="other")
    other.loc[other.index[:10], columns] *= 1.1  # told apart
    other.loc[other.index[10:13], columns] /= 1.1
    other.loc[other.index[13:], columns] *= 1.001  # inside the noise: not counted
    text = summary({}, {MACHINE: table, "other": other})
    assert (
        "Fusion pays more on <b>other</b> than on <b>h200-141gb</b> in 10 of 64 fp16 workloads and less in 3 " in text
    )


def test_one_heatmap_figure_holds_both_baselines_and_the_epilog_cost_as_a_dropdown(results, page):
    from fusedbench.report.figures import heatmap_views

    figure = heatmap_views(speedups(results.cells), machine=MACHINE, dtypes=["fp16"])
    (menu,) = figure.layout.updatemenus
    labels = ["fp16: fused over unfused", "fp16: fused over textbook", "fp16: epilog cost"]  # under the fp16 group
    assert [b.label for b in menu.buttons] == labels
    names = [trace.name for trace in figure.data]
    assert names == ["over_unfused", "over_textbook", "cost_pct"]  # this run has no intervals: no grey cover
    assert [trace.visible for trace in figure.data] == [True, False, False]  # only the first view is drawn
    assert [b.args[0]["visible"] for b in menu.buttons] == [
        [True, False, False],
        [False, True, False],
        [False, False, True],
    ]
    assert "the epilog's own cost" in menu.buttons[2].args[1]["title.text"]
    drawn = html.unescape(page)  # the other views' titles are in their <select>'s data (report.views)
    titles = [json.loads(f'"{t}"') for t in re.findall(r'"title(?:\.text)?":(?:\{"text":)?"([^"]+)"', drawn)]
    for baseline in ("textbook", "unfused"):
        title = f"{MACHINE} fp16: fused over {baseline} (>1x: fusion pays)<br><sup>grey: the paired 95% interval"
        assert any(t.startswith(title) for t in titles)
    assert any("the epilog's own cost" in t for t in titles)
    assert sum("each provider's time over its floor" in t for t in titles) == 1 + 4  # one ladder, a title per shape


def test_above_the_fold_the_answer_headline_contents_and_glossary_and_every_link_resolves(results, page):
    from fusedbench.analysis.speedups import geometric_mean

    every = re.findall(r"<(?:h[23]|div) id=['\"]([^'\"]+)['\"]", page)
    assert len(every) == len(set(every))  # no id twice
    ids = set(re.findall(r"id=['\"]([^'\"]+)['\"]", page))
    links = re.findall(r"href='#([^']+)'", page)
    assert links and set(links) <= ids  # the contents' anchors all resolve
    assert f"{MACHINE}-epilogs" in links
    assert {f"{MACHINE}-heatmap", f"{MACHINE}-ladder", f"{MACHINE}-alerts", f"{MACHINE}-advice"} <= ids
    order = ["<div id='summary'>", "<h2 id='headline'>", "<h2 id='contents'>", f"<h2 id='{MACHINE}'>"]
    assert [page.index(mark) for mark in order] == sorted(page.index(mark) for mark in order)
    table = speedups(results.cells, results.detail)
    assert f"over the best unfused version: {geometric_mean(table['over_unfused']):.2f}x at fp16 (" in page
    assert "<dt>BGRADA / BGRADB</dt>" in page and "<dt>floor</dt>" in page
    figures = page.count('class="plotly-graph-div"')  # each one's toolbar without "Share chart..."
    assert figures > 0 and page.count('"showSendToCloud": false') == figures


def test_cells_that_did_not_run_are_listed_each_reason_once_with_what_it_covers(page):
    section = page[page.index(f"id='{MACHINE}-not-run'") : page.index(f"id='{MACHINE}-noisy'")]
    assert "40 cells, " in section
    assert section.count("torch has no op for the epilog") == 1  # one row, not ten
    row = re.search(
        r"<tr>\s*<td>unsupported</td>\s*<td>torch</td>\s*<td>torch has no op for the epilog[^<]*</td>(.*?)</tr>",
        section,
        re.S,
    )
    cells, dtypes, epilogs = re.findall(r"<td(?: class=n)?>([^<]*)</td>", row.group(1))
    assert (cells, dtypes) == ("40", "fp16") and "DRELU_BGRAD" in epilogs.split(", ")


def test_heatmap_columns_run_from_low_to_high_arithmetic_intensity_under_titled_axes(results):
    figure = speedup_heatmap(speedups(results.cells), machine=MACHINE, dtypes=["fp16"], baseline="unfused")
    assert list(figure.data[0].x) == [
        "(8192,256)x(256,65536)",  # 2MNK / (MK + KN + MN) = 495
        "(16384,256)x(256,16384)",  # 496
        "(16384,512)x(512,16384)",  # 964
        "(32768,1024)x(1024,16384)",  # 1872
    ]
    assert "arithmetic intensity" in figure.layout.xaxis.title.text and figure.layout.yaxis.title.text == "epilog"


def test_heatmap_values_are_the_tables_speedups(results):
    table = speedups(results.cells)
    figure = speedup_heatmap(table, machine=MACHINE, dtypes=["fp16"], baseline="unfused")
    heatmap = figure.data[0]
    row = list(heatmap.y).index("RELU_BIAS")
    column = list(heatmap.x).index("(16384,256)x(256,16384)")
    cells = results.cells.query("epilog == 'RELU_BIAS' and m == 16384 and k == 256 and n == 16384")
    times = dict(zip(cells["provider"], cells["time_s"], strict=True))
    assert heatmap.text[row][column] == f"{times['unfused'] / times['fused']:.2f}x"
    assert heatmap.textfont.shadow == "auto"  # a halo: legible on the scale's mid tones, dark or light text
    assert heatmap.z[row][column] == pytest.approx(math.log2(times["unfused"] / times["fused"]), rel=1e-3)


SHAPES = ["(8192,256)x(256,65536)", "(16384,256)x(256,16384)", "(16384,512)x(512,16384)", "(32768,1024)x(1024,16384)"]


def _synthetic_floors(results):
    """Floors and roofs for the ladder tests only: 0.1 ms per workload, 0.05 ms for the GEMM alone."""
    import pandas as pd

    cells = results.cells.assign(floor_s=np.where(results.cells["provider"] == "gemm", 0.05e-3, 0.1e-3))
    roof = {
        "machine": MACHINE,
        "dtype": "fp16",
        "gemm_tflops": 700.0,
        "gemm_at": "x",
        "copy_tbps": 4.0,
        "copy_at": "c0ffee12",
        "runs": 3,
    }
    return cells, pd.DataFrame([roof])


def test_the_ladder_is_one_figure_per_dtype_its_shapes_a_dropdown_of_restyles(results):
    cells, ceilings = _synthetic_floors(results)
    figure = ladder_figure(cells, ceilings, machine=MACHINE, dtypes=["fp16"])
    assert [trace.name for trace in figure.data] == ["floor", *LADDER]
    (menu,) = figure.layout.updatemenus
    assert [button.label for button in menu.buttons] == [f"fp16: {s}" for s in SHAPES]  # by intensity, as the heatmaps
    second = menu.buttons[1].args
    fused = results.cells.query("provider == 'fused' and m == 16384 and k == 256 and n == 16384")
    fused = fused.set_index("epilog").loc[list(figure.data[3].x)]
    assert second[0]["y"][3] == [float(f"{t / 0.1e-3:.3g}") for t in fused["time_s"]]  # time over the floor
    assert second[0]["customdata"][3] == [float(f"{t * 1e3:.4g}") for t in fused["time_s"]]  # ms, for the hover
    assert second[1]["title.text"].startswith(f"{MACHINE} fp16 {SHAPES[1]}: ")
    assert second[0]["y"][0] == [1] * 16 and second[0]["customdata"][0] == [0.1] * 16  # the floor keeps its hover
    assert figure.layout.height >= figure.layout.margin.t + 30 * len(SHAPES) + 60  # the open list fits the figure
    assert len(second[0]["y"][5]) == 16 and sum(v is not None for v in second[0]["y"][5]) == 6  # torch: six epilogs
    first = results.cells.query("provider == 'fused' and m == 8192 and k == 256 and n == 65536").set_index("epilog")
    first = first.loc[list(figure.data[3].x)]
    over = first["time_s"] / 0.1e-3
    assert list(figure.data[3].error_y.array) == [float(f"{v:.2g}") for v in first["ci_high_s"] / 0.1e-3 - over]
    assert list(figure.data[3].error_y.arrayminus) == [float(f"{v:.2g}") for v in over - first["ci_low_s"] / 0.1e-3]
    assert figure.layout.yaxis.type in (None, "linear") and figure.layout.yaxis.range[0] == 0


def test_the_ladder_marks_the_workloads_floor_under_each_epilog_and_names_the_ceilings(results):
    cells, ceilings = _synthetic_floors(results)
    figure = ladder_figure(cells, ceilings, machine=MACHINE, dtypes=["fp16"])
    floor = figure.data[0]
    assert list(floor.y) == [1] * 16 and list(floor.customdata) == [0.1] * 16  # the workload's, not the gemm's
    marks = figure.layout.shapes
    assert len(marks) == 16 and all(m.y0 == m.y1 == 1 and m.x1 - m.x0 < 1 for m in marks)  # no overlap
    assert (
        "max(FLOPs / 700 TFLOP/s, bytes / 4.00 TB/s), the best GEMM and copy of the machine's 3 runs with ceilings"
        in (figure.layout.title.text)
    )
    other = ceilings.assign(machine="another-gpu")  # another machine's roofs are not this one's
    assert "no ceilings measured" in ladder_figure(cells, other, machine=MACHINE, dtypes=["fp16"]).layout.title.text
    unmeasured = ladder_figure(
        results.cells, ceilings, machine=MACHINE, dtypes=["fp16"]
    )  # the run's real cells: no floor
    assert [t.name for t in unmeasured.data] == list(LADDER) and not unmeasured.layout.shapes
    assert unmeasured.layout.yaxis.title.text.startswith("ms")
    fused = unmeasured.data[2]
    assert fused.y[0] == float(f"{fused.customdata[0]:.3g}")  # y is the time in ms
    # A second shape whose runs measured no ceilings (an A/A run's): the whole ladder in ms, every shape drawn
    other_shape = cells.assign(m=cells["m"] * 2, floor_s=float("nan"))
    mixed = ladder_figure(pd.concat([cells, other_shape]), ceilings, machine=MACHINE, dtypes=["fp16"])
    assert mixed.layout.yaxis.title.text.startswith("ms") and not mixed.layout.shapes
    assert len(mixed.layout.updatemenus[0].buttons) == 2 * len(figure.layout.updatemenus[0].buttons)


def test_a_point_below_its_workloads_floor_is_drawn_open_and_the_title_says_why(results):
    cells, roofs = _synthetic_floors(results)
    shape = (cells["m"] == 8192) & (cells["k"] == 256) & (cells["epilog"] == "GELU_AUX")
    cells.loc[shape & (cells["provider"] == "gemm"), "time_s"] = 0.07e-3  # the GEMM alone writes no aux: under
    cells.loc[shape & (cells["provider"] == "fused"), "time_s"] = 0.09e-3  # faster than the floor's copy allows
    figure = ladder_figure(cells, roofs, machine=MACHINE, dtypes=["fp16"])
    traces = {trace.name: trace for trace in figure.data}
    gelu = list(traces["gemm"].x).index("GELU_AUX")
    for name in ("gemm", "fused"):
        symbols = traces[name].marker.symbol
        assert symbols[gelu] == PROVIDERS[name].symbol + "-open"
        assert [s for i, s in enumerate(symbols) if i != gelu] == [PROVIDERS[name].symbol] * 15
    assert traces["unfused"].marker.symbol == PROVIDERS["unfused"].symbol  # above its floor everywhere: one name
    assert "open marker: below its floor" in figure.layout.title.text
    unmeasured = ladder_figure(results.cells, results.roofs, machine=MACHINE, dtypes=["fp16"])  # in ms: no floor
    assert not any("open" in str(trace.marker.symbol) for trace in unmeasured.data)


def test_a_textbook_far_above_the_rest_is_drawn_at_the_top_with_its_value_written(results):
    cells, ceilings = _synthetic_floors(results)
    textbook = cells["provider"] == "textbook"
    cells.loc[textbook & (cells["epilog"] == "RELU"), "time_s"] = 0.1  # synthetic: 1000x the floor
    figure = ladder_figure(cells, ceilings, machine=MACHINE, dtypes=["fp16"])
    trace = figure.data[1]
    relu = list(trace.x).index("RELU")
    top = figure.layout.yaxis.range[1]
    assert trace.text[relu] == "1e+03x" and trace.marker.symbol[relu] == "triangle-up"
    assert trace.y[relu] == pytest.approx(top * 0.97, rel=1e-2) and trace.customdata[relu] == [100, 1000]
    below = [i for i in range(16) if trace.text[i] == ""]
    assert below and all(trace.marker.symbol[i] == PROVIDERS["textbook"].symbol and trace.y[i] < top for i in below)


def test_geometric_mean_ignores_missing_cells():
    import pandas as pd

    assert geometric_mean(pd.Series([2.0, 8.0, float("nan")])) == pytest.approx(4.0)
    assert math.isnan(geometric_mean(pd.Series([], dtype=float)))


def test_report_command_writes_index_html_and_the_export(tmp_path, capsys, page):
    assert main(["report", FIXTURE, "-o", str(tmp_path), "--export", str(tmp_path / "cells.csv")]) == 0
    assert (tmp_path / "index.html").read_text() == page  # the page render_report draws, byte for byte
    export = (tmp_path / "cells.csv").read_text().splitlines()
    assert export[0].startswith("machine,commit,group,epilog") and len(export) == 1 + 384
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'index.html'}")


def test_the_same_results_give_the_same_bytes(results, page, tmp_path):
    assert render_report(results) == page
    assert re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page) == [
        "headline-figure",
        f"{MACHINE}-heatmap",
        f"{MACHINE}-ladder",
    ]
    write_report(results, out_dir=str(tmp_path / "a"))
    write_report(load_results(FIXTURE), out_dir=str(tmp_path / "b"))
    assert (tmp_path / "a" / "index.html").read_bytes() == (tmp_path / "b" / "index.html").read_bytes()


def test_bad_selections_and_exports_are_one_line_errors(tmp_path, capsys, results):
    with pytest.raises(FusedbenchError, match="--machine 'h100-80gb-hbm3' has no results; machines with results"):
        write_report(results, out_dir=str(tmp_path), machines=["h100-80gb-hbm3"])
    assert main(["report", FIXTURE, "-o", str(tmp_path), "--export", "cells.xlsx"]) == 2
    assert capsys.readouterr().err.startswith("error: --export 'cells.xlsx': name a .csv or .parquet file")
    assert list(tmp_path.iterdir()) == []  # nothing was written


def test_machines_side_by_side_and_history_appear_with_a_second_machine_and_commit(results):
    import dataclasses

    import pandas as pd

    # A synthetic second machine and a second commit: relabelled copies of the real cells.
    other = results.cells.assign(machine="h100-80gb-hbm3")
    older = results.cells.assign(commit="0" * 40)
    cells = pd.concat([older, results.cells, other], ignore_index=True)
    detail = pd.concat([results.detail] * 3, ignore_index=True)  # the cells' own, in the same order
    page = render_report(dataclasses.replace(results, cells=cells, detail=detail))
    assert "Machines side by side" in page
    # the summary compares them workload by workload: the same cells, so nowhere does fusion pay more
    assert "Fusion pays more on <b>h100-80gb-hbm3</b> than on <b>h200-141gb</b> in 0 of 64 fp16 workloads" in page
    assert f"{MACHINE}: chosen cells over commits" in page
    machines = re.findall(r"<h2 id='([^']+)'>", page)
    assert machines == ["headline", "contents", "glossary", MACHINE, "h100-80gb-hbm3", "machines"]
    assert {"machines-h100-80gb-hbm3"} <= set(re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page))


def test_the_machines_scatter_puts_one_gpus_speedups_against_the_others_on_log_axes(results):
    from fusedbench.report.figures import DTYPE_COLORS, machines_figure

    table = speedups(results.cells)
    other = table.assign(machine="h100-80gb-hbm3", over_unfused=table["over_unfused"] * 1.1)  # synthetic
    figure = machines_figure(pd_concat(table, other), reference=MACHINE, other="h100-80gb-hbm3")
    points, line, textbook, _ = figure.data
    assert [trace.visible for trace in figure.data] == [True, True, False, False]  # over unfused first
    assert [b.label for b in figure.layout.updatemenus[0].buttons] == ["over unfused", "over textbook"]
    assert list(textbook.x) == list(textbook.y)  # over the textbook: the same cells on both machines
    assert points.name == "fp16" and len(points.x) == table["over_unfused"].notna().sum()
    assert all(y == pytest.approx(x * 1.1, rel=1e-3) for x, y in zip(points.x, points.y, strict=True))
    assert list(line.x) == list(line.y)  # y = x
    assert figure.layout.xaxis.type == figure.layout.yaxis.type == "log"
    assert figure.layout.width is None and figure.layout.yaxis.scaleanchor == "x"  # the page's width, square plot
    assert points.marker.color == DTYPE_COLORS["fp16"] and not any(
        c.lower() in ("red", "#d62728", "#b2182b") for c in DTYPE_COLORS.values()
    )  # the heatmaps' loss red is not a dtype


def pd_concat(*frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def test_the_history_marks_the_commits_whose_measurement_changed(results):
    import pandas as pd

    from fusedbench.report import measurement_changes

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    cells = pd_concat(*(results.cells.assign(commit=commit) for commit in (a, b, c)))
    versions = ["1: old"] * len(results.cells) * 2 + ["2: the passes fused"] * len(results.cells)
    detail = pd.DataFrame({"version": versions}, index=cells.index)
    assert measurement_changes(cells, detail, [a, b, c]) == {c: "benchmark version 2: the passes fused"}
    # a change of some of a commit's groups (c8c600be changed 8 of 9): marked, naming them
    two = pd.DataFrame({"commit": [a, a, b, b], "group": ["Fp16Seed", "Blog", "Fp16Seed", "Blog"]})
    said = measurement_changes(two, pd.DataFrame({"version": ["1: x", "1: y", "2: z", "1: y"]}), [a, b])
    assert said == {b: "benchmark version 2: z (1 of 2 groups: Fp16Seed)"}
    # a quick run in between (its own group, another version): no change of the others' measurement
    quick = results.cells.head(6).assign(commit="d" * 40, group="Quick")
    between = pd_concat(results.cells.assign(commit=a), quick, results.cells.assign(commit=c))
    detail = pd.DataFrame(
        {"version": ["1: old"] * len(results.cells) + ["9: a quick run's"] * 6 + ["1: old"] * len(results.cells)}
    )
    assert measurement_changes(between, detail, [a, "d" * 40, c]) == {}


def test_the_trend_draws_the_best_and_worst_cells_over_commits_with_the_gates_band_and_the_history_table_sorts(
    results,
):
    import dataclasses

    from fusedbench.regressions.gate import judge_every_suite
    from fusedbench.report import trend_cells, trend_rows, trend_series
    from fusedbench.report.figures import trend_figure

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    slower = np.where(results.cells["epilog"] == "RELU", 1.3, 1.0)  # every RELU cell 30% slower at c
    cells = pd_concat(
        results.cells.assign(commit=a),
        results.cells.assign(commit=b),
        results.cells.assign(commit=c, time_s=results.cells["time_s"] * slower),
    )
    detail = pd_concat(results.detail, results.detail, results.detail.assign(version="2: the passes fused"))
    started = {a: 1, b: 2, c: 3}
    detail = detail.assign(started_ms=[started[x] for x in cells["commit"]])
    page = render_report(dataclasses.replace(results, cells=cells, detail=detail))
    assert f"{MACHINE}: chosen cells over commits" in page
    changed = dataclasses.replace(results, cells=cells, detail=detail)
    (verdict,) = judge_every_suite(changed, [MACHINE])
    rows = trend_rows(changed, cells, [a, b, c])
    table = speedups(results.cells)
    best, worst = table.loc[table["over_unfused"].idxmax()], table.loc[table["over_unfused"].idxmin()]
    series = trend_series(rows, trend_cells(table, verdict), verdict)
    figure = trend_figure(series, machine=MACHINE, commits=[a, b, c])
    assert [t.name for t in figure.data] == [f"{row['epilog']} fp16 {row['shape']} fused" for row in (best, worst)]
    assert all(list(t.x) == ["aaaaaaa", "bbbbbbb", "ccccccc"] for t in figure.data)
    lines = [shape for shape in figure.layout.shapes if shape.type == "line"]
    assert [(line.x0, line.xref) for line in lines] == [("ccccccc", "x"), ("ccccccc", "x2")]  # the version changed
    assert series["threshold"].isna().all()  # no preset was earned at this version: no band
    assert not [shape for shape in figure.layout.shapes if shape.type == "rect"]
    first = series["cell"].iloc[0]  # a cell a preset judges: its band, that threshold about its median
    judged = series.assign(threshold=np.where(series["cell"] == first, 0.05, np.nan))
    (band,) = [
        shape
        for shape in trend_figure(judged, machine=MACHINE, commits=[a, b, c]).layout.shapes
        if shape.type == "rect"
    ]
    median = judged.loc[judged["cell"] == first, "time_s"].median() * 1e3
    assert (band.y0, band.y1, band.yref) == (pytest.approx(median * 0.95), pytest.approx(median * 1.05), "y")
    titles = [note.text for note in trend_figure(judged, machine=MACHINE, commits=[a, b, c]).layout.annotations]
    assert titles == [f"{first} (gate: ±5.0%)", f"{series['cell'].iloc[-1]} (not judged)"]  # the band's width, said
    wide = judged.assign(threshold=np.where(series["cell"] == first, 4.6, np.nan))  # a small cell's default gate
    (band,) = [s for s in trend_figure(wide, machine=MACHINE, commits=[a, b, c]).layout.shapes if s.type == "rect"]
    assert band.y0 == 0 and band.y1 == pytest.approx(median * 5.6)  # never below zero: a time cannot be
    group = rows.loc[rows["commit"] == c, "group"].iloc[0]  # where the group's series shifted: on every cell's plot
    shift = ChangePoint(MACHINE, group, "2", GROUP_SERIES, 2, 3, b, c, 1.0, 1.3, 0.01, {}, {})
    dashed = trend_figure(trend_series(rows, trend_cells(table, verdict), verdict, [shift]), machine=MACHINE,
                          commits=[a, b, c])  # fmt: skip
    lines = [(s.x0, s.xref) for s in dashed.layout.shapes if s.type == "line" and s.line.dash == "dash"]
    assert lines == [("ccccccc", "x"), ("ccccccc", "x2")]
    assert [n.text for n in dashed.layout.annotations].count("+30.0%") == 2
    history = page[page.index(f"id='{MACHINE}-history'") :]
    rows = re.findall(r"<tr>\s*<td>([A-Z_]+)</td>.*?<td class=n>([+\-][0-9.]+%|n/a)</td>", history, re.S)
    assert rows[0][0] == "RELU" and rows[0][1] == "+30.0%"  # the largest change first
    assert 'class="dataframe sortable"' in history
    newest = re.findall(r"<td class=n>\d+</td>\s*<td class=n>([0-9.]+)</td>", history)  # runs, newest (ms)
    assert newest and {len(ms.split(".")[1]) for ms in newest} == {3}  # one number of decimals: they align


def test_key_figures_are_the_fused_over_unfused_heatmaps(results):
    figures = key_figures(results)
    assert list(figures) == [f"{MACHINE}-fp16-fused-over-unfused.png"]
    (figure,) = figures.values()
    commit = results.cells["commit"].iloc[0][:8]
    assert re.search(rf"commit {commit}, run \d{{4}}-\d{{2}}-\d{{2}}", figure.layout.title.text)
    assert figure.layout.xaxis.title.text and figure.layout.yaxis.title.text == "epilog"
    assert PNG_SCALE == 2  # sharp on HiDPI screens (the rule; the PNG test checks the pixels follow it)


def test_png_snapshots_render_from_the_same_figures(tmp_path, results):
    import shutil

    if shutil.which("chromium") is None and os.environ.get("FUSEDBENCH_REQUIRE_BROWSER") != "1":
        pytest.skip("needs Debian's chromium for kaleido")
    (path,) = write_pngs(key_figures(results), str(tmp_path))
    with open(path, "rb") as stream:
        header = stream.read(24)
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    width, height = int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
    figure = key_figures(results)[os.path.basename(path)]
    assert (width, height) == (PNG_WIDTH * PNG_SCALE, figure.layout.height * PNG_SCALE)  # the figure, at its size


def test_heatmap_hover_names_both_times_and_the_speedup_from_the_cells_numbers(results):
    table = speedups(results.cells)
    figure = speedup_heatmap(table, machine=MACHINE, dtypes=["fp16"], baseline="textbook")
    heatmap = figure.data[0]
    assert heatmap.hovertemplate.startswith("%{y} %{x}<br>fused %{customdata[0]:.4g} ms, textbook %{customdata[1]")
    assert "no interval" in heatmap.hovertemplate  # this run did not sample in rounds: no interval is claimed
    cell = table[(table["epilog"] == "DEFAULT") & (table["shape"] == "(8192,256)x(256,65536)")].iloc[0]
    assert heatmap.y[0] == "DEFAULT" and heatmap.x[0] == "(8192,256)x(256,65536)"  # the lowest intensity first
    assert heatmap.customdata[0][0] == [
        float(f"{cell['fused'] * 1e3:.4g}"),
        float(f"{cell['textbook'] * 1e3:.4g}"),
        float(f"{cell['over_textbook']:.4g}"),
    ]


def test_the_epilog_cost_heatmap_writes_fused_minus_gemm_in_each_cell(results):
    from fusedbench.report.figures import epilog_cost_figure

    table = speedups(results.cells)
    figure = epilog_cost_figure(table, machine=MACHINE, dtypes=["fp16"])
    heatmap = figure.data[0]
    row = list(heatmap.y).index("GELU_BIAS")
    column = list(heatmap.x).index("(16384,256)x(256,16384)")
    cell = table[(table["epilog"] == "GELU_BIAS") & (table["shape"] == "(16384,256)x(256,16384)")].iloc[0]
    assert heatmap.text[row][column] == f"{(cell['fused'] - cell['gemm']) / cell['gemm'] * 100:+.0f}%"
    assert "gemm %{customdata[1]" in heatmap.hovertemplate and "epilog cost" in heatmap.hovertemplate
    assert "no interval" in heatmap.hovertemplate and len(heatmap.customdata[row][column]) == 3


def test_the_epilog_cost_of_a_run_sampled_in_rounds_gives_its_interval_grey_where_it_includes_none(results):
    from fusedbench.report.figures import COST_RANGE_PCT, GREY_NAME, epilog_cost_figure

    cells = results.cells.copy()
    ok = cells["status"] == "ok"
    cells.loc[ok, ["gemm_ratio", "gemm_ratio_low", "gemm_ratio_high"]] = [1.03, 0.99, 1.08]
    gelu_bias = (cells["epilog"] == "GELU_BIAS") & ok
    cells.loc[gelu_bias, ["gemm_ratio", "gemm_ratio_low", "gemm_ratio_high"]] = [7.12, 6.9, 7.3]  # +612%
    figure = epilog_cost_figure(speedups(cells), machine=MACHINE, dtypes=["fp16"])
    cover, heatmap = figure.data  # the grey, drawn first, then the values
    row, column = list(heatmap.y).index("GELU_BIAS"), list(heatmap.x).index("(16384,256)x(256,16384)")
    assert heatmap.text[row][column] == "+612%" and heatmap.z[row][column] == 612.0  # its own number, the top colour
    assert heatmap.customdata[row][column][2:] == [612.0, 590.0, 630.0]
    assert "paired 95% interval %{customdata[3]:+.1f}% to %{customdata[4]:+.1f}%" in heatmap.hovertemplate
    assert heatmap.zmax == COST_RANGE_PCT and heatmap.colorbar.ticktext[-1] == f"{COST_RANGE_PCT:.0f}% or more"
    # grey where the interval includes no cost (0.99-1.08: every other cell), never on GELU_BIAS (6.9-7.3)
    other = list(heatmap.y).index("RELU")
    assert cover.z[other][column] == 1 and heatmap.z[other][column] is None and heatmap.text[other][column] == "+3%"
    assert cover.z[row][column] is None and cover.name == GREY_NAME
    assert "grey: the paired 95% interval includes 0%" in figure.layout.title.text


def test_headline_rows_and_the_summary_follow_the_catalogs_dtype_order():
    import pandas as pd

    from fusedbench.report import in_dtype_order

    frame = pd.DataFrame({"dtype": ["fp8", "fp16", "tf32", "bf16"]})
    assert list(in_dtype_order(frame)["dtype"]) == ["fp16", "bf16", "tf32", "fp8"]


def test_a_figures_views_become_a_labelled_select_on_the_page_and_leave_the_plot_its_size():
    """Plotly's dropdowns are out of a keyboard's reach: the page draws each as a <select> holding the same views."""
    import plotly.graph_objects as go

    from fusedbench.report.figures import LEAN_TEMPLATE, add_dropdown
    from fusedbench.report.views import figure_label, take_view_selects

    title = {"text": "a <b>title</b><br><sup>its note</sup>"}
    figure = go.Figure(layout={"height": 366, "template": LEAN_TEMPLATE, "title": title})
    add_dropdown(figure, ["a", "b & c"], [{"visible": [True]}, {"visible": [False]}], [{"title.text": "A"}, {}])
    assert figure.layout.height == 366 and figure.layout.margin.t is None
    selects = take_view_selects(figure, "f")
    assert not figure.layout.updatemenus  # the HTML written next has no SVG dropdown
    assert "<label class='view' for='f-view'>View: </label><select id='f-view' data-figure='f' " in selects
    assert "data-views='f-view-data'><option>a</option><option>b &amp; c</option></select>" in selects
    views = json.loads(re.search(r"<script type='application/json' id='f-view-data'>(.*?)</script>", selects).group(1))
    assert views == [[{"visible": [True]}, {"title.text": "A"}], [{"visible": [False]}, {}]]
    assert figure_label(figure, "f") == "a title its note" and figure_label(go.Figure(), "f") == "f"


def test_dtypes_timed_at_one_shape_share_one_epilog_by_dtype_view(results):
    from fusedbench.report.figures import dtype_views, heatmap_views

    table = speedups(results.cells)
    seed = table[table["shape"] == "(16384,512)x(512,16384)"]
    fp8 = seed.assign(dtype="fp8")
    fp8 = fp8[fp8["epilog"] != "BGRADA"]  # synthetic: fp8 has no BGRADA cell
    merged = pd_concat(table, seed.assign(dtype="tf32"), fp8)  # synthetic single-shape dtypes
    assert dtype_views(merged) == [["fp16"], ["tf32", "fp8"]]
    figure = speedup_heatmap(merged, machine=MACHINE, dtypes=["tf32", "fp8"], baseline="unfused")
    assert list(figure.data[0].x) == ["tf32<br>(16384,512)x(512,16384)", "fp8<br>(16384,512)x(512,16384)"]
    assert figure.layout.title.text.startswith(f"{MACHINE} tf32 and fp8: fused over unfused")
    heatmap = figure.data[-1]
    row = list(heatmap.y).index("BGRADA")
    assert heatmap.text[row][1] == "n/a" and heatmap.text[row][0].endswith("x")  # not timed, said so
    # one figure for the machine: each group's views under its name, each with its own title, height and x axis
    (menu,) = heatmap_views(merged, machine=MACHINE).layout.updatemenus
    labels = [b.label for b in menu.buttons]
    assert labels[0] == "fp16: fused over unfused" and "tf32 and fp8: fused over unfused" in labels
    view = menu.buttons[labels.index("tf32 and fp8: fused over unfused")].args
    assert view[1] == {"title.text": figure.layout.title.text, "xaxis.title.text": "dtype and shape"}
    assert heatmap_views(merged, machine=MACHINE).layout.height == max(figure.layout.height, 626)  # the tallest
    traces = heatmap_views(merged, machine=MACHINE).data
    shown = [trace for trace, on in zip(traces, view[0]["visible"], strict=True) if on]
    assert [list(t.x) for t in shown] == [list(t.x) for t in figure.data]  # the tf32 and fp8 heatmap's traces


def test_failed_unsupported_and_skipped_cells_are_all_listed_with_reasons(tmp_path, results):
    import json
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    (env,) = [copy / MACHINE / n for n in os.listdir(copy / MACHINE) if n.endswith(".fbenv")]
    payload = json.loads(env.read_text())
    refused = [c for c in payload["cells"] if c["status"] == "unsupported"]
    # Synthetic statuses for this test only: one cell failed, one skipped, the rest as recorded.
    refused[0].update(status="failed", reason="RuntimeError: synthetic failure")
    refused[1].update(status="skipped", reason="needs about 900 GiB, 139 GiB free")
    env.write_text(json.dumps(payload))
    page = render_report(load_results(str(copy)))
    for text in ("RuntimeError: synthetic failure", "needs about 900 GiB, 139 GiB free", "torch has no op for"):
        assert text in page
    assert ">failed<" in page and ">skipped<" in page and ">unsupported<" in page


def _record(commit, started, gpu):
    from fusedbench.measure.records import GroupRecord

    return GroupRecord(MACHINE, commit, "Fp16Membound", started, 5.0, None, False, {"gpu": {"name": gpu}})


def test_the_environment_card_shows_the_newest_record_of_the_commit():
    from fusedbench.report.tables import environment_card

    records = [
        _record("c" * 40, "2026-11-22T01:00:00+00:00", "older GPU"),
        _record("c" * 40, "2026-11-22T02:00:00+00:00", "newer GPU"),
    ]
    card = environment_card(records, MACHINE, "c" * 40)
    assert "<td>newer GPU</td>" in card and "older GPU" not in card
    assert "<th>run started</th><td>2026-11-22 02:00</td>" in card
    assert "No environment recorded" in environment_card(records, MACHINE, "d" * 40)
    versions = {"cublaslt": 130100, "cuda_runtime": 13000, "triton": None, "nvmath-python": "0.6.0"}
    record = dataclasses.replace(records[1], environment={"versions": versions})
    card = environment_card([record], MACHINE, "c" * 40)
    assert "<th>cublaslt</th><td>13.1.0</td>" in card and "<th>cuda_runtime</th><td>13.0</td>" in card
    assert "<th>triton</th><td>not loaded by this run</td>" in card and "<td>0.6.0</td>" in card
    assert "None" not in card and "<th>GPU</th><td>not recorded</td>" in card
    assert "<th>SM clock under load (MHz)</th><td>not recorded</td>" in card


def test_the_palettes_are_told_apart_under_colour_vision_deficiencies_and_by_marker_shape():
    from colour_vision import closest_pair

    from fusedbench.catalog.providers import LADDER, PEERS, PROVIDERS
    from fusedbench.report.figures import DTYPE_COLORS, DTYPE_SYMBOLS, MACHINE_MARKS

    # the smallest CIE76 difference over normal vision, protanopia, deuteranopia and tritanopia (Machado 2009)
    assert closest_pair({p: PROVIDERS[p].color for p in LADDER})[0] > 15  # was 4.9: textbook and fused, protanopia
    assert closest_pair(DTYPE_COLORS)[0] > 15  # was 2.1: fp16 and tf32, deuteranopia
    assert closest_pair({str(i): colour for i, (colour, _) in enumerate(MACHINE_MARKS)})[0] > 15
    # twelve providers on the peers ladder are more than colour can tell apart: each has a shape of its own
    symbols = [PROVIDERS[p].symbol for p in (*LADDER, *PEERS)]
    assert len(set(symbols)) == len(symbols) and "triangle-up" not in symbols  # the ladder's "above the axis"
    assert len(set(DTYPE_SYMBOLS.values())) == len(DTYPE_SYMBOLS)
    assert len({symbol for _, symbol in MACHINE_MARKS}) == len(MACHINE_MARKS)


def test_every_view_of_a_ladder_keeps_each_providers_shape(results):
    figure = ladder_figure(results.cells, results.roofs, machine=MACHINE, dtypes=["fp16"])  # four shapes
    providers = [trace.name for trace in figure.data if trace.name in PROVIDERS]
    (menu,) = figure.layout.updatemenus
    assert len(menu.buttons) == 4 and providers
    for button in menu.buttons:  # a view that left a shape out would reset it to plotly's circle
        for provider, symbol in zip(providers, button.args[0]["marker.symbol"][-len(providers) :], strict=True):
            symbols = symbol if isinstance(symbol, list | tuple) else [symbol]
            assert set(symbols) <= {PROVIDERS[provider].symbol, "triangle-up"}, (provider, symbols)


def test_a_pngs_commit_line_grows_the_top_margin_instead_of_covering_the_plot(results):
    from fusedbench.report.figures import add_title_line

    figure = speedup_heatmap(speedups(results.cells), machine=MACHINE, dtypes=["fp16"], baseline="unfused")
    before = figure.layout.margin.t or 70
    add_title_line(figure, "commit 0123abcd")
    assert figure.layout.title.text.endswith("<br><sup>commit 0123abcd</sup>") and figure.layout.margin.t == before + 22


def test_deliberate_runs_machines_are_named_in_a_note_and_not_shown_as_machines(tmp_path):
    import shutil
    from pathlib import Path

    from tests.test_alert_cli import MACHINE as H100
    from tests.test_alert_cli import copy_runs

    tuned = f"{H100}-tuned-fused-workspace-0"
    folder = copy_runs(tmp_path / "results", ["67306e2d"])
    shutil.copytree(Path(__file__).parent.parent / "results" / tuned, folder / tuned)
    page = render_report(load_results(str(folder)))
    assert f"<h2 id='{H100}'>" in page and f"<h2 id='{tuned}'>" not in page
    note = "Not shown as machines: 1 machine of deliberate runs (tuned or injected slowdowns) and paired sessions"
    assert note in page and f"kept apart from the history: {tuned}. " in page
    assert "id='set-apart'" not in render_report(load_results(str(folder)), machines=[tuned])  # named: drawn


def test_a_trend_cells_band_is_the_threshold_the_gate_judges_it_by(committed_results):
    from fusedbench.regressions.gate import judge_every_suite
    from fusedbench.report import gate_threshold

    (verdict,) = judge_every_suite(committed_results, ["h100-80gb-hbm3"])
    default = next(suite for suite in verdict.suites if suite.suite == "default")
    version = default.preset.versions["Fp16Seed"]
    for seconds, klass in ((0.030, "large"), (0.002, "medium"), (0.0005, "small")):
        assert gate_threshold(verdict, "Fp16Seed", version, seconds) == default.preset.threshold("time", klass)
    assert len({default.preset.threshold("time", k) for k in ("large", "medium", "small")}) == 3  # told apart
    assert np.isnan(gate_threshold(verdict, "Fp16Seed", "another version", 0.030))  # no preset earned there
    assert np.isnan(gate_threshold(None, "Fp16Seed", version, 0.030))


def test_the_trend_compares_a_cells_version_within_its_group_and_a_history_of_nothing_twice_is_left_out(results):
    import dataclasses

    from fusedbench.report import trend_rows

    a, d, c = "a" * 40, "d" * 40, "c" * 40
    quick = results.cells.head(6).assign(commit=d, group="Quick")  # a quick run in between, at its own version
    cells = pd_concat(results.cells.assign(commit=a), quick, results.cells.assign(commit=c))
    versions = ["1: old"] * len(results.cells) + ["9: a quick run's"] * 6 + ["1: old"] * len(results.cells)
    detail = pd_concat(results.detail, results.detail.head(6), results.detail).assign(version=versions)
    rows = trend_rows(dataclasses.replace(results, cells=cells, detail=detail), cells, [a, d, c])
    assert not rows["changed"].any()  # as measurement_changes says: nothing measured differently
    half = len(results.cells) // 2  # two commits, no cell timed at both: no history section
    apart = pd_concat(results.cells.head(half).assign(commit=a), results.cells.tail(half).assign(commit=c))
    page = render_report(
        dataclasses.replace(
            results, cells=apart, detail=pd_concat(results.detail.head(half), results.detail.tail(half))
        )
    )
    assert f"{MACHINE} across commits" not in page


def test_a_compared_row_without_a_class_or_an_interval_says_so():
    import math

    import pandas as pd

    from fusedbench.report.tables import compared_rows

    rows = pd.DataFrame(
        {
            "epilog": [math.nan, "RELU", "GELU"],
            "dtype": [math.nan, "fp16", "fp16"],
            "m": [math.nan, 64, 64],
            "k": [math.nan, 32, 32],
            "n": [math.nan, 16, 16],
            "provider": ["*", "fused", "fused"],
            "group": ["Quick"] * 3,
            "metric": ["time"] * 3,
            "cell_class": [math.nan, "large", math.nan],
            "verdict": ["same", "slower", "missing"],
            "ratio": [1.01, 1.05, math.nan],
            "ci_low": [1.0, math.nan, math.nan],
            "ci_high": [1.02, math.nan, math.nan],
            "threshold": [0.02, 0.075, math.nan],
            "reason": [math.nan, "", "not run in the candidate"],
        }
    )
    shown = compared_rows(rows)
    assert list(shown["class"]) == ["gate", "large", "n/a"]
    assert list(shown["change [95% interval]"]) == ["+1.0% [+0.0%, +2.0%]", "+5.0%", "n/a"]
    assert list(shown["threshold"]) == ["2.0%", "7.5%", "n/a"] and shown["cell or gate"].iloc[0] == "group Quick"


def test_the_committed_report_stays_within_its_weight_budget():
    """3 MiB: plotly.js is half of it; the rest grows with the results (the CSVs are gzipped for it)."""
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "reports" / "index.html"
    assert page.stat().st_size <= 3 << 20, f"{page} weighs {page.stat().st_size / (1 << 20):.2f} MiB"


def test_a_png_is_rendered_without_the_cells_halo_and_the_page_keeps_it(monkeypatch, results):
    import plotly.graph_objects as go

    from fusedbench.report import render_pngs

    rendered = []
    monkeypatch.setattr(go.Figure, "to_image", lambda figure, **kwargs: rendered.append(figure) or b"png")
    figure = speedup_heatmap(speedups(results.cells), machine=MACHINE, dtypes=["fp16"], baseline="unfused")
    assert render_pngs({"a.png": figure}) == {"a.png": b"png"}
    (png,) = rendered
    assert {t.textfont.shadow for t in png.data if t.type == "heatmap" and t.text is not None} == {"none"}
    assert {t.textfont.shadow for t in figure.data if t.type == "heatmap" and t.text is not None} == {"auto"}


def test_merged_figures_draw_each_ones_traces_only_in_its_own_views():
    import plotly.graph_objects as go

    from fusedbench.report.figures import add_dropdown, merge_views

    views = go.Figure([go.Heatmap(z=[[1]]), go.Heatmap(z=[[2]], visible=False)], layout={"height": 300})
    add_dropdown(views, ["a: one", "a: two"], [{"visible": [True, False]}, {"visible": [False, True]}], [{}, {}])
    shapes = go.Figure(go.Scatter(y=[1, 2]), layout={"height": 500, "shapes": [{"type": "line", "y0": 1, "y1": 1}]})
    add_dropdown(shapes, ["b: one"], [{"y": [[3, 4]]}], [{"title.text": "B"}])
    merged = merge_views([views, shapes, go.Figure(go.Scatter(y=[9]))], ["", "peers ", "x "])  # no views: left out
    assert [trace.visible for trace in merged.data] == [None, False, False]  # the first view as it was drawn
    buttons = merged.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["a: one", "a: two", "peers b: one"]
    assert [b.args[0]["visible"] for b in buttons] == [[True, False, False], [False, True, False], [False, False, True]]
    assert buttons[2].args[0]["y"] == [None, None, [3, 4]]  # a restyle reaches its own traces only
    assert merged.layout.height == 500 and "height" not in buttons[0].args[1]  # the tallest's: no view resizes it
    assert buttons[2].args[1]["title.text"] == "B" and buttons[2].args[1]["shapes"][0]["y0"] == 1
    assert buttons[0].args[1]["shapes"] == []  # its own floor lines: none
