"""The seed walkthrough's rungs (loops, einsum, a numba CUDA kernel, the library: a matmul tutorial) as peers.

- `einsum`: the product through the array library's einsum (cupy's, or torch's for torch operands), then the
  textbook's epilog statements: what a user gets from one line that names the contraction.
- `numba-naive`: the walkthrough's kernel, one thread per output looping over K with an fp32 accumulator, the
  forward epilog applied to the accumulator before the one store.
- `numba-tiled`: the same with TILE x TILE blocks of A and B staged through shared memory (padded a column, so
  that a warp reading down a tile hits 32 banks), the next rung a numba user climbs.

Both kernels run TILE x TILE threads a block, x along D's rows (its contiguous axis: stores coalesce), and pack
RELU_AUX_BIAS's ReLU bit-mask as cuBLASLt lays it out: each thread leaves its bit in shared memory and one thread
in eight packs a byte. They cover the forward epilogs the walkthrough's network needs (`KERNEL_EPILOGS`) at fp32 and
fp16 (fp32 accumulation); anything else is refused. They are slow by design, to show what tensor cores and a tuned
library buy: where one call would take longer than CALL_LIMIT_S (estimated from one call timed at PROBE_SHAPE on
the same GPU, scaled by the multiply-adds), the cell is skipped with those figures as its reason.

The kernels are built by `make_kernel` for a `jit` decorator, numba's `cuda.jit` on a GPU, and its simulator's in
the tests, which run them on the CPU.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from fusedbench.catalog.epilogs import EPILOGS, Activation, Epilog, EpilogSpec
from fusedbench.catalog.providers import NUMBA_NAIVE, PROVIDERS
from fusedbench.catalog.shapes import shape_label
from fusedbench.errors import Skipped, Unsupported
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.operands import Operands
from fusedbench.measure.gpu.providers import PreparedProvider, Textbook, aux_buffer

try:  # a module global: numba's simulator swaps it for its own in the kernels it runs (the tests)
    from numba import cuda
    from numba.cuda.core import config as numba_config
except ImportError as missing:
    cuda, _MISSING = None, missing

KERNEL_EPILOGS = frozenset(PROVIDERS[NUMBA_NAIVE].epilogs)  # the numba kernels' (numba-tiled's are the same)
KERNEL_DTYPES = PROVIDERS[NUMBA_NAIVE].dtypes
TILE = 32  # threads along each side of a block, and the side of a shared-memory tile
PROBE_SHAPE = (1024, 1024, 1024)  # (M, K, N) of the call timed to estimate a cell's
CALL_LIMIT_S = 0.5  # a cell times about 15 calls: at most a few seconds a cell
_GELU_SCALE = math.sqrt(2.0 / math.pi)
_ACTIVATIONS = {Activation.NONE: 0, Activation.RELU: 1, Activation.GELU: 2}


def make_kernel(jit: Callable, spec: EpilogSpec, *, tiled: bool, tile: int = TILE) -> Callable:
    """A kernel `(a, b, d, bias, aux)` computing d = epilog(a @ b) (and aux, the ReLU bit-mask, where `spec` saves
    it), launched on (ceil(M / tile), ceil(N / tile)) blocks of (tile, tile) threads. `bias` and `aux` are dummies
    where the epilog has none: the flags are constants of the closure, so each epilog compiles to its own kernel."""
    has_bias, activation, saves_aux = spec.bias, _ACTIVATIONS[spec.activation], spec.saves_aux
    zero, half, one = np.float32(0), np.float32(0.5), np.float32(1)
    gelu_scale, gelu_cubic = np.float32(_GELU_SCALE), np.float32(0.044715)
    padded = tile + 1  # a shared array's shape must be a constant of the closure, not an expression in the kernel

    @jit(device=True)
    def finish(acc, d, bias, aux, bits, i, j, inside):
        """+ bias, the mask bit, the activation and the one store of D, in fp32 until the store."""
        pre = acc + np.float32(bias[i]) if has_bias and inside else acc
        if activation == 1:
            value = max(pre, zero)
        elif activation == 2:
            value = half * pre * (one + math.tanh(gelu_scale * (pre + gelu_cubic * pre * pre * pre)))
        else:
            value = pre
        if inside:
            d[i, j] = value
        if saves_aux:  # bit i % 8 of byte (i // 8, j): this block's 8 consecutive rows, packed by the first
            tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
            bits[tx, ty] = 1 if inside and pre >= zero else 0
            cuda.syncthreads()
            if inside and tx % 8 == 0:
                byte = 0
                for bit in range(8):
                    byte |= bits[tx + bit, ty] << bit
                aux[i // 8, j] = byte

    @jit
    def naive(a, b, d, bias, aux):
        bits = cuda.shared.array((tile, tile), np.uint8)
        i, j = cuda.grid(2)
        inside = i < d.shape[0] and j < d.shape[1]
        acc = zero
        if inside:
            for k in range(a.shape[1]):
                acc += np.float32(a[i, k]) * np.float32(b[k, j])
        finish(acc, d, bias, aux, bits, i, j, inside)

    @jit
    def tiled_kernel(a, b, d, bias, aux):
        tile_a = cuda.shared.array((tile, padded), np.float32)
        tile_b = cuda.shared.array((tile, padded), np.float32)
        bits = cuda.shared.array((tile, tile), np.uint8)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row, column = cuda.blockIdx.x * tile, cuda.blockIdx.y * tile
        i, j = row + tx, column + ty
        m, n, depth = d.shape[0], d.shape[1], a.shape[1]
        acc = zero
        for start in range(0, depth, tile):
            # Both tiles are read along K, each operand's contiguous axis in the TN layout.
            k = start + tx
            tile_a[ty, tx] = np.float32(a[row + ty, k]) if row + ty < m and k < depth else zero
            tile_b[tx, ty] = np.float32(b[k, column + ty]) if k < depth and column + ty < n else zero
            cuda.syncthreads()
            for kk in range(tile):
                acc += tile_a[tx, kk] * tile_b[kk, ty]
            cuda.syncthreads()
        finish(acc, d, bias, aux, bits, i, j, i < m and j < n)

    return tiled_kernel if tiled else naive


def launch_grid(m: int, n: int, tile: int = TILE) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) covering an M x N result, x along M."""
    return (math.ceil(m / tile), math.ceil(n / tile)), (tile, tile)


def _numba_cuda():
    """numba's CUDA module, ready to compile on the GPU, or Skipped with the install that brings it."""
    if cuda is None:
        raise Skipped(f"the numba peers need numba-cuda ({_MISSING}); install fusedbench[cu12] or fusedbench[cu13]")
    # numba-cuda 0.30 (in maintenance mode, its last release) registers an overload of np.row_stack, which numpy
    # 2.5 removed, while compiling its first kernel: numpy's own alias of vstack is put back where it is missing
    # (NVIDIA/numba-cuda#907, closed unfixed).
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    # numba warns that a grid under 128 blocks under-uses the GPU, a hint for beginners: a cell's shape sets its grid
    # (the small shapes are there to verify), and under pytest's `filterwarnings = error` the hint failed the small
    # cells on an H200 (filtering it by its message, colour codes and all, did not stop it there)
    numba_config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    return cuda


@functools.cache
def _compiled(spec: EpilogSpec, tiled: bool) -> Callable:
    return make_kernel(_numba_cuda().jit, spec, tiled=tiled)


@functools.cache
def _probe_seconds(stack: GpuStack, dtype: str, tiled: bool) -> float:
    """One call of the DEFAULT kernel at PROBE_SHAPE (after one that compiles it), timed with CUDA events."""
    cupy, numba_cuda = stack.cupy, _numba_cuda()
    m, k, n = PROBE_SHAPE
    a = cupy.ones((m, k), dtype=dtype)
    b = cupy.ones((n, k), dtype=dtype).T
    d = cupy.empty((n, m), dtype=dtype).T
    dummy = cupy.zeros((1, 1), dtype=cupy.uint8)
    arguments = [numba_cuda.as_cuda_array(x) for x in (a, b, d, dummy[0], dummy)]
    launch = _compiled(EPILOGS[Epilog.DEFAULT], tiled)[launch_grid(m, n)]
    launch(*arguments)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    launch(*arguments)
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / 1e3


def build_numba(stack: GpuStack, operands: Operands, *, tiled: bool) -> PreparedProvider:
    """The walkthrough's numba kernel (`tiled`: its shared-memory version) with the epilog fused, for one workload."""
    spec, workload = operands.workload.epilog, operands.workload
    name = "numba-tiled" if tiled else "numba-naive"
    if spec.epilog not in KERNEL_EPILOGS:
        fused = ", ".join(e.name for e in sorted(KERNEL_EPILOGS))
        raise Unsupported(f"{name} fuses the walkthrough's forward epilogs only ({fused}), not {spec.name}")
    if workload.dtype.name not in KERNEL_DTYPES:
        raise Unsupported(f"{name} runs fp32 and fp16 (fp32 accumulation), not {workload.dtype.name}")
    numba_cuda = _numba_cuda()
    probe = _probe_seconds(stack, workload.dtype.operand, tiled)
    scale = workload.m * workload.k * workload.n / math.prod(PROBE_SHAPE)
    if probe * scale > CALL_LIMIT_S:
        raise Skipped(
            f"{name} would take about {probe * scale:.2g} s a call here, over the walkthrough's {CALL_LIMIT_S} s: one "
            f"call took {probe * 1e3:.2f} ms at {shape_label(*PROBE_SHAPE)} on this GPU, and this cell has "
            f"{scale:.0f}x its multiply-adds"
        )
    outputs = {"result": operands.result}
    if spec.saves_aux:
        outputs[spec.outputs[0]] = aux_buffer(operands, spec)
    dummy = stack.cupy.zeros((1, 1), dtype=stack.cupy.uint8)
    bias = operands.bias if operands.bias is not None else dummy[0]
    arguments = [
        numba_cuda.as_cuda_array(x)
        for x in (operands.a, operands.b, operands.result, bias, outputs.get("relu_aux", dummy))
    ]
    launch = _compiled(spec, tiled)[launch_grid(workload.m, workload.n)]

    def run():
        launch(*arguments)
        return outputs

    threads = f"{TILE}x{TILE} threads a block"
    described = f"{TILE}x{TILE} tiles in shared memory, {threads}" if tiled else f"one thread an output, {threads}"
    return PreparedProvider(run, tuple(outputs.values()), provenance={"algorithm": described, "chosen_by": "fixed"})


def build_numba_naive(stack: GpuStack, operands: Operands) -> PreparedProvider:
    return build_numba(stack, operands, tiled=False)


def build_numba_tiled(stack: GpuStack, operands: Operands) -> PreparedProvider:
    return build_numba(stack, operands, tiled=True)


def build_einsum(stack: GpuStack, operands: Operands) -> PreparedProvider:
    """The product as `einsum('ik,kj->ij', a, b)` on the operands as they lie, then the textbook's statements."""
    xp: Any = operands.xp
    a, b = operands.a, operands.b
    textbook = Textbook(operands, lambda: xp.einsum("ik,kj->ij", a, b), a, b)
    return PreparedProvider(textbook.run, (), textbook.fresh_outputs)
