"""Single-pass cupy kernels for the unfused provider, generated from the epilog table.

The unfused provider is the best honest version without fusion: the GEMM writes D, then ONE
elementwise pass does all the pointwise work (bias, activation, aux output, derivative mask)
and, for bias gradients, one coalesced two-stage reduction (of D over N, or of A or B over K in
the NT layout, where K is the strided axis of both). Each `make_*` function does the view and
kernel set-up once and returns a launcher whose call is nothing but kernel launches.

All arithmetic is float32; storage is fp16, fp32, bf16 (as uint16 bits) or fp8 e4m3 (as uint8
bits, read only). D is column-major (M x N), so kernels walk its transpose, (N x M) row-major,
where neighbouring threads touch neighbouring addresses.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from fusedbench.epilogs import Activation, Derivative, EpilogSpec

# Columns each thread sums in the first stage of a row reduction: enough threads (chunks x M)
# to fill the GPU, few enough chunks that the second stage is tiny.
COLUMNS_PER_CHUNK = 128

PREAMBLE = r"""
// Generic loads and stores go through float32. Templates, because cupy's float16 type is only
// complete where a kernel uses it; plain overloads take the integer storage of bf16 and fp8.
template <typename T> __device__ __forceinline__ float load_f32(T v) { return (float)v; }
template <typename T> __device__ __forceinline__ void store_f32(float v, T& out) { out = T(v); }
// bfloat16 travels as its 16-bit storage: the high half of a float32.
__device__ __forceinline__ float load_f32(unsigned short v) { return __uint_as_float(((unsigned int)v) << 16); }
__device__ __forceinline__ void store_f32(float v, unsigned short& out) {
    unsigned int bits = __float_as_uint(v);
    if ((bits & 0x7fffffffu) > 0x7f800000u) { out = 0x7fc0; return; }
    bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
    out = (unsigned short)(bits >> 16);
}
// fp8 e4m3 ("fn": no infinities, S.1111.111 is NaN) travels as its 8-bit storage (read only).
__device__ __forceinline__ float load_f32(unsigned char v) {
    const int exponent = (v >> 3) & 0xF, mantissa = v & 0x7;
    float magnitude;
    if (exponent == 0xF && mantissa == 0x7) magnitude = __int_as_float(0x7fc00000);
    else if (exponent == 0) magnitude = ldexpf((float)mantissa, -9);
    else magnitude = ldexpf(1.0f + mantissa / 8.0f, exponent - 7);
    return (v & 0x80) ? -magnitude : magnitude;
}
// ReLU as cuBLASLt applies it: negatives become 0, NaN stays NaN.
__device__ __forceinline__ float relu_f32(float x) { return x < 0.f ? 0.f : x; }
__device__ __forceinline__ float gelu_f32(float x) {
    const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.f + tanhf(inner));
}
__device__ __forceinline__ float gelu_grad_f32(float x) {
    const float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * 0.7978845608028654f * (1.f + 3.f * 0.044715f * x * x);
}
"""


@functools.cache
def _pointwise_kernel(bias: bool, activation: Activation, saves_gelu_aux: bool, derivative: Derivative):
    """One pass over D^T: bias, GELU aux copy, activation, derivative mask, in that order."""
    import cupy

    inputs, body = ["int64 m"], ["float x = load_f32(d);"]
    outputs = ["T d"]
    if bias:
        inputs.append("B bias")
        body.append("x += load_f32(bias);")
    if saves_gelu_aux:
        outputs.append("A aux")
        body.append("store_f32(x, aux);")
    body.append(
        {Activation.NONE: "", Activation.RELU: "x = relu_f32(x);", Activation.GELU: "x = gelu_f32(x);"}[activation]
    )
    if derivative is Derivative.DRELU:
        inputs += ["raw uint8 mask", "int64 mask_ld"]
        body.append(
            "const long long row = i % m, col = i / m;if (!((mask[col * mask_ld + row / 8] >> (row % 8)) & 1)) x = 0.f;"
        )
    elif derivative is Derivative.DGELU:
        inputs.append("P pre")
        body.append("x *= gelu_grad_f32(load_f32(pre));")
    body.append("store_f32(x, d);")
    return cupy.ElementwiseKernel(
        ", ".join(inputs), ", ".join(outputs), "\n".join(body), "fusedbench_pointwise", preamble=PREAMBLE
    )


@functools.cache
def _relu_mask_kernel(bias: bool, apply_relu: bool):
    """One thread per mask byte: 8 consecutive rows of one column, packed as cuBLASLt packs them.

    Parameters, in call order: m, rows, [bias], d, packed (d is an output when ReLU is applied).
    """
    import cupy

    inputs = ["int64 m", "int64 rows"] + (["raw B bias"] if bias else [])
    if apply_relu:
        outputs = ["raw T d", "uint8 packed"]
    else:
        inputs.append("raw T d")
        outputs = ["uint8 packed"]
    body = f"""
    const long long col = i / rows, byte_row = i % rows;
    unsigned int bits = 0;
    for (int t = 0; t < 8; ++t) {{
        const long long row = byte_row * 8 + t;
        if (row < m) {{
            const long long at = col * m + row;
            float x = load_f32(d[at]);
            {"x += load_f32(bias[row]);" if bias else ""}
            if (x >= 0.f) bits |= 1u << t;
            {"store_f32(relu_f32(x), d[at]);" if apply_relu else ""}
        }}
    }}
    packed = (unsigned char)bits;
    """
    return cupy.ElementwiseKernel(
        ", ".join(inputs), ", ".join(outputs), body, "fusedbench_relu_mask", preamble=PREAMBLE
    )


@functools.cache
def _row_sum_kernels():
    import cupy

    partial = cupy.ElementwiseKernel(
        "raw T x, int64 m, int64 n, int64 columns",
        "float32 partial",
        """
        const long long row = i % m, first = (i / m) * columns;
        const long long last = min(first + columns, n);
        float acc = 0.f;
        for (long long col = first; col < last; ++col) acc += load_f32(x[col * m + row]);
        partial = acc;
        """,
        "fusedbench_row_sum_partial",
        preamble=PREAMBLE,
    )
    final = cupy.ElementwiseKernel(
        "raw float32 partial, int64 m, int64 chunks",
        "Y total",
        "float acc = 0.f; for (long long c = 0; c < chunks; ++c) acc += partial[c * m + i]; store_f32(acc, total);",
        "fusedbench_row_sum_final",
        preamble=PREAMBLE,
    )
    return partial, final


def make_relu_mask(d, packed, *, bias=None, apply_relu: bool) -> Callable[[], None]:
    """Launcher: pack (D [+ bias] >= 0) into `packed` (cuBLASLt layout); optionally ReLU D in place.

    d: (M, N) column-major; packed: (rows, N) column-major uint8; bias: (M,) or None.
    """
    m = d.shape[0]
    kernel = _relu_mask_kernel(bias is not None, apply_relu)
    args = (m, packed.shape[0]) + ((bias,) if bias is not None else ()) + (d.T.reshape(-1), packed.T)
    return lambda: kernel(*args)


def make_epilog_pass(spec: EpilogSpec, d, *, bias=None, relu_aux=None, gelu_aux=None, aux_out=None):
    """Launcher for the pointwise part of `spec` on D (M x N, column-major), all in one pass.

    relu_aux / gelu_aux are the DRELU / DGELU inputs; aux_out receives relu_aux or gelu_aux for
    the epilogs that save one. Returns None when the epilog has no pointwise work.
    """
    if spec.saves_aux and spec.activation is Activation.RELU:
        return make_relu_mask(d, aux_out, bias=bias, apply_relu=True)
    if not spec.has_pointwise_work:
        return None
    m = d.shape[0]
    kernel = _pointwise_kernel(spec.bias, spec.activation, spec.saves_aux, spec.derivative)
    args: list = [m]
    if spec.bias:
        args.append(bias[None, :])
    if spec.derivative is Derivative.DRELU:
        args += [relu_aux.T.reshape(-1), relu_aux.shape[0]]
    elif spec.derivative is Derivative.DGELU:
        args.append(gelu_aux[:m].T)
    outputs = [d.T] + ([aux_out[:m].T] if spec.saves_aux else [])
    return lambda: kernel(*args, *outputs)


def make_row_sum(x, out) -> Callable[[], None]:
    """Launcher: out[i] = sum_j x[i, j] for a column-major (M x N) x, coalesced in two stages."""
    import cupy

    m, n = x.shape
    chunks = -(-n // COLUMNS_PER_CHUNK)
    partial = cupy.empty((chunks, m), dtype=cupy.float32)
    partial_kernel, final_kernel = _row_sum_kernels()
    flat_x = x.T.reshape(-1)

    def launch():
        partial_kernel(flat_x, m, n, COLUMNS_PER_CHUNK, partial)
        final_kernel(partial, m, chunks, out)

    return launch
