"""Single-pass cupy kernels for the unfused provider, generated from the epilog table.

The unfused provider is the best honest version without fusion: the GEMM writes D, then ONE
elementwise pass does all the pointwise work (bias, activation, aux output, derivative mask)
and, for bias gradients, one coalesced single-launch reduction (of D over N, or of A or B over K in
the NT layout, where K is the strided axis of both). Each `make_*` function does the view and
kernel set-up once and returns a launcher whose call is nothing but kernel launches.

All arithmetic is float32; storage is fp16, fp32, bf16 (as uint16 bits) or fp8 e4m3 (as uint8
bits, read only). D is column-major (M x N): a thread takes ROWS consecutive rows of one column
(FP32_ROWS in fp32 passes), so neighbouring threads touch neighbouring
addresses, with 16-byte vector loads and stores wherever M is a multiple of that (a scalar loop
covers the rest).

On an H200 (4.3 TB/s) a pass has about 25 instructions per element before it stops being
memory-bound, so the passes avoid what costs more than that: 64-bit integer division (a software
routine; indices are 32-bit wherever the arrays allow), libdevice's exact tanhf (GELU goes
through the hardware's tanh.approx for 16-bit results, __expf and a fast reciprocal for fp32,
both far inside every tolerance), scalar loads of the bias (one 16-byte load per thread), and
bit-by-bit bf16 rounding (the hardware's paired conversions instead).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from fusedbench.catalog.epilogs import Activation, Derivative, EpilogSpec
from fusedbench.catalog.providers import PASS_KERNEL_PREFIX

# Each thread owns ROWS consecutive rows of one column of D: 16 bytes of fp16 / bf16 (one vector
# load), and exactly one byte of the ReLU bit-mask.
ROWS = 8
# An fp32 pass takes FP32_ROWS rows a thread instead: one 16-byte access, so each of a warp's
# accesses covers 512 contiguous bytes (a ReLU mask byte is then two threads' bits). With 8 rows
# each access is two 16-byte halves of 32 sectors: at the seed shape on an H200 the tf32 BIAS pass
# reached 0.77 of the copy rate with 8 rows, 1.00 with 4.
FP32_ROWS = 4

# A row sum's block: SLICE_WARPS warps over one tile of TILE_ROWS rows (32 lanes x ROWS), each warp
# summing its own slice of columns. The block adds its warps' sums in shared memory, then makes one
# coalesced atomic add per row, so the totals see SLICE_WARPS times fewer adds than one per warp (with
# one strided add per thread and row, hundreds of slices serialized on few totals in L2: BGRADA at
# (1024,4096) moved 8 MB at 0.27 TB/s on the H100).
SLICE_WARPS = 8
TILE_ROWS = 32 * ROWS
# Threads a row sum aims for: enough loads in flight to reach HBM bandwidth however few rows there
# are (BGRADA sums only K columns of M rows), with no more slices than N / MIN_COLUMNS (rounded up
# to whole blocks, so with few columns some warps get fewer, or none).
# A warp's columns are strided (slice, slice + slices, ...), so that warps running together read
# neighbouring columns. Chosen on an H200 among 2^17-2^20 threads, 4-16 columns, 8 or 16 warps a
# block, strided or contiguous slices: at (8192,16384) fp16 78 us against 85 us for 2^18
# contiguous slices of 8 columns (a same-size memcpy: 64 us).
ROW_SUM_THREADS = 1 << 19
MIN_COLUMNS = 4

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
// ROWS (8) consecutive elements through 16-byte words, converted with register-only bit
// operations (no local arrays, whose address-taking would spill them to local memory).
__device__ __forceinline__ float half_to_f32(unsigned int bits) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)bits));
    return f;
}
// Two floats to one word of two fp16 / bf16 (the first in the low half), one instruction each.
__device__ __forceinline__ unsigned int pack_half2(float lo, float hi) {
    unsigned int w;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
    return w;
}
__device__ __forceinline__ unsigned int pack_bf16x2(float lo, float hi) {
    unsigned int w;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
    return w;
}
template <typename T> struct Rows;  // specialised per storage type below
template <> struct Rows<float16> {
    static __device__ __forceinline__ void load(const float16* p, float* x) {
        const uint4 w = *reinterpret_cast<const uint4*>(p);
        const unsigned int words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            x[2 * k] = half_to_f32(words[k] & 0xffffu);
            x[2 * k + 1] = half_to_f32(words[k] >> 16);
        }
    }
    static __device__ __forceinline__ void store(float16* p, const float* x) {
        uint4 w;
        w.x = pack_half2(x[0], x[1]);
        w.y = pack_half2(x[2], x[3]);
        w.z = pack_half2(x[4], x[5]);
        w.w = pack_half2(x[6], x[7]);
        *reinterpret_cast<uint4*>(p) = w;
    }
};
template <> struct Rows<unsigned short> {  // bfloat16
    static __device__ __forceinline__ void load(const unsigned short* p, float* x) {
        const uint4 w = *reinterpret_cast<const uint4*>(p);
        const unsigned int words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            x[2 * k] = __uint_as_float(words[k] << 16);
            x[2 * k + 1] = __uint_as_float(words[k] & 0xffff0000u);
        }
    }
    static __device__ __forceinline__ void store(unsigned short* p, const float* x) {
        uint4 w;
        w.x = pack_bf16x2(x[0], x[1]);
        w.y = pack_bf16x2(x[2], x[3]);
        w.z = pack_bf16x2(x[4], x[5]);
        w.w = pack_bf16x2(x[6], x[7]);
        *reinterpret_cast<uint4*>(p) = w;
    }
};
template <> struct Rows<float> {
    static __device__ __forceinline__ void load(const float* p, float* x) {
        const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
        x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w; x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
    }
    static __device__ __forceinline__ void store(float* p, const float* x) {
        reinterpret_cast<float4*>(p)[0] = make_float4(x[0], x[1], x[2], x[3]);
        reinterpret_cast<float4*>(p)[1] = make_float4(x[4], x[5], x[6], x[7]);
    }
};
template <> struct Rows<unsigned char> {  // fp8 operands: read one by one (never vectorized)
    static __device__ __forceinline__ void load(const unsigned char* p, float* x) {
        for (int j = 0; j < 8; ++j) x[j] = load_f32(p[j]);
    }
};
// R consecutive rows: ROWS (8) through Rows<T>; FP32_ROWS (4) of fp32 through one 16-byte word.
template <int R, typename T> struct Run {
    static __device__ __forceinline__ void load(const T* p, float* x) { Rows<T>::load(p, x); }
    static __device__ __forceinline__ void store(T* p, const float* x) { Rows<T>::store(p, x); }
};
template <> struct Run<4, float> {
    static __device__ __forceinline__ void load(const float* p, float* x) {
        const float4 a = *reinterpret_cast<const float4*>(p);
        x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
    }
    static __device__ __forceinline__ void store(float* p, const float* x) {
        *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
    }
};
// All R rows through 16-byte words (the caller knows they are there and aligned).
template <int R, typename T> __device__ __forceinline__ void load_rows(const T* p, float* x) {
    Run<R, T>::load(p, x);
}
template <int R, typename T> __device__ __forceinline__ void store_rows(T* p, const float* x) {
    Run<R, T>::store(p, x);
}
// Up to R rows: vector accesses when all R are there and the layout allows, else scalar.
template <int R, typename T> __device__ __forceinline__ void load_some(const T* p, float* x, int count, bool vector) {
    if (vector && count == R) { Run<R, T>::load(p, x); return; }
#pragma unroll
    for (int j = 0; j < R; ++j) if (j < count) x[j] = load_f32(p[j]);  // constant indices keep x in registers
}
template <int R, typename T> __device__ __forceinline__ void store_some(T* p, const float* x, int count, bool vector) {
    if (vector && count == R) { Run<R, T>::store(p, x); return; }
#pragma unroll
    for (int j = 0; j < R; ++j) if (j < count) store_f32(x[j], p[j]);
}
// ReLU as cuBLASLt applies it: negatives become 0, NaN stays NaN.
__device__ __forceinline__ float relu_f32(float x) { return x < 0.f ? 0.f : x; }
// tanh-GELU through its gate s = (1 + tanh(u)) / 2: gelu = x s, gelu' = s + 2 x s (1 - s) u'.
// Stored in 16 bits, s comes from the hardware's tanh.approx (one special-function instruction,
// relative error 2^-11, below half an fp16 ulp); stored in fp32, from __expf and a fast reciprocal
// (two, a few ulp off). Gelu<T>, T being D's storage type.
__device__ __forceinline__ float gelu_inner(float x) { return 0.7978845608028654f * (x + 0.044715f * x * x * x); }
__device__ __forceinline__ float gelu_slope(float x) { return 0.7978845608028654f * (1.f + 3.f * 0.044715f * x * x); }
template <typename T> struct Gelu {
    static __device__ __forceinline__ float gate(float x) {
        float t;
        asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(gelu_inner(x)));
        return 0.5f + 0.5f * t;
    }
};
template <> struct Gelu<float> {
    static __device__ __forceinline__ float gate(float x) {
        return __fdividef(1.f, 1.f + __expf(-2.f * gelu_inner(x)));
    }
};
template <typename T> __device__ __forceinline__ float gelu_f32(float x) { return x * Gelu<T>::gate(x); }
template <typename T> __device__ __forceinline__ float gelu_grad_f32(float x) {
    const float s = Gelu<T>::gate(x);
    return s + 2.f * x * s * (1.f - s) * gelu_slope(x);
}
"""


def _index_type(narrow: bool) -> str:
    """32-bit unsigned indices where every offset fits (their division is a few instructions), else 64-bit."""
    return "unsigned int" if narrow else "long long"


def _fits_32_bits(*arrays) -> bool:
    return all(a.size < 2**32 for a in arrays)


@functools.cache
def _epilog_kernel(spec: EpilogSpec, vector: bool, narrow: bool, rows: int = ROWS):
    """The whole pointwise part of `spec` in one pass: bias, aux output, activation, derivative.

    Parameters, in call order: m, groups, [bias], [mask, mask_ld], [pre, pre_ld], [aux_ld | mask_rows],
    d, [aux | packed]; every array is a flat raw view, and the launch covers N x groups threads of
    `rows` rows each (a mask byte holds ROWS rows: with 4, two threads share one).
    """
    import cupy

    relu_aux = spec.saves_aux and spec.activation is Activation.RELU
    gelu_aux = spec.saves_aux and spec.activation is Activation.GELU
    inputs, outputs = ["int64 m", "int64 groups"], ["raw T d"]
    per_row = []
    if spec.bias:
        inputs.append("raw B bias")
        per_row.append("v += bias_rows[j];")
    if gelu_aux:
        per_row.append("saved[j] = v;")
    if relu_aux:
        per_row.append("if (v >= 0.f) bits |= 1u << (j + {bit_base});")
    per_row.append(
        {Activation.NONE: "", Activation.RELU: "v = relu_f32(v);", Activation.GELU: "v = gelu_f32<T>(v);"}[
            spec.activation
        ]
    )
    if spec.derivative is Derivative.DRELU:
        inputs += ["raw uint8 mask", "int64 mask_ld"]
        per_row.append("if (!((mask_bits >> j) & 1)) v = 0.f;")
    elif spec.derivative is Derivative.DGELU:
        inputs += ["raw P pre", "int64 pre_ld"]
        per_row.append("v *= gelu_grad_f32<T>(pre_rows[j]);")
    if gelu_aux:
        inputs.append("int64 aux_ld")
        outputs.append("raw A aux")
    if relu_aux:
        outputs.append("raw uint8 packed")
    split = relu_aux and rows == FP32_ROWS
    if split:
        inputs.append("int64 mask_rows")
    derivative_input = {
        Derivative.DGELU: "load{v}(&pre[0] + col * (I)pre_ld + row0, pre_rows{count});",
        # A mask byte holds 8 rows: a thread of 4 rows takes its half.
        Derivative.DRELU: f"const unsigned int mask_bits = mask[col * (I)mask_ld + g * {rows} / 8]"
        f" >> (g * {rows} % 8);",
        Derivative.NONE: "",
    }[spec.derivative]
    steps = [
        "load{v}(dcol, x{count});",
        "load{v}(&bias[0] + row0, bias_rows{count});" if spec.bias else "",
        derivative_input,
        "#pragma unroll",
        "for (int j = 0; j < {rows}; ++j) {{ {guard} float v = x[j];",
        *per_row,
        "x[j] = v; }}",
        "store{v}(dcol, x{count});",
        "store{v}(&aux[0] + col * (I)aux_ld + row0, saved{count});" if gelu_aux else "",
    ]
    # With 16-byte accesses (M a multiple of `rows`) a thread has all its rows or none (mask padding):
    # one straight-line path with no per-element guards. Otherwise each access checks its rows.
    bit_base = "4 * half" if split else "0"
    if vector:
        work = "\n".join(steps).format(v=f"_rows<{rows}>", count="", guard="", rows=rows, bit_base=bit_base)
        work = f"if (count == {rows}) {{\n{work}\n}}"
    else:
        some, guard = f"_some<{rows}>", "if (j >= count) continue;"
        work = "\n".join(steps).format(v=some, count=", count, false", guard=guard, rows=rows, bit_base=bit_base)
    rows_of_thread = f"""
    const I row0 = g * {rows};
    const int count = row0 < (I)m ? (int)min((I){rows}, (I)m - row0) : 0;
    T* dcol = &d[0] + col * (I)m + row0;
    {work}
    """
    if split:
        # Two runs of 4 rows, 128 apart in the warp's tile of 256 rows: every access of the warp covers 512
        # contiguous bytes, and its 32 mask bytes are one whole sector (with one run of 4 rows a thread,
        # a warp wrote half a sector of mask, and tf32 RELU_AUX reached 0.80 of the copy rate on an H200).
        rows_of_thread = f"""
    const I first = (g >> 5) * 256 + (g & 31) * 4;
#pragma unroll
    for (int half = 0; half < 2; ++half) {{
        const I row0 = first + half * 128;
        const int count = row0 < (I)m ? (int)min((I)4, (I)m - row0) : 0;
        T* dcol = &d[0] + col * (I)m + row0;
        {work}
    }}
    """
    body = f"""
    typedef {_index_type(narrow)} I;
    const I ii = (I)i, col = ii / (I)groups, g = ii - col * (I)groups;
    float x[8], saved[8], pre_rows[8], bias_rows[8];
    unsigned int bits = 0;
    {rows_of_thread}
    {_store_mask_byte(split) if relu_aux else ""}
    """
    return cupy.ElementwiseKernel(
        ", ".join(inputs), ", ".join(outputs), body, PASS_KERNEL_PREFIX + "epilog", preamble=PREAMBLE
    )


def _store_mask_byte(split: bool) -> str:
    """Code that stores a thread's ReLU bits as its mask byte. Split (two runs of 4 rows, 128 apart), a byte
    is two neighbouring threads' runs: the pair (one warp, one column: a column has a multiple of 32 groups)
    swaps bits through a shuffle; the even thread stores the byte of the first runs, the odd one the second."""
    if not split:
        return "packed[ii] = (unsigned char)bits;"
    return """
    const unsigned int other = __shfl_xor_sync(3u << (threadIdx.x & 30u), bits, 1);
    const I byte = (g >> 5) * 32 + (g & 1) * 16 + ((g & 31) >> 1);
    const unsigned int low = (g & 1) ? other >> 4 : bits & 0xFu, high = (g & 1) ? bits >> 4 : other & 0xFu;
    if (byte < (I)mask_rows) packed[col * (I)mask_rows + byte] = (unsigned char)(low | (high << 4));
    """


@functools.cache
def _relu_mask_kernel():
    """Pack (X >= 0) for a column-major X into cuBLASLt's bit-mask; one thread per mask byte."""
    import cupy

    body = """
    const long long col = i / groups, g = i % groups, row0 = g * 8;
    const int count = row0 < m ? (int)min(8LL, m - row0) : 0;
    unsigned int bits = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) if (j < count && load_f32(x[col * m + row0 + j]) >= 0.f) bits |= 1u << j;
    packed[i] = (unsigned char)bits;
    """
    return cupy.ElementwiseKernel(
        "raw T x, int64 m, int64 groups", "raw uint8 packed", body, "operands_relu_mask", preamble=PREAMBLE
    )


# The one-pass backward's derivative step on a thread's ROWS rows of one column of D, before they are
# stored back and summed: dReLU zeroes the rows whose mask bit is clear, dGELU scales them by gelu'.
_DERIVATIVE_STEP = {
    Derivative.DRELU: """
            const unsigned int mask_bits = aux[col * (I)aux_ld + row0 / 8];
#pragma unroll
            for (int j = 0; j < 8; ++j) if (!((mask_bits >> j) & 1u)) rows[j] = 0.f;""",
    Derivative.DGELU: """
            float pre_rows[8];
            load_some<8>(&aux[0] + col * (I)aux_ld + row0, pre_rows, count, {vector});
#pragma unroll
            for (int j = 0; j < 8; ++j) rows[j] *= gelu_grad_f32<T>(pre_rows[j]);""",
}


@functools.cache
def _row_sum_kernel(vector: bool, narrow: bool, derivative: Derivative = Derivative.NONE):
    """A row sum in one launch: each block sums its tile's rows over SLICE_WARPS slices of columns and adds
    them atomically into a float32 total; the tile's last block to finish (a counter per tile) rounds the
    totals into the output and zeroes them and the counter for the next call.

    With a derivative it is the training stacks' backward step in one pass (TransformerEngine's fused
    dgelu + bias gradient): each thread applies dReLU / dGELU to its rows of D from the aux input, stores
    them back and sums them, so D is read once and written once instead of read twice and written once.

    The launch has exactly one thread per index (block_size threads, size a multiple of it), so every
    thread of a block reaches each __syncthreads.
    """
    import cupy

    vector_text = "true" if vector else "false"
    step = ""
    if derivative is not Derivative.NONE:
        step = _DERIVATIVE_STEP[derivative].format(vector=vector_text)
        step += f"\n            store_some<8>(&x[0] + col * (I)m + row0, rows, count, {vector_text});"
    body = f"""
    typedef {_index_type(narrow)} I;
    static_assert({SLICE_WARPS} * 32 >= {TILE_ROWS}, "a block's threads must cover its tile's rows");
    __shared__ float sums[{SLICE_WARPS}][{TILE_ROWS}];
    __shared__ bool finishing;
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const I tile = (I)blockIdx.x % (I)tiles, slice = (I)blockIdx.x / (I)tiles * {SLICE_WARPS} + warp;
    const I row0 = tile * {TILE_ROWS} + lane * 8;
    const int count = row0 < (I)m ? (int)min((I)8, (I)m - row0) : 0;
    const I slices = (I)blocks_per_tile * {SLICE_WARPS};
    float acc[8] = {{0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}}, rows[8];
    if (count > 0) {{
#pragma unroll {MIN_COLUMNS}
        for (I col = slice; col < (I)n; col += slices) {{
            load_some<8>(&x[0] + col * (I)m + row0, rows, count, {vector_text});{step}
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[j] += rows[j];
        }}
    }}
#pragma unroll
    for (int j = 0; j < 8; ++j) sums[warp][lane * 8 + j] = acc[j];
    __syncthreads();
    const I row = tile * {TILE_ROWS} + t;
    if (t < {TILE_ROWS}) {{
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < {SLICE_WARPS}; ++w) sum += sums[w][t];
        if (row < (I)m) atomicAdd(&total[row], sum);
    }}
    __threadfence();  // this block's adds reach L2 before its count does
    __syncthreads();
    if (t == 0) {{
        finishing = atomicAdd(&done[tile], 1u) == (unsigned int)(blocks_per_tile - 1);
        __threadfence();  // and the last block reads the totals only after its count
    }}
    __syncthreads();
    if (finishing) {{
        if (t < {TILE_ROWS} && row < (I)m) store_f32(atomicExch(&total[row], 0.f), out[row]);
        if (t == 0) done[tile] = 0u;
    }}
    """
    aux = {
        Derivative.NONE: "",
        Derivative.DRELU: "raw uint8 aux, int64 aux_ld, ",
        Derivative.DGELU: "raw P aux, int64 aux_ld, ",
    }
    name = "row_sum" if derivative is Derivative.NONE else f"{derivative.value}_row_sum"  # fusedbench_drelu_row_sum
    return cupy.ElementwiseKernel(
        f"{aux[derivative]}int64 m, int64 n, int64 tiles, int64 blocks_per_tile",
        "raw T x, raw float32 total, raw uint32 done, raw Y out",
        body,
        PASS_KERNEL_PREFIX + name,
        preamble=PREAMBLE,
    )


def _flat(array):
    """The flat raw view of a column-major matrix (its transpose is C-contiguous)."""
    return array.T.reshape(-1)


def _vectorizable(m: int, *arrays, rows: int = ROWS) -> bool:
    """16-byte accesses need every column to start 16-byte aligned: M % rows == 0, aligned bases."""
    return m % rows == 0 and all(a.itemsize in (2, 4) and a.data.ptr % 16 == 0 for a in arrays)


def make_relu_mask(x, packed) -> Callable[[], None]:
    """Launcher: pack (X >= 0), X column-major (M x N), into `packed` (cuBLASLt's bit-mask layout)."""
    m, n = x.shape
    rows = packed.shape[0]
    kernel, flat_x, flat_packed = _relu_mask_kernel(), _flat(x), _flat(packed)
    return lambda: kernel(flat_x, m, rows, flat_packed, size=n * rows)


def make_epilog_pass(spec: EpilogSpec, d, *, bias=None, relu_aux=None, gelu_aux=None, aux_out=None):
    """Launcher for the pointwise part of `spec` on D (M x N, column-major), all in one pass.

    relu_aux / gelu_aux are the DRELU / DGELU inputs; aux_out receives relu_aux or gelu_aux for
    the epilogs that save one. Returns None when the epilog has no pointwise work.
    """
    if not spec.has_pointwise_work:
        return None
    m, n = d.shape
    relu_aux_out = spec.saves_aux and spec.activation is Activation.RELU
    vector_arrays = [a for a in (d, bias, gelu_aux, None if relu_aux_out else aux_out) if a is not None]
    rows = FP32_ROWS if all(a.itemsize == 4 for a in vector_arrays) else ROWS
    # With a mask output, the threads cover its padding rows too (they store zero bits); split, in whole
    # tiles of 32 threads.
    groups = -(-m // rows)
    if relu_aux_out:
        groups = aux_out.shape[0] if rows == ROWS else -(-aux_out.shape[0] // 32) * 32
    inputs: list = [m, groups]
    outputs: list = [_flat(d)]
    indexed = [d]
    if spec.bias:
        inputs.append(bias)
    if spec.derivative is Derivative.DRELU:
        inputs += [_flat(relu_aux), relu_aux.shape[0]]
        indexed.append(relu_aux)
    elif spec.derivative is Derivative.DGELU:
        inputs += [_flat(gelu_aux), gelu_aux.shape[0]]
    if spec.saves_aux and (not relu_aux_out or rows == FP32_ROWS):
        inputs.append(aux_out.shape[0])  # the GELU aux's leading dimension, or a split mask's rows
    if spec.saves_aux:
        outputs.append(_flat(aux_out))
        indexed.append(aux_out)
    size = n * groups
    narrow = size < 2**32 and _fits_32_bits(*indexed, *vector_arrays)
    kernel = _epilog_kernel(spec, _vectorizable(m, *vector_arrays, rows=rows), narrow, rows)
    return lambda: kernel(*inputs, *outputs, size=size)


def make_row_sum(x, out, *, relu_aux=None, gelu_aux=None) -> Callable[[], None]:
    """Launcher: out[i] = sum_j x[i, j] for a column-major (M x N) x, coalesced, in one launch.

    Given relu_aux (cuBLASLt's bit-mask) or gelu_aux (the pre-activation), the same launch first applies
    dReLU / dGELU to x in place: DRELU_BGRAD / DGELU_BGRAD's pointwise work and bias gradient in one pass.
    """
    import cupy

    m, n = x.shape
    tiles = -(-m // TILE_ROWS)
    slices = max(1, min(-(-n // MIN_COLUMNS), -(-ROW_SUM_THREADS // (tiles * 32))))
    blocks_per_tile = -(-slices // SLICE_WARPS)
    total = cupy.zeros(m, dtype=cupy.float32)  # the last block of each tile leaves it zeroed for the next call
    done = cupy.zeros(tiles, dtype=cupy.uint32)
    threads = SLICE_WARPS * 32
    size = tiles * blocks_per_tile * threads
    derivative, aux = Derivative.NONE, []
    if relu_aux is not None:
        derivative, aux = Derivative.DRELU, [_flat(relu_aux), relu_aux.shape[0]]
    elif gelu_aux is not None:
        derivative, aux = Derivative.DGELU, [_flat(gelu_aux), gelu_aux.shape[0]]
    # dGELU's pre-activations join the vector loads: their columns must start 16-byte aligned as D's do.
    vector = _vectorizable(m, x) and (gelu_aux is None or _vectorizable(gelu_aux.shape[0], gelu_aux))
    narrow = _fits_32_bits(x, *(a for a in (relu_aux, gelu_aux) if a is not None)) and size < 2**32
    kernel = _row_sum_kernel(vector, narrow, derivative)
    flat_x = _flat(x)
    return lambda: kernel(*aux, m, n, tiles, blocks_per_tile, flat_x, total, done, out, size=size, block_size=threads)
