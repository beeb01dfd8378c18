"""Round resamples: the bootstrap that keeps a run's pairing, shared by comparisons and advice. Pure: numpy.

A run times every provider of a workload in the same rounds, so sample i of each cell saw one power
state. A resample draws round indices once and applies them to every series, so the pairing within a
run (and, where two runs follow one round order, between them) holds in every replicate.
"""

from __future__ import annotations

import numpy as np

BOOTSTRAP = 400  # resamples of each run's rounds
CONFIDENCE = 0.95


def bootstrap_medians(values: list[np.ndarray], draws: np.ndarray) -> np.ndarray:
    """(len(values) x replicates) medians of round resamples: ONE resample of round indices (`draws`,
    uniform in [0, 1), replicates x rounds) for every series (so the rounds of a workload stay paired);
    series shorter than the draws use their first columns scaled to their length."""
    replicates = draws.shape[0]
    if not values:
        return np.empty((0, replicates))
    out = np.empty((len(values), replicates))
    by_length: dict[int, list[int]] = {}
    for index, series in enumerate(values):
        by_length.setdefault(len(series), []).append(index)
    for length, indices in by_length.items():
        picks = np.floor(draws[:, :length] * length).astype(int)  # replicates x length
        matrix = np.stack([values[i] for i in indices])  # series x length
        out[indices] = last_axis_medians(matrix[:, picks])
    return out


def last_axis_medians(values: np.ndarray) -> np.ndarray:
    """np.median(values, axis=-1), the same numbers, with `values` (a scratch array) partitioned in place: the
    bootstrap's medians are most of the time a verdict takes, and np.median copies and partitions twice over."""
    length = values.shape[-1]
    if length == 0:
        return np.full(values.shape[:-1], np.nan)
    nan = np.isnan(values).any(axis=-1)
    middle = length // 2
    if length % 2:
        values.partition(middle, axis=-1)
        medians = values[..., middle].copy()
    else:
        values.partition([middle - 1, middle], axis=-1)
        medians = (values[..., middle - 1] + values[..., middle]) / 2
    medians[nan] = np.nan
    return medians


def percentile_interval(boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's CONFIDENCE percentile interval over its replicates (rows x replicates)."""
    tail = (1 - CONFIDENCE) / 2 * 100
    if boot.size == 0:
        return np.empty(0), np.empty(0)
    return np.percentile(boot, tail, axis=1), np.percentile(boot, 100 - tail, axis=1)
