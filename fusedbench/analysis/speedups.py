"""What the results mean: speedups against both baselines and the peers, epilog cost, inversions, noise, geomeans.

Pure functions of the tidy table `fusedbench.results.loader` loads (pandas, no GPU, no plotly): the
report, `fusedbench table` and the coming compare/alert draw or print what these compute.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fusedbench.catalog.model import WORKLOAD, Status
from fusedbench.catalog.providers import (
    BASELINES,
    FUSED,
    LADDER,
    PEERS,
    UNFUSED,
)
from fusedbench.catalog.shapes import shape_label
from fusedbench.catalog.suites import CONTROL_GROUPS, PEER_ONLY_GROUPS
from fusedbench.results.derived import OK, RUN_WORKLOAD, paired_ratios
from fusedbench.stats import NOISY_RELATIVE_IQR

# The workload table's columns (`speedups`), named here and nowhere else: each provider's own columns, and the
# paired ratios with their 95% intervals.
PROVIDER_COLUMNS = {  # a cell's column -> the suffix of its provider's column: 'fused', 'fused_ci_low', ...
    "time_s": "",
    "ci_low_s": "_ci_low",
    "ci_high_s": "_ci_high",
    "samples": "_samples",
    "gemm_ratio": "_gemm_ratio",
    "gemm_ratio_low": "_gemm_ratio_low",
    "gemm_ratio_high": "_gemm_ratio_high",
    "kernels": "_kernels",
}


def provider_column(provider: str, cell_column: str = "time_s") -> str:
    """A provider's column in the workload table: 'fused' (its time), 'fused_gemm_ratio_low', 'unfused_kernels'."""
    return provider + PROVIDER_COLUMNS[cell_column]


def speedup_column(other: str) -> str:
    """Fused's speedup over `other` (its time over fused's): 'over_unfused', 'over_textbook', 'over_triton'."""
    return "over_" + other


def peer_ratio_column(peer: str) -> str:
    """A peer's time over unfused's: 'triton_over_unfused', 'torch-compile_over_unfused'."""
    return peer + "_over_" + UNFUSED


def interval_columns(ratio: str) -> tuple[str, str]:
    """A ratio column's paired 95% interval: ('over_unfused_low', 'over_unfused_high'), NaN where unpaired."""
    return ratio + "_low", ratio + "_high"


def paired_fused_column(peer: str) -> str:
    """The fused time a peer timed in a group of its own is paired with there: 'torch-compile_paired_fused'."""
    return peer + "_paired_fused"


EPILOG_COST = "epilog_cost"  # fused / gemm - 1, from fused's gemm ratio
OVER_UNFUSED = speedup_column(UNFUSED)  # the headline's speedup

# A fused epilog this much slower than the unfused GEMM + pass is a fusion inversion.
INVERSION = 0.95
INVERSIONS_COLUMN = f"fused < {INVERSION:g}x unfused, told apart"  # the headline's count of them


def ladder_cells(cells: pd.DataFrame, *, across_commits: bool = False) -> pd.DataFrame:
    """The ladder's cells, one group per workload and run: the control groups and the groups that time a peer
    beside fused and unfused alone dropped, and where a run timed a workload in two groups (a quick and a default
    run at one commit: Quick and Fp16Seed), the larger group's. `across_commits`: one group per workload and
    machine, for cells that hold each group's newest run (`results.runs.newest_runs`), whatever its commit."""
    ladder = cells[~cells["group"].isin(CONTROL_GROUPS | PEER_ONLY_GROUPS)]
    size = ladder.groupby(["machine", "commit", "group"])["provider"].transform("size")
    ranked = ladder.assign(_size=size).sort_values(["_size", "group"], kind="stable")
    chosen = ranked.groupby(["machine", *WORKLOAD] if across_commits else RUN_WORKLOAD)["group"].transform("last")
    return ladder[ranked.loc[ladder.index, "group"] == chosen.loc[ladder.index]]


def with_shape(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with a 'shape' label column, 'size' (M x N x K) and 'intensity' to order them by: the GEMM's
    FLOPs per element of A, B and D it moves (2MNK / (MK + KN + MN)), low where the epilog's traffic matters."""
    cells = cells.copy()
    cells["shape"] = [shape_label(m, k, n) for m, k, n in zip(cells["m"], cells["k"], cells["n"], strict=True)]
    m, k, n = (cells[axis].astype(float) for axis in ("m", "k", "n"))
    cells["size"] = cells["m"] * cells["n"] * cells["k"]
    cells["intensity"] = 2 * m * n * k / (m * k + k * n + m * n)
    return cells


def speedups(cells: pd.DataFrame, detail: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per workload (machine, commit, dtype, epilog, shape) with each provider's time, and
    fused's speedup over each baseline and peer (`over_textbook`, `over_unfused`, `over_triton`: its time over
    fused's; NaN where either cell is not ok), each peer's time over unfused (`triton_over_unfused`), and fused's
    epilog cost over the plain GEMM (`epilog_cost`: fused / gemm - 1).

    With the cells' `detail` (results.DETAIL_COLUMNS, same index), each ratio also gets the 95% interval
    of its round-by-round ratios (`over_unfused_low` / `_high`); NaN where the run did not pair rounds.
    """
    return _workload_table(with_shape(ladder_cells(cells[cells["status"] == OK])), detail)


def peers_speedups(cells: pd.DataFrame, detail: pd.DataFrame | None = None) -> pd.DataFrame:
    """`speedups` of the peers suite's cells, with the columns of each peer timed in a group of its own beside fused
    and unfused (torch-compile's, cutlass-evt's, the walkthrough's) joined to its workload's row: its time, its
    ratios, paired within its group, and that group's fused time; every other column the ladder group's, or, for a
    workload no ladder group timed (the walkthrough's fp32), its own group's."""
    table = speedups(cells, detail)
    ok = cells[cells["status"] == OK]
    alone = ok[ok["group"].isin(PEER_ONLY_GROUPS)]
    if alone.empty:
        return table
    workload = ["machine", "dtype", "epilog", "shape", "size", "intensity"]
    # the groups hold other workloads (or other peers): a row per workload, each peer's columns from its group, with
    # the fused time its ratios are paired with there (`{peer}_paired_fused`: another run's than the ladder's fused)
    owns = []
    for _, part in alone.groupby("group", sort=False):
        own = _workload_table(with_shape(part), detail)
        peers = set(part["provider"]) & set(PEERS)
        owns.append(own.assign(**{paired_fused_column(peer): own[FUSED] for peer in peers}))
    own = pd.concat(owns).groupby(workload, sort=False).first()
    peers = [peer for peer in PEERS if peer in set(alone["provider"])]
    columns = [c for c in own.columns for p in peers if c == p or c.startswith((f"{p}_", speedup_column(p)))]
    ladder = table.set_index(workload)
    joined = ladder.drop(columns=columns, errors="ignore").join(own[columns], how="outer")
    unladdered = own.index.difference(ladder.index)  # timed by no ladder group (fp32): their own group's row whole
    joined.loc[unladdered] = own.loc[unladdered, joined.columns]
    return joined.copy().reset_index()  # rows set one block a column: consolidated first (pandas' PerformanceWarning)


def _workload_table(ok: pd.DataFrame, detail: pd.DataFrame | None) -> pd.DataFrame:
    """`speedups` of ok cells that hold one group per workload and run."""
    keys = ["machine", "commit", "dtype", "epilog", "shape", "size", "intensity"]
    wide = ok.pivot_table(index=keys, columns="provider", values=list(PROVIDER_COLUMNS), aggfunc="first")
    nothing = pd.Series(np.nan, index=wide.index)
    table = {
        provider_column(provider, value): wide[(value, provider)] if (value, provider) in wide.columns else nothing
        for provider in (*LADDER, *PEERS)
        for value in PROVIDER_COLUMNS
    }
    ratios = {speedup_column(other): (FUSED, other) for other in (*BASELINES, *PEERS)}
    ratios |= {peer_ratio_column(peer): (UNFUSED, peer) for peer in PEERS}
    if detail is not None:  # every cell over each denominator at once: (low|high, provider) columns by workload
        raw, paired = list(detail.loc[ok.index, "raw"]), detail.loc[ok.index, "paired"].astype(bool)
        workloads = pd.MultiIndex.from_frame(ok[[*keys, "provider"]])
        over = {
            denominator: paired_ratios(ok, raw, paired, denominator)[["low", "high"]]
            .set_axis(workloads)
            .unstack("provider")
            .reindex(wide.index)
            for denominator in {denominator for denominator, _ in ratios.values()}
        }
    for name, (denominator, numerator) in ratios.items():
        low, high = interval_columns(name)
        table[name] = table[numerator] / table[denominator]
        table[low] = table[high] = nothing
        if detail is not None and ("low", numerator) in over[denominator].columns:
            table[low] = over[denominator][("low", numerator)]
            table[high] = over[denominator][("high", numerator)]
    table[EPILOG_COST] = table[provider_column(FUSED, "gemm_ratio")] - 1
    return pd.DataFrame(table, index=wide.index).reset_index()


def indistinct(table: pd.DataFrame, baseline: str) -> pd.Series:
    """Speedups whose paired 95% interval includes 1.0: fused and `baseline` are not told apart (False where
    the run gave no interval)."""
    low, high = interval_columns(speedup_column(baseline))
    return (table[low] <= 1.0) & (table[high] >= 1.0)


def machine_pairs(table: pd.DataFrame, reference: str, other: str, baseline: str) -> pd.DataFrame:
    """Fused's speedup over `baseline` on two machines, per workload both timed: columns `x` (`reference`) and
    `y` (`other`), each with its paired 95% interval (`x_low`, `x_high`, ...; NaN where unpaired), indexed by
    dtype, epilog and shape."""
    columns = [speedup_column(baseline), *interval_columns(speedup_column(baseline))]
    sides = [
        table[table["machine"] == machine]
        .set_index(["dtype", "epilog", "shape"])[columns]
        .set_axis([side, f"{side}_low", f"{side}_high"], axis=1)
        for side, machine in (("x", reference), ("y", other))
    ]
    return sides[0].join(sides[1], how="inner").dropna(subset=["x", "y"])


def geometric_mean(values: pd.Series) -> float:
    values = values.dropna()
    values = values[values > 0]
    return float(np.exp(np.log(values).mean())) if len(values) else math.nan


def inversions(table: pd.DataFrame) -> pd.DataFrame:
    """Workloads where fused runs below INVERSION x the unfused GEMM + pass, told apart from it (the paired
    interval excludes 1.0, where there is one): fusion does not pay."""
    return table[(table[OVER_UNFUSED] < INVERSION) & ~indistinct(table, UNFUSED)]


def noisy_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells whose relative IQR is above NOISY_RELATIVE_IQR: shown, flagged, never hidden."""
    return cells[(cells["status"] == OK) & (cells["rel_iqr"] > NOISY_RELATIVE_IQR)]


def _over_unfused(row) -> str:
    """'RELU_BIAS (65536,16384)x(16384,8192): 1.05x', a workload's fused over unfused ('' for none)."""
    return "" if row is None else f"{row['epilog']} {row['shape']}: {row[OVER_UNFUSED]:.2f}x"


def headline(cells: pd.DataFrame, table: pd.DataFrame, machine: str) -> pd.DataFrame:
    """Per dtype on one machine: geometric-mean speedups (over the best unfused version first: the one a user would
    otherwise run), the inversions, the best and the worst workload, and the cell statuses."""
    rows = []
    for dtype in dict.fromkeys(table[table["machine"] == machine]["dtype"]):
        part = table[(table["machine"] == machine) & (table["dtype"] == dtype)]
        counts = cells[(cells["machine"] == machine) & (cells["dtype"] == dtype)]["status"].value_counts()
        measured = part[OVER_UNFUSED].notna()
        best = part.loc[part[OVER_UNFUSED].idxmax()] if measured.any() else None
        worst = part.loc[part[OVER_UNFUSED].idxmin()] if measured.any() else None
        rows.append(
            {
                "dtype": dtype,
                **{
                    f"fused over {b} (geomean)": f"{geometric_mean(part[speedup_column(b)]):.2f}x"
                    for b in sorted(BASELINES, key=lambda b: b != UNFUSED)
                },
                "fused over unfused (range)": (
                    f"{part[OVER_UNFUSED].min():.2f}x-{part[OVER_UNFUSED].max():.2f}x" if measured.any() else ""
                ),
                INVERSIONS_COLUMN: f"{len(inversions(part))} of {int(measured.sum())}",
                "best": _over_unfused(best),
                "worst": _over_unfused(worst),
                **{status.value: int(counts.get(status.value, 0)) for status in Status},
            }
        )
    return pd.DataFrame(rows)
