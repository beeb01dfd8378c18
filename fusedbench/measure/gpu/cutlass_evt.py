"""The cutlass-evt peer: a CUTLASS 3 Hopper GEMM whose epilogue is an epilogue visitor tree (EVT), built through
nvidia-cutlass's Python interface (`cutlass_cppgen`) and compiled by nvcc for sm_90a.

What a CUDA C++ user gets from CUTLASS: a warp-specialized TMA GEMM (`TILE`) whose epilogue is composed of
visitor nodes, fused into the kernel. The epilog is written as the small Python function the interface traces
into that tree (`evt_source`), in the frame of D's transpose, C = D^T (N x M, row-major) = B^T @ A^T, so that D
stays column-major as every provider writes it:
- + bias, a row broadcast in C's frame;
- the activation: ReLU, or the tanh GELU spelled out in the tree's arithmetic (CUTLASS's own GELU is erf's);
- GELU_AUX's pre-activation, stored as an aux output;
- DGELU's derivative of the pre-activation it loads through an aux-load node, and DGELU_BGRAD's bias gradient, a
  row reduction the kernel finishes itself.

Refused, by name: cuBLASLt's ReLU mask is a bit an element, and EVT nodes load and store whole elements
(RELU_AUX, RELU_AUX_BIAS, DRELU, DRELU_BGRAD); BGRADA and BGRADB sum an operand, which only the main loop
sees. fp16 and bf16 (fp32 accumulation) are built; TMA needs 16-byte aligned rows, so M and K must be multiples
of 8.

DEFAULT's and DGELU's trees are written around faults of nvidia-cutlass 4.2, the interface's last release
(`evt_source`); so is DGELU_BGRAD's bias gradient, reduced into fp32 (`traced_epilogue`) and zeroed before each
launch (`build_cutlass_evt`).

Compiling a kernel takes nvcc about a minute of one core. `precompile` runs them in parallel processes into
CUTLASS's on-disk cache (a sqlite file in CACHE_DIR), so a machine compiles each (epilog, dtype) once; its cubins
are the same on every sm_90 GPU, so the cache can travel with the results.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from fusedbench.catalog.epilogs import Activation, Derivative, EpilogSpec, Summed
from fusedbench.catalog.providers import CUTLASS_EVT, PROVIDERS
from fusedbench.catalog.workloads import Workload
from fusedbench.errors import Skipped, Unsupported
from fusedbench.files import write_text_atomically
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.arrays import data_ptr, nbytes
from fusedbench.measure.gpu.operands import Operands
from fusedbench.measure.gpu.providers import PreparedProvider
from fusedbench.measure.reference import GELU_CUBIC, SQRT_2_OVER_PI

CACHE_DIR = os.environ.get("FUSEDBENCH_CUTLASS_CACHE") or os.path.join(
    os.path.expanduser("~"), ".cache", "fusedbench", "cutlass"
)
CACHE_FILE = "compiled_cache.db"  # the name cutlass_cppgen gives its cache, in the directory it is imported from
# nvcc's seconds for each kernel in the cache, as it took when it was compiled: a later run loads the kernel in a
# hundredth of a second, and a run's own check compiles the kernels its timing then loads
NVCC_SECONDS_FILE = "nvcc_seconds.json"
ROW_BYTES = 16  # TMA's alignment of a row's start
# The kernel every cell runs: 128 x 256 tiles (N x M of C) on two consumer warp groups that share each tile
# (cooperative), in clusters of two along C's columns that multicast the B^T tiles they share. An H100 probe of
# fp16 RELU_BIAS in these layouts: 518 TFLOP/s at the seed shape and 322-525 at the membound shapes, ahead of
# 256 x 128 tiles in 2x1 clusters (489; 309-507); 128 x 256 and 128 x 128 tiles in 2x1 clusters did not compile for
# these layouts; pingpong schedules (64 x 128, 64 x 256) compiled but were not timed to the end.
TILE = {
    "threadblock_shape": (128, 256, 64),
    "cluster_shape": (1, 2, 1),
    "kernel_schedule": "TmaWarpSpecializedCooperative",
    "epilogue_schedule": "TmaWarpSpecializedCooperative",
}
# nvcc seconds of each (epilog, dtype) kernel precompile found or compiled, for the cells' provenance
_COMPILE_SECONDS: dict[tuple[str, str], float] = {}


def refusal(workload: Workload) -> str | None:
    """Why this peer does not build `workload`'s cell, or None where it does."""
    spec, dtype = workload.epilog, workload.dtype
    peer = PROVIDERS[CUTLASS_EVT]
    if spec.epilog not in peer.epilogs:
        return _tree_refusal(spec)
    if dtype.name not in peer.dtypes:
        return f"cutlass-evt builds {' and '.join(peer.dtypes)} kernels (fp32 accumulation), not {dtype.name}"
    multiple = ROW_BYTES // dtype.operand_itemsize
    if workload.m % multiple or workload.k % multiple:
        return (
            f"cutlass-evt: its TMA loads and stores need {ROW_BYTES}-byte aligned rows, so M and K must be multiples "
            f"of {multiple} at {dtype.name}; {workload.shape} has M = {workload.m}, K = {workload.k}"
        )
    return None


@dataclass(frozen=True)
class EvtFunction:
    """An epilog as the Python function cutlass_cppgen traces into a visitor tree."""

    source: str
    inputs: tuple[str, ...]  # its arguments: the accumulator, then the bias and DGELU's pre-activation where used
    outputs: tuple[str, ...]  # what it returns: D, then GELU's aux output or the bias gradient, by the cell's names


def _tree_refusal(spec: EpilogSpec) -> str:
    if spec.summed in (Summed.A, Summed.B):
        return f"cutlass-evt: {spec.name} sums an operand, which the main loop sees and the epilogue never does"
    return (
        f"cutlass-evt: {spec.name} needs cuBLASLt's ReLU bit-mask, a bit an element, and EVT's nodes load and store "
        "whole elements"
    )


def evt_source(spec: EpilogSpec) -> EvtFunction:
    """The epilog in C's frame, where a bias is a row (1 x M) and a bias gradient a sum over C's rows (dims 0 and 1
    of (batch, N, M)).

    Written around two faults of nvidia-cutlass 4.2 on sm_90:
    - DEFAULT's bare `D = accum` gets a zero-size argument struct where the C++ one takes a byte, so the arguments
      after it land 8 bytes off and the host code aborts the process on a TMA descriptor's stride (seen on an H100):
      D = accum * 1.0, a multiply as CUTLASS's default epilogue does with alpha;
    - where a value feeds several nodes, its pass that merges them into one DAG node gives that node a single output
      and drops the edges of every other merged node that leaves it, so DGELU's `0.5 + 0.5 t + x (...)` compiled to a
      plus of one argument: the derivative is one multiply_add(x, ..., 0.5 + 0.5 t), which every use of x reaches.
    D may feed nothing else on sm_90 (the epilogue reuses its shared memory), so a value both stored as D and summed
    is named twice."""
    if spec.epilog not in PROVIDERS[CUTLASS_EVT].epilogs:
        raise Unsupported(_tree_refusal(spec))
    inputs, lines, x = ["accum"], [], "accum"
    if spec.bias:
        inputs.append("bias")
        lines.append("pre = accum + bias")
        x = "pre"
    outputs = ["D"]
    if spec.saves_aux:  # GELU's pre-activation
        lines.append(f"{spec.outputs[0]} = {x}")
        outputs.append(spec.outputs[0])
    if spec.activation is Activation.RELU:
        value = f"relu({x})"
    elif spec.activation is Activation.GELU:
        value = f"{x} * (0.5 + 0.5 * tanh({_gelu_inner(x)}))"
    elif spec.derivative is Derivative.DGELU:
        inputs.append("gelu_aux")
        lines.append(f"t = tanh({_gelu_inner('gelu_aux')})")
        slope = f"{SQRT_2_OVER_PI!r} + {3 * GELU_CUBIC * SQRT_2_OVER_PI!r} * gelu_aux * gelu_aux"
        value = f"{x} * multiply_add(gelu_aux, (0.5 - 0.5 * t * t) * ({slope}), 0.5 + 0.5 * t)"
    else:
        value = f"{x} * 1.0" if x == "accum" else x
    if spec.summed is Summed.RESULT:
        lines += [f"value = {value}", "D = value", f"{spec.outputs[-1]} = sum(value, dim=[0, 1])"]
        outputs.append(spec.outputs[-1])
    else:
        lines.append(f"D = {value}")
    body = "".join(f"    {line}\n" for line in (*lines, f"return {', '.join(outputs)}"))
    return EvtFunction(f"def epilog({', '.join(inputs)}):\n{body}", tuple(inputs), tuple(outputs))


def _gelu_inner(x: str) -> str:
    """sqrt(2/pi) (x + 0.044715 x^3), as x (a + b x x): the argument of GELU's tanh."""
    return f"{x} * ({SQRT_2_OVER_PI!r} + {GELU_CUBIC * SQRT_2_OVER_PI!r} * {x} * {x})"


def _cutlass():
    """cutlass_cppgen, imported so that it runs on this machine's CUDA Python, or Skipped with the install.

    Three things nvidia-cutlass 4.2 (the interface's last release) needs done first:
    - it imports the legacy modules cuda.cuda, cuda.cudart and cuda.nvrtc, which cuda-bindings 13 removed; they
      were re-exports of cuda.bindings' driver, runtime and nvrtc, so those stand in for them where missing;
    - cutlass_library leaves out its kernel generator, which the interface needs, when "-m" is among the process's
      arguments (meant for `python -m cutlass_library.generator`, it also hits `pytest -m gpu`): it is imported;
    - its import opens its compile cache, a sqlite file, in the working directory: it is imported from CACHE_DIR.
    """
    if "cutlass_cppgen" in sys.modules:
        return sys.modules["cutlass_cppgen"]
    if importlib.util.find_spec("cutlass_cppgen") is None:
        raise Skipped("the cutlass-evt peer needs nvidia-cutlass (cutlass_cppgen); install fusedbench[cu12] or [cu13]")
    import cuda

    if importlib.util.find_spec("cuda.cuda") is None:
        import cuda.bindings
        from cuda.bindings import driver, nvrtc, runtime

        for name, module in (("cuda", driver), ("cudart", runtime), ("nvrtc", nvrtc)):
            sys.modules[f"cuda.{name}"] = module
            setattr(cuda, name, module)
        cuda.__version__ = cuda.bindings.__version__  # checked against nvcc's
    import cutlass_library.generator  # noqa: F401 - see above

    os.makedirs(CACHE_DIR, exist_ok=True)
    with contextlib.chdir(CACHE_DIR):
        import cutlass_cppgen
        import cutlass_cppgen.backend.compiler

    # the module's global, which its loads and inserts read (`cutlass_cppgen.backend.compiler` is not the module
    # but its ArtifactManager instance, where an attribute of that name changes nothing)
    sys.modules["cutlass_cppgen.backend.compiler"].CACHE_FILE = _cache_file()
    return cutlass_cppgen


def _cache_file() -> str:
    return os.path.join(CACHE_DIR, CACHE_FILE)


def _nvcc() -> str:
    """Where the CUDA toolkit is (cutlass_cppgen compiles with its nvcc), or Skipped saying how to point at one."""
    home = os.environ.get("CUDA_INSTALL_PATH")
    nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
    if not nvcc or not os.path.exists(nvcc):
        raise Skipped(
            "the cutlass-evt peer compiles with nvcc, and none is on PATH; install the CUDA toolkit or set "
            "CUDA_INSTALL_PATH"
        )
    return nvcc


def traced_epilogue(cutlass, spec: EpilogSpec, dtype: str, n: int, m: int, cc: int = 90):
    """The epilog's visitor tree, traced for C (n x m) in `dtype`: the example tensors fix the problem's extents,
    so a tree is traced for each shape (the kernel it compiles to is the same)."""
    from cutlass_cppgen.backend.evt.frontend import PythonASTFrontend

    function = evt_source(spec)
    element = _element(cutlass, dtype)

    def tensor(name, *shape):
        # the bias gradient in fp32: the row reduction's global step instantiates an atomicAdd, which CUTLASS's
        # 16-bit types have not got
        kind = cutlass.DataType.f32 if name == "dgelu_bgrad" else element
        return cutlass.Tensor(element=kind, shape=shape, layout_tag=cutlass.LayoutType.RowMajor)

    shapes = {"accum": (n, m), "D": (n, m), "bias": (1, m), "gelu_aux": (n, m), "dgelu_bgrad": (m,)}
    examples = {name: tensor(name, *shapes[name]) for name in (*function.inputs, *function.outputs)}

    class Traced(PythonASTFrontend):
        # the interface's own tracing of a source string fails in 4.2 (its module forgot to import ast), and a
        # callable's source is read from a file, which a generated function has not got
        def parse(self, example_inputs):
            self.example_inputs = example_inputs
            self.ast = ast.parse(function.source)
            self.visit(self.ast)

    visitor = Traced(cc)
    visitor.trace(examples)
    return visitor


def _element(cutlass, dtype: str):
    return {"fp16": cutlass.DataType.f16, "bf16": cutlass.DataType.bf16}[dtype]


def _plan(cutlass, spec: EpilogSpec, dtype: str, n: int, m: int):
    """A GEMM plan for C = B^T (N x K, row-major) @ A^T (K x M, column-major) with the epilog's visitor tree."""
    from cutlass_library import EpilogueScheduleType, KernelScheduleType

    plan = cutlass.op.Gemm(
        element=_element(cutlass, dtype),
        element_accumulator=cutlass.DataType.f32,
        layout_A=cutlass.LayoutType.RowMajor,
        layout_B=cutlass.LayoutType.ColumnMajor,
        layout_C=cutlass.LayoutType.RowMajor,
    )
    plan.epilogue_visitor = traced_epilogue(cutlass, spec, dtype, n, m)
    plan.tile_description = {
        "threadblock_shape": list(TILE["threadblock_shape"]),
        "cluster_shape": list(TILE["cluster_shape"]),
        "kernel_schedule": KernelScheduleType[TILE["kernel_schedule"]],
        "epilogue_schedule": EpilogueScheduleType[TILE["epilogue_schedule"]],
    }
    return plan


def describe_tile() -> str:
    """The kernel's configuration in a line, for the provenance."""
    m, n, k = TILE["threadblock_shape"]
    cluster = "x".join(map(str, TILE["cluster_shape"]))
    return f"{m}x{n}x{k} tiles, {cluster} clusters, {TILE['kernel_schedule']}"


def build_cutlass_evt(stack: GpuStack, operands: Operands) -> PreparedProvider:
    """The CUTLASS GEMM with the epilog as its visitor tree, compiled (or found in the cache) for this workload."""
    workload = operands.workload
    spec, dtype, m, n = workload.epilog, workload.dtype.name, workload.m, workload.n
    reason = refusal(workload)
    if reason:
        raise Unsupported(reason)
    _nvcc()
    cutlass = _cutlass()
    plan = _plan(cutlass, spec, dtype, n, m)
    names = evt_source(spec).outputs
    result_t = operands.result.T  # C, the (N x M) row-major view of D
    visitor_args: dict[str, Any] = {"D": result_t}
    outputs: dict[str, Any] = {"result": operands.result}
    if spec.bias:
        visitor_args["bias"] = operands.bias.reshape(1, m)
    if spec.derivative is Derivative.DGELU:  # (N, M) row-major: M is a multiple of 8, so no padded rows
        visitor_args["gelu_aux"] = operands.gelu_aux.T
    if spec.saves_aux:  # cuBLASLt's GELU aux is D's shape where M is a multiple of 8
        outputs[names[1]] = operands.empty_result_like()
        visitor_args[names[1]] = outputs[names[1]].T
    summed = []
    if spec.summed is Summed.RESULT:  # in fp32 (see traced_epilogue)
        outputs[names[-1]] = operands.empty_vector(m, operands.xp.float32)
        visitor_args[names[-1]] = outputs[names[-1]]
        summed.append(outputs[names[-1]])
    started = time.perf_counter()
    with contextlib.chdir(CACHE_DIR):  # where nvcc's error files land
        # A' = B^T (N x K), B' = A^T (K x M); the first call compiles (or loads the cubin) and runs once. Never
        # synchronized through the interface: its sync() frees the arguments' device buffers.
        arguments = plan.run(operands.b.T, operands.a.T, result_t, result_t, visitor_args=visitor_args, sync=False)
    first_s = time.perf_counter() - started
    operation = plan.operation

    def run():
        # the row reduction adds each tile's sums onto its output with atomics, so the output starts at zero: CUTLASS's
        # C++ adapter sets it so on each launch (the reduction's initialize_workspace), which the interface skips
        for vector in summed:
            stack.cupy.cuda.runtime.memsetAsync(data_ptr(vector), 0, nbytes(vector), 0)  # the GEMM's stream, 0
        operation.run(arguments)
        return outputs

    provenance = {
        "algorithm": f"CUTLASS {cutlass.__version__} EVT, {describe_tile()}: {operation.procedural_name()}",
        "chosen_by": "fixed",
        # what nvcc took to build the kernel on this machine, where precompile found it recorded, else what the first
        # call took (compiling, or loading the cubin from the cache)
        "compile_s": round(_COMPILE_SECONDS.get((spec.name, dtype), first_s), 3),
    }
    return PreparedProvider(run, tuple(outputs.values()), provenance=provenance, release=arguments.free)


def _compile_one(epilog: str, dtype: str) -> dict[str, Any]:
    """Compile one (epilog, dtype) kernel into CACHE_DIR's cache without running it (a precompile process's
    work): its seconds and whether nvcc ran (the kernel was not in the cache), or the error."""
    from fusedbench.catalog.dtypes import dtype_spec
    from fusedbench.catalog.epilogs import epilog_spec

    try:
        cutlass = _cutlass()
        plan = _plan(cutlass, epilog_spec(epilog), dtype, 4096, 4096)
        alignment = ROW_BYTES // dtype_spec(dtype).operand_itemsize  # what plan.run finds for aligned rows
        cached, started = _cached_kernels(), time.perf_counter()
        with contextlib.chdir(CACHE_DIR):
            plan.compile(alignment_A=alignment, alignment_B=alignment, alignment_C=alignment)
        return {"seconds": time.perf_counter() - started, "compiled": _cached_kernels() > cached}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}


def precompile(workloads: list[Workload], *, timed: bool) -> None:
    """Compile every kernel the workloads' cells need, one process each (nvcc takes a minute of one core, and a
    peers group needs up to 14), into CACHE_DIR's cache. Each process works in a copy of the cache, so a kernel
    the machine compiled before is found there in a second, and its copy is merged back here: the cache is one
    sqlite file. What nvcc took for each kernel it built is recorded beside it (NVCC_SECONDS_FILE). A kernel that
    fails to compile is left to its builder, which meets the error in its own cell."""
    jobs = sorted(
        {(w.epilog.name, w.dtype.name) for w in workloads if refusal(w) is None} - set(_COMPILE_SECONDS),
    )
    if not jobs or importlib.util.find_spec("cutlass_cppgen") is None:
        return
    try:
        _nvcc()
        _cutlass()
    except Skipped:
        return  # each builder says why
    code = f"from {__name__} import _compile_one; import json, sys; print(json.dumps(_compile_one(*sys.argv[1:])))"
    failed, recorded = [], _recorded_nvcc_seconds()
    with tempfile.TemporaryDirectory(prefix="fusedbench-cutlass-") as folder:

        def compile_apart(index: int, job: tuple[str, str]) -> dict[str, Any]:
            environment = {**os.environ, "FUSEDBENCH_CUTLASS_CACHE": _cache_copy(folder, str(index))}
            done = subprocess.run([sys.executable, "-c", code, *job], env=environment, capture_output=True, text=True)
            lines = done.stdout.strip().splitlines()
            if done.returncode or not lines:
                return {"error": f"exit {done.returncode}: {' '.join(done.stderr.split())[-300:]}"}
            return json.loads(lines[-1])

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            outcomes = list(pool.map(compile_apart, range(len(jobs)), jobs))
        for index, (job, outcome) in enumerate(zip(jobs, outcomes, strict=True)):
            if "error" in outcome:
                failed.append(f"{'/'.join(job)}: {outcome['error']}")
                continue
            _merge_cache(os.path.join(folder, str(index), CACHE_FILE), _cache_file())
            if outcome["compiled"]:
                recorded[_kernel_name(*job)] = outcome["seconds"]
            _COMPILE_SECONDS[job] = recorded.get(_kernel_name(*job), outcome["seconds"])
        write_text_atomically(os.path.join(CACHE_DIR, NVCC_SECONDS_FILE), json.dumps(recorded, indent=1) + "\n")
    if failed:
        print(f"cutlass precompile: {len(failed)} of {len(jobs)} kernels not compiled ahead: {failed[0]}",
              file=sys.stderr)  # fmt: skip


def _kernel_name(epilog: str, dtype: str) -> str:
    return f"{epilog}/{dtype}/{describe_tile()}"


def _recorded_nvcc_seconds() -> dict[str, float]:
    """NVCC_SECONDS_FILE's record; empty where it is missing or unreadable (the seconds are provenance only)."""
    try:
        with open(os.path.join(CACHE_DIR, NVCC_SECONDS_FILE)) as file:
            recorded = json.load(file)
        return {str(name): float(seconds) for name, seconds in recorded.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _cached_kernels() -> int:
    """How many kernels this process's cache holds (none before its first compile creates the table)."""
    try:
        with contextlib.closing(sqlite3.connect(_cache_file())) as connection:
            return connection.execute("SELECT COUNT(*) FROM compiled_operations").fetchone()[0]
    except sqlite3.Error:
        return 0


def _cache_copy(folder: str, name: str) -> str:
    """A cache directory under `folder` holding a copy of CACHE_DIR's cache, for one compiling process."""
    copy = os.path.join(folder, name)
    os.makedirs(copy)
    if os.path.exists(_cache_file()):
        shutil.copyfile(_cache_file(), os.path.join(copy, CACHE_FILE))
    return copy


def _merge_cache(source: str, target: str) -> None:
    """Copy a compiling process's kernels into the cache this process loads from."""
    with contextlib.closing(sqlite3.connect(target)) as connection:
        connection.execute("ATTACH DATABASE ? AS compiled", (source,))
        connection.execute("INSERT OR IGNORE INTO compiled_operations SELECT * FROM compiled.compiled_operations")
        connection.commit()
