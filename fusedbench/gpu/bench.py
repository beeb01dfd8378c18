"""Measure a benchmark group on the GPU: every provider of every workload, in one CUDA context.

Called from asv's `setup_cache` (benchmarks/cells.py). A workload's providers are prepared
together, warmed up, then timed in interleaved rounds (one call of each per round, in a
carryover-balanced order) with CUDA events, L2 flushed before every sample (every cell is
measured cold). The result is plain data (picklable) that asv hands to each cell's process.
"""

from __future__ import annotations

import gc
import json
import os
import time

from fusedbench.errors import Skipped, Unsupported
from fusedbench.files import write_text_atomically
from fusedbench.gpu import GpuStack, load_gpu_stack
from fusedbench.gpu.operands import make_operands
from fusedbench.gpu.providers import prepare_provider
from fusedbench.measure import (
    CEILING_COPY_BYTES,
    CEILING_GEMM_SHAPE,
    SAMPLES,
    CudaEventClock,
    L2Flusher,
    sample_interleaved,
)
from fusedbench.suites import PROGRESS_SUFFIX, STATUS_DIR_VARIABLE, BenchmarkGroup

WARMUP_ROUNDS = 1  # one call of every provider, on top of the warm-up call in prepare_provider
WARMUP_SECONDS = 0.05  # and at least this much GPU time: raises the SM clock after the host-side set-up
# D-sized buffers beyond the operands while a workload's providers are all prepared: the
# textbook's temporaries, the unfused pass's aux buffer, the aux outputs nvmath allocates per call.
MEMORY_HEADROOM = 6


def _free_bytes(stack: GpuStack) -> int:
    """Free device memory after returning every cached block to the driver."""
    stack.cupy.get_default_memory_pool().free_all_blocks()
    if stack.torch is not None:
        stack.torch.cuda.empty_cache()
    free, _ = stack.cupy.cuda.runtime.memGetInfo()
    return int(free)


def _needed_bytes(workload) -> int:
    spec, dtype = workload.epilog, workload.dtype
    fused = spec.fused_bytes(workload.m, workload.k, workload.n, dtype.operand_itemsize, dtype.result_itemsize)
    return fused + MEMORY_HEADROOM * workload.m * workload.n * dtype.result_itemsize


def _cell(status: str, reason: str = "", samples: list[float] | None = None) -> dict:
    return {"status": status, "reason": reason, "samples": samples or [], "cold_l2": True}


def measure_group(group: BenchmarkGroup, *, seed: int = 0) -> dict:
    """Time every cell of `group`; returns {"device": name, "cells": {(epilog, shape, provider): cell}}."""
    started = time.perf_counter()
    stack = load_gpu_stack("the fusedbench asv suite")
    clock, flush = CudaEventClock(stack.cupy), L2Flusher(stack.cupy)
    cells: dict[tuple[str, str, str], dict] = {}
    for index, workload in enumerate(group.workloads()):
        keys = [(workload.epilog.name, workload.shape, provider) for provider in group.providers]
        free, needed = _free_bytes(stack), _needed_bytes(workload)
        if needed > free:  # collect cycles only then: gc.collect() costs 0.1 s with torch loaded
            gc.collect()
            free = _free_bytes(stack)
        if needed > free:
            reason = f"needs about {needed / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free on {stack.device_name}"
            cells.update((key, _cell("skipped", reason)) for key in keys)
            continue
        try:
            operands = make_operands(stack, workload, seed + index)
        except Skipped as exc:
            cells.update((key, _cell("skipped", exc.reason)) for key in keys)
            continue
        measured = _measure_workload(stack, operands, group.providers, clock, flush, order_seed=seed + index)
        cells.update((key, measured[provider]) for key, provider in zip(keys, group.providers, strict=True))
        del operands
        _write_progress(group, len(cells), workload.label)
    report = {"device": stack.device_name, "cells": cells, "seconds": time.perf_counter() - started}
    _write_status(group, report)
    return report


def _measure_workload(stack: GpuStack, operands, providers, clock, flush, order_seed: int = 0) -> dict[str, dict]:
    """Prepare every provider of one workload, then time them together (`sample_interleaved`)."""
    cells, prepared = {}, {}
    try:
        for provider in providers:
            try:
                prepared[provider] = prepare_provider(provider, stack, operands)
            except Unsupported as exc:
                cells[provider] = _cell("unsupported", exc.reason)
            except Skipped as exc:
                cells[provider] = _cell("skipped", exc.reason)
            except Exception as exc:  # reported as a failed cell, never hidden
                cells[provider] = _cell("failed", f"{type(exc).__name__}: {exc}")
        timed = sample_interleaved(
            {provider: ready.run for provider, ready in prepared.items()},
            clock=clock,
            samples=SAMPLES,
            warmup=WARMUP_ROUNDS,
            warmup_seconds=WARMUP_SECONDS,
            between_samples=flush,
            order_seed=order_seed,
        )
    finally:
        for ready in prepared.values():
            ready.release()
    for provider, samples in timed.items():
        if isinstance(samples, Exception):
            cells[provider] = _cell("failed", f"{type(samples).__name__}: {samples}")
        else:
            cells[provider] = _cell("ok", samples=samples)
    return cells


def _write_progress(group: BenchmarkGroup, done: int, last: str) -> None:
    """Tell `fusedbench run`, which cannot see inside asv's setup_cache, how far the group is."""
    folder = os.environ.get(STATUS_DIR_VARIABLE)
    if folder:
        payload = {"group": group.name, "done": done, "total": group.cell_count, "last": last}
        write_text_atomically(os.path.join(folder, f"{group.name}{PROGRESS_SUFFIX}"), json.dumps(payload))


def _write_status(group: BenchmarkGroup, report: dict) -> None:
    """Leave every cell's status and reason where `fusedbench run` collects them (asv keeps no reasons)."""
    folder = os.environ.get(STATUS_DIR_VARIABLE)
    if not folder:
        return
    records = [
        {"group": group.name, "epilog": e, "shape": s, "provider": p, "status": c["status"], "reason": c["reason"]}
        for (e, s, p), c in report["cells"].items()
    ]
    payload = {"device": report["device"], "seconds": round(report["seconds"], 1), "cells": records}
    write_text_atomically(os.path.join(folder, f"{group.name}.json"), json.dumps(payload))


def measure_gemm_ceilings(dtypes: list[str], *, seed: int = 0) -> dict[str, dict]:
    """The gemm provider's time per dtype at CEILING_GEMM_SHAPE."""
    from fusedbench.catalog import Workload
    from fusedbench.dtypes import dtype_spec
    from fusedbench.epilogs import EPILOGS, Epilog

    stack = load_gpu_stack("the fusedbench asv suite")
    clock, flush = CudaEventClock(stack.cupy), L2Flusher(stack.cupy)
    cells = {}
    for dtype in dtypes:
        workload = Workload(EPILOGS[Epilog.DEFAULT], dtype_spec(dtype), *CEILING_GEMM_SHAPE)
        try:
            operands = make_operands(stack, workload, seed)
        except Skipped as exc:
            cells[dtype] = _cell("skipped", exc.reason)
            continue
        cells[dtype] = _measure_workload(stack, operands, ["gemm"], clock, flush)["gemm"]
        del operands
    return cells


def measure_copy_ceiling() -> dict:
    """A CEILING_COPY_BYTES device-to-device copy (cupy copies contiguous arrays with cudaMemcpy)."""
    stack = load_gpu_stack("the fusedbench asv suite")
    clock, flush = CudaEventClock(stack.cupy), L2Flusher(stack.cupy)
    source = stack.cupy.empty(CEILING_COPY_BYTES, dtype=stack.cupy.uint8)
    target = stack.cupy.empty_like(source)
    samples = sample_interleaved(
        {"copy": lambda: target.__setitem__(Ellipsis, source)},
        clock=clock,
        samples=SAMPLES,
        warmup=WARMUP_ROUNDS,
        warmup_seconds=WARMUP_SECONDS,
        between_samples=flush,
    )["copy"]
    if isinstance(samples, Exception):
        return _cell("failed", f"{type(samples).__name__}: {samples}")
    return _cell("ok", samples=samples)
