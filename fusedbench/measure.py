"""Timing primitives: a GPU clock from CUDA events, L2 flushing, and the sampling loop.

The loop takes its clock and its between-samples hook as parameters, so its logic is tested on
the CPU with a fake clock; on the GPU the clock is `CudaEventClock` and the hook flushes L2.
Samples are kept raw (seconds, one per call); statistics are derived from them.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

# A spread wider than this (interquartile range over median) makes a cell's timing too noisy
# to trust; the cell is flagged, not hidden (torch.utils.benchmark warns at the same 10%).
NOISY_RELATIVE_IQR = 0.10

# Writing this many times the L2 size evicts every line a previous sample left there.
L2_FLUSH_FACTOR = 2

# The ceilings every run measures beside its cells (benchmarks/ceilings.py): a dense GEMM large
# enough to reach the machine's rate, and a device-to-device copy large enough for HBM bandwidth.
CEILING_GEMM_SHAPE = (8192, 8192, 8192)
CEILING_COPY_BYTES = 2 << 30

# Timed calls per benchmarked cell: enough for asv's confidence intervals and its Mann-Whitney
# test, few enough that the default suite fits in ten minutes on one H100.
SAMPLES = 10

# How `sample_interleaved` orders its calls, recorded with every run (`.fbenv`): sample i of every
# provider of a workload comes from round i, so providers can be compared round by round.
SAMPLING = "williams-rounds"
PAIRED_SAMPLINGS = frozenset({SAMPLING})


class Clock(Protocol):
    """Times one region: start() before the work, stop() after it returns the seconds it took."""

    def start(self) -> None: ...

    def stop(self) -> float: ...


def relative_iqr(samples: Sequence[float]) -> float:
    """(q3 - q1) / median of a cell's raw samples, the spread it is flagged noisy by; 0 for fewer than two."""
    if len(samples) < 2:
        return 0.0
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


def carryover_balanced_orders(count: int) -> list[list[int]]:
    """Williams' design: orders of `count` items in which every item directly follows every other
    equally often (once in `count` orders for an even count; twice in 2 x `count` for an odd one).

    What ran just before a call moves its time (at a power cap, a GEMM after a memory-bound pass
    starts with power to spare), so balanced predecessors keep that out of comparisons.
    """
    first, low, high = [0], 1, count - 1
    for position in range(1, count):
        if position % 2:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    orders = [[(item + shift) % count for item in first] for shift in range(count)]
    return orders + [order[::-1] for order in orders] if count % 2 else orders


def sample_interleaved(
    runs: Mapping[str, Callable[[], object]],
    *,
    clock: Clock,
    samples: int,
    warmup: int,
    warmup_seconds: float = 0.0,
    between_samples: Callable[[], None] | None = None,
    order_seed: int = 0,
) -> dict[str, list[float] | Exception]:
    """Time several ways of doing one piece of work in rounds: each round calls each run once.

    A GPU at its power cap changes clock within seconds, so consecutive samples of one run
    drift together; interleaving spreads that drift over every run, and sample i of every run
    comes from round i (`SAMPLING`), so runs can be compared round by round. What ran just
    before a call matters too (a GEMM after a memory-bound pass starts with power to spare:
    2-6% faster on an H100 or H200 at the seed shape), so the rounds follow a carryover-balanced
    design, each run taking its place in it from `order_seed`. Warm-up lasts at least `warmup`
    rounds and `warmup_seconds` of measured time; every call is timed alone, so no queue of
    calls builds up ahead of the GPU. `between_samples` (an L2 flush) runs before every timed
    call of the sampling rounds, outside the timed region. A run that raises is dropped from
    later rounds; its exception is its result.
    """
    if samples < 1 or warmup < 0:
        raise ValueError(f"need samples >= 1 and warmup >= 0, got samples={samples}, warmup={warmup}")
    results: dict[str, list[float] | Exception] = {name: [] for name in runs}
    if not runs:
        return results

    def one_round(order: list[str], sampling: bool) -> float:
        spent = 0.0
        for name in order:
            run, timings = runs[name], results[name]
            if isinstance(timings, Exception):
                continue
            if sampling and between_samples is not None:
                between_samples()
            clock.start()
            try:
                run()
            except Exception as exc:
                clock.stop()
                results[name] = exc
                continue
            elapsed = clock.stop()
            spent += elapsed
            timings.append(elapsed)
        return spent

    rounds, spent = 0, 0.0
    while rounds < warmup or spent < warmup_seconds:
        spent += one_round(list(runs), sampling=False)
        rounds += 1
        if all(isinstance(r, Exception) for r in results.values()):
            return results
    for timings in results.values():
        if not isinstance(timings, Exception):
            timings.clear()  # warm-up calls are not samples
    places = list(runs)
    random.Random(order_seed).shuffle(places)
    orders = [[places[item] for item in order] for order in carryover_balanced_orders(len(places))]
    for index in range(samples):
        one_round(orders[index % len(orders)], sampling=True)
    return results


class CudaEventClock:
    """GPU time between two CUDA events on the current stream; stop() waits for the end event only."""

    def __init__(self, cupy):
        self._cupy = cupy
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def start(self) -> None:
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._cupy.cuda.get_elapsed_time(self._start, self._end) / 1e3  # ms -> s


class L2Flusher:
    """Evicts L2 by writing a buffer of L2_FLUSH_FACTOR x the device's L2 size."""

    def __init__(self, cupy):
        l2_bytes = int(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["l2CacheSize"])
        self._cupy = cupy
        self._buffer = cupy.empty(L2_FLUSH_FACTOR * l2_bytes, dtype=cupy.uint8)

    def __call__(self) -> None:
        self._buffer.fill(0)


class ReplayClock:
    """Hands samples measured elsewhere to asv's timing loop, one per timed call.

    asv reads `now()` before and after each call of the benchmark, which calls `advance()`: the
    difference asv records is exactly the next recorded sample. asv re-runs the benchmark's
    setup before every sample, so `load` starts a cell's samples only the first time it sees it.
    """

    def __init__(self) -> None:
        self._now = 0.0
        self._cell: object = None
        self._pending: Iterator[float] = iter(())

    def load(self, cell: object, samples: Iterable[float]) -> None:
        if cell != self._cell:
            self._cell, self._pending = cell, iter(samples)

    def advance(self) -> None:
        self._now += next(self._pending)

    def now(self) -> float:
        return self._now
