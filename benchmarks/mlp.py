"""The seed notebook's MLP training step in every version (fusedbench.measure.gpu.mlp), one asv class per group
of the mlp suite (fusedbench.catalog.suites.MLP_GROUPS), measured in `setup_cache`
(fusedbench.measure.gpu.mlp_bench) and replayed.

MlpStep: per layer widths, batch, dtype and version, `time_step` is the wall clock a training loop pays per step
and `time_step_gpu` the GPU time of the step's kernels; the first less the second is the host's overhead.
MlpEpoch: one epoch of training on sklearn's digits at the notebook's sizes, and the test accuracy it reached.
"""

from benchmarks._replayed import CHECKOUT, Replayed
from fusedbench.catalog.suites import EPOCH_TIME, GPU_TIME, MLP_EPOCHS, MLP_GROUPS, WALL


def _measure(group_name: str):
    from fusedbench.measure.asv_bridge import measure_mlp_for_asv

    return measure_mlp_for_asv(group_name, CHECKOUT)


class MlpStep(Replayed):
    _group = MLP_GROUPS["MlpStep"]
    params = _group.params()
    param_names = _group.param_names
    version = _group.asv_version
    timeout = 1800.0  # setup_cache measures the whole grid

    def setup_cache(self):
        return _measure("MlpStep")

    def setup(self, cache, layers, batch, dtype, version):
        first = (layers, batch, dtype, version) == tuple(values[0] for values in self.params)
        self.replay(cache, (layers, batch, dtype, version), first=first)

    def time_step(self, cache, layers, batch, dtype, version):
        self.advance(WALL)

    def time_step_gpu(self, cache, layers, batch, dtype, version):
        self.advance(GPU_TIME)


class MlpEpoch(Replayed):
    _group = MLP_GROUPS["MlpEpoch"]
    params = _group.params()
    param_names = _group.param_names
    version = _group.asv_version
    repeat = (MLP_EPOCHS - 1, MLP_EPOCHS - 1, 600.0)  # every epoch after the first, which plans and compiles
    timeout = 600.0

    def setup_cache(self):
        return _measure("MlpEpoch")

    def setup(self, cache, dtype, version):
        self.replay(cache, (dtype, version), first=(dtype, version) == (self.params[0][0], self.params[1][0]))

    def time_epoch(self, cache, dtype, version):
        self.advance(EPOCH_TIME)

    def track_test_accuracy(self, cache, dtype, version):
        """The test accuracy after the timed training: a change that breaks learning shows here."""
        cell = self._cache.cells.get((dtype, version, EPOCH_TIME))
        if cell is None or not cell.ok:
            from asv_runner.benchmarks.mark import SkipNotImplemented

            raise SkipNotImplemented("not trained; the group's record beside asv's results gives the status and reason")
        return cell.provenance["test_accuracy"]

    track_test_accuracy.unit = "accuracy"
