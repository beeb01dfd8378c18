"""The HTML report's structure, from the real H200 results kept in tests/fixtures (no GPU)."""

import json
import math
import os
import re

import numpy as np
import pytest
from plotly.offline import get_plotlyjs

from fusedbench.analysis import geometric_mean, speedups
from fusedbench.cli import main
from fusedbench.errors import FusedbenchError
from fusedbench.providers import LADDER
from fusedbench.report import PNG_SCALE, PNG_WIDTH, key_figures, render_report, write_pngs, write_report
from fusedbench.report.figures import ladder_figure, roofline_figure, speedup_heatmap
from fusedbench.results import load_results

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results-h200")
MACHINE = "h200-141gb"


@pytest.fixture(scope="module")
def results():
    return load_results(FIXTURE)


@pytest.fixture(scope="module")
def page(results):
    return render_report(results)


def test_plotly_is_embedded_once_and_nothing_is_fetched(page):
    bundle = get_plotlyjs()
    assert page.count(bundle) == 1  # the whole bundle, inline, once
    assert page.count("<script type='text/javascript'>") == 1
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+href=[\"']http", page)  # the bundle's own URLs are code, not requests


def test_the_report_has_a_section_per_machine_with_headline_and_environment(page):
    assert f"<h2 id='{MACHINE}'>{MACHINE}" in page
    assert "Headline" in page and "Environment" in page
    assert "NVIDIA H200" in page and "<td>13.1.0</td>" in page  # GPU and cuBLASLt 130100 from the .fbenv file


def test_the_headline_counts_fusion_inversions_and_names_the_worst(results, page):
    from fusedbench.analysis import headline

    table = speedups(results.cells)
    inverted = table[table["over_unfused"] < 0.95]
    worst = table.loc[table["over_unfused"].idxmin()]
    (row,) = headline(results.cells, table, MACHINE).to_dict("records")
    assert row["fused < 0.95x unfused, told apart"] == f"{len(inverted)} of {table['over_unfused'].notna().sum()}"
    assert len(inverted) > 0
    assert row["worst"] == f"{worst['epilog']} {worst['shape']}: {worst['over_unfused']:.2f}x"
    assert row["fused over unfused (range)"] == f"{worst['over_unfused']:.2f}x-{table['over_unfused'].max():.2f}x"
    assert f"({row['fused over unfused (range)']} over the workloads)" in page  # the summary says it too
    assert (row["ok"], row["unsupported"], row["skipped"], row["failed"]) == (344, 40, 0, 0)
    assert f"<td>{row['worst']}</td>" in page
    assert worst["epilog"] in ("DRELU_BGRAD", "DGELU_BGRAD")  # cuBLASLt's fused bias gradients lose here


def test_figures_cover_both_baselines_the_epilog_cost_and_each_shape(page):
    titles = [json.loads(f'"{t}"') for t in re.findall(r'"title":\{"text":"([^"]+)"', page)]
    for baseline in ("textbook", "unfused"):
        title = f"{MACHINE} fp16: fused over {baseline} (>1x: fusion pays; grey: the 95% interval includes 1x)"
        assert title in titles
    assert any("the epilog's own cost" in t for t in titles)
    assert sum("the provider ladder" in t for t in titles) == 4  # the four membound shapes


def test_above_the_fold_the_answer_headline_contents_and_glossary_and_every_link_resolves(results, page):
    from fusedbench.analysis import geometric_mean

    every = re.findall(r"<(?:h[23]|div) id=['\"]([^'\"]+)['\"]", page)
    assert len(every) == len(set(every))  # no id twice
    ids = set(re.findall(r"id=['\"]([^'\"]+)['\"]", page))
    links = re.findall(r"href='#([^']+)'", page)
    assert links and set(links) <= ids  # the contents' anchors all resolve
    assert f"{MACHINE}-fp16" in links
    assert {f"{MACHINE}-fp16-over-unfused", f"{MACHINE}-fp16-ladder-16384-256-x-256-16384"} <= ids
    order = ["<div id='summary'>", "<h2 id='headline'>", "<h2 id='contents'>", f"<h2 id='{MACHINE}'>"]
    assert [page.index(mark) for mark in order] == sorted(page.index(mark) for mark in order)
    table = speedups(results.cells, results.detail)
    assert f"{geometric_mean(table['over_unfused']):.2f}x as fast as the best unfused version" in page
    assert "<dt>BGRADA / BGRADB</dt>" in page and "<dt>floor</dt>" in page
    figures = page.count('class="plotly-graph-div"')  # each one's modebar without the cloud upload
    assert figures > 0 and page.count('"modeBarButtonsToRemove": ["sendDataToCloud"]') == figures


def test_unsupported_cells_are_listed_with_their_reason(page):
    assert "Cells that did not run (40)" in page
    assert "torch has no op for DRELU_BGRAD" in page


def test_heatmap_columns_run_from_low_to_high_arithmetic_intensity_under_titled_axes(results):
    figure = speedup_heatmap(speedups(results.cells), machine=MACHINE, dtype="fp16", baseline="unfused")
    assert list(figure.data[0].x) == [
        "(8192,256)x(256,65536)",  # 2MNK / (MK + KN + MN) = 495
        "(16384,256)x(256,16384)",  # 496
        "(16384,512)x(512,16384)",  # 964
        "(32768,1024)x(1024,16384)",  # 1872
    ]
    assert "arithmetic intensity" in figure.layout.xaxis.title.text and figure.layout.yaxis.title.text == "epilog"


def test_heatmap_values_are_the_tables_speedups(results):
    table = speedups(results.cells)
    figure = speedup_heatmap(table, machine=MACHINE, dtype="fp16", baseline="unfused")
    heatmap = figure.data[0]
    row = list(heatmap.y).index("RELU_BIAS")
    column = list(heatmap.x).index("(16384,256)x(256,16384)")
    cells = results.cells.query("epilog == 'RELU_BIAS' and m == 16384 and k == 256 and n == 16384")
    times = dict(zip(cells["provider"], cells["time_s"], strict=True))
    assert heatmap.text[row][column] == f"{times['unfused'] / times['fused']:.2f}x"
    assert heatmap.z[row][column] == pytest.approx(math.log2(times["unfused"] / times["fused"]))


def test_ladder_has_a_bar_per_provider_with_confidence_intervals(results):
    figure = ladder_figure(results.cells, machine=MACHINE, dtype="fp16", shape="(16384,256)x(256,16384)")
    assert [trace.name for trace in figure.data] == ["textbook", "unfused", "fused", "fused-autotuned", "torch", "gemm"]
    fused = figure.data[2]
    assert len(fused.x) == 16 and all(v > 0 for v in fused.error_y.array)
    assert len(figure.data[4].x) == 6  # the torch peer covers six epilogs


def test_ladder_draws_each_workloads_floor_when_the_run_measured_ceilings(results):
    shape = "(16384,256)x(256,16384)"
    # Synthetic floors for this test only: 0.1 ms per workload, 0.05 ms for the GEMM alone.
    cells = results.cells.assign(floor_s=np.where(results.cells["provider"] == "gemm", 0.05e-3, 0.1e-3))
    figure = ladder_figure(cells, machine=MACHINE, dtype="fp16", shape=shape)
    floor = figure.data[-1]
    assert floor.name.startswith("floor") and len(floor.x) == 16
    assert all(y == pytest.approx(0.1) for y in floor.y)  # the workload's floor, not the gemm cell's
    fused = figure.data[2]
    assert fused.customdata[0][2] == pytest.approx(fused.y[0] / 0.1)  # hover: time over floor


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
    assert re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page)[:3] == [
        f"{MACHINE}-fp16-over-textbook",
        f"{MACHINE}-fp16-over-unfused",
        f"{MACHINE}-fp16-cost",
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


def test_roofline_draws_the_roof_only_with_the_runs_ceilings(results):
    import pandas as pd

    without = roofline_figure(results.cells, results.ceilings, machine=MACHINE, dtype="fp16")
    assert "no ceilings measured" in without.layout.title.text
    assert [trace.name for trace in without.data] == list(LADDER)
    # Synthetic ceilings for this test only: a 700 TFLOP/s GEMM and 4 TB/s of copy bandwidth.
    (commit,) = set(results.cells["commit"])
    roof_row = {"machine": MACHINE, "dtype": "fp16", "gemm_tflops": 700.0, "gemm_at": "somewhere", "copy_tbps": 4.0}
    other_commit = roofline_figure(
        results.cells, pd.DataFrame([roof_row | {"commit": "0" * 40}]), machine=MACHINE, dtype="fp16"
    )
    assert "no ceilings measured" in other_commit.layout.title.text  # another run's roof is not this run's
    with_roof = roofline_figure(
        results.cells, pd.DataFrame([roof_row | {"commit": commit}]), machine=MACHINE, dtype="fp16"
    )
    roof = with_roof.data[-1]
    assert roof.name.startswith("roof") and max(roof.y) == pytest.approx(700.0)
    assert min(roof.y) == pytest.approx(4.0 * min(roof.x))
    assert "700 TFLOP/s (at somewhere), copy 4.00 TB/s" in with_roof.layout.title.text


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
    assert re.search(r"by machine: h200-141gb \d\.\d\dx, h100-80gb-hbm3 \d\.\d\dx\.", page)  # the summary compares them
    assert "fused's speedups across commits" in page
    machines = re.findall(r"<h2 id='([^']+)'>", page)
    assert machines == ["headline", "contents", "glossary", MACHINE, "h100-80gb-hbm3", "machines"]
    assert f"{MACHINE} (37415b86)" in page and "h100-80gb-hbm3 (37415b86)" in page  # bars name their commits


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


def test_heatmap_hover_names_times_intervals_and_samples(results):
    figure = speedup_heatmap(speedups(results.cells), machine=MACHINE, dtype="fp16", baseline="textbook")
    hover = figure.data[0].hovertext[0][0]
    assert hover.startswith("DEFAULT fp16 (8192,256)x(256,65536)")  # the lowest arithmetic intensity comes first
    assert "99% CI" in hover and "10 samples" in hover and "textbook" in hover


def test_the_epilog_cost_heatmap_writes_fused_minus_gemm_in_each_cell(results):
    from fusedbench.report.figures import epilog_cost_figure

    table = speedups(results.cells)
    figure = epilog_cost_figure(table, machine=MACHINE, dtype="fp16")
    heatmap = figure.data[0]
    row = list(heatmap.y).index("GELU_BIAS")
    column = list(heatmap.x).index("(16384,256)x(256,16384)")
    cell = table[(table["epilog"] == "GELU_BIAS") & (table["shape"] == "(16384,256)x(256,16384)")].iloc[0]
    assert heatmap.text[row][column] == f"{(cell['fused'] - cell['gemm']) / cell['gemm'] * 100:+.0f}%"
    hover = heatmap.hovertext[row][column]
    assert "gemm" in hover and "epilog cost" in hover
    assert "from the two medians" in hover  # this run did not sample in rounds: no interval is claimed


def test_the_epilog_cost_of_a_run_sampled_in_rounds_gives_its_interval(results):
    from fusedbench.report.figures import epilog_cost_figure

    cells = results.cells.copy()
    ok = cells["status"] == "ok"
    cells.loc[ok, ["gemm_ratio", "gemm_ratio_low", "gemm_ratio_high"]] = [1.03, 0.99, 1.08]
    figure = epilog_cost_figure(speedups(cells), machine=MACHINE, dtype="fp16")
    heatmap = figure.data[0]
    row, column = list(heatmap.y).index("GELU_BIAS"), list(heatmap.x).index("(16384,256)x(256,16384)")
    assert heatmap.text[row][column] == "+3%"
    assert "round-by-round ratios, 95% interval -1.0% to +8.0%" in heatmap.hovertext[row][column]


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
    from fusedbench.records import GroupRecord

    return GroupRecord(MACHINE, commit, "Fp16Membound", started, 5.0, None, False, {"gpu": {"name": gpu}})


def test_a_machines_commits_run_in_the_order_their_records_say(results):
    import pandas as pd

    from fusedbench.report import commits_in_order

    cells = pd.concat([results.cells.assign(commit="b" * 40), results.cells.assign(commit="a" * 40)])
    records = [_record("a" * 40, "2026-11-22T01:00:00+00:00", "x"), _record("b" * 40, "2026-11-22T02:00:00+00:00", "x")]
    assert commits_in_order(cells, records, MACHINE) == ["a" * 40, "b" * 40]  # not the table's order
    assert commits_in_order(cells, records[:1], MACHINE) == ["b" * 40, "a" * 40]  # unrecorded commits first


def test_the_environment_card_shows_the_newest_record_of_the_commit():
    from fusedbench.report import environment_card

    records = [
        _record("c" * 40, "2026-11-22T01:00:00+00:00", "older GPU"),
        _record("c" * 40, "2026-11-22T02:00:00+00:00", "newer GPU"),
    ]
    card = environment_card(records, MACHINE, "c" * 40)
    assert "<td>newer GPU</td>" in card and "older GPU" not in card
    assert "No environment recorded" in environment_card(records, MACHINE, "d" * 40)
