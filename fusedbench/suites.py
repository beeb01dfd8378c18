"""Benchmark groups and the named suites (quick, default, full) that select them.

A group is one asv benchmark class: one dtype, one shape set, a list of epilogs and providers.
asv starts a process for every parameter combination, and a CUDA context plus the GPU
libraries cost seconds to start, so each group is measured in one process (asv's
`setup_cache`) and each cell's process only hands its recorded samples to asv. A suite is a
list of groups; `fusedbench run` hands asv one group at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusedbench.catalog import PROVIDERS, Workload, build_workloads
from fusedbench.dtypes import DTYPES
from fusedbench.epilogs import EPILOGS
from fusedbench.errors import FusedbenchError
from fusedbench.shapes import SHAPE_SETS, shape_set

BENCHMARK_MODULE = "cells"  # benchmarks/cells.py

# `fusedbench run` cannot see inside asv's setup_cache: the measurement leaves each group's cell
# statuses (<group>.json) and progress (<group>.progress) in the folder this variable names.
STATUS_DIR_VARIABLE = "FUSEDBENCH_STATUS_DIR"
PROGRESS_SUFFIX = ".progress"


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


CEILINGS_REGEX = r"^ceilings\."


def group_bench_regex(name: str) -> str:
    """asv's --bench expression for one group's class."""
    return rf"^{BENCHMARK_MODULE}\.{re.escape(name)}\."
