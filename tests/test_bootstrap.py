"""The bootstrap's medians: the same numbers np.median gives, however they are computed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fusedbench.bootstrap import bootstrap_medians, last_axis_medians, resample_medians


@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 8), (4, 1), (6, 2), (2, 3, 21)])
def test_last_axis_medians_are_numpys_medians_nan_included(shape):
    values = np.random.default_rng(sum(shape)).random(shape)
    values[(0,) * (len(shape) - 1)][0] = np.nan  # a row with a NaN has a NaN median, as np.median's
    with np.errstate(invalid="ignore"):
        assert np.array_equal(last_axis_medians(values.copy()), np.median(values, axis=-1), equal_nan=True)


def test_no_samples_give_nan_and_the_bootstrap_keeps_each_rounds_pairing():
    assert np.isnan(last_axis_medians(np.empty((3, 0)))).all()
    draws = np.random.default_rng(0).random((50, 10))
    series = np.arange(10, dtype=float)
    twice = bootstrap_medians([series, series * 2, series[:6]], draws)
    assert np.array_equal(twice[1], twice[0] * 2)  # the same rounds drawn for every series of a length
    picks = np.floor(draws[:, :6] * 6).astype(int)
    assert np.array_equal(twice[2], np.median(series[:6][picks], axis=1))  # a shorter series: its first columns


@pytest.mark.parametrize("length", [0, 1, 2, 9, 10, 59])
def test_resampled_medians_are_numpys_medians_of_the_resamples_ties_and_nan_included(length):
    rng = np.random.default_rng(length)
    matrix = rng.random((7, length)).round(1)  # rounding makes ties
    if length:
        matrix[2, length // 2] = np.nan  # only the replicates that draw this round are NaN
        matrix[3] = np.inf
    picks = np.floor(rng.random((200, length)) * length).astype(np.intp)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no rounds: np.median's "mean of empty slice", and NaN
        expected = np.median(matrix[:, picks], axis=-1)
    assert np.array_equal(resample_medians(matrix, picks), expected, equal_nan=True)
    if length > 1:
        assert 0 < np.isnan(expected[2]).sum() < 200  # some replicates drew the NaN round, some did not
