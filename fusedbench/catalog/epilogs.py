"""The 16 cuBLASLt epilogs: names, values, extra inputs and outputs, and FLOP / byte models.

One table (`EPILOGS`) keyed by the `Epilog` enum holds every per-epilog fact; the references,
providers and floors read it instead of branching on names. Names and values are cuBLASLt's
`cublasLtEpilogue_t` (nvmath-python's `MatmulEpilog` is the same enum; a gpu test checks that).

Orientation is cuBLASLt's: D (M x N) = epilog(A (M x K) @ B (K x N)); bias has length M and is
broadcast along N.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from fusedbench.errors import FusedbenchError


class Epilog(enum.IntEnum):
    """cublasLtEpilogue_t, by name and value."""

    DEFAULT = 1
    RELU = 2
    RELU_AUX = 130
    BIAS = 4
    RELU_BIAS = 6
    RELU_AUX_BIAS = 134
    DRELU = 136
    DRELU_BGRAD = 152
    GELU = 32
    GELU_AUX = 160
    GELU_BIAS = 36
    GELU_AUX_BIAS = 164
    DGELU = 192
    DGELU_BGRAD = 208
    BGRADA = 256
    BGRADB = 512


class Activation(enum.Enum):
    """The forward activation an epilog applies to A@B (+ bias)."""

    NONE = "none"
    RELU = "relu"
    GELU = "gelu"  # tanh approximation, as cuBLASLt computes it


class Derivative(enum.Enum):
    """The backward step an epilog applies: A@B scaled by act'(pre-activation from the aux input)."""

    NONE = "none"
    DRELU = "drelu"
    DGELU = "dgelu"


class Summed(enum.Enum):
    """Which matrix an epilog's bias gradient sums, and over which axis."""

    NONE = "none"
    RESULT = "result"  # D summed over N -> length M (DRELU_BGRAD, DGELU_BGRAD)
    A = "a"  # A summed over K -> length M (BGRADA)
    B = "b"  # B summed over K -> length N (BGRADB)


# Elementwise FLOPs per element of D, a rough count kept for the FLOP model (the GEMM's 2MNK
# dominates every realistic shape): add = 1, relu = 1, tanh-GELU ~ 8, its derivative ~ 14.
_ACTIVATION_FLOPS = {Activation.NONE: 0, Activation.RELU: 1, Activation.GELU: 8}
_DERIVATIVE_FLOPS = {Derivative.NONE: 0, Derivative.DRELU: 1, Derivative.DGELU: 14}


def round_up(value: int, multiple: int) -> int:
    """Smallest multiple of `multiple` that is >= value."""
    return -(-value // multiple) * multiple


def relu_aux_shape(m: int, n: int) -> tuple[int, int]:
    """Bytes of the cuBLASLt ReLU bit-mask: (round_up(ceil(M/8), 16), N), column-major.

    Bit i % 8 of byte [i // 8, j] is set where the pre-activation D[i, j] >= 0; the leading
    dimension is counted in bits by cuBLAS and must be a multiple of 128, hence the 16.
    """
    return round_up(math.ceil(m / 8), 16), n


def gelu_aux_shape(m: int, n: int) -> tuple[int, int]:
    """The GELU aux (pre-activation) matrix: (round_up(M, 8), N), column-major, in D's dtype."""
    return round_up(m, 8), n


@dataclass(frozen=True)
class EpilogSpec:
    """What one epilog computes, which tensors it takes and returns, and what it costs."""

    epilog: Epilog
    summary: str
    bias: bool = False
    activation: Activation = Activation.NONE
    saves_aux: bool = False  # forward epilog that also writes relu_aux / gelu_aux
    derivative: Derivative = Derivative.NONE
    summed: Summed = Summed.NONE
    # Operand layout, as cuBLAS names op(A) op(B): "TN" is A row-major and B column-major, the
    # nn.Linear forward layout (and the only one fp8 has); "NT" is A column-major and B row-major,
    # the weight-gradient layout that BGRADA and BGRADB need.
    layout: str = "TN"

    @property
    def name(self) -> str:
        return self.epilog.name

    @property
    def value(self) -> int:
        return int(self.epilog)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Extra inputs, by nvmath's epilog_inputs key."""
        names = []
        if self.bias:
            names.append("bias")
        if self.derivative is Derivative.DRELU:
            names.append("relu_aux")
        if self.derivative is Derivative.DGELU:
            names.append("gelu_aux")
        return tuple(names)

    @property
    def outputs(self) -> tuple[str, ...]:
        """Extra outputs, by nvmath's aux-output key (the main result D is always produced)."""
        names = []
        if self.saves_aux:
            names.append(f"{self.activation.value}_aux")
        if self.summed is not Summed.NONE:
            names.append(self.epilog.name.lower())
        return tuple(names)

    @property
    def textbook_layout(self) -> str:
        """The layout the seed blog's naive code multiplies in, named as `layout` is.

        The blog keeps activations and gradients as (features, batch) row-major arrays and weights
        as (out, in): its forward is `Matmul(weights, x)`, both row-major ("TT"); its backward is
        `Matmul(weights.T, grad)`, A a column-major view ("NT"). The weight gradient, which it does
        not show, is written the same way, `Matmul(grad, x.T)` ("TN"): the bias gradient is then a
        sum along A's (or, for BGRADB, B's) contiguous axis.
        """
        if self.summed in (Summed.A, Summed.B):
            return "TN"
        return "NT" if self.derivative is not Derivative.NONE else "TT"

    @property
    def has_pointwise_work(self) -> bool:
        """Whether an unfused version needs an elementwise pass over D after the GEMM."""
        return self.bias or self.activation is not Activation.NONE or self.derivative is not Derivative.NONE

    def flops(self, m: int, k: int, n: int) -> int:
        """FLOPs of the whole cell: the GEMM plus the epilog's elementwise and reduction work."""
        per_element = int(self.bias) + _ACTIVATION_FLOPS[self.activation] + _DERIVATIVE_FLOPS[self.derivative]
        reduced = {Summed.NONE: 0, Summed.RESULT: m * n, Summed.A: m * k, Summed.B: k * n}[self.summed]
        return 2 * m * n * k + per_element * m * n + reduced

    def extra_bytes(self, name: str, m: int, n: int, result_itemsize: int) -> int:
        """Bytes of one extra input or output tensor, as cuBLASLt lays it out (with padding)."""
        if name == "bias":
            return m * result_itemsize
        if name == "relu_aux":
            rows, cols = relu_aux_shape(m, n)
            return rows * cols
        if name == "gelu_aux":
            rows, cols = gelu_aux_shape(m, n)
            return rows * cols * result_itemsize
        if name == "bgradb":
            return n * result_itemsize
        if name in ("drelu_bgrad", "dgelu_bgrad", "bgrada"):
            return m * result_itemsize
        raise KeyError(f"unknown epilog tensor {name!r}")

    def fused_bytes(self, m: int, k: int, n: int, operand_itemsize: int, result_itemsize: int) -> int:
        """Fewest bytes the fused kernel moves: A, B and D once, plus every extra input and output."""
        gemm = (m * k + k * n) * operand_itemsize + m * n * result_itemsize
        extras = sum(self.extra_bytes(t, m, n, result_itemsize) for t in self.inputs + self.outputs)
        return gemm + extras

    def unfused_extra_bytes(
        self, m: int, k: int, n: int, operand_itemsize: int, result_itemsize: int, *, one_pass: bool = True
    ) -> int:
        """Bytes the unfused passes move beyond the plain GEMM's own A, B and D traffic.

        The elementwise pass reads and writes D and touches each extra input and pointwise
        output once; a bias-gradient pass reads the matrix it sums and writes the vector. D's own
        bias gradient (DRELU_BGRAD, DGELU_BGRAD) is summed inside the derivative's pass where the
        backward runs `one_pass` (cells revision 4 on), so D is not read again.
        """
        total = 0
        if self.has_pointwise_work:
            total += 2 * m * n * result_itemsize
            pointwise_tensors = self.inputs + tuple(t for t in self.outputs if t.endswith("_aux"))
            total += sum(self.extra_bytes(t, m, n, result_itemsize) for t in pointwise_tensors)
        if self.summed is Summed.RESULT:
            total += (0 if one_pass else m * n * result_itemsize) + m * result_itemsize
        elif self.summed is Summed.A:
            total += m * k * operand_itemsize + m * result_itemsize
        elif self.summed is Summed.B:
            total += k * n * operand_itemsize + n * result_itemsize
        return total


_SPECS = (
    EpilogSpec(Epilog.DEFAULT, "plain GEMM"),
    EpilogSpec(Epilog.RELU, "relu(A@B)", activation=Activation.RELU),
    EpilogSpec(Epilog.RELU_AUX, "relu(A@B), and its bit-mask", activation=Activation.RELU, saves_aux=True),
    EpilogSpec(Epilog.BIAS, "A@B + bias", bias=True),
    EpilogSpec(Epilog.RELU_BIAS, "relu(A@B + bias)", bias=True, activation=Activation.RELU),
    EpilogSpec(
        Epilog.RELU_AUX_BIAS,
        "relu(A@B + bias), and its bit-mask",
        bias=True,
        activation=Activation.RELU,
        saves_aux=True,
    ),
    EpilogSpec(Epilog.DRELU, "A@B masked by relu'(pre-activation)", derivative=Derivative.DRELU),
    EpilogSpec(
        Epilog.DRELU_BGRAD,
        "A@B masked by relu'(pre), and its sum over N",
        derivative=Derivative.DRELU,
        summed=Summed.RESULT,
    ),
    EpilogSpec(Epilog.GELU, "gelu(A@B)", activation=Activation.GELU),
    EpilogSpec(Epilog.GELU_AUX, "gelu(A@B), and the pre-activation", activation=Activation.GELU, saves_aux=True),
    EpilogSpec(Epilog.GELU_BIAS, "gelu(A@B + bias)", bias=True, activation=Activation.GELU),
    EpilogSpec(
        Epilog.GELU_AUX_BIAS,
        "gelu(A@B + bias), and the pre-activation",
        bias=True,
        activation=Activation.GELU,
        saves_aux=True,
    ),
    EpilogSpec(Epilog.DGELU, "A@B * gelu'(pre-activation)", derivative=Derivative.DGELU),
    EpilogSpec(
        Epilog.DGELU_BGRAD,
        "A@B * gelu'(pre), and its sum over N",
        derivative=Derivative.DGELU,
        summed=Summed.RESULT,
    ),
    EpilogSpec(Epilog.BGRADA, "A@B, and A summed over K", summed=Summed.A, layout="NT"),
    EpilogSpec(Epilog.BGRADB, "A@B, and B summed over K", summed=Summed.B, layout="NT"),
)

EPILOGS: dict[Epilog, EpilogSpec] = {spec.epilog: spec for spec in _SPECS}


def epilog_spec(name: str | Epilog) -> EpilogSpec:
    """Look an epilog up by enum or name (case-insensitive), with an error that lists the valid ones."""
    if isinstance(name, Epilog):
        return EPILOGS[name]
    try:
        return EPILOGS[Epilog[name.upper()]]
    except KeyError:
        valid = ", ".join(e.name for e in Epilog)
        raise FusedbenchError(f"unknown epilog {name!r}; choose from {valid}") from None
