"""Random operands for one workload, laid out as cuBLASLt and nn.Linear lay them out.

In the 'TN' layout A (M x K) is row-major and B (K x N) column-major (B = x^T for activations x
of shape (tokens, in)): what fp8 requires and torch's F.linear uses. BGRADA and BGRADB take the
'NT' weight-gradient layout (A column-major, B row-major), as cuBLASLt needs. Every provider of
a workload reads the same memory. D (M x N) is column-major, as the bias and aux epilogs need.
Values are drawn on the GPU, fresh for every seed; never zeros, which hide unwritten outputs
and run faster than real data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fusedbench.catalog.epilogs import Derivative, gelu_aux_shape, relu_aux_shape
from fusedbench.catalog.workloads import Workload
from fusedbench.errors import Skipped
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.arrays import as_cupy, to_host
from fusedbench.measure.gpu.kernels import make_relu_mask
from fusedbench.measure.reference import ReferenceInputs, unpack_relu_aux


@dataclass
class Operands:
    """Device tensors of one workload (cupy arrays or torch tensors, per the dtype's framework)."""

    workload: Workload
    framework: str
    xp: Any  # the cupy or torch module, for the textbook provider's array code
    a: Any  # (M, K), row-major in the TN layout, column-major in NT
    b: Any  # (K, N), column-major in the TN layout, row-major in NT
    result: Any  # D, (M, N) column-major, the buffer providers write
    bias: Any = None  # (M,)
    relu_aux: Any = None  # DRELU input: cuBLASLt bit-mask, (rows, N) column-major uint8
    relu_negative: Any = None  # the same mask as the textbook keeps it: bool (M, N), pre < 0
    gelu_aux: Any = None  # DGELU input: pre-activation, (round_up(M, 8), N) column-major

    def empty_result_like(self, rows: int | None = None, dtype: Any = None) -> Any:
        """A new column-major (rows or M, N) buffer in D's dtype, or `dtype`."""
        return _empty_fortran(
            self.framework, self.xp, rows or self.workload.m, self.workload.n, dtype or self.result.dtype
        )

    def empty_vector(self, length: int, dtype: Any = None) -> Any:
        """A new (length,) buffer in D's dtype, or `dtype`."""
        return self.xp.empty(length, dtype=dtype or self.result.dtype, **_device(self.framework))

    def reference_inputs(self) -> ReferenceInputs:
        """The same inputs on the host, in float64, for the reference."""
        m = self.workload.m
        return ReferenceInputs(
            a=to_host(self.a),
            b=to_host(self.b),
            bias=None if self.bias is None else to_host(self.bias),
            relu_mask=None if self.relu_aux is None else unpack_relu_aux(to_host(self.relu_aux), m),
            gelu_pre=None if self.gelu_aux is None else to_host(self.gelu_aux)[:m],
        )


def _device(framework: str) -> dict:
    return {"device": "cuda"} if framework == "torch" else {}


def _empty_fortran(framework: str, xp: Any, rows: int, cols: int, dtype: Any) -> Any:
    return xp.empty((cols, rows), dtype=dtype, **_device(framework)).T


def _dtype(xp: Any, name: str) -> Any:
    return getattr(xp, name)


def make_operands(stack: GpuStack, workload: Workload, seed: int) -> Operands:
    """Draw every tensor `workload` needs from N(0, 1) (bias and pre-activations scaled to match D)."""
    spec, dtype = workload.epilog, workload.dtype
    m, k, n = workload.m, workload.k, workload.n
    if dtype.framework == "torch":
        if stack.torch is None:
            raise Skipped(f"{dtype.name} operands need torch with CUDA; install fusedbench[torch]")
        xp = stack.torch
        generator = xp.Generator(device="cuda").manual_seed(seed)

        def normal(shape, scale=1.0):
            return xp.randn(shape, generator=generator, device="cuda", dtype=xp.float32) * scale

        def cast(array, name):
            return array.to(_dtype(xp, name))

    else:
        xp = stack.cupy
        state = xp.random.RandomState(seed)

        def normal(shape, scale=1.0):
            return state.standard_normal(shape, dtype=xp.float32) * scale

        def cast(array, name):
            return array.astype(name)

    if dtype.min_compute_capability > stack.compute_capability:
        needed = ".".join(map(str, dtype.min_compute_capability))
        found = ".".join(map(str, stack.compute_capability))
        raise Skipped(f"{dtype.name} needs compute capability {needed}+, this GPU ({stack.device_name}) is {found}")

    d_std = math.sqrt(k)  # A@B entries have standard deviation sqrt(K)
    if spec.layout == "TN":
        a, b = cast(normal((m, k)), dtype.operand), cast(normal((n, k)), dtype.operand).T
    else:
        a, b = cast(normal((k, m)), dtype.operand).T, cast(normal((k, n)), dtype.operand)
    operands = Operands(
        workload=workload,
        framework=dtype.framework,
        xp=xp,
        a=a,
        b=b,
        result=_empty_fortran(dtype.framework, xp, m, n, _dtype(xp, dtype.result)),
    )
    if spec.bias:
        operands.bias = cast(normal((m,), d_std), dtype.result)
    if spec.derivative is Derivative.DRELU:
        pre = cast(normal((n, m)), dtype.result).T
        rows, _ = relu_aux_shape(m, n)
        operands.relu_aux = _empty_fortran(dtype.framework, xp, rows, n, _dtype(xp, "uint8"))
        make_relu_mask(as_cupy(pre), as_cupy(operands.relu_aux))()
        operands.relu_negative = pre < 0
    if spec.derivative is Derivative.DGELU:
        rows, _ = gelu_aux_shape(m, n)
        # Pre-activations of spread 2 cover GELU's curved region, where its derivative varies.
        operands.gelu_aux = cast(normal((n, rows), 2.0), dtype.result).T
    return operands
