"""Compare a provider's outputs with the float64 reference.

Pure numpy: outputs arrive on the host in their stored dtype. The error of a value output is
max |out - ref| / max |ref| (one wrong element anywhere shows, unlike a norm-wise error); NaN or
inf where the reference is finite never passes, which is how poisoned, unwritten elements are
caught. A ReLU mask is compared bit by bit, forgiving only bits whose reference pre-activation
lies within rounding of zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fusedbench.measure.reference import Reference, unpack_relu_aux


@dataclass(frozen=True)
class OutputCheck:
    """One output against its reference."""

    name: str
    error: float
    ok: bool
    detail: str = ""


def compare_values(name: str, out: np.ndarray, ref: np.ndarray, tolerance: float) -> OutputCheck:
    """max |out - ref| / max |ref| against `tolerance`; non-finite where ref is finite fails."""
    out = np.asarray(out, dtype=np.float64)
    if ref.ndim == 1 and out.size == ref.size:  # a bias gradient may come back as (M, 1)
        out = out.reshape(ref.shape)
    if out.shape != ref.shape:
        return OutputCheck(name, math.inf, False, f"shape {out.shape}, expected {ref.shape}")
    finite_ref = np.isfinite(ref)
    broken = finite_ref & ~np.isfinite(out)
    if broken.any():
        return OutputCheck(
            name, math.inf, False, f"{int(broken.sum())} non-finite values where the reference is finite"
        )
    scale = float(np.max(np.abs(ref[finite_ref]), initial=0.0)) or 1.0
    error = float(np.max(np.abs(out[finite_ref] - ref[finite_ref]), initial=0.0)) / scale
    ok = error <= tolerance
    return OutputCheck(name, error, ok, "" if ok else f"error {error:.3g} > tolerance {tolerance:.3g}")


def decode_mask(out: np.ndarray, m: int) -> np.ndarray | str:
    """A provider's ReLU mask as bool (M, N): a bool array as is, cuBLASLt's uint8 bit-mask unpacked.

    Returns a message instead when a bool mask holds bytes other than 0 and 1 (poison left
    unwritten).
    """
    if out.dtype == np.bool_:
        raw = out.view(np.uint8)
        if np.any(raw > 1):
            return f"{int(np.sum(raw > 1))} mask bytes are neither 0 nor 1 (unwritten)"
        return raw.astype(bool)
    return unpack_relu_aux(out, m)


def compare_mask(
    name: str, out: np.ndarray, ref_mask: np.ndarray, pre_activation: np.ndarray, tolerance: float
) -> OutputCheck:
    """Bits that differ from the reference where |pre-activation| > tolerance * max |pre| fail."""
    mask = decode_mask(out, ref_mask.shape[0])
    if isinstance(mask, str):
        return OutputCheck(name, math.inf, False, mask)
    if mask.shape != ref_mask.shape:
        return OutputCheck(name, math.inf, False, f"mask shape {mask.shape}, expected {ref_mask.shape}")
    near_zero = np.abs(pre_activation) <= tolerance * float(np.max(np.abs(pre_activation), initial=0.0))
    wrong = int(np.sum((mask != ref_mask) & ~near_zero))
    error = wrong / ref_mask.size
    return OutputCheck(name, error, wrong == 0, "" if wrong == 0 else f"{wrong} of {ref_mask.size} mask bits wrong")


def verify_outputs(outputs: dict[str, np.ndarray], reference: Reference, tolerance: float) -> list[OutputCheck]:
    """Check every reference output (main result and aux) against what the provider returned."""
    checks = []
    for name, ref in reference.outputs.items():
        if name not in outputs:
            checks.append(OutputCheck(name, math.inf, False, "output missing"))
        elif name == "relu_aux":
            checks.append(compare_mask(name, outputs[name], ref, reference.pre_activation, tolerance))
        elif name == "gelu_aux":  # cuBLASLt pads M to a multiple of 8; padding rows are undefined
            checks.append(compare_values(name, outputs[name][: ref.shape[0]], ref, tolerance))
        else:
            checks.append(compare_values(name, outputs[name], ref, tolerance))
    return checks
