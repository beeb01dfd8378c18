"""`fusedbench check`: verify every provider x epilog x dtype on small shapes against float64.

The report and its tables are pure (tested without a GPU); `run_check` loads the GPU stack
lazily and hands each workload to `fusedbench.measure.gpu.checking`, which returns `model.Cell`s.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.markup import escape
from rich.table import Table

from fusedbench.catalog.model import Cell, Status, count_by_status, format_counts
from fusedbench.catalog.providers import select_providers
from fusedbench.catalog.shapes import shape_set
from fusedbench.catalog.tuning import Tuning
from fusedbench.catalog.workloads import build_workloads


@dataclass(frozen=True)
class CheckReport:
    """Everything one `fusedbench check` run found."""

    device: str
    cublaslt_version: int
    seed: int
    cells: list[Cell]

    @property
    def failed(self) -> bool:
        return any(cell.status is Status.FAILED for cell in self.cells)

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "cublaslt_version": self.cublaslt_version,
            "seed": self.seed,
            "counts": {status.value: n for status, n in count_by_status(self.cells).items()},
            "cells": [cell.to_json() for cell in self.cells],
        }


def run_check(
    *,
    shapes: str = "small",
    epilogs: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    providers: Sequence[str] | None = None,
    seed: int | None = None,
    on_cell: Callable[[Cell], None] | None = None,
    tuning: Tuning | None = None,
) -> CheckReport:
    """Verify the selected cells on the GPU, one provider tuned where asked (raises GpuUnavailable without one)."""
    workloads = build_workloads(epilogs=epilogs, dtypes=dtypes, shapes=shape_set(shapes))
    provider_names = select_providers(providers)
    from fusedbench.measure.gpu import load_gpu_stack

    stack = load_gpu_stack("fusedbench check")
    from fusedbench.measure.gpu.checking import check_workload
    from fusedbench.measure.gpu.providers import precompile_providers

    precompile_providers(provider_names, workloads, timed=False)

    seed = secrets.randbits(31) if seed is None else seed
    cells: list[Cell] = []
    for index, workload in enumerate(workloads):
        for cell in check_workload(stack, workload, provider_names, seed + index, tuning):
            cells.append(cell)
            if on_cell is not None:
                on_cell(cell)
    return CheckReport(stack.device_name, stack.cublaslt_version, seed, cells)


_STYLES = {Status.OK: "green", Status.UNSUPPORTED: "yellow", Status.SKIPPED: "cyan", Status.FAILED: "bold red"}


def format_cell(cell: Cell) -> str:
    """'ok 3.1e-04', 'unsupported', 'skipped' or 'FAILED 2.0e-01' (error as max relative error)."""
    if cell.status in (Status.UNSUPPORTED, Status.SKIPPED):
        return cell.status.value
    error = "inf" if cell.error is None or math.isinf(cell.error) else f"{cell.error:.1e}"
    return f"{cell.status.value if cell.ok else cell.status.value.upper()} {error}"


def cell_table(cells: Sequence[Cell]) -> Table:
    """One row per (epilog, dtype, shape), one column per provider: status and max relative error."""
    providers = list(dict.fromkeys(cell.key.provider for cell in cells))
    rows: dict[tuple[str, str, str], dict[str, Cell]] = {}
    for cell in cells:
        rows.setdefault((cell.key.epilog, cell.key.dtype, cell.key.shape), {})[cell.key.provider] = cell
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


def summary_table(cells: Sequence[Cell]) -> Table:
    """Counts ok / unsupported / skipped / failed per dtype and provider."""
    providers = list(dict.fromkeys(cell.key.provider for cell in cells))
    dtypes = list(dict.fromkeys(cell.key.dtype for cell in cells))
    table = Table(title="cells: " + " / ".join(status.value for status in Status))
    for column in ("dtype", *providers):
        table.add_column(column, no_wrap=True)
    for dtype in dtypes:
        counts = []
        for provider in providers:
            c = count_by_status([cell for cell in cells if cell.key.dtype == dtype and cell.key.provider == provider])
            counts.append("/".join(str(n) for n in c.values()))
        table.add_row(dtype, *counts)
    return table


def format_totals(cells: Sequence[Cell]) -> str:
    """'all N cells: a ok, b unsupported, c skipped, d failed'."""
    return f"all {len(cells)} cells: {format_counts(count_by_status(cells))}"


def reason_table(cells: Sequence[Cell]) -> Table | None:
    """Each distinct reason a cell was not ok, with its dtypes and cell count (None if all passed)."""
    grouped: dict[tuple[Status, str, str], list[Cell]] = {}
    for cell in cells:
        if not cell.ok:
            grouped.setdefault((cell.status, cell.key.provider, cell.reason), []).append(cell)
    if not grouped:
        return None
    table = Table(title="why cells were not ok")
    for column in ("status", "provider", "dtypes", "cells", "reason"):
        table.add_column(column, overflow="fold")
    order = list(Status)
    for (status, provider, reason), members in sorted(
        grouped.items(), key=lambda item: (order.index(item[0][0]), item[0][1:])
    ):
        dtypes = ",".join(dict.fromkeys(cell.key.dtype for cell in members))
        table.add_row(f"[{_STYLES[status]}]{status.value}[/]", provider, dtypes, str(len(members)), escape(reason))
    return table
