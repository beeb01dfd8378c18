"""The torch-compile peer: the epilog written as torch code and fused by Inductor, `torch.compile`'s compiler.

What a PyTorch user gets by writing the layer and letting the compiler fuse it. The epilog is written
in nn.Linear's frame, tokens x features: y = x @ w^T (x = B^T, N x K; w = A, M x K), so y (N x M,
row-major) is D^T and D stays column-major as every provider writes it; then + bias, cuBLASLt's
ReLU bit-mask packed from y >= 0 or the GELU pre-activation padded to cuBLASLt's rows, relu / tanh-GELU,
the dReLU mask unpacked from the aux input's bits or `aten.gelu_backward` against the pre-activation,
and the bias gradient as an fp32 sum. fp8 multiplies with `torch._scaled_mm` (unit scales, bf16 D).

Timed cells compile with mode="max-autotune-no-cudagraphs": Inductor benchmarks its Triton GEMM
templates against cuBLAS and fuses the pointwise tail into a template's epilogue where it can
(a reduction, like the bit-mask's or the bias gradient's, runs as a kernel of its own). CUDA graphs,
which "max-autotune" adds, are left out: every other provider launches its kernels one by one, and a
graph would take launch overhead off this one alone (its replays also overwrite the previous call's
outputs). A check compiles in the default mode (max-autotune only where timed, where it costs
seconds a cell): cuBLAS's GEMM and Inductor's kernels for the rest. The timed build, whose kernels
the check never ran, is verified at the timed shape against the same code run eagerly
(`verify_against_eager`). Compiling (tracing, code generation, autotuning) happens in the builder,
before any timing; its seconds are kept in the cell's provenance.
"""

from __future__ import annotations

import re
import time
import warnings

from fusedbench.catalog.epilogs import Activation, Derivative, EpilogSpec, Summed, gelu_aux_shape, relu_aux_shape
from fusedbench.errors import Skipped, Unsupported
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.arrays import as_torch
from fusedbench.measure.gpu.operands import Operands
from fusedbench.measure.gpu.providers import PreparedProvider

TIMED_MODE = "max-autotune-no-cudagraphs"
CHECK_MODE = "default"
# Inductor's timers of its benchmarking: mm_template_autotuning, benchmark_fused_nodes,
# CachingAutotuner.benchmark_all_configs, CachingAutotuner.coordinate_descent_tuning (torch 2.11).
_AUTOTUNING_TIMER = re.compile(r"autotuning|benchmark_|coordinate_descent")
# The share of the ReLU bit-mask's bits the timed build may set otherwise than the eager program: Inductor may
# compare the fp32 accumulator with zero where eager compares its 16-bit rounding (a layout or indexing error
# flips half of them).
MASK_FLIPS_ALLOWED = 1e-6


def epilog_program(spec: EpilogSpec, m: int, narrow: bool):
    """The epilog as torch code, y = x @ w^T then the epilog, returning (y, aux output?, bias gradient?)."""
    import torch
    import torch.nn.functional as F

    mask_bytes = relu_aux_shape(m, 1)[0]
    gelu_rows = gelu_aux_shape(m, 1)[0]

    def product(x, w, unit):
        if narrow:  # fp8: the scaled GEMM, unit scales, a bf16 D
            return torch._scaled_mm(x, w.t(), unit, unit, out_dtype=torch.bfloat16)
        return x @ w.t()

    def program(x, w, unit, bias, aux_in):
        y = product(x, w, unit)
        outputs = []
        if spec.bias:
            y = y + bias
        if spec.saves_aux and spec.activation is Activation.RELU:
            # cuBLASLt's mask: bit i % 8 of byte i // 8 of a token's row says feature i was >= 0
            bits = F.pad((y >= 0).to(torch.uint8), (0, 8 * mask_bytes - m)).view(y.shape[0], mask_bytes, 8)
            shifts = torch.arange(8, dtype=torch.uint8, device=y.device)
            outputs.append((bits << shifts).sum(-1, dtype=torch.uint8))
        elif spec.saves_aux:
            outputs.append(F.pad(y, (0, gelu_rows - m)))
        if spec.activation is Activation.RELU:
            y = torch.relu(y)
        elif spec.activation is Activation.GELU:
            y = F.gelu(y, approximate="tanh")
        if spec.derivative is Derivative.DRELU:
            shifts = torch.arange(8, dtype=torch.uint8, device=y.device)
            bits = (aux_in.unsqueeze(-1) >> shifts) & 1
            y = torch.where(bits.reshape(aux_in.shape[0], -1)[:, :m].bool(), y, 0)
        elif spec.derivative is Derivative.DGELU:
            y = torch.ops.aten.gelu_backward(y, aux_in[:, :m], approximate="tanh")
        if spec.summed is Summed.RESULT:
            outputs.append(y.sum(0, dtype=torch.float32).to(y.dtype))
        elif spec.summed is Summed.A:
            outputs.append(w.sum(1, dtype=torch.float32).to(y.dtype))
        elif spec.summed is Summed.B:
            outputs.append(x.sum(1, dtype=torch.float32).to(y.dtype))
        return (y, *outputs)

    return program


class CompiledMismatch(Exception):
    """The max-autotune build's outputs differ from the same torch code run eagerly: a failed cell, never a
    refusal (prepare_provider turns library errors into refusals; this is no library's)."""


def verify_against_eager(program, arguments: tuple, produced: tuple, names: tuple[str, ...], tolerance: float) -> None:
    """The timed build checked at the timed shape, where the float64 check (small shapes, the default mode)
    never looked: against the same program run eagerly (cuBLAS, then torch's own kernels), each float output
    within `tolerance` of the eager one's largest magnitude, and the ReLU bit-mask alike but for
    MASK_FLIPS_ALLOWED of its bits (a pre-activation within rounding of zero may fall either side)."""
    import torch

    expected = program(*arguments)
    for name, got, want in zip(names, produced, expected, strict=True):
        if want.dtype == torch.uint8:
            shifts = torch.arange(8, dtype=torch.uint8, device=want.device)
            flipped = int(((torch.bitwise_xor(got, want).unsqueeze(-1) >> shifts) & 1).sum())
            allowed = max(1, int(MASK_FLIPS_ALLOWED * want.numel() * 8))
            if flipped > allowed:
                raise CompiledMismatch(f"{name}: {flipped} bits differ from the eager program's ({allowed} allowed)")
            continue
        got, want = got.float(), want.float()
        scale = float(want.abs().max())
        wrong = int((~((got - want).abs() <= tolerance * scale)).sum())  # NaN counts as wrong
        if wrong:
            bound = f"{tolerance:g} x {scale:g}"
            raise CompiledMismatch(f"{name}: {wrong} elements off the eager program's by over {bound}")


def build_torch_compile(stack: GpuStack, operands: Operands, *, timed: bool = True) -> PreparedProvider:
    """The epilog as torch code, compiled by torch.compile for this workload (max-autotune where timed)."""
    torch = stack.torch
    if torch is None:
        raise Skipped("the torch-compile peer needs torch with CUDA; install fusedbench[torch]")
    workload = operands.workload
    spec, dtype, m = workload.epilog, workload.dtype, workload.m
    narrow = _refuse_unscalable(workload)
    # One compiled graph a process: the previous workload's (its provider released before this one is built)
    # would otherwise stay in the code cache, its guards checked on every call, and dynamo's recompile limit
    # would cut a check's 240 workloads short. A graph built before this reset recompiles if called again.
    torch._dynamo.reset_code_caches()
    mode = TIMED_MODE if timed else CHECK_MODE
    program = epilog_program(spec, m, narrow)
    compiled = torch.compile(program, mode=mode, fullgraph=True, dynamic=False)
    arguments = _arguments(torch, operands)
    allow_tf32 = dtype.compute_type == "COMPUTE_32F_FAST_TF32"
    names = ("result", *spec.outputs)

    def run():
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32  # global in torch (and guarded): set for every call
        produced = compiled(*arguments)
        # y and the aux output are token-major: their transposes are D and the aux in cuBLASLt's layouts
        return {name: value.t() if value.dim() == 2 else value for name, value in zip(names, produced, strict=True)}

    benchmarked = _autotuning_seconds()
    started = time.perf_counter()
    with warnings.catch_warnings():
        # fp32 cells multiply in fp32 on purpose (tf32 is a dtype of its own): Inductor's hint to turn TF32 on, given
        # once a process by whichever fp32 graph compiles first, would land in a user's terminal, and under pytest's
        # `filterwarnings = error` it made that one cell unsupported (an H100 check at 6d03a84)
        warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores for float32", category=UserWarning)
        first = run()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - started
    autotune_s = _autotuning_seconds() - benchmarked
    if timed:
        produced = tuple(value.t() if value.dim() == 2 else value for value in first.values())
        verify_against_eager(program, arguments, produced, names, dtype.tolerance)
    del first
    sizes = {"result": workload.m * workload.n * dtype.result_itemsize}
    sizes |= {name: spec.extra_bytes(name, workload.m, workload.n, dtype.result_itemsize) for name in spec.outputs}
    provenance = {
        "algorithm": f"Inductor, mode={mode}",
        "chosen_by": "torch.compile max-autotune" if timed else "torch.compile default mode",
        # everything the first call took (tracing, code generation, autotuning), as this process paid it: Inductor's
        # on-disk caches, on by default, make a machine's later runs of the same graphs cheaper
        "compile_s": round(compile_s, 3),
        "autotune_s": round(autotune_s, 3),
    }
    return PreparedProvider(run, (), sizes, provenance=provenance, allocator="torch")


def _refuse_unscalable(workload) -> bool:
    """Whether the workload is fp8 (torch._scaled_mm), refusing the shapes and layouts _scaled_mm cannot take."""
    spec, dtype = workload.epilog, workload.dtype
    narrow = dtype.operand_itemsize == 1
    if narrow and not dtype.fits(workload.m, workload.k, workload.n):
        raise Unsupported(f"torch._scaled_mm needs M, N and K divisible by {dtype.shape_multiple}; {workload.label}")
    if narrow and spec.layout != "TN":
        raise Unsupported(f"torch._scaled_mm multiplies fp8 only in the TN layout; {spec.name} takes {spec.layout}")
    return narrow


def _arguments(torch, operands: Operands) -> tuple:
    """(x, w, unit scale, bias, aux in) in nn.Linear's frame: x = B^T, w = A, the aux input token-major."""
    spec = operands.workload.epilog
    aux_in = None
    if spec.derivative is Derivative.DRELU:
        aux_in = as_torch(operands.relu_aux).t()
    elif spec.derivative is Derivative.DGELU:
        aux_in = as_torch(operands.gelu_aux).t()
    bias = None if operands.bias is None else as_torch(operands.bias)
    return (
        as_torch(operands.b).t(),
        as_torch(operands.a),
        torch.ones((), dtype=torch.float32, device="cuda"),
        bias,
        aux_in,
    )


def _autotuning_seconds() -> float:
    """Seconds Inductor has spent in this process benchmarking choices (GEMM templates against cuBLAS, fused
    epilogues, kernel configs), from its own timers: the share of compiling that autotuning takes."""
    from torch._dynamo.utils import compilation_time_metrics

    return sum(sum(times) for name, times in compilation_time_metrics.items() if _AUTOTUNING_TIMER.search(name))
