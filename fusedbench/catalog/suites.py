"""Benchmark groups, the named suites (quick, default, full, peers, mlp) that select them, and the ceilings.

A group is one asv benchmark class: one dtype, one shape set, a list of epilogs and providers.
asv starts a process for every parameter combination, and a CUDA context plus the GPU
libraries cost seconds to start, so each group is measured in one process (asv's
`setup_cache`) and each cell's process only hands its recorded samples to asv. A suite is a
list of groups; `fusedbench run` hands asv one group at a time.

The mlp suite's groups (`MlpGroup`, benchmarks/mlp.py) time the seed notebook's whole training step
(fusedbench.measure.mlp) instead of one GEMM: they are not epilog cells, and nothing that reads cells reads them.
"""

from __future__ import annotations

import enum
import itertools
import re
from dataclasses import dataclass
from typing import ClassVar

from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.epilogs import EPILOGS
from fusedbench.catalog.mlp_settings import DEFAULT_EPOCHS
from fusedbench.catalog.model import CellKey
from fusedbench.catalog.providers import (
    CONTROL_OF_UNFUSED,
    CUTLASS_EVT,
    FUSED,
    LADDER,
    NUMBA_NAIVE,
    PROVIDERS,
    TORCH_COMPILE,
    TRITON,
    UNFUSED,
    WALKTHROUGH,
)
from fusedbench.catalog.shapes import SHAPE_SETS, shape_set
from fusedbench.catalog.workloads import Workload, build_workloads
from fusedbench.errors import FusedbenchError

BENCHMARK_MODULE = "cells"  # benchmarks/cells.py
MLP_MODULE = "mlp"  # benchmarks/mlp.py

# The ceilings every run measures beside its cells (benchmarks/ceilings.py): a dense GEMM large
# enough to reach the machine's rate, and a device-to-device copy large enough for HBM bandwidth.
CEILING_GEMM_SHAPE = (8192, 8192, 8192)
CEILING_COPY_BYTES = 2 << 30
CEILINGS_MODULE = "ceilings"  # benchmarks/ceilings.py
CEILING_CLASSES = ("GemmCeiling", "CopyCeiling")
CEILINGS_REGEX = rf"^{CEILINGS_MODULE}\."

# asv's `version` of every benchmark, explicit so that a refactor that measures the same thing
# keeps asv's history comparable. Change a group's version only when what it measures changes;
# asv then starts a new history. The d1e4d02 hashes were revision 1 of the cell groups; revision 2 has the
# textbook in the blog's layout and statements and the unfused passes rewritten for copy bandwidth; revision 3
# the unfused bias-gradient row sums in one launch with a block-level reduction, fp32 passes at 4 rows a thread
# and kernel times the median of three calls; revision 4 unfused DRELU_BGRAD / DGELU_BGRAD in one pass (the
# derivative inside the row sum). Every group's next revision, the ceilings' included, times each call after the
# burst lead-in (measure.sampling.BURST: idle as long as the call, then woken by the call itself, its launches
# queued behind): the GPU in one power state, at boost, where runs before it timed calls back to back. The groups
# with fused-autotuned have one more: its algorithm is the plan's fastest timed that way (nvmath's Matmul.autotune
# timed them back to back, and picked differently from run to run).
BURST_REVISION = "the burst lead-in before every call"
AUTOTUNE_REVISION = "fused-autotuned's algorithm timed under it"
BLOG_REVISION = f"3: {BURST_REVISION}; textbook in the blog's layout and statements"
CELLS_REVISION = f"6: {BURST_REVISION}; {AUTOTUNE_REVISION}; unfused DRELU_BGRAD / DGELU_BGRAD in one pass"
PEERS_REVISION = (
    f"3: {BURST_REVISION}; {AUTOTUNE_REVISION}; the ladder and the triton peer, compile and autotune before timing"
)
COMPILED_REVISION = (
    f"2: {BURST_REVISION}; torch.compile max-autotune without CUDA graphs beside fused and unfused, compiled before "
    "timing"
)
CUTLASS_REVISION = (
    f"2: {BURST_REVISION}; CUTLASS sm90 GEMMs with the epilog as an epilogue visitor tree beside fused and unfused, "
    "compiled before timing"
)
WALKTHROUGH_REVISION = (
    f"2: {BURST_REVISION}; einsum and the numba kernels beside fused and unfused, skipped past half a second a call"
)
TWO_PASS_REVISION = f"2: {BURST_REVISION}; unfused's one-pass backward against the two passes it replaced"
MLP_STEP_REVISION = (
    "1: wall clock and kernel time of one verified training step, fp32 masters, loss summed over the batch"
)
MLP_EPOCH_REVISION = "1: wall clock of each epoch on digits after the first, at the notebook's sizes"
CEILING_VERSIONS = {
    "GemmCeiling": f"2: {BURST_REVISION}; the densest GEMM per dtype at 8192^3",
    "CopyCeiling": f"2: {BURST_REVISION}; a 2 GiB device-to-device copy",
}


class GroupKind(enum.Enum):
    """What a group times, which decides where its cells are read: a workload's ladder, a control beside the
    provider it checks, the peers suite's peers beside the whole ladder, or peers beside fused and unfused alone."""

    LADDER = "ladder"
    CONTROL = "control"
    PEERS = "peers"  # a peer beside the whole ladder: the workload's ladder may be read from it
    PEER_ONLY = "peer-only"  # peers beside fused and unfused alone: each peer's ratios paired within its group


@dataclass(frozen=True)
class BenchmarkGroup:
    """The cells of one asv benchmark class."""

    name: str  # the asv class name, e.g. "Fp16Seed"
    dtype: str
    shape_set: str
    epilogs: tuple[str, ...]
    providers: tuple[str, ...]
    kind: GroupKind = GroupKind.LADDER
    version: str = CELLS_REVISION  # asv's version of its benchmark: bump it only when what it measures changes
    module: ClassVar[str] = BENCHMARK_MODULE

    def workloads(self) -> list[Workload]:
        return build_workloads(epilogs=self.epilogs, dtypes=[self.dtype], shapes=shape_set(self.shape_set))

    @property
    def shape_labels(self) -> list[str]:
        """The shapes as asv parameters, written (M,K)x(K,N)."""
        return [str(shape) for shape in shape_set(self.shape_set)]

    @property
    def cell_count(self) -> int:
        return len(self.epilogs) * len(SHAPE_SETS[self.shape_set]) * len(self.providers)

    @property
    def asv_version(self) -> str:
        return self.version


def _group(
    dtype: str,
    shapes: str,
    epilogs=None,
    providers=None,
    *,
    name: str | None = None,
    suffix: str = "",
    kind: GroupKind = GroupKind.LADDER,
    version: str = CELLS_REVISION,
) -> BenchmarkGroup:
    """A group named after its dtype and shapes (and `suffix`, a peers group's: Fp16SeedPeers), unless `name`d."""
    return BenchmarkGroup(
        name=name or f"{dtype.capitalize()}{shapes.capitalize()}{suffix}",
        dtype=dtype,
        shape_set=shapes,
        epilogs=tuple(epilogs or (spec.name for spec in EPILOGS.values())),
        providers=tuple(providers or LADDER),
        kind=kind,
        version=version,
    )


_TIMED_SETS = ("seed", "llm", "membound")  # "small" is for correctness only
_PEER_DTYPES, _PEER_SHAPES = ("fp16", "bf16"), ("seed", "membound")

# Every group any suite runs. "Quick" repeats five fp16 seed cells under their own class name,
# so a quick run never mixes with a default run's samples of the same cell.
GROUPS: dict[str, BenchmarkGroup] = {
    group.name: group
    for group in (
        _group("fp16", "seed", ("DEFAULT", "BIAS", "RELU_BIAS", "GELU_AUX_BIAS", "DRELU_BGRAD"), name="Quick"),
        # The textbook against the blog's own snippets, in rounds of their own (fusedbench.measure.gpu.blog).
        _group(
            "fp16",
            "seed",
            ("RELU_BIAS", "DRELU_BGRAD"),
            ("textbook", "blog"),
            name="Blog",
            kind=GroupKind.CONTROL,
            version=BLOG_REVISION,
        ),
        *(_group(dtype, shapes) for dtype in DTYPES for shapes in _TIMED_SETS),
        # The triton peer beside the whole ladder, on the shapes where fusion matters most and the blog's: as large
        # a group as the ladder's own, so that the report reads a workload's ladder from one group.
        *(
            _group(
                dtype, shapes, providers=(*LADDER, TRITON), suffix="Peers", kind=GroupKind.PEERS, version=PEERS_REVISION
            )
            for dtype in _PEER_DTYPES
            for shapes in _PEER_SHAPES
        ),
        # torch.compile beside fused and unfused only, on the same cells: max-autotune costs seconds of compiling
        # a cell (a median of 3-4 on an H100 at cad4196, up to 18 for a group's first), so its groups run on their own.
        *(
            _group(
                dtype,
                shapes,
                providers=(UNFUSED, FUSED, TORCH_COMPILE),
                suffix="Compiled",
                kind=GroupKind.PEER_ONLY,
                version=COMPILED_REVISION,
            )
            for dtype in _PEER_DTYPES
            for shapes in _PEER_SHAPES
        ),
        # CUTLASS's epilogue visitor trees beside fused and unfused, on the epilogs a tree computes: a kernel takes nvcc
        # a minute, compiled ahead in parallel (fusedbench.measure.gpu.cutlass_evt.precompile).
        *(
            _group(
                dtype,
                shapes,
                PROVIDERS[CUTLASS_EVT].epilog_names,
                (UNFUSED, FUSED, CUTLASS_EVT),
                suffix="Cutlass",
                kind=GroupKind.PEER_ONLY,
                version=CUTLASS_REVISION,
            )
            for dtype in PROVIDERS[CUTLASS_EVT].dtypes
            for shapes in _PEER_SHAPES
        ),
        # The seed walkthrough's einsum and numba kernels beside fused and unfused, on its forward epilogs; the
        # kernels skip the cells where a call would take seconds (the seed shape), naming the time they measured.
        *(
            _group(
                dtype,
                shapes,
                PROVIDERS[NUMBA_NAIVE].epilog_names,
                (UNFUSED, FUSED, *WALKTHROUGH),
                suffix="Walkthrough",
                kind=GroupKind.PEER_ONLY,
                version=WALKTHROUGH_REVISION,
            )
            for dtype in PROVIDERS[NUMBA_NAIVE].dtypes
            for shapes in _PEER_SHAPES
        ),
        # unfused's one-pass backward against the two passes it replaced, where the passes are most of the time.
        _group(
            "fp16",
            "membound",
            ("DRELU_BGRAD", "DGELU_BGRAD"),
            (UNFUSED, CONTROL_OF_UNFUSED),
            name="TwoPass",
            kind=GroupKind.CONTROL,
            version=TWO_PASS_REVISION,
        ),
    )
}
PEER_GROUPS = tuple(name for name, g in GROUPS.items() if g.kind in (GroupKind.PEERS, GroupKind.PEER_ONLY))
# Groups that time peers beside fused and unfused alone: not a workload's ladder (analysis.ladder_cells), each
# peer's ratios paired within its group (report.peers).
PEER_ONLY_GROUPS = frozenset(name for name, g in GROUPS.items() if g.kind is GroupKind.PEER_ONLY)
# Groups that time a control beside the provider it checks, apart from the ladder's speedups.
CONTROL_GROUPS = frozenset(name for name, g in GROUPS.items() if g.kind is GroupKind.CONTROL)
# The benchmark versions whose unfused runs DRELU_BGRAD / DGELU_BGRAD in one pass (cells revisions 1-3 ran two):
# what its passes move depends on it (EpilogSpec.unfused_extra_bytes). The Blog group times no unfused. The first
# strings are those versions as they were before the burst lead-in, timed back to back; the next two, under burst
# with nvmath's autotune.
ONE_PASS_BACKWARD_VERSIONS = frozenset(
    {
        "4: unfused DRELU_BGRAD / DGELU_BGRAD in one pass",
        f"5: {BURST_REVISION}; unfused DRELU_BGRAD / DGELU_BGRAD in one pass",
        f"2: {BURST_REVISION}; the ladder and the triton peer, compile and autotune before timing",
        "1: the ladder and the triton peer, compile and autotune before timing",
        "1: torch.compile max-autotune without CUDA graphs beside fused and unfused, compiled before timing",
        "1: CUTLASS sm90 GEMMs with the epilog as an epilogue visitor tree beside fused and unfused, compiled before "
        "timing",
        "1: einsum and the numba kernels beside fused and unfused, skipped past half a second a call",
        "1: unfused's one-pass backward against the two passes it replaced",
    }
) | frozenset(g.version for name, g in GROUPS.items() if name != "Blog")

# The mlp suite: the notebook's network (inputs-hidden-outputs) from its own size to LLM-sized layers, at
# batches from the notebook's 256 to 65,536. A step costs about 4 x batch x inputs x hidden FLOPs.
MLP_LAYERS = ("64-30-10", "1024-1024-10", "4096-4096-10", "8192-16384-10")
MLP_BATCHES = (256, 4096, 65536)
MLP_DTYPES = ("fp32", "fp16", "bf16")
MLP_VERSIONS = ("fused", "unfused", "textbook", "torch")  # fusedbench.measure.gpu.mlp
MLP_STEP = "mlp-step"  # the workload name an MLP cell's key carries in place of an epilog
MLP_EPOCH = "mlp-epoch"
MLP_EPOCHS = (
    DEFAULT_EPOCHS  # the epoch group trains as long as `fusedbench mlp`; every epoch after the first is a sample
)
# The clocks an MLP cell is timed by (benchmarks/mlp.py): a step's wall clock, its kernels' GPU time, an epoch's wall.
WALL, GPU_TIME, EPOCH_TIME = "wall", "gpu", "epoch"
# fp32 without TF32 runs at a tenth of fp16's rate: its largest step alone would cost a minute of the suite's
# three, so fp32 stops a batch short there (fp16 and bf16 time it).
MLP_LEFT_OUT = {("8192-16384-10", 65536, "fp32"): "left out of the grid: fp32 (no TF32) at 35 TFLOP a step would "
                "take a minute of the mlp suite's 3-minute budget; fp16 and bf16 time this size"}  # fmt: skip


def mlp_layers(label: str) -> tuple[int, int, int]:
    """'64-30-10' -> (inputs, hidden, outputs)."""
    inputs, hidden, outputs = (int(width) for width in label.split("-"))
    return inputs, hidden, outputs


@dataclass(frozen=True)
class MlpGroup:
    """One asv class of the mlp suite: a training-step workload at every layers x batch x dtype x version."""

    name: str  # the asv class name, e.g. "MlpStep"
    workload: str  # MLP_STEP or MLP_EPOCH
    layers: tuple[str, ...]
    batches: tuple[int, ...]
    param_names: tuple[str, ...]  # asv's parameters, of "layers", "batch", "dtype", "version"
    benchmarks: dict[str, str]  # clock -> the asv benchmark that records it (benchmarks/mlp.py)
    version: str  # asv's version of its benchmarks
    dtypes: tuple[str, ...] = MLP_DTYPES
    providers: tuple[str, ...] = MLP_VERSIONS  # the versions
    epilogs: ClassVar[
        tuple[str, ...]
    ] = ()  # verified as measured (fusedbench.measure.mlp.check_gradients), not by check
    module: ClassVar[str] = MLP_MODULE

    @property
    def dtype(self) -> str:
        return ", ".join(self.dtypes)

    @property
    def shape_set(self) -> str:
        return f"{' '.join(self.layers)} at batch {', '.join(map(str, self.batches))}"

    def combinations(self) -> list[tuple[str, int, str, str]]:
        """(layers, batch, dtype, version) of every cell, in asv's parameter order."""
        return list(itertools.product(self.layers, self.batches, self.dtypes, self.providers))

    def params(self) -> list[list]:
        """asv's parameter lists, in `param_names` order."""
        values = {"layers": self.layers, "batch": self.batches, "dtype": self.dtypes, "version": self.providers}
        return [list(values[name]) for name in self.param_names]

    def asv_params(self, layers: str, batch: int, dtype: str, version: str) -> tuple:
        """One cell's asv parameter values."""
        values = {"layers": layers, "batch": batch, "dtype": dtype, "version": version}
        return tuple(values[name] for name in self.param_names)

    def cell_key(self, layers: str, batch: int, dtype: str, version: str) -> CellKey:
        """An MLP cell's key: the workload in place of an epilog, the hidden layer's GEMM (hidden, inputs) x
        (inputs, batch) as the shape, the version as the provider."""
        inputs, hidden, _ = mlp_layers(layers)
        return CellKey(self.workload, dtype, hidden, inputs, batch, version)

    def cell_keys(self) -> list[CellKey]:
        return [self.cell_key(*combination) for combination in self.combinations()]

    @property
    def cell_count(self) -> int:
        return len(self.combinations())

    @property
    def asv_version(self) -> str:
        return self.version


ACCURACY_TRACK = "accuracy"  # the epoch group's test accuracy, an asv track beside its time
MLP_GROUPS: dict[str, MlpGroup] = {
    "MlpStep": MlpGroup(
        "MlpStep",
        MLP_STEP,
        MLP_LAYERS,
        MLP_BATCHES,
        ("layers", "batch", "dtype", "version"),
        {WALL: "mlp.MlpStep.time_step", GPU_TIME: "mlp.MlpStep.time_step_gpu"},
        MLP_STEP_REVISION,
    ),
    "MlpEpoch": MlpGroup(  # sklearn's digits at the notebook's batch
        "MlpEpoch",
        MLP_EPOCH,
        MLP_LAYERS[:1],
        (256,),
        ("dtype", "version"),
        {EPOCH_TIME: "mlp.MlpEpoch.time_epoch", ACCURACY_TRACK: "mlp.MlpEpoch.track_test_accuracy"},
        MLP_EPOCH_REVISION,
    ),
}
# asv's `version` of every benchmark class, from the groups' own declarations (tests/test_catalog.py pins them: a
# changed string starts a new history in asv).
ASV_VERSIONS = (
    CEILING_VERSIONS
    | {name: g.version for name, g in GROUPS.items()}
    | {name: g.version for name, g in MLP_GROUPS.items()}
)


SUITES: dict[str, tuple[str, ...]] = {
    "quick": ("Quick",),
    "default": (
        *(f"{dtype.capitalize()}{shapes.capitalize()}" for dtype in ("fp16", "bf16") for shapes in _TIMED_SETS),
        # fp32 without TF32 runs the seed GEMM at about 50 TFLOP/s (0.35 s a call): full suite only.
        *(f"{dtype.capitalize()}Seed" for dtype in ("tf32", "fp8")),
        "Blog",
    ),
    "full": tuple(name for name in GROUPS if name != "Quick" and name not in PEER_GROUPS and name != "TwoPass"),
    "peers": (*PEER_GROUPS, "TwoPass"),
    "mlp": tuple(MLP_GROUPS),
}


def suite_groups(suite: str) -> list[BenchmarkGroup | MlpGroup]:
    """The groups of a named suite, with an error that lists the valid names."""
    try:
        return [GROUPS.get(name) or MLP_GROUPS[name] for name in SUITES[suite]]
    except KeyError:
        raise FusedbenchError(f"unknown suite {suite!r}; choose from {', '.join(SUITES)}") from None


def select_groups(suite: str, bench: str | None) -> list[BenchmarkGroup | MlpGroup]:
    """The suite's groups whose class name matches the regular expression `bench` (all without one)."""
    groups = suite_groups(suite)
    if bench is None:
        return groups
    pattern = bench_pattern(bench)
    chosen = [g for g in groups if pattern.search(g.name)]
    if not chosen:
        names = ", ".join(g.name for g in groups)
        raise FusedbenchError(f"no group of suite {suite!r} matches --bench {bench!r}; its groups: {names}")
    return chosen


def bench_pattern(bench: str) -> re.Pattern:
    """`--bench`'s regular expression, which picks groups by a search in their class names."""
    try:
        return re.compile(bench)
    except re.error as exc:
        raise FusedbenchError(
            f"--bench {bench!r} is not a regular expression ({exc}); e.g. --bench 'Fp16|Bf16'"
        ) from None


def group_bench_regex(group: BenchmarkGroup | MlpGroup) -> str:
    """asv's --bench expression for one group's class."""
    return rf"^{group.module}\.{re.escape(group.name)}\."


def suite_bench_regex(suite: str) -> str:
    """One asv --bench expression for a whole suite: its groups' classes, and the ceilings its cells need."""
    groups = suite_groups(suite)
    classes = [rf"{g.module}\.{re.escape(g.name)}\." for g in groups]
    ceilings = [r"ceilings\."] if any(g.module == BENCHMARK_MODULE for g in groups) else []
    return rf"^({'|'.join(ceilings + classes)})"
