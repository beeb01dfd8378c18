"""The provider ladder as one registry: each provider's name, description, colour, libraries and builder.

Pure: the builder is named by its import path and resolved on the GPU side
(`fusedbench.measure.gpu.providers.prepare_provider`), so the catalog, the report and the results
loader read this table without importing any GPU library.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fusedbench.catalog.epilogs import Epilog
from fusedbench.errors import FusedbenchError

# The epilogs the cutlass-evt peer's visitor trees compute: not cuBLASLt's ReLU bit-mask (EVT nodes load and store
# whole elements), nor the operand sums (made in the main loop).
_CUTLASS_EVT_EPILOGS = tuple(
    Epilog[name]
    for name in (
        "DEFAULT",
        "RELU",
        "BIAS",
        "RELU_BIAS",
        "GELU",
        "GELU_AUX",
        "GELU_BIAS",
        "GELU_AUX_BIAS",
        "DGELU",
        "DGELU_BGRAD",
    )
)
# The forward epilogs the seed walkthrough's numba kernels fuse, fp16 with fp32 accumulation.
_WALKTHROUGH_EPILOGS = tuple(
    Epilog[name] for name in ("DEFAULT", "BIAS", "RELU", "RELU_BIAS", "GELU_BIAS", "RELU_AUX_BIAS")
)


@dataclass(frozen=True)
class Provider:
    """One rung of the ladder: a way to compute a workload's outputs."""

    name: str
    description: str
    color: str  # the report's colour for it, a CSS hex colour (Okabe and Ito's on the ladder, Tol's for the peers)
    libraries: tuple[
        str, ...
    ]  # the Python packages whose versions its timings depend on (imported as the name's first word)
    builder: str  # "module:function" that prepares it on the GPU (fusedbench.measure.gpu.providers)
    control: bool = False  # a control for another provider, timed in its own group only, never on the ladder
    peer: bool = False  # an alternative to cuBLASLt's epilogs, timed beside the ladder in the peers suite's groups
    # "module:function" that compiles, at once and in parallel, every kernel a list of workloads will need
    # (a compiler's peer), so that no builder waits on a compiler one kernel at a time; "" for none
    precompile: str = ""
    # what it computes, in the order its groups list them (asv's parameters): every epilog and dtype unless named
    epilogs: tuple[Epilog, ...] = tuple(Epilog)
    dtypes: tuple[str, ...] = ("fp16", "bf16", "fp32", "tf32", "fp8")
    # the report's marker shape for it (plotly's names): a reader who cannot tell its colour tells its shape;
    # "triangle-up" is the ladder's mark for a value above the axis, no provider's
    symbol: str = "circle"

    @property
    def epilog_names(self) -> tuple[str, ...]:
        return tuple(epilog.name for epilog in self.epilogs)


# Cheapest to write first. Each is prepared once (allocation, planning) and then run many times
# with nothing but the work in the hot call.
PROVIDERS: dict[str, Provider] = {
    provider.name: provider
    for provider in (
        Provider(
            "textbook",
            "the seed blog's naive code in its layout: y = mm.execute(), then y += bias[:, None], y[y < 0] = 0, "
            "y[mask] = 0, sum(y, axis=1)",
            "#999999",
            ("nvmath-python", "cupy", "torch"),
            "fusedbench.measure.gpu.providers:build_textbook",
            symbol="square",
        ),
        Provider(
            "unfused",
            "the same cuBLASLt GEMM, then one single-pass cupy kernel for the pointwise work and one "
            "reduction for bias gradients; for DRELU_BGRAD / DGELU_BGRAD one pass does both (the derivative, then "
            "the row sum of what it stores), as the training stacks run the backward",
            "#E69F00",
            ("nvmath-python", "cupy"),
            "fusedbench.measure.gpu.providers:build_unfused",
            symbol="diamond",
        ),
        Provider(
            "fused",
            "cuBLASLt epilog through nvmath-python Matmul, planned once",
            "#0072B2",
            ("nvmath-python",),
            "fusedbench.measure.gpu.providers:build_fused",
            symbol="circle",
        ),
        Provider(
            "fused-autotuned",
            "as fused, with the plan's fastest algorithm, each timed as the cells are",
            "#56B4E9",
            ("nvmath-python",),
            "fusedbench.measure.gpu.providers:build_fused_autotuned",
            symbol="hexagon",
        ),
        Provider(
            "torch",
            "the torch peer: addmm / _addmm_activation / _scaled_mm where torch has the operation",
            "#D55E00",
            ("torch",),
            "fusedbench.measure.gpu.providers:build_torch_peer",
            symbol="x",
        ),
        Provider(
            "gemm",
            "the same GEMM with no epilog work at all: the floor",
            "#000000",
            ("nvmath-python",),
            "fusedbench.measure.gpu.providers:build_gemm",
            symbol="cross",
        ),
        Provider(
            "einsum",
            "peer, the seed walkthrough's second rung: the product as einsum('ik,kj->ij') on the operands as they "
            "lie (cupy's, or torch's), then the textbook's epilog statements",
            "#CC79A7",
            ("cupy", "torch"),
            "fusedbench.measure.gpu.walkthrough:build_einsum",
            peer=True,
            symbol="star",
        ),
        Provider(
            "numba-naive",
            "peer, the seed walkthrough's numba CUDA kernel: one thread an output looping over K into an fp32 "
            "accumulator, the forward epilog applied before its one store (fp32 and fp16; skipped where a call "
            "would take seconds)",
            "#882255",
            ("numba", "numba_cuda"),
            "fusedbench.measure.gpu.walkthrough:build_numba_naive",
            peer=True,
            epilogs=_WALKTHROUGH_EPILOGS,
            dtypes=("fp16", "fp32"),
            symbol="pentagon",
        ),
        Provider(
            "numba-tiled",
            "peer: numba-naive with 32x32 tiles of A and B staged through shared memory, the next rung a numba user "
            "climbs",
            "#117733",
            ("numba", "numba_cuda"),
            "fusedbench.measure.gpu.walkthrough:build_numba_tiled",
            peer=True,
            epilogs=_WALKTHROUGH_EPILOGS,
            dtypes=("fp16", "fp32"),
            symbol="hourglass",
        ),
        Provider(
            "triton",
            "peer: a Triton matmul applying the epilog to its fp32 accumulator (bias gradients of D as per-tile "
            "partial sums plus one small kernel, of A or B inside the K loop), autotuned per workload",
            "#332288",
            ("triton", "torch"),
            "fusedbench.measure.gpu.triton_epilog:build_triton",
            peer=True,
            precompile="fusedbench.measure.gpu.triton_epilog:precompile",
            symbol="bowtie",
        ),
        Provider(
            "torch-compile",
            "peer: the epilog written as torch code (x @ w.T, then bias, activation, cuBLASLt's aux layouts, "
            "derivative, fp32 sums) and compiled by torch.compile, max-autotune without CUDA graphs, so Inductor "
            "picks its Triton GEMM templates or cuBLAS and fuses the pointwise tail into a template where it can",
            "#AA4499",
            ("torch", "triton"),
            "fusedbench.measure.gpu.torch_compile:build_torch_compile",
            peer=True,
            symbol="star-diamond",
        ),
        Provider(
            "cutlass-evt",
            "peer: a CUTLASS 3 Hopper GEMM (TMA, warp-specialized) whose epilogue is an epilogue visitor tree "
            "traced from the epilog written in Python (nvidia-cutlass's interface) and compiled by nvcc; the bias "
            "gradient a reduction finished in the kernel; no ReLU bit-mask, no operand sums",
            "#44AA99",
            ("cutlass_cppgen",),
            "fusedbench.measure.gpu.cutlass_evt:build_cutlass_evt",
            peer=True,
            precompile="fusedbench.measure.gpu.cutlass_evt:precompile",
            epilogs=_CUTLASS_EVT_EPILOGS,
            dtypes=("fp16", "bf16"),  # fp32 accumulation
            symbol="hexagram",
        ),
        Provider(
            "two-pass",
            "control: unfused's DRELU_BGRAD / DGELU_BGRAD as before the one-pass backward (cells revision 3): the "
            "derivative pass, then a row sum that reads D again",
            "#DDCC77",
            ("nvmath-python", "cupy"),
            "fusedbench.measure.gpu.providers:build_two_pass",
            control=True,
            symbol="square-x",
        ),
        Provider(
            "blog",
            "control: the seed blog's two naive snippets transcribed as printed (RELU_BIAS, DRELU_BGRAD at fp16), "
            "which the textbook must match",
            "#661100",
            ("nvmath-python", "cupy"),
            "fusedbench.measure.gpu.blog:build_blog",
            control=True,
            symbol="circle-x",
        ),
    )
}
# The ladder every group measures (the controls run in groups of their own), and the peers the peers suite
# times beside it.
LADDER = tuple(name for name, provider in PROVIDERS.items() if not provider.control and not provider.peer)
PEERS = tuple(name for name, provider in PROVIDERS.items() if provider.peer)

# The providers fused is compared against (docs/providers.md, 'The ladder'), and the plain GEMM every
# cell's epilog cost is measured over.
BASELINES = ("textbook", "unfused")
FUSED = "fused"
AUTOTUNED = "fused-autotuned"
UNFUSED = "unfused"
TRITON = "triton"
TORCH_COMPILE = "torch-compile"
CUTLASS_EVT = "cutlass-evt"
NUMBA_NAIVE = "numba-naive"
# The seed walkthrough's rungs: the matmul tutorial that climbs from loops to einsum, a numba kernel, the library.
WALKTHROUGH = ("einsum", NUMBA_NAIVE, "numba-tiled")
GEMM = "gemm"
CONTROL_OF_TEXTBOOK = "blog"
CONTROL_OF_UNFUSED = "two-pass"
# The unfused provider's own kernels (its passes after the GEMM) are named with this prefix.
PASS_KERNEL_PREFIX = "fusedbench_"


def select_providers(names: Iterable[str] | None) -> list[str]:
    """Validate provider names (the ladder when `names` is empty)."""
    chosen = list(names) if names else list(LADDER)
    unknown = [p for p in chosen if p not in PROVIDERS]
    if unknown:
        raise FusedbenchError(f"unknown provider {unknown[0]!r}; choose from {', '.join(PROVIDERS)}")
    return chosen


def provider_libraries(names: Iterable[str]) -> list[str]:
    """Every library the named providers need, once, in ladder order."""
    return list(dict.fromkeys(library for name in names for library in PROVIDERS[name].libraries))
