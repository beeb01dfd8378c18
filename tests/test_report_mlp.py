"""The report's MLP section and the mlp suite's results: read apart from the epilog cells, the speedups of
fused's whole training step over each baseline, greyed where asv's intervals overlap, and where fusion pays."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest

from fusedbench.catalog.suites import MLP_GROUPS
from fusedbench.errors import FusedbenchError
from fusedbench.report import key_figures, render_report, shown_mlp
from fusedbench.report.mlp import newest_runs, step_figure, step_table, where_fusion_stops_paying
from fusedbench.results.loader import MLP_COLUMNS, load_results

MACHINE = "h200-141gb"


@pytest.fixture(scope="module")
def committed(committed_results):
    """results/ as committed, read once for the module."""
    return committed_results


def row(version: str, ms: float, *, commit="c2", started=2, gpu_ms=None, spread=0.01, layers="64-30-10", batch=256,
        dtype="fp16", status="ok") -> dict:  # fmt: skip
    inputs, hidden, _ = (int(w) for w in layers.split("-"))
    seconds = ms / 1e3
    gpu = (gpu_ms if gpu_ms is not None else ms / 2) / 1e3
    return dict.fromkeys(MLP_COLUMNS) | {
        "machine": MACHINE, "commit": commit, "group": "MlpStep", "workload": "mlp-step", "layers": layers,
        "inputs": inputs, "hidden": hidden, "batch": batch, "dtype": dtype, "version": version, "status": status,
        "reason": "", "time_s": seconds, "ci_low_s": seconds * (1 - spread), "ci_high_s": seconds * (1 + spread),
        "samples": 10, "gpu_s": gpu, "host_overhead_s": seconds - gpu, "test_accuracy": math.nan,
        "started_ms": started,
    }  # fmt: skip


def frame(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=MLP_COLUMNS)


def test_a_speedup_is_the_baselines_median_over_fuseds_by_both_clocks_and_apart_only_where_intervals_are():
    table = step_table(
        frame(row("fused", 10, gpu_ms=8), row("unfused", 12, gpu_ms=11), row("textbook", 10.05), row("torch", 9))
    )
    (only,) = table.itertuples()
    assert only.over_unfused == pytest.approx(1.2) and only.gpu_over_unfused == pytest.approx(11 / 8)
    assert only.fused_overhead_ms == pytest.approx(2)
    assert only.unfused_distinct and not only.textbook_distinct and only.torch_distinct  # 10.05 +-1% meets 10 +-1%
    assert only.over_torch == pytest.approx(0.9)
    # the kernels' median above the wall's (medians of different calls): no host share, rather than a negative one
    (above,) = step_table(frame(row("fused", 10, gpu_ms=10.5), row("unfused", 12))).itertuples()
    assert math.isnan(above.fused_overhead_ms) and above.fused_gpu_ms == pytest.approx(10.5)


def test_the_newest_run_of_each_machine_is_shown_whichever_group_asv_started_last():
    older = row("fused", 99, commit="c1", started=1)
    epoch = row("fused", 20, started=3) | {"group": "MlpEpoch", "workload": "mlp-epoch"}
    runs = newest_runs(frame(older, row("fused", 10), row("unfused", 12), epoch))
    assert set(runs["commit"]) == {"c2"} and len(runs) == 3
    assert step_table(frame(older, row("fused", 10), row("unfused", 12)))["fused_ms"].tolist() == [10]


def test_where_fusion_pays_names_the_sizes_fused_wins_and_loses_and_the_notebooks_host_share():
    rows = [
        row("fused", 1.0, gpu_ms=0.1, dtype="fp32"),
        row("unfused", 1.0, gpu_ms=0.1, dtype="fp32"),
        row("fused", 1.0, gpu_ms=0.5, dtype="fp32", batch=4096),  # another batch: its host share is not the one said
        row("unfused", 1.0, gpu_ms=0.5, dtype="fp32", batch=4096),
        row("fused", 10, layers="4096-4096-10", batch=65536),
        row("unfused", 11, layers="4096-4096-10", batch=65536),
        row("fused", 5, layers="1024-1024-10", batch=4096),
        row("unfused", 4, layers="1024-1024-10", batch=4096),
        row("fused", 10, layers="8192-16384-10", batch=4096),  # faster, but the intervals overlap: no win
        row("unfused", 10.1, layers="8192-16384-10", batch=4096),
        row("fused", 1.0, gpu_ms=0.4),  # fp16 at the notebook's size: its host share is not the one said
        row("unfused", 1.0, gpu_ms=0.4),
    ]
    text = where_fusion_stops_paying(step_table(frame(*rows)), MACHINE)
    assert "90% of fused's step is the host's" in text and "its kernels take 0.100 ms of 1.000 ms" in text
    assert "<b>fp16</b>: the fused step beats unfused at 4096-4096-10 at batch 65536 (1.10x)" in text
    assert "it loses at 1024-1024-10 at batch 4096 (0.80x); 2 of 4 sizes are not told apart" in text
    assert "<b>fp32</b>: the fused step beats unfused at no size; it loses at no size; 2 of 2" in text


def test_the_figure_greys_overlapping_intervals_and_offers_each_dtype_baseline_and_clock_with_data():
    from fusedbench.report.figures import GREY_NAME, LEAN_TEMPLATE

    rows = [row("fused", 10), row("unfused", 12), row("torch", 10.01), row("torch", 3, dtype="bf16")]
    rows += [row("fused", 10, batch=512), row("unfused", 20, batch=512)]  # torch not timed at 512: n/a there
    rows += [row("fused", 10, dtype="fp32"), row("unfused", 11, dtype="fp32")]
    figure = step_figure(step_table(frame(*rows)), MACHINE)
    buttons = figure.layout.updatemenus[0].buttons
    fp16 = [f"fp16, over {b}, {c}" for b in ("unfused", "torch") for c in ("wall", "gpu")]  # bf16: no fused
    assert [b.label for b in buttons] == [fp16[0], "fp32, over unfused, wall", "fp32, over unfused, gpu", *fp16[1:]]
    view = {b.label: [t for t, shown in zip(figure.data, b.args[0]["visible"], strict=True) if shown] for b in buttons}
    assert [t.visible for t in figure.data] == buttons[0].args[0]["visible"]  # the first view shown
    (unfused,) = view[fp16[0]]  # every interval apart: no grey
    assert unfused.z[0][0] == pytest.approx(math.log2(1.2)) and unfused.text[0][0] == "1.20x"
    assert unfused.textfont.shadow == "auto"  # the value legible on the scale's mid tones
    cover, torch = view["fp16, over torch, wall"]  # greyed: the intervals overlap; the grey drawn first, under the text
    assert cover.name == GREY_NAME and list(cover.z[0]) == [1, None]
    assert cover.customdata[0][0] == torch.customdata[0][0]  # the grey carries the cell's hover
    assert torch.z[0][0] is None and list(torch.text[0]) == ["1.00x", "n/a"]  # n/a: the background's colour
    assert figure.layout.plot_bgcolor is None and LEAN_TEMPLATE.layout.plot_bgcolor != cover.colorscale[0][1]
    (torch_gpu,) = view["fp16, over torch, gpu"]
    assert torch_gpu.z[0][0] == pytest.approx(math.log2(5.005 / 5))  # the GPU clock has no interval to grey by


def test_the_committed_mlp_results_are_read_apart_from_the_epilog_cells_and_drawn_per_machine(committed):
    results = committed
    # no epilog view or table sees them (alert does, through regressions.compare.mlp_as_cells)
    assert not results.cells["epilog"].str.startswith("mlp").any()
    newest = newest_runs(results.mlp)
    assert set(newest["machine"]) == {"h100-80gb-hbm3", MACHINE}
    for _, run in newest.groupby("machine"):
        assert run["commit"].nunique() == 1 and len(run) == sum(g.cell_count for g in MLP_GROUPS.values())
        epochs = run[(run["workload"] == "mlp-epoch") & (run["status"] == "ok")]
        assert (epochs[epochs["dtype"] == "fp32"]["test_accuracy"] >= 0.9).all() and len(epochs) == 9
        refused = run[(run["dtype"] == "bf16") & (run["version"] != "torch")]  # their reason is in the record
        assert set(refused["status"]) == {"unsupported"} and refused["reason"].str.contains("no bfloat16").all()
    mlp_only = replace(results, cells=results.cells.iloc[:0])
    assert [name for name in key_figures(mlp_only) if "mlp" in name] == [
        f"{machine}-mlp-step-fp16-fused-over-unfused-wall.png" for machine in ("h100-80gb-hbm3", MACHINE)
    ]
    page = render_report(mlp_only)  # the MLP section alone: no epilog cells
    assert "No fusedbench results yet" not in page
    ok = newest[(newest["status"] == "ok") & (newest["workload"] == "mlp-step")]
    assert len(step_table(results.mlp)) == ok.groupby(["machine", "layers", "batch", "dtype"]).ngroups  # a row a size
    assert ((ok["ci_low_s"] <= ok["time_s"]) & (ok["time_s"] <= ok["ci_high_s"])).all()
    notebook = ok[(ok["layers"] == "64-30-10") & (ok["batch"] == 256)]
    assert (notebook["gpu_s"] < notebook["time_s"] / 5).all()  # the notebook's step: mostly the host's
    epoch = newest[(newest["workload"] == "mlp-epoch") & (newest["status"] == "ok")]["time_s"].iloc[0]
    assert f"<td class=n>{epoch * 1e3:.3f}</td>" in page  # ms per epoch
    assert page.count("<th class=n>ms per epoch</th>") == 2 and "<td class=n>0.964</td>" in page  # each machine's
    for ident in ("mlp", "h100-80gb-hbm3-mlp", f"{MACHINE}-mlp", f"{MACHINE}-mlp-step"):
        assert f"id='{ident}'" in page or f'id="{ident}"' in page, ident


def test_the_png_of_the_step_figure_is_its_first_view_alone_and_names_its_commit():
    from fusedbench.report.mlp import step_png_figure

    figure, view = step_png_figure(step_table(frame(row("fused", 10), row("unfused", 12), row("torch", 9))), MACHINE)
    assert view == "fp16-fused-over-unfused-wall"
    _, view = step_png_figure(step_table(frame(row("fused", 10, dtype="fp32"), row("torch", 9, dtype="fp32"))), MACHINE)
    assert view == "fp32-fused-over-torch-wall"  # no fp16, no unfused: the first view there is
    assert len(figure.data) == 1 and figure.data[0].visible and not figure.layout.updatemenus
    title = figure.layout.title.text
    assert "fp16: fused over unfused, wall clock" in title and "commit c2" in title


def test_a_results_folder_of_mlp_runs_alone_is_read_not_refused(tmp_path):
    import shutil
    from pathlib import Path

    folder = tmp_path / "results" / MACHINE
    folder.mkdir(parents=True)
    source = Path("results") / MACHINE
    for path in [source / "machine.json", *source.glob("d23b8d41-*")]:  # the mlp run's results and records
        shutil.copy(path, folder)
    results = load_results(str(tmp_path / "results"))
    assert results.cells.empty and len(results.mlp) == sum(g.cell_count for g in MLP_GROUPS.values())


def test_a_run_with_no_step_timed_or_no_gpu_time_draws_what_it_has_and_the_filters_reach_the_mlp_runs(committed):
    from fusedbench.report.mlp import mlp_section

    heading = lambda level, ident, text: f"<h{level} id='{ident}'>{text}</h{level}>"  # noqa: E731
    div = lambda figure, ident: f"<div id='{ident}'></div>"  # noqa: E731
    skipped = frame(row("fused", 10, status="skipped"), row("torch", 9, status="skipped"))
    assert step_figure(step_table(skipped), MACHINE) is None
    assert f"id='{MACHINE}-mlp'" in "".join(mlp_section(skipped, heading, div))  # the section, no figure
    no_cupti = frame(*(r | {"gpu_s": math.nan} for r in (row("fused", 10), row("unfused", 12))))
    labels = [b.label for b in step_figure(step_table(no_cupti), MACHINE).layout.updatemenus[0].buttons]
    assert labels == ["fp16, over unfused, wall"]  # no GPU-time view without GPU times
    results = committed
    mlp_only = replace(results, cells=results.cells.iloc[:0])
    page = render_report(mlp_only, machines=[MACHINE], commits=["d23b8d41"])
    assert f"id='{MACHINE}-mlp'" in page and "h100-80gb-hbm3-mlp" not in page
    with pytest.raises(FusedbenchError, match="--commit 0123abcd matches no results here"):
        render_report(mlp_only, commits=["0123abcd"])
    assert shown_mlp(results, commits=["c8c600b"]).empty  # the epilog run alone: no MLP section


def test_table_gives_the_mlp_cells_with_mlp_and_points_there_when_the_runs_chosen_have_no_other(capsys):
    import json

    from fusedbench.cli import main

    assert main(["table", "results", "--machine", MACHINE, "--commit", "d23b8d41", "--mlp", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == sum(g.cell_count for g in MLP_GROUPS.values()) and rows[0]["workload"] == "mlp-step"
    assert main(["table", "results", "--machine", MACHINE, "--commit", "d23b8d41", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [] and "add --mlp for their table" in err
