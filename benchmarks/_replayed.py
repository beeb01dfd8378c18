"""The base of every fusedbench asv class: asv times nothing itself, it replays recorded GPU samples.

Each class measures on the GPU in its `setup_cache`; `setup` loads one cell's samples into the
shared `ReplayClock`, and each call of the timed method advances it by one sample, so asv
records exactly the GPU-event samples.
"""

from fusedbench.measure import SAMPLES, ReplayClock

CLOCK = ReplayClock()


class Replayed:
    timer = staticmethod(CLOCK.now)
    number = 1  # one recorded call per sample
    repeat = (SAMPLES, SAMPLES, 600.0)  # exactly the recorded samples
    rounds = 1
    warmup_time = 0.0  # cells were warmed up when they were measured
    min_run_count = 1
    timeout = 600.0  # setup_cache measures on the GPU

    @staticmethod
    def replay(key, cell) -> None:
        """Hand `cell`'s samples to asv, or make it an asv skip that names its status and reason."""
        if cell["status"] != "ok":
            raise NotImplementedError(f"{cell['status']}: {cell['reason']}")
        CLOCK.load(key, cell["samples"])
