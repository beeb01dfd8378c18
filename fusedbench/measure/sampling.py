"""How a workload's providers are sampled: rounds in a carryover-balanced order, each timed call after a defined
lead-in (the measurement protocol), with an injectable clock.

The loop takes its clock, its between-samples hook (an L2 flush), the lead-in's idle and heater, and a per-sample
probe (telemetry) as parameters, so its logic is tested on the CPU with fakes; on the GPU the clock is
`gpu.timing.CudaEventClock`. Samples are kept raw (seconds, one per call); statistics are derived from them.

Why rounds: a GPU at its power cap changes clock within seconds, so consecutive samples of one run
drift together; interleaving spreads that drift over every run, and sample i of every run comes from
round i, so runs can be compared round by round. What ran just before a call matters too (a GEMM after
a memory-bound pass starts with power to spare: 2-6% faster on an H100 or H200 at the seed shape), so
the rounds follow a carryover-balanced design.

Why a protocol: at a 700 W cap an H100's SM clock swings between about 1065 and 1980 MHz, and the same
GEMM takes 14% longer sustained than from idle. A call timed in whatever state its neighbours left
the GPU in is noisy, and its time depends on its neighbours. A `Protocol` puts the GPU in one named
state before every timed call: idle for a time scaled to the call, then woken by the call itself
(burst, the clock at its boost), or held at the cap by a heater load (sustained). docs/measurement.md
gives the screening that chose `PROTOCOL`.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol as Interface

# Timed calls per benchmarked cell: enough for asv's confidence intervals and its Mann-Whitney
# test, few enough that the default suite fits in fifteen minutes on one H100.
SAMPLES = 10


class Clock(Interface):
    """Times one region: start() before the work, stop() after it returns the seconds it took."""

    def start(self) -> None: ...

    def stop(self) -> float: ...


class Stretch(Interface):
    """Makes chosen timed calls slower on purpose (an injected regression, `catalog.injection`): `mark()` right
    before the timed region, `stretch(fraction)` inside it after the call, which then lasts 1 + fraction times
    as long as the call did."""

    def mark(self) -> None: ...

    def stretch(self, fraction: float) -> None: ...


class Probe(Interface):
    """Reads the GPU's state right before and right after each timed call, outside the timed region."""

    def before(self, name: str) -> None: ...

    def after(self, name: str) -> None: ...


@dataclass(frozen=True)
class Protocol:
    """The lead-in of every timed call of the sampling rounds, scaled by the call's expected time (its warm-up).

    In order: a heater load of max(heat_min_s, heat_ratio x expected) seconds, an idle gap of
    max(idle_min_s, idle_ratio x expected), then the call itself repeated for at least wake_s where it is
    shorter (the clock rises again after idle); then the L2 flush and the timed call."""

    name: str
    summary: str
    idle_ratio: float = 0.0
    idle_min_s: float = 0.0
    wake_s: float = 0.0
    heat_ratio: float = 0.0
    heat_min_s: float = 0.0

    @property
    def sampling(self) -> str:
        """What a record says of how its samples were taken: the rounds and this lead-in."""
        return f"{ROUNDS_DESIGN}/{self.name}"

    def idle_s(self, expected: float) -> float:
        return max(self.idle_min_s, self.idle_ratio * expected)

    def heat_s(self, expected: float) -> float:
        return max(self.heat_min_s, self.heat_ratio * expected)

    def wake_calls(self, expected: float) -> int:
        """How many untimed calls wake the GPU before the timed one (none for a call at least wake_s long)."""
        if not self.wake_s or not 0 < expected < self.wake_s:
            return 0  # long enough to wake the GPU itself, or of unknown length (no warm-up)
        return math.ceil(self.wake_s / max(expected, 1e-6))


ROUNDS_DESIGN = "williams-rounds"
# The candidates screened on the GPU (docs/measurement.md); `fusedbench protocols` screens them again on yours.
BACK_TO_BACK = Protocol("back-to-back", "no lead-in: each call in whatever state the previous one left the GPU")
BURST = Protocol(
    "burst",
    "idle as long as the call (at least 5 ms), then the call itself for 5 ms where it is shorter",
    idle_ratio=1.0,
    idle_min_s=0.005,
    wake_s=0.005,
)
BURST_LONG = Protocol(
    "burst-2x",
    "idle twice as long as the call (at least 10 ms), then the call itself for 5 ms where it is shorter",
    idle_ratio=2.0,
    idle_min_s=0.01,
    wake_s=0.005,
)
SUSTAINED = Protocol(
    "sustained",
    "a GEMM heater as long as the call (at least 5 ms) right before it: the GPU held at its power cap",
    heat_ratio=1.0,
    heat_min_s=0.005,
)
PROTOCOLS = {protocol.name: protocol for protocol in (BACK_TO_BACK, BURST, BURST_LONG, SUSTAINED)}
PROTOCOL = BURST  # what every run uses; docs/measurement.md gives the screening that chose it
# How runs recorded their sampling: every protocol's rounds pair (sample i of every provider comes from round i).
# "williams-rounds" alone is what runs recorded before protocols, back to back.
PAIRED_SAMPLINGS = frozenset({ROUNDS_DESIGN, *(protocol.sampling for protocol in PROTOCOLS.values())})


class LeadIn:
    """How a protocol's lead-in is carried out: `sleep` idles the host (and so the GPU), `heat(seconds)` queues
    that much heater work on the GPU (None where the protocol needs none), `now` reads the host's clock. The idle
    gap counts from the end of the last timed call (`ended`), so reading telemetry after it costs no extra time.
    Heat and wake calls are queued without waiting: the timed call's launches then queue behind them, and its
    time is the GPU's, with no launch gap (as NVBench times)."""

    def __init__(self, protocol: Protocol = BACK_TO_BACK, *, sleep=time.sleep, heat=None, now=time.perf_counter):
        self.protocol, self._sleep, self._heat, self._now = protocol, sleep, heat, now
        self._ended = now()
        if protocol.heat_s(1.0) and heat is None:
            raise ValueError(f"protocol {protocol.name!r} needs a heater; none was given")

    def ended(self) -> None:
        """A timed call has just returned: the GPU is idle from now on."""
        self._ended = self._now()

    def __call__(self, run: Callable[[], object], expected: float) -> None:
        heat = self.protocol.heat_s(expected)
        if heat:
            self._heat(heat)
        idle = self.protocol.idle_s(expected) - (self._now() - self._ended)
        if idle > 0:
            self._sleep(idle)
        for _ in range(self.protocol.wake_calls(expected)):
            run()


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


@dataclass
class Rounds:
    """Timed calls of several runs: each run's timings (or the exception that dropped it) and its expected time,
    and what surrounds every timed call. `sample_interleaved` drives it round by round; a confirmation worker
    (`measure.gpu.confirm_worker`) one call at a time, in lock-step with another process."""

    runs: Mapping[str, Callable[[], object]]
    clock: Clock
    between_samples: Callable[[], None] | None
    lead_in: LeadIn | None
    probe: Probe | None
    slower: Mapping[str, float]  # run name -> the fraction its sampled calls are stretched by
    stretch: Stretch | None

    def __post_init__(self) -> None:
        self.results: dict[str, list[float] | Exception] = {name: [] for name in self.runs}
        self.expected: dict[str, float] = {}

    def one_round(self, order: list[str], sampling: bool) -> float:
        """Time each run of `order` once (sampling: after its lead-in, flush and probe); the seconds they took."""
        spent = 0.0
        for name in order:
            timings = self.results[name]
            if isinstance(timings, Exception):
                continue
            if sampling:
                try:  # the lead-in's wake calls are the run's own: they may raise as the timed call would
                    self._lead_in(name)
                except Exception as exc:
                    self.results[name] = exc
                    continue
                self._before(name)
            stretched = sampling and self.slower.get(name, 0.0) > 0
            if stretched:
                self.stretch.mark()
            self.clock.start()
            try:
                self.runs[name]()
                if stretched:
                    self.stretch.stretch(self.slower[name])
            except Exception as exc:
                self.clock.stop()
                self.results[name] = exc
                continue
            elapsed = self.clock.stop()
            if self.lead_in is not None:
                self.lead_in.ended()
            if sampling and self.probe is not None:
                self.probe.after(name)
            spent += elapsed
            timings.append(elapsed)
        return spent

    def _lead_in(self, name: str) -> None:
        if self.lead_in is not None:
            self.lead_in(self.runs[name], self.expected[name])

    def _before(self, name: str) -> None:
        """The L2 flush and the probe's reading, right before the timed call: errors of fusedbench's own."""
        if self.between_samples is not None:
            self.between_samples()
        if self.probe is not None:
            self.probe.before(name)

    def warm_up(self, rounds: int, seconds: float) -> bool:
        """At least `rounds` untimed rounds and `seconds` of measured time; then each run's expected time is its
        median warm-up call (warm-up calls are not samples). False where every run has failed."""
        done, spent = 0, 0.0
        while done < rounds or spent < seconds:
            spent += self.one_round(list(self.runs), sampling=False)
            done += 1
            if all(isinstance(r, Exception) for r in self.results.values()):
                return False
        for name, timings in self.results.items():
            if not isinstance(timings, Exception):
                self.expected[name] = statistics.median(timings) if timings else 0.0
                timings.clear()
        return True


def sample_interleaved(
    runs: Mapping[str, Callable[[], object]],
    *,
    clock: Clock,
    samples: int,
    warmup: int,
    warmup_seconds: float = 0.0,
    between_samples: Callable[[], None] | None = None,
    order_seed: int = 0,
    lead_in: LeadIn | None = None,
    probe: Probe | None = None,
    slower: Mapping[str, float] | None = None,
    stretch: Stretch | None = None,
) -> dict[str, list[float] | Exception]:
    """Time several ways of doing one piece of work in carryover-balanced rounds (module docstring), each run
    taking its place in them from `order_seed`. Warm-up lasts at least `warmup` rounds and `warmup_seconds` of
    measured time, and gives each run's expected time (its median warm-up call). In the sampling rounds every
    call gets, in order: `lead_in` (the protocol's), `between_samples` (an L2 flush), `probe.before`, the timed
    call (stretched by `stretch` where `slower` names the run: an injected regression), `probe.after`. Every call
    is timed alone, so no queue of calls builds up ahead of the GPU. A run that
    raises is dropped from later rounds; its exception is its result."""
    if samples < 1 or warmup < 0:
        raise ValueError(f"need samples >= 1 and warmup >= 0, got samples={samples}, warmup={warmup}")
    if slower and stretch is None:
        raise ValueError(f"runs {sorted(slower)} are to be slowed, but no stretch was given")
    state = Rounds(runs, clock, between_samples, lead_in, probe, slower or {}, stretch)
    if not runs or not state.warm_up(warmup, warmup_seconds):
        return state.results
    places = list(runs)
    random.Random(order_seed).shuffle(places)
    orders = [[places[item] for item in order] for order in carryover_balanced_orders(len(places))]
    for index in range(samples):
        state.one_round(orders[index % len(orders)], sampling=True)
    return state.results
