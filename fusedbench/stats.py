"""Statistics on raw GPU samples: spread and distribution-free intervals. Pure: only the standard library."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

# A spread wider than this (interquartile range over median) makes a cell's timing too noisy
# to trust; the cell is flagged, not hidden (torch.utils.benchmark warns at the same 10%).
NOISY_RELATIVE_IQR = 0.10


def relative_iqr(samples: Sequence[float]) -> float:
    """(q3 - q1) / median of a cell's raw samples, the spread it is flagged noisy by; NaN (unknown, not
    steady) for fewer than two."""
    if len(samples) < 2:
        return math.nan
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return (q3 - q1) / median


def median_interval(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for the median: the narrowest symmetric pair of order
    statistics whose binomial coverage is at least `confidence` (the 2nd and 9th of 10 values
    cover 97.9%; the 3rd and 8th only 89%). NaNs for fewer than 6 values at 95%."""
    ordered = sorted(values)
    count = len(ordered)

    def outside(k: int) -> float:
        """The chance that the median lies below ordered[k] or above ordered[count - 1 - k]."""
        return 2 * sum(math.comb(count, i) for i in range(k + 1)) / 2**count

    if count == 0 or outside(0) > 1 - confidence:
        return math.nan, math.nan
    k = 0
    while k + 1 < count - 2 - k and outside(k + 1) <= 1 - confidence:
        k += 1
    return ordered[k], ordered[count - 1 - k]


def spread(values: Sequence[float]) -> float:
    """(max - min) / median of one cell's medians over repeated runs of one code state: its A/A spread. NaN for
    fewer than two, or a median that is not positive."""
    if len(values) < 2 or statistics.median(values) <= 0:
        return math.nan
    return (max(values) - min(values)) / statistics.median(values)


def clock_explains(times: Sequence[float], clocks: Sequence[float]) -> float:
    """How much of a cell's sample-to-sample variance its SM clock explains: the squared correlation of its times
    with their cycle time (1 / clock), 0 where they correlate the wrong way (slower at a higher clock: something
    else made the spread). NaN where either does not vary or fewer than three samples have a clock."""
    pairs = [(t, 1.0 / c) for t, c in zip(times, clocks, strict=False) if c > 0]
    if len(pairs) < 3:
        return math.nan
    xs, ys = [p[1] for p in pairs], [p[0] for p in pairs]
    if min(xs) == max(xs) or min(ys) == max(ys):  # no variance (compared, not computed: exact and quick)
        return math.nan
    return max(statistics.correlation(xs, ys), 0.0) ** 2
