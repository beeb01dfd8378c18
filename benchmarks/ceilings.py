"""The machine's own ceilings, measured in the same run: dense GEMM time per dtype and a copy.

fusedbench table turns them into TFLOP/s and TB/s, and each cell's floor into
max(FLOPs / rate, bytes / bandwidth). Measured in `setup_cache`, replayed like the cells.
"""

from benchmarks._replayed import CHECKOUT, Replayed
from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.suites import ASV_VERSIONS


class GemmCeiling(Replayed):
    """A dense GEMM of fusedbench.catalog.suites.CEILING_GEMM_SHAPE, no epilog, per dtype."""

    params = (list(DTYPES),)
    param_names = ("dtype",)
    version = ASV_VERSIONS["GemmCeiling"]

    def setup_cache(self):
        from fusedbench.measure.asv_bridge import measure_ceilings_for_asv

        return measure_ceilings_for_asv("gemm", CHECKOUT, list(DTYPES))

    def setup(self, cache, dtype):
        self.replay(cache, (dtype, "", "gemm"), first=dtype == self.params[0][0])

    def time_gemm(self, cache, dtype):
        self.advance()


class CopyCeiling(Replayed):
    """A device-to-device copy of fusedbench.catalog.suites.CEILING_COPY_BYTES (read once, written once)."""

    version = ASV_VERSIONS["CopyCeiling"]

    def setup_cache(self):
        from fusedbench.measure.asv_bridge import measure_ceilings_for_asv

        return measure_ceilings_for_asv("copy", CHECKOUT)

    def setup(self, cache):
        self.replay(cache, ("copy", "", "copy"), first=True)

    def time_copy(self, cache):
        self.advance()
