"""A paired run kept as asv keeps any run: both sides of `fusedbench ab` under a machine of their own,
`<gpu>-paired-<session>`, written through asv's results API, a record per side and group beside them.

Kept apart from the GPU's history (as tuned and injected runs are, `catalog.deliberate`), and a machine per session:
another pull request with the same base, or the same pair measured again, never overwrites it. Each side is a commit
of that machine, so `asv publish` and `asv compare BASE CANDIDATE --machine <gpu>-paired-<session>` read it; each side's
cells are its own code's (fused-autotuned at its own pick). The records say what asv's files cannot: each cell's
status, kernels and telemetry, and the pairing (`paired`: the session, the card, the order the sides were called in,
both commits and the git trees of their fusedbench/ (equal in an A/A pair), the rounds and extra rounds, and
fused-autotuned's two picks where they differed), from which `alert`
judges the pair again by the GPU's side-by-side margins.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from fusedbench.catalog.deliberate import PAIRED_MARK
from fusedbench.catalog.formats import cell_from_json
from fusedbench.catalog.model import SIDES, Cell, CellKey
from fusedbench.catalog.suites import ASV_VERSIONS, BENCHMARK_MODULE, CEILINGS_MODULE
from fusedbench.errors import FusedbenchError
from fusedbench.measure.checkout import asv_results_dir
from fusedbench.measure.confirm import Measured
from fusedbench.measure.machine import register_asv_machine
from fusedbench.measure.records import GroupRecord, write_record
from fusedbench.measure.sampling import PROTOCOL

ORDER = (
    "lock-step: each cell's call on one side, then on the other; the baseline first in even rounds (from 0); a "
    "cell's extra rounds (from round `rounds` on) in a second preparation of its workload on both sides"
)


def paired_machines(machines: Mapping[str, str], started: datetime, results_dir: str) -> dict[str, str]:
    """Each side's machine in the session (`machines`: each side's own, the GPU's, or its stack's under `ab
    --stack`): that machine, the mark, the session's start and a random tag (sessions on the cards of one host start
    in the same second, and their results may meet in one folder later), none that exists."""
    while True:
        session = f"{PAIRED_MARK}{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"
        named = {side: f"{machine}{session}" for side, machine in machines.items()}
        if not any(os.path.exists(os.path.join(results_dir, name)) for name in named.values()):
            return named


def write_paired(
    repo: str,
    machines: Mapping[str, str],
    benchmarks: Mapping[str, dict],
    commits: Mapping[str, str],
    measured: Measured,
    *,
    started: datetime,
    rounds: int,
    environment: Mapping[str, Mapping],
    asked: str | None = None,
) -> None:
    """Each side's results and records under its machine (`machines`; one for both sides of two commits) in the
    checkout's results folder, asv's environment its side's Python; `environment`, what each side's records say it
    ran on; `asked`, the `--cells` that chose the cells where not every cell of the groups was asked for."""
    results_dir = asv_results_dir(repo)
    from asv import util
    from asv.environment import get_env_name
    from asv.results import Results

    code = {side: _code_tree(repo, commits[side]) for side in SIDES}
    for side in SIDES:
        commit, machine = commits[side], machines[side]
        util.write_json(os.path.join(results_dir, machine, "machine.json"), {"machine": machine}, api_version=1)
        python = measured.hellos[side].get("stack", {}).get("python") or sys.executable
        env_name = get_env_name("existing", python, {}, {})
        results = Results({"machine": machine, "python": python}, {}, commit, _commit_ms(repo, commit), python,
                          env_name, {})  # fmt: skip
        for name, cells in _by_benchmark(measured, side).items():
            # asv's start of the benchmark: now, once measured (a record is of the measurement that began before it)
            results.add_result(benchmarks[name], _asv_result(benchmarks[name], cells), record_samples=True)
        results.save(results_dir)
        for group, cells in _by_group(measured, side).items():
            record = GroupRecord(
                machine=machine,
                commit=commit,
                group=group,
                started=started.isoformat(),
                seconds=measured.seconds,
                sampling=PROTOCOL.sampling,
                dirty=False,
                environment=dict(environment[side])
                | {
                    "paired": _pairing(measured, commits, side, group, rounds, environment[side])
                    | {"code": code, "cells": asked, "machines": dict(machines)}
                },
                cells=tuple(_at(cell, machine, commit) for cell in cells),
            )
            write_record(results_dir, record)


def _pairing(measured: Measured, commits: Mapping[str, str], side: str, group: str, rounds: int,
             environment: Mapping) -> dict:  # fmt: skip
    """What a paired record says of the pairing (module docstring); the machine names the session."""
    return {
        "side": side,
        "baseline": commits["baseline"],
        "candidate": commits["candidate"],
        "card": (environment.get("gpu") or {}).get("uuid", ""),
        "order": ORDER,
        "rounds": rounds,
        "extra_rounds": {label: n for (of, label), n in measured.extra_rounds.items() if of == group},
        "check": measured.checked.get(side, {}),
        "picks": [pick.to_json() for pick in measured.picks if pick.group == group],
        "not_measured": list(measured.not_measured),
    }


def _at(cell: Cell, machine: str, commit: str) -> Cell:
    return replace(cell, key=cell.key.at(machine, commit))


def _by_group(measured: Measured, side: str) -> dict[str, list[Cell]]:
    found: dict[str, list[Cell]] = {}
    for cell, group in zip(measured.own_cells(side), measured.groups[side], strict=True):
        found.setdefault(group, []).append(cell)
    return found


def _ceiling_cells(measured: Measured, side: str) -> dict[str, list[Cell]]:
    """The side's ceilings as cells keyed as the ceilings' benchmarks are (dtype; 'copy')."""
    reply = measured.ceilings.get(side)
    if not reply:
        return {}
    gemm = [cell_from_json(entry) for entry in reply["gemm"].values()]
    copy = reply["copy"]
    key = CellKey("copy", "uint8", 0, 0, 0, "copy")
    copied = Cell.failed(key, copy["error"]) if isinstance(copy, dict) else Cell.measured(key, copy)
    return {f"{CEILINGS_MODULE}.GemmCeiling.time_gemm": gemm, f"{CEILINGS_MODULE}.CopyCeiling.time_copy": [copied]}


def _by_benchmark(measured: Measured, side: str) -> dict[str, list[Cell]]:
    found = {f"{BENCHMARK_MODULE}.{group}.time_cell": cells for group, cells in _by_group(measured, side).items()}
    return found | _ceiling_cells(measured, side)


def benchmark_names(groups: Sequence[str]) -> list[str]:
    """The asv benchmarks a paired run of these groups (by name) fills: each group's cells, and the ceilings."""
    names = [f"{BENCHMARK_MODULE}.{group}.time_cell" for group in groups]
    return names + [f"{CEILINGS_MODULE}.{name}" for name in ("GemmCeiling.time_gemm", "CopyCeiling.time_copy")]


def _asv_result(benchmark: Mapping, cells: list[Cell]):
    """asv's result of a benchmark: a value per combination of its parameters (None where the cell has no samples),
    its samples, one call each."""
    from asv.runner import BenchmarkResult

    by_params = {_params(benchmark, cell): cell for cell in cells}
    combos = [tuple(combo) for combo in itertools.product(*benchmark["params"])] if benchmark["params"] else [()]
    samples = [list(c.samples) if (c := by_params.get(combo)) is not None and c.samples else None for combo in combos]
    values = [sorted(s)[len(s) // 2] if s else None for s in samples]
    return BenchmarkResult(values, samples, [1 if s else None for s in samples], 0, "", None)


def _params(benchmark: Mapping, cell: Cell) -> tuple:
    """The cell's parameters as asv writes them (reprs, in the benchmark's order)."""
    key = cell.key
    if benchmark["name"].endswith("time_gemm"):
        return (repr(key.dtype),)
    if benchmark["name"].endswith("time_copy"):
        return ()
    return (repr(key.epilog), repr(key.shape), repr(key.provider))


def _code_tree(repo: str, commit: str) -> str:
    """The git tree of the commit's fusedbench/ (what its worker imports): equal on both sides of an A/A pair."""
    done = subprocess.run(["git", "-C", repo, "rev-parse", f"{commit}:fusedbench"], capture_output=True, text=True)
    return done.stdout.strip()


def _commit_ms(repo: str, commit: str) -> int:
    done = subprocess.run(["git", "-C", repo, "show", "-s", "--format=%ct", commit], capture_output=True, text=True)
    return int(done.stdout.strip() or 0) * 1000


def benchmark_entries(repo: str, machine: str, commit: str, names: list[str]) -> dict[str, dict]:
    """asv's description of each benchmark (its parameters and version) at the candidate's code: from the
    benchmarks.json asv keeps, discovered again by asv where that lacks one or holds another version. Asked before
    anything is measured: a run asv cannot keep is refused before its minutes are spent."""
    from asv.benchmarks import Benchmarks
    from asv.config import Config
    from asv.util import UserError

    config = Config.load(os.path.join(repo, "asv.conf.json"))

    def current() -> dict[str, dict] | None:
        try:
            known = Benchmarks.load(config)
        except UserError:  # no benchmarks.json yet, or one of another asv: discover
            return None
        found = {name: known[name] for name in names if name in known}
        fits = len(found) == len(names) and all(
            found[name]["version"] == ASV_VERSIONS[name.split(".")[1]] for name in names
        )
        return found if fits else None

    found = current()
    if found is None:
        register_asv_machine(machine, cwd=repo)
        command = [sys.executable, "-m", "asv", "run", "--bench", "just-discover", "--environment",
                   f"existing:{sys.executable}", "--set-commit-hash", commit, "--machine", machine]  # fmt: skip
        done = subprocess.run(command, cwd=repo, capture_output=True, text=True)
        found = current()
        if found is None:
            folder = os.path.join(asv_results_dir(repo), machine)  # asv's run made it, its machine.json alone
            if os.path.isdir(folder) and os.listdir(folder) == ["machine.json"]:
                shutil.rmtree(folder)
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [str(done.returncode)]
            raise FusedbenchError(f"asv could not describe the benchmarks of {commit[:8]} ({tail[0]})")
    return found
