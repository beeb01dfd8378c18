"""Measure a benchmark group on the GPU: every provider of every workload, in one CUDA context.

Called from asv's `setup_cache` (through `fusedbench.measure.asv_bridge`). A workload's providers are
prepared together, warmed up, then timed in interleaved rounds (one call of each per round, in a
carryover-balanced order) with CUDA events, each call after the protocol's lead-in and an L2 flush
(every cell is measured cold, the GPU in a defined power state), its clock, power and clock-event
reasons read around it; then each provider's call runs three times more with CUPTI recording its
kernels (`gpu.provenance`). The result is a list of `model.Cell`s (picklable) that asv hands to each
cell's process.
"""

from __future__ import annotations

import gc
from dataclasses import replace

from fusedbench.catalog.epilogs import EPILOGS, Epilog
from fusedbench.catalog.injection import Injection
from fusedbench.catalog.model import Cell, CellKey
from fusedbench.catalog.providers import UNFUSED
from fusedbench.catalog.suites import CEILING_COPY_BYTES, CEILING_GEMM_SHAPE, BenchmarkGroup
from fusedbench.catalog.tuning import Tuning
from fusedbench.catalog.workloads import Workload
from fusedbench.errors import Skipped, Unsupported
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.operands import make_operands
from fusedbench.measure.gpu.provenance import kernel_provenance
from fusedbench.measure.gpu.providers import precompile_providers, prepare_provider
from fusedbench.measure.gpu.timing import Timing
from fusedbench.measure.progress import write_progress
from fusedbench.measure.sampling import PROTOCOL, Protocol

# D-sized buffers beyond the operands while a workload's providers are all prepared: the
# textbook's results and temporaries, the unfused pass's aux buffer, the aux outputs nvmath
# allocates per call. The textbook's copies of A and B in the blog's layout come on top.
MEMORY_HEADROOM = 6


def free_bytes(stack: GpuStack) -> int:
    """Free device memory after returning every cached block to the driver."""
    stack.cupy.get_default_memory_pool().free_all_blocks()
    if stack.torch is not None:
        stack.torch.cuda.empty_cache()
    free, _ = stack.cupy.cuda.runtime.memGetInfo()
    return int(free)


def _needed_bytes(workload: Workload) -> int:
    spec, dtype = workload.epilog, workload.dtype
    fused = spec.fused_bytes(workload.m, workload.k, workload.n, dtype.operand_itemsize, dtype.result_itemsize)
    textbook_copies = (workload.m + workload.n) * workload.k * dtype.operand_itemsize
    return fused + textbook_copies + MEMORY_HEADROOM * workload.m * workload.n * dtype.result_itemsize


def measure_group(
    stack: GpuStack,
    group: BenchmarkGroup,
    *,
    seed: int = 0,
    tuning: Tuning | None = None,
    injection: Injection | None = None,
    protocol: Protocol = PROTOCOL,
) -> list[Cell]:
    """Time every cell of `group` (one provider tuned, or chosen cells slowed on purpose, where asked): a Cell per
    (workload, provider), catalog order."""
    precompile_providers(list(group.providers), group.workloads(), timed=True)
    timing = Timing.open(stack, protocol, stretch=injection is not None)
    try:
        return _measure_workloads(stack, group, timing, seed, tuning, injection)
    finally:
        timing.close()


def _measure_workloads(
    stack: GpuStack, group: BenchmarkGroup, timing: Timing, seed: int, tuning, injection
) -> list[Cell]:
    cells: list[Cell] = []
    workloads = group.workloads()
    for index, workload in enumerate(workloads):
        keys = workload.cell_keys(group.providers)
        try:
            operands = workload_operands(stack, workload, seed + index)
        except Skipped as exc:
            cells.extend(Cell.skipped(key, exc.reason) for key in keys)
            continue
        slower = {key.provider: injection.fraction(key, group.name) for key in keys} if injection else {}
        cells.extend(
            _measure_workload(stack, operands, keys, timing, order_seed=seed + index, tuning=tuning, slower=slower)
        )
        del operands
        write_progress(group.name, len(cells), group.cell_count, workload.label)
    return cells


def workload_operands(stack: GpuStack, workload: Workload, seed: int):
    """The workload's operands, where its providers will fit in the GPU's free memory beside them (Skipped, saying
    how much, where not)."""
    free, needed = free_bytes(stack), _needed_bytes(workload)
    if needed > free:  # collect cycles only then: gc.collect() costs 0.1 s with torch loaded
        gc.collect()
        free = free_bytes(stack)
    if needed > free:
        raise Skipped(f"needs about {needed / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free on {stack.device_name}")
    return make_operands(stack, workload, seed)


def prepare_all(stack: GpuStack, operands, keys: list[CellKey], tuning: Tuning | None = None) -> tuple[dict, dict]:
    """Every provider of one workload ready to call (name -> prepared; release each when done), and a Cell for
    each that refused, was skipped or failed while preparing."""
    prepared, cells = {}, {}
    for key in keys:
        try:
            prepared[key.provider] = prepare_provider(key.provider, stack, operands, tuning)
        except Unsupported as exc:
            cells[key.provider] = Cell.refused(key, exc.reason)
        except Skipped as exc:
            cells[key.provider] = Cell.skipped(key, exc.reason)
        except Exception as exc:  # reported as a failed cell, never hidden
            cells[key.provider] = Cell.failed(key, f"{type(exc).__name__}: {exc}")
    return prepared, cells


def _measure_workload(
    stack: GpuStack,
    operands,
    keys: list[CellKey],
    timing: Timing,
    order_seed: int = 0,
    tuning: Tuning | None = None,
    slower: dict[str, float] | None = None,
) -> list[Cell]:
    """Prepare every provider of one workload, then time them together (`sample_interleaved`; `slower`: provider ->
    the fraction its samples are stretched by, an injected slowdown)."""
    by_provider = {key.provider: key for key in keys}
    prepared: dict = {}
    try:
        prepared, cells = prepare_all(stack, operands, keys, tuning)
        runs = {provider: ready.run for provider, ready in prepared.items()}
        timed = timing.sample(runs, order_seed, slower={p: f for p, f in (slower or {}).items() if f > 0 and p in runs})
        telemetry = {provider: timing.probe.take(provider) for provider in timed}
        # After the timing, so CUPTI is off while samples are taken.
        kernels = {
            provider: kernel_provenance(prepared[provider].run, timing.flush)
            for provider, samples in timed.items()
            if not isinstance(samples, Exception)
        }
    finally:
        for ready in prepared.values():
            ready.release()
    if UNFUSED in kernels and "kernels" in kernels[UNFUSED]:
        kernels[UNFUSED] |= same_size_copy(stack, operands.workload, timing.flush)
    for provider, samples in timed.items():
        key = by_provider[provider]
        if isinstance(samples, Exception):
            cells[provider] = Cell.failed(key, f"{type(samples).__name__}: {samples}")
        else:
            provenance = {**prepared[provider].provenance, **kernels[provider]}
            cells[provider] = replace(Cell.measured(key, samples), provenance=provenance, telemetry=telemetry[provider])
    return [cells[provider] for provider in by_provider]


def same_size_copy(stack: GpuStack, workload: Workload, before) -> dict:
    """The unfused passes' bytes moved by one device-to-device copy (the copy ceiling's cudaMemcpy), timed like
    their kernels (cold, CUPTI): what a pass of that size can reach. Passes that move as much as the ceiling's
    copy or more are left to the ceiling."""
    spec, dtype = workload.epilog, workload.dtype
    moved = spec.unfused_extra_bytes(workload.m, workload.k, workload.n, dtype.operand_itemsize, dtype.result_itemsize)
    if not 0 < moved < 2 * CEILING_COPY_BYTES:
        return {}
    try:
        source = stack.cupy.empty(moved // 2, dtype=stack.cupy.uint8)  # read once, written once; any bytes do
        target = stack.cupy.empty_like(source)
    except stack.cupy.cuda.memory.OutOfMemoryError:
        return {}  # the cell keeps its own record; only the comparison is missing
    copied = kernel_provenance(lambda: target.__setitem__(Ellipsis, source), before, copies=True)
    if not copied.get("kernels"):
        return {}  # CUPTI gave no memcpy record: no comparison rather than a zero time
    return {"same_size_copy": {"bytes": moved, "us": sum(copy["us"] for copy in copied["kernels"])}}


def measure_gemm_ceilings(stack: GpuStack, dtypes: list[str], *, seed: int = 0) -> dict[str, Cell]:
    """The gemm provider's time per dtype at CEILING_GEMM_SHAPE."""
    from fusedbench.catalog.dtypes import dtype_spec

    timing = Timing.open(stack)
    cells = {}
    try:
        for dtype in dtypes:
            workload = Workload(EPILOGS[Epilog.DEFAULT], dtype_spec(dtype), *CEILING_GEMM_SHAPE)
            (key,) = workload.cell_keys(["gemm"])
            try:
                operands = make_operands(stack, workload, seed)
            except Skipped as exc:
                cells[dtype] = Cell.skipped(key, exc.reason)
                continue
            (cells[dtype],) = _measure_workload(stack, operands, [key], timing)
            del operands
    finally:
        timing.close()
    return cells


def measure_copy_ceiling(stack: GpuStack) -> list[float] | Exception:
    """Samples of a CEILING_COPY_BYTES device-to-device copy (cupy copies contiguous arrays with cudaMemcpy)."""
    source = stack.cupy.empty(CEILING_COPY_BYTES, dtype=stack.cupy.uint8)
    target = stack.cupy.empty_like(source)
    timing = Timing.open(stack)
    try:
        return timing.sample({"copy": lambda: target.__setitem__(Ellipsis, source)})["copy"]
    finally:
        timing.close()
