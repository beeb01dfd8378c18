"""The base of every fusedbench asv class: asv times nothing itself, it replays recorded GPU samples.

Each class measures on the GPU in its `setup_cache` (fusedbench.measure.asv_bridge), which returns a
`GroupCache`; `setup` loads one cell's samples into the shared `ReplayClock`, and each call of
the timed method advances it by one sample, so asv records exactly the GPU-event samples. A cell
that was not timed is an asv skip (n/a) raised from the timed method, which asv does not print:
its status and reason are in the group's record beside asv's results.
"""

import os

from asv_runner.benchmarks.mark import SkipNotImplemented

from fusedbench.measure.asv_bridge import ReplayClock, say_why_not
from fusedbench.measure.sampling import SAMPLES

CLOCK = ReplayClock()
# The checkout this suite belongs to: where asv.conf.json, and so asv's results, are.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Replayed:
    timer = staticmethod(CLOCK.now)
    number = 1  # one recorded call per sample
    repeat = (SAMPLES, SAMPLES, 600.0)  # exactly the recorded samples
    rounds = 1
    warmup_time = 0.0  # cells were warmed up when they were measured
    min_run_count = 1
    timeout = 600.0  # setup_cache measures on the GPU

    def replay(self, cache, key, *, first: bool) -> None:
        """Hand the cell `key` of `cache` to asv's timer (`advance`), or mark it to be skipped."""
        say_why_not(cache, first)
        self._cache, self._key = cache, key

    def advance(self, *clock: str) -> None:
        """One timed call: the next recorded sample of the cell (of its `clock`, where a cell has several), or
        asv's skip for a cell that was not timed."""
        key = (*self._key, *clock)
        cell = self._cache.cells.get(key)
        if cell is None or not cell.ok:
            raise SkipNotImplemented("not timed; the group's record beside asv's results gives the status and reason")
        CLOCK.load(key, cell.samples)
        CLOCK.advance()
