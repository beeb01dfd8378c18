"""`fusedbench ab`: every cell of a suite measured with the base's code beside the candidate's, in lock-step on one
GPU, and judged side by side.

The gate compares a candidate with a baseline timed in another session, often on another card, so its first look
must stay above what sessions and cards move (a few per cent a group) and one cell's 5% needs a second look. Here
both codes are measured in one session on one card (`measure.confirm`: two workers, each importing its own
fusedbench, a call of one side then the same cell's call on the other, the side that goes first alternating by
round, each call after the protocol's lead-in), so a change is told from the card's own noise only: each group is
judged by its GPU's side-by-side margins (`regressions.confirm.margins_for`), and a group without margins of its
own is compared, shown and not judged.

Both codes must run on one stack: the base's dependencies (pyproject.toml) and the libraries its worker imports
must be the candidate's. A library upgrade is not a code change this can measure in one process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from fusedbench.catalog.model import Request
from fusedbench.catalog.suites import MLP_GROUPS, BenchmarkGroup
from fusedbench.errors import FusedbenchError
from fusedbench.measure.checkout import require_clean_checkout
from fusedbench.measure.confirm import Measured, Side, export_source, measure_again
from fusedbench.regressions.compare import compare_runs
from fusedbench.regressions.confirm import CONFIRMATION, as_run, margins_for
from fusedbench.regressions.gate import GroupJudgement, MachineVerdict, SuiteVerdict, judge_comparison
from fusedbench.regressions.margins import requests_for
from fusedbench.results.runs import group_cell_count

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (Python 3.10)
    import tomli as tomllib

NO_MARGINS = "no side-by-side margins of this GPU's for it: compared and shown, not judged"


@dataclass(frozen=True)
class Pair:
    """The two commits `ab` measures: the base's, and the candidate's (the clean checkout's)."""

    base: str
    candidate: str


def resolve_pair(repo: str, base_ref: str) -> Pair:
    """BASE as a commit beside the clean checkout's (FusedbenchError naming what is wrong: an unknown BASE, BASE the
    candidate itself, changed code, or dependencies that differ)."""
    candidate = require_clean_checkout(repo).commit
    done = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise FusedbenchError(f"BASE {base_ref!r} is no commit of {repo}: name a commit, branch or tag git knows")
    base = done.stdout.strip()
    if base == candidate:
        raise FusedbenchError(
            f"BASE {base_ref!r} is the candidate itself ({candidate[:8]}): name the commit the change is measured "
            "against"
        )
    differ = dependency_changes(repo, base, candidate)
    if differ:
        raise FusedbenchError(
            f"the base {base[:8]} depends on other packages than the candidate {candidate[:8]} ({'; '.join(differ)}): "
            "ab measures both codes on one stack, so a dependency change cannot be measured this way"
        )
    return Pair(base, candidate)


def dependency_changes(repo: str, base: str, candidate: str) -> list[str]:
    """What differs between the two commits' declared dependencies (pyproject.toml's, extras included but `dev`: the
    tests' and linters' tools, which nothing measured imports)."""
    declared = [_dependencies(repo, commit) for commit in (base, candidate)]
    return [
        f"{name}: {declared[0].get(name) or 'none'} -> {declared[1].get(name) or 'none'}"
        for name in sorted(set(declared[0]) | set(declared[1]))
        if declared[0].get(name) != declared[1].get(name)
    ]


def _dependencies(repo: str, commit: str) -> dict[str, str]:
    done = subprocess.run(["git", "-C", repo, "show", f"{commit}:pyproject.toml"], capture_output=True, text=True)
    if done.returncode != 0:
        raise FusedbenchError(f"the commit {commit[:8]} has no pyproject.toml: it is not a fusedbench commit")
    try:
        project = tomllib.loads(done.stdout).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        raise FusedbenchError(f"the commit {commit[:8]}'s pyproject.toml cannot be read ({exc})") from None
    extras = {name: packages for name, packages in project.get("optional-dependencies", {}).items() if name != "dev"}
    found = {"(required)": ", ".join(sorted(project.get("dependencies", [])))}
    return found | {f"[{extra}]": ", ".join(sorted(packages)) for extra, packages in extras.items()}


def cell_groups(groups: Sequence) -> list[BenchmarkGroup]:
    """The epilog-cell groups `ab` measures; the mlp suite's training steps are not measured side by side."""
    chosen = [g for g in groups if g.name not in MLP_GROUPS]
    if not chosen:
        raise FusedbenchError("ab measures epilog cells side by side; the mlp suite's training steps it does not")
    return chosen


def measure_pair(repo: str, pair: Pair, groups: Sequence[BenchmarkGroup], rounds: int) -> Measured:
    """Every workload of the groups, the base's code (a `git archive` of its commit) beside the checkout's."""
    requests: list[Request] = requests_for(groups)
    with tempfile.TemporaryDirectory(prefix="fusedbench-ab-") as scratch:
        base = export_source(repo, pair.base, os.path.join(scratch, pair.base))
        return measure_again(requests, [Side("baseline", base), Side("candidate", repo)], rounds)


def judge_pair(machine: str, suite: str, pair: Pair, measured: Measured) -> MachineVerdict:
    """Each group's candidate cells against its base cells, by its GPU's side-by-side margins (module docstring)."""
    versions = measured.hellos["candidate"]["benchmark_versions"]
    judgements = []
    for group in dict.fromkeys(measured.groups["candidate"]):
        runs = [
            as_run(machine, commit, versions[group], group, side_cells(measured, side, group))
            for side, commit in (("baseline", pair.base), ("candidate", pair.candidate))
        ]
        margins = margins_for(machine, group, versions[group])
        compared = judge_comparison(compare_runs(runs[0], runs[1], margins))
        why = NO_MARGINS if margins is CONFIRMATION else ""
        judgements.append(GroupJudgement(group, group_cell_count(group), runs[1], runs[0], compared, not_judged=why))
    line = "each group by its GPU's side-by-side margins, the base's code beside the candidate's on one card"
    return MachineVerdict(machine, (SuiteVerdict(machine, suite, CONFIRMATION, line, tuple(judgements)),))


def side_cells(measured: Measured, side: str, group: str) -> list:
    """One side's cells measured in `group`."""
    return [cell for cell, of in zip(measured.cells[side], measured.groups[side], strict=True) if of == group]
