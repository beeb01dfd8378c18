"""The seed blog's two naive snippets, transcribed as the blog prints them: the control the
`textbook` provider is held to (same outputs, same kernels, and a paired time ratio that the
`Blog` benchmark group measures).

The blog ("fusing epilogs with matmul in nvmath-python") makes its arrays with cupy, row-major:
`weights` is (outputs, inputs), activations and gradients are (features, batch), and `mask`
is `t1 < 0` for the forward pass's pre-activation t1. Only the dtype (fp16, the blog's figures)
and the sizes come from the workload; every statement below is the blog's.
"""

from __future__ import annotations

from fusedbench.catalog.epilogs import Epilog
from fusedbench.errors import Unsupported
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.operands import Operands
from fusedbench.measure.gpu.providers import PreparedProvider


def blog_forward(Matmul, cupy, weights, x, bias):
    """The blog's naive forward pass: the GEMM, then bias and ReLU as array statements."""
    mm = Matmul(weights, x)
    mm.plan()

    def forward():
        y = mm.execute()
        y += bias[:, cupy.newaxis]
        y[y < 0] = 0
        return y

    return forward, mm


def blog_backward(Matmul, cupy, weights, grad, mask):
    """The blog's naive backward pass: the GEMM, the ReLU mask, and the bias gradient as a sum."""
    mm = Matmul(weights.T, grad)
    mm.plan()

    def backward():
        grad_t1 = mm.execute()
        grad_t1[mask] = 0  # assuming that `mask = (t1 < 0)`
        grad_bias = cupy.sum(grad_t1, axis=1)
        return grad_t1, grad_bias

    return backward, mm


def build_blog(stack: GpuStack, operands: Operands) -> PreparedProvider:
    """The blog's snippet for the workload's epilog, on the blog's arrays made from the workload's operands."""
    workload, cupy = operands.workload, stack.cupy
    if workload.dtype.name != "fp16":
        raise Unsupported(f"the blog's snippets are cupy fp16 code; {workload.dtype.name} is not theirs")
    matmul_class = stack.nvmath_advanced.Matmul
    result_bytes = workload.m * workload.n * workload.dtype.result_itemsize
    if workload.epilog.epilog is Epilog.RELU_BIAS:
        x = cupy.ascontiguousarray(operands.b)  # (inputs, batch)
        forward, mm = blog_forward(matmul_class, cupy, operands.a, x, operands.bias)
        return PreparedProvider(lambda: {"result": forward()}, (), {"result": result_bytes}, release=mm.free)
    if workload.epilog.epilog is Epilog.DRELU_BGRAD:
        weights = cupy.ascontiguousarray(operands.a.T)  # the next layer's (outputs, inputs)
        grad = cupy.ascontiguousarray(operands.b)
        mask = cupy.ascontiguousarray(operands.relu_negative)  # t1 < 0, t1 row-major as the forward made it
        backward, mm = blog_backward(matmul_class, cupy, weights, grad, mask)

        def run():
            grad_t1, grad_bias = backward()
            return {"result": grad_t1, "drelu_bgrad": grad_bias}

        return PreparedProvider(run, (), {"result": result_bytes}, release=mm.free)
    raise Unsupported(f"the blog has naive snippets for RELU_BIAS and DRELU_BGRAD only, not {workload.epilog.name}")
