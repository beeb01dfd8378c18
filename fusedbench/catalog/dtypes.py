"""The five precisions fusedbench measures, and what each means to cuBLASLt, cupy and torch.

A dtype here is a benchmark precision, not a numpy dtype: `tf32` is fp32 operands with the
COMPUTE_32F_FAST_TF32 compute type, and `fp8` is e4m3 operands with a bf16 result (cuBLASLt
needs a wider D for most fp8 epilogs, and a bf16 D is what fp8 training and inference keep).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusedbench.errors import FusedbenchError


@dataclass(frozen=True)
class DTypeSpec:
    """One benchmark precision."""

    name: str
    operand: str  # storage dtype of A and B, by numpy / torch name
    result: str  # storage dtype of D, bias and the aux outputs
    operand_itemsize: int
    result_itemsize: int
    framework: str  # "cupy" or "torch": which array library holds the operands (cupy has no bf16/fp8)
    compute_type: str | None  # nvmath.linalg.ComputeType member name; None = nvmath's default
    tolerance: float  # max |out - ref| / max |ref| allowed against the float64 reference
    shape_multiple: int = 1  # cuBLASLt needs M, N and K to be multiples of this
    min_compute_capability: tuple[int, int] = (7, 0)

    def fits(self, m: int, k: int, n: int) -> bool:
        return all(extent % self.shape_multiple == 0 for extent in (m, k, n))


# Tolerances, as max |out - ref| / max |ref|: one rounding of the result costs up to half an ulp
# of the largest element (fp16 2^-11 = 4.9e-4, bf16 2^-8 = 3.9e-3). The textbook provider
# evaluates every step in the storage precision, one rounding per array op (GELU takes about
# eight), so each 16-bit bound allows eight roundings; a wrong kernel is off by O(1). fp32
# accumulation over the check shapes stays near 4e-7, but cuBLASLt's fp32 GELU derivative was
# seen 1.2e-5 off (H200, cuBLASLt 13.1: a fast tanh); tf32 rounds the operands to 10 mantissa
# bits (5.2e-4 seen). Largest errors seen in two full checks on an H200: fp16 2.0e-3, bf16
# 1.3e-2, fp32 1.2e-5, tf32 5.2e-4, fp8 9.4e-3 (all from the textbook provider but fp32's).
DTYPES: dict[str, DTypeSpec] = {
    spec.name: spec
    for spec in (
        DTypeSpec("fp16", "float16", "float16", 2, 2, "cupy", None, 4e-3),
        DTypeSpec("bf16", "bfloat16", "bfloat16", 2, 2, "torch", None, 3e-2),
        DTypeSpec("fp32", "float32", "float32", 4, 4, "cupy", None, 5e-5),
        DTypeSpec("tf32", "float32", "float32", 4, 4, "cupy", "COMPUTE_32F_FAST_TF32", 5e-3),
        DTypeSpec(
            "fp8",
            "float8_e4m3fn",
            "bfloat16",
            1,
            2,
            "torch",
            None,
            3e-2,
            shape_multiple=16,
            min_compute_capability=(8, 9),
        ),
    )
}


def dtype_spec(name: str) -> DTypeSpec:
    """Look a precision up by name, with an error that lists the valid ones."""
    try:
        return DTYPES[name.lower()]
    except KeyError:
        raise FusedbenchError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}") from None
