"""The machine's own ceilings, measured in the same run: dense GEMM time per dtype and a copy.

fusedbench table turns them into TFLOP/s and TB/s, and each cell's floor into
max(FLOPs / rate, bytes / bandwidth). Measured in `setup_cache`, replayed like the cells.
"""

from benchmarks._replayed import CLOCK, Replayed
from fusedbench.dtypes import DTYPES


class GemmCeiling(Replayed):
    """A dense GEMM of fusedbench.measure.CEILING_GEMM_SHAPE, no epilog, per dtype."""

    params = (list(DTYPES),)
    param_names = ("dtype",)

    def setup_cache(self):
        from fusedbench.gpu.bench import measure_gemm_ceilings

        return measure_gemm_ceilings(list(DTYPES))

    def setup(self, measured, dtype):
        self.replay(dtype, measured[dtype])

    def time_gemm(self, measured, dtype):
        CLOCK.advance()


class CopyCeiling(Replayed):
    """A device-to-device copy of fusedbench.measure.CEILING_COPY_BYTES (read once, written once)."""

    def setup_cache(self):
        from fusedbench.gpu.bench import measure_copy_ceiling

        return measure_copy_ceiling()

    def setup(self, measured):
        self.replay("copy", measured)

    def time_copy(self, measured):
        CLOCK.advance()
