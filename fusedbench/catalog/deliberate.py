"""Deliberate, recorded changes to a run: a tuning (`catalog.tuning`) or an injected slowdown (`catalog.injection`).

Both make a run slower or different on purpose, so their results are kept apart from the GPU's own: each
records under a machine of its own, the GPU's name with a mark and what was changed
(`h100-80gb-hbm3-tuned-fused-algorithm-7`, `h100-80gb-hbm3-inject-3f9a02c1`), and every group's record
says what was changed. `fusedbench run --tune/--inject` hands the change to the benchmark processes
through environment variables (asv passes its environment on); a plain `asv run` with them set and
`--machine` the marked name measures the same. A marked run is shown, advised on and judged only where
named, and judged against its GPU's own run of the same commit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from fusedbench.catalog.injection import INJECT_VARIABLE, Injection, Target, injection_from_environment
from fusedbench.catalog.stacks import STACK_MARK
from fusedbench.catalog.tuning import TUNE_VARIABLE, Tuning, tuning_from_environment
from fusedbench.errors import FusedbenchError

TUNED_MARK = "-tuned-"  # between the GPU's machine name and the tuning
INJECTED_MARK = "-inject-"  # between the GPU's machine name and the injection's digest
PAIRED_MARK = "-paired-"  # between the GPU's machine name and the session of `fusedbench ab` (paired.results)
VARIABLES = (TUNE_VARIABLE, INJECT_VARIABLE)


def gpu_machine(machine: str) -> str:
    """The GPU's own machine of a marked run's machine ('h100-80gb-hbm3-tuned-fused-algorithm-7',
    'h100-80gb-hbm3-inject-3f9a02c1', 'h100-80gb-hbm3-paired-20261128T013000Z', 'h100-80gb-hbm3-stack-nvmath-0.9'
    -> 'h100-80gb-hbm3'); any other machine is its own."""
    return stack_machine(machine).split(STACK_MARK, 1)[0]


def stack_machine(machine: str) -> str:
    """The machine of the stack a run is in: the GPU's own, or its stack's ('h100-80gb-hbm3-stack-nvmath-0.9-inject-
    3f9a02c1' -> 'h100-80gb-hbm3-stack-nvmath-0.9')."""
    for mark in (TUNED_MARK, INJECTED_MARK, PAIRED_MARK):
        machine = machine.split(mark, 1)[0]
    return machine


def baseline_machine(machine: str) -> str:
    """Where a run's baseline is: a paired run's in its own session (its base commit, measured beside it), any
    other marked run's on its stack's machine (a stack's runs are a history of their own: `--baseline
    MACHINE@COMMIT` names another stack's)."""
    return machine if PAIRED_MARK in machine else stack_machine(machine)


@dataclass(frozen=True)
class Deliberate:
    """What a run changes on purpose: nothing, a tuning, or an injection (one at a time: each is judged against
    the same code's plain run, which a run changed twice over would not tell apart)."""

    tuning: Tuning | None = None
    injection: Injection | None = None

    def __post_init__(self) -> None:
        if self.tuning is not None and self.injection is not None:
            raise FusedbenchError(
                f"a run is tuned ({self.tuning.label}) or injected ({self.injection.label}), not both: run them apart"
            )

    def __bool__(self) -> bool:
        return self.tuning is not None or self.injection is not None

    def machine(self, gpu: str) -> str:
        """The asv machine the run records under: the GPU's own, or a marked one apart from its history."""
        if self.tuning is not None:
            return f"{gpu}{TUNED_MARK}{self.tuning.provider}-{self.tuning.setting}-{self.tuning.value}"
        if self.injection is not None:
            return f"{gpu}{INJECTED_MARK}{self.injection.digest}"
        return gpu

    @property
    def flags(self) -> str:
        """The command-line flag that asks for it (' --tune fused:algorithm=7'), empty for none."""
        if self.tuning is not None:
            return f" --tune {self.tuning.label}"
        if self.injection is not None:
            return f" --inject '{self.injection.label}'"
        return ""

    def environment(self) -> dict[str, str]:
        """The variables that carry it to asv's benchmark processes."""
        if self.tuning is not None:
            return {TUNE_VARIABLE: self.tuning.label}
        if self.injection is not None:
            return {INJECT_VARIABLE: self.injection.label}
        return {}

    @classmethod
    def from_json(cls, environment: Mapping) -> Deliberate:
        """What a group's record environment says was changed (`to_json`'s keys; none: a plain run)."""
        tuning, injection = environment.get("tuning"), environment.get("injection")
        return cls(
            Tuning(**tuning) if tuning else None,
            Injection(tuple(Target(t["target"], float(t["fraction"])) for t in injection)) if injection else None,
        )

    def to_json(self) -> dict:
        """What a group's record says of it (nothing for a plain run)."""
        if self.tuning is not None:
            return {"tuning": self.tuning.to_json()}
        if self.injection is not None:
            return {"injection": self.injection.to_json()}
        return {}


def deliberate_from_environment(environ: Mapping[str, str] = os.environ) -> Deliberate:
    """What the environment asks a benchmark process to change (FusedbenchError naming the variable if malformed)."""
    return Deliberate(tuning_from_environment(environ), injection_from_environment(environ))
