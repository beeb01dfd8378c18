"""Measure the seed notebook's MLP on the GPU for asv (benchmarks/mlp.py): every version at every size of the mlp
suite's grid, each verified against float64 before it is timed.

A step is what a training loop runs: forward, backward and the SGD update of the fp32 masters, on a batch of
random inputs and one-hot targets. It is timed by two clocks:
- the wall clock per step, as the loop pays it: a sample is enough steps back to back for about
  WALL_SAMPLE_SECONDS, the device synchronised at both ends, divided by the steps; the versions take turns in
  carryover-balanced rounds (`sampling.sample_interleaved`). Steps are warm, as in a loop: no L2 flush.
- the GPU time per step: the summed durations of the step's kernels from CUPTI (`gpu.provenance`), one sample per
  recorded step, recorded after the wall clock's samples.
The host's overhead is the first less the second: at the notebook's sizes it is most of a step.

The epoch group trains each version on sklearn's digits at the notebook's sizes (`fusedbench.measure.mlp.train`) and
times each epoch; a version that misses the accuracy bar is a failed cell.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from fusedbench.catalog.mlp_settings import ACCURACY, LOW_PRECISION_GAP
from fusedbench.catalog.model import Cell, CellKey
from fusedbench.catalog.suites import EPOCH_TIME, GPU_TIME, MLP_EPOCHS, MLP_LEFT_OUT, WALL, MlpGroup, mlp_layers
from fusedbench.errors import FusedbenchError
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.arrays import as_torch, synchronize
from fusedbench.measure.gpu.bench import free_bytes
from fusedbench.measure.gpu.mlp import TorchNet, build_gpu_version
from fusedbench.measure.gpu.provenance import kernel_recorder, median_kernels
from fusedbench.measure.mlp import check_gradients, init_params, load_digits_dataset, one_hot, reference_step, train
from fusedbench.measure.progress import write_progress
from fusedbench.measure.sampling import SAMPLES, sample_interleaved

WALL_SAMPLE_SECONDS = 0.02  # a wall sample runs as many steps as take about this long (small steps take ms)
MAX_STEPS_PER_SAMPLE = 50


class HostClock:
    """The wall clock of a region with the device synchronised before and after: what a loop waits for."""

    def start(self) -> None:
        synchronize()
        self._started = time.perf_counter()

    def stop(self) -> float:
        synchronize()
        return time.perf_counter() - self._started


def _out_of_memory(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower() or type(exc).__name__ == "OutOfMemoryError"


def _failure(key: CellKey, exc: Exception, device: str) -> Cell:
    """A version that raised: skipped where the GPU ran out of memory, refused where fusedbench says it cannot run,
    failed otherwise."""
    if isinstance(exc, FusedbenchError):
        return Cell.refused(key, str(exc))
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    if _out_of_memory(exc):
        return Cell.skipped(key, f"does not fit in {device}'s memory with this size's other versions ({message[:200]})")
    return Cell.failed(key, message[:500])


def _inputs_for(version, x, target):
    """The batch in the version's library: cupy's arrays as they are, or torch's view of them (DLPack)."""
    return (as_torch(x), as_torch(target)) if isinstance(version, TorchNet) else (x, target)


def measure_mlp_steps(stack: GpuStack, group: MlpGroup, *, seed: int = 0) -> tuple[list[Cell], dict[tuple, Cell]]:
    """Every cell of the step group: (the record's cells, the cache asv replays: (layers, batch, dtype, version,
    WALL or GPU_TIME) -> a cell with that clock's samples)."""
    record: list[Cell] = []
    cache: dict[tuple, Cell] = {}
    done = 0
    for layers in group.layers:
        inputs, hidden, outputs = mlp_layers(layers)
        params = init_params(inputs, hidden, outputs)
        for batch in group.batches:
            keys = {
                (dtype, name): group.cell_key(layers, batch, dtype, name)
                for dtype in group.dtypes
                for name in group.providers
            }
            try:
                x = stack.cupy.random.default_rng(seed).standard_normal((batch, inputs), dtype=stack.cupy.float32)
                labels = np.random.default_rng(seed).integers(0, outputs, batch)
                target = stack.cupy.asarray(one_hot(labels, outputs))
            except Exception as exc:
                cells = {where: _failure(key, exc, stack.device_name) for where, key in keys.items()}
            else:
                cells = {}
                for dtype in group.dtypes:
                    chosen = {name: keys[(dtype, name)] for name in group.providers}
                    left_out = MLP_LEFT_OUT.get((layers, batch, dtype))
                    if left_out:
                        measured = {name: (Cell.skipped(key, left_out), None) for name, key in chosen.items()}
                    else:
                        measured = _measure_step(stack, params, x, target, dtype, chosen)
                    for name, (wall, gpu) in measured.items():
                        cells[(dtype, name)] = wall
                        cache[(layers, batch, dtype, name, GPU_TIME)] = gpu or wall
                    done += len(chosen)
                    write_progress(group.name, done, group.cell_count, f"{layers} batch {batch} {dtype}")
                del x, target
            for (dtype, name), cell in cells.items():
                record.append(cell)
                cache[(layers, batch, dtype, name, WALL)] = cell
                cache.setdefault((layers, batch, dtype, name, GPU_TIME), cell)
            free_bytes(stack)
    return record, cache


def _measure_step(stack, params, x, target, dtype: str, keys: dict[str, CellKey]) -> dict:
    """Verify every version at one size and dtype against float64, then time those that passed together: name ->
    (the wall cell, the GPU cell or None). The reference is dropped before the timing, which needs its memory."""
    ready, out = {}, {}
    try:
        expected = reference_step(params, x, target)
    except Exception as exc:
        return {name: (_failure(key, exc, stack.device_name), None) for name, key in keys.items()}
    for name, key in keys.items():
        try:
            version = build_gpu_version(name, params, dtype, stack)
            batch = _inputs_for(version, x, target)
            version.gradients(*batch)  # plans the Matmuls and compiles the kernels; the check's call resets them
            check = check_gradients(version, *batch, expected)
        except Exception as exc:
            out[name] = (_failure(key, exc, stack.device_name), None)
            continue
        if not check.ok:
            out[name] = (Cell.failed(key, "; ".join(check.problems), error=max(check.errors.values())), None)
            continue
        ready[name] = (version, batch, check)
    del expected
    free_bytes(stack)
    wall = _wall_samples(ready)
    for name, (version, batch, check) in ready.items():
        samples, steps = wall[name]
        try:
            if isinstance(samples, Exception):
                raise samples
            kernels, gpu_samples = _gpu_samples(version, batch)
        except Exception as exc:  # this version's alone: the others keep their samples
            out[name] = (_failure(keys[name], exc, stack.device_name), None)
            continue
        provenance = {
            "steps_per_sample": steps,
            "gradient_errors": {k: float(f"{v:.3g}") for k, v in check.errors.items()},
            **kernels,
        }
        wall_cell = replace(Cell.measured(keys[name], samples), provenance=provenance)
        gpu_cell = (
            Cell.measured(keys[name], gpu_samples)
            if gpu_samples
            else Cell.skipped(keys[name], kernels.get("kernels_unrecorded", ""))
        )
        out[name] = (wall_cell, gpu_cell)
    return {name: out[name] for name in keys}


def _wall_samples(ready: dict) -> dict[str, tuple[list[float] | Exception, int]]:
    """Each ready version's wall seconds per step (SAMPLES of them) and the steps each sample ran."""
    clock, steps, runs, failed = HostClock(), {}, {}, {}
    for name, (version, batch, _) in ready.items():
        try:
            version.train_step(*batch)  # warm, once more, outside any sample
            clock.start()
            version.train_step(*batch)
            one = clock.stop()
        except Exception as exc:  # this version's alone
            failed[name] = (exc, 0)
            continue
        steps[name] = max(1, min(MAX_STEPS_PER_SAMPLE, round(WALL_SAMPLE_SECONDS / one)))
        runs[name] = _steps(version, batch, steps[name])
    sampled = sample_interleaved(runs, clock=clock, samples=SAMPLES, warmup=1)
    return failed | {
        name: (samples if isinstance(samples, Exception) else [s / steps[name] for s in samples], steps[name])
        for name, samples in sampled.items()
    }


def _steps(version, batch, count: int):
    def run() -> None:
        for _ in range(count):
            version.train_step(*batch)

    return run


def _gpu_samples(version, batch) -> tuple[dict, list[float]]:
    """({'kernels': the median step's kernels} or {'kernels_unrecorded': why}, each recorded step's kernel seconds)."""
    recorder = kernel_recorder()
    if recorder.unavailable:
        return {"kernels_unrecorded": recorder.unavailable}, []
    steps = [recorder.record(lambda: version.train_step(*batch)) for _ in range(SAMPLES)]
    return {"kernels": median_kernels(steps)}, [sum(k["us"] for k in launched) / 1e6 for launched in steps]


def measure_mlp_epochs(
    stack: GpuStack, group: MlpGroup, *, epochs: int = MLP_EPOCHS
) -> tuple[list[Cell], dict[tuple, Cell]]:
    """Every cell of the epoch group: each version verified on a digits batch, trained `epochs` epochs on digits,
    each epoch after the first a sample; a test accuracy under the bar fails the cell. The cache maps (dtype,
    version, EPOCH_TIME) to the cell."""
    (layers,), (batch,) = group.layers, group.batches
    keys = {(d, n): group.cell_key(layers, batch, d, n) for d in group.dtypes for n in group.providers}
    try:
        data = load_digits_dataset()
    except FusedbenchError as exc:
        cells = {where: Cell.skipped(key, str(exc)) for where, key in keys.items()}
    else:
        params = init_params(*mlp_layers(layers))
        x, target = data.x_train[:batch], one_hot(data.y_train[:batch])
        expected = reference_step(params, x, target)
        cells = {}
        for (dtype, name), key in keys.items():
            cells[(dtype, name)] = _trained_cell(stack, key, params, data, expected, epochs)
            write_progress(group.name, len(cells), group.cell_count, f"{name} {dtype}")
    return list(cells.values()), {(d, n, EPOCH_TIME): cell for (d, n), cell in cells.items()}


def _trained_cell(stack, key: CellKey, params, data, expected, epochs: int) -> Cell:
    batch = key.n
    try:
        version = build_gpu_version(key.provider, params, key.dtype, stack)
        x, target = version.to_device(data.x_train[:batch]), version.to_device(one_hot(data.y_train[:batch]))
        version.gradients(x, target)
        check = check_gradients(version, x, target, expected)
        if not check.ok:
            return Cell.failed(key, "; ".join(check.problems), error=max(check.errors.values()))
        trained = train(version, data, epochs=epochs, batch=batch)
    except Exception as exc:
        return _failure(key, exc, stack.device_name)
    bar = ACCURACY if key.dtype == "fp32" else ACCURACY - LOW_PRECISION_GAP
    if not trained.test_accuracy >= bar:
        return Cell.failed(key, f"test accuracy {trained.test_accuracy:.3f} after {epochs} epochs, under the bar {bar}")
    summary = trained.to_json()
    provenance = {
        "test_accuracy": trained.test_accuracy,
        "epochs": epochs,
        "steps_per_epoch": trained.steps // epochs,
        "loss_first": summary["loss_first"],
        "loss_last": summary["loss_last"],
        **trained.kernels,
    }
    return replace(Cell.measured(key, trained.epoch_seconds[1:]), provenance=provenance)
