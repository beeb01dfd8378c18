"""GPU time of every provider x epilog x shape, one asv class per group of fusedbench.suites.

asv runs each parameter combination in a fresh process, and a CUDA context with the GPU
libraries costs seconds to start, so each class measures all its cells once, in
`setup_cache`, with CUDA events (fusedbench.gpu.bench); every cell's process then hands its
recorded samples to asv through a replay timer. Cells that cannot run are asv skips, and
`fusedbench run` keeps their reasons.
"""

from fusedbench.measure import SAMPLES, ReplayClock
from fusedbench.suites import GROUPS, BenchmarkGroup

_CLOCK = ReplayClock()


class _Cells:
    group: BenchmarkGroup
    param_names = ("epilog", "shape", "provider")
    timer = staticmethod(_CLOCK.now)
    number = 1  # one recorded call per sample
    repeat = (SAMPLES, SAMPLES, 3600.0)  # exactly the recorded samples
    rounds = 1
    warmup_time = 0.0  # cells were warmed up when they were measured
    min_run_count = 1
    timeout = 3600.0  # setup_cache measures the whole group

    def setup_cache(self):
        from fusedbench.gpu.bench import measure_group

        return measure_group(self.group)

    def setup(self, measured, epilog, shape, provider):
        cell = measured["cells"][(epilog, shape, provider)]
        if cell["status"] != "ok":
            raise NotImplementedError(f"{cell['status']}: {cell['reason']}")
        _CLOCK.load((epilog, shape, provider), cell["samples"])

    def time_cell(self, measured, epilog, shape, provider):
        _CLOCK.advance()


for _group in GROUPS.values():
    globals()[_group.name] = type(
        _group.name,
        (_Cells,),
        {"group": _group, "params": (list(_group.epilogs), _group.shape_labels, list(_group.providers))},
    )
