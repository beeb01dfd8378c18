"""What fails a build: the comparison turned into alerts (exit 1) and warnings (shown, never failing).

Alerts (`AlertKind`): a regression (time or epilog cost slower, or a whole group's time), a new
fusion inversion (fused significantly below INVERSION x unfused where the baseline was not), a
fusion loss (unfused / fused fell beyond its threshold), a cell missing from a group the
candidate ran, a cell that starts failing. Warnings: changes beyond a threshold too noisy to
tell, inversions and failures already in the baseline, groups not run, groups whose benchmark
version changed. Pure; the CLI prints it, and writes GitHub's step summary.
"""

from __future__ import annotations

import enum
import json
import math
import os
import subprocess
from dataclasses import dataclass

import pandas as pd

from fusedbench.analysis.speedups import INVERSION
from fusedbench.catalog.shapes import shape_label
from fusedbench.catalog.tuning import gpu_machine
from fusedbench.errors import FusedbenchError
from fusedbench.regressions.compare import (
    ALL_PROVIDERS,
    EPILOG_COST,
    FUSION_SPEEDUP,
    KEY,
    TIME,
    Comparison,
    Run,
    Verdict,
    compare_runs,
    runs_of,
)
from fusedbench.regressions.thresholds import preset_for
from fusedbench.results.loader import ResultSet

STEP_SUMMARY_LIMIT = 1_000_000  # GitHub refuses a step summary over 1 MiB
KNOWN_SHOWN = 3  # known inversions named in the warning (the worst); the rest are counted


class AlertKind(enum.Enum):
    REGRESSION = "regression"
    FUSION_INVERSION = "fusion-inversion"
    FUSION_LOSS = "fusion-loss"
    MISSING = "missing"
    FAILED = Verdict.FAILED.value


# The keys of every compared row and alert in --format json (alerts add "kind").
JSON_KEYS = [*KEY, "metric", "verdict", "ratio", "ci_low", "ci_high", "threshold", "reason"]


@dataclass(frozen=True)
class Verdicts:
    """A comparison judged: what fails the build and what only warns."""

    comparison: Comparison
    alerts: pd.DataFrame  # the failing rows (cells and groups), with `kind`
    warnings: list[str]

    @property
    def failed(self) -> bool:
        return not self.alerts.empty


def _inverted(value: float, high: float) -> bool:
    """Fused significantly below INVERSION x unfused: the speedup and its whole interval under the line."""
    return value < INVERSION and high < INVERSION


def judge_comparison(comparison: Comparison) -> Verdicts:
    cells, warnings, failing = comparison.cells, [], []
    known: list[tuple[float, str]] = []  # inversions present in both runs: one summary line, worst first
    for index, row in cells.iterrows():
        verdict, metric = row["verdict"], row["metric"]
        kind = None
        if verdict is Verdict.FAILED:
            if "(known:" in row["reason"]:
                warnings.append(f"{where(row)} still fails (it failed in the baseline too): {row['reason']}")
            else:
                kind = AlertKind.FAILED
        elif verdict is Verdict.MISSING:
            kind = AlertKind.MISSING
        elif metric == FUSION_SPEEDUP:
            now = _inverted(row["candidate"], row["candidate_high"])
            before = row["baseline"] < INVERSION
            if now and before:
                known.append((row["candidate"], f"{where(row)} {row['candidate']:.2f}x (was {row['baseline']:.2f}x)"))
            if verdict is Verdict.SLOWER:
                kind = AlertKind.FUSION_INVERSION if now and not before else AlertKind.FUSION_LOSS
            elif now and not before:
                warnings.append(
                    f"{where(row)}: fused is now {row['candidate']:.2f}x unfused, below "
                    f"{INVERSION:g}x, but the change is within the noise ({_change(row)})"
                )
        elif verdict is Verdict.SLOWER and metric in (TIME, EPILOG_COST):
            kind = AlertKind.REGRESSION
        if verdict is Verdict.UNDECIDED and _worse(row):
            warnings.append(f"{where(row)} {metric}: {_change(row)}, beyond its threshold but too noisy to tell")
        if kind is not None:
            failing.append((index, kind.value))
    gpus = {gpu_machine(run.machine) for run in (comparison.baseline, comparison.candidate)}
    if len(gpus) > 1:
        warnings.append(
            f"the runs are of different machines ({comparison.baseline.machine}, {comparison.candidate.machine}): "
            "every change includes the difference between them, and the thresholds are for one machine's noise"
        )
    if known:
        worst = "; ".join(text for _, text in sorted(known)[:KNOWN_SHOWN])
        more = f" and {len(known) - KNOWN_SHOWN} more (--format json)" if len(known) > KNOWN_SHOWN else ""
        warnings.append(
            f"{len(known)} known fusion inversion(s), fused below {INVERSION:g}x unfused in both runs: {worst}{more}"
        )
    alerts = cells.loc[[i for i, _ in failing]].assign(kind=[k for _, k in failing])
    gates = []
    for _, gate in comparison.groups.iterrows():
        if gate["verdict"] is Verdict.SLOWER:
            kind = AlertKind.FUSION_LOSS if gate["metric"] == FUSION_SPEEDUP else AlertKind.REGRESSION
            gates.append(
                {c: None for c in cells.columns}
                | {key: gate[key] for key in ("group", "provider", "metric", "verdict", "ratio", "ci_low", "ci_high")}
                | {
                    "threshold": gate["threshold"],
                    "reason": f"the median change of the group's {gate['cells']} {_whose(gate['provider'])}cells",
                    "kind": kind.value,
                }
            )
    if gates:
        alerts = pd.concat([pd.DataFrame(gates), alerts], ignore_index=True)
    for verdict, what in ((Verdict.NOT_RUN, "not run by the candidate"), (Verdict.INCOMPARABLE, "incomparable")):
        groups = sorted(set(cells[cells["verdict"] == verdict]["group"]))
        if groups:
            warnings.append(f"group(s) {', '.join(groups)} {what}: {_count(cells, verdict)} cells not compared")
    return Verdicts(comparison, alerts.reset_index(drop=True), warnings)


def judge_runs(baseline: Run, candidate: Run, preset_name: str | None = None) -> tuple[Verdicts, str]:
    """The gate's verdict on candidate against baseline under the preset in force for the candidate's machine
    (or the one named), and the line saying why that preset."""
    preset, preset_line = preset_for(candidate.machine, preset_name)
    return judge_comparison(compare_runs(baseline, candidate, preset)), preset_line


def _whose(provider: str) -> str:
    return "" if provider == ALL_PROVIDERS else f"{provider} "


def _count(cells: pd.DataFrame, verdict: Verdict) -> int:
    return int((cells["verdict"] == verdict).sum())


def _worse(row) -> bool:
    ratio = row["ratio"]
    return (ratio < 1) if row["metric"] == FUSION_SPEEDUP else (ratio > 1)


def where(row) -> str:
    if row.get("epilog") is None or (isinstance(row.get("epilog"), float) and math.isnan(row["epilog"])):
        return f"group {row['group']}" + ("" if row["provider"] == ALL_PROVIDERS else f" ({row['provider']})")
    return f"{row['epilog']}/{row['dtype']}/{shape_label(row['m'], row['k'], row['n'])}/{row['provider']}"


def _change(row) -> str:
    if row["ratio"] is None or pd.isna(row["ratio"]):
        return ""
    return f"x{row['ratio']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}], threshold {row['threshold']:.1%}"


def describe(row) -> str:
    """One line for one compared row: where, metric, verdict (or alert kind), change, reason."""
    head = f"{row['kind']}: " if "kind" in row and isinstance(row.get("kind"), str) else ""
    verdict = row["verdict"].value if isinstance(row["verdict"], Verdict) else row["verdict"]
    change = _change(row)
    reason = f" - {row['reason']}" if row.get("reason") else ""
    return f"{head}{where(row)} {row['metric']} {verdict}{' ' + change if change else ''}{reason}"


def to_json(verdicts: Verdicts, preset_line: str) -> dict:
    """The --format json object: baseline, candidate, every compared cell and metric, alerts, warnings."""
    comparison = verdicts.comparison

    def records(frame: pd.DataFrame, extra: list[str]) -> list[dict]:
        out = []
        for _, row in frame.iterrows():
            item = {}
            for key in [*JSON_KEYS, "group", *extra]:
                value = row.get(key)
                if isinstance(value, Verdict):
                    value = value.value
                elif value is not None and not isinstance(value, str) and pd.isna(value):
                    value = None
                elif hasattr(value, "item"):
                    value = value.item()
                item[key] = value
            out.append(item)
        return out

    return {
        "baseline": _run_json(comparison.baseline),
        "candidate": _run_json(comparison.candidate),
        "preset": comparison.preset.name,
        "preset_reason": preset_line,
        "cells": records(comparison.cells, []),
        "groups": records(comparison.groups.assign(epilog=None), ["cells"]),
        "alerts": records(verdicts.alerts, ["kind"]),
        "warnings": verdicts.warnings,
    }


def _run_json(run: Run) -> dict:
    return {"machine": run.machine, "commit": run.commit, "results": run.origin or None}


def summary_markdown(verdicts: Verdicts, preset_line: str, limit: int = STEP_SUMMARY_LIMIT) -> str:
    """GitHub step summary: the verdict, alerts worst first, then warnings; cut to stay under `limit` bytes."""
    comparison = verdicts.comparison
    head = [
        f"## fusedbench alert: {'RED' if verdicts.failed else 'green'}",
        "",
        f"**{comparison.candidate.label}** against **{comparison.baseline.label}**; {preset_line}.",
        "",
        verdict_counts(comparison).capitalize(),
        "",
    ]
    body = []
    if verdicts.failed:
        body += [f"### {len(verdicts.alerts)} alert(s), worst first", ""]
        body += [f"- {describe(row)}" for _, row in verdicts.alerts.iterrows()]
        body.append("")
    if verdicts.warnings:
        body += [f"### {len(verdicts.warnings)} warning(s)", ""] + [f"- {w}" for w in verdicts.warnings]
    text = "\n".join(head)
    for kept, line in enumerate(body):
        if len((text + line + "\n").encode()) > limit - 200:
            text += f"\n... {len(body) - kept} more lines cut to stay under GitHub's 1 MiB summary limit\n"
            break
        text += line + "\n"
    return text


def verdict_counts(comparison: Comparison) -> str:
    """'compared rows: 5140 same; gates: 60 same, 1 slower'."""

    def counted(frame: pd.DataFrame) -> str:
        return ", ".join(f"{n} {v}" for v, n in frame["verdict"].map(lambda v: v.value).value_counts().items())

    return f"compared rows: {counted(comparison.cells)}; gates: {counted(comparison.groups) or 'none'}"


def comparison_markdown(verdicts: Verdicts, preset_line: str) -> str:
    """`compare --format md`: every row that is not 'same', worst first, then the gates that moved."""
    from fusedbench.results.loader import format_markdown

    comparison = verdicts.comparison
    cells = comparison.cells[comparison.cells["verdict"] != Verdict.SAME]
    gates = comparison.groups[comparison.groups["verdict"] != Verdict.SAME]
    text = [
        f"## {comparison.candidate.label} against {comparison.baseline.label}",
        "",
        f"{preset_line}. {verdict_counts(comparison).capitalize()}.",
        "",
    ]
    if not cells.empty:
        shown = cells.assign(
            cell=[where(row) for _, row in cells.iterrows()], verdict=cells["verdict"].map(lambda v: v.value)
        )
        columns = ["verdict", "cell", "metric", "cell_class", "ratio", "ci_low", "ci_high", "threshold", "reason"]
        text += [format_markdown(shown[columns]), ""]
    if not gates.empty:
        columns = ["verdict", "group", "provider", "metric", "ratio", "ci_low", "ci_high", "threshold", "cells"]
        text += [
            "Gates that moved:",
            "",
            format_markdown(gates.assign(verdict=gates["verdict"].map(lambda v: v.value))[columns]),
        ]
    return "\n".join(text)


def write_step_summary(text: str, environ=os.environ) -> str | None:
    """Append to $GITHUB_STEP_SUMMARY where it is set (GitHub Actions); the path written, or None."""
    path = environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as exc:
        raise FusedbenchError(f"cannot write GITHUB_STEP_SUMMARY {path!r} ({exc.strerror})") from None
    return path


def git_ancestors(commit: str, cwd: str) -> list[str] | None:
    """The commit's ancestors, nearest first (the commit itself excluded); None where git does not know it."""
    try:
        result = subprocess.run(
            ["git", "rev-list", "--first-parent", commit], cwd=cwd, capture_output=True, text=True, check=False
        )
    except OSError:  # no git on this machine
        return None
    if result.returncode != 0:
        return None
    return result.stdout.split()[1:]


class NoBaseline(FusedbenchError):
    """The machine has earlier runs, but none at the candidate's benchmark versions: the candidate is the
    first run of a changed measurement (its version bumped), so nothing can have regressed against it."""

    def __init__(self, message: str, candidate: Run):
        super().__init__(message)
        self.candidate = candidate


def default_baseline(results: ResultSet, candidate: Run, cwd: str) -> str:
    """The nearest earlier commit (git's first-parent order) with results on the candidate's machine for
    one of the candidate's groups at the same benchmark version."""
    ancestors = git_ancestors(candidate.commit, cwd)
    if ancestors is None:
        raise FusedbenchError(
            f"git here does not know commit {candidate.commit[:8]}, so the nearest earlier commit cannot be found; "
            "pass --baseline COMMIT (or run from the checkout the results belong to)"
        )
    runs = runs_of(results)
    mine = runs[runs["machine"] == candidate.machine].set_index("commit")
    detail = results.detail.join(results.cells[["machine", "commit", "group"]])
    for commit in ancestors:
        if commit not in mine.index:
            continue
        theirs = detail[(detail["machine"] == candidate.machine) & (detail["commit"] == commit)]
        versions = dict(zip(theirs["group"], theirs["version"], strict=True))
        if any(versions.get(g) == v for g, v in candidate.groups.items()):
            return commit
    gpu = gpu_machine(candidate.machine)
    missing = (
        f"no earlier commit has results on {candidate.machine} for the groups {candidate.commit[:8]} ran "
        f"({', '.join(candidate.groups)}) at the same benchmark version"
    )
    if gpu != candidate.machine:
        raise FusedbenchError(f"{missing}; pass --baseline {gpu}@COMMIT (a tuned run is judged against its GPU's runs)")
    if not any(commit in mine.index for commit in ancestors):  # no history at all: lost, or never made
        raise FusedbenchError(f"{missing}, nor at any version; pass --baseline COMMIT, or fetch the machine's results")
    raise NoBaseline(missing, candidate)


def first_run_summary(message: str) -> str:
    """The step summary of a gate with nothing to compare: green, and why."""
    return f"## fusedbench alert: green (nothing to compare)\n\n{message}. This run is the baseline of the next.\n"


def first_run_json(no_baseline: NoBaseline, preset_line: str) -> dict:
    """The --format json object of a gate with nothing to compare: to_json's keys, no baseline, nothing compared."""
    return {
        "baseline": None,
        "candidate": _run_json(no_baseline.candidate),
        "preset": None,
        "preset_reason": preset_line,
        "cells": [],
        "groups": [],
        "alerts": [],
        "warnings": [str(no_baseline)],
    }


def dump(obj) -> str:
    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def parse_ref(ref: str | None, machine: str | None) -> tuple[str | None, str | None]:
    """'MACHINE@COMMIT', 'MACHINE@' (its newest run) or 'COMMIT' (on `machine`) -> (machine, commit or None)."""
    if ref is None:
        return machine, None
    if "@" in ref:
        named, _, commit = ref.partition("@")
        return named or machine, commit or None
    return machine, ref


def only_machine(results: ResultSet, origin: str) -> str:
    """The machine to use where none was named: the one with the newest run."""
    runs = runs_of(results)
    if runs.empty:
        raise FusedbenchError(f"{origin} holds no fusedbench results to compare")
    return str(runs.iloc[-1]["machine"])


@dataclass(frozen=True)
class Chosen:
    baseline: Run
    candidate: Run
    results: ResultSet  # the candidate's (where the history comes from)


def choose_runs(
    loaded: list[tuple[str, ResultSet]], machine: str | None, baseline: str | None, candidate: str | None, cwd: str
) -> Chosen:
    """The two runs to compare. One results folder: both from it, the baseline by default the nearest earlier
    commit with comparable results (git order); two folders: the baseline from the first, the candidate from
    the second, each by default its folder's newest run on the machine."""
    from fusedbench.regressions.compare import select_run

    (base_origin, base_results), (cand_origin, cand_results) = loaded[0], loaded[-1]
    two = len(loaded) == 2
    cand_machine, cand_commit = parse_ref(candidate, machine)
    cand_machine = cand_machine or only_machine(cand_results, cand_origin)
    cand = select_run(cand_results, cand_machine, cand_commit, cand_origin if two else "")
    base_machine, base_commit = parse_ref(baseline, machine or cand.machine)
    if base_commit is None and not two and base_machine == cand.machine:
        base_commit = default_baseline(cand_results, cand, cwd)
    base = select_run(base_results, base_machine, base_commit, base_origin if two else "")
    if (base.machine, base.commit, base.origin) == (cand.machine, cand.commit, cand.origin):
        raise FusedbenchError(f"the baseline and the candidate are the same run ({cand.label}); name two runs")
    return Chosen(base, cand, cand_results)
