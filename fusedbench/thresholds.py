"""Named threshold presets: how large a change must be, per metric and cell class, before it is one.

A preset is earned from measured noise, never picked: `fusedbench.calibration` derives it from
A/A runs (the same code run again on one machine), and tests/test_calibration.py recomputes
every committed preset from the committed runs it names, so a preset cannot drift from its data.
docs/regressions.md gives the noise each one came from, its false-alarm and detection rates.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fusedbench.errors import FusedbenchError

# Cell classes by the time that sets their noise: the cell's own median for `time`, its workload's
# GEMM for the paired metrics. Short kernels are noisier (launch and clock jitter weigh more).
CLASSES = (("large", 5e-3), ("medium", 1e-3), ("small", 0.0))  # (name, lower bound in seconds)
# The gates: a group's median change over all its providers' cells, and over one provider's cells.
GROUP_GATE, PROVIDER_GATE = "group", "provider"
GATES = (GROUP_GATE, PROVIDER_GATE)
CLASS_LABELS = {
    "large": ">= 5 ms",
    "medium": "1-5 ms",
    "small": "< 1 ms",
    GROUP_GATE: "a group's median",
    PROVIDER_GATE: "a group's median, one provider",
}


def cell_class(seconds: float) -> str:
    """'large' (>= 5 ms), 'medium' (1-5 ms) or 'small' (< 1 ms; also where the time is unknown)."""
    for name, bound in CLASSES:
        if not math.isnan(seconds) and seconds >= bound:
            return name
    return CLASSES[-1][0]


@dataclass(frozen=True)
class Preset:
    """Relative thresholds (0.05: a change beyond 5% either way) per (metric, class); the GATES classes are
    the gates on a group's median change in the metric."""

    name: str
    thresholds: Mapping[tuple[str, str], float]
    calibrated_on: str  # the machine whose A/A runs it came from
    runs: tuple[tuple[str, ...], ...] = ()  # the commits of those runs: a tuple per set of one measurement code
    noise: Mapping[str, str] = field(default_factory=dict)  # what was measured, per metric and class, in words
    rates: Mapping[str, Any] = field(default_factory=dict)  # false alarms per build, detection, minimum effects
    pairs: int = 0  # how many A/A pairs it came from

    def threshold(self, metric: str, klass: str) -> float:
        return self.thresholds[(metric, klass)]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "calibrated_on": self.calibrated_on,
            "runs": [list(commits) for commits in self.runs],
            "thresholds": {f"{metric}/{klass}": value for (metric, klass), value in self.thresholds.items()},
            "noise": dict(self.noise),
            "rates": dict(self.rates),
            "pairs": self.pairs,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Preset:
        return cls(
            name=data["name"],
            thresholds={tuple(key.split("/")): float(value) for key, value in data["thresholds"].items()},
            calibrated_on=data["calibrated_on"],
            runs=tuple(tuple(commits) for commits in data["runs"]),
            noise=dict(data["noise"]),
            rates=dict(data.get("rates", {})),
            pairs=int(data.get("pairs", 0)),
        )


# The committed presets (`fusedbench calibrate --write` adds or replaces one).
PRESETS_FILE = os.path.join(os.path.dirname(__file__), "presets.json")


def load_presets(path: str = PRESETS_FILE) -> dict[str, Preset]:
    with open(path, encoding="utf-8") as stream:
        return {name: Preset.from_json(data) for name, data in json.load(stream).items()}


def save_preset(preset: Preset, path: str = PRESETS_FILE) -> None:
    """Add or replace one preset in the presets file, atomically."""
    from fusedbench.files import write_text_atomically

    with open(path, encoding="utf-8") as stream:
        presets = json.load(stream)
    presets[preset.name] = preset.to_json()
    write_text_atomically(path, json.dumps(presets, indent=2, sort_keys=True, allow_nan=False) + "\n")
    PRESETS[preset.name] = preset


PRESETS: dict[str, Preset] = load_presets()
DEFAULT_PRESET = "h100-80gb-hbm3"


def preset_for(machine: str, name: str | None = None) -> tuple[Preset, str]:
    """The preset in force for `machine` (or the one named) and one line saying why it is that one."""
    if name is not None:
        if name not in PRESETS:
            raise FusedbenchError(f"no threshold preset {name!r}; presets: {', '.join(PRESETS)}")
        return PRESETS[name], f"preset {name!r}, as asked"
    if not PRESETS:
        raise FusedbenchError(f"no threshold presets in {PRESETS_FILE}; run `fusedbench calibrate` on A/A runs")
    gpu = re.sub(r"-tuned-.*$", "", machine)  # a tuned run is judged by its GPU's noise
    if gpu in PRESETS:
        return PRESETS[gpu], f"preset {gpu!r}, calibrated on this GPU's own A/A runs"
    return (
        PRESETS[DEFAULT_PRESET],
        f"preset {DEFAULT_PRESET!r}: {gpu} has no A/A runs of its own yet, so it uses the {DEFAULT_PRESET} "
        "calibration (run the calibration there to earn its own; docs/regressions.md)",
    )
