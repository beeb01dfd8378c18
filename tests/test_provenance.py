"""Kernel provenance, heuristic regret, textbook fidelity and pass bandwidth in the cell table, and the
Blog control kept out of the ladder, read from a real H200 run (quick suite and the Blog group at b2f8fab)."""

from __future__ import annotations

import math
import os
import re

import pandas as pd
import pytest

from fusedbench.analysis.speedups import speedups
from fusedbench.catalog.formats import cell_from_json
from fusedbench.catalog.model import Cell, CellKey, FormatError
from fusedbench.measure.gpu.provenance import median_kernels, short_name
from fusedbench.regressions.compare import compare_runs, select_run
from fusedbench.regressions.history import cell_series
from fusedbench.regressions.thresholds import preset_for
from fusedbench.report import render_report
from fusedbench.results.derived import flags, paired_ratios
from fusedbench.results.loader import ResultSet, load_results, same_size_copy_tbps

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results-provenance")
MACHINE = "h200-141gb"
SEED = (65536, 16384, 8192)


@pytest.fixture(scope="module")
def results():
    return load_results(FIXTURE)


def row(cells: pd.DataFrame, group: str, epilog: str, provider: str) -> pd.Series:
    (found,) = cells[(cells["group"] == group) & (cells["epilog"] == epilog) & (cells["provider"] == provider)].index
    return cells.loc[found]


@pytest.mark.parametrize(
    ("mangled", "short"),
    [
        (
            "_ZN8cublasLt8epilogue4impl12globalKernelILi8ELi32EfffLb1ELb1ELb0EEEvNS1_6ParamsE",
            "cublasLt::epilogue::impl::globalKernel",
        ),
        ("_Z10add_kernelPfS_i", "add_kernel"),
        ("nvjet_sm90_hsh_192x192_64x4_2x1_v_bz_coopB_TNN", "nvjet_sm90_hsh_192x192_64x4_2x1_v_bz_coopB_TNN"),
        ("void gemm<float>(float*)", "void gemm"),
        ("_Z3foo3bar", "foo"),  # foo(bar): a parameter's class name is not part of the function's name
        ("_Zweird", "_Zweird"),  # not a name mangled the usual way: kept whole
    ],
)
def test_kernel_names_are_shortened_to_their_qualified_name(mangled, short):
    assert short_name(mangled) == short


def test_the_recorded_kernels_take_about_the_time_the_cuda_events_measured(results):
    """One cold call under CUPTI against the median of ten cold samples: the same work, in the same units."""
    gemm = results.cells[(results.cells["provider"] == "gemm") & (results.cells["status"] == "ok")]
    for index, cell in gemm.iterrows():
        recorded = sum(us for _, us in results.detail.at[index, "kernel_times"]) * 1e-6
        assert recorded == pytest.approx(cell["time_s"], rel=0.1), cell["epilog"]


def test_every_timed_cell_has_its_kernels_and_the_nvmath_ones_their_algorithm(results):
    ok = results.cells[results.cells["status"] == "ok"]
    assert ok["kernels"].dtype == "Int64" and (ok["kernels"] >= 1).all()
    assert (ok["kernel_names"].str.len() > 0).all()
    nvmath = ok[ok["provider"].isin(["textbook", "unfused", "fused", "fused-autotuned", "gemm"])]
    assert nvmath["algorithm"].str.match(r"id=\d+ tile=").all()
    assert set(ok[ok["provider"] == "fused-autotuned"]["algorithm"].str.extract(r"\((\w+)\)$")[0]) == {"autotune"}
    assert (ok[ok["provider"].isin(["torch", "blog"])]["algorithm"] == "").all()


def test_a_fused_cell_that_runs_a_separate_epilogue_kernel_is_flagged(results):
    fused = row(results.cells, "Quick", "DRELU_BGRAD", "fused")
    assert fused["kernels"] == 2 and fused["kernel_names"].endswith("cublasLt::epilogue::impl::globalKernel")
    assert "multi-kernel" in fused["flags"]
    single = results.cells[(results.cells["provider"] == "fused") & (results.cells["kernels"] == 1)]
    assert len(single) == 4 and not single["flags"].str.contains("multi-kernel").any()


def test_regret_is_fused_over_autotuned_paired_by_round_on_fused_rows_only(results):
    cells, detail = results.cells, results.detail
    fused = row(cells, "Quick", "RELU_BIAS", "fused")
    tuned = row(cells, "Quick", "RELU_BIAS", "fused-autotuned")
    per_round = [a / b for a, b in zip(detail.at[fused.name, "raw"], detail.at[tuned.name, "raw"], strict=True)]
    assert fused["regret"] == pytest.approx(pd.Series(per_round).median())
    assert fused["regret_low"] <= fused["regret"] <= fused["regret_high"]
    assert cells[cells["provider"] != "fused"]["regret"].isna().all()


def test_textbook_fidelity_is_measured_against_the_blog_in_its_own_rounds(results):
    cells = results.cells
    for epilog in ("RELU_BIAS", "DRELU_BGRAD"):
        textbook = row(cells, "Blog", epilog, "textbook")
        assert 0.97 < textbook["fidelity"] < 1.03 and textbook["fidelity_low"] < textbook["fidelity_high"]
    assert cells[cells["group"] != "Blog"]["fidelity"].isna().all()  # Quick has no blog cell to pair with
    assert cells[cells["provider"] != "textbook"]["fidelity"].isna().all()
    # The Blog group's textbook has no gemm in its rounds: never paired with another group's gemm.
    assert math.isnan(row(cells, "Blog", "RELU_BIAS", "textbook")["gemm_ratio"])
    assert row(cells, "Quick", "RELU_BIAS", "textbook")["gemm_ratio"] > 1.3


def test_pairing_stays_within_a_group(results):
    cells, detail = results.cells, results.detail
    over_textbook = paired_ratios(cells, list(detail["raw"]), detail["paired"], "textbook")
    blog = row(cells, "Blog", "RELU_BIAS", "blog")
    quick_fused = row(cells, "Quick", "RELU_BIAS", "fused")
    assert over_textbook.at[blog.name, "ratio"] == pytest.approx(
        1 / row(cells, "Blog", "RELU_BIAS", "textbook")["fidelity"], rel=0.02
    )
    assert over_textbook.at[quick_fused.name, "ratio"] < 0.8  # fused over the Quick group's textbook


def test_unfused_pass_bandwidth_comes_from_its_own_kernels_and_its_own_runs_copy_ceiling(results):
    cells, ceilings = results.cells, results.ceilings
    copy = ceilings[ceilings["machine"] == MACHINE]["copy_tbps"].iloc[0]
    bias = row(cells, "Quick", "BIAS", "unfused")
    (kernels,) = [k for k in results.detail.at[bias.name, "kernel_times"] if k[0] == "fusedbench_epilog"]
    m, _, n = SEED
    moved = 2 * m * n * 2 + m * 2  # D read and written, the bias read, fp16
    assert bias["pass_tbps"] == pytest.approx(moved / (kernels[1] * 1e-6) / 1e12)
    assert bias["pass_of_copy"] == pytest.approx(bias["pass_tbps"] / copy)
    assert "slow-pass" in bias["flags"] and bias["pass_of_copy"] < 0.85
    assert 2.5 < bias["pass_tbps"] < copy  # an H200's HBM: the kernel times are microseconds
    assert cells[cells["provider"] != "unfused"]["pass_tbps"].isna().all()
    assert math.isnan(row(cells, "Quick", "DEFAULT", "unfused")["pass_tbps"])  # no pass at all


def test_each_kernels_time_is_its_median_over_the_recorded_calls_that_launched_the_same_kernels():
    gemm, row_sum = "sm90_xmma_gemm", "fusedbench_row_sum"
    calls = [
        [{"name": gemm, "us": 100.0}, {"name": row_sum, "us": 12.0}],
        [{"name": gemm, "us": 90.0}, {"name": row_sum, "us": 30.0}],
        [{"name": gemm, "us": 95.0}, {"name": "cupy_copy", "us": 1.0}, {"name": row_sum, "us": 11.0}],
        [{"name": gemm, "us": 97.0}, {"name": row_sum, "us": 10.0}],
    ]
    assert median_kernels(calls) == [{"name": gemm, "us": 97.0}, {"name": row_sum, "us": 12.0}]
    # The first call the odd one out: the list most calls launched is kept.
    assert median_kernels([calls[2], calls[0], calls[1], calls[3]]) == median_kernels(calls)


def test_a_pass_is_held_to_the_slower_of_the_copy_ceiling_and_a_copy_of_its_own_size():
    passes = pd.DataFrame(
        {
            "provider": "unfused",
            "kernels": pd.array([2, 2, 2, 2], dtype="Int64"),
            "regret_low": math.nan,
            "pass_tbps": [0.6, 0.6, 0.6, 3.8],
            "pass_of_copy": [0.6 / 4.2, 0.6 / 4.2, 0.6 / 4.2, 3.8 / 4.2],
            "same_size_copy_tbps": [0.65, 1.3, math.nan, math.nan],
        }
    )
    # 14% of the ceiling but 92% of what a copy of 8 MB reaches; 46% of it; no same-size copy; a big pass.
    assert list(flags(passes)) == ["", "slow-pass", "slow-pass", ""]


def test_the_same_size_copy_is_read_from_the_cells_record():
    key = CellKey("BGRADA", "fp16", 1024, 4096, 65536, "unfused", "m", "c")
    copied = Cell.measured(key, (1.0,))
    assert same_size_copy_tbps(copied) != same_size_copy_tbps(copied)  # NaN: no copy in the record
    copied = Cell(key, copied.status, samples=(1.0,), provenance={"same_size_copy": {"bytes": 8 << 20, "us": 10.0}})
    assert same_size_copy_tbps(copied) == pytest.approx((8 << 20) / 10e-6 / 1e12)
    broken = copied.to_json() | {"provenance": {"same_size_copy": {"bytes": 8 << 20, "us": 0}}}
    with pytest.raises(FormatError, match=r"cell\.provenance\.same_size_copy\.us: Input should be greater than 0"):
        cell_from_json(broken)  # a record that says so is refused where it is read, never a division by zero


def test_every_speedup_heatmap_shares_one_colour_range_and_greys_the_cells_it_cannot_tell_from_1x(results):
    from fusedbench.analysis.speedups import headline, indistinct
    from fusedbench.report.figures import GREY_NAME, SPEEDUP_LOG2_RANGE, epilog_cost_figure, speedup_heatmap

    table = speedups(results.cells, results.detail)
    seen = 0
    for baseline in ("textbook", "unfused"):
        figure = speedup_heatmap(table, machine=MACHINE, dtypes=["fp16"], baseline=baseline)
        (colours,) = [trace for trace in figure.data if trace.name == f"over_{baseline}"]
        assert (colours.zmin, colours.zmax) == (-SPEEDUP_LOG2_RANGE, SPEEDUP_LOG2_RANGE)
        assert list(colours.colorbar.ticktext) == ["0.5x or less", "0.71x", "1x", "1.41x", "2x or more"]
        unclear = table[indistinct(table, baseline)]
        expected = set(zip(unclear["epilog"], unclear["shape"], strict=True))
        greyed = set()
        if len(figure.data) > 1:
            (cover,) = [trace for trace in figure.data if trace.name == GREY_NAME]
            greyed = {
                (epilog, shape)
                for epilog, row in zip(cover.y, cover.z, strict=True)
                for shape, value in zip(cover.x, row, strict=True)
                if value is not None
            }
            for i, epilog in enumerate(cover.y):
                for j, shape in enumerate(cover.x):
                    grey = (epilog, shape) in greyed
                    assert (colours.z[i][j] is None) == grey  # no colour of its own: the grey shows
                    assert (cover.customdata[i][j] is not None) == grey  # the cover carries its hover
                    assert colours.text[i][j] != ""  # its value still written
        assert greyed == expected
        seen += len(greyed)
    assert seen == 4  # at the seed shape: 3 over unfused (DEFAULT, GELU_AUX_BIAS, RELU_BIAS), 1 over textbook
    # The headline counts an inversion only where it is told apart from 1x: GELU_AUX_BIAS (0.954, its interval
    # [0.946, 1.028]) is not one; DRELU_BGRAD (0.924 [0.908, 0.961]) is.
    (row,) = headline(results.cells, table, MACHINE).to_dict("records")
    assert row["fused < 0.95x unfused, told apart"] == "1 of 5"  # DRELU_BGRAD, 0.924 [0.908, 0.961]
    # Below 0.95 but with an interval reaching 1x: not counted; wholly below: counted.
    gelu = table["epilog"] == "GELU_AUX_BIAS"
    moved = table.assign(over_unfused=table["over_unfused"].where(~gelu, 0.94))
    (row,) = headline(results.cells, moved, MACHINE).to_dict("records")
    assert row["fused < 0.95x unfused, told apart"] == "1 of 5"
    moved.loc[gelu, "over_unfused_high"] = 0.97
    (row,) = headline(results.cells, moved, MACHINE).to_dict("records")
    assert row["fused < 0.95x unfused, told apart"] == "2 of 5"
    drawn = epilog_cost_figure(table.assign(epilog_cost=-0.003), machine=MACHINE, dtypes=["fp16"]).data
    (cost,) = [trace for trace in drawn if trace.name == "cost_pct"]  # the values, over the grey cover
    assert (cost.zmin, cost.zmax) == (0, 40) and {label.rstrip("*") for row in cost.text for label in row} == {"+0%"}
    # the cells whose fused call launched more than one kernel, and only those, carry the mark
    multi = table[table["fused_kernels"] > 1]
    marked = {
        (epilog, shape)
        for epilog, row in zip(cost.y, cost.text, strict=True)
        for shape, label in zip(cost.x, row, strict=True)
        if label.endswith("*")
    }
    assert marked == set(zip(multi["epilog"], multi["shape"], strict=True)) and marked
    # the report's heatmaps greyed: fused over unfused, over the textbook, and the epilog's cost
    assert render_report(results).count('"name":"interval includes 1x"') == 3


def test_the_blog_control_stays_out_of_the_ladders_speedups_and_report(results):
    table = speedups(results.cells)
    assert "blog" not in table.columns
    relu_bias = table[table["epilog"] == "RELU_BIAS"].iloc[0]
    assert relu_bias["textbook"] == pytest.approx(row(results.cells, "Quick", "RELU_BIAS", "textbook")["time_s"])
    page = render_report(results)  # two textbook cells of one workload: the ladder draws the Quick group's
    assert re.findall(r"<h2 id='([^']+)'>", page) == ["headline", "contents", "glossary", MACHINE]
    headline = page[page.index("<h2 id='headline'>") : page.index("<h2 id='contents'>")]
    assert "<td class=n>28</td>\n      <td class=n>2</td>" in headline  # Quick's 28 ok, 2 unsupported: no Blog


def test_a_run_with_a_workload_in_two_groups_compares_with_itself(results):
    run = select_run(results, MACHINE, None)
    comparison = compare_runs(run, run, preset_for(MACHINE, "quick")[0])
    textbook = comparison.cells[
        (comparison.cells["provider"] == "textbook") & (comparison.cells["epilog"] == "RELU_BIAS")
    ]
    assert set(textbook["group"]) == {"Blog", "Quick"}
    assert {verdict.value for verdict in comparison.cells["verdict"]} == {"same"}


def test_a_cells_history_reads_the_ladder_not_the_control(results):
    key = {"epilog": "RELU_BIAS", "dtype": "fp16", "m": SEED[0], "k": SEED[1], "n": SEED[2], "provider": "textbook"}
    flipped = ResultSet(  # the control's rows last, where a plain lookup would take them
        cells=results.cells.iloc[::-1],
        ceilings=results.ceilings,
        records=results.records,
        problems=[],
        detail=results.detail.iloc[::-1],
    )
    for read in (results, flipped):
        (time,) = cell_series(read, MACHINE, key)["time_s"]
        assert time == pytest.approx(row(results.cells, "Quick", "RELU_BIAS", "textbook")["time_s"])
    (blog_time,) = cell_series(results, MACHINE, key | {"group": "Blog"})["time_s"]
    assert blog_time == pytest.approx(row(results.cells, "Blog", "RELU_BIAS", "textbook")["time_s"])


def test_a_run_with_quick_and_default_groups_keeps_one_group_per_workload_for_the_ladder(results):
    """A quick and a default run at one commit time the same fp16 seed workloads in Quick and Fp16Seed: the
    ladder (report figures, speedups) takes the larger group's cells, never both, and never the Blog control."""
    from fusedbench.analysis.speedups import ladder_cells

    cells = results.cells
    quick = cells[cells["group"] == "Quick"]
    default = pd.concat([quick.assign(group="Fp16Seed"), quick.assign(group="Fp16Seed", m=quick["m"] // 2)])
    both = pd.concat([cells, default], ignore_index=True)
    ladder = ladder_cells(both)
    assert set(ladder["group"]) == {"Fp16Seed"} and len(ladder) == len(default)
    assert not ladder.duplicated(["epilog", "m", "k", "n", "provider"]).any()
    assert len(speedups(both)) == 2 * len(quick) // 6  # each workload once, its six providers in one row
    other = both.assign(
        commit=["x" * 40 if g == "Quick" else c for g, c in zip(both["group"], both["commit"], strict=True)]
    )
    assert set(ladder_cells(other)["group"]) == {"Quick", "Fp16Seed"}  # another commit: another run
