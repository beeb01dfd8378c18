"""Measuring flagged cells again for `fusedbench alert --confirm`: the baseline's code and the candidate's side by
side in one session, or the candidate's alone where the baseline cannot be rebuilt.

Side by side is two worker processes (`measure.gpu.confirm_worker`), each importing fusedbench from its own source:
the candidate's from the checkout, the baseline's from a `git archive` of its commit (an editable install would
otherwise time the candidate twice; each worker says where its fusedbench comes from, and a mismatch is refused).
They are driven in lock-step: every call of one side is followed by the same cell's call on the other, the side
that goes first alternating by round, the cells of a workload in carryover-balanced orders, each call after the
protocol's lead-in. Round i of one side is then paired with round i of the other as closely as two processes on
one GPU allow, which is what takes the session's drift out of the comparison (duet benchmarking; asv's
`continuous`). The rounds become cells (`catalog.model.Cell`) of each side, compared as runs are.

fused-autotuned autotunes in each process with that process's code, and two processes of the same code may choose
algorithms 4-11% apart (docs/findings/2026-11-26-confirmation.md). Neither choice is erased: where the two picks
differ, each side also prepares the other's (pinned by its rank in cuBLASLt's heuristic list, checked by its
description), and both picks are timed on both sides. The cell is then compared with the pick held fixed (the
candidate's, on both sides: `Measured.cells`), and the pick itself by the candidate's against the base's, each timed
on both sides (`Measured.picks`); what each code would run on its own, its own pick, is `Measured.own_cells`.

Everything a plain run keeps comes with it: each side checks the cells it times against float64 first (a cell that
fails on one side is failed there and timed on the other alone), every call is read by the telemetry probe, each
cell's kernels are recorded after its timing, and the ceilings can be timed on each side. `more` asks for extra rounds
of chosen cells once a workload's rounds are in (`paired.ab` gives them to cells that moved or lie near their margin),
in the same lock-step, in a second preparation of the workload on every side (`_LockStep._prepare_again`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import select
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fusedbench.catalog.model import Cell, Pick, Request, Status
from fusedbench.catalog.providers import AUTOTUNED
from fusedbench.errors import FusedbenchError
from fusedbench.measure.gpu.confirm_worker import PROTOCOL
from fusedbench.measure.sampling import carryover_balanced_orders

WORKER = "fusedbench.measure.gpu.confirm_worker"
WORKER_PATH = "fusedbench/measure/gpu/confirm_worker.py"
REPLY_TIMEOUT_S = 600  # a workload's preparation (operands, plans, warm-up) on the largest shapes takes seconds


class ConfirmError(FusedbenchError):
    """A confirmation that cannot be measured: the line says which side and why."""


@dataclass(frozen=True)
class Side:
    """One side of a confirmation: the folder its fusedbench is imported from, what its environment adds (the
    candidate of an injected run gets its injection back), and the Python it runs in (a stack's, `ab --stack`)."""

    name: str  # "baseline" or "candidate"
    source: str
    environment: Mapping[str, str] = field(default_factory=dict)
    python: str = sys.executable
    pins: Mapping[str, str] = field(default_factory=dict)  # the stack's packages its Python must import


@dataclass
class Measured:
    """What a side-by-side measurement measured: each side's cells (fused-autotuned at the candidate's pick on both),
    the picks where the sides' autotuning differed, each side's hello and check, what could not be measured, extra
    rounds given, the ceilings where asked, its cost."""

    cells: dict[str, list[Cell]]  # side name -> cells (request order, providers in request order)
    groups: dict[str, list[str]]  # side name -> the group each of its cells was requested in (a key may be in two)
    hellos: dict[str, dict]
    not_measured: list[str]  # a line per workload or cell left out, and why
    seconds: float  # wall time, the workers' start included
    calls: int  # timed calls, every side
    picks: list[Pick] = field(default_factory=list)
    checked: dict[str, dict] = field(default_factory=dict)  # side name -> the check's {"checked", "failures"}
    extra_rounds: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, cell label) -> rounds added
    ceilings: dict[str, dict] = field(default_factory=dict)  # side name -> the worker's ceilings reply
    own_picks: dict[tuple[str, str], dict] = field(default_factory=dict)  # the base's own pick's kernels, telemetry

    def own_cells(self, side: str) -> list[Cell]:
        """`side`'s cells as its own code runs them: fused-autotuned at its own pick (the base's with that pick's
        kernels and telemetry)."""
        own = {(p.key.label, p.group): p.samples[side][side] for p in self.picks}
        cells = []
        for cell, group in zip(self.cells[side], self.groups[side], strict=True):
            where = (cell.key.label, group)
            if where in own:
                kept = self.own_picks.get(where, {}) if side == "baseline" else {}
                cell = replace(cell, samples=tuple(own[where]), **kept)
            cells.append(cell)
        return cells


def export_source(repo: str, commit: str, into: str) -> str:
    """The fusedbench package of `commit` from the repository at `repo`, written under `into` (returned): the
    baseline's side of a confirmation. A commit without the worker predates confirmation: ConfirmError."""
    os.makedirs(into, exist_ok=True)
    archive = os.path.join(into, "source.tar")
    with open(archive, "wb") as stream:
        done = subprocess.run(
            ["git", "-C", repo, "archive", "--format=tar", commit, "fusedbench"], stdout=stream, stderr=subprocess.PIPE
        )
    if done.returncode != 0:
        raise ConfirmError(f"git archive of the baseline {commit[:8]} failed: {done.stderr.decode().strip()}")
    root = os.path.join(into, "baseline")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    worker = os.path.join(root, WORKER_PATH)
    if not os.path.exists(worker):
        raise ConfirmError(f"the baseline {commit[:8]} predates the confirmation entry point ({WORKER_PATH})")
    with open(worker, encoding="utf-8") as stream:
        spoken = re.search(r"^PROTOCOL = (\d+)", stream.read(), re.MULTILINE)
    if spoken is None or int(spoken.group(1)) != PROTOCOL:
        raise ConfirmError(
            f"the baseline {commit[:8]}'s confirmation entry point speaks protocol "
            f"{spoken.group(1) if spoken else '(none)'}, this one {PROTOCOL}: the sides cannot be driven together"
        )
    return root


class Worker:
    """One side's worker process: a request out, a reply back. Started, then greeted (`greet`), so that the sides
    start together (importing the GPU stack takes seconds)."""

    entry = ("-m", WORKER)  # what the side's Python runs

    def __init__(self, side: Side, log_dir: str):
        environment = dict(os.environ) | dict(side.environment)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, (side.source, environment.get("PYTHONPATH"))))
        self.side = side
        self._log = open(os.path.join(log_dir, f"{side.name}.log"), "w+")  # noqa: SIM115 (closed in close())
        self._process = subprocess.Popen(
            [side.python, *self.entry],
            cwd=side.source,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.hello: dict = {}

    def greet(self) -> None:
        """Read the worker's hello: refused where it cannot measure, speaks another protocol or imported fusedbench
        from anywhere but its side's source."""
        side, reply = self.side, self._read()
        if "hello" not in reply:
            raise ConfirmError(f"the {side.name} side cannot measure: {reply.get('error', reply)}")
        self.hello = reply["hello"]
        if self.hello.get("protocol") != PROTOCOL:
            raise ConfirmError(f"the {side.name} side speaks protocol {self.hello.get('protocol')}, not {PROTOCOL}")
        if os.path.realpath(self.hello["fusedbench"]) != os.path.realpath(side.source):
            raise ConfirmError(
                f"the {side.name} side imported fusedbench from {self.hello['fusedbench']}, not from its source "
                f"{side.source}: it would time other code"
            )
        found = (self.hello.get("stack") or {}).get("packages", {})
        wrong = [f"{p} {v} (it imports {found.get(p) or 'none'})" for p, v in side.pins.items() if found.get(p) != v]
        if wrong:
            raise ConfirmError(
                f"the {side.name} side's Python ({side.python}) does not run its stack's pins: {'; '.join(wrong)}; "
                "a PYTHONPATH puts other packages first, or the environment is older than its lock file: clear "
                "PYTHONPATH of them, or run `fusedbench stack create` again"
            )

    def _read(self) -> dict:
        """The worker's next reply; ConfirmError where it exits, or gives none in REPLY_TIMEOUT_S (a hung side would
        hold the other and the run forever)."""
        answered, _, _ = select.select([self._process.stdout], [], [], REPLY_TIMEOUT_S)
        if not answered:
            self._process.kill()
            raise ConfirmError(f"the {self.side.name} side's worker gave no reply in {REPLY_TIMEOUT_S} s: stopped")
        line = self._process.stdout.readline()
        if not line:
            self._process.wait(timeout=REPLY_TIMEOUT_S)
            self._log.seek(0)
            tail = " | ".join(self._log.read().strip().splitlines()[-3:])
            raise ConfirmError(f"the {self.side.name} side's worker exited ({self._process.returncode}): {tail}")
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._process.stdin.write(json.dumps({"quit": True}) + "\n")
                self._process.stdin.flush()
            except OSError:
                pass
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for stream in (self._process.stdin, self._process.stdout, self._log):
            with contextlib.suppress(OSError):
                stream.close()


@dataclass(frozen=True)
class Asked:
    """What a side-by-side measurement does besides timing: the check's cells (epilogs, dtypes, providers; None: no
    check), the ceilings' dtypes (none: no ceilings), and `more(request, samples)`, the extra rounds a side each cell
    of a workload gets once its rounds are in (samples: side -> provider -> samples)."""

    check: Mapping[str, Sequence[str]] | None = None
    ceilings: Sequence[str] = ()
    more: Callable[[Request, dict], dict[str, int]] | None = None


def measure_again(
    requests: Sequence[Request], sides: Sequence[Side], rounds: int, *, seed: int = 0, asked: Asked = Asked()
) -> Measured:
    """Each request's providers timed `rounds` times on every side, in lock-step (module docstring)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fusedbench-confirm-") as logs:
        workers: list[Worker] = []
        try:
            for side in sides:
                workers.append(Worker(side, logs))
            for worker in workers:
                worker.greet()
            refuse_mismatch(workers)
            checked = {w.side.name: _checked(w, asked.check) for w in workers} if asked.check is not None else {}
            lock_step = _LockStep(workers, seed, checked, asked.more)
            for index, request in enumerate(requests):
                lock_step.measure(index, request, rounds)
            ceilings = {w.side.name: _ask(w, {"ceilings": list(asked.ceilings)}) for w in workers if asked.ceilings}
        finally:
            for worker in workers:
                worker.close()
    samples = lock_step.samples
    cells = {w.side.name: [cell for cell, _ in samples[w.side.name]] for w in workers}
    groups = {w.side.name: [group for _, group in samples[w.side.name]] for w in workers}
    hellos = {w.side.name: w.hello for w in workers}
    return Measured(
        cells,
        groups,
        hellos,
        lock_step.not_measured,
        time.perf_counter() - started,
        lock_step.calls,
        lock_step.picks,
        checked,
        lock_step.extra,
        ceilings,
        lock_step.own_picks,
    )


def _ask(worker: Worker, request: dict) -> dict:
    """A request every side must answer: its error is the measurement's (ConfirmError naming the side)."""
    reply = worker.ask(request)
    if "error" in reply:
        raise ConfirmError(f"the {worker.side.name} side could not answer {next(iter(request))}: {reply['error']}")
    return reply


def _checked(worker: Worker, check: Mapping[str, Sequence[str]]) -> dict:
    reply = _ask(worker, {"check": {name: list(values) for name, values in check.items()}})
    return {"checked": reply["checked"], "failures": reply["failures"]}


def refuse_mismatch(workers: Sequence[Worker]) -> None:
    """Side by side only on one GPU, and in one environment on the same libraries (sides in two stacks' environments
    differ in them on purpose: `ab --stack` names the difference)."""
    one_environment = len({w.side.python for w in workers}) == 1
    for what in ("device", "versions") if one_environment else ("device",):
        seen = {json.dumps(w.hello[what], sort_keys=True) for w in workers}
        if len(seen) > 1:
            raise ConfirmError(f"the sides differ in {what}: {' vs '.join(sorted(seen))}; they cannot be compared")


class _LockStep:
    """The workloads measured in lock-step, one after another: what each side's calls gave, and what was left out."""

    def __init__(self, workers: Sequence[Worker], seed: int, checked: dict, more):
        self.workers, self.seed, self.more = list(workers), seed, more
        self.failed_check = {
            name: {(f["epilog"], f["dtype"], f["provider"]): f["reason"] for f in found["failures"]}
            for name, found in checked.items()
        }
        self.samples: dict[str, list[tuple[Cell, str]]] = {w.side.name: [] for w in workers}
        self.not_measured: list[str] = []
        self.picks: list[Pick] = []
        self.own_picks: dict[
            tuple[str, str], dict
        ] = {}  # (cell label, group) -> the base's own pick's kernels, telemetry
        self.extra: dict[tuple[str, str], int] = {}  # (group, cell label) -> extra rounds a side
        self.calls = 0

    def measure(self, index: int, request: Request, rounds: int) -> None:
        versions = {w.hello["benchmark_versions"].get(request.group) for w in self.workers}
        if len(versions) > 1:
            self.not_measured.append(f"{request.group}: its benchmark version differs between the sides")
            return
        ready = self._prepare(request)
        slots, absent = self._slots(request, ready)
        found = {w.side.name: {slot: [] for slot in slots} for w in self.workers}
        failed: dict[str, str] = {}  # a call that raised leaves its slot unmeasured on both sides, not the others
        places = [slot for slot in slots if any(slots[slot].values())]
        random.Random(self.seed + index).shuffle(places)
        self._rounds(request, slots, places, range(rounds), found, failed)
        extra = self.more(request, found) if self.more is not None else {}
        extra = {slot: n for slot, n in extra.items() if n > 0 and slot in places and slot not in failed}
        kept = self._finish(slots)
        if extra and self._prepare_again(request, slots, extra, ready):
            more_places = [slot for slot in places if slot in extra]
            self._rounds(request, slots, more_places, range(rounds, rounds + max(extra.values())), found, failed, extra)
            self.extra |= {(request.group, request.key(slot).label): n for slot, n in extra.items()
                           if slot in request.providers and slot not in failed}  # fmt: skip
            kept = _joined(kept, self._finish(slots))
        self.not_measured += list(failed.values())
        self._collect(request, slots, absent, found, failed, kept)

    def _prepare(self, request: Request) -> dict[str, dict]:
        """Each side's workload prepared with its own code (fused-autotuned autotuned by each): per side, the
        providers it has ready, why each other is not ("status: reason"), and the algorithms it will time. A side that
        cannot prepare the workload at all has none ready, each failed with its error."""
        ready: dict[str, dict] = {}
        for worker in self.workers:
            reply = worker.ask({"prepare": request.to_json()})
            if "error" in reply:
                self.not_measured.append(f"{_label(request)} on the {worker.side.name} side: {reply['error']}")
                reply = {"ready": [], "algorithms": {},
                         "not_ready": {p: f"failed: {reply['error']}" for p in request.providers}}  # fmt: skip
            ready[worker.side.name] = {k: reply[k] for k in ("ready", "not_ready", "algorithms")}
        return ready

    def _slots(self, request: Request, ready: dict) -> tuple[dict[str, dict[str, str | None]], dict]:
        """What is timed: slot -> side -> the side's name for it (None: not timed on that side), and why each cell not
        timed on a side is not ((slot, side) -> "status: reason": refused or skipped there, not prepared, or failed
        the check), as a plain run keeps such a cell. A provider is a slot where any side times it; where the sides'
        autotuning chose different algorithms, fused-autotuned's slot times the candidate's pick on both sides, and
        `AUTOTUNED@baseline` the base's (each side pinned to the other's pick)."""
        names = [w.side.name for w in self.workers]
        slots: dict[str, dict[str, str | None]] = {}
        absent: dict[tuple[str, str], str] = {}
        for provider in request.providers:
            for name in names:
                check = self.failed_check.get(name, {}).get((request.epilog, request.dtype, provider))
                if provider not in ready[name]["ready"]:
                    absent[(provider, name)] = ready[name]["not_ready"].get(provider, "failed: not prepared")
                elif check is not None:
                    absent[(provider, name)] = f"failed: failed the check against float64 on the {name} side: {check}"
            slots[provider] = {n: (None if (provider, n) in absent else provider) for n in names}
        picks = {n: ready[n]["algorithms"].get(AUTOTUNED) for n in names}
        both = len(names) == 2 and AUTOTUNED in slots and None not in slots[AUTOTUNED].values()
        if both and len({p["algorithm"] for p in picks.values()}) > 1 and self._pin_picks(request, picks):
            slots[AUTOTUNED] = {"baseline": f"{AUTOTUNED}@candidate", "candidate": AUTOTUNED}
            slots[f"{AUTOTUNED}@baseline"] = {"baseline": AUTOTUNED, "candidate": f"{AUTOTUNED}@baseline"}
        return slots, absent

    def _prepare_again(self, request: Request, slots: dict, extra: dict, first: dict) -> bool:
        """The workload prepared afresh on every side for the extra rounds of the `extra` slots: new operands, plans
        and warm-up, each side's autotuned pick held to the one its first preparation made, the other side's pinned
        again. One preparation of one process can time a cell a few per cent off for as long as it lives (two
        processes of one code, each its own preparation, 2.5-3.7% apart on one H200's GEMM cells, in both
        directions), so a cell that moved is judged over two preparations of each side, the second's rounds the
        more. False (said) where a side cannot prepare it again as it first did: the cell keeps its first rounds."""
        providers = tuple(dict.fromkeys(slot.split("@")[0] for slot in extra))
        again = Request(request.group, request.epilog, request.dtype, request.m, request.k, request.n, providers)
        picks = {n: found["algorithms"].get(AUTOTUNED) for n, found in first.items()}
        for worker in self.workers:
            name = worker.side.name
            reply = worker.ask({"prepare": again.to_json()})
            missing = [slots[slot][name] for slot in extra if slots[slot][name] is not None
                       and slots[slot][name].split("@")[0] not in reply.get("ready", [])]  # fmt: skip
            if "error" in reply or missing:
                why = reply.get("error") or f"{', '.join(missing)} not ready"
                self.not_measured.append(f"{_label(request)}: not prepared again on the {name} side ({why}): its "
                                         "cells that moved keep their first rounds")  # fmt: skip
                return False
            own, first_own = reply["algorithms"].get(AUTOTUNED), picks[name]
            held = [(AUTOTUNED, first_own)] if own and first_own and own["algorithm"] != first_own["algorithm"] else []
            held += [(timed, picks[timed.split("@")[1]]) for timed in (slots[slot][name] for slot in extra)
                     if timed is not None and "@" in timed]  # fmt: skip
            for pinned, pick in held:
                answer = worker.ask({"pin": {"name": pinned, "provider": AUTOTUNED, "rank": pick["rank"]}})
                if answer.get("algorithm", {}).get("algorithm") != pick["algorithm"]:
                    self.not_measured.append(f"{request.key(AUTOTUNED).label}: its pick (rank {pick['rank']}: "
                                             f"{pick['algorithm']}) not prepared again on the {name} side: its "
                                             "cells that moved keep their first rounds")  # fmt: skip
                    return False
        return True

    def _pin_picks(self, request: Request, picks: dict) -> bool:
        """Each side prepares the other's pick; False (said) where a side cannot time it as the other chose it."""
        for worker in self.workers:
            other = "baseline" if worker.side.name == "candidate" else "candidate"
            pin = {"name": f"{AUTOTUNED}@{other}", "provider": AUTOTUNED, "rank": picks[other]["rank"]}
            reply = worker.ask({"pin": pin})
            if reply.get("algorithm", {}).get("algorithm") != picks[other]["algorithm"]:
                self.not_measured.append(
                    f"{request.key(AUTOTUNED).label}: the {other}'s pick (rank {picks[other]['rank']}: "
                    f"{picks[other]['algorithm']}) cannot be timed on the {worker.side.name} side "
                    f"({reply.get('error') or reply.get('algorithm')}): the picks are not compared"
                )
                return False
        return True

    def _rounds(self, request, slots, places, round_range, found, failed, only=None) -> None:
        """Rounds of the `places` slots in lock-step: a call on one side, then the same slot's on the other, the
        side that goes first alternating by round, the slots in carryover-balanced orders (`only`: slot -> the
        rounds it takes part in, counted from the range's start)."""
        orders = carryover_balanced_orders(len(places))
        for count, round_index in enumerate(round_range):
            turn = self.workers if round_index % 2 == 0 else self.workers[::-1]
            for slot in (places[item] for item in orders[round_index % len(orders)]):
                if slot in failed or (only is not None and count >= only[slot]):
                    continue
                for worker in turn:
                    name = slots[slot][worker.side.name]
                    if name is None:
                        continue
                    reply = worker.ask({"time": name})
                    self.calls += 1
                    if "error" in reply:
                        failed[slot] = f"{request.key(slot).label} on the {worker.side.name} side: " + (
                            f"failed in round {round_index + 1}: {reply['error']}"
                        )
                        break
                    found[worker.side.name][slot].append(reply["seconds"])

    def _finish(self, slots) -> dict[str, dict]:
        """Each side's telemetry and kernels of every name it timed (side -> name -> {"telemetry", "provenance"})."""
        kept: dict[str, dict] = {}
        for worker in self.workers:
            if not any(names[worker.side.name] for names in slots.values()):
                continue  # it timed nothing of this workload
            reply = worker.ask({"finish": True})
            kept[worker.side.name] = reply.get("cells", {})
            if "error" in reply:
                self.not_measured.append(f"telemetry and kernels on the {worker.side.name} side: {reply['error']}")
        return kept

    def _collect(self, request, slots, absent, found, failed, kept) -> None:
        for side in found:
            for slot, names in slots.items():
                if slot not in request.providers or slot in failed:
                    continue
                key = request.key(slot)
                if names[side] is None:
                    cell = _cell_of(key, absent[(slot, side)])
                else:
                    extra = kept.get(side, {}).get(names[side], {})
                    cell = replace(
                        Cell.measured(key, found[side][slot]),
                        provenance=extra.get("provenance", {}),
                        telemetry=extra.get("telemetry", {}),
                    )
                self.samples[side].append((cell, request.group))
        base_pick = f"{AUTOTUNED}@baseline"
        if base_pick in failed and AUTOTUNED not in failed:
            self.not_measured.append(
                f"{request.key(AUTOTUNED).label}: the base's pick could not be timed, so the picks are not compared "
                "and the base's side keeps the candidate's pick"
            )
        if base_pick in slots and base_pick not in failed and AUTOTUNED not in failed:
            own = kept["baseline"].get(AUTOTUNED, {})  # the base's own pick, on its own side
            algorithms = {
                side: kept[side].get(AUTOTUNED, {}).get("provenance", {}).get("algorithm", "") for side in found
            }
            by_pick = {"baseline": base_pick, "candidate": AUTOTUNED}
            samples = {pick: {side: list(found[side][slot]) for side in found} for pick, slot in by_pick.items()}
            self.picks.append(Pick(request.key(AUTOTUNED), request.group, algorithms, samples))
            self.own_picks[(request.key(AUTOTUNED).label, request.group)] = {
                "provenance": own.get("provenance", {}), "telemetry": own.get("telemetry", {})}  # fmt: skip


def _joined(first: dict, again: dict) -> dict:
    """Telemetry and kernels over both preparations of a workload: each name's series (one value per call, in its
    samples' order) run on from the first's into the second's; the kernels the first's."""
    joined = {side: dict(names) for side, names in first.items()}
    for side, names in again.items():
        for name, second in names.items():
            before = joined.setdefault(side, {}).get(name)
            if before is None:
                joined[side][name] = second
                continue
            series = before.get("telemetry", {})
            telemetry = {k: list(series.get(k, [])) + list(second.get("telemetry", {}).get(k, []))
                         for k in dict.fromkeys([*series, *second.get("telemetry", {})])}  # fmt: skip
            joined[side][name] = before | {"telemetry": telemetry}
    return joined


def _cell_of(key, why: str) -> Cell:
    """The cell of a provider a side did not time, from why ("status: reason", as the worker says it)."""
    status, _, reason = why.partition(": ")
    known = {s.value: s for s in Status}
    return Cell(key, known[status], reason) if status in known and status != Status.OK.value else Cell.failed(key, why)


def _label(request: Request) -> str:
    return f"{request.epilog}/{request.dtype}/{request.key('').shape} ({request.group})"
