"""GPU time of every provider x epilog x shape, one asv class per group of fusedbench.suites.

asv runs each parameter combination in a fresh process, and a CUDA context with the GPU
libraries costs seconds to start, so each class measures all its cells once, in
`setup_cache`, with CUDA events (fusedbench.gpu.bench); every cell's process then hands its
recorded samples to asv through a replay timer. Cells that cannot run are asv skips, and
`fusedbench run` keeps their reasons.

asv keys a setup_cache by its source line, so every class defines its own (one shared
definition would make asv measure one group and hand its cache to all).
"""

from benchmarks._replayed import CLOCK, Replayed
from fusedbench.measure import SAMPLES
from fusedbench.suites import GROUPS


def _measure(group_name: str):
    from fusedbench.gpu.bench import measure_group

    return measure_group(GROUPS[group_name])


class _Cells(Replayed):
    param_names = ("epilog", "shape", "provider")
    repeat = (SAMPLES, SAMPLES, 3600.0)
    timeout = 3600.0  # setup_cache measures the whole group

    def __init_subclass__(cls) -> None:
        group = GROUPS[cls.__name__]
        cls.params = (list(group.epilogs), group.shape_labels, list(group.providers))

    def setup(self, measured, epilog, shape, provider):
        self.replay((epilog, shape, provider), measured["cells"][(epilog, shape, provider)])

    def time_cell(self, measured, epilog, shape, provider):
        CLOCK.advance()


class Quick(_Cells):
    def setup_cache(self):
        return _measure("Quick")


class Fp16Seed(_Cells):
    def setup_cache(self):
        return _measure("Fp16Seed")


class Fp16Llm(_Cells):
    def setup_cache(self):
        return _measure("Fp16Llm")


class Fp16Membound(_Cells):
    def setup_cache(self):
        return _measure("Fp16Membound")


class Bf16Seed(_Cells):
    def setup_cache(self):
        return _measure("Bf16Seed")


class Bf16Llm(_Cells):
    def setup_cache(self):
        return _measure("Bf16Llm")


class Bf16Membound(_Cells):
    def setup_cache(self):
        return _measure("Bf16Membound")


class Fp32Seed(_Cells):
    def setup_cache(self):
        return _measure("Fp32Seed")


class Fp32Llm(_Cells):
    def setup_cache(self):
        return _measure("Fp32Llm")


class Fp32Membound(_Cells):
    def setup_cache(self):
        return _measure("Fp32Membound")


class Tf32Seed(_Cells):
    def setup_cache(self):
        return _measure("Tf32Seed")


class Tf32Llm(_Cells):
    def setup_cache(self):
        return _measure("Tf32Llm")


class Tf32Membound(_Cells):
    def setup_cache(self):
        return _measure("Tf32Membound")


class Fp8Seed(_Cells):
    def setup_cache(self):
        return _measure("Fp8Seed")


class Fp8Llm(_Cells):
    def setup_cache(self):
        return _measure("Fp8Llm")


class Fp8Membound(_Cells):
    def setup_cache(self):
        return _measure("Fp8Membound")
