"""`fusedbench check`: verify every provider x epilog x dtype on small shapes against float64.

The cell records and their tables are pure (tested without a GPU); `run_check` loads the GPU
stack lazily and hands each workload to `fusedbench.gpu.checking`.
"""

from __future__ import annotations

import math
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from rich.table import Table

from fusedbench.catalog import build_workloads, select_providers
from fusedbench.shapes import shape_set
from fusedbench.verify import Status


@dataclass(frozen=True)
class CellResult:
    """One verified cell: (epilog, dtype, shape, provider), its status and largest output error."""

    epilog: str
    dtype: str
    shape: str
    provider: str
    status: Status
    error: float | None = None  # max over outputs of max |out - ref| / max |ref|
    reason: str = ""

    def to_json(self) -> dict:
        record = asdict(self)
        record["status"] = self.status.value
        record["error"] = None if self.error is None or math.isinf(self.error) else self.error
        return record


@dataclass(frozen=True)
class CheckReport:
    """Everything one `fusedbench check` run found."""

    device: str
    cublaslt_version: int
    seed: int
    cells: list[CellResult]

    @property
    def failed(self) -> bool:
        return any(cell.status is Status.FAILED for cell in self.cells)

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "cublaslt_version": self.cublaslt_version,
            "seed": self.seed,
            "counts": {status.value: n for status, n in status_counts(self.cells).items()},
            "cells": [cell.to_json() for cell in self.cells],
        }


def status_counts(cells: Sequence[CellResult]) -> dict[Status, int]:
    counts = Counter(cell.status for cell in cells)
    return {status: counts.get(status, 0) for status in Status}


def run_check(
    *,
    shapes: str = "small",
    epilogs: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    providers: Sequence[str] | None = None,
    seed: int | None = None,
    on_cell: Callable[[CellResult], None] | None = None,
) -> CheckReport:
    """Verify the selected cells on the GPU (raises GpuUnavailable without one)."""
    workloads = build_workloads(epilogs=epilogs, dtypes=dtypes, shapes=shape_set(shapes))
    provider_names = select_providers(providers)
    from fusedbench.gpu import load_gpu_stack

    stack = load_gpu_stack("fusedbench check")
    from fusedbench.gpu.checking import check_workload

    seed = secrets.randbits(31) if seed is None else seed
    cells: list[CellResult] = []
    for index, workload in enumerate(workloads):
        for cell in check_workload(stack, workload, provider_names, seed + index):
            cells.append(cell)
            if on_cell is not None:
                on_cell(cell)
    return CheckReport(stack.device_name, stack.cublaslt_version, seed, cells)


_STYLES = {Status.OK: "green", Status.UNSUPPORTED: "yellow", Status.SKIPPED: "cyan", Status.FAILED: "bold red"}


def format_cell(cell: CellResult) -> str:
    """'ok 3.1e-04', 'unsupported', 'skipped' or 'FAILED 2.0e-01' (error as max relative error)."""
    if cell.status in (Status.UNSUPPORTED, Status.SKIPPED):
        return cell.status.value
    error = "inf" if cell.error is None or math.isinf(cell.error) else f"{cell.error:.1e}"
    return f"{'ok' if cell.status is Status.OK else 'FAILED'} {error}"


def cell_table(cells: Sequence[CellResult]) -> Table:
    """One row per (epilog, dtype, shape), one column per provider: status and max relative error."""
    providers = list(dict.fromkeys(cell.provider for cell in cells))
    rows: dict[tuple[str, str, str], dict[str, CellResult]] = {}
    for cell in cells:
        rows.setdefault((cell.epilog, cell.dtype, cell.shape), {})[cell.provider] = cell
    table = Table(title="fusedbench check: status and max relative error against float64")
    for column in ("epilog", "dtype", "shape", *providers):
        table.add_column(column, no_wrap=True)
    for (epilog, dtype, shape), by_provider in rows.items():
        rendered = []
        for provider in providers:
            cell = by_provider.get(provider)
            rendered.append("" if cell is None else f"[{_STYLES[cell.status]}]{format_cell(cell)}[/]")
        table.add_row(epilog, dtype, shape, *rendered)
    return table


def summary_table(cells: Sequence[CellResult]) -> Table:
    """Counts ok / unsupported / skipped / failed per dtype and provider."""
    providers = list(dict.fromkeys(cell.provider for cell in cells))
    dtypes = list(dict.fromkeys(cell.dtype for cell in cells))
    table = Table(title="cells: ok / unsupported / skipped / failed")
    for column in ("dtype", *providers):
        table.add_column(column, no_wrap=True)
    for dtype in dtypes:
        counts = []
        for provider in providers:
            c = status_counts([cell for cell in cells if cell.dtype == dtype and cell.provider == provider])
            counts.append("/".join(str(c[s]) for s in Status))
        table.add_row(dtype, *counts)
    return table


def format_totals(cells: Sequence[CellResult]) -> str:
    """'all N cells: a ok, b unsupported, c skipped, d failed'."""
    counts = ", ".join(f"{n} {status.value}" for status, n in status_counts(cells).items())
    return f"all {len(cells)} cells: {counts}"


def reason_table(cells: Sequence[CellResult]) -> Table | None:
    """Each distinct reason a cell was not ok, with its dtypes and cell count (None if all passed)."""
    grouped: dict[tuple[str, str, str], list[CellResult]] = {}
    for cell in cells:
        if cell.status is not Status.OK:
            grouped.setdefault((cell.status.value, cell.provider, cell.reason), []).append(cell)
    if not grouped:
        return None
    table = Table(title="why cells were not ok")
    for column in ("status", "provider", "dtypes", "cells", "reason"):
        table.add_column(column, overflow="fold")
    for (status, provider, reason), members in sorted(grouped.items()):
        dtypes = ",".join(dict.fromkeys(cell.dtype for cell in members))
        table.add_row(f"[{_STYLES[Status(status)]}]{status}[/]", provider, dtypes, str(len(members)), reason)
    return table
