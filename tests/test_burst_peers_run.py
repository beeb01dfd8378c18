"""The README's peers figures for the H100 are what its peers-suite run under the burst lead-in gives (fcf16cf, every
group at one commit): each table's H100 columns and the prose's H100 figures, recomputed from the committed results
(no GPU). The H200's columns come from its earlier back-to-back runs, which test_report_peers reads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from fusedbench.analysis.speedups import peer_ratio_column, peers_speedups, speedup_column
from fusedbench.catalog.suites import SUITES
from fusedbench.regressions.thresholds import cell_class
from fusedbench.report.peers import in_peers_suite, peer_rows, two_pass_rows
from fusedbench.results.loader import load_results

ROOT = Path(__file__).resolve().parents[1]
MACHINE, RUN = "h100-80gb-hbm3", "fcf16cf0"
DERIVATIVES = ("DRELU", "DGELU", "DRELU_BGRAD", "DGELU_BGRAD")
SEED = "(65536,16384)x(16384,8192)"


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    """The run's cells, its peers table (each peer's ratios per workload) and its records."""
    target = tmp_path_factory.mktemp("burst-peers") / "results"
    (target / MACHINE).mkdir(parents=True)
    shutil.copy(ROOT / "results" / "benchmarks.json", target)
    shutil.copy(ROOT / "results" / MACHINE / "machine.json", target / MACHINE)
    for path in (ROOT / "results" / MACHINE).glob(f"{RUN}-*"):
        shutil.copy(path, target / MACHINE)
    results = load_results(str(target))
    cells = results.cells[in_peers_suite(results.cells)]
    return cells, peers_speedups(cells, results.detail.loc[cells.index]), results


def _readme() -> str:
    return (ROOT / "README.md").read_text()


def _readme_table(header: str) -> dict[str, list[str]]:
    """The README table whose header row starts with `header`: its rows' cells by their first cell."""
    lines = _readme().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def _x(value: float) -> str:
    """A ratio as the README writes it: three significant figures, two decimals below 10x."""
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
    """The triton table's H100 fp16 and bf16 cells, by row."""
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


def test_the_triton_tables_h100_columns_are_the_burst_runs(peers):
    expected = triton_columns(*peers)
    readme = _readme_table("| | H100 fp16 | H100 bf16 | H200 fp16 | H200 bf16 |")
    assert {label: readme[label][:2] for label in expected} == expected
    assert expected["triton over fused, DRELU / DGELU"] == ["1.09x / 1.06x", "0.37x / 1.46x"]


def test_the_triton_prose_gives_the_burst_runs_figures(peers):
    _, table, _ = peers
    text = " ".join(_readme().split())
    plain = table[(table["epilog"] == "DEFAULT")].set_index(["dtype", "shape"])["over_triton"]
    seed, worst = plain.xs(SEED, level="shape"), plain.max()
    assert f"{_span(seed)} cuBLASLt's time at the seed shape and up to {_x(worst)}x at K = 256" in text
    assert plain.idxmax()[1].startswith("(16384,256)")
    backward = [_medians(table, d, "over_triton")[["DRELU_BGRAD", "DGELU_BGRAD"]] for d in ("fp16", "bf16")]
    gains = 1 / pd.concat(backward)
    bf16_drelu = 1 / _medians(table, "bf16", "over_triton")["DRELU"]
    assert f"by {_span(gains)} (and cuBLASLt's bf16 DRELU by {_x(bf16_drelu)}x)" in text
    rows = peer_rows(table, peers[0], "triton")
    winners = rows[~rows["beats both"].str.startswith("0 of")]
    assert winners[["dtype", "epilog", "beats both"]].values.tolist() == [["bf16", "DRELU", "4 of 5"]]
    best = winners["best win"].item()  # "1.21x at (8192,256)x(256,65536)"
    assert f"at bf16 DRELU on all four of the H100's memory-bound shapes, by up to {best.split(' at ')[0]}" in text


def torch_compile_columns(cells, table, results) -> dict[str, list[str]]:
    """The torch-compile table's H100 cells, by row: over fused at fp16 and bf16, then over unfused."""
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


def test_the_torch_compile_tables_h100_columns_are_the_burst_runs(peers):
    expected = torch_compile_columns(*peers)
    readme = _readme_table("| epilogs | over fused: H100 fp16 |")
    assert {label: readme[label][:2] + readme[label][4:6] for label in expected} == expected
    # the plain GEMM is cuBLAS's in both: under burst the same kernel times the same (back to back 1.10-1.21x)
    assert expected["DEFAULT, BIAS, BGRADA, BGRADB"][:2] == ["1.00-1.02x", "0.99-1.00x"]


def test_the_torch_compile_prose_gives_the_burst_runs_figures(peers):
    cells, table, _ = peers
    text = " ".join(_readme().split())
    compiled = cells[(cells["provider"] == "torch-compile") & (cells["status"] == "ok")]
    templates = compiled[compiled["kernel_names"].str.contains("triton_tem")]
    counts = [(len(templates[templates.dtype == d]), len(compiled[compiled.dtype == d])) for d in ("fp16", "bf16")]
    assert counts == [(14, 80), (14, 80)] and set(templates["epilog"].str.startswith("RELU")) == {True}
    assert "in 14 of the 80 cells at fp16 and at bf16 alike on the H100" in text
    backward = table[table["epilog"].isin(["DRELU_BGRAD", "DGELU_BGRAD"])].groupby(["dtype", "epilog"])
    faster = 1 / backward["over_torch-compile"].median()
    beside_unfused = backward["torch-compile_over_unfused"].median()
    assert f"({_span(faster)} faster than cuBLASLt's fused backward" in text
    assert f"{_span(beside_unfused)} of `unfused`'s one pass" in text
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
    assert winners[["dtype", "epilog", "beats both", "best win"]].values.tolist() == [
        ["bf16", "BGRADB", "1 of 5", "1.01x at (8192,256)x(256,65536)"],
        ["bf16", "DRELU", "2 of 5", "1.00x at (16384,512)x(512,16384)"],
        ["bf16", "DRELU_BGRAD", "3 of 5", "1.10x at (16384,256)x(256,16384)"],
        ["fp16", "BGRADA", "1 of 5", "1.01x at (16384,256)x(256,16384)"],
        ["fp16", "DGELU", "4 of 5", "1.01x at (16384,256)x(256,16384)"],
        ["fp16", "DRELU_BGRAD", "3 of 5", "1.09x at (16384,256)x(256,16384)"],
    ]
    assert (
        "at DRELU_BGRAD (3 of the 5 shapes at fp16 and at bf16, by up to 1.09x and 1.10x at (16384,256)x(256,16384)), "
        "and by 1% or less at fp16 DGELU (4 shapes), bf16 DRELU (2), fp16 BGRADA and bf16 BGRADB (one each)"
    ) in text
    records = {r.group: round(r.seconds) for r in peers[2].records if r.group.endswith("Compiled")}
    order = ["Fp16SeedCompiled", "Fp16MemboundCompiled", "Bf16SeedCompiled", "Bf16MemboundCompiled"]
    assert "the groups took {} s, {} s, {} s and {} s".format(*(records[g] for g in order)) in text
    assert f"of them {sum(records.values()):,} in the four `Compiled` groups" in text


def test_the_cutlass_table_h100_columns_are_the_burst_runs(peers):
    cells, table, _ = peers
    readme = _readme_table("| epilog | over fused: H100 fp16 |")
    by_dtype = {
        d: peer_rows(table, cells, "cutlass-evt").query("dtype == @d").set_index("epilog") for d in ("fp16", "bf16")
    }
    assert set(readme) == set(by_dtype["fp16"].index) == set(by_dtype["bf16"].index)
    for epilog, row in readme.items():
        mine = [by_dtype[d].loc[epilog, "cutlass-evt / fused"] for d in ("fp16", "bf16")]
        mine += [by_dtype[d].loc[epilog, "cutlass-evt / unfused"] for d in ("fp16", "bf16")]
        assert row[:2] + row[4:6] == mine, epilog
        counts = {d: by_dtype[d].loc[epilog, ["beats both", "best win"]] for d in ("fp16", "bf16")}
        wins = [
            f"H100 {d}: {count}, up to {best.split(' at ')[0]}"
            for d, (count, best) in counts.items()
            if not count.startswith("0 of")
        ]
        listed = [part for part in row[8].split("; ") if part.startswith("H100")]
        assert listed == wins, epilog
    mine = cells[cells["group"].str.endswith("Cutlass")].assign(ms=cells["time_s"] * 1e3)
    best = mine[(mine["dtype"] == "fp16") & (mine["epilog"] == "DGELU") & (mine["m"] == 8192)].set_index("provider").ms
    shown = f"{best['cutlass-evt']:.3f} ms against fused's {best['fused']:.3f} and unfused's {best['unfused']:.3f}"
    assert f"(H100 fp16, (8192,256)x(256,65536): {shown})" in " ".join(_readme().split())
    k = table.dropna(subset=["over_cutlass-evt"])["shape"].str.extract(r"\(\d+,(\d+)\)x")[0].astype(int)
    forward = table.loc[k.index, "epilog"].isin(
        ["RELU", "BIAS", "RELU_BIAS", "GELU", "GELU_AUX", "GELU_BIAS", "GELU_AUX_BIAS"]
    )
    beside_unfused = table.loc[k.index, "cutlass-evt_over_unfused"]
    spans = [_span(beside_unfused[forward & k.isin([256, 512])]), _span(beside_unfused[forward & (k == 1024)])]
    spans.append(_span(beside_unfused[forward & (k == 16384)]))
    aux = table.loc[k.index, "epilog"].isin(["GELU_AUX", "GELU_AUX_BIAS"]) & k.isin([256, 512])
    spans.append(_span(table.loc[k.index, "over_cutlass-evt"][aux]))
    assert spans == ["0.57-0.83x", "0.88-0.99x", "1.25-1.35x", "1.05-1.19x"]
    seed = cells[(cells["m"] == 65536) & (cells["epilog"] == "DEFAULT") & cells["group"].str.endswith("Cutlass")]
    ms = seed.set_index(["dtype", "provider"])["time_s"] * 1e3
    text = " ".join(_readme().split())
    assert (
        f"on the H100 at fcf16cf {ms['fp16', 'cutlass-evt']:.2f} ms against {ms['fp16', 'fused']:.2f} ms at fp16, "
        f"{ms['bf16', 'cutlass-evt']:.2f} against {ms['bf16', 'fused']:.2f} at bf16"
    ) in text


def walkthrough_columns(cells, table, results) -> dict[str, list[str]]:
    """The walkthrough table's H100 fp16 and fp32 cells, by row."""
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


def test_the_walkthrough_tables_h100_columns_are_the_burst_runs(peers):
    cells = peers[0]
    expected = walkthrough_columns(*peers)
    readme = _readme_table("| | H100 fp16 | H100 fp32 | H200 fp16 | H200 fp32 |")
    assert {label: readme[label][:2] for label in expected} == expected
    # beside the numba rungs, back to back (6158b61), fused fp16 DEFAULT at (16384,256)x(256,16384) took twice as long
    fused = cells[(cells["provider"] == "fused") & (cells["dtype"] == "fp16") & (cells["epilog"] == "DEFAULT")]
    fused = fused[(fused["m"] == 16384) & (fused["k"] == 256) & (fused["group"] == "Fp16MemboundWalkthrough")]
    text = " ".join(_readme().split())
    assert f"fused fp16 DEFAULT at (16384,256)x(256,16384) took {fused.time_s.item() * 1e3:.3f} ms" in text


def test_the_peers_runs_seconds_are_what_its_records_say(peers):
    cells, _, results = peers
    records = [r for r in results.records if r.group in SUITES["peers"]]
    assert sorted(r.group for r in records) == sorted(SUITES["peers"]) and len(cells) == 2216
    text = " ".join(_readme().split())
    assert f"its groups' own seconds {sum(r.seconds for r in records):,.0f}" in text


# The H100's newest back-to-back run of each peers group before the burst run: triton, torch-compile fp16 and bf16,
# cutlass-evt, the walkthrough.
BACK_TO_BACK = ("28888e2", "cad4196", "a69b4db", "6006c05", "6158b61")


def test_the_docs_table_of_quieter_cells_is_the_runs(peers):
    results = load_results(str(ROOT / "results"))
    cells = results.cells
    cells = cells[(cells["machine"] == MACHINE) & in_peers_suite(cells) & (cells["status"] == "ok")]
    run = cells["commit"].str[:7].map(lambda c: "burst" if RUN.startswith(c) else "back" if c in BACK_TO_BACK else "")
    cells = cells.assign(run=run, size=cells["time_s"].map(cell_class))[run != ""]
    spread = cells.groupby(["size", "run"])["rel_iqr"]
    docs = " ".join((ROOT / "docs" / "measurement.md").read_text().split())
    for size, label in (("large", "large (>= 5 ms)"), ("medium", "medium (1-5 ms)"), ("small", "small (< 1 ms)")):
        counts = spread.size()[size]
        medians, high = spread.median()[size] * 100, spread.quantile(0.95)[size] * 100
        row = (
            f"| {label} | {counts['back']} / {counts['burst']} | {medians['back']:.2f}% | {medians['burst']:.2f}% "
            f"| {high['back']:.2f}% | {high['burst']:.2f}% |"
        )
        assert row in docs
        assert high["burst"] < high["back"] / 4
