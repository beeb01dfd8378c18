"""Confirmation: what the first look flags is measured again in the same job, and decided by its own rule.

Between two sessions a GPU's power state moves whole workloads by a few per cent, so the first look's thresholds
(earned on A/A runs from different sessions) cannot catch a 5% slowdown of one cell without false alarms. The
first look therefore flags generously, below its thresholds (`FLAG_BAR` for cells of at least 1 ms and for gates,
half the threshold for smaller cells), and `fusedbench alert --confirm` measures each flagged workload again
(`paired.confirm`, through `measure.confirm`): the baseline's code beside the candidate's in lock-step, so both see
the same session, or, where the baseline cannot be rebuilt, the candidate alone with more rounds against the
baseline's recorded run. This module judges what was measured; it measures nothing.
The re-measured rounds are compared as runs are (`compare.compare_runs`), with `CONFIRMATION` as the preset: a
cell (or gate) is confirmed slower where its change passes the preset's margin and its bootstrap interval
excludes no change. A flagged gate has its whole group measured again.

The verdict after confirmation is the first look's, with every alert and flag of a re-measured cell or gate
replaced by what the confirmation found; status alerts (failed, missing) stand as the first look gave them.
A confirmation is kept as a record (`CONFIRMATION_FORMAT`, `.fbconfirm` beside the candidate's results), from
which the same verdict is computed again anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from fusedbench.catalog.formats import CONFIRMATION_FORMAT, ConfirmationForm, cell_from_json, read_record
from fusedbench.catalog.model import WORKLOAD, Cell, Pick, Request, Status
from fusedbench.catalog.suites import MLP_GROUPS
from fusedbench.errors import FusedbenchError
from fusedbench.regressions.compare import ALL_PROVIDERS, CELL, Run, as_run, compare_runs, worse_ratio
from fusedbench.regressions.gate import (
    GroupJudgement,
    Judged,
    MachineVerdict,
    SuiteVerdict,
    judge_comparison,
    with_picks,
)
from fusedbench.regressions.metrics import AlertKind
from fusedbench.regressions.thresholds import Preset, margins_for, recorded_margins

FLAG_BAR = {"cell": 0.025, "gate": 0.01}  # worse beyond this at first look: measured again (small cells: threshold/2)
ROUNDS = {"cell": 20, "gate": 10}  # rounds a side; a whole group's median needs fewer than one cell
CONFIRM_SUFFIX = ".fbconfirm"


@dataclass(frozen=True)
class Flagged:
    """One judged group's workloads to measure again, and why (a line per flagged row)."""

    judgement: GroupJudgement
    preset: Preset  # the first look's: what a re-measured candidate is judged by against its recorded baseline
    workloads: tuple[tuple, ...]  # WORKLOAD tuples, the candidate's order
    why: tuple[str, ...]
    whole_group: bool  # a gate was flagged: every workload, so the gates are judged again too

    @property
    def group(self) -> str:
        return self.judgement.group

    @property
    def rounds(self) -> int:
        return ROUNDS["gate" if self.whole_group else "cell"]

    def requests(self) -> list[Request]:
        """Each workload with the providers the candidate timed in it."""
        cells = self.judgement.candidate.cells
        ok = cells[cells["status"] == Status.OK.value]
        found = []
        for workload in self.workloads:
            mine = ok[(ok[WORKLOAD] == pd.Series(dict(zip(WORKLOAD, workload, strict=True)))).all(axis=1)]
            found.append(Request(self.group, *workload, tuple(mine["provider"])))
        return found


def _flag_bar(row) -> float:
    if row["cell_class"] == "small":
        return row["threshold"] / 2
    return min(FLAG_BAR["cell"], row["threshold"])


def flagged_cells(comparison) -> pd.DataFrame:
    """The compared rows worse than their flag bar, as measured or beside their group's median change in the metric
    (a session that ran the whole group 3% faster hides a 5% slowdown of one cell in the first, not the second)."""
    measured = comparison.cells[comparison.cells["ratio"].notna()]
    if measured.empty:
        return measured
    worse = worse_ratio(measured["ratio"].astype(float).to_numpy(), measured["metric"])
    whole = comparison.groups[comparison.groups["provider"] == ALL_PROVIDERS]
    shifts = worse_ratio(whole["ratio"].astype(float).to_numpy(), whole["metric"])
    drift = dict(zip(whole["metric"], shifts, strict=True))
    beside = worse / np.array([drift.get(metric, 1.0) for metric in measured["metric"]])
    bars = np.array([_flag_bar(row) for _, row in measured.iterrows()])
    return measured[(worse > 1 + bars) | (beside > 1 + bars)]


def flag(verdict: MachineVerdict) -> list[Flagged]:
    """The judged groups' workloads the first look flags: a measured change worse than the flag bar, or a gate's. The
    mlp suite's groups are never flagged: the worker times epilog cells, so their first look stands."""
    found = []
    for suite in verdict.suites:
        for judgement in suite.groups:
            if judgement.judged is None or judgement.not_judged or judgement.group in MLP_GROUPS:
                continue
            comparison = judgement.judged.comparison
            cells, gates = flagged_cells(comparison), comparison.groups
            gate_worse = worse_ratio(gates["ratio"].astype(float).to_numpy(), gates["metric"]) if len(gates) else []
            flagged_gates = gates[np.asarray(gate_worse) > 1 + FLAG_BAR["gate"]] if len(gates) else gates
            if cells.empty and flagged_gates.empty:
                continue
            whole = not flagged_gates.empty
            ok = judgement.candidate.cells
            ok = ok[ok["status"] == Status.OK.value]
            every = list(dict.fromkeys(ok[WORKLOAD].itertuples(index=False, name=None)))
            chosen = set(cells[WORKLOAD].itertuples(index=False, name=None))
            workloads = tuple(every if whole else [w for w in every if w in chosen])
            why = [_why(row) for _, row in flagged_gates.iterrows()] + [_why(row) for _, row in cells.iterrows()]
            found.append(Flagged(judgement, suite.preset, workloads, tuple(why), whole))
    return found


def _why(row) -> str:
    from fusedbench.regressions.gate import where

    return f"{where(row)} {row['metric']} x{row['ratio']:.3f}"


@dataclass(frozen=True)
class Confirmation:
    """What measuring a flagged group again found: how, the two sides as runs, and their comparison judged."""

    flagged: Flagged
    how: str  # "side by side", "side by side, its injection re-applied", or "candidate again against its record"
    baseline: Run
    candidate: Run
    judged: Judged
    remeasured: dict[str, tuple[Cell, ...]]  # side -> its cells measured again (the candidate's alone, or both)
    rounds: int  # a side
    seconds: float
    calls: int
    not_measured: tuple[str, ...] = ()
    decided_by: str = ""  # the preset the re-measured cells were judged by: margins side by side, else the first look's
    picks: tuple[Pick, ...] = ()  # fused-autotuned's two picks, where the sides' autotuning differed

    @property
    def group(self) -> str:
        return self.flagged.group

    def covers(self, row) -> bool:
        """Whether an alert row of the first look is decided by this confirmation instead."""
        if row.get("kind") in (AlertKind.FAILED.value, AlertKind.MISSING.value):
            return False
        if pd.isna(row.get("epilog")):
            return self.flagged.whole_group
        remeasured = set(self.candidate.cells[CELL].itertuples(index=False, name=None))
        return tuple(row[c] for c in CELL) in remeasured

    def alerts(self) -> pd.DataFrame:
        alerts = self.judged.alerts
        if not self.flagged.whole_group:  # gates over a few re-measured workloads are not the group's gates
            alerts = alerts[alerts["epilog"].notna()]
        return alerts.assign(reason=[f"confirmed {self.how}" + (f"; {r}" if r else "") for r in alerts["reason"]])


def judge_confirmation(
    flagged: Flagged,
    how: str,
    base_cells,
    cand_cells,
    *,
    rounds: int,
    seconds: float,
    calls: int,
    not_measured=(),
    margins: Preset | None = None,
    picks: Sequence[Pick] = (),
) -> Confirmation:
    """The confirmation of one flagged group: side by side (`base_cells` re-measured too), with `margins` (a record's)
    or the GPU's (`margins_for`), fused-autotuned at the candidate's pick and the `picks` judged as `ab` judges them
    (`regressions.picks`); the candidate alone (`base_cells` None), against the baseline's recorded run with the
    first look's preset."""
    first = flagged.judgement
    version = first.candidate.groups[flagged.group]
    cand = as_run(first.candidate.machine, first.candidate.commit, version, flagged.group, cand_cells)
    if base_cells is None:
        remeasured = pd.MultiIndex.from_frame(cand.cells[CELL])
        kept = first.baseline.cells[pd.MultiIndex.from_frame(first.baseline.cells[CELL]).isin(remeasured)]
        base, preset = Run(first.baseline.machine, first.baseline.commit, kept), flagged.preset
    else:
        base = as_run(first.baseline.machine, first.baseline.commit, version, flagged.group, base_cells)
        narrowed = first.judged.comparison.preset.cells if first.judged is not None else ""  # a session's --cells
        preset = margins or margins_for(first.candidate.machine, flagged.group, version, narrowed)
    comparison = compare_runs(base, cand, preset)
    if preset.by_cells:  # margins for as many cells as were judged (`Preset.for_cells`)
        measured = comparison.cells[comparison.cells["ratio"].notna()]
        counts = measured.groupby(["metric", "cell_class"]).size()
        comparison = compare_runs(base, cand, preset.for_cells(counts.to_dict()))
    judged = judge_comparison(comparison)
    judged = with_picks(judged, cand.machine, {"baseline": base.commit, "candidate": cand.commit}, version, list(picks))
    remeasured = {"candidate": tuple(cand_cells)} | ({"baseline": tuple(base_cells)} if base_cells is not None else {})
    return Confirmation(
        flagged, how, base, cand, judged, remeasured, rounds, seconds, calls, tuple(not_measured), preset.name,
        tuple(picks),
    )  # fmt: skip


def confirmed(verdict: MachineVerdict, confirmations: Sequence[Confirmation]) -> MachineVerdict:
    """The verdict after confirmation (module docstring)."""
    by_group = {c.group: c for c in confirmations}
    suites = []
    for suite in verdict.suites:
        groups = []
        for judgement in suite.groups:
            confirmation = by_group.get(judgement.group)
            if confirmation is None or judgement.judged is None:
                groups.append(judgement)
                continue
            first = judgement.judged
            kept = first.alerts[[not confirmation.covers(row) for _, row in first.alerts.iterrows()]]
            found = [a for a in (kept, confirmation.alerts()) if not a.empty]
            alerts = pd.concat(found, ignore_index=True) if found else first.alerts.iloc[:0]
            warnings = [*first.warnings, *(f"not measured again: {line}" for line in confirmation.not_measured)]
            groups.append(replace(judgement, judged=Judged(first.comparison, alerts, warnings)))
        suites.append(SuiteVerdict(suite.machine, suite.suite, suite.preset, suite.preset_line, tuple(groups)))
    return MachineVerdict(verdict.machine, tuple(suites))


def confirmation_lines(confirmations: Sequence[Confirmation]) -> list[str]:
    """For the terminal: per group, how it was measured again, what it cost, and each flagged cell's outcome."""
    if not confirmations:
        return ["confirmation: nothing flagged, nothing measured again (0 GPU seconds)"]
    total = sum(c.seconds for c in confirmations)
    cells = sum(len(c.candidate.cells) for c in confirmations)
    lines = [f"confirmation: {len(confirmations)} group(s), {cells} cells measured again, {total:.0f} s"]
    for c in confirmations:
        lines.append(
            f"  {c.group}: {c.how} (by {c.decided_by!r}), {len(c.candidate.cells)} cells x {c.rounds} rounds, "
            f"{c.seconds:.0f} s "
            f"({c.calls} timed calls); flagged: {'; '.join(c.flagged.why[:6])}"
            + (f" and {len(c.flagged.why) - 6} more" if len(c.flagged.why) > 6 else "")
        )
        rows = c.judged.comparison.cells
        rows = rows[(rows["metric"] == "time") & rows["ratio"].notna()]
        for _, row in rows.iterrows():
            if any(_why_matches(row, why) for why in c.flagged.why):
                lines.append(
                    f"    {_why(row).rsplit(' ', 1)[0]}: x{row['ratio']:.3f} [{row['ci_low']:.3f}, "
                    f"{row['ci_high']:.3f}] measured again -> {row['verdict'].value} (margin {row['threshold']:.1%})"
                )
    return lines


def _why_matches(row, why: str) -> bool:
    from fusedbench.regressions.gate import where

    return why.startswith(where(row) + " ")


def to_record(verdict: MachineVerdict, after: MachineVerdict, confirmations: Sequence[Confirmation]) -> dict:
    """A build's confirmation as a record: what was judged, each group's re-measured cells, and both verdicts."""
    return {
        "format": CONFIRMATION_FORMAT,
        "machine": verdict.machine,
        "suites": [suite.suite for suite in verdict.suites],
        "first_look": verdict.outcome.value,
        "confirmed": after.outcome.value,
        "alerts": {"first_look": verdict.alerts, "confirmed": after.alerts},
        "seconds": sum(c.seconds for c in confirmations),
        "groups": [_group_record(c) for c in confirmations],
    }


def _group_record(confirmation: Confirmation) -> dict:
    flagged = confirmation.flagged
    return {
        "group": flagged.group,
        "how": confirmation.how,
        "decided_by": confirmation.decided_by,
        "rounds": confirmation.rounds,
        "whole_group": flagged.whole_group,
        "workloads": [list(w) for w in flagged.workloads],
        "why": list(flagged.why),
        "seconds": confirmation.seconds,
        "calls": confirmation.calls,
        "not_measured": list(confirmation.not_measured),
        "baseline": {"machine": confirmation.baseline.machine, "commit": confirmation.baseline.commit},
        "candidate": {"machine": confirmation.candidate.machine, "commit": confirmation.candidate.commit},
        "cells": {side: [cell.to_json() for cell in cells] for side, cells in confirmation.remeasured.items()},
        "picks": [pick.to_json() for pick in confirmation.picks],
    }


def cells_of(group_record: dict, side: str) -> list[Cell] | None:
    """One side's re-measured cells from a group's confirmation record (None: that side was not measured again)."""
    if side not in group_record["cells"]:
        return None
    return [cell_from_json(entry) for entry in group_record["cells"][side]]


def read_confirmations(results_dir: str) -> list[dict]:
    """Every confirmation record under a results folder, each with its `path`, oldest file name first per machine."""
    found = []
    for machine in sorted(os.listdir(results_dir)):
        folder = os.path.join(results_dir, machine)
        if not os.path.isdir(folder):
            continue
        for name in sorted(n for n in os.listdir(folder) if n.endswith(CONFIRM_SUFFIX)):
            found.append(read_record(os.path.join(folder, name), ConfirmationForm, "confirmation record"))
    return found


def replay(results, record: dict) -> tuple[MachineVerdict, MachineVerdict, list[Confirmation]]:
    """A confirmation record judged again from `results` (the first look) and its re-measured cells: (the first look,
    the verdict after confirmation, the confirmations). A first look that flags other workloads than the record
    re-measured is an error: the record no longer fits these results or this code."""
    from fusedbench.regressions.gate import default_choice, judge

    group = record["groups"][0]
    base, cand = group["baseline"], group["candidate"]
    choice = default_choice(
        results,
        cand["machine"],
        suites=tuple(record["suites"]),
        candidate=cand["commit"],
        baseline=base["commit"],
        baseline_machine=base["machine"],
    )
    first = judge(results, choice)
    by_group = {g["group"]: g for g in record["groups"]}
    confirmations = []
    for flagged in flag(first):
        kept = by_group.get(flagged.group)
        if kept is None or [list(w) for w in flagged.workloads] != kept["workloads"]:
            raise FusedbenchError(
                f"{record.get('path', 'the confirmation record')}: the first look now flags other workloads of "
                f"{flagged.group} than the record measured again"
            )
        confirmations.append(
            judge_confirmation(
                flagged,
                kept["how"],
                cells_of(kept, "baseline"),
                cells_of(kept, "candidate"),
                rounds=kept["rounds"],
                seconds=kept["seconds"],
                calls=kept["calls"],
                not_measured=kept["not_measured"],
                margins=recorded_margins(kept.get("decided_by")) if cells_of(kept, "baseline") is not None else None,
                picks=[Pick.from_json(pick) for pick in kept.get("picks", [])],
            )
        )
    return first, confirmed(first, confirmations), confirmations
