"""Benchmark groups, the named suites (quick, default, full) that select them, and the ceilings.

A group is one asv benchmark class: one dtype, one shape set, a list of epilogs and providers.
asv starts a process for every parameter combination, and a CUDA context plus the GPU
libraries cost seconds to start, so each group is measured in one process (asv's
`setup_cache`) and each cell's process only hands its recorded samples to asv. A suite is a
list of groups; `fusedbench run` hands asv one group at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusedbench.dtypes import DTYPES
from fusedbench.epilogs import EPILOGS
from fusedbench.errors import FusedbenchError
from fusedbench.providers import PROVIDERS
from fusedbench.shapes import SHAPE_SETS, shape_set
from fusedbench.workloads import Workload, build_workloads

BENCHMARK_MODULE = "cells"  # benchmarks/cells.py

# The ceilings every run measures beside its cells (benchmarks/ceilings.py): a dense GEMM large
# enough to reach the machine's rate, and a device-to-device copy large enough for HBM bandwidth.
CEILING_GEMM_SHAPE = (8192, 8192, 8192)
CEILING_COPY_BYTES = 2 << 30
CEILINGS_REGEX = r"^ceilings\."

# asv's `version` of every benchmark: what asv computed from the benchmark source at commit
# d1e4d02 (the measurement the committed default runs used), kept explicit so that a refactor
# that measures the same thing keeps asv's history comparable. Change a group's version only
# when what it measures changes (for example "Fp16Seed-2"); asv then starts a new history.
ASV_VERSIONS = {
    "GemmCeiling": "2a00b4b7e29bb04968bb39009d43a695117a7af8f6d44716e2cbebe053d54ec8",
    "CopyCeiling": "7ccc417e886a6e0f014a37ecb1a23fa2d47425ccbbe76aee6f8ac768719d7b37",
    "Quick": "e177bef02d9eaf7a0ad72117eda8287d486d05425e5eee270de01821943f9802",
    "Fp16Seed": "1577f0db28c0cad5e18f3a9686439a29a3102416e3fdb24539fb31a949f70f1d",
    "Fp16Llm": "a62f9d49ff169f0b89fe769a37a205f9aa347a184102b827c54e74910daf1921",
    "Fp16Membound": "39e6922680b2587d86009f94c7e50d712c4d3986949e17968f21ba0925387caf",
    "Bf16Seed": "e7ed9f656388779ddb0190ac546b6f7896fd967deefa30d2fff5b63bce978630",
    "Bf16Llm": "c3f0457c36d00097c81a3a313b01a78a3de1ae181be59d0d0b5bde8d02f265d2",
    "Bf16Membound": "f0c3370f622cbcdd1ec636ff6fdba9b8e2e8c9fb6689f9272a1b77eb47ef50ff",
    "Fp32Seed": "de7eec97ed8fa9d86a6b2d25c79700a5d311c6810d6101d94e33dc6c278238a0",
    "Fp32Llm": "0d7d90797349a034c777cc0d65ea12491b65a819c4bcfa562b2a0f087d66b7db",
    "Fp32Membound": "bd97f18020683fbdbe6b475009bc40d0072cfb81a0edbded0be588d176c7787d",
    "Tf32Seed": "55233074c2c14cbb0fc66c16f6a14c3cb8708b2124f0e1e71f6a627c1505ac33",
    "Tf32Llm": "b3c4ad20d632692f0cff3dcf291f48fdf65ead67f3478601163f4760ece199a2",
    "Tf32Membound": "955e529b0a97057fd7792037e6bb1eebe9cc6504b15cbd85288bacdb9b13b742",
    "Fp8Seed": "8a3fc569afa023f862f54aab3ee4c687f4d11d71fabb6c705d22e2df1cd939d7",
    "Fp8Llm": "2f8593f68492b873440b4af25ffafe93196e3d8771f9ed8a5f7503255e81dbd7",
    "Fp8Membound": "af695a59cf83eb987ad2110ebfe40ef0294c8666b20dc1c8d41f71824f8b4613",
}


@dataclass(frozen=True)
class BenchmarkGroup:
    """The cells of one asv benchmark class."""

    name: str  # the asv class name, e.g. "Fp16Seed"
    dtype: str
    shape_set: str
    epilogs: tuple[str, ...]
    providers: tuple[str, ...]

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
        return ASV_VERSIONS[self.name]


def _group(dtype: str, shapes: str, epilogs=None, providers=None, name: str | None = None) -> BenchmarkGroup:
    return BenchmarkGroup(
        name=name or f"{dtype.capitalize()}{shapes.capitalize()}",
        dtype=dtype,
        shape_set=shapes,
        epilogs=tuple(epilogs or (spec.name for spec in EPILOGS.values())),
        providers=tuple(providers or PROVIDERS),
    )


_TIMED_SETS = ("seed", "llm", "membound")  # "small" is for correctness only

# Every group any suite runs. "Quick" repeats five fp16 seed cells under their own class name,
# so a quick run never mixes with a default run's samples of the same cell.
GROUPS: dict[str, BenchmarkGroup] = {
    group.name: group
    for group in (
        _group("fp16", "seed", ("DEFAULT", "BIAS", "RELU_BIAS", "GELU_AUX_BIAS", "DRELU_BGRAD"), name="Quick"),
        *(_group(dtype, shapes) for dtype in DTYPES for shapes in _TIMED_SETS),
    )
}

SUITES: dict[str, tuple[str, ...]] = {
    "quick": ("Quick",),
    "default": (
        *(f"{dtype.capitalize()}{shapes.capitalize()}" for dtype in ("fp16", "bf16") for shapes in _TIMED_SETS),
        # fp32 without TF32 runs the seed GEMM at about 50 TFLOP/s (0.35 s a call): full suite only.
        *(f"{dtype.capitalize()}Seed" for dtype in ("tf32", "fp8")),
    ),
    "full": tuple(name for name in GROUPS if name != "Quick"),
}


def suite_groups(suite: str) -> list[BenchmarkGroup]:
    """The groups of a named suite, with an error that lists the valid names."""
    try:
        return [GROUPS[name] for name in SUITES[suite]]
    except KeyError:
        raise FusedbenchError(f"unknown suite {suite!r}; choose from {', '.join(SUITES)}") from None


def select_groups(suite: str, bench: str | None) -> list[BenchmarkGroup]:
    """The suite's groups whose class name matches the regular expression `bench` (all without one)."""
    groups = suite_groups(suite)
    if bench is None:
        return groups
    try:
        pattern = re.compile(bench)
    except re.error as exc:
        raise FusedbenchError(
            f"--bench {bench!r} is not a regular expression ({exc}); e.g. --bench 'Fp16|Bf16'"
        ) from None
    chosen = [g for g in groups if pattern.search(g.name)]
    if not chosen:
        names = ", ".join(g.name for g in groups)
        raise FusedbenchError(f"no group of suite {suite!r} matches --bench {bench!r}; its groups: {names}")
    return chosen


def group_bench_regex(name: str) -> str:
    """asv's --bench expression for one group's class."""
    return rf"^{BENCHMARK_MODULE}\.{re.escape(name)}\."


def suite_bench_regex(suite: str) -> str:
    """One asv --bench expression for a whole suite: its groups' classes and the ceilings."""
    names = "|".join(re.escape(g.name) for g in suite_groups(suite))
    return rf"^(ceilings\.|{BENCHMARK_MODULE}\.({names})\.)"
