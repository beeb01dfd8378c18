"""The columns the results table derives from its own cells: round-paired ratios, pass bandwidths and flags.

Computed as the table is loaded (`results.loader`), from each run's raw samples and kernel records; every
reader (analysis, regressions, report) reads them as columns. Pure: pandas, no GPU.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd

from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import epilog_spec
from fusedbench.catalog.model import WORKLOAD, Status
from fusedbench.catalog.providers import AUTOTUNED, CONTROL_OF_TEXTBOOK, FUSED, GEMM, PASS_KERNEL_PREFIX, UNFUSED
from fusedbench.catalog.suites import ONE_PASS_BACKWARD_VERSIONS
from fusedbench.stats import median_interval

# The heuristic's algorithm has regret where fused / fused-autotuned lies wholly above this.
REGRET = 1.02
# An unfused pass below this share of the copy bandwidth is flagged: the baseline is not the best honest one.
# The bandwidth it is held to is the lower of the run's copy ceiling and a copy of the pass's own size (a
# few MB move at a fraction of the ceiling's rate, however they are moved).
PASS_OF_COPY = 0.85

RUN_WORKLOAD = ["machine", "commit", *WORKLOAD]  # a workload in one run: its providers share rounds within a group
OK = Status.OK.value


def paired_ratios(
    work: pd.DataFrame, raw_samples: list, paired: pd.Series, denominator: str, numerator: str | None = None
) -> pd.DataFrame:
    """(ratio, low, high) for each ok cell of `numerator` (every provider without one): its time over the
    `denominator` cell of the same workload and group; NaN where that cell is missing.

    Where the run sampled in rounds (`paired`, per row), the ratio is the median of round-by-round
    ratios, with a distribution-free 95% interval: both calls of a round saw the same clock, so
    the power cap's drift cancels. Elsewhere it is the ratio of the medians, with no interval.
    Only cells of one group share rounds, so a workload measured in two groups pairs within each.
    """
    ratios = np.full((len(work), 3), math.nan)  # by position: a row at a time through pandas took seconds
    providers, times = work["provider"].to_numpy(), work["time_s"].to_numpy()
    pairs = paired.reindex(work.index).to_numpy()
    groups = work.groupby([*RUN_WORKLOAD, "group"], sort=False).ngroup().to_numpy()  # -1: a key is missing
    ok = (work["status"] == OK).to_numpy() & (groups >= 0)
    bases: dict[int, int] = {}  # group -> the position of its first ok denominator cell
    for p in np.flatnonzero(ok & (providers == denominator)):
        bases.setdefault(groups[p], p)
    chosen = ok if numerator is None else ok & (providers == numerator)
    for p in np.flatnonzero(chosen):
        base = bases.get(groups[p])
        if base is None:
            continue
        mine, reference = raw_samples[p], raw_samples[base]
        if pairs[p] and len(mine) == len(reference) and len(mine):
            per_round = [a / b for a, b in zip(mine, reference, strict=True)]
            ratios[p] = (statistics.median(per_round), *median_interval(per_round))
        else:
            ratios[p] = (times[p] / times[base], math.nan, math.nan)
    return pd.DataFrame(ratios, index=work.index, columns=["ratio", "low", "high"])


def paired_metrics(work: pd.DataFrame, raw_samples: list, paired: pd.Series) -> pd.DataFrame:
    """Fill the round-paired ratios, each with `_low` / `_high`: `gemm_ratio`, each ok cell's time over its
    workload's plain GEMM;
    `regret` on fused cells (fused over fused-autotuned) and `fidelity` on textbook cells (over the blog control)."""
    work = work.copy()
    for prefix, denominator, numerator in (
        ("gemm_ratio", GEMM, None),
        ("regret", AUTOTUNED, FUSED),
        ("fidelity", CONTROL_OF_TEXTBOOK, "textbook"),
    ):
        ratios = paired_ratios(work, raw_samples, paired, denominator, numerator)
        work[[prefix, f"{prefix}_low", f"{prefix}_high"]] = ratios.to_numpy()
    return work


def pass_bandwidths(
    cells: pd.DataFrame, kernel_times: pd.Series, copy_tbps: pd.Series, versions: pd.Series
) -> pd.DataFrame:
    """Fill `pass_tbps` / `pass_of_copy` on unfused cells: the bytes its separate passes move beyond the GEMM
    over the GPU time of those passes' kernels (the ones fusedbench launched, from the cell's kernel record),
    and that over the run's copy bandwidth (`copy_tbps`, per row). The bytes follow the cell's benchmark
    version (`versions`, per row): its backward in one pass or two."""
    cells = cells.copy()
    for i in cells.index[(cells["provider"] == UNFUSED) & (cells["status"] == OK)]:
        seconds = sum(us for name, us in kernel_times[i] if name.startswith(PASS_KERNEL_PREFIX)) / 1e6
        row = cells.loc[i]
        dtype = dtype_spec(row["dtype"])
        moved = epilog_spec(row["epilog"]).unfused_extra_bytes(
            row["m"], row["k"], row["n"], dtype.operand_itemsize, dtype.result_itemsize,
            one_pass=versions[i] in ONE_PASS_BACKWARD_VERSIONS,
        )  # fmt: skip
        if seconds > 0 and moved > 0:
            cells.at[i, "pass_tbps"] = moved / seconds / 1e12
            cells.at[i, "pass_of_copy"] = cells.at[i, "pass_tbps"] / copy_tbps[i]
    return cells


def flags(cells: pd.DataFrame) -> pd.Series:
    """What deserves a look, per cell: a fused cell that launches more than one kernel (fused API, unfused
    execution), a heuristic choice autotune beats by more than REGRET (its interval wholly above), an unfused
    pass below PASS_OF_COPY of what a copy reaches (the run's ceiling, or a copy of the pass's size where slower)."""
    found = pd.Series("", index=cells.index)
    multi = cells["provider"].isin([FUSED, AUTOTUNED]) & (cells["kernels"] > 1)
    regret = cells["regret_low"] > REGRET
    size_bound = cells["pass_tbps"] >= PASS_OF_COPY * cells["same_size_copy_tbps"]  # False where NaN
    slow = (cells["pass_of_copy"] < PASS_OF_COPY) & ~size_bound
    for mask, flag in ((multi, "multi-kernel"), (regret, "heuristic-regret"), (slow, "slow-pass")):
        found[mask] = (found[mask] + " " + flag).str.strip()
    return found
