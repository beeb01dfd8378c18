"""GPU time of every provider x epilog x shape, one asv class per group of fusedbench.catalog.suites.

asv runs each parameter combination in a fresh process, and a CUDA context with the GPU
libraries costs seconds to start, so each class measures all its cells once, in
`setup_cache`, with CUDA events (fusedbench.measure.asv_bridge, fusedbench.measure.gpu.bench), and records
every cell's status and reason beside asv's results; every cell's process then hands its
recorded samples to asv through a replay timer. Cells that were not timed are asv skips.

asv keys a setup_cache by its source line, so every class defines its own (one shared
definition would make asv measure one group and hand its cache to all). Each class carries the
explicit asv `version` of its group (fusedbench.catalog.suites.ASV_VERSIONS).
"""

from benchmarks._replayed import CHECKOUT, Replayed
from fusedbench.catalog.suites import GROUPS
from fusedbench.measure.sampling import SAMPLES


def _measure(group_name: str):
    from fusedbench.measure.asv_bridge import measure_for_asv

    return measure_for_asv(group_name, CHECKOUT)


class _Cells(Replayed):
    param_names = ("epilog", "shape", "provider")
    repeat = (SAMPLES, SAMPLES, 3600.0)
    timeout = 3600.0  # setup_cache measures the whole group

    def __init_subclass__(cls) -> None:
        group = GROUPS[cls.__name__]
        cls.params = (list(group.epilogs), group.shape_labels, list(group.providers))
        cls.version = group.asv_version

    def setup(self, cache, epilog, shape, provider):
        first = (epilog, shape, provider) == tuple(values[0] for values in self.params)
        self.replay(cache, (epilog, shape, provider), first=first)

    def time_cell(self, cache, epilog, shape, provider):
        self.advance()


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


class Blog(_Cells):
    def setup_cache(self):
        return _measure("Blog")


# The peers suite: triton beside the ladder on the shapes where fusion matters most, and the TwoPass control.
class Fp16SeedPeers(_Cells):
    def setup_cache(self):
        return _measure("Fp16SeedPeers")


class Fp16MemboundPeers(_Cells):
    def setup_cache(self):
        return _measure("Fp16MemboundPeers")


class Bf16SeedPeers(_Cells):
    def setup_cache(self):
        return _measure("Bf16SeedPeers")


class Bf16MemboundPeers(_Cells):
    def setup_cache(self):
        return _measure("Bf16MemboundPeers")


# torch.compile beside fused and unfused alone: its minutes of compiling in groups of their own.
class Fp16SeedCompiled(_Cells):
    def setup_cache(self):
        return _measure("Fp16SeedCompiled")


class Fp16MemboundCompiled(_Cells):
    def setup_cache(self):
        return _measure("Fp16MemboundCompiled")


class Bf16SeedCompiled(_Cells):
    def setup_cache(self):
        return _measure("Bf16SeedCompiled")


class Bf16MemboundCompiled(_Cells):
    def setup_cache(self):
        return _measure("Bf16MemboundCompiled")


class TwoPass(_Cells):
    def setup_cache(self):
        return _measure("TwoPass")


# The seed walkthrough's einsum and numba kernels beside fused and unfused.
class Fp16SeedWalkthrough(_Cells):
    def setup_cache(self):
        return _measure("Fp16SeedWalkthrough")


class Fp16MemboundWalkthrough(_Cells):
    def setup_cache(self):
        return _measure("Fp16MemboundWalkthrough")


class Fp32SeedWalkthrough(_Cells):
    def setup_cache(self):
        return _measure("Fp32SeedWalkthrough")


class Fp32MemboundWalkthrough(_Cells):
    def setup_cache(self):
        return _measure("Fp32MemboundWalkthrough")


# CUTLASS's epilogue visitor trees beside fused and unfused: their nvcc minutes in groups of their own.
class Fp16SeedCutlass(_Cells):
    def setup_cache(self):
        return _measure("Fp16SeedCutlass")


class Fp16MemboundCutlass(_Cells):
    def setup_cache(self):
        return _measure("Fp16MemboundCutlass")


class Bf16SeedCutlass(_Cells):
    def setup_cache(self):
        return _measure("Bf16SeedCutlass")


class Bf16MemboundCutlass(_Cells):
    def setup_cache(self):
        return _measure("Bf16MemboundCutlass")
