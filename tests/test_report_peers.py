"""The report's peers section, from the committed H200 runs: the peers suite's at 28888e2 beside the default
suite's at c8c600b (no GPU)."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fusedbench.analysis.speedups import ladder_cells, peers_speedups, speedups
from fusedbench.catalog.suites import PEER_ONLY_GROUPS
from fusedbench.report import key_figures, render_report
from fusedbench.report.figures import CAPPED, heatmap_views, ladder_figure, speedup_heatmap
from fusedbench.report.peers import in_peers_suite, peer_rows, peers_beside, two_pass_rows
from fusedbench.results.loader import load_results

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "h200-141gb"
PEERS_RUN, DEFAULT_RUN = "28888e2a", "c8c600be"


def committed_runs(tmp_path_factory, *commits: str):
    """A results folder with the H200's runs at these commits (a fraction of results/: fast), loaded."""
    target = tmp_path_factory.mktemp("peers") / "results"
    (target / MACHINE).mkdir(parents=True)
    shutil.copy(ROOT / "results" / "benchmarks.json", target)
    shutil.copy(ROOT / "results" / MACHINE / "machine.json", target / MACHINE)
    for commit in commits:
        for path in (ROOT / "results" / MACHINE).glob(f"{commit}-*"):
            shutil.copy(path, target / MACHINE)
    return load_results(str(target))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """The H200's default run and its later peers run."""
    return committed_runs(tmp_path_factory, DEFAULT_RUN, PEERS_RUN)


@pytest.fixture(scope="module")
def peers(results):
    cells = results.cells[in_peers_suite(results.cells)]
    return cells, speedups(cells, results.detail.loc[cells.index])


@pytest.fixture(scope="module")
def page(results):
    return render_report(results)


def test_a_peers_run_has_its_own_section_and_leaves_the_machines_newest_default_run_in_place(results, page):
    assert set(results.cells[in_peers_suite(results.cells)]["commit"].str[:8]) == {PEERS_RUN}
    header = re.search(f"<h2 id='{MACHINE}'>.*?</h2>", page).group(0)
    assert f"commit {DEFAULT_RUN}" in header and PEERS_RUN not in header
    # the advice draws on each workload's newest run: the peers run's where it timed the workload
    assert f"from commits {PEERS_RUN}, {DEFAULT_RUN}" in page
    peers_section = page[page.index("<h2 id='peers'>") :]
    assert f"<h3 id='{MACHINE}-peers'>" in peers_section and f"commits {PEERS_RUN} (Fp16SeedPeers" in peers_section
    # the peers run's heatmap and ladder are views of the machine's own figures, which its part links to
    assert f'id="{MACHINE}-peers-heatmap"' not in page and f'id="{MACHINE}-peers-ladder"' not in page
    assert f"href='#{MACHINE}-heatmap-view'>{MACHINE}'s heatmap</a>" in peers_section  # to its view switch
    assert f"href='#{MACHINE}-ladder-view'>{MACHINE}'s ladder</a>" in peers_section
    assert "choose <i>peers fp16</i> or <i>peers bf16</i> in the view switch" in peers_section
    for figure in ("heatmap", "ladder"):  # one figure each, a view switch grouping each run's views by dtype
        select = re.search(f"<select id='{MACHINE}-{figure}-view'.*?</select>", page).group(0)
        groups = re.findall("<optgroup label='([^']+)'>", select)
        own = {"heatmap": ["fp16", "bf16", "tf32 and fp8"], "ladder": ["fp16", "bf16", "tf32", "fp8"]}[figure]
        assert groups == [*own, "peers fp16", "peers bf16"], groups  # the default run's views, then the peers run's
    assert "triton: its time over fused and over unfused" in peers_section
    assert "<details open><summary>triton: its time over fused" in peers_section  # 64 rows: open all the same
    machine_section = page[page.index(f"<h2 id='{MACHINE}'>") : page.index("<h2 id='peers'>")]
    assert f"{MACHINE} peers fp16: fused over unfused" in machine_section  # its views' titles say whose they are
    assert f"{MACHINE} peers fp16 (8192,256)x(256,65536): each provider" in machine_section
    assert f"{MACHINE} fp16: fused over unfused" in machine_section  # beside the machine's own run's
    assert "the one-pass backward (unfused) against the two passes it replaced" in peers_section
    # the README's PNGs stay the default run's heatmaps
    assert all(PEERS_RUN not in figure.layout.title.text for figure in key_figures(results).values())


def test_a_peer_has_a_heatmap_view_of_fused_over_it_only_where_the_run_timed_it(results, peers):
    _, table = peers
    buttons = heatmap_views(table, machine=MACHINE, dtypes=["fp16"]).layout.updatemenus[0].buttons
    labels = [b["label"] for b in buttons]
    assert labels == [
        f"fp16: {v}" for v in ("fused over unfused", "fused over textbook", "fused over triton", "epilog cost")
    ]
    titles = [b["args"][1]["title.text"] for b in buttons]
    assert "(>1x: fusion pays)" in titles[0] and "(>1x: cuBLASLt's epilog beats triton)" in titles[2]
    default = results.cells[~in_peers_suite(results.cells)]
    plain = speedups(default, results.detail.loc[default.index])
    labels = [b["label"] for b in heatmap_views(plain, machine=MACHINE, dtypes=["fp16"]).layout.updatemenus[0].buttons]
    assert "fp16: fused over triton" not in labels and labels


def test_the_peers_ladder_draws_the_peer_beside_the_ladders_providers(results, peers):
    cells, _ = peers
    figure = ladder_figure(ladder_cells(cells), results.roofs, machine=MACHINE, dtypes=["fp16"])
    assert {"triton", "fused", "unfused", "textbook"} <= {trace.name for trace in figure.data}


def test_a_peers_ratios_are_its_time_over_fused_and_over_unfused(peers):
    cells, table = peers
    row = table[(table["dtype"] == "fp16") & (table["epilog"] == "DGELU_BGRAD")].iloc[0]
    assert row["over_triton"] == pytest.approx(row["triton"] / row["fused"])  # the peer's time over fused's
    assert row["triton_over_unfused"] == pytest.approx(row["triton"] / row["unfused"])
    assert row["over_triton_low"] <= row["over_triton"] <= row["over_triton_high"]
    rows = peer_rows(table, ladder_cells(cells), "triton").set_index(["dtype", "epilog"])
    assert len(rows) == 32 and (rows["beats both"].str.endswith(" of 5")).all()
    dgelu = table[(table["dtype"] == "fp16") & (table["epilog"] == "DGELU_BGRAD")]
    median = np.median(dgelu["over_triton"])
    assert rows.loc[("fp16", "DGELU_BGRAD"), "triton / fused"].startswith(f"{median:.2f}x")
    assert (rows["autotune s"] > 0).all() and rows["config (most chosen)"].str.contains("warps").all()
    # the most over the shapes: the seconds of the group that compiled the kernels (later groups read Triton's
    # cache, 0.01 s); on the H200 the gpu tests had compiled bf16 DGELU_BGRAD's before the run began
    triton = cells[(cells["provider"] == "triton") & (cells["dtype"] == "bf16") & (cells["epilog"] == "RELU_BIAS")]
    assert rows.loc[("bf16", "RELU_BIAS"), "compile s"] == triton["compile_s"].max() > 1 > triton["compile_s"].min()
    assert (rows["compile s"] > 1).sum() == 31 and rows.loc[("bf16", "DGELU_BGRAD"), "compile s"] < 0.1


def test_beats_both_counts_only_shapes_where_both_paired_intervals_lie_below_1x(peers):
    cells, table = peers
    faked = table.copy()
    first = faked.index[(faked["dtype"] == "bf16") & (faked["epilog"] == "BIAS")][0]
    faked.loc[first, ["over_triton", "over_triton_high", "triton_over_unfused", "triton_over_unfused_high"]] = [
        0.5, 0.9, 0.4, 0.8
    ]  # fmt: skip  # the best win: 1 / the larger of the peer's paired ratios
    rows = peer_rows(faked, ladder_cells(cells), "triton").set_index(["dtype", "epilog"])
    assert rows.loc[("bf16", "BIAS"), "beats both"] == "1 of 5"
    assert re.fullmatch(r"2\.00x at \(\d+,\d+\)x\(\d+,\d+\)", rows.loc[("bf16", "BIAS"), "best win"])
    faked.loc[first, "triton_over_unfused_high"] = 1.01  # beats fused, not unfused: no win
    rows = peer_rows(faked, ladder_cells(cells), "triton").set_index(["dtype", "epilog"])
    assert rows.loc[("bf16", "BIAS"), "beats both"] == "0 of 5" and rows.loc[("bf16", "BIAS"), "best win"] == ""


def test_the_two_pass_control_is_two_passes_over_one_paired_by_round(results, peers):
    cells, _ = peers
    rows = two_pass_rows(cells, results.detail)
    assert list(rows["epilog"].value_counts().sort_index().items()) == [("DGELU_BGRAD", 4), ("DRELU_BGRAD", 4)]
    ratio = rows["two passes / one pass"].str.extract(r"^([\d.]+)x \(([\d.]+)-([\d.]+)\)$").astype(float)
    assert ratio.notna().all().all() and (ratio[1] <= ratio[0]).all() and (ratio[0] <= ratio[2]).all()
    plain = rows["two passes ms"] / rows["one pass (unfused) ms"]
    assert np.allclose(ratio[0], plain, rtol=0.05)
    assert two_pass_rows(cells[cells["group"] != "TwoPass"], results.detail).empty


COMPILED_RUN = "c0ffee00" * 5


@pytest.fixture(scope="module")
def with_compiled(results):
    """The results with a torch-compile run of its own group at a later commit, made of the peers run's fp16
    membound unfused / fused / triton cells relabelled (triton's samples standing in for torch-compile's)."""
    cells, detail = results.cells, results.detail
    fp16 = cells["group"].isin(["Fp16SeedPeers", "Fp16MemboundPeers"])
    chosen = cells[fp16 & cells["provider"].isin(["unfused", "fused", "triton"])]
    copied = chosen.assign(group=chosen["group"].str.replace("Peers", "Compiled"), commit=COMPILED_RUN,
                           provider=chosen["provider"].replace("triton", "torch-compile"))  # fmt: skip
    copied.index = [f"compiled-{i}" for i in range(len(copied))]
    extra = detail.loc[chosen.index].set_axis(copied.index)
    # torch-compile at twice triton's times and fused at 1.5 times its own: ratios of the group's own, told apart
    for provider, factor in (("torch-compile", 2.0), ("fused", 1.5)):
        for index in copied.index[copied["provider"] == provider]:
            copied.at[index, "time_s"] *= factor
            extra.at[index, "raw"] = [factor * sample for sample in extra.at[index, "raw"]]
    return replace(results, cells=pd.concat([cells, copied]), detail=pd.concat([detail, extra]))


def test_a_peer_timed_in_a_group_of_its_own_joins_each_workloads_row_paired_within_its_group(with_compiled):
    cells = with_compiled.cells[in_peers_suite(with_compiled.cells)]
    table = peers_speedups(cells, with_compiled.detail.loc[cells.index])
    assert len(table) == len(speedups(cells, with_compiled.detail.loc[cells.index])) == 16 * 5 * 2
    membound = table[table["dtype"] == "fp16"]  # both groups' workloads: the seed shape's and the membound ones
    assert len(membound) == 80 and membound["over_torch-compile"].notna().all()
    assert (membound["commit"].str[:8] == PEERS_RUN).all()
    # triton's samples relabelled and doubled, over fused's made 1.5 times: each ratio paired within its own group
    assert np.allclose(membound["over_torch-compile"], 2 / 1.5 * membound["over_triton"], rtol=1e-6)
    assert np.allclose(membound["over_torch-compile_low"], 2 / 1.5 * membound["over_triton_low"], rtol=1e-6)
    assert np.allclose(membound["torch-compile"], 2 * membound["triton"])
    # the fused its ratios pair with is its own group's, and the heatmap's hover gives that one, not the ladder's
    assert np.allclose(membound["torch-compile_paired_fused"], 1.5 * membound["fused"])
    view = speedup_heatmap(table, machine=MACHINE, dtypes=["fp16"], baseline="torch-compile").data[0]
    shown = [cell for row in view.customdata for cell in row if cell is not None and not np.isnan(cell[0])]
    paired_ms = sorted(1e3 * membound["torch-compile_paired_fused"])  # the hover's 4 significant digits
    assert len(shown) == 80 and np.allclose(sorted(cell[0] for cell in shown), paired_ms, rtol=5e-4)
    # every other column is the ladder group's own, never filled in from the other group
    alone = cells[cells["commit"] != COMPILED_RUN]
    ladder = speedups(alone, with_compiled.detail.loc[alone.index]).set_index(["dtype", "epilog", "shape"])
    mine = table.set_index(["dtype", "epilog", "shape"])
    others = [c for c in ladder.columns if "torch-compile" not in c]
    pd.testing.assert_frame_equal(mine.loc[ladder.index, others], ladder[others], check_dtype=False)
    assert table[table["dtype"] == "bf16"]["over_torch-compile"].isna().all()
    assert table["over_triton"].notna().all()  # the ladder group's ratios stay in every row


def test_the_report_names_each_groups_newest_run_and_draws_the_group_of_its_own(with_compiled):
    page = render_report(with_compiled)
    peers_section = page[page.index("<h2 id='peers'>") :]
    assert f"{COMPILED_RUN[:8]} (Fp16SeedCompiled, Fp16MemboundCompiled)" in peers_section
    assert peers_section.count(" of 5</td>") == 32 + 16  # triton's rows, torch-compile's: every shape in each
    assert f"{PEERS_RUN} (Fp16SeedPeers, Fp16MemboundPeers" in peers_section
    assert "torch-compile: its time over fused and over unfused" in peers_section
    assert (
        "<option>peers fp16: fused over torch-compile</option>" in page
        and "triton: its time over fused" in peers_section
    )
    ladder = page[page.index(f'id="{MACHINE}-ladder"') :]
    ladder = ladder[: ladder.index("</script>")]
    assert '"name":"torch-compile"' in ladder and '"name":"triton"' in ladder  # both peers on the fp16 ladder
    header = re.search(f"<h2 id='{MACHINE}'>.*?</h2>", page).group(0)
    assert f"commit {DEFAULT_RUN}" in header  # a peers run never hides the machine's newest default run


WALKTHROUGH_RUN = "6158b610"


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory):
    """The H200's triton run beside its walkthrough and fp16 Compiled run (6158b61): the peers suite's groups only."""
    return committed_runs(tmp_path_factory, PEERS_RUN, WALKTHROUGH_RUN)


def test_a_workload_only_a_peers_group_timed_keeps_that_groups_fused_and_unfused(walkthrough):
    cells = walkthrough.cells[in_peers_suite(walkthrough.cells)]
    table = peers_speedups(cells, walkthrough.detail.loc[cells.index])
    numba = cells[cells["provider"].str.startswith("numba") & (cells["status"] == "ok")]
    assert (numba["algorithm"].str.endswith("32x32 threads a block")).all()  # who chose it unrecorded: no "(?)"
    fp32 = table[table["dtype"] == "fp32"]  # no ladder group times fp32: the walkthrough groups' own rows, whole
    assert len(fp32) == 6 * 5 and fp32["over_unfused"].notna().all() and fp32["over_einsum"].notna().all()
    assert fp32["over_numba-tiled"].notna().sum() == 6 * 3 and (fp32["commit"].str[:8] == WALKTHROUGH_RUN).all()
    fp16 = table[table["dtype"] == "fp16"].set_index(["epilog", "shape"])  # the ladder group's, beside the peers'
    assert (fp16["commit"].str[:8] == PEERS_RUN).all() and fp16["over_einsum"].notna().sum() == 6 * 5
    current = cells[cells["commit"].str[:8] == WALKTHROUGH_RUN]
    drawn = peers_beside(ladder_cells(cells), current)
    assert set(drawn[drawn["dtype"] == "fp16"]["provider"]) == {"einsum", "numba-naive", "numba-tiled", "torch-compile"}
    assert {"fused", "unfused", "einsum"} <= set(drawn[drawn["dtype"] == "fp32"]["provider"])


def test_the_walkthrough_rungs_are_drawn_capped_and_their_skips_explained(walkthrough):
    page = render_report(walkthrough)
    peers_section = page[page.index("<h2 id='peers'>") :]
    assert f'id="{MACHINE}-peers-heatmap"' in peers_section and f'id="{MACHINE}-peers-ladder"' in page
    assert "<optgroup label='fp32'>" in peers_section
    assert "numba-naive would take about" in peers_section  # the skipped cells' reasons, in the peers section
    assert "the median over the shapes it ran and (their range)" in peers_section
    for rung in ("einsum", "numba-naive", "numba-tiled"):  # tens of times slower everywhere: folded, however short
        assert f"<details><summary>{rung}: its time over fused" in peers_section, rung
    cells = walkthrough.cells[in_peers_suite(walkthrough.cells)]
    ladder = ladder_cells(cells)
    ladder = pd.concat([ladder, peers_beside(ladder, cells[cells["group"].isin(PEER_ONLY_GROUPS)])])
    fp16 = ladder_figure(ladder, walkthrough.roofs, machine=MACHINE, dtypes=["fp16"])
    traces = {trace.name: trace for trace in fp16.data}
    assert traces["numba-naive"].mode == "markers+text" and traces["fused"].mode == "markers"
    top = fp16.layout.yaxis.range[1]
    assert top < 20 and max(y for y in traces["numba-tiled"].y if y is not None) <= top  # drawn at the top, capped
    heights = {name: max(y for y in traces[name].y if y is not None) for name in ("einsum", "numba-tiled")}
    assert heights["einsum"] > heights["numba-tiled"]  # each capped rung a step lower: their numbers apart
    every = ladder_figure(ladder, walkthrough.roofs, machine=MACHINE)  # fp16 and fp32: a view per dtype and shape
    names = [trace.name for trace in every.data]
    for button in every.layout.updatemenus[0].buttons:
        restyle = button.args[0]
        drawn = [any(v is not None for v in ys or []) for ys in restyle["y"]]
        assert restyle["showlegend"] == [False, *drawn[1:]], button.label  # the legend: what the view draws
        rows = zip(names, restyle["y"], restyle["text"], strict=True)
        capped = [y for _, ys, texts in rows for y, text in zip(ys, texts or [], strict=False) if text]  # values
        measured = [
            y for n, ys in zip(names, restyle["y"], strict=True) if n not in CAPPED and n != "floor" for y in ys
        ]
        if capped:  # the capped rows (a value written at each) above every measured point, not among them
            assert min(capped) > max(y for y in measured if y is not None), button.label
    table = peers_speedups(cells, walkthrough.detail.loc[cells.index])
    views = heatmap_views(table, machine=MACHINE, dtypes=["fp32"]).layout.updatemenus[0].buttons
    # fp32 is timed by the walkthrough's groups only: no textbook and no GEMM there, so no view of either
    assert [b["label"] for b in views] == [
        f"fp32: fused over {p}" for p in ("unfused", "einsum", "numba-naive", "numba-tiled")
    ]


def test_peers_groups_with_no_ladder_group_beside_them_make_their_own_rows_without_a_pandas_warning(
    tmp_path_factory,
):
    """The H200's cutlass run alone (6006c05): every workload is the peer-only groups' own (a row set at a time,
    which fragments a frame until pandas warns: every warning is an error here and in the CLI)."""
    alone = committed_runs(tmp_path_factory, "6006c052")
    cells = alone.cells[in_peers_suite(alone.cells)]
    table = peers_speedups(cells, alone.detail.loc[cells.index])
    assert len(table) == len(cells.drop_duplicates(["dtype", "epilog", "m", "k", "n"])) > 0
    assert table["over_cutlass-evt"].notna().any()
