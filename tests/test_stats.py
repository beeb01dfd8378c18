"""Statistics on raw samples: relative IQR and the median's distribution-free interval."""

import math
import statistics

import pytest

from fusedbench.stats import NOISY_RELATIVE_IQR, median_interval, relative_iqr


def test_the_median_interval_is_the_binomial_order_statistics():
    values = [float(v) for v in range(10, 0, -1)]
    assert median_interval(values) == (2.0, 9.0)  # 97.9% coverage; (3rd, 8th) would be 89%
    assert median_interval(range(20)) == (5, 14)
    low, high = median_interval(range(5))
    assert math.isnan(low) and math.isnan(high)  # no pair of 5 values covers 95%
    assert all(math.isnan(v) for v in median_interval([]))


def test_relative_iqr_comes_from_the_raw_samples_around_their_median():
    samples = (1.0, 2.0, 3.0, 4.0, 5.0)
    assert relative_iqr(samples) == pytest.approx((4.0 - 2.0) / 3.0)  # median 3
    assert relative_iqr([2 * s for s in samples]) == pytest.approx(relative_iqr(samples))  # relative to the median
    assert relative_iqr(samples) > NOISY_RELATIVE_IQR


def test_a_tight_spread_is_not_noisy():
    assert relative_iqr((1.00, 1.01, 0.99, 1.00)) <= NOISY_RELATIVE_IQR
    assert math.isnan(relative_iqr((2.0,)))  # one sample says nothing about the spread


def test_the_aa_spread_is_max_minus_min_over_the_median():
    from fusedbench.stats import spread

    assert spread([10.0, 10.1, 9.9, 10.0, 10.2]) == pytest.approx(0.3 / 10.0)
    assert math.isnan(spread([10.0])) and math.isnan(spread([0.0, 0.0]))


def test_the_clock_explains_a_spread_it_caused_and_not_one_it_did_not():
    from fusedbench.stats import clock_explains

    clocks = [1980, 1900, 1800, 1700, 1600]
    assert clock_explains([1.0 / c for c in clocks], clocks) == pytest.approx(1.0)  # time is cycles / clock
    assert math.isnan(clock_explains([1.0, 1.2, 0.9], [1980] * 3))  # a steady clock explains nothing measurable
    assert clock_explains([1.0, 1.0, 1.2, 1.2, 1.1], [1900, 1980, 1900, 1980, 1900]) == pytest.approx(0.0)
    times, clocks = [1.0, 1.02, 1.1, 1.0, 1.06], [1980, 1900, 1800, 1850, 1700]  # partly the clock's doing
    r = statistics.correlation(times, [1 / c for c in clocks])
    explained = clock_explains(times, clocks)
    assert explained == pytest.approx(r * r) and 0.3 < explained < 0.9
    assert clock_explains([1 / c for c in reversed(clocks)], clocks) == 0.0  # slower at a higher clock: not the clock
