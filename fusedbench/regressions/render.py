"""The gate's verdict as text for people and machines: JSON, GitHub's step summary, and `compare`'s Markdown.

Each function only maps a `gate.MachineVerdict` to a string or an object; none decides anything. The
terminal tables are the CLI's (rich), the HTML the report's; both read the same verdict.
"""

from __future__ import annotations

import json
import os

import pandas as pd

from fusedbench.catalog.model import KEY
from fusedbench.errors import FusedbenchError
from fusedbench.files import regular_file
from fusedbench.regressions.compare import Run, Verdict
from fusedbench.regressions.gate import GroupJudgement, MachineVerdict, Outcome, SuiteVerdict, describe, where
from fusedbench.results.loader import format_markdown

STEP_SUMMARY_LIMIT = 1_000_000  # GitHub refuses a step summary over 1 MiB
# The keys of every compared row and alert in --format json (alerts add "kind" and "began_at").
JSON_KEYS = [*KEY, "group", "metric", "verdict", "ratio", "ci_low", "ci_high", "threshold", "reason"]
GATE_KEYS = ["group", "provider", "metric", "gate", "verdict", "ratio", "ci_low", "ci_high", "threshold", "cells"]


def _plain(value):
    """A JSON-ready scalar: enums by value, NaN and None as None, numpy scalars as Python's."""
    if isinstance(value, Verdict):
        return value.value
    if value is not None and not isinstance(value, str) and pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def records(frame: pd.DataFrame, keys: list[str]) -> list[dict]:
    return [{key: _plain(row.get(key)) for key in keys} for _, row in frame.iterrows()]


def _run_json(run: Run | None) -> dict | None:
    if run is None:
        return None
    return {"machine": run.machine, "commit": run.commit, "results": run.origin or None}


def _group_json(group: GroupJudgement, rows: bool) -> dict:
    found = {
        "group": group.group,
        "cells": group.cells,
        "compared": group.compared,
        "candidate": _run_json(group.candidate),
        "baseline": _run_json(group.baseline),
        "not_judged": group.not_judged or None,
    }
    if rows and group.judged is not None:
        comparison = group.judged.comparison
        found["rows"] = records(comparison.cells, JSON_KEYS)
        found["gates"] = records(comparison.groups, GATE_KEYS)
    return found


def suite_json(suite: SuiteVerdict, *, rows: bool = False) -> dict:
    """One suite's verdict; with `rows`, every compared row and gate of each group (what `compare` prints)."""
    return {
        "suite": suite.suite,
        "outcome": suite.outcome.value,
        "reason": suite.reason,
        "cells": suite.cells,
        "compared": suite.compared,
        "preset": suite.preset.name,
        "preset_reason": suite.preset_line,
        "alerts": records(suite.alerts, [*JSON_KEYS, "kind", "began_at"]),
        "warnings": suite.warnings,
        "groups": [_group_json(group, rows) for group in suite.groups],
    }


def to_json(verdict: MachineVerdict, *, rows: bool = False) -> dict:
    """The --format json object: the machine's outcome and each suite's."""
    return {
        "machine": verdict.machine,
        "outcome": verdict.outcome.value,
        "suites": [suite_json(suite, rows=rows) for suite in verdict.suites],
    }


def dump(obj) -> str:
    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def headline(verdict: MachineVerdict, *, gate: bool = True, command: str = "alert") -> str:
    """'fusedbench alert: RED (h100-80gb-hbm3: 2 alert(s)): the build fails' and the like (`command`: the gate that
    speaks, alert or ab): the first line of every rendering; `compare` (not the gate, `gate` False) says what alert
    would say, and that it fails nothing itself."""
    if not gate:
        return (
            f"fusedbench compare: {verdict.outcome.value} by the gate's rules ({verdict.machine}: {verdict.alerts} "
            "alert(s)); compare fails nothing, alert does"
        )
    if verdict.outcome is Outcome.RED:
        return f"fusedbench {command}: RED ({verdict.machine}: {verdict.alerts} alert(s)): the build fails"
    if verdict.outcome is Outcome.GREEN:
        return f"fusedbench {command}: green ({verdict.machine}: no alert)"
    return f"fusedbench {command}: not judged ({verdict.machine}: too little compared to tell; nothing failed)"


def suite_line(suite: SuiteVerdict) -> str:
    """'default: red, 3 alerts; 1920 of 2884 cells compared' and the like."""
    alerts = f", {len(suite.alerts)} alert(s)" if suite.outcome is Outcome.RED else ""
    return f"{suite.suite}: {suite.outcome.value}{alerts}; {suite.reason}"


def run_pairs(suite: SuiteVerdict) -> str:
    """Which runs were compared, by commit: 'Fp16Seed, Bf16Seed: c8c600be against 77f3acc4'."""
    pairs: dict[str, list[str]] = {}
    for group in suite.groups:
        if group.baseline is not None and group.candidate is not None:
            pair = f"{group.candidate.label} against {group.baseline.label}"
            pairs.setdefault(pair, []).append(group.group)
    return "; ".join(f"{', '.join(groups)}: {pair}" for pair, groups in pairs.items())


def summary_markdown(verdict: MachineVerdict, limit: int = STEP_SUMMARY_LIMIT, command: str = "alert") -> str:
    """GitHub step summary: the verdict (`command`'s), per suite its line, alerts worst first and warnings; cut to stay
    under `limit` bytes."""
    head = [f"## {headline(verdict, command=command)}", ""]
    body = []
    for suite in verdict.suites:
        body += [f"### {suite_line(suite)}", ""]
        pairs = run_pairs(suite)
        if pairs:
            body += [f"Compared: {pairs}; {suite.preset_line}.", ""]
        body += [f"- {describe(row)}" for _, row in suite.alerts.iterrows()]
        body += [f"- warning: {w}" for w in suite.warnings]
        body.append("")
    text = "\n".join(head) + "\n"
    for kept, line in enumerate(body):
        if len((text + line + "\n").encode()) > limit - 200:
            text += f"\n... {len(body) - kept} more lines cut to stay under GitHub's 1 MiB summary limit\n"
            break
        text += line + "\n"
    return text


def comparison_markdown(verdict: MachineVerdict) -> str:
    """`compare --format md`: per suite, every row that is not 'same', worst first, then the gates that moved, and
    the warnings."""
    text = [f"## {verdict.machine}", "", headline(verdict, gate=False), ""]
    for suite in verdict.suites:
        text += [f"### {suite_line(suite)}", ""]
        text += [f"- warning: {w}" for w in suite.warnings] + ([""] if suite.warnings else [])
        for group in suite.groups:
            if group.judged is None:
                continue
            comparison = group.judged.comparison
            cells = comparison.cells[comparison.cells["verdict"] != Verdict.SAME]
            gates = comparison.groups[comparison.groups["verdict"] != Verdict.SAME]
            text += [f"{group.group}: {comparison.candidate.label} against {comparison.baseline.label}", ""]
            if not cells.empty:
                shown = cells.assign(cell=[where(r) for _, r in cells.iterrows()], verdict=cells["verdict"].map(_plain))
                columns = [
                    "verdict",
                    "cell",
                    "metric",
                    "cell_class",
                    "ratio",
                    "ci_low",
                    "ci_high",
                    "threshold",
                    "reason",
                ]
                text += [format_markdown(shown[columns]), ""]
            if not gates.empty:
                columns = ["verdict", "group", "provider", "metric", "ratio", "ci_low", "ci_high", "threshold", "cells"]
                text += [
                    "Gates that moved:",
                    "",
                    format_markdown(gates.assign(verdict=gates["verdict"].map(_plain))[columns]),
                ]
    return "\n".join(text) + "\n"


def write_step_summary(text: str, environ=os.environ) -> str | None:
    """Append to $GITHUB_STEP_SUMMARY where it is set (GitHub Actions); the path written, or None."""
    path = environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    try:
        if os.path.lexists(path):
            regular_file(path)  # a FIFO would block the build, a device swallow the verdict
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as exc:
        raise FusedbenchError(
            f"cannot append the verdict to GITHUB_STEP_SUMMARY {path!r} ({exc.strerror or exc}); the verdict is "
            "printed above"
        ) from None
    return path
