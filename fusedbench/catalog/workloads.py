"""Workloads: the (epilog, dtype, shape) combinations fusedbench measures, in catalog order."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fusedbench.catalog.dtypes import DTYPES, DTypeSpec, dtype_spec
from fusedbench.catalog.epilogs import EPILOGS, EpilogSpec, epilog_spec
from fusedbench.catalog.model import CellKey
from fusedbench.catalog.shapes import Shape, shape_label


@dataclass(frozen=True)
class Workload:
    """(epilog, dtype, M, K, N) in cuBLASLt's orientation: D (MxN) = epilog(A (MxK) @ B (KxN))."""

    epilog: EpilogSpec
    dtype: DTypeSpec
    m: int
    k: int
    n: int

    @property
    def shape(self) -> str:
        return shape_label(self.m, self.k, self.n)

    @property
    def label(self) -> str:
        return f"{self.epilog.name}/{self.dtype.name}/{self.shape}"

    def in_turn(self, count: int) -> int:
        """Which of `count` options (a peer's configs, the ranks of cuBLASLt's algorithms) a check verifies on this
        workload: fixed for the workload, spread over the options across workloads, so a check of many meets each."""
        return zlib.crc32(self.label.encode()) % count

    def cell_keys(self, providers: Iterable[str]) -> list[CellKey]:
        """The workload's cell for each provider."""
        return [CellKey(self.epilog.name, self.dtype.name, self.m, self.k, self.n, p) for p in providers]


def build_workloads(
    *,
    epilogs: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    shapes: Sequence[Shape],
) -> list[Workload]:
    """Every (epilog, dtype, shape) combination, in catalog order; empty selections mean all."""
    epilog_specs = [epilog_spec(e) for e in epilogs] if epilogs else list(EPILOGS.values())
    dtype_specs = [dtype_spec(d) for d in dtypes] if dtypes else list(DTYPES.values())
    return [
        Workload(epilog, dtype, shape.m, shape.k, shape.n)
        for dtype in dtype_specs
        for epilog in epilog_specs
        for shape in shapes
    ]
