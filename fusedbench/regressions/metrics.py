"""The comparison metrics, one registry: what each is, its per-round series, which way is worse, what it alerts as.

A metric's name is also its threshold key in a preset (`time/large`, `fusion-speedup/group`); adding a metric is
one `Metric` entry here, and one threshold per class earned for it by `fusedbench calibrate`. Each metric is the
median of a per-round series of one run: every provider of a workload was timed in the same rounds, so sample i of
each saw the same clock, and a ratio taken round by round cancels much of the power cap's drift.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from fusedbench.analysis.speedups import INVERSION
from fusedbench.catalog.model import Status
from fusedbench.catalog.providers import FUSED, GEMM, UNFUSED

Samples = Mapping[str, np.ndarray]  # a workload's raw samples in one group, by provider, round by round
Medians = Mapping[str, float]  # each provider's median of those samples


class AlertKind(enum.Enum):
    """What a change fails a build as (`regressions.gate`)."""

    REGRESSION = "regression"
    FUSION_INVERSION = "fusion-inversion"
    FUSION_LOSS = "fusion-loss"
    MISSING = "missing"
    FAILED = Status.FAILED.value


@dataclass(frozen=True)
class Metric:
    name: str  # and its threshold key in a preset
    description: str
    # (the workload's samples, a provider) -> the provider's per-round series of this metric, or None where the
    # metric does not apply (rounds of unequal length cannot be paired)
    series: Callable[[Samples, str], np.ndarray | None]
    # (each provider's median seconds, a provider) -> the seconds whose class (large, medium, small) sets its
    # threshold
    scale: Callable[[Medians, str], float]
    alert: AlertKind  # what a change worse than its threshold fails the build as
    worse_when_lower: bool = False  # fusion paying less is the regression; for the others a rise is
    # a value below which the candidate counts as a fusion inversion (a new one is its own alert kind)
    inverts_below: float | None = None
    of_workload: bool = False  # one series per workload (filed under one provider), after the per-provider ones


def _median(samples: np.ndarray | None) -> float:
    """np.median's number, from one sort: np.median's own overhead was a tenth of a verdict's time."""
    if samples is None or not len(samples):
        return float("nan")
    ordered = np.sort(samples)
    if np.isnan(ordered[-1]):  # NaN sorts last; np.median's is NaN
        return float("nan")
    middle = len(ordered) // 2
    return float(ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2)


def _paired(samples: Samples, numerator: str, denominator: str) -> np.ndarray | None:
    """Round by round, over the rounds both cells took (a cell that moved in a paired run takes extra rounds
    after the ones all its workload's cells share)."""
    top, bottom = samples.get(numerator), samples.get(denominator)
    if top is None or bottom is None or not len(top) or not len(bottom):
        return None
    shared = min(len(top), len(bottom))
    return top[:shared] / bottom[:shared]


def _epilog_cost(samples: Samples, provider: str) -> np.ndarray | None:
    return None if provider == GEMM else _paired(samples, provider, GEMM)


def _fusion_speedup(samples: Samples, provider: str) -> np.ndarray | None:
    return _paired(samples, UNFUSED, FUSED) if provider == FUSED else None


def _gemm_or_fused(medians: Medians, provider: str) -> float:
    return medians[GEMM] if GEMM in medians else medians.get(FUSED, math.nan)


TIME, EPILOG_COST, FUSION_SPEEDUP = "time", "epilog-cost", "fusion-speedup"
METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric(
            TIME,
            "the cell's samples",
            lambda samples, provider: samples[provider] if len(samples[provider]) else None,
            lambda medians, provider: medians[provider],
            AlertKind.REGRESSION,
        ),
        Metric(
            EPILOG_COST,
            "the cell over its workload's plain GEMM, round by round (the ratio shown is candidate (1 + cost) over "
            "baseline (1 + cost): 1.10 means the cell got 10% slower against its GEMM)",
            _epilog_cost,
            lambda medians, provider: medians.get(GEMM, math.nan),
            AlertKind.REGRESSION,
        ),
        Metric(
            FUSION_SPEEDUP,
            "unfused over fused, round by round (above 1 fusion pays; it is worse when it falls)",
            _fusion_speedup,
            _gemm_or_fused,
            AlertKind.FUSION_LOSS,
            worse_when_lower=True,
            inverts_below=INVERSION,
            of_workload=True,
        ),
    )
}
WORSE_WHEN_LOWER = frozenset(name for name, metric in METRICS.items() if metric.worse_when_lower)


def metric_rows(samples: Samples) -> list[tuple[str, str, np.ndarray, float]]:
    """(provider, metric, per-round series, scale seconds) of every metric that applies to a workload's cells:
    provider by provider, then the workload's own."""
    ordered = [(p, m) for p in samples for m in METRICS.values() if not m.of_workload]
    ordered += [(p, m) for m in METRICS.values() if m.of_workload for p in samples]
    medians = {provider: _median(series) for provider, series in samples.items()}  # each once: scales repeat them
    return [
        (provider, metric.name, series, metric.scale(medians, provider))
        for provider, metric in ordered
        if (series := metric.series(samples, provider)) is not None
    ]
