"""`fusedbench run`: the main job on a GPU machine.

Environment check, `fusedbench check` on the epilogs and dtypes the suite will time, asv with
the flags its results need (existing environment, the real commit, recorded samples, a
machine name that carries the GPU), telemetry around the run, every cell's status and
reason beside asv's results (asv keeps timings, not reasons), and then the HTML report.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from fusedbench.errors import FusedbenchError
from fusedbench.files import write_text_atomically
from fusedbench.measure import SAMPLING
from fusedbench.results import ENVIRONMENT_SUFFIX
from fusedbench.suites import (
    CEILINGS_REGEX,
    PROGRESS_SUFFIX,
    STATUS_DIR_VARIABLE,
    group_bench_regex,
    suite_groups,
)

LAUNCH_METHODS = ("forkserver", "spawn")


def machine_name(gpu_name: str, memory_bytes: int) -> str:
    """asv's machine name from the GPU: 'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3', 'NVIDIA H200' -> 'h200-141gb'.

    Where the name has no size, the memory in GiB, rounded up, is added (an H200 reports 140.4).
    """
    words = re.sub(r"^nvidia\s+", "", gpu_name.strip().lower()).split()
    if not any(re.fullmatch(r"\d+gb", word) for word in words):
        words.insert(1, f"{math.ceil(memory_bytes / 2**30)}gb")
    return re.sub(r"[^a-z0-9]+", "-", "-".join(words)).strip("-")


def asv_command(
    *,
    bench_regex: str,
    machine: str,
    commit: str,
    launch_method: str,
    python: str = sys.executable,
) -> list[str]:
    """The asv invocation `fusedbench run` uses for one target, as an argument list."""
    if launch_method not in LAUNCH_METHODS:
        raise FusedbenchError(f"unknown launch method {launch_method!r}; choose from {', '.join(LAUNCH_METHODS)}")
    return [
        python,
        "-m",
        "asv",
        "run",
        "--environment",
        f"existing:{python}",
        "--set-commit-hash",
        commit,
        "--machine",
        machine,
        "--record-samples",
        "--launch-method",
        launch_method,
        "--bench",
        bench_regex,
        "--show-stderr",
    ]


def select_groups(suite: str, bench: str | None) -> list:
    """The suite's groups whose class name matches `bench` (all of them without one)."""
    groups = [g for g in suite_groups(suite) if bench is None or re.search(bench, g.name)]
    if not groups:
        raise FusedbenchError(f"no group of suite {suite!r} matches --bench {bench!r}; groups are named like Fp16Seed")
    return groups


def run_targets(suite: str, bench: str | None) -> list[tuple[str, str, int]]:
    """(label, asv --bench regex, cells) per asv invocation: the ceilings first, then each group.

    asv saves a run's results only when the run ends, so one invocation per group means an
    interrupt loses at most the group in progress.
    """
    groups = select_groups(suite, bench)
    targets = [("ceilings", CEILINGS_REGEX, 2)]
    targets += [(g.name, group_bench_regex(g.name), g.cell_count) for g in groups]
    return targets


def current_commit(repo: str) -> str:
    """HEAD of a clean checkout: results must carry the commit that produced them."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise FusedbenchError(f"fusedbench run needs the git checkout of fusedbench ({exc})") from None
    if dirty:
        raise FusedbenchError(
            "the checkout has uncommitted changes; commit them, so results name the code they measured"
        )
    return commit


def software_versions(stack) -> dict:
    """Versions of everything a timing depends on."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    cupy = stack.cupy
    return {
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
        "cublaslt": stack.cublaslt_version,
        "nvmath-python": installed("nvmath-python"),
        "cupy": cupy.__version__,
        "torch": None if stack.torch is None else stack.torch.__version__,
        "nvidia-cublas": installed("nvidia-cublas") or installed("nvidia-cublas-cu12"),
        "python": sys.version.split()[0],
    }


def collect_statuses(folder: str) -> tuple[list[dict], dict[str, float]]:
    """Every measured cell's status and reason, and the seconds each group's measurement took."""
    records, seconds = [], {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as stream:
                group = json.load(stream)
            records.extend(group["cells"])
            seconds[name.removesuffix(".json")] = group["seconds"]
    return records, seconds


def progress_line(folder: str) -> str | None:
    """'measuring Fp16Seed: 36/96 cells (RELU_BIAS/fp16/...)' from the newest progress file, if any."""
    newest, payload = -1.0, None
    for name in os.listdir(folder):
        if name.endswith(PROGRESS_SUFFIX):
            path = os.path.join(folder, name)
            try:
                modified = os.path.getmtime(path)
                if modified > newest:
                    with open(path) as stream:
                        newest, payload = modified, json.load(stream)
            except (OSError, ValueError):
                continue  # being replaced right now; the next poll reads it
    if payload is None:
        return None
    return f"measuring {payload['group']}: {payload['done']}/{payload['total']} cells ({payload['last']})"


class ProgressEcho(threading.Thread):
    """Echoes the measurement's progress every `interval` seconds while asv is quiet in setup_cache."""

    def __init__(self, folder: str, echo: Callable[[str], None], interval: float = 15.0):
        super().__init__(daemon=True)
        self._folder, self._echo, self._interval = folder, echo, interval
        self._stopping = threading.Event()

    def run(self) -> None:
        last = None
        while not self._stopping.wait(self._interval):
            line = progress_line(self._folder)
            if line is not None and line != last:
                self._echo(f"  {line}")
                last = line

    def stop(self) -> None:
        self._stopping.set()  # (Thread has a _stop of its own)
        self.join()


def run_suite(
    *,
    suite: str,
    bench: str | None,
    launch_method: str,
    repo: str,
    echo: Callable[[str], None],
) -> int:
    """Check, then time the suite with asv, a group at a time; returns the worst asv exit code (1: check failed)."""
    from fusedbench.check import run_check
    from fusedbench.gpu import load_gpu_stack
    from fusedbench.telemetry import TelemetrySampler, nvml_memory_bytes
    from fusedbench.verify import Status

    groups = select_groups(suite, bench)  # a bad suite or --bench fails here, before any GPU work
    stack = load_gpu_stack("fusedbench run")  # raises GpuUnavailable: the CLI says what to do instead
    commit = current_commit(repo)
    machine = machine_name(stack.device_name, nvml_memory_bytes())

    echo(f"checking the epilogs and dtypes of suite {suite!r} against float64 on {stack.device_name}")
    report = run_check(
        shapes="small",
        epilogs=sorted({e for g in groups for e in g.epilogs}),
        dtypes=sorted({g.dtype for g in groups}),
        providers=sorted({p for g in groups for p in g.providers}),
    )
    failed = [c for c in report.cells if c.status is Status.FAILED]
    if failed:
        for cell in failed[:10]:
            echo(f"FAILED {cell.epilog}/{cell.dtype}/{cell.shape}/{cell.provider}: {cell.reason}")
        echo(f"{len(failed)} cells failed the check; nothing was timed (run `fusedbench check` for the table)")
        return 1
    echo(f"check: {len(report.cells)} cells, none failed")

    subprocess.run(
        [sys.executable, "-m", "asv", "machine", "--yes", "--machine", machine],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    targets = run_targets(suite, bench)
    started = datetime.now(timezone.utc)
    codes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="fusedbench-status-") as status_dir, TelemetrySampler() as telemetry:
        environment = dict(os.environ)
        environment[STATUS_DIR_VARIABLE] = status_dir
        if "PYTHONPATH" in environment:  # asv drops PYTHONPATH unless it comes as ASV_PYTHONPATH
            environment.setdefault("ASV_PYTHONPATH", environment["PYTHONPATH"])
        cells = sum(count for _, _, count in targets[1:])
        echo(f"timing suite {suite!r}: {len(targets) - 1} groups, {cells} cells, as machine {machine}")
        wall = time.perf_counter()
        progress = ProgressEcho(status_dir, echo)
        progress.start()
        for index, (label, regex, count) in enumerate(targets, start=1):
            command = asv_command(bench_regex=regex, machine=machine, commit=commit, launch_method=launch_method)
            echo(f"[{index}/{len(targets)}] {label} ({count} cells), {time.perf_counter() - wall:.0f} s in")
            try:
                codes[label] = subprocess.run(command, cwd=repo, env=environment).returncode
            except KeyboardInterrupt:
                codes[label] = 130
                echo(f"interrupted during {label}: every group before it is saved in results/")
                break
        progress.stop()
        wall = time.perf_counter() - wall
        statuses, measure_seconds = collect_statuses(status_dir)
    payload = {
        "format": "fusedbench-environment/2",
        "machine": machine,
        "commit": commit,
        "suite": suite,
        "bench": bench,
        "launch_method": launch_method,
        "sampling": SAMPLING,  # /2: how samples were ordered; `fusedbench.results` pairs them by round
        "started": started.isoformat(),
        "wall_seconds": round(wall, 1),
        "measure_seconds": measure_seconds,  # inside asv's setup_cache; the rest of the wall is asv's processes
        "asv_exit_codes": codes,
        "gpu": telemetry.device_facts(),
        "versions": software_versions(stack),
        "telemetry": telemetry.summary.to_json(),
        "cells": statuses,
    }
    folder = os.path.join(repo, "results", machine)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"env-{commit[:8]}-{started:%Y%m%dT%H%M%SZ}{ENVIRONMENT_SUFFIX}")
    write_text_atomically(path, json.dumps(payload, indent=1))
    throttled = payload["telemetry"]["throttled"]
    code = max(codes.values(), default=0)
    echo(f"asv finished in {wall:.0f} s (exit codes {codes}); environment in {path}")
    if throttled:
        echo(
            f"warning: the GPU throttled during the run ({', '.join(throttled)}); "
            "its timings are slower than the GPU's unthrottled best"
        )
    write_run_report(repo, echo)
    return code


def write_run_report(repo: str, echo: Callable[[str], None]) -> None:
    """The HTML report of everything in results/ (this run and any before it), as `fusedbench report` writes it."""
    from fusedbench.report import write_report

    try:
        path = write_report(results_dir=os.path.join(repo, "results"), out_dir=os.path.join(repo, "reports"))
    except FusedbenchError as exc:  # e.g. interrupted before any group finished
        echo(f"no report written: {exc}")
    else:
        echo(f"report: {path}")
