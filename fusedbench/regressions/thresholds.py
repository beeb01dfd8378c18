"""Named threshold presets: how large a change must be, per metric and cell class, before it is one.

A preset is earned from measured noise, never picked: `fusedbench.regressions.calibration` derives it from
A/A runs (the same code run again on one machine), and tests/test_calibration.py recomputes
every committed preset from the committed runs it names, so a preset cannot drift from its data.
docs/regressions.md gives the method; docs/findings/2026-11-25-threshold-presets.md the noise each committed preset
came from, its false-alarm and detection rates.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fusedbench.catalog.deliberate import PAIRED_MARK, gpu_machine
from fusedbench.errors import FusedbenchError
from fusedbench.regressions.metrics import METRICS

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
    suite: str = ""  # the suite whose A/A runs it came from
    versions: Mapping[str, str] = field(default_factory=dict)  # group -> asv's benchmark version of those runs
    # Margins only: "metric/class" -> {k: the margin when a confirmation judges at most k cells of the class}
    by_cells: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    protocol: int = 0  # margins only: the confirmation worker's protocol its records were measured at
    # Margins from paired sessions narrowed by `ab --cells` only: that regex. They judge sessions of those cells alone:
    # the worst of 96 cells wanders less than the worst of a whole group's, which they never saw.
    cells: str = ""
    # Margins from paired sessions only: the widest two autotunings of one code came out apart in them, as a margin
    # (their worst and STEP more, rounded up); 0 where none was earned (`regressions.picks`).
    picks: float = 0.0

    def threshold(self, metric: str, klass: str) -> float:
        return self.thresholds[(metric, klass)]

    def for_cells(self, counts: Mapping[tuple[str, str], int]) -> Preset:
        """These margins for a confirmation that judges `counts` cells per (metric, class): the worst of a few cells
        wanders less than the worst of a whole group, so each class takes the margin earned for the smallest number
        of cells in `by_cells` that covers its count, never one wider than the whole group's."""
        narrowed = dict(self.thresholds)
        for (metric, klass), count in counts.items():
            ladder = self.by_cells.get(f"{metric}/{klass}", {})
            covering = [k for k in ladder if k >= count]
            if covering:
                narrowed[(metric, klass)] = min(narrowed[(metric, klass)], ladder[min(covering)])
        return replace(self, thresholds=narrowed)

    @property
    def from_sessions(self) -> bool:
        """Margins earned from paired A/A sessions (`calibration.session_thresholds`), not from records or runs."""
        return "sessions" in self.rates

    def earned_at(self, group: str, version: str) -> bool:
        """Whether the preset's A/A runs timed `group` at this benchmark version. Only then does it judge the group:
        another group's noise, or the same group measured another way, was never measured by it."""
        return self.versions.get(group) == version

    def fits(self, versions: Mapping[str, str]) -> bool:
        """Whether it was earned at every one of these groups' versions that it knows, and knows one."""
        known = [group for group in versions if group in self.versions]
        return bool(known) and all(self.versions[group] == versions[group] for group in known)

    def to_json(self) -> dict:
        data = {
            "name": self.name,
            "calibrated_on": self.calibrated_on,
            "runs": [list(commits) for commits in self.runs],
            "thresholds": {f"{metric}/{klass}": value for (metric, klass), value in self.thresholds.items()},
            "noise": dict(self.noise),
            "rates": dict(self.rates),
            "pairs": self.pairs,
            "suite": self.suite,
            "versions": dict(self.versions),
        }
        if self.by_cells:
            data["by_cells"] = {key: {str(k): v for k, v in ladder.items()} for key, ladder in self.by_cells.items()}
        if self.protocol:
            data["protocol"] = self.protocol
        if self.cells:
            data["cells"] = self.cells
        if self.picks:
            data["picks"] = self.picks
        return data

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
            suite=str(data["suite"]),
            versions={str(group): str(version) for group, version in data["versions"].items()},
            by_cells={
                key: {int(k): float(v) for k, v in ladder.items()} for key, ladder in data.get("by_cells", {}).items()
            },
            protocol=int(data.get("protocol", 0)),
            cells=str(data.get("cells") or ""),
            picks=float(data.get("picks", 0.0)),
        )


# The committed presets (`fusedbench calibrate --write` adds or replaces one).
PRESETS_FILE = os.path.join(os.path.dirname(__file__), "presets.json")


def load_presets(path: str = PRESETS_FILE) -> dict[str, Preset]:
    """Every preset in the presets file, each checked whole: one FusedbenchError line naming what is wrong."""
    fix = f"restore it with `git checkout -- {os.path.relpath(path)}` or rerun `fusedbench calibrate --write`"
    try:
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
        if not isinstance(data, dict):
            raise ValueError(f"expected an object of presets, found a {type(data).__name__}")
        presets = {name: Preset.from_json(entry) for name, entry in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        raise FusedbenchError(f"threshold presets {path} cannot be read ({detail}); {fix}") from None
    for preset in presets.values():
        classes = (*(c for c, _ in CLASSES), *GATES)
        missing = [f"{m}/{k}" for m in METRICS for k in classes if (m, k) not in preset.thresholds]
        wrong = [f"{'/'.join(k)}={v}" for k, v in preset.thresholds.items() if not 0 < v < math.inf]
        if missing or wrong:
            what = f"lacks {', '.join(missing)}" if missing else f"has thresholds not above 0: {', '.join(wrong)}"
            raise FusedbenchError(f"threshold preset {preset.name!r} in {path} {what}; {fix}")
    return presets


def save_preset(preset: Preset, path: str = PRESETS_FILE) -> str:
    """Add or replace one preset in the presets file, atomically; says what it replaced."""
    from fusedbench.files import write_text_atomically

    presets = load_presets(path)
    before = presets.get(preset.name)
    presets[preset.name] = preset
    text = json.dumps({n: p.to_json() for n, p in presets.items()}, indent=2, sort_keys=True, allow_nan=False)
    write_text_atomically(path, text + "\n")
    _PRESETS.clear()
    if before is None:
        return f"preset {preset.name!r} added to {path}"
    return f"preset {preset.name!r} in {path} replaced: it came from {before.pairs} A/A pair(s), now {preset.pairs}"


_PRESETS: dict[str, Preset] = {}
DEFAULT_GPU = "h100-80gb-hbm3"  # whose presets stand in for a GPU that has none of its own
MAIN_SUITE = "default"  # whose preset compares a suite that has none (only the groups it was earned on are judged)
MARGINS_SUITE = "confirmation"  # the `suite` of a GPU's confirmation margins (regressions.margins): what they decide


def presets() -> dict[str, Preset]:
    """The committed presets, read once (a broken file is one error line, at the command that needs it)."""
    if not _PRESETS:
        _PRESETS.update(load_presets(PRESETS_FILE))
    return _PRESETS


def preset_for(
    machine: str, suite: str, name: str | None = None, versions: Mapping[str, str] | None = None
) -> tuple[Preset, str]:
    """The preset in force for `suite` on `machine` (or the one named) and one line saying why it is that one: the
    GPU's preset of that suite earned at the candidate's benchmark `versions` (group -> version), else the
    h100-80gb-hbm3 one, else the default suite's; one that fits no version still compares, and judges nothing. Of
    those that fit, the one earned on most of the candidate's groups (a preset may come from part of a suite), then
    on most A/A pairs."""
    known = presets()
    if name is not None:
        if name not in known:
            raise FusedbenchError(f"no threshold preset {name!r}; presets: {', '.join(known)}")
        return known[name], f"preset {name!r}, as asked"
    gpu = gpu_machine(machine)  # a tuned run is judged by its GPU's noise
    versions = versions or {}
    owners = list(dict.fromkeys(filter(None, (gpu, DEFAULT_GPU))))
    for owner in owners:  # earned on this suite at these versions: the GPU's own, else the stand-in's
        mine = [p for p in known.values() if p.calibrated_on == owner and p.suite == suite]
        fitting = [p for p in mine if p.fits(versions)] if versions else mine
        if fitting:
            chosen = max(fitting, key=lambda p: (sum(group in p.versions for group in versions), p.pairs))
            return chosen, _why(chosen, gpu, suite, True)
    for wanted in dict.fromkeys((suite, MAIN_SUITE)):  # none: one to compare with, which judges nothing here
        for owner in owners:
            mine = [p for p in known.values() if p.calibrated_on == owner and p.suite == wanted]
            if mine:
                chosen = max(mine, key=lambda p: p.pairs)
                return chosen, _why(chosen, gpu, suite, False)
    raise FusedbenchError(f"no preset of {DEFAULT_GPU} in {PRESETS_FILE}; run `fusedbench calibrate --write`")


def _why(preset: Preset, gpu: str, suite: str, fits: bool) -> str:
    """Why `preset` is the one in force for `suite` on `gpu`, in one line."""
    if not fits:
        return (
            f"preset {preset.name!r}: no A/A runs of the {suite} suite at these benchmark versions"
            f"{'' if gpu == preset.calibrated_on else ' on ' + (gpu or 'this machine')}, so its groups are compared, "
            "and judged only where that preset was earned"
        )
    if not gpu:
        return f"preset {preset.name!r}: no machine named and no results to take one from"
    if gpu == preset.calibrated_on:
        return f"preset {preset.name!r}, calibrated on this GPU's own A/A runs of the {suite} suite"
    return (
        f"preset {preset.name!r}: {gpu} has no A/A runs of the {suite} suite at these benchmark versions, so it uses "
        f"the {preset.calibrated_on} calibration (run the calibration there to earn its own; docs/calibrate.md)"
    )


# The margins of a side-by-side comparison where the GPU has earned none of its own (`margins_for`): a change
# beyond these, its interval excluding none, is confirmed. Side by side, the H200's A/A confirmations moved a cell
# of at least 1 ms by at most 1.2% (docs/findings/2026-11-26-confirmation.md), and a 5% slowdown lies well beyond 2%.
_MARGINS = {"large": 0.02, "medium": 0.02, "small": 0.05, "group": 0.01, "provider": 0.01}
CONFIRMATION = Preset(
    name="confirmation",
    thresholds={(metric, klass): _MARGINS[klass] for metric in METRICS for klass in (*(c for c, _ in CLASSES), *GATES)},
    calibrated_on="side-by-side A/A confirmations (docs/findings/2026-11-26-confirmation.md)",
)


def margins_for(machine: str, group: str, version: str, cells: str = "") -> Preset:
    """The margins a side-by-side comparison of `group` (a confirmation, a paired run) is decided by: its GPU's own,
    earned on side-by-side A/A measurements of the group at this benchmark version (`regressions.margins`; those of
    the newest worker protocol first, fused-autotuned timed at one pick on both sides from protocol 2 on, then most
    pairs), else the fixed CONFIRMATION margins. Margins earned from paired A/A sessions decide paired sessions only
    (`machine` a paired one), before side-by-side ones: a confirmation judges a few flagged cells, by margins narrowed
    to their number (`Preset.for_cells`), which sessions of whole groups do not earn. A paired session narrowed by
    `ab --cells` (`cells`, its regex, as written) is judged by margins its own cells earned first, else by those of
    whole groups (the worst of more cells covers the worst of fewer); margins earned over some cells never judge
    others."""
    gpu, paired = gpu_machine(machine), PAIRED_MARK in machine
    earned = [
        p
        for p in presets().values()
        if p.suite == MARGINS_SUITE
        and p.calibrated_on == gpu
        and p.earned_at(group, version)
        and (paired or not p.from_sessions)
        and p.cells in ("", cells)
    ]
    return max(earned, key=lambda p: (bool(p.cells), p.from_sessions, p.protocol, p.pairs)) if earned else CONFIRMATION


def recorded_margins(name: str | None) -> Preset:
    """The margins a confirmation record was decided by (a record from before margins were earned: CONFIRMATION)."""
    if name in (None, CONFIRMATION.name):
        return CONFIRMATION
    if name not in presets():
        raise FusedbenchError(f"a confirmation record was decided by the margins {name!r}, which presets.json lacks")
    return presets()[name]
