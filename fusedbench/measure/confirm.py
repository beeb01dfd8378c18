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

fused-autotuned autotunes in each process, and two processes of the same code may choose algorithms 4-11% apart
(docs/findings/2026-11-26-confirmation.md), which no margin that catches 5% survives. So the candidate's side
prepares each workload first, and the other sides time the algorithm its autotune chose (by its rank in cuBLASLt's
heuristic list, checked by its description): the comparison is of everything but the choice, which the first look
still sees.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fusedbench.catalog.model import Cell, Request
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
    """One side of a confirmation: the folder its fusedbench is imported from, and what its environment adds (the
    candidate of an injected run gets its injection back)."""

    name: str  # "baseline" or "candidate"
    source: str
    environment: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Measured:
    """What a confirmation measured: each side's cells, each side's hello, what could not be measured, its cost."""

    cells: dict[str, list[Cell]]  # side name -> cells (request order, providers in request order)
    groups: dict[str, list[str]]  # side name -> the group each of its cells was requested in (a key may be in two)
    hellos: dict[str, dict]
    not_measured: list[str]  # a line per workload or cell left out, and why
    seconds: float  # wall time, the workers' start included
    calls: int  # timed calls, every side
    pinned: dict[str, str] = field(default_factory=dict)  # cell label -> the candidate's algorithm every side timed


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

    command = (sys.executable, "-m", WORKER)

    def __init__(self, side: Side, log_dir: str):
        environment = dict(os.environ) | dict(side.environment)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, (side.source, environment.get("PYTHONPATH"))))
        self.side = side
        self._log = open(os.path.join(log_dir, f"{side.name}.log"), "w+")  # noqa: SIM115 (closed in close())
        self._process = subprocess.Popen(
            list(self.command),
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

    def _read(self) -> dict:
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


def measure_again(requests: Sequence[Request], sides: Sequence[Side], rounds: int, *, seed: int = 0) -> Measured:
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
            samples, not_measured, calls, pinned = _lock_step(workers, requests, rounds, seed)
        finally:
            for worker in workers:
                worker.close()
    cells = {w.side.name: [Cell.measured(key, found) for key, found, _ in samples[w.side.name]] for w in workers}
    groups = {w.side.name: [group for _, _, group in samples[w.side.name]] for w in workers}
    hellos = {w.side.name: w.hello for w in workers}
    return Measured(cells, groups, hellos, not_measured, time.perf_counter() - started, calls, pinned)


def refuse_mismatch(workers: Sequence[Worker]) -> None:
    """Side by side only where both sides run on the same GPU and libraries."""
    for what in ("device", "versions"):
        seen = {json.dumps(w.hello[what], sort_keys=True) for w in workers}
        if len(seen) > 1:
            raise ConfirmError(f"the sides differ in {what}: {' vs '.join(sorted(seen))}; they cannot be compared")


def _lock_step(workers, requests, rounds, seed):
    samples: dict[str, list] = {w.side.name: [] for w in workers}
    not_measured, calls, pinned = [], 0, {}
    for index, request in enumerate(requests):
        versions = {w.hello["benchmark_versions"].get(request.group) for w in workers}
        if len(versions) > 1:
            not_measured.append(f"{request.group}: its benchmark version differs between the sides")
            continue
        ready, chosen = None, {}
        for worker in sorted(workers, key=lambda w: w.side.name != "candidate"):  # the candidate's autotune first
            pins = {p: found["rank"] for p, found in chosen.items() if p == AUTOTUNED}
            reply = worker.ask({"prepare": request.to_json() | ({"algorithms": pins} if pins else {})})
            if "error" in reply:
                not_measured.append(f"{_label(request)} on the {worker.side.name} side: {reply['error']}")
                ready = set()
                break
            not_measured += [f"{request.key(p).label} on the {worker.side.name} side: {why}" for p, why in
                             reply["not_ready"].items()]  # fmt: skip
            ready = set(reply["ready"]) if ready is None else ready & set(reply["ready"])
            timed = reply["algorithms"]
            for provider in pins:
                if provider in ready and timed.get(provider, {}).get("algorithm") != chosen[provider]["algorithm"]:
                    ready.discard(provider)
                    not_measured.append(
                        f"{request.key(provider).label} on the {worker.side.name} side: the candidate's algorithm "
                        f"(rank {pins[provider]}: {chosen[provider]['algorithm']}) is not in its plan "
                        f"(found {timed.get(provider, {}).get('algorithm')})"
                    )
            chosen = chosen or timed
        providers = [p for p in request.providers if p in (ready or set())]
        if len(workers) > 1:
            pinned |= {request.key(p).label: f"rank {chosen[p]['rank']}: {chosen[p]['algorithm']}"
                       for p in providers if p == AUTOTUNED and p in chosen}  # fmt: skip
        if not providers:
            continue
        found = {w.side.name: {p: [] for p in providers} for w in workers}
        failed: dict[str, str] = {}  # a call that raised leaves its cell unmeasured on both sides, not the others
        places = list(providers)
        random.Random(seed + index).shuffle(places)
        orders = carryover_balanced_orders(len(places))
        for round_index in range(rounds):
            turn = workers if round_index % 2 == 0 else workers[::-1]
            for provider in (places[item] for item in orders[round_index % len(orders)] if places[item] not in failed):
                for worker in turn:
                    reply = worker.ask({"time": provider})
                    calls += 1
                    if "error" in reply:
                        failed[provider] = f"{request.key(provider).label} on the {worker.side.name} side: " + (
                            f"failed in round {round_index + 1}: {reply['error']}"
                        )
                        break
                    found[worker.side.name][provider].append(reply["seconds"])
        not_measured += list(failed.values())
        for name, by_provider in found.items():
            samples[name] += [(request.key(p), by_provider[p], request.group) for p in providers if p not in failed]
    return samples, not_measured, calls, pinned


def _label(request: Request) -> str:
    return f"{request.epilog}/{request.dtype}/{request.key('').shape} ({request.group})"
