"""One model of a cell: its key, its status, what was measured, and its one versioned JSON form.

A cell is (epilog, dtype, M, K, N, provider) on one machine at one commit (docs/architecture.md,
'Conventions'). Every writer and reader uses these classes: the check, the GPU measurement, the
records written beside asv's results, the results loader and the report. The JSON form is written
here (`Cell.to_json`) and read back, checked, by `catalog.formats.cell_from_json`. Pure: no GPU, no pandas.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.epilogs import Epilog
from fusedbench.catalog.providers import PROVIDERS
from fusedbench.catalog.shapes import parse_shape, shape_label
from fusedbench.errors import FusedbenchError

CELL_FORMAT = "fusedbench-cell/1"


class Status(enum.Enum):
    """Whether a cell was verified and timed, refused by a library, could not run here, or went wrong."""

    OK = "ok"  # verified, timed
    UNSUPPORTED = "unsupported"  # a library refused the combination; its message is the reason
    SKIPPED = "skipped"  # cannot run here (no GPU, missing package, too little memory); the reason says why
    FAILED = "failed"  # a wrong result or an error; never timed, never hidden


class FormatError(FusedbenchError):
    """A file or a cell that does not follow its form (catalog.formats); the message names the file and the field."""


# The columns that name a cell in every table (results, comparisons, alerts), in CellKey's order.
KEY = ["epilog", "dtype", "m", "k", "n", "provider"]
WORKLOAD = KEY[:-1]  # what every provider of a workload shares


def cell_label(epilog: str, dtype: str, m: int, k: int, n: int, provider: str) -> str:
    """A cell as users write it (`fusedbench history --cell`): 'RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused'."""
    return f"{epilog}/{dtype}/{shape_label(m, k, n)}/{provider}"


def parse_cell(text: str) -> dict:
    """'RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused' -> the cell's key columns."""
    parts = text.split("/")
    if len(parts) != 4:
        raise FusedbenchError(
            f"cell {text!r} is not EPILOG/DTYPE/SHAPE/PROVIDER, e.g. RELU/fp16/(8192,4096)x(4096,8192)/fused"
        )
    epilog, dtype, shape, provider = parts
    for what, value, known in (
        ("epilog", epilog, [e.name for e in Epilog]),
        ("dtype", dtype, list(DTYPES)),
        ("provider", provider, list(PROVIDERS)),
    ):
        if value not in known:
            raise FusedbenchError(f"cell {text!r}: unknown {what} {value!r}; choose from {', '.join(known)}")
    try:
        m, k, n = parse_shape(shape)
    except (ValueError, FusedbenchError):
        raise FusedbenchError(f"cell {text!r}: shape {shape!r} is not (M,K)x(K,N)") from None
    return {"epilog": epilog, "dtype": dtype, "m": m, "k": k, "n": n, "provider": provider}


@dataclass(frozen=True)
class CellKey:
    """Which cell: the workload in cuBLASLt's orientation, the provider, and where and when it ran.

    `machine` and `commit` are empty for cells that belong to no recorded run (a `fusedbench check`).
    """

    epilog: str
    dtype: str
    m: int
    k: int
    n: int
    provider: str
    machine: str = ""
    commit: str = ""

    @property
    def shape(self) -> str:
        return shape_label(self.m, self.k, self.n)

    @property
    def workload(self) -> tuple[str, str, int, int, int]:
        """(epilog, dtype, M, K, N): what every provider of the workload shares."""
        return self.epilog, self.dtype, self.m, self.k, self.n

    @property
    def label(self) -> str:
        return cell_label(self.epilog, self.dtype, self.m, self.k, self.n, self.provider)

    def at(self, machine: str, commit: str) -> CellKey:
        """The same cell, placed on a machine and commit."""
        return replace(self, machine=machine, commit=commit)


@dataclass(frozen=True)
class Cell:
    """What is known about one cell: status and reason, and the raw GPU samples where it was timed.

    `error` is the largest error against the float64 reference where a check measured it
    (max |out - ref| / max |ref|; inf where an output was missing or non-finite). `provenance`
    is free-form room for what later measurements add (kernels, cuBLASLt's algorithm). `telemetry` is the GPU's
    state around each sample, a series per reading in sample order (measure.telemetry.SAMPLE_SERIES), and the
    GPU's temperature after the last (`temperature_c`, one value).
    """

    key: CellKey
    status: Status
    reason: str = ""
    samples: tuple[float, ...] = ()
    error: float | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    telemetry: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def measured(cls, key: CellKey, samples) -> Cell:
        return cls(key, Status.OK, samples=tuple(float(s) for s in samples))

    @classmethod
    def refused(cls, key: CellKey, reason: str) -> Cell:
        return cls(key, Status.UNSUPPORTED, reason)

    @classmethod
    def skipped(cls, key: CellKey, reason: str) -> Cell:
        return cls(key, Status.SKIPPED, reason)

    @classmethod
    def failed(cls, key: CellKey, reason: str, error: float | None = None) -> Cell:
        return cls(key, Status.FAILED, reason, error=error)

    def to_json(self, *, samples: bool = True) -> dict:
        """The cell's one JSON form (samples left out where asv keeps them)."""
        record = {
            "format": CELL_FORMAT,
            "epilog": self.key.epilog,
            "dtype": self.key.dtype,
            "m": self.key.m,
            "k": self.key.k,
            "n": self.key.n,
            "provider": self.key.provider,
            "machine": self.key.machine,
            "commit": self.key.commit,
            "status": self.status.value,
            "reason": self.reason,
        }
        if samples and self.samples:
            record["samples"] = list(self.samples)
        if self.error is not None:
            record["error"] = None if math.isinf(self.error) else self.error
        if self.provenance:
            record["provenance"] = dict(self.provenance)
        if self.telemetry:
            record["telemetry"] = {name: list(series) for name, series in self.telemetry.items()}
        return record


def count_by_status(cells) -> dict[Status, int]:
    """How many cells have each status, every status present (zero where none)."""
    counts = dict.fromkeys(Status, 0)
    for cell in cells:
        counts[cell.status] += 1
    return counts


def format_counts(counts: Mapping[Status, int]) -> str:
    """'86 ok, 10 unsupported, 0 skipped, 0 failed'."""
    return ", ".join(f"{count} {status.value}" for status, count in counts.items())


@dataclass(frozen=True)
class Request:
    """One workload to measure (again, or beside another code): the group it is timed in, and the providers to time."""

    group: str
    epilog: str
    dtype: str
    m: int
    k: int
    n: int
    providers: tuple[str, ...]

    def key(self, provider: str) -> CellKey:
        return CellKey(self.epilog, self.dtype, self.m, self.k, self.n, provider)

    def to_json(self) -> dict:
        return {
            "group": self.group,
            "epilog": self.epilog,
            "dtype": self.dtype,
            "m": self.m,
            "k": self.k,
            "n": self.n,
            "providers": list(self.providers),
        }


SIDES = ("baseline", "candidate")  # the two sides of a side-by-side measurement, and of a Pick


@dataclass(frozen=True)
class Pick:
    """fused-autotuned's two picks of one cell, where two codes measured side by side autotuned to different
    algorithms: each pick's algorithm, and its samples on each side (pick -> side -> samples; a pick and a side are
    "baseline" or "candidate"). Both picks timed on both sides tell the code's change from the choice's."""

    key: CellKey
    group: str
    algorithms: dict[str, str]  # "baseline" / "candidate" -> the algorithm its autotune chose
    samples: dict[str, dict[str, list[float]]]

    def to_json(self) -> dict:
        key = self.key
        where = {"epilog": key.epilog, "dtype": key.dtype, "m": key.m, "k": key.k, "n": key.n}
        return where | {"group": self.group, "algorithms": self.algorithms, "samples": self.samples}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pick:
        from fusedbench.catalog.providers import AUTOTUNED

        key = CellKey(data["epilog"], data["dtype"], int(data["m"]), int(data["k"]), int(data["n"]), AUTOTUNED)
        samples = {pick: {side: [float(s) for s in found] for side, found in by_side.items()}
                   for pick, by_side in data["samples"].items()}  # fmt: skip
        return cls(key, str(data["group"]), dict(data["algorithms"]), samples)


def sample_clocks(series) -> list[float]:
    """Each sample's SM clock from a cell's telemetry: the mean of the readings right before and right after it."""
    return [(b + a) / 2 for b, a in zip(series.get("sm_mhz_before", ()), series.get("sm_mhz_after", ()), strict=False)]


def sample_watts(series) -> list[int]:
    """The instantaneous power right after each sample, the samples NVML gave none for left out (so not
    aligned with the samples: for medians, not for pairing)."""
    return [watts for watts in series.get("power_w", ()) if watts >= 0]
