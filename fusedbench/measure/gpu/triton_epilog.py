"""The triton peer: a Triton matmul that applies the epilog to its fp32 accumulator, autotuned per workload.

One `@triton.jit` kernel covers all 16 epilogs through compile-time flags (bias, activation, saved
aux, derivative, what is summed), so each epilog is its own specialization with nothing of the
others in it. The kernel computes D's transpose, C = D^T (N x M) = B^T @ A^T: D is column-major,
so C is row-major and every store of a tile (D, the aux outputs, the partial sums) runs along
the tile's contiguous axis, as Triton's epilogues store best (computing D itself, the column-major
stores made the membound DEFAULT cells 1.4-1.9x cuBLASLt's time on an H100). Each program computes
a BLOCK_N x BLOCK_M tile over the K loop (Triton pipelines the loads through shared memory,
`num_stages` deep, into Hopper's wgmma), then, in registers: + bias, the ReLU bit-mask or the GELU
pre-activation stored as cuBLASLt lays them out, the activation, the dReLU mask or dGELU factor
read from the aux input, and the tile stored.

The bias gradients, by what suits each:
- DRELU_BGRAD / DGELU_BGRAD (D summed over N): each tile sums its finished tokens and writes one
  fp32 partial per tile row (deterministic, no atomics); a second, small kernel adds each
  feature's partials and rounds them to D's type. Two kernels.
- BGRADA / BGRADB (A or B summed over K): the programs of the first tile row (column) add up the
  A (B) tiles they already load for the product, inside the K loop. One kernel.

The grid is either a tile per program or persistent (one program per SM walking the tiles in
grouped order): autotuning, over `CONFIGS`, picks the block shape and grid. A check verifies one
config a workload, taking them in turn, its persistent grids two programs wide so that each walks
several tiles: the small check verifies every config. Tiles are loaded
through pointers (Triton issues them as asynchronous copies); the tensor-memory accelerator's
descriptors are not used yet. Compiling happens before any timing, in parallel processes
(`precompile`, into Triton's on-disk cache), autotuning in `build_triton`; both are kept in the
cell's provenance.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fusedbench.catalog.epilogs import Activation, Derivative, Summed, gelu_aux_shape, relu_aux_shape
from fusedbench.catalog.workloads import Workload
from fusedbench.errors import Skipped, Unsupported
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.arrays import as_torch
from fusedbench.measure.gpu.operands import Operands
from fusedbench.measure.gpu.providers import PreparedProvider, aux_buffer

ACTIVATIONS = {Activation.NONE: 0, Activation.RELU: 1, Activation.GELU: 2}
DERIVATIVES = {Derivative.NONE: 0, Derivative.DRELU: 1, Derivative.DGELU: 2}
SUMS = {Summed.NONE: 0, Summed.RESULT: 1, Summed.A: 2, Summed.B: 3}
# Autotuning times each config with a short benchmark (Triton's default spends 125 ms a config).
AUTOTUNE_WARMUP_MS, AUTOTUNE_REP_MS = 5, 25
# (BLOCK_N, BLOCK_M, BLOCK_K, warps, stages, persistent): the Hopper-sized tiles that won every membound
# cell of an H100 probe, and 128x128 tiles three stages deep, small enough in shared memory (96 KB) and
# registers for two programs an SM, one's epilogue overlapping the other's loads (four stages deep, one an SM,
# they never won). fp32 operands take twice the shared memory per element, so their K blocks are halved, fp8's
# doubled.
CONFIGS_16BIT = (
    (128, 256, 64, 8, 3, False),
    (128, 256, 64, 8, 3, True),
    (256, 128, 64, 8, 3, False),
    (256, 128, 64, 8, 3, True),
    (128, 128, 64, 4, 3, False),
    (128, 128, 64, 8, 3, False),
)
CONFIGS = {
    2: CONFIGS_16BIT,
    4: tuple((n, m, k // 2, warps, stages, persistent) for n, m, k, warps, stages, persistent in CONFIGS_16BIT),
    1: tuple((n, m, k * 2, warps, stages, persistent) for n, m, k, warps, stages, persistent in CONFIGS_16BIT),
}
# A check verifies one config a workload, each in turn (`_checked_config`), so that a small check covers all
# of them; its persistent grids have CHECK_PROGRAMS programs, so that each walks several tiles as on a GPU's
# worth of SMs.
CHECK_PROGRAMS = 2
GROUP_N = 8  # tiles of this many block rows are walked column by column, so their B blocks stay in L2
PARTIAL_BLOCK = 1024  # features a program of the partial-sum kernel adds up
_INT32_LIMIT = 2**31  # the kernel's offsets are 32-bit
# Seconds each kernel took to compile in `precompile` (its key: `_kernel_key`), for the cells' provenance.
_COMPILE_SECONDS: dict[tuple, float] = {}


def describe_config(config: Any) -> str:
    """A Triton config in one line: its block shape (tokens x features x K), warps, stages and grid."""
    kwargs = config.kwargs
    grid = "persistent" if kwargs["PERSISTENT"] else "a tile per program"
    return (
        f"{kwargs['BLOCK_N']}x{kwargs['BLOCK_M']}x{kwargs['BLOCK_K']} {config.num_warps} warps "
        f"{config.num_stages} stages, {grid}"
    )


@functools.cache
def _kernels():
    """The Triton kernels, defined lazily (importing triton is the GPU side's business only)."""
    import triton
    import triton.language as tl

    def configs(table):
        return [
            triton.Config(
                {"BLOCK_N": n, "BLOCK_M": m, "BLOCK_K": k, "GROUP_N": GROUP_N, "PERSISTENT": persistent},
                num_warps=warps,
                num_stages=stages,
            )
            for n, m, k, warps, stages, persistent in table
        ]

    def light_bench(kernel_call, quantiles):
        return triton.testing.do_bench(kernel_call, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)

    @triton.jit
    def gelu_gate(x):
        # tanh-GELU through its gate s = (1 + tanh(u)) / 2 = sigmoid(2u): gelu = x s.
        return tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))

    @triton.jit
    def gelu_grad(x):
        s = gelu_gate(x)
        return s + 2.0 * x * s * (1.0 - s) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x)

    def autotuned(table):
        @triton.autotune(
            configs=configs(table),
            key=["M", "N", "K", "BIAS", "ACTIVATION", "SAVE_AUX", "DERIVATIVE", "SUMMED", "PRECISION"],
            do_bench=light_bench,
        )
        @triton.jit
        def matmul_epilog(
            a, b, d, bias, aux_in, aux_out, sums,
            M, N, K, stride_am, stride_ak, stride_bk, stride_bn, aux_in_ld, aux_out_ld,
            BIAS: tl.constexpr, ACTIVATION: tl.constexpr, SAVE_AUX: tl.constexpr, DERIVATIVE: tl.constexpr,
            SUMMED: tl.constexpr, PRECISION: tl.constexpr,
            BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_N: tl.constexpr,
            PERSISTENT: tl.constexpr,
        ):  # fmt: skip
            # C = D^T (N x M, row-major) = B^T (N x K) @ A^T (K x M): a row of C is a token, a column a feature.
            tiles_n = tl.cdiv(N, BLOCK_N)
            tiles_m = tl.cdiv(M, BLOCK_M)
            for tile in tl.range(tl.program_id(0), tiles_n * tiles_m, tl.num_programs(0)):
                per_group = GROUP_N * tiles_m
                first_n = (tile // per_group) * GROUP_N
                rows_in_group = min(tiles_n - first_n, GROUP_N)
                pid_n = first_n + (tile % per_group) % rows_in_group
                pid_m = (tile % per_group) // rows_in_group
                rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
                rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
                rk = tl.arange(0, BLOCK_K)
                bt_ptrs = b + (rn % N)[:, None] * stride_bn + rk[None, :] * stride_bk  # B^T tile, N x K
                at_ptrs = a + rk[:, None] * stride_ak + (rm % M)[None, :] * stride_am  # A^T tile, K x M
                acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
                a_sum = tl.zeros((BLOCK_M,), dtype=tl.float32)
                b_sum = tl.zeros((BLOCK_N,), dtype=tl.float32)
                for k in range(0, tl.cdiv(K, BLOCK_K)):
                    k_left = K - k * BLOCK_K
                    bt = tl.load(bt_ptrs, mask=rk[None, :] < k_left, other=0.0)
                    at = tl.load(at_ptrs, mask=rk[:, None] < k_left, other=0.0)
                    acc = tl.dot(bt, at, acc, input_precision=PRECISION)
                    # The sums load their tiles again (from L2), apart from the dot's operands: summing the
                    # dot's own B^T tile gave BGRADB a wrong D at (128,64)x(64,96) on an H100 (Triton 3.6).
                    if SUMMED == 2:  # noqa: SIM102 (a constexpr test, then a run-time one)
                        if pid_n == 0:
                            again = tl.load(at_ptrs, mask=rk[:, None] < k_left, other=0.0)
                            a_sum += tl.sum(again.to(tl.float32), axis=0)
                    if SUMMED == 3:  # noqa: SIM102
                        if pid_m == 0:
                            again = tl.load(bt_ptrs, mask=rk[None, :] < k_left, other=0.0)
                            b_sum += tl.sum(again.to(tl.float32), axis=1)
                    bt_ptrs += BLOCK_K * stride_bk
                    at_ptrs += BLOCK_K * stride_ak
                token_ok = rn < N
                feature_ok = rm < M
                inside = token_ok[:, None] & feature_ok[None, :]
                pre = acc
                if BIAS:
                    pre += tl.load(bias + rm, mask=feature_ok, other=0.0).to(tl.float32)[None, :]
                if SAVE_AUX:
                    if ACTIVATION == 1:
                        # cuBLASLt's bit-mask: bit i % 8 of byte (i // 8, j) is set where D's pre[i, j] >= 0.
                        bits = ((pre >= 0) & inside).to(tl.int32)
                        weights = (1 << tl.arange(0, 8))[None, None, :]
                        packed = tl.sum(tl.reshape(bits, (BLOCK_N, BLOCK_M // 8, 8)) * weights, axis=2)
                        byte = pid_m * (BLOCK_M // 8) + tl.arange(0, BLOCK_M // 8)
                        tl.store(
                            aux_out + rn[:, None] * aux_out_ld + byte[None, :],
                            packed.to(tl.uint8),
                            mask=token_ok[:, None] & (byte * 8 < M)[None, :],
                        )
                    else:
                        tl.store(
                            aux_out + rn[:, None] * aux_out_ld + rm[None, :],
                            pre.to(aux_out.dtype.element_ty),
                            mask=inside,
                        )
                out = pre
                if ACTIVATION == 1:
                    out = tl.where(pre < 0, 0.0, pre)
                if ACTIVATION == 2:
                    out = pre * gelu_gate(pre)
                if DERIVATIVE == 1:
                    # The tile's mask bytes, each loaded once, then spread into their 8 bits (loading a byte per
                    # element made DRELU 2.3-2.9x cuBLASLt's time on an H100).
                    byte = pid_m * (BLOCK_M // 8) + tl.arange(0, BLOCK_M // 8)
                    mask_bytes = tl.load(
                        aux_in + rn[:, None] * aux_in_ld + byte[None, :],
                        mask=token_ok[:, None] & (byte * 8 < M)[None, :],
                        other=0,
                    )
                    bits = (mask_bytes.to(tl.int32)[:, :, None] >> tl.arange(0, 8)[None, None, :]) & 1
                    out = tl.where(tl.reshape(bits, (BLOCK_N, BLOCK_M)) != 0, out, 0.0)
                if DERIVATIVE == 2:
                    x = tl.load(aux_in + rn[:, None] * aux_in_ld + rm[None, :], mask=inside, other=0.0)
                    out = out * gelu_grad(x.to(tl.float32))
                if SUMMED == 1:
                    tl.store(sums + pid_n * M + rm, tl.sum(tl.where(inside, out, 0.0), axis=0), mask=feature_ok)
                if SUMMED == 2:  # noqa: SIM102
                    if pid_n == 0:
                        tl.store(sums + rm, a_sum.to(sums.dtype.element_ty), mask=feature_ok)
                if SUMMED == 3:  # noqa: SIM102
                    if pid_m == 0:
                        tl.store(sums + rn, b_sum.to(sums.dtype.element_ty), mask=token_ok)
                tl.store(d + rn[:, None] * M + rm[None, :], out.to(d.dtype.element_ty), mask=inside)

        return matmul_epilog

    @triton.jit
    def add_partials(partials, out, M, PARTS, BLOCK: tl.constexpr):
        rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        total = tl.zeros((BLOCK,), dtype=tl.float32)
        for part in range(0, PARTS):
            total += tl.load(partials + part * M + rm, mask=rm < M, other=0.0)
        tl.store(out + rm, total.to(out.dtype.element_ty), mask=rm < M)

    return {
        "triton": triton,
        "tables": {itemsize: autotuned(table) for itemsize, table in CONFIGS.items()},
        "add_partials": add_partials,
    }


def _launch_signature(workload: Workload) -> tuple[tuple[str, ...], tuple[int, ...], dict[str, Any]]:
    """What one workload's kernel is compiled for, from the workload alone: the torch dtype names of its seven
    pointers (a, b, d, bias, aux_in, aux_out, sums; D's stands in for the unused), its integer arguments in the
    layouts fusedbench.measure.gpu.operands draws, and its compile-time flags."""
    spec, dtype, m, k, n = workload.epilog, workload.dtype, workload.m, workload.k, workload.n
    result = dtype.result
    a_strides, b_strides = ((k, 1), (1, k)) if spec.layout == "TN" else ((1, m), (n, 1))
    aux_in, aux_in_ld = result, 0
    if spec.derivative is Derivative.DRELU:
        aux_in, aux_in_ld = "uint8", relu_aux_shape(m, n)[0]
    elif spec.derivative is Derivative.DGELU:
        aux_in_ld = gelu_aux_shape(m, n)[0]
    aux_out, aux_out_ld = result, 0
    if spec.saves_aux and spec.activation is Activation.RELU:
        aux_out, aux_out_ld = "uint8", relu_aux_shape(m, n)[0]
    elif spec.saves_aux:
        aux_out_ld = gelu_aux_shape(m, n)[0]
    sums = "float32" if spec.summed is Summed.RESULT else result  # D's bias gradient: fp32 partials
    pointers = (dtype.operand, dtype.operand, result, result, aux_in, aux_out, sums)
    integers = (m, n, k, *a_strides, *b_strides, aux_in_ld, aux_out_ld)
    flags = {
        "BIAS": spec.bias,
        "ACTIVATION": ACTIVATIONS[spec.activation],
        "SAVE_AUX": spec.saves_aux,
        "DERIVATIVE": DERIVATIVES[spec.derivative],
        "SUMMED": SUMS[spec.summed],
        # fp32 multiplies in fp32 ("ieee"), tf32 in TF32; 16-bit and fp8 operands have one precision (None).
        "PRECISION": {"fp32": "ieee", "tf32": "tf32"}.get(dtype.name),
    }
    return pointers, integers, flags


def _kernel_key(workload: Workload, config_index: int) -> tuple:
    """What tells two compiled kernels apart: Triton specializes integers on being 1 or a multiple of 16."""
    pointers, integers, flags = _launch_signature(workload)
    shape_class = tuple((i == 1, i % 16 == 0) for i in integers)
    return (pointers, shape_class, tuple(flags.items()), workload.dtype.operand_itemsize, config_index)


def _candidates(workload: Workload, timed: bool) -> list[int]:
    """The configs a workload's cell compiles: every one to autotune among, or the one a check verifies."""
    count = len(CONFIGS[workload.dtype.operand_itemsize])
    return list(range(count)) if timed else [workload.in_turn(count)]


def _too_large(workload: Workload) -> bool:
    """Whether a tensor of the workload (A, B, D, the GELU aux's padded rows) has too many elements for the kernel's
    32-bit offsets."""
    m, k, n = workload.m, workload.k, workload.n
    return max(m * k, k * n, gelu_aux_shape(m, n)[0] * n) >= _INT32_LIMIT


class KernelFault(Exception):
    """The triton peer went wrong in a way no library refusal explains (a fault at run time, operands laid out
    otherwise than its signature says): a failed cell, never an unsupported one."""


def _compile(workload: Workload, config_index: int) -> tuple[tuple, float, str]:
    """Compile one kernel without launching it (Triton's warm-up takes dtypes for tensors): its key, the seconds
    it took, and the error it raised, if any (which the builder then meets again, in its own process)."""
    try:
        import torch

        kernel = _kernels()["tables"][workload.dtype.operand_itemsize]
        pointers, integers, flags = _launch_signature(workload)
        config = kernel.configs[config_index]
        dtypes = [getattr(torch, name) for name in pointers]
        started = time.perf_counter()  # after the imports, which the first kernel of a process would pay
        kernel.fn.warmup(*dtypes, *integers, grid=(1,), **flags, **config.all_kwargs())
        return _kernel_key(workload, config_index), time.perf_counter() - started, ""
    except Exception as exc:
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return _kernel_key(workload, config_index), math.nan, error


def _compile_batch(jobs_path: str, out_path: str) -> None:
    """A compiling process's work: compile the pickled jobs, pickle what each took (python -c, from precompile)."""
    with open(jobs_path, "rb") as jobs:
        compiled = [_compile(workload, index) for workload, index in pickle.load(jobs)]
    with open(out_path, "wb") as out:
        pickle.dump(compiled, out)


def precompile(workloads: list[Workload], *, timed: bool) -> None:
    """Compile every kernel the workloads' cells need, in parallel processes (one per CPU), into Triton's on-disk
    cache, so that each builder finds its kernels compiled. Compiling one takes a second or two of CPU, and a
    peers group needs a hundred. The processes are fresh interpreters (python -c): a forked CUDA context is
    unusable, and multiprocessing's spawn would import the caller's main script again."""
    jobs, seen = [], set()
    for workload in workloads:
        if _too_large(workload):
            continue
        for index in _candidates(workload, timed):
            key = _kernel_key(workload, index)
            if key not in seen and key not in _COMPILE_SECONDS:
                seen.add(key)
                jobs.append((workload, index))
    if not jobs or importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
        return  # nothing to compile, or the builder says why it cannot
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    code = f"from {__name__} import _compile_batch; import sys; _compile_batch(sys.argv[1], sys.argv[2])"
    with tempfile.TemporaryDirectory(prefix="fusedbench-triton-") as folder:
        processes = []
        for worker in range(workers):
            jobs_path, out_path = (os.path.join(folder, f"{worker}.{end}") for end in ("jobs", "out"))
            with open(jobs_path, "wb") as batch:
                pickle.dump(jobs[worker::workers], batch)
            command = [sys.executable, "-c", code, jobs_path, out_path]
            quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
            processes.append((subprocess.Popen(command, **quiet), out_path))
        failed = []
        for process, out_path in processes:
            # A process that failed leaves its kernels to the builders, which compile them (or meet the error).
            if process.wait() != 0 or not os.path.exists(out_path):
                failed.append(f"a compiling process exited {process.returncode}")
                continue
            with open(out_path, "rb") as out:
                for key, seconds, error in pickle.load(out):
                    if error:
                        failed.append(error)
                    else:
                        _COMPILE_SECONDS[key] = seconds
    if failed:  # said once, on stderr (asv's log); each builder then compiles its own, or refuses with the error
        print(f"triton precompile: {len(failed)} of {len(jobs)} kernels not compiled ahead: {failed[0]}",
              file=sys.stderr)  # fmt: skip


def _triton_errors(triton) -> tuple[type[BaseException], ...]:
    """What Triton raises when it cannot compile or fit a kernel: a refusal, like a library's."""
    errors: list[type[BaseException]] = []
    for module, name in (("triton.compiler.errors", "CompilationError"), ("triton.runtime.errors", "OutOfResources")):
        try:
            errors.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):
            continue
    return tuple(errors)  # none found: nothing of Triton's is taken for a refusal


def build_triton(stack: GpuStack, operands: Operands, *, timed: bool = True) -> PreparedProvider:
    """The Triton matmul with the epilog in its accumulator, compiled (or found compiled by `precompile`) and
    autotuned here, before any timing. A check (`timed=False`) compiles one config and verifies it."""
    if stack.torch is None:
        raise Skipped("the triton peer needs torch with CUDA (Triton comes with it); install fusedbench[torch]")
    try:
        kernels = _kernels()
    except ImportError as exc:
        raise Skipped(f"the triton peer needs triton ({exc}); it comes with torch on Linux") from None
    torch, triton = stack.torch, kernels["triton"]
    workload = operands.workload
    spec, m, n = workload.epilog, workload.m, workload.n
    if _too_large(workload):
        raise Unsupported(f"the triton peer indexes with 32-bit offsets; {workload.label} has 2^31+ elements")
    buffers = _Buffers.of(torch, triton, operands)
    _, integers, flags = _launch_signature(workload)
    if buffers.strides != integers[3:]:
        raise KernelFault(f"the triton peer expected strides {integers[3:]}, the operands have {buffers.strides}")
    arguments = (*buffers.pointers, *integers)
    kernel = kernels["tables"][workload.dtype.operand_itemsize]
    candidates = _candidates(workload, timed)
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def grid(meta):
        tiles = triton.cdiv(n, meta["BLOCK_N"]) * triton.cdiv(m, meta["BLOCK_M"])
        return (min(tiles, sms if timed else CHECK_PROGRAMS) if meta["PERSISTENT"] else tiles,)

    chosen = _choose_config(torch, triton, kernel, candidates, arguments, flags, grid, timed)
    config, product = chosen.config, chosen.product
    # Compile seconds from precompile's processes where it compiled these kernels; else this process's own.
    compiled = [_COMPILE_SECONDS.get(_kernel_key(workload, index)) for index in candidates]
    compile_s = sum(compiled) if None not in compiled else chosen.compile_s
    launches = [product]
    if spec.summed is Summed.RESULT:
        parts = triton.cdiv(n, config.kwargs["BLOCK_N"])
        partial_grid = (triton.cdiv(m, PARTIAL_BLOCK),)
        add, sums, bgrad = kernels["add_partials"], buffers.pointers[6], buffers.bgrad
        launches.append(lambda: add[partial_grid](sums, bgrad, m, parts, BLOCK=PARTIAL_BLOCK))
    outputs = buffers.outputs

    def run():
        for launch in launches:
            launch()
        return outputs

    provenance = {
        "algorithm": describe_config(config),
        "chosen_by": f"triton autotune over {len(candidates)} configs" if timed else "the check's one config",
        "compile_s": round(compile_s, 3),  # the kernels it autotuned among; shared with the dtype's other shapes
        "autotune_s": round(chosen.autotune_s, 3),
    }
    return PreparedProvider(run, tuple(outputs.values()), provenance=provenance)


@dataclass(frozen=True)
class _Buffers:
    """The kernel's pointer arguments (A, B, D, bias, aux in, aux out, sums), with D's pointer standing in for what
    the epilog does not use; the outputs the provider returns; and where an fp32 bias gradient lands."""

    pointers: tuple
    outputs: dict[str, Any]
    strides: tuple[int, ...]
    bgrad: Any = None

    @classmethod
    def of(cls, torch, triton, operands: Operands) -> _Buffers:
        workload = operands.workload
        spec, m, n = workload.epilog, workload.m, workload.n
        a, b, d = as_torch(operands.a), as_torch(operands.b), as_torch(operands.result)
        bias, aux_in, aux_out, sums = d, d, d, d
        if spec.bias:
            bias = as_torch(operands.bias)
        if spec.derivative is not Derivative.NONE:
            aux_in = as_torch(operands.relu_aux if spec.derivative is Derivative.DRELU else operands.gelu_aux)
        outputs: dict[str, Any] = {"result": operands.result}
        if spec.saves_aux:
            outputs[spec.outputs[0]] = aux = aux_buffer(operands, spec)
            aux_out = as_torch(aux)
        if spec.summed is not Summed.NONE:
            outputs[spec.outputs[-1]] = summed = operands.empty_vector(n if spec.summed is Summed.B else m)
            sums = as_torch(summed)
        bgrad = None
        if spec.summed is Summed.RESULT:  # fp32 partials: a row per tile row of C, for the smallest BLOCK_N
            bgrad = sums
            most_parts = triton.cdiv(n, min(config[0] for config in CONFIGS[workload.dtype.operand_itemsize]))
            sums = torch.empty((most_parts, m), dtype=torch.float32, device="cuda")
        strides = (
            *a.stride(),
            *b.stride(),
            aux_in.stride(1) if aux_in is not d else 0,
            aux_out.stride(1) if spec.saves_aux else 0,
        )
        return cls((a, b, d, bias, aux_in, aux_out, sums), outputs, strides, bgrad)


@dataclass(frozen=True)
class _Chosen:
    config: Any  # triton.Config
    product: Callable[[], None]  # the chosen config launched directly: no autotuner in the hot call
    compile_s: float
    autotune_s: float


def _choose_config(torch, triton, kernel, candidates, arguments, flags, grid, timed: bool) -> _Chosen:
    """Compile the candidate configs (or load what precompile left in Triton's cache), let the autotuner time them
    and keep the best (a check takes the first), and launch it once; a refusal is Unsupported, a fault KernelFault."""
    started = time.perf_counter()
    try:
        for index in candidates:
            kernel.fn.warmup(*arguments, grid=(1,), **flags, **kernel.configs[index].all_kwargs())
        loaded = time.perf_counter()
        if timed:
            kernel[grid](*arguments, **flags)  # the autotuner times the compiled configs and keeps the best
        config = kernel.best_config if timed else kernel.configs[candidates[0]]
        settings = {**flags, **config.all_kwargs()}

        def product():
            kernel.fn[grid](*arguments, **settings)

        product()
        torch.cuda.synchronize()
    except _triton_errors(triton) as exc:
        message = " ".join(str(exc).split())[:300]
        raise Unsupported(f"Triton cannot build this kernel: {type(exc).__name__}: {message}") from exc
    except RuntimeError as exc:  # a CUDA fault in our kernel, say: no refusal (prepare_provider would make it one)
        raise KernelFault(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from exc
    return _Chosen(config, product, loaded - started, time.perf_counter() - loaded)
