"""An injected slowdown: chosen cells made slower by a chosen fraction, on the GPU, inside their timed region.

It is how a user checks that their CI would catch what they care about ("the fused RELU_BIAS at the seed
shape 5% slower"), and how docs/findings/2026-11-26-confirmation.md measured what the gate catches: a real
slowdown, with the real noise of a run around it, rather than a resampled copy of an old run. Each target is a cell
(`RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused=5%`) or a whole group (`Fp16Seed=2%`). On the GPU,
every sampled call of a target is followed, inside the timed region, by a spin kernel on the same stream
that lasts the fraction of that very call (`measure.gpu.timing.Stretcher`); warm-up and the lead-in are
untouched, so the protocol's state and the measured code are the same as without it.

Injected runs are kept apart from real results as tuned runs are (`catalog.deliberate`): their own
machine name, with `-inject-` in it, and the injection written into every group's record.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fusedbench.catalog.model import CellKey, cell_label, parse_cell
from fusedbench.errors import FusedbenchError

INJECT_VARIABLE = "FUSEDBENCH_INJECT"
SEPARATOR = ";"  # between targets in INJECT_VARIABLE (a cell's shape label holds commas)
_FORM = "TARGET=P%, TARGET a cell EPILOG/DTYPE/SHAPE/PROVIDER or a group, e.g. Fp16Seed=2%"


@dataclass(frozen=True)
class Target:
    """A cell (by its label) or a group (by its name), and the fraction its timed calls are stretched by."""

    what: str
    fraction: float

    @property
    def is_cell(self) -> bool:
        return "/" in self.what

    @property
    def label(self) -> str:
        return f"{self.what}={self.fraction * 100:g}%"

    def matches(self, key: CellKey, group: str) -> bool:
        if self.is_cell:
            return self.what == cell_label(key.epilog, key.dtype, key.m, key.k, key.n, key.provider)
        return self.what == group


@dataclass(frozen=True)
class Injection:
    """The targets of one injected run, in the order given."""

    targets: tuple[Target, ...]

    @property
    def label(self) -> str:
        return SEPARATOR.join(target.label for target in self.targets)

    @property
    def digest(self) -> str:
        """Eight hex digits that name the injection in its machine's name (the record keeps it whole)."""
        return hashlib.sha1(self.label.encode()).hexdigest()[:8]

    def fraction(self, key: CellKey, group: str) -> float:
        """How much slower the cell is made (the first target that names it or its group; 0 for none)."""
        return next((t.fraction for t in self.targets if t.matches(key, group)), 0.0)

    def missing_from(self, groups: Iterable) -> list[str]:
        """The targets that name no cell of these benchmark groups (they would slow nothing)."""
        keys = [(key, g.name) for g in groups for w in g.workloads() for key in w.cell_keys(g.providers)]
        return [t.label for t in self.targets if not any(t.matches(key, group) for key, group in keys)]

    def to_json(self) -> list[dict]:
        return [{"target": t.what, "fraction": t.fraction} for t in self.targets]


def _target(text: str) -> Target:
    from fusedbench.catalog.suites import GROUPS

    match = re.fullmatch(r"\s*([^=]+?)\s*=\s*(\d+(?:\.\d+)?)\s*%\s*", text)
    if not match:
        raise FusedbenchError(f"injection {text!r} is not of the form {_FORM}")
    what, percent = match.group(1), float(match.group(2))
    if not 0 < percent <= 100:
        raise FusedbenchError(f"injection {text!r}: {percent:g}% is outside (0, 100]; slow a cell by e.g. 5%")
    if "/" in what:
        parse_cell(what)  # names what is wrong with the label
    elif what not in GROUPS:
        raise FusedbenchError(f"injection {text!r}: {what!r} is neither a cell EPILOG/DTYPE/SHAPE/PROVIDER nor a group")
    return Target(what, percent / 100)


def parse_injection(texts: str | Iterable[str]) -> Injection:
    """'CELL=5%' or 'GROUP=2%' (several: a list, or joined by SEPARATOR) -> Injection; an error line names a fault."""
    parts = texts.split(SEPARATOR) if isinstance(texts, str) else [p for t in texts for p in t.split(SEPARATOR)]
    targets = tuple(_target(part) for part in parts if part.strip())
    if not targets:
        raise FusedbenchError(f"injection {texts!r} names no target; give {_FORM}")
    return Injection(targets)


def injection_from_environment(environ: Mapping[str, str] = os.environ) -> Injection | None:
    """The injection INJECT_VARIABLE asks for (None where unset or empty)."""
    text = environ.get(INJECT_VARIABLE, "")
    if not text.strip():
        return None
    try:
        return parse_injection(text)
    except FusedbenchError as exc:
        raise FusedbenchError(f"{INJECT_VARIABLE}: {exc}") from None
