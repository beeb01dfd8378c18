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
from typing import Any

from fusedbench.catalog.model import Cell, FormatError, legacy_cell
from fusedbench.catalog.suites import GROUPS
from fusedbench.errors import DataProblem
from fusedbench.files import write_text_atomically

RECORD_FORMAT = "fusedbench-record/2"  # /2: cells carry per-sample telemetry; `sampling` names the protocol
READABLE_FORMATS = ("fusedbench-record/1", RECORD_FORMAT)
LEGACY_FORMATS = ("fusedbench-environment/1", "fusedbench-environment/2")
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

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> GroupRecord:
        if payload.get("format") not in READABLE_FORMATS:
            raise FormatError(f"format {payload.get('format')!r}, expected one of {list(READABLE_FORMATS)}")
        try:
            return cls(
                machine=str(payload["machine"]),
                commit=str(payload["commit"]),
                group=str(payload["group"]),
                started=str(payload["started"]),
                seconds=float(payload["seconds"]),
                sampling=payload["sampling"],
                dirty=payload["dirty"],
                environment=dict(payload["environment"]),
                cells=tuple(Cell.from_json(cell) for cell in payload["cells"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"record field missing or mistyped ({type(exc).__name__}: {exc})") from None


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


def _legacy_records(payload: Mapping[str, Any]) -> list[GroupRecord]:
    """A whole-run `.fbenv` of fusedbench-environment/1 or /2, as one record per group it lists."""
    machine, commit = str(payload["machine"]), str(payload["commit"])
    by_group: dict[str, list[Cell]] = {}
    for entry in payload["cells"]:
        group = GROUPS.get(entry.get("group"))
        if group is None:
            raise FormatError(f"cell of unknown group {entry.get('group')!r}")
        by_group.setdefault(group.name, []).append(
            legacy_cell(entry, dtype=group.dtype, machine=machine, commit=commit)
        )
    environment = {name: payload.get(name) for name in ("gpu", "versions", "telemetry")}
    seconds = payload.get("measure_seconds") or {}
    return [
        GroupRecord(
            machine=machine,
            commit=commit,
            group=name,
            started=str(payload.get("started", "")),
            seconds=float(seconds.get(name, 0.0)),
            sampling=payload.get("sampling"),
            dirty=None,
            environment=environment,
            cells=tuple(cells),
        )
        for name, cells in by_group.items()
    ]


def read_record_file(path: str) -> list[GroupRecord]:
    """The records in one file (a legacy file holds several); FormatError or OSError if unreadable."""
    with open(path, encoding="utf-8") as stream:
        try:
            payload = json.load(stream)
        except ValueError as exc:
            raise FormatError(f"not JSON ({exc})") from None
    if not isinstance(payload, Mapping):
        raise FormatError("not a JSON object")
    if payload.get("format") in LEGACY_FORMATS:
        try:
            return _legacy_records(payload)
        except (KeyError, TypeError, AttributeError) as exc:
            raise FormatError(f"legacy record incomplete ({type(exc).__name__}: {exc})") from None
    return [GroupRecord.from_json(payload)]


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
