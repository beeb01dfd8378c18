"""`fusedbench ab`: every cell of a suite measured with the base's code beside the candidate's, in lock-step on one
GPU, and judged side by side.

The gate compares a candidate with a baseline timed in another session, often on another card, so its first look
must stay above what sessions and cards move (a few per cent a group) and one cell's 5% needs a second look. Here
both codes are measured in one session on one card (`measure.confirm`: two workers, each importing its own
fusedbench, a call of one side then the same cell's call on the other, the side that goes first alternating by
round, each call after the protocol's lead-in), so a change is told from the card's own noise only. Both sides are
kept as a paired run (`paired.results`) and judged as `alert` judges one (`regressions.gate`): each group by its
GPU's confirmation margins (its paired A/A sessions' where it has them), a group without margins of its own compared,
shown and not judged.

Two commits run on one stack: the base's dependencies (pyproject.toml) and the libraries its worker imports must be
the candidate's. A library upgrade is measured as two stacks instead (`ab --stack A --stack B`, `catalog.stacks`):
the checkout's code on both sides, each side's worker started by its stack's Python, each side kept under its
stack's machine of the session (`<gpu>-stack-A-paired-<session>`, `<gpu>-stack-B-paired-<session>`), and the verdict
names what differs between them (`stack_differences`).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from fusedbench.catalog.deliberate import gpu_machine
from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.model import SIDES, Request
from fusedbench.catalog.stacks import Stack
from fusedbench.catalog.suites import MLP_GROUPS, BenchmarkGroup
from fusedbench.errors import FusedbenchError
from fusedbench.measure.checkout import require_clean_checkout
from fusedbench.measure.confirm import Asked, Measured, Side, export_source, measure_again
from fusedbench.measure.sampling import SAMPLES
from fusedbench.regressions.margins import requests_for
from fusedbench.regressions.metrics import TIME
from fusedbench.regressions.thresholds import cell_class, margins_for

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (Python 3.10)
    import tomli as tomllib


@dataclass(frozen=True)
class Pair:
    """What `ab` measures: the base's commit and the candidate's (the clean checkout's); or, under `ab --stack A
    --stack B`, the checkout's code in stack A's environment (the base) and in stack B's."""

    base: str
    candidate: str
    stacks: tuple[Stack, Stack] | None = None
    pythons: tuple[str, str] = (sys.executable, sys.executable)
    candidate_checkout: bool = True  # the candidate's code the checkout's; else exported from its commit (bisect)

    def sides(self, sources: tuple[str, str]) -> list[Side]:
        """The two sides' workers: each side's fusedbench source, each stack's Python."""
        pins = [dict(s.packages) for s in self.stacks] if self.stacks else [{}, {}]
        return [Side(name, source, python=python, pins=pinned)
                for name, source, python, pinned in zip(SIDES, sources, self.pythons, pins, strict=True)]  # fmt: skip

    def machines(self, gpu: str) -> dict[str, str]:
        """Each side's own machine, before the session's mark: the GPU's, or each stack's."""
        if self.stacks is None:
            return dict.fromkeys(SIDES, gpu)
        bare = gpu_machine(gpu)  # the GPU's, where ab itself runs in a stack's environment
        return {side: stack.machine(bare) for side, stack in zip(SIDES, self.stacks, strict=True)}


def resolve_stacks(repo: str, names: Sequence[str]) -> Pair:
    """The clean checkout's code in two stacks' environments, the first the base (FusedbenchError naming what is
    wrong: not two stacks, one named twice, an unknown stack or one whose environment was not made)."""
    from fusedbench.catalog.stacks import read_stack
    from fusedbench.measure.stacks import stack_python

    if len(names) != 2 or names[0] == names[1]:
        raise FusedbenchError(
            f"--stack names two stacks, the base's, then the candidate's (got {', '.join(names) or 'none'}): "
            "e.g. ab --stack pinned --stack newest"
        )
    commit = require_clean_checkout(repo).commit
    stacks = tuple(read_stack(repo, name) for name in names)
    return Pair(commit, commit, stacks, tuple(stack_python(repo, stack) for stack in stacks))


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


# the tests' and linters' tools, and the change-point library: nothing measured imports them
UNMEASURED_EXTRAS = ("dev", "changes")


def dependency_changes(repo: str, base: str, candidate: str) -> list[str]:
    """What differs between the two commits' declared dependencies (pyproject.toml's, extras included but
    UNMEASURED_EXTRAS)."""
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
    extras = {name: packages for name, packages in project.get("optional-dependencies", {}).items()
              if name not in UNMEASURED_EXTRAS}  # fmt: skip
    found = {"(required)": ", ".join(sorted(project.get("dependencies", [])))}
    return found | {f"[{extra}]": ", ".join(sorted(packages)) for extra, packages in extras.items()}


def cell_groups(groups: Sequence) -> list[BenchmarkGroup]:
    """The epilog-cell groups `ab` measures; the mlp suite's training steps are not measured side by side."""
    chosen = [g for g in groups if g.name not in MLP_GROUPS]
    if not chosen:
        raise FusedbenchError("ab measures epilog cells side by side; the mlp suite's training steps it does not")
    return chosen


def chosen_requests(groups: Sequence[BenchmarkGroup], cells: str | None) -> list[Request]:
    """The groups' workloads, each with the providers whose cell label (EPILOG/dtype/shape/provider, as `history
    --cell` takes it) the regular expression `cells` finds (all without one): a few cells of a large group measured
    many rounds, such as the true size of what a change slowed, cost minutes where the group would cost an hour."""
    requests = requests_for(groups)
    if cells is None:
        return requests
    try:
        pattern = re.compile(cells)
    except re.error as exc:
        raise FusedbenchError(
            f"--cells {cells!r} is not a regular expression ({exc}); e.g. --cells 'RELU_BIAS/.*/fused$'"
        ) from None
    chosen = []
    for request in requests:
        providers = tuple(p for p in request.providers if pattern.search(request.key(p).label))
        if providers:
            chosen.append(Request(request.group, request.epilog, request.dtype, request.m, request.k, request.n,
                                  providers))  # fmt: skip
    if not chosen:
        example = requests[0].key(requests[0].providers[0]).label
        raise FusedbenchError(
            f"no cell of the chosen groups matches --cells {cells!r}; cells are written EPILOG/dtype/shape/provider, "
            f"e.g. {example}"
        )
    return chosen


def measure_and_keep(repo: str, pair: Pair, requests: Sequence[Request], rounds: int, gpu: str, asked: str | None):
    """Measure the pair's cells (`measure_pair`) with the GPU's state sampled throughout, and keep it as a paired run
    (`asked`: the --cells that chose them, if any): (each side's machine, what was measured)."""
    from datetime import datetime, timezone

    from fusedbench.measure.checkout import asv_results_dir
    from fusedbench.measure.telemetry import optional_sampler
    from fusedbench.paired.results import benchmark_entries, benchmark_names, paired_machines, write_paired

    started = datetime.now(timezone.utc)
    machines = paired_machines(pair.machines(gpu), started, asv_results_dir(repo))
    benchmarks = benchmark_entries(
        repo, machines["candidate"], pair.candidate, benchmark_names(list(dict.fromkeys(r.group for r in requests)))
    )
    with optional_sampler() as telemetry:
        measured = measure_pair(repo, pair, requests, rounds, machines["candidate"], asked)
        gpu_facts = telemetry.device_facts() if telemetry is not None else {}
    shared = {"gpu": gpu_facts, "telemetry": telemetry.summary.to_json()} if telemetry is not None else {}
    environment = {side: {k: hello[k] for k in ("versions", "stack") if k in hello} | shared
                   for side, hello in measured.hellos.items()}  # fmt: skip
    commits = {"baseline": pair.base, "candidate": pair.candidate}
    write_paired(
        repo,
        machines,
        benchmarks,
        commits,
        measured,
        started=started,
        rounds=rounds,
        environment=environment,
        asked=asked,
    )
    return machines, measured


def measure_pair(
    repo: str, pair: Pair, requests: Sequence[Request], rounds: int, machine: str, cells: str | None = None
) -> Measured:
    """The cells asked for (by the --cells regex `cells`, if any), the base's code (a `git archive` of its commit)
    beside the checkout's, as a plain run measures them: each side's check of their epilogs, dtypes and providers
    first, the ceilings last, and extra rounds for cells near the margin they will be judged by."""
    check = {
        "epilogs": sorted({r.epilog for r in requests}),
        "dtypes": sorted({r.dtype for r in requests}),
        "providers": sorted({p for r in requests for p in r.providers}),
    }
    # the ceilings of every dtype, as a plain run times them: asv's GemmCeiling takes them all
    asked = Asked(check=check, ceilings=list(DTYPES), more=NearMargin(machine, rounds, cells or ""))
    with tempfile.TemporaryDirectory(prefix="fusedbench-ab-") as scratch:

        def source(commit: str, checkout: bool) -> str:
            return repo if checkout else export_source(repo, commit, os.path.join(scratch, commit))

        stacks = pair.stacks is not None
        sources = (source(pair.base, stacks), source(pair.candidate, stacks or pair.candidate_checkout))
        return measure_again(list(requests), pair.sides(sources), rounds, asked=asked)


@dataclass(frozen=True)
class NearMargin:
    """Extra rounds, in a fresh preparation of the workload on both sides (`measure.confirm`), for every cell that
    moved: whose change lies beyond 1% either way, or within 1.5x its margin (from margin / 1.5 slower on).

    Near the margin the plain run's 10 rounds leave the interval as wide as the distance to it, so the verdict could
    go either way; such a cell is taken to NEAR_ROUNDS a side (30: three times a run's), which narrows its interval by
    about sqrt(3), 1.7x, past the band's 1.5x. Beyond it, and faster, a change can be one preparation's: a process
    can time a cell a few per cent off for as long as its preparation lives (9% on one H200's membound cell, 2.5-3.7%
    on another's GEMM cells, either way), the same code on both sides. The 20 rounds of the second preparation
    outnumber the first's 10, so a cell's median is the second's where the first alone was off, and stays off where
    the code is. Unchanged cells keep the rounds asked for, as does every cell of a run asked for NEAR_ROUNDS or
    more."""

    machine: str
    rounds: int
    cells: str = ""  # the session's --cells regex: its margins may be those its cells earned (`margins_for`)

    NEAR_ROUNDS = 3 * SAMPLES
    BAND = 1.5
    MOVED = 0.01

    def __call__(self, request: Request, samples: dict[str, dict[str, list[float]]]) -> dict[str, int]:
        from fusedbench.catalog.suites import ASV_VERSIONS

        margins = margins_for(self.machine, request.group, ASV_VERSIONS.get(request.group, ""), self.cells)
        extra = {}
        for provider in request.providers:
            base, cand = (samples[side].get(provider) for side in ("baseline", "candidate"))
            if not base or not cand:
                continue
            change = statistics.median(cand) / statistics.median(base) - 1
            margin = margins.threshold(TIME, cell_class(statistics.median(base)))
            if abs(change) >= self.MOVED or change >= margin / self.BAND:
                extra[provider] = max(0, self.NEAR_ROUNDS - self.rounds)
        return extra


def stack_differences(hellos: dict[str, dict]) -> list[str]:
    """What differs between the two sides' stacks, as their workers found it: each library version (the imported
    packages' and pins', cuBLASLt's, the CUDA runtime's; a package one stack pins and the other leaves to its
    environment "(not pinned)") and each GPU library file loaded ('name: base -> candidate')."""
    base, cand = (hellos[side] for side in SIDES)
    lines = []
    pins = [(hello.get("stack") or {}).get("packages", {}) for hello in (base, cand)]
    versions = [hello.get("versions", {}) | pinned for hello, pinned in zip((base, cand), pins, strict=True)]
    for name in sorted(set(versions[0]) | set(versions[1])):
        said = [found.get(name) or ("(not pinned)" if any(name in p for p in pins) else "none") for found in versions]
        if said[0] != said[1]:
            lines.append(f"{name}: {said[0]} -> {said[1]}")
    files = [(hello.get("stack") or {}).get("libraries", {}) for hello in (base, cand)]
    for name in sorted(set(files[0]) | set(files[1])):
        where = [f.get(name, {}).get("path", "not loaded") for f in files]
        if where[0] != where[1]:
            lines.append(f"{name}: {where[0]} -> {where[1]}")
    return lines
