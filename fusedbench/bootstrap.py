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
        picks = np.floor(draws[:, :length] * length).astype(np.intp)  # replicates x length
        out[indices] = resample_medians(np.stack([values[i] for i in indices]), picks)
    return out


def resample_medians(matrix: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """np.median(matrix[:, picks], axis=-1) (series x replicates), the same numbers, by counting rather than
    partitioning: the picks are shared by every series, so how often each round is drawn in a replicate is
    counted once, and a replicate's median is the sorted series' value where the running count of draws in
    sorted order passes the middle. A comparison's series are a run's ten rounds, and partitioning 400
    ten-element rows per series cost most of a verdict's time (this is about 9x faster)."""
    series, length = matrix.shape
    replicates = picks.shape[0]
    if length == 0:
        return np.full((series, replicates), np.nan)
    flat = (picks + (np.arange(replicates) * length)[:, None]).ravel()
    counts = np.bincount(flat, minlength=replicates * length).reshape(replicates, length).T  # round x replicate
    order = np.argsort(matrix, axis=1)  # NaN sorts last
    ordered = np.take_along_axis(matrix, order, axis=1)
    small = np.min_scalar_type(length)
    middle = length // 2
    passed = np.zeros((series, replicates), small)  # draws so far, in sorted order
    beyond = np.zeros((series, replicates), small)  # sorted positions where more than `middle` were drawn
    beyond_lower = np.zeros((series, replicates), small)
    for drawn in counts.astype(small)[order.T]:  # a sorted position's draws: series x replicate
        passed += drawn
        beyond += passed > middle
        if length % 2 == 0:
            beyond_lower += passed > middle - 1
    medians = np.take_along_axis(ordered, length - beyond.astype(np.intp), axis=1)
    if length % 2 == 0:
        below = np.take_along_axis(ordered, length - beyond_lower.astype(np.intp), axis=1)
        medians = (below + medians) / 2
    nan = np.isnan(matrix)
    if nan.any():  # a replicate that drew a NaN round has a NaN median, as np.median's
        medians[(nan.astype(np.intp) @ counts) > 0] = np.nan
    return medians


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
    low, high = np.percentile(boot, [tail, 100 - tail], axis=1)  # one partition for both
    return low, high
