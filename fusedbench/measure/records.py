"""The records fusedbench keeps beside asv's results: every cell's status and reason, and the environment.

asv keeps timings, not reasons, so each benchmark group, as it is measured inside asv's
`setup_cache`, writes one record file (RECORD_SUFFIX, not *.json, which asv would try to load)
into asv's results folder for its machine: the group's cells in the one JSON form of
`fusedbench.catalog.model`, how they were sampled, the checkout they measured, the GPU, the library
versions and NVML telemetry. A plain `asv run` writes them as `fusedbench run` does.

asv's results hold the samples; the record holds everything else, the GPU's state around each sample
included (each cell's `telemetry`, format /2), a cell per line so that it stays small and readable.

Runs before records wrote one `.fbenv` per `fusedbench run` (fusedbench-environment/1 and /2); they are
read into the same `GroupRecord`s, one per group.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from fusedbench.catalog.model import Cell, CellKey, FormatError, Status
from fusedbench.catalog.shapes import parse_shape
from fusedbench.catalog.suites import GROUPS
from fusedbench.errors import DataProblem
from fusedbench.files import write_text_atomically

if TYPE_CHECKING:
    from fusedbench.catalog.formats import LegacyRecordForm, RecordForm

RECORD_FORMAT = "fusedbench-record/2"  # /2: cells carry per-sample telemetry; `sampling` names the protocol (the
# forms read back, /1 and the legacy environments among them: catalog.formats.RecordForm and LegacyRecordForm)
RECORD_SUFFIX = ".fbenv"


@dataclass(frozen=True)
class GroupRecord:
    """One measured group of one run: its cells' statuses and reasons, and what it ran on."""

    machine: str  # asv's machine name, named after the GPU (h100-80gb-hbm3)
    commit: str  # the checkout's HEAD: the commit asv labels the results with
    group: str  # the asv class, e.g. "Fp16Seed"
    started: str  # ISO 8601, UTC
    seconds: float  # how long the group's measurement took
    sampling: str | None  # how samples were taken (sampling.Protocol.sampling); None: not recorded
    dirty: bool | None  # whether the checkout had uncommitted changes; None: not recorded
    environment: Mapping[str, Any] = field(default_factory=dict)  # gpu, versions, telemetry
    cells: tuple[Cell, ...] = ()

    @property
    def started_at(self) -> datetime:
        """When the measurement began (the earliest time for a record that says nothing)."""
        try:
            started = datetime.fromisoformat(self.started)
        except ValueError:
            return datetime.min.replace(tzinfo=timezone.utc)
        return started if started.tzinfo else started.replace(tzinfo=timezone.utc)

    def to_json(self) -> dict:
        return {
            "format": RECORD_FORMAT,
            "machine": self.machine,
            "commit": self.commit,
            "group": self.group,
            "started": self.started,
            "seconds": round(self.seconds, 1),
            "sampling": self.sampling,
            "dirty": self.dirty,
            "environment": dict(self.environment),
            "cells": [cell.to_json(samples=False) for cell in self.cells],  # asv keeps the samples
        }


def record_path(results_dir: str, record: GroupRecord) -> str:
    """results/<machine>/<commit8>-<group>-<started>.fbenv: one file per measurement, never overwritten."""
    stamp = datetime.fromisoformat(record.started).strftime("%Y%m%dT%H%M%S%fZ")
    name = f"{record.commit[:8]}-{record.group}-{stamp}{RECORD_SUFFIX}"
    return os.path.join(results_dir, record.machine, name)


def record_text(record: GroupRecord) -> str:
    """The record's JSON with a cell per line: its per-sample telemetry would take a line a number indented."""
    payload = record.to_json()
    cells = ",\n".join(json.dumps(cell, separators=(",", ":")) for cell in payload.pop("cells"))
    head = json.dumps(payload, indent=1)
    return f'{head[:-2]},\n "cells": [\n{cells}\n ]\n}}\n'


def write_record(results_dir: str, record: GroupRecord) -> str:
    path = record_path(results_dir, record)
    write_text_atomically(path, record_text(record))
    return path


def _record(form: RecordForm) -> GroupRecord:
    """A checked fusedbench-record/1 or /2 as the record it is."""
    from fusedbench.catalog.formats import cell_of_form

    return GroupRecord(
        machine=form.machine,
        commit=form.commit,
        group=form.group,
        started=form.started,
        seconds=form.seconds,
        sampling=form.sampling,
        dirty=form.dirty,
        environment=dict(form.environment),
        cells=tuple(cell_of_form(cell) for cell in form.cells),
    )


def _legacy_records(form: LegacyRecordForm) -> list[GroupRecord]:
    """A checked whole-run `.fbenv` of fusedbench-environment/1 or /2, as one record per group it lists (each cell's
    dtype its group's)."""
    by_group: dict[str, list[Cell]] = {}
    for entry in form.cells:
        group = GROUPS[entry.group]
        key = CellKey(entry.epilog, group.dtype, *parse_shape(entry.shape), entry.provider, form.machine, form.commit)
        by_group.setdefault(group.name, []).append(Cell(key, Status(entry.status), entry.reason))
    environment = {"gpu": form.gpu, "versions": form.versions, "telemetry": form.telemetry}
    return [
        GroupRecord(
            machine=form.machine,
            commit=form.commit,
            group=name,
            started=form.started,
            seconds=form.measure_seconds.get(name, 0.0),
            sampling=form.sampling,
            dirty=None,
            environment=environment,
            cells=tuple(cells),
        )
        for name, cells in by_group.items()
    ]


def read_record_file(path: str) -> list[GroupRecord]:
    """The records in one file, checked (a legacy file holds several); FormatError or OSError if unreadable. The forms
    are imported here: the benchmark processes that write records never read one."""
    from fusedbench.catalog.formats import LegacyRecordForm, read_record_form

    form = read_record_form(path)
    return _legacy_records(form) if isinstance(form, LegacyRecordForm) else [_record(form)]


def load_records(results_dir: str) -> tuple[list[GroupRecord], list[DataProblem]]:
    """Every record under `results_dir`, oldest first, and a line for each file that could not be read (its machine
    the folder it lies in)."""
    records, problems = [], []
    for root, _, files in sorted(os.walk(results_dir)):
        for name in sorted(files):
            if not name.endswith(RECORD_SUFFIX):
                continue
            path = os.path.join(root, name)
            try:
                records.extend(read_record_file(path))
            except (OSError, FormatError) as exc:
                problems.append(
                    DataProblem(
                        f"{path} is not a fusedbench record ({exc}); its cells' statuses and reasons are lost",
                        os.path.basename(root),
                    )
                )
    return sorted(records, key=lambda record: record.started_at), problems
