"""The peers figures in docs/findings are what each GPU's peers-suite run under the burst lead-in gives (fcf16cf,
every group at one commit): each table's H100 and H200 columns and the prose's figures, recomputed from the committed
results (no GPU). The prose words a figure differently on each GPU: PHRASES holds those wordings."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import finding

from fusedbench.analysis.advice import Advice, advise
from fusedbench.analysis.speedups import peer_ratio_column, peers_speedups, speedup_column
from fusedbench.catalog.suites import SUITES
from fusedbench.regressions.thresholds import cell_class
from fusedbench.report.peers import in_peers_suite, peer_rows, two_pass_rows
from fusedbench.results.loader import load_results

ROOT = Path(__file__).resolve().parents[1]
RUN = "fcf16cf0"
AA_RUN = "7479c6f4"  # run 2 of the H100's first peers A/A pair: 15 of the suite's groups
LATEST_AA_RUN = "57d8a237"  # the H200's second peers run (every group), the H100's (the two membound Compiled groups)
GPUS = {"H100": "h100-80gb-hbm3", "H200": "h200-141gb"}
DERIVATIVES = ("DRELU", "DGELU", "DRELU_BGRAD", "DGELU_BGRAD")
SEED = "(65536,16384)x(16384,8192)"


# Where the findings page words a figure differently on each GPU: its wording there, figures in braces.
PHRASES = {
    "H100": {
        "triton gemm": "{seed} cuBLASLt's time at the seed shape and up to {worst}x at K = 256 on the H100",
        "triton backward": "by {gains} on the H100 (and cuBLASLt's bf16 DRELU by {drelu}x)",
        "triton wins": "at bf16 DRELU: on all four of the H100's memory-bound shapes, by up to {best}",
        "templates": "in {fp16} of the {cells} cells at fp16 and at bf16 alike on the H100",
        "compile backward": "on the H100 {faster} faster than cuBLASLt's fused backward and {beside} of `unfused`'s",
        "compile wins": "on the H100 at DRELU_BGRAD (3 of the 5 shapes at fp16 and at bf16, by up to {fp16} and {bf16} "
        "at (16384,256)x(256,16384)), and by 1% or less at fp16 DGELU (4 shapes), bf16 DRELU (2), fp16 BGRADA and bf16 "
        "BGRADB (one each)",
        "nvcc": "at fcf16cf {low}-{high} s, median {median} s, on the H100 machine's cores",
        "einsum": "four kernels, {einsum} TFLOP/s on the H100",
        "fused tflops": "where fused fp16 reaches {fused} and",
        "cutlass gemm": "{ratio}x cuBLASLt's time on the H100 at fcf16cf, {cutlass-evt_fp16} ms against "
        "{fused_fp16} ms at fp16, {cutlass-evt_bf16} against {fused_bf16} at bf16",
        "cutlass dgelu": "(H100 fp16, (8192,256)x(256,65536): {cutlass-evt} ms against fused's {fused} and unfused's "
        "{unfused};",
        "fused walkthrough": "took {ms} ms on the H100",
    },
    "H200": {
        "triton gemm": "({seed} and up to {worst}x on the H200)",
        "triton backward": "by {gains} on the H200 ({drelu}x)",
        "triton wins": "and on one of the H200's, by {best}",
        "templates": "and in {fp16} and {bf16} on the H200",
        "compile backward": "on the H200 {faster} faster and {beside})",
        "compile wins": "on the H200 at DRELU_BGRAD (3 of the 5 shapes at fp16 and at bf16, by up to {fp16} and {bf16} "
        "at (16384,256)x(256,16384)), and by 1% or less at bf16 DRELU (4 shapes), fp16 DGELU_BGRAD (2), fp16 "
        "BGRADA, bf16 BGRADA, bf16 BGRADB and bf16 DGELU_BGRAD (one each)",
        "nvcc": "{low}-{high} s, median {median} s, on the H200 machine's)",
        "einsum": "and {einsum} on the H200 at (16384,256)x(256,16384)",
        "fused tflops": "and {fused}, under burst)",
        "cutlass gemm": "{ratio}x on the H200 at fcf16cf, {cutlass-evt_fp16} ms against {fused_fp16} ms at fp16, "
        "{cutlass-evt_bf16} against {fused_bf16} at bf16",
        "cutlass dgelu": "H200 fp16, the same shape: {cutlass-evt} ms against fused's {fused} and unfused's {unfused},",
        "fused walkthrough": "and {ms} ms on the H200",
    },
}
# Where each GPU's triton and torch-compile beat both fused and unfused, told apart (the page's prose names them)
WINNERS = {
    "H100": {
        "triton": [["bf16", "DRELU", "4 of 5"]],
        "torch-compile": [
            ["bf16", "BGRADB", "1 of 5", "1.01x at (8192,256)x(256,65536)"],
            ["bf16", "DRELU", "2 of 5", "1.00x at (16384,512)x(512,16384)"],
            ["bf16", "DRELU_BGRAD", "3 of 5", "1.10x at (16384,256)x(256,16384)"],
            ["fp16", "BGRADA", "1 of 5", "1.01x at (16384,256)x(256,16384)"],
            ["fp16", "DGELU", "4 of 5", "1.01x at (16384,256)x(256,16384)"],
            ["fp16", "DRELU_BGRAD", "3 of 5", "1.09x at (16384,256)x(256,16384)"],
        ],
    },
    "H200": {
        "triton": [["bf16", "DRELU", "1 of 5"]],
        "torch-compile": [
            ["bf16", "BGRADA", "1 of 5", "1.01x at (32768,1024)x(1024,16384)"],
            ["bf16", "BGRADB", "1 of 5", "1.01x at (8192,256)x(256,65536)"],
            ["bf16", "DGELU_BGRAD", "1 of 5", "1.00x at (16384,256)x(256,16384)"],
            ["bf16", "DRELU", "4 of 5", "1.01x at (16384,512)x(512,16384)"],
            ["bf16", "DRELU_BGRAD", "3 of 5", "1.17x at (16384,256)x(256,16384)"],
            ["fp16", "BGRADA", "1 of 5", "1.01x at (16384,256)x(256,16384)"],
            ["fp16", "DGELU_BGRAD", "2 of 5", "1.01x at (16384,256)x(256,16384)"],
            ["fp16", "DRELU_BGRAD", "3 of 5", "1.10x at (16384,256)x(256,16384)"],
        ],
    },
}


@pytest.fixture(scope="module", params=list(GPUS))
def peers(request, tmp_path_factory):
    """One GPU's run: its cells, its peers table (each peer's ratios per workload), its records and the GPU."""
    machine = GPUS[request.param]
    target = tmp_path_factory.mktemp("burst-peers") / "results"
    (target / machine).mkdir(parents=True)
    shutil.copy(ROOT / "results" / "benchmarks.json", target)
    shutil.copy(ROOT / "results" / machine / "machine.json", target / machine)
    for path in (ROOT / "results" / machine).glob(f"{RUN}-*"):
        shutil.copy(path, target / machine)
    results = load_results(str(target))
    cells = results.cells[in_peers_suite(results.cells)]
    return cells, peers_speedups(cells, results.detail.loc[cells.index]), results, request.param


def _page() -> str:
    """The dated findings page the peers figures moved to from the README."""
    return finding("peers-under-burst", folded=False)


def _says(gpu: str, phrase: str, **figures) -> None:
    """The findings page (its whitespace folded) words this GPU's figures as PHRASES gives them."""
    wording = PHRASES[gpu][phrase].format(**figures)
    assert wording in " ".join(_page().split()), wording


def _columns(gpu: str, row: list[str], width: int = 2) -> list[str]:
    """A table row's cells for this GPU: each block of columns has the H100's `width` first, then the H200's."""
    start = 0 if gpu == "H100" else width
    return [cell for block in range(0, len(row), 2 * width) for cell in row[block + start : block + start + width]]


def _page_table(header: str) -> dict[str, list[str]]:
    """The findings page's table whose header row starts with `header`: its rows' cells by their first cell."""
    lines = _page().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def _x(value: float) -> str:
    """A ratio as the findings page writes it: three significant figures, two decimals below 10x."""
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _span(values: pd.Series) -> str:
    low, high = _x(values.min()), _x(values.max())
    return f"{low}x" if low == high else f"{low}-{high}x"


def _medians(table: pd.DataFrame, dtype: str, column: str) -> pd.Series:
    """Per epilog, the median over the shapes of a ratio column."""
    part = table[table["dtype"] == dtype].dropna(subset=[column])
    return part.groupby("epilog")[column].median()


def _pair(medians: pd.Series, first: str, second: str) -> str:
    return f"{_x(medians[first])}x / {_x(medians[second])}x"


def triton_columns(cells, table, results) -> dict[str, list[str]]:
    """The triton table's fp16 and bf16 cells, by row."""
    over_fused, over_unfused = speedup_column("triton"), peer_ratio_column("triton")
    expected = {}
    for dtype in ("fp16", "bf16"):
        fused, unfused = _medians(table, dtype, over_fused), _medians(table, dtype, over_unfused)
        expected.setdefault("triton over fused, the 12 epilogs without a derivative", []).append(
            _span(fused.drop(list(DERIVATIVES)))
        )
        expected.setdefault("triton over fused, DRELU / DGELU", []).append(_pair(fused, "DRELU", "DGELU"))
        for label, medians in (("over fused", fused), ("over unfused", unfused)):
            expected.setdefault(f"triton {label}, DRELU_BGRAD / DGELU_BGRAD", []).append(
                _pair(medians, "DRELU_BGRAD", "DGELU_BGRAD")
            )
    control = two_pass_rows(cells, results.detail.loc[cells.index])
    two_over_one = control["two passes / one pass"].str.split("x").str[0].astype(float)
    expected["two passes over one pass (`TwoPass`, fp16 membound)"] = [_span(two_over_one), ""]
    return expected


def test_the_triton_tables_columns_are_the_burst_runs(peers):
    gpu = peers[3]
    expected = triton_columns(*peers[:3])
    shown = _page_table("| | H100 fp16 | H100 bf16 | H200 fp16 | H200 bf16 |")
    assert {label: _columns(gpu, shown[label]) for label in expected} == expected


def test_the_triton_prose_gives_the_burst_runs_figures(peers):
    cells, table, _, gpu = peers
    plain = table[(table["epilog"] == "DEFAULT")].set_index(["dtype", "shape"])["over_triton"]
    _says(gpu, "triton gemm", seed=_span(plain.xs(SEED, level="shape")), worst=_x(plain.max()))
    assert plain.idxmax()[1].startswith("(16384,256)")
    backward = [_medians(table, d, "over_triton")[["DRELU_BGRAD", "DGELU_BGRAD"]] for d in ("fp16", "bf16")]
    bf16_drelu = 1 / _medians(table, "bf16", "over_triton")["DRELU"]
    _says(gpu, "triton backward", gains=_span(1 / pd.concat(backward)), drelu=_x(bf16_drelu))
    rows = peer_rows(table, cells, "triton")
    winners = rows[~rows["beats both"].str.startswith("0 of")]
    assert winners[["dtype", "epilog", "beats both"]].values.tolist() == WINNERS[gpu]["triton"]
    _says(gpu, "triton wins", best=winners["best win"].item().split(" at ")[0])  # "1.21x at (8192,256)x(256,65536)"


def torch_compile_columns(cells, table, results) -> dict[str, list[str]]:
    """The torch-compile table's cells, by row: over fused at fp16 and bf16, then over unfused."""
    rows = {
        "DEFAULT, BIAS, BGRADA, BGRADB": ["DEFAULT", "BIAS", "BGRADA", "BGRADB"],
        "RELU, RELU_AUX, RELU_BIAS, RELU_AUX_BIAS": ["RELU", "RELU_AUX", "RELU_BIAS", "RELU_AUX_BIAS"],
        "GELU, GELU_AUX, GELU_BIAS, GELU_AUX_BIAS": ["GELU", "GELU_AUX", "GELU_BIAS", "GELU_AUX_BIAS"],
    }
    expected = {}
    for column in (speedup_column("torch-compile"), peer_ratio_column("torch-compile")):
        for dtype in ("fp16", "bf16"):
            medians = _medians(table, dtype, column)
            for label, epilogs in rows.items():
                expected.setdefault(label, []).append(_span(medians[epilogs]))
            expected.setdefault("DRELU / DGELU", []).append(_pair(medians, "DRELU", "DGELU"))
            expected.setdefault("DRELU_BGRAD / DGELU_BGRAD", []).append(_pair(medians, "DRELU_BGRAD", "DGELU_BGRAD"))
    return expected


def test_the_torch_compile_tables_columns_are_the_burst_runs(peers):
    gpu = peers[3]
    expected = torch_compile_columns(*peers[:3])
    shown = _page_table("| epilogs | over fused: H100 fp16 |")
    assert {label: _columns(gpu, shown[label]) for label in expected} == expected
    # the plain GEMM is cuBLAS's in both: under burst the same kernel times the same (back to back 1.04-1.21x)
    assert expected["DEFAULT, BIAS, BGRADA, BGRADB"][:2] == ["1.00-1.02x", "0.99-1.00x"]


def test_the_torch_compile_prose_gives_the_burst_runs_figures(peers):
    cells, table, _, gpu = peers
    text = " ".join(_page().split())
    compiled = cells[(cells["provider"] == "torch-compile") & (cells["status"] == "ok")]
    templates = compiled[compiled["kernel_names"].str.contains("triton_tem")]
    counts = {d: len(templates[templates.dtype == d]) for d in ("fp16", "bf16")}
    assert len(compiled) == 160 and set(templates["epilog"].str.startswith("RELU")) == {True}
    assert set(templates["m"]) <= {8192, 16384, 32768}  # the memory-bound shapes
    _says(gpu, "templates", cells=80, **counts)
    backward = table[table["epilog"].isin(["DRELU_BGRAD", "DGELU_BGRAD"])].groupby(["dtype", "epilog"])
    faster = 1 / backward["over_torch-compile"].median()
    _says(gpu, "compile backward", faster=_span(faster), beside=_span(backward["torch-compile_over_unfused"].median()))
    membound = compiled["m"] != 65536
    medians = compiled.groupby(["dtype", membound])["compile_s"].median().round(1)
    autotune = compiled.groupby(["dtype", membound])["autotune_s"].median().round(1)
    figures = (
        f"an fp16 cell took a median of {medians['fp16', True]} s at the membound shapes and "
        f"{medians['fp16', False]} s at the seed shape, a bf16 cell {medians['bf16', True]} s and "
        f"{medians['bf16', False]} s (up to {compiled['compile_s'].max():.0f} s for a group's first), autotuning "
        f"{autotune.min()}-{autotune.max()} s of that"
    )
    assert figures in text
    rows = peer_rows(table, cells, "torch-compile")
    winners = rows[~rows["beats both"].str.startswith("0 of")]
    assert winners[["dtype", "epilog", "beats both", "best win"]].values.tolist() == WINNERS[gpu]["torch-compile"]
    drelu_bgrad = winners[winners["epilog"] == "DRELU_BGRAD"].set_index("dtype")["best win"].str.split(" at ").str[0]
    _says(gpu, "compile wins", **drelu_bgrad)
    records = {r.group: round(r.seconds) for r in peers[2].records if r.group.endswith("Compiled")}
    order = ["Fp16SeedCompiled", "Fp16MemboundCompiled", "Bf16SeedCompiled", "Bf16MemboundCompiled"]
    assert "the groups took {} s, {} s, {} s and {} s".format(*(records[g] for g in order)) in text
    total = sum(r.seconds for r in peers[2].records if r.group in SUITES["peers"])
    assert f"its groups' own seconds {total:,.0f}, of them {sum(records.values()):,} in the four `Compiled`" in text


def test_the_cutlass_table_columns_are_the_burst_runs(peers):
    cells, table, _, gpu = peers
    shown = _page_table("| epilog | over fused: H100 fp16 |")
    by_dtype = {
        d: peer_rows(table, cells, "cutlass-evt").query("dtype == @d").set_index("epilog") for d in ("fp16", "bf16")
    }
    assert set(shown) == set(by_dtype["fp16"].index) == set(by_dtype["bf16"].index)
    for epilog, row in shown.items():
        mine = [by_dtype[d].loc[epilog, "cutlass-evt / fused"] for d in ("fp16", "bf16")]
        mine += [by_dtype[d].loc[epilog, "cutlass-evt / unfused"] for d in ("fp16", "bf16")]
        assert _columns(gpu, row[:8]) == mine, epilog
        counts = {d: by_dtype[d].loc[epilog, ["beats both", "best win"]] for d in ("fp16", "bf16")}
        wins = [
            f"{gpu} {d}: {count}, up to {best.split(' at ')[0]}"
            for d, (count, best) in counts.items()
            if not count.startswith("0 of")
        ]
        listed = [part for part in row[8].split("; ") if part.startswith(gpu)]
        assert listed == wins, epilog


def test_the_cutlass_prose_gives_the_burst_runs_figures(peers):
    cells, table, _, gpu = peers
    mine = cells[cells["group"].str.endswith("Cutlass")].assign(ms=cells["time_s"] * 1e3)
    best = mine[(mine["dtype"] == "fp16") & (mine["epilog"] == "DGELU") & (mine["m"] == 8192)].set_index("provider").ms
    _says(gpu, "cutlass dgelu", **{provider: f"{ms:.3f}" for provider, ms in best.items()})
    nvcc = cells.loc[cells["provider"] == "cutlass-evt", "compile_s"]
    _says(gpu, "nvcc", low=f"{nvcc.min():.0f}", high=f"{nvcc.max():.0f}", median=f"{nvcc.median():.0f}")
    k = table.dropna(subset=["over_cutlass-evt"])["shape"].str.extract(r"\(\d+,(\d+)\)x")[0].astype(int)
    forward = table.loc[k.index, "epilog"].isin(
        ["RELU", "BIAS", "RELU_BIAS", "GELU", "GELU_AUX", "GELU_BIAS", "GELU_AUX_BIAS"]
    )
    beside_unfused = table.loc[k.index, "cutlass-evt_over_unfused"]
    aux = table.loc[k.index, "epilog"].isin(["GELU_AUX", "GELU_AUX_BIAS"]) & k.isin([256, 512])
    text = " ".join(_page().split())
    for ratios in (
        beside_unfused[forward & k.isin([256, 512])],  # it beats unfused where K is 256 or 512
        beside_unfused[forward & (k == 1024)],  # about even
        beside_unfused[forward & (k == 16384)],  # it loses at the seed shape
        table.loc[k.index, "over_cutlass-evt"][aux],  # storing GELU's pre-activation
    ):
        assert f"{_span(ratios)} on the {gpu}" in text
    seed = cells[(cells["m"] == 65536) & (cells["epilog"] == "DEFAULT") & cells["group"].str.endswith("Cutlass")]
    ms = seed.set_index(["dtype", "provider"])["time_s"] * 1e3
    ratio = _span(ms.xs("cutlass-evt", level="provider") / ms.xs("fused", level="provider")).rstrip("x")
    shown = {f"{provider}_{dtype}": f"{value:.2f}" for (dtype, provider), value in ms.items()}
    _says(gpu, "cutlass gemm", ratio=ratio, **shown)


def walkthrough_columns(cells, table, results) -> dict[str, list[str]]:
    """The walkthrough table's fp16 and fp32 cells, by row."""
    forward = ["RELU", "BIAS", "RELU_BIAS", "GELU_BIAS", "RELU_AUX_BIAS"]
    expected = {}
    for dtype in ("fp16", "fp32"):
        einsum = _medians(table, dtype, "over_einsum")
        expected.setdefault("einsum, DEFAULT (5 shapes)", []).append(f"{_x(einsum['DEFAULT'])}x")
        expected.setdefault("einsum, the five epilogs with work after the product", []).append(_span(einsum[forward]))
        for rung, label in (
            ("numba-tiled", "(3 membound shapes)"),
            ("numba-naive", "(one shape, (16384,256)x(256,16384))"),
        ):
            expected.setdefault(f"{rung} {label}", []).append(_span(_medians(table, dtype, f"over_{rung}")))
    return expected


def test_the_walkthrough_tables_columns_are_the_burst_runs(peers):
    cells, gpu = peers[0], peers[3]
    expected = walkthrough_columns(*peers[:3])
    shown = _page_table("| | H100 fp16 | H100 fp32 | H200 fp16 | H200 fp32 |")
    assert {label: _columns(gpu, shown[label]) for label in expected} == expected
    # beside the numba rungs fused fp16 DEFAULT at (16384,256)x(256,16384) took up to twice as long back to back
    fused = cells[(cells["provider"] == "fused") & (cells["dtype"] == "fp16") & (cells["epilog"] == "DEFAULT")]
    fused = fused[(fused["m"] == 16384) & (fused["k"] == 256) & (fused["group"] == "Fp16MemboundWalkthrough")]
    _says(gpu, "fused walkthrough", ms=f"{fused.time_s.item() * 1e3:.3f}")
    _says(gpu, "fused tflops", fused=f"{fused.tflops.item():.0f}")
    einsum = cells[
        (cells["provider"] == "einsum")
        & (cells["dtype"] == "fp16")
        & (cells["epilog"] == "DEFAULT")
        & (cells["m"] == 16384)
        & (cells["k"] == 256)
    ]
    _says(gpu, "einsum", einsum=f"{einsum.tflops.item():.0f}")


def test_the_run_is_the_whole_peers_suite(peers):
    cells, _, results, _ = peers
    records = [r for r in results.records if r.group in SUITES["peers"]]
    assert sorted(r.group for r in records) == sorted(SUITES["peers"]) and len(cells) == 2216


# Each GPU's newest back-to-back run of each peers group before the burst run (triton, torch-compile fp16 and bf16,
# cutlass-evt, the walkthrough; on the H200 one commit held the walkthrough and torch-compile fp16).
BACK_TO_BACK = {
    "H100": ("28888e2", "cad4196", "a69b4db", "6006c05", "6158b61"),
    "H200": ("28888e2", "6158b61", "03af6f8", "6006c05"),
}


@pytest.fixture(scope="module")
def committed(committed_results):
    """Every committed result: the back-to-back runs to compare, and each class's newest run for the advice."""
    return committed_results


@pytest.mark.parametrize("gpu", GPUS)
def test_the_docs_table_of_quieter_cells_is_the_runs(committed, gpu):
    cells = committed.cells
    cells = cells[(cells["machine"] == GPUS[gpu]) & in_peers_suite(cells) & (cells["status"] == "ok")]
    back = BACK_TO_BACK[gpu]
    run = cells["commit"].str[:7].map(lambda c: "burst" if RUN.startswith(c) else "back" if c in back else "")
    cells = cells.assign(run=run, size=cells["time_s"].map(cell_class))[run != ""]
    spread = cells.groupby(["size", "run"])["rel_iqr"]
    docs = finding("peers-under-burst")
    for size, label in (("large", "large (>= 5 ms)"), ("medium", "medium (1-5 ms)"), ("small", "small (< 1 ms)")):
        counts = spread.size()[size]
        medians, high = spread.median()[size] * 100, spread.quantile(0.95)[size] * 100
        row = (
            f"| {gpu} | {label} | {counts['back']} / {counts['burst']} | {medians['back']:.2f}% "
            f"| {medians['burst']:.2f}% | {high['back']:.2f}% | {high['burst']:.2f}% |"
        )
        assert row in docs
        assert 4 <= round(high["back"] / high["burst"]) <= 15  # "the 95th percentile falls 4-15 fold"


def test_the_advice_names_the_peers_the_findings_name(committed):
    policy = advise(committed, list(GPUS.values())).assign(gpu=lambda p: p["machine"].map(_gpu_of))
    named = policy[~policy["advice"].isin([advice.value for advice in Advice])]
    # the newest runs: on the H100 15 groups from its A/A pair (AA_RUN), the membound Compiled ones from LATEST_AA_RUN;
    # on the H200 every group from LATEST_AA_RUN
    assert set(",".join(named["commit"]).split(",")) == {AA_RUN, LATEST_AA_RUN}
    membound, seed = named[named["shape_class"] == "membound"], named[named["shape_class"] == "seed"]
    assert len(membound) + len(seed) == len(named)
    faster = {(r.gpu, r.dtype, r.epilog, r.advice): round((r.ratio - 1) * 100) for r in membound.itertuples()}
    assert set(faster) == {("H200", dtype, "DRELU_BGRAD", "torch-compile") for dtype in ("fp16", "bf16")} | {
        ("H100", "bf16", "DRELU", "triton"),
        ("H200", "fp16", "DGELU", "cutlass-evt"),
    }
    compiled = sorted(v for k, v in faster.items() if k[3] == "torch-compile")
    h100 = policy[(policy["gpu"] == "H100") & (policy["epilog"] == "DRELU_BGRAD")]
    h100 = h100[h100["shape_class"] == "membound"]
    assert set(h100["advice"]) == {"unfused"} and set(h100["commit"]) == {AA_RUN}  # torch-compile not told apart
    (at_seed,) = seed.itertuples()
    assert (at_seed.gpu, at_seed.dtype, at_seed.epilog, at_seed.advice) == (
        "H200",
        "bf16",
        "RELU_AUX_BIAS",
        "torch-compile",
    )
    over_fused = re.search(r"is (\d+%) faster than fused \(the ladder's advice\); fusion within the noise", at_seed.why)
    text = " ".join(_page().split())
    assert (
        "names a peer in five classes. Four are at the memory-bound shapes, each where the ladder's advice is "
        f"unfused: torch-compile for DRELU_BGRAD at fp16 and bf16 on the H200 ({compiled[0]}-{compiled[1]}% faster "
        f"than unfused), triton for bf16 DRELU on the H100 ({faster['H100', 'bf16', 'DRELU', 'triton']}%), "
        f"cutlass-evt for fp16 DGELU on the H200 ({faster['H200', 'fp16', 'DGELU', 'cutlass-evt']}%). On the H100 "
        "torch-compile's DRELU_BGRAD, 1-2% faster than unfused at fcf16cf, is not told apart from unfused by more "
        f"than 1% in its newest run ({LATEST_AA_RUN[:7]}), so unfused stands there. One is at the seed shape, where "
        "the advice is fuse: "
        f"torch-compile for bf16 RELU_AUX_BIAS on the H200 ({over_fused[1]} faster than fused"
    ) in text
    assert set(membound["why"].str.contains("faster than unfused \\(the ladder's advice\\)")) == {True}
    dgelu = policy[(policy["dtype"] == "fp16") & (policy["epilog"] == "DGELU") & (policy["shape_class"] == "membound")]
    why = dgelu.set_index("gpu")["why"]
    assert dgelu.set_index("gpu")["advice"].to_dict() == {"H100": "fuse-autotuned", "H200": "cutlass-evt"}
    saves, slower = (
        re.search(r"fusion saves (\d+%)", why["H100"])[1],
        re.search(r"fused is (\d+%) slower", why["H200"])[1],
    )
    assert f"the H100 cuBLASLt's fused DGELU autotuned (fusion saves {saves})" in text
    assert f"on the H200 even the autotuned call is {slower} slower than the GEMM and one pass" in text


def _gpu_of(machine: str) -> str:
    return next(gpu for gpu, name in GPUS.items() if name == machine)
