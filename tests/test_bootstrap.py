"""The bootstrap's medians: the same numbers np.median gives, however they are computed."""

from __future__ import annotations

import numpy as np
import pytest

from fusedbench.bootstrap import bootstrap_medians, last_axis_medians


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
