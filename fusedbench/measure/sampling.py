"""How a workload's providers are sampled: rounds in a carryover-balanced order, with an injectable clock.

The loop takes its clock and its between-samples hook as parameters, so its logic is tested on
the CPU with a fake clock; on the GPU the clock is `gpu.timing.CudaEventClock` and the hook
flushes L2. Samples are kept raw (seconds, one per call); statistics are derived from them.

Why rounds: a GPU at its power cap changes clock within seconds, so consecutive samples of one run
drift together; interleaving spreads that drift over every run, and sample i of every run comes from
round i (`SAMPLING`), so runs can be compared round by round. What ran just before a call matters too
(a GEMM after a memory-bound pass starts with power to spare: 2-6% faster on an H100 or H200 at the
seed shape), so the rounds follow a carryover-balanced design.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Protocol

# Timed calls per benchmarked cell: enough for asv's confidence intervals and its Mann-Whitney
# test, few enough that the default suite fits in ten minutes on one H100.
SAMPLES = 10

# How `sample_interleaved` orders its calls, recorded with every run: sample i of every provider
# of a workload comes from round i, so providers can be compared round by round.
SAMPLING = "williams-rounds"
PAIRED_SAMPLINGS = frozenset({SAMPLING})


class Clock(Protocol):
    """Times one region: start() before the work, stop() after it returns the seconds it took."""

    def start(self) -> None: ...

    def stop(self) -> float: ...


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
    """Time several ways of doing one piece of work in carryover-balanced rounds (module docstring), each run
    taking its place in them from `order_seed`. Warm-up lasts at least `warmup` rounds and `warmup_seconds` of
    measured time; every call is timed alone, so no queue of calls builds up ahead of the GPU. `between_samples`
    (an L2 flush) runs before every timed call of the sampling rounds, outside the timed region. A run that raises
    is dropped from later rounds; its exception is its result."""
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
