"""Float64 references for all 16 epilogs: the truth every provider is held to.

Pure numpy, driven by the epilog table (no per-epilog branches). Semantics follow cuBLASLt,
confirmed on an H200 with cuBLASLt 13.1 (see tests/test_gpu_check.py):
- ReLU keeps NaN (as torch.relu does): relu(x) = 0 where x < 0, else x.
- relu_aux bit i % 8 of byte [i // 8, j] is set where the pre-activation D[i, j] >= 0.
- GELU is the tanh approximation; gelu_aux holds the pre-activation (A@B + bias).
- bias is added before the activation and broadcast along N (one value per row of D).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fusedbench.catalog.epilogs import Activation, Derivative, EpilogSpec, Summed, relu_aux_shape

SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
GELU_CUBIC = 0.044715


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0), NaN kept as cuBLASLt keeps it."""
    return np.where(x < 0, 0.0, x)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC * x**3)))


def gelu_tanh_grad(x: np.ndarray) -> np.ndarray:
    """d/dx of gelu_tanh."""
    inner = SQRT_2_OVER_PI * (x + GELU_CUBIC * x**3)
    t = np.tanh(inner)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_CUBIC * x * x)


def pack_relu_aux(mask: np.ndarray) -> np.ndarray:
    """Pack a boolean (M, N) mask into cuBLASLt's relu_aux bytes, padded rows zero."""
    m, n = mask.shape
    rows, _ = relu_aux_shape(m, n)
    padded = np.zeros((rows * 8, n), dtype=bool)
    padded[:m] = mask
    return np.packbits(padded, axis=0, bitorder="little")


def unpack_relu_aux(packed, m: int, xp=np):
    """The boolean (M, N) mask held in cuBLASLt's relu_aux bytes (uint8 or nvmath's int8; padding dropped): bit i
    of byte (r, n) is row 8r + i of column n. `xp` is numpy, or cupy for a mask left on the GPU (cupy unpacks only
    flat arrays, so each column's bytes are laid in a row first)."""
    columns = xp.ascontiguousarray(packed.view(xp.uint8).T)
    return xp.unpackbits(columns, bitorder="little").reshape(columns.shape[0], -1).T[:m].astype(bool)


@dataclass(frozen=True)
class ReferenceInputs:
    """An epilog's inputs in float64 (relu_mask: True where the forward pre-activation was >= 0)."""

    a: np.ndarray
    b: np.ndarray
    bias: np.ndarray | None = None
    relu_mask: np.ndarray | None = None
    gelu_pre: np.ndarray | None = None


@dataclass(frozen=True)
class Reference:
    """Expected outputs by name ('result' plus the epilog's aux outputs, relu_aux as a bool mask).

    `pre_activation` is kept for epilogs that save a ReLU mask, so a comparison can forgive bits
    whose pre-activation lies within rounding of zero.
    """

    outputs: dict[str, np.ndarray]
    pre_activation: np.ndarray | None = field(default=None)


def reference_outputs(spec: EpilogSpec, inputs: ReferenceInputs) -> Reference:
    """Compute every output of `spec` in float64."""
    a, b = inputs.a, inputs.b
    x = a @ b
    if spec.bias:
        x = x + inputs.bias[:, None]
    outputs: dict[str, np.ndarray] = {}
    pre_activation = None
    if spec.saves_aux:
        pre_activation = x
        outputs[f"{spec.activation.value}_aux"] = x >= 0 if spec.activation is Activation.RELU else x.copy()
    if spec.activation is Activation.RELU:
        x = relu(x)
    elif spec.activation is Activation.GELU:
        x = gelu_tanh(x)
    if spec.derivative is Derivative.DRELU:
        x = np.where(inputs.relu_mask, x, 0.0)
    elif spec.derivative is Derivative.DGELU:
        x = x * gelu_tanh_grad(inputs.gelu_pre)
    summed = {Summed.RESULT: lambda: x.sum(axis=1), Summed.A: lambda: a.sum(axis=1), Summed.B: lambda: b.sum(axis=0)}
    if spec.summed is not Summed.NONE:
        outputs[spec.epilog.name.lower()] = summed[spec.summed]()
    outputs["result"] = x
    return Reference(outputs=outputs, pre_activation=pre_activation)
