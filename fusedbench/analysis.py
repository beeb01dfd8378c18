"""What the results mean: speedups against both baselines, epilog cost, inversions, noise, geomeans.

Pure functions of the tidy table `fusedbench.results` loads (pandas, no GPU, no plotly): the
report, `fusedbench table` and the coming compare/alert draw or print what these compute.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd

from fusedbench.model import Status
from fusedbench.providers import BASELINES, FUSED, GEMM, PROVIDERS
from fusedbench.shapes import shape_label
from fusedbench.stats import NOISY_RELATIVE_IQR, median_interval

# A fused epilog this much slower than the unfused GEMM + pass is a fusion inversion.
INVERSION = 0.95

WORKLOAD = ["machine", "commit", "dtype", "epilog", "m", "k", "n"]
OK = Status.OK.value


def gemm_ratios(work: pd.DataFrame, raw_samples: list[list[float]], paired: pd.Series) -> pd.DataFrame:
    """Fill `gemm_ratio` (with `gemm_ratio_low` / `_high`): each ok cell's time over its workload's plain GEMM.

    Where the run sampled in rounds (`paired`, per row), the ratio is the median of round-by-round
    ratios, with a distribution-free 95% interval: both calls of a round saw the same clock, so
    the power cap's drift cancels. Elsewhere it is the ratio of the medians, with no interval.
    """
    work = work.copy()
    ratios = [(math.nan, math.nan, math.nan)] * len(work)
    for _, indices in work[work["status"] == OK].groupby(WORKLOAD).groups.items():
        gemm = [i for i in indices if work.at[i, "provider"] == GEMM]
        if not gemm:
            continue
        base = raw_samples[gemm[0]]
        for i in indices:
            mine = raw_samples[i]
            if paired[i] and len(mine) == len(base):
                per_round = [a / b for a, b in zip(mine, base, strict=True)]
                ratios[i] = (statistics.median(per_round), *median_interval(per_round))
            else:
                ratios[i] = (work.at[i, "time_s"] / work.at[gemm[0], "time_s"], math.nan, math.nan)
    columns = ["gemm_ratio", "gemm_ratio_low", "gemm_ratio_high"]
    work[columns] = pd.DataFrame(ratios, index=work.index, columns=columns)
    return work


def with_shape(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with a 'shape' label column and 'size' (M x N x K) to order them by."""
    cells = cells.copy()
    cells["shape"] = [shape_label(m, k, n) for m, k, n in zip(cells["m"], cells["k"], cells["n"], strict=True)]
    cells["size"] = cells["m"] * cells["n"] * cells["k"]
    return cells


def speedups(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per workload (machine, commit, dtype, epilog, shape) with each provider's time, and
    fused's speedup over each baseline (`over_textbook`, `over_unfused`; NaN where either cell is not ok)
    and its epilog cost over the plain GEMM (`epilog_cost`: fused / gemm - 1)."""
    ok = with_shape(cells[cells["status"] == OK])
    keys = ["machine", "commit", "dtype", "epilog", "shape", "size"]
    columns = {
        "time_s": "",
        "ci_low_s": "_ci_low",
        "ci_high_s": "_ci_high",
        "samples": "_samples",
        "gemm_ratio": "_gemm_ratio",
        "gemm_ratio_low": "_gemm_ratio_low",
        "gemm_ratio_high": "_gemm_ratio_high",
    }
    wide = ok.pivot_table(index=keys, columns="provider", values=list(columns), aggfunc="first")
    table = pd.DataFrame(index=wide.index)
    for provider in PROVIDERS:
        for value, suffix in columns.items():
            table[provider + suffix] = wide[(value, provider)] if (value, provider) in wide.columns else np.nan
    for baseline in BASELINES:
        table[f"over_{baseline}"] = table[baseline] / table[FUSED]
    table["epilog_cost"] = table[f"{FUSED}_gemm_ratio"] - 1
    return table.reset_index()


def geometric_mean(values: pd.Series) -> float:
    values = values.dropna()
    values = values[values > 0]
    return float(np.exp(np.log(values).mean())) if len(values) else math.nan


def inversions(table: pd.DataFrame) -> pd.DataFrame:
    """Workloads where fused runs below INVERSION x the unfused GEMM + pass: fusion does not pay."""
    return table[table["over_unfused"] < INVERSION]


def noisy_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells whose relative IQR is above NOISY_RELATIVE_IQR: shown, flagged, never hidden."""
    return cells[(cells["status"] == OK) & (cells["rel_iqr"] > NOISY_RELATIVE_IQR)]


def headline(cells: pd.DataFrame, table: pd.DataFrame, machine: str) -> pd.DataFrame:
    """Per dtype on one machine: geometric-mean speedups, the inversions and the worst one, and the cell statuses."""
    rows = []
    for dtype in dict.fromkeys(table[table["machine"] == machine]["dtype"]):
        part = table[(table["machine"] == machine) & (table["dtype"] == dtype)]
        counts = cells[(cells["machine"] == machine) & (cells["dtype"] == dtype)]["status"].value_counts()
        measured = part["over_unfused"].notna()
        worst = part.loc[part["over_unfused"].idxmin()] if measured.any() else None
        rows.append(
            {
                "dtype": dtype,
                **{f"fused over {b} (geomean)": f"{geometric_mean(part[f'over_{b}']):.2f}x" for b in BASELINES},
                f"fused < {INVERSION:g}x unfused": f"{len(inversions(part))} of {int(measured.sum())}",
                "worst": "" if worst is None else f"{worst['epilog']} {worst['shape']}: {worst['over_unfused']:.2f}x",
                **{status.value: int(counts.get(status.value, 0)) for status in Status},
            }
        )
    return pd.DataFrame(rows)
