"""A setting users tune in cuBLASLt, applied to one provider of a run: a deliberate, recorded change.

A tuned run is how fusedbench proves its alerts on a real regression: the touched cells are
known (one provider's), and the change is one a cuBLAS upgrade or a framework's configuration
can make (another algorithm than the heuristic's first, a smaller workspace). Tuned results
are kept apart from the default runs as every deliberate change is (`catalog.deliberate`): under
their own asv machine, `<gpu machine>-tuned-<provider>-<setting>-<value>`, the tuning written into
every group's record.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from fusedbench.errors import FusedbenchError

TUNE_VARIABLE = "FUSEDBENCH_TUNE"
# Each setting: what it changes in nvmath's plan of the provider's Matmul.
SETTINGS = {
    "algorithm": "execute the N-th (0-based) of cuBLASLt's heuristic algorithms instead of its first "
    "(the last one offered where fewer than N+1 are)",
    "workspace": "cap cuBLASLt's workspace at N bytes (nvmath's memory_limit), so the heuristic "
    "skips algorithms that need more",
}
# The providers planned by cuBLASLt's heuristic through nvmath (fused-autotuned reorders by timing).
TUNABLE_PROVIDERS = ("fused", "gemm")
_FORM = "PROVIDER:SETTING=N, e.g. fused:algorithm=3 or gemm:workspace=0"


@dataclass(frozen=True)
class Tuning:
    """One setting (`SETTINGS`) with its value, applied to one provider."""

    provider: str
    setting: str
    value: int

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.setting}={self.value}"

    def to_json(self) -> dict:
        return {"provider": self.provider, "setting": self.setting, "value": self.value}


def parse_tuning(text: str) -> Tuning:
    """'fused:algorithm=3' -> Tuning; a FusedbenchError names what is wrong and the form."""
    match = re.fullmatch(r"\s*([a-z-]+):([a-z]+)=(\d+)\s*", text or "")
    if not match:
        raise FusedbenchError(f"tuning {text!r} is not of the form {_FORM}")
    provider, setting, value = match.group(1), match.group(2), int(match.group(3))
    if provider not in TUNABLE_PROVIDERS:
        raise FusedbenchError(
            f"tuning {text!r}: provider {provider!r} is not planned by cuBLASLt's heuristic; "
            f"choose from {', '.join(TUNABLE_PROVIDERS)}"
        )
    if setting not in SETTINGS:
        raise FusedbenchError(f"tuning {text!r}: unknown setting {setting!r}; choose from {', '.join(SETTINGS)}")
    return Tuning(provider, setting, value)


def tuning_from_environment(environ: Mapping[str, str] = os.environ) -> Tuning | None:
    """The tuning TUNE_VARIABLE asks for (None where unset or empty)."""
    text = environ.get(TUNE_VARIABLE, "")
    if not text.strip():
        return None
    try:
        return parse_tuning(text)
    except FusedbenchError as exc:
        raise FusedbenchError(f"{TUNE_VARIABLE}: {exc}") from None
