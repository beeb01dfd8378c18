"""Workloads and providers: the cells fusedbench can measure, and the catalog `fusedbench list` prints."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fusedbench.dtypes import DTYPES, DTypeSpec, dtype_spec
from fusedbench.epilogs import EPILOGS, EpilogSpec, epilog_spec
from fusedbench.errors import FusedbenchError
from fusedbench.shapes import SHAPE_SETS, Shape, shape_label

# The provider ladder, cheapest to write first. Each is prepared once (allocation, planning)
# and then run many times with nothing but the work in the hot call.
PROVIDERS: dict[str, str] = {
    "textbook": "the seed blog's naive code: plain GEMM, then y += bias[:, None], y[y < 0] = 0, masks, sum",
    "unfused": "the same cuBLASLt GEMM, then one single-pass cupy kernel for the pointwise work and one "
    "reduction for bias gradients",
    "fused": "cuBLASLt epilog through nvmath-python Matmul, planned once",
    "fused-autotuned": "as fused, plus nvmath's Matmul.autotune",
    "torch": "the torch peer: addmm / _addmm_activation / _scaled_mm where torch has the operation",
    "gemm": "the same GEMM with no epilog work at all: the floor",
}


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


def select_providers(names: Iterable[str] | None) -> list[str]:
    """Validate provider names (all of them when `names` is empty)."""
    chosen = list(names) if names else list(PROVIDERS)
    unknown = [p for p in chosen if p not in PROVIDERS]
    if unknown:
        raise FusedbenchError(f"unknown provider {unknown[0]!r}; choose from {', '.join(PROVIDERS)}")
    return chosen


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


def catalog_json() -> dict:
    """The catalog as one JSON-ready object: epilogs, dtypes, shapes, providers, and their details."""
    return {
        "epilogs": [
            {
                "name": spec.name,
                "value": spec.value,
                "summary": spec.summary,
                "inputs": list(spec.inputs),
                "outputs": list(spec.outputs),
            }
            for spec in EPILOGS.values()
        ],
        "dtypes": list(DTYPES),
        "shapes": {name: [list(s.mkn) for s in shapes] for name, shapes in SHAPE_SETS.items()},
        "providers": list(PROVIDERS),
        "dtype_details": [
            {
                "name": d.name,
                "operand": d.operand,
                "result": d.result,
                "compute_type": d.compute_type,
                "tolerance": d.tolerance,
                "shape_multiple": d.shape_multiple,
            }
            for d in DTYPES.values()
        ],
        "shape_details": {
            name: [{"mkn": list(s.mkn), "label": s.label, "source": s.source} for s in shapes]
            for name, shapes in SHAPE_SETS.items()
        },
        "provider_details": [{"name": name, "description": text} for name, text in PROVIDERS.items()],
    }
