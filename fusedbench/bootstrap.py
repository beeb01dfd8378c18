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
        out[indices] = np.median(matrix[:, picks], axis=2)
    return out


def percentile_interval(boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's CONFIDENCE percentile interval over its replicates (rows x replicates)."""
    tail = (1 - CONFIDENCE) / 2 * 100
    if boot.size == 0:
        return np.empty(0), np.empty(0)
    return np.percentile(boot, tail, axis=1), np.percentile(boot, 100 - tail, axis=1)
