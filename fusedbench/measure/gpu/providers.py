"""The provider ladder on the GPU: textbook, unfused, fused, fused-autotuned, torch, gemm.

`prepare_provider` does everything that is not the work (allocation, planning, autotuning,
kernel compilation, one warm-up call) and returns a `PreparedProvider` whose `run()` is the hot
call. Every nvmath-based provider writes D into the workload's own column-major buffer (nvmath's
in-place mode with beta = 0, so C is never read), which lets a check poison D before a run and
keeps allocation out of the hot call. A library's refusal becomes `Unsupported` with its own
message; an error of ours stays an error.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fusedbench.catalog.dtypes import DTypeSpec
from fusedbench.catalog.epilogs import (
    EPILOGS,
    Activation,
    Derivative,
    Epilog,
    EpilogSpec,
    Summed,
    gelu_aux_shape,
    relu_aux_shape,
)
from fusedbench.catalog.providers import PROVIDERS
from fusedbench.catalog.tuning import Tuning
from fusedbench.catalog.workloads import Workload
from fusedbench.errors import Skipped, Unsupported
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.arrays import as_cupy, as_torch, copy_of, in_order
from fusedbench.measure.gpu.kernels import make_epilog_pass, make_row_sum
from fusedbench.measure.gpu.operands import Operands
from fusedbench.measure.gpu.timing import Timing

# fused-autotuned times each algorithm of the plan this many times, cold and after the protocol's lead-in, and keeps
# the fastest median: three calls outvote one outlier; at the seed shape the eight algorithms cost about 1.5 s.
AUTOTUNE_SAMPLES = 3
TORCH_PEER_EPILOGS = frozenset(
    {Epilog.DEFAULT, Epilog.BIAS, Epilog.RELU, Epilog.RELU_BIAS, Epilog.GELU, Epilog.GELU_BIAS}
)
_GELU_SCALE = math.sqrt(2.0 / math.pi)
_CUDA_TYPES = {"bfloat16": "CUDA_R_16BF", "float16": "CUDA_R_16F", "float32": "CUDA_R_32F"}


@dataclass
class PreparedProvider:
    """A provider ready to run one workload."""

    run: Callable[[], dict[str, Any]]  # the hot call; returns outputs by name ('result' + aux)
    owned_outputs: tuple[Any, ...]  # buffers allocated in prepare that run() must overwrite
    # outputs allocated anew by each call (nvmath's aux outputs, the textbook's results): name -> bytes
    library_outputs: dict[str, int] = field(default_factory=dict)
    release: Callable[[], None] = lambda: None
    computes: EpilogSpec | None = None  # what run() computes when it is not the workload's epilog
    provenance: dict[str, Any] = field(default_factory=dict)  # cuBLASLt's algorithm and who chose it, for the record
    allocator: str | None = None  # where library_outputs come from, "torch" or "cupy", when not the operands' framework


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@contextlib.contextmanager
def _library_refusals(stack: GpuStack):
    """Turn a library's refusal (nvmath / cuBLASLt / torch raising on a combination) into Unsupported."""
    try:
        yield
    except (Unsupported, Skipped):
        raise
    except (ValueError, TypeError, NotImplementedError, RuntimeError, *stack.library_errors) as exc:
        raise Unsupported(f"{type(exc).__name__}: {_one_line(exc)}") from exc


@dataclass
class PlannedMatmul:
    """An nvmath Matmul and the algorithm to execute: None is the plan's first (the heuristic's choice); else
    autotune's fastest or a tuning's forced choice, with what was chosen and by whom in `provenance`."""

    matmul: Any
    algorithm: Any = None
    provenance: dict[str, Any] = field(default_factory=dict)

    def execute(self):
        return self.matmul.execute(algorithm=self.algorithm)

    def free(self) -> None:
        self.matmul.free()


def _matmul_options(stack: GpuStack, dtype: DTypeSpec, *, inplace: bool) -> tuple[dict[str, Any], dict | None]:
    """nvmath's Matmul options and operand scales for a precision (fp8 needs scales and a result type)."""
    options: dict[str, Any] = {"inplace": inplace}
    if dtype.compute_type:
        options["compute_type"] = getattr(stack.compute_types, dtype.compute_type)
    narrow = dtype.operand_itemsize == 1
    if narrow and not inplace:  # in place, D takes C's type
        options["result_type"] = getattr(importlib.import_module("nvmath").CudaDataType, _CUDA_TYPES[dtype.result])
    return options, ({"a": 1.0, "b": 1.0} if narrow else None)


def plan_matmul(
    stack: GpuStack,
    operands: Operands,
    *,
    spec: EpilogSpec | None = None,
    autotune: bool = False,
    tuning: Tuning | None = None,
    timed: bool = True,
):
    """An nvmath Matmul writing into operands.result, planned (and optionally autotuned or tuned) for `spec`.
    Autotuned for a check (`timed=False`), it executes one algorithm of the plan, its rank taken in turn over the
    workloads (`Workload.in_turn`): a check has no timing to choose by, and meets every rank a timing may choose."""
    advanced = stack.nvmath_advanced
    options, scales = _matmul_options(stack, operands.workload.dtype, inplace=True)
    if tuning is not None and tuning.setting == "workspace":
        options["memory_limit"] = tuning.value
    forced = tuning is not None and tuning.setting == "algorithm"
    matmul = advanced.Matmul(
        operands.a, operands.b, c=operands.result, beta=0.0, quantization_scales=scales, options=options
    )
    # DEFAULT is planned as "no epilog": nvmath takes epilog=None for the plain GEMM.
    epilog = None if spec is None or spec.epilog is Epilog.DEFAULT else advanced.MatmulEpilog(spec.value)
    inputs = {name: getattr(operands, name) for name in spec.inputs} if spec is not None else {}
    provenance = {}
    try:  # a plan refused or a choice that fails leaves nothing allocated behind
        planned = list(
            matmul.plan(
                preferences={"limit": tuning.value + 1} if forced else None,
                epilog=epilog,
                epilog_inputs=inputs or None,
            )
        )
        if forced:
            chosen = planned[min(tuning.value, len(planned) - 1)]
        elif autotune and timed:
            started = time.perf_counter()
            chosen = fastest_algorithm(stack, matmul, planned)
            provenance["autotune_s"] = time.perf_counter() - started
        elif autotune:
            chosen = planned[operands.workload.in_turn(len(planned))]
        else:
            chosen = planned[0]
    except BaseException:
        matmul.free()
        raise
    by = "autotune" if timed else "the check's algorithm in turn"
    provenance |= {
        "algorithm": describe_algorithm(chosen),
        "chosen_by": tuning.label if tuning is not None else (by if autotune else "heuristic"),
        "heuristic_rank": planned.index(chosen),
        "algorithms_offered": len(planned),
    }
    return PlannedMatmul(matmul, chosen if forced or autotune else None, provenance)


def fastest_algorithm(stack: GpuStack, matmul, algorithms: list):
    """The algorithm of the plan with the fastest median in fusedbench's own rounds: each call cold and after the
    lead-in of the protocol every run uses (`sampling.PROTOCOL`), as a run's cells are timed. nvmath's
    Matmul.autotune times them back to back, the clock falling as they run: on an H100 it picked a tile 5-7% slower
    than the heuristic's in 2 of 5 same-code runs (docs/findings/2026-11-25-aa-spread.md). An algorithm that raises
    is passed over; where all do, the first one's error is raised."""
    runs = {
        str(index): functools.partial(matmul.execute, algorithm=algorithm) for index, algorithm in enumerate(algorithms)
    }
    timing = Timing.open(stack, telemetry=False)
    try:
        timed = timing.sample(runs, samples=AUTOTUNE_SAMPLES)
    finally:
        timing.close()
    medians = {int(name): statistics.median(samples) for name, samples in timed.items() if isinstance(samples, list)}
    if not medians:
        raise next(iter(timed.values()))
    return algorithms[min(medians, key=medians.get)]


def describe_algorithm(algorithm) -> str:
    """cuBLASLt's algorithm in one line: its id and the configuration that tells two apart."""
    attributes = {
        "id": "algorithm_id",
        "tile": "tile",
        "stages": "stages",
        "cluster": "cluster_shape",
        "split_k": "split_k",
        "reduction": "reduction_scheme",
        "swizzle": "cta_swizzling",
    }
    parts = []
    for name, attribute in attributes.items():
        try:  # not every cuBLASLt version has every attribute
            value = getattr(algorithm, attribute)
        except Exception:
            continue
        text = (
            "x".join(str(v) for v in value)
            if isinstance(value, tuple)
            else str(int(value) if isinstance(value, bool) else value)
        )
        parts.append(f"{name}={text}")
    return " ".join(parts)


def build_fused(
    stack: GpuStack,
    operands: Operands,
    *,
    autotune: bool = False,
    tuning: Tuning | None = None,
    timed: bool = True,
) -> PreparedProvider:
    """cuBLASLt's epilog through nvmath's Matmul, planned once (and autotuned, or tuned, if asked)."""
    spec, workload = operands.workload.epilog, operands.workload
    matmul = plan_matmul(stack, operands, spec=spec, autotune=autotune, tuning=tuning, timed=timed)
    result = operands.result

    def run():
        out = matmul.execute()
        return {"result": result, **out[1]} if spec.outputs else {"result": result}

    sizes = {
        name: spec.extra_bytes(name, workload.m, workload.n, workload.dtype.result_itemsize) for name in spec.outputs
    }
    return PreparedProvider(run, (result,), sizes, matmul.free, provenance=matmul.provenance)


def build_fused_autotuned(
    stack: GpuStack, operands: Operands, *, timed: bool = True, tuning: Tuning | None = None
) -> PreparedProvider:
    """The fused epilog at autotune's fastest algorithm; a tuning's forced one where a confirmation pins the baseline's
    side to the algorithm the candidate's autotune chose (`measure.confirm`)."""
    return build_fused(stack, operands, autotune=True, timed=timed, tuning=tuning)


def build_gemm(stack: GpuStack, operands: Operands, *, tuning: Tuning | None = None) -> PreparedProvider:
    """The same GEMM with no epilog: the floor every cell's epilog cost is measured over."""
    matmul = plan_matmul(stack, operands, tuning=tuning)
    result = operands.result

    def run():
        matmul.execute()
        return {"result": result}

    return PreparedProvider(
        run, (result,), release=matmul.free, computes=EPILOGS[Epilog.DEFAULT], provenance=matmul.provenance
    )


def aux_buffer(operands: Operands, spec: EpilogSpec) -> Any:
    """A buffer for the relu_aux / gelu_aux a provider of ours writes (an unfused pass, the triton peer), laid out as
    cuBLASLt lays it out."""
    workload = operands.workload
    if spec.activation is Activation.RELU:
        rows, _ = relu_aux_shape(workload.m, workload.n)
        return operands.empty_result_like(rows=rows, dtype=operands.xp.uint8)
    rows, _ = gelu_aux_shape(workload.m, workload.n)
    return operands.empty_result_like(rows=rows)


def _bgrad_launcher(operands: Operands, spec: EpilogSpec, out: Any, *, one_pass: bool) -> Callable[[], None]:
    """Sum D over N, A over K, or B over K; each is a column-major matrix summed along its rows. One pass,
    D's sum also applies the derivative on the way (DRELU_BGRAD, DGELU_BGRAD)."""
    summed = {Summed.RESULT: operands.result, Summed.A: operands.a, Summed.B: operands.b.T}[spec.summed]
    derivative_inputs = {}
    if one_pass and spec.derivative is Derivative.DRELU:
        derivative_inputs["relu_aux"] = as_cupy(operands.relu_aux)
    elif one_pass and spec.derivative is Derivative.DGELU:
        derivative_inputs["gelu_aux"] = as_cupy(operands.gelu_aux)
    return make_row_sum(as_cupy(summed), as_cupy(out), **derivative_inputs)


def build_unfused(stack: GpuStack, operands: Operands, *, one_pass: bool = True) -> PreparedProvider:
    """The plain GEMM, then one single-pass kernel for the pointwise work and one reduction per bias gradient;
    DRELU_BGRAD / DGELU_BGRAD's derivative and bias gradient in a single pass over D (`one_pass`), as the
    training stacks run the backward."""
    spec, workload = operands.workload.epilog, operands.workload
    matmul = plan_matmul(stack, operands)
    outputs: dict[str, Any] = {"result": operands.result}
    aux_out = aux_buffer(operands, spec) if spec.saves_aux else None
    if aux_out is not None:
        outputs[spec.outputs[0]] = aux_out

    def view(array):
        return None if array is None else as_cupy(array)

    launchers = []
    # The row sum applies the derivative itself where that is all the pointwise work (DRELU_BGRAD, DGELU_BGRAD).
    merged = one_pass and spec.summed is Summed.RESULT and spec.derivative is not Derivative.NONE
    merged = merged and not spec.bias and spec.activation is Activation.NONE
    pointwise = (
        None
        if merged
        else make_epilog_pass(
            spec,
            as_cupy(operands.result),
            bias=view(operands.bias),
            relu_aux=view(operands.relu_aux),
            gelu_aux=view(operands.gelu_aux),
            aux_out=view(aux_out),
        )
    )
    if pointwise is not None:
        launchers.append(pointwise)
    if spec.summed is not Summed.NONE:
        length = workload.n if spec.summed is Summed.B else workload.m
        outputs[spec.outputs[-1]] = bgrad = operands.empty_vector(length)
        launchers.append(_bgrad_launcher(operands, spec, bgrad, one_pass=merged))

    def run():
        matmul.execute()
        for launch in launchers:
            launch()
        return outputs

    return PreparedProvider(run, tuple(outputs.values()), release=matmul.free, provenance=matmul.provenance)


def build_two_pass(stack: GpuStack, operands: Operands) -> PreparedProvider:
    """The control: unfused as it ran DRELU_BGRAD / DGELU_BGRAD before the one-pass backward (revision 3),
    the mask or dGELU pass, then a separate row sum that reads D again."""
    if operands.workload.epilog.summed is not Summed.RESULT:
        raise Unsupported("the two-pass control differs from unfused only for DRELU_BGRAD and DGELU_BGRAD")
    return build_unfused(stack, operands, one_pass=False)


class Textbook:
    """The seed blog's naive code, statement for statement, after a product that returns a new y each call.

    The textbook provider's product is `Matmul(weights, x)` (or `Matmul(weights.T, grad)`,
    `spec.textbook_layout`) planned once with no epilog, `y = mm.execute()` (a new result each call, in A's
    memory order), on operands copied into the blog's layout; the einsum peer's is einsum on the operands as
    they lie. Then one array statement per step: `y += bias[:, None]`, `y[y < 0] = 0`, `y[mask] = 0` with the
    blog's boolean `mask = (t1 < 0)`, `sum(y, axis=1)`. Where the blog has no snippet (GELU, its derivative,
    saved aux, BGRADA / BGRADB) the same style; bf16 and fp8 the same statements in torch.
    """

    def __init__(self, operands: Operands, product: Callable[[], Any], a: Any, b: Any):
        self.spec = spec = operands.workload.epilog
        self.product, self.a, self.b = product, a, b
        self.xp = operands.xp
        m = operands.workload.m
        self.bias = operands.bias
        # t1, the pre-activation, as the forward pass left it: a row-major (M, N) array.
        self.negative = None if operands.relu_negative is None else in_order(operands.relu_negative, row_major=True)
        self.pre = None if operands.gelu_aux is None else in_order(operands.gelu_aux[:m], row_major=True)
        itemsize = operands.workload.dtype.result_itemsize
        self.fresh_outputs = {"result": operands.workload.m * operands.workload.n * itemsize}
        if spec.saves_aux:
            per_element = 1 if spec.activation is Activation.RELU else itemsize  # a bool mask, or a copy of y
            self.fresh_outputs[spec.outputs[0]] = operands.workload.m * operands.workload.n * per_element

    def gelu(self, y):
        xp = self.xp
        return 0.5 * (1 + xp.tanh(_GELU_SCALE * (y + 0.044715 * y**3)))

    def gelu_grad(self, x):
        xp = self.xp
        t = xp.tanh(_GELU_SCALE * (x + 0.044715 * x**3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_SCALE * (1 + 3 * 0.044715 * x * x)

    def run(self) -> dict[str, Any]:
        spec, xp = self.spec, self.xp
        y = self.product()
        outputs = {"result": y}
        if spec.bias:
            y += self.bias[:, None]
        if spec.saves_aux and spec.activation is Activation.RELU:
            outputs["relu_aux"] = y >= 0  # kept for the backward pass
        elif spec.saves_aux:
            outputs["gelu_aux"] = copy_of(y)
        if spec.activation is Activation.RELU:
            y[y < 0] = 0
        elif spec.activation is Activation.GELU:
            y *= self.gelu(y)
        if spec.derivative is Derivative.DRELU:
            y[self.negative] = 0
        elif spec.derivative is Derivative.DGELU:
            y *= self.gelu_grad(self.pre)
        if spec.summed is Summed.RESULT:
            outputs[spec.outputs[-1]] = xp.sum(y, 1)
        elif spec.summed is Summed.A:
            outputs["bgrada"] = xp.sum(self.a, 1)  # grad (M x K, row-major) summed over the batch
        elif spec.summed is Summed.B:
            outputs["bgradb"] = xp.sum(self.b.T, 1)  # B = grad.T: grad (N x K, row-major) summed over the batch
        return outputs


def build_textbook(stack: GpuStack, operands: Operands) -> PreparedProvider:
    """The blog's code in its layout; fp8 multiplies only in the TN layout, so there the operands stay as they are."""
    dtype = operands.workload.dtype
    layout = "TN" if dtype.operand_itemsize == 1 else operands.workload.epilog.textbook_layout
    a = in_order(operands.a, row_major=layout[0] == "T")
    b = in_order(operands.b, row_major=layout[1] == "T")
    options, scales = _matmul_options(stack, dtype, inplace=False)
    matmul = stack.nvmath_advanced.Matmul(a, b, quantization_scales=scales, options=options)
    matmul.plan()
    textbook = Textbook(operands, matmul.execute, a, b)
    chosen = {"algorithm": describe_algorithm(matmul.algorithms[0]), "chosen_by": "heuristic"}
    return PreparedProvider(textbook.run, (), textbook.fresh_outputs, release=matmul.free, provenance=chosen)


def build_torch_peer(stack: GpuStack, operands: Operands) -> PreparedProvider:
    """What a torch user writes: torch's own fused ops where it has them, in-place activation otherwise."""
    torch = stack.torch
    if torch is None:
        raise Skipped("the torch peer needs torch with CUDA; install fusedbench[torch]")
    spec, dtype = operands.workload.epilog, operands.workload.dtype
    if spec.epilog not in TORCH_PEER_EPILOGS:
        raise Unsupported(f"torch has no op for {spec.name} (its autograd computes it in separate kernels)")
    weight, x, y = as_torch(operands.a), as_torch(operands.b).t(), as_torch(operands.result).t()
    bias = None if operands.bias is None else as_torch(operands.bias)
    allow_tf32 = dtype.compute_type == "COMPUTE_32F_FAST_TF32"
    activation_after = spec.activation
    if dtype.operand_itemsize == 1:
        one = torch.ones((), device="cuda", dtype=torch.float32)

        def product():
            torch._scaled_mm(x, weight.t(), one, one, bias=bias, out_dtype=torch.bfloat16, out=y)

    elif spec.bias and spec.activation is not Activation.NONE:
        use_gelu = spec.activation is Activation.GELU
        activation_after = Activation.NONE

        def product():
            torch._addmm_activation(bias, x, weight.t(), use_gelu=use_gelu, out=y)

    elif spec.bias:

        def product():
            torch.addmm(bias, x, weight.t(), out=y)

    else:

        def product():
            torch.matmul(x, weight.t(), out=y)

    outputs = {"result": operands.result}

    def run():
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32  # global in torch: set for every call
        product()
        if activation_after is Activation.RELU:
            y.relu_()
        elif activation_after is Activation.GELU:
            torch.ops.aten.gelu_(y, approximate="tanh")
        return outputs

    return PreparedProvider(run, (operands.result,))


def _resolve(path: str) -> Callable:
    module, function = path.split(":")
    return getattr(importlib.import_module(module), function)


def builder_of(name: str) -> Callable[[GpuStack, Operands], PreparedProvider]:
    """The registered builder of provider `name` (fusedbench.catalog.providers.PROVIDERS)."""
    return _resolve(PROVIDERS[name].builder)


def precompile_providers(names: list[str], workloads: list[Workload], *, timed: bool) -> None:
    """Let every named provider that compiles kernels compile all the workloads will need, before the first is
    prepared (`timed`: every autotuning candidate; a check's: the one config it verifies)."""
    for name in names:
        if PROVIDERS[name].precompile:
            _resolve(PROVIDERS[name].precompile)(workloads, timed=timed)


def prepare_provider(
    name: str, stack: GpuStack, operands: Operands, tuning: Tuning | None = None, *, timed: bool = True
) -> PreparedProvider:
    """Allocate, plan and warm up `name` for the workload (tuned if `tuning` is its); raises Unsupported or Skipped.

    A check prepares with `timed=False`: a builder that takes `timed` (a compiler's peer) then skips the
    autotuning that only a timing needs; its result is verified all the same.
    """
    builder = builder_of(name)
    mine = {"tuning": tuning} if tuning is not None and tuning.provider == name else {}
    if "timed" in inspect.signature(builder).parameters:
        mine["timed"] = timed
    with _library_refusals(stack):
        prepared = builder(stack, operands, **mine)
        try:
            prepared.run()  # warm-up: compiles kernels, allocates workspaces, surfaces refusals
        except BaseException:
            prepared.release()
            raise
    return prepared
