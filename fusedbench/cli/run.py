"""`fusedbench run`: the main job on a GPU machine.

It stands in a clean fusedbench checkout (results must name the code they measured), checks
the epilogs and dtypes the suite will time against float64, then runs asv with the flags its
results need (existing environment, the real commit, recorded samples, a machine named after the
GPU), one group at a time, and last writes the HTML report. The measurement itself records every
cell's status and the environment beside asv's results (`fusedbench.measure.asv_bridge`).

A group that fails or is interrupted never erases earlier timings: asv rewrites a commit's
results file when it runs a group again, so the file is kept before each group and put back
if that group does not finish.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from fusedbench.catalog.deliberate import VARIABLES, Deliberate
from fusedbench.catalog.model import FormatError, Status, count_by_status, format_counts
from fusedbench.catalog.suites import (
    BENCHMARK_MODULE,
    CEILINGS_REGEX,
    BenchmarkGroup,
    MlpGroup,
    group_bench_regex,
    select_groups,
)
from fusedbench.catalog.tuning import SETTINGS
from fusedbench.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    command_parser,
    deliberate_arguments,
)
from fusedbench.errors import FusedbenchError
from fusedbench.files import RefusedFile, read_regular, write_bytes_atomically
from fusedbench.measure.checkout import asv_results_dir, require_clean_checkout
from fusedbench.measure.machine import gpu_machine_name, register_asv_machine
from fusedbench.measure.progress import PROGRESS_DIR_VARIABLE, ProgressEcho
from fusedbench.measure.records import RECORD_SUFFIX, read_record_file

LAUNCH_METHODS = ("forkserver", "spawn")


def asv_command(
    *,
    bench_regex: str,
    machine: str,
    commit: str,
    launch_method: str,
    python: str = sys.executable,
) -> list[str]:
    """The asv invocation `fusedbench run` uses for one target, as an argument list."""
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


def run_targets(groups: list[BenchmarkGroup | MlpGroup]) -> list[tuple[str, str, int]]:
    """(label, asv --bench regex, cells) per asv invocation: the ceilings first where cells need them (their
    floors), then each group.

    asv saves a run's results only when the run ends, so one invocation per group means an
    interrupt loses at most the group in progress.
    """
    targets = [("ceilings", CEILINGS_REGEX, 2)] if _cell_groups(groups) else []
    targets += [(g.name, group_bench_regex(g), g.cell_count) for g in groups]
    return targets


def _cell_groups(groups: list[BenchmarkGroup | MlpGroup]) -> list[BenchmarkGroup]:
    """The groups of epilog cells (the mlp suite's verify their steps as they measure them)."""
    return [g for g in groups if g.module == BENCHMARK_MODULE]


class KeptResults:
    """asv's results files of one commit on one machine, as they were before a group ran, and the
    records that appeared since: `restore()` puts the files back and drops those records."""

    def __init__(self, folder: str, commit: str):
        self._folder, self._commit = folder, commit
        self._files = {path: _read(path) for path in self._paths("*.json")}
        self._records = set(self._paths(f"*{RECORD_SUFFIX}"))

    def _paths(self, pattern: str) -> list[str]:
        return glob.glob(os.path.join(self._folder, f"{self._commit[:8]}-{pattern}"))

    @property
    def had_results(self) -> bool:
        return bool(self._files)

    def new_records(self) -> list[str]:
        return sorted(set(self._paths(f"*{RECORD_SUFFIX}")) - self._records)

    def restore(self) -> None:
        for path, data in self._files.items():
            write_bytes_atomically(path, data)
        for path in self.new_records():
            os.remove(path)


def record_summary(path: str) -> str:
    """'Fp16Seed: 86 ok, 10 unsupported, 0 skipped, 0 failed in 41 s' from a record just written, and any throttling."""
    lines = []
    try:
        records = read_record_file(path)
    except (OSError, FormatError) as exc:
        return f"{path} cannot be read ({exc})"
    for record in records:
        line = f"{record.group}: {format_counts(count_by_status(record.cells))} in {record.seconds:.0f} s"
        throttled = (record.environment.get("telemetry") or {}).get("throttled") or []
        if throttled:
            line += f"; the GPU throttled ({', '.join(throttled)}): slower than its unthrottled best"
        lines.append(line)
    return "; ".join(lines)


def _read(path: str) -> bytes:
    """A results file of this commit, kept to put back after a failed run (a regular one only)."""
    try:
        return read_regular(path)
    except RefusedFile as exc:
        raise FusedbenchError(f"{path} {exc}; it cannot be kept to put back after a failed run: move it away") from None


def run_suite(
    *,
    suite: str,
    bench: str | None,
    launch_method: str,
    repo: str,
    echo: Callable[[str], None],
    deliberate: Deliberate | None = None,
) -> int:
    """Check, then time the suite with asv, a group at a time. Returns 1 where the check failed a cell (nothing is
    timed), 2 where asv failed a group (its earlier results kept), 130 where it was interrupted, else 0.

    With a `deliberate` change (a provider tuned, or cells slowed on purpose), under the change's own machine."""
    from fusedbench.measure.gpu import load_gpu_stack

    groups = select_groups(suite, bench)  # a bad suite or --bench fails here, before anything else
    deliberate = deliberate or Deliberate()
    if deliberate and not _cell_groups(groups):
        raise FusedbenchError(
            f"{deliberate.flags.strip()} changes epilog cells; suite {suite!r} has none: run it without"
        )
    missing = deliberate.injection.missing_from(_cell_groups(groups)) if deliberate.injection else []
    if missing:
        raise FusedbenchError(
            f"--inject {missing[0]!r} names no cell of suite {suite!r}"
            f"{f' (--bench {bench!r})' if bench else ''}; `fusedbench list` shows its cells"
        )
    if launch_method not in LAUNCH_METHODS:
        raise FusedbenchError(f"unknown launch method {launch_method!r}; choose from {', '.join(LAUNCH_METHODS)}")
    stack = load_gpu_stack("fusedbench run")  # raises GpuUnavailable: the CLI says what to do instead
    checkout = require_clean_checkout(repo)
    machine = deliberate.machine(gpu_machine_name())  # in a stack's environment, the stack's machine
    if deliberate.tuning is not None:
        tuning = deliberate.tuning
        echo(f"tuned run ({tuning.label}: {SETTINGS[tuning.setting]}), kept apart as machine {machine}")
    if deliberate.injection is not None:
        echo(f"injected run ({deliberate.injection.label} slower, on purpose), kept apart as machine {machine}")

    cell_groups = _cell_groups(groups)
    if cell_groups and check_cells(
        cell_groups, suite=suite, device=stack.device_name, tuning=deliberate.tuning, echo=echo
    ):
        return EXIT_FAILED

    register_asv_machine(machine, cwd=repo)
    results_folder = os.path.join(asv_results_dir(repo), machine)
    with tempfile.TemporaryDirectory(prefix="fusedbench-progress-") as progress_dir:
        cells = sum(g.cell_count for g in groups)
        echo(f"timing suite {suite!r}: {len(groups)} groups, {cells} cells, as machine {machine}")
        wall = time.perf_counter()
        progress = ProgressEcho(progress_dir, echo)
        progress.start()
        runner = GroupRunner(repo, machine, checkout.commit, launch_method, asv_environment(progress_dir, deliberate))
        codes = runner.run_all(run_targets(groups), results_folder, echo)
        progress.stop()
        wall = time.perf_counter() - wall
    echo(f"asv finished in {wall:.0f} s (exit codes {codes}); results and records in {results_folder}")
    write_run_report(repo, echo)
    return exit_code(codes)


def exit_code(asv_codes: dict[str, int]) -> int:
    """run's exit code from asv's, one a group: 130 where one was interrupted, 2 where asv failed one, with the
    error line naming them (asv's 1 is its own error, never the failed check's verdict that run's 1 is), else 0."""
    if EXIT_INTERRUPTED in asv_codes.values():
        return EXIT_INTERRUPTED
    failed = {label: code for label, code in asv_codes.items() if code}
    if failed:
        sys.stderr.write(
            f"error: asv failed {', '.join(f'{label} (exit {code})' for label, code in failed.items())}: asv's output "
            "above says why; the commit's earlier results of those groups are kept, every other group's are new\n"
        )
        return EXIT_USAGE
    return EXIT_OK


def asv_environment(progress_dir: str, deliberate: Deliberate) -> dict[str, str]:
    """The environment asv and its benchmark processes run in: where to report progress, and the deliberate change
    if any."""
    environment = dict(os.environ)
    environment[PROGRESS_DIR_VARIABLE] = progress_dir
    for variable in VARIABLES:  # a run is changed by --tune or --inject only, never by a leftover variable
        environment.pop(variable, None)
    environment |= deliberate.environment()
    if "PYTHONPATH" in environment:  # asv drops PYTHONPATH unless it comes as ASV_PYTHONPATH
        environment.setdefault("ASV_PYTHONPATH", environment["PYTHONPATH"])
    return environment


@dataclass(frozen=True)
class GroupRunner:
    """asv run a target at a time, each commit's earlier results put back where a target fails."""

    repo: str
    machine: str
    commit: str
    launch_method: str
    environment: dict[str, str]

    def run_all(self, targets, results_folder: str, echo) -> dict[str, int]:
        """asv's exit code per target label; stops after an interrupt (every finished target kept)."""
        codes: dict[str, int] = {}
        wall = time.perf_counter()
        for index, (label, regex, count) in enumerate(targets, start=1):
            echo(f"[{index}/{len(targets)}] {label} ({count} cells), {time.perf_counter() - wall:.0f} s in")
            codes[label] = self.run_one(regex, KeptResults(results_folder, self.commit), label, echo)
            if codes[label] == EXIT_INTERRUPTED:
                echo(f"interrupted during {label}: every group before it is saved in results/")
                break
        return codes

    def run_one(self, regex: str, kept: KeptResults, label: str, echo) -> int:
        command = asv_command(
            bench_regex=regex, machine=self.machine, commit=self.commit, launch_method=self.launch_method
        )
        try:
            code = subprocess.run(command, cwd=self.repo, env=self.environment).returncode
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
        for path in kept.new_records():
            echo(f"  {record_summary(path)}")
        if code != 0 and kept.had_results:
            kept.restore()
            echo(
                f"{label} failed or was interrupted (asv exit code {code}): "
                "this commit's earlier results are kept as they were"
            )
        return code


def check_cells(groups: list[BenchmarkGroup], *, suite: str, device: str, tuning, echo) -> int:
    """Check the epilogs, dtypes and providers the groups time against float64 at small shapes: the number of
    cells that failed (each named; nothing is timed then)."""
    from fusedbench.measure.check import run_check

    echo(f"checking the epilogs and dtypes of suite {suite!r} against float64 on {device}")
    report = run_check(
        shapes="small",
        epilogs=sorted({e for g in groups for e in g.epilogs}),
        dtypes=sorted({g.dtype for g in groups}),
        providers=sorted({p for g in groups for p in g.providers}),
        tuning=tuning,
    )
    failed = [c for c in report.cells if c.status is Status.FAILED]
    for cell in failed[:10]:
        echo(f"FAILED {cell.key.epilog}/{cell.key.dtype}/{cell.key.shape}/{cell.key.provider}: {cell.reason}")
    if failed:
        echo(f"{len(failed)} cells failed the check; nothing was timed (run `fusedbench check` for the table)")
    else:
        echo(f"check: {len(report.cells)} cells, none failed")
    return len(failed)


def write_run_report(repo: str, echo: Callable[[str], None]) -> None:
    """The HTML report of everything in results/ (this run and any before it), as `fusedbench report` writes it."""
    from fusedbench.report import write_report
    from fusedbench.results.loader import load_results

    results = load_results(asv_results_dir(repo))
    for problem in results.problems:
        echo(f"warning: {problem}")
    if results.cells.empty and results.mlp.empty:
        echo("no report written: no results were recorded")
        return
    echo(f"report: {write_report(results, out_dir=os.path.join(repo, 'reports'))}")


def add_parser(commands) -> None:
    parser = command_parser(
        commands,
        "run",
        "the main job: check, time a suite with asv, write the report (run from the checkout's root)",
        page="run.md",
        verdict="the check failed a cell: nothing was timed",
    )
    parser.add_argument("--suite", default="default", help="quick, default, full, peers or mlp (default: default)")
    parser.add_argument(
        "--bench",
        default=None,
        metavar="REGEX",
        help="only the groups whose class name matches REGEX (e.g. Bf16, Seed)",
    )
    parser.add_argument(
        "--launch-method",
        default="forkserver",
        choices=LAUNCH_METHODS,
        help="how asv starts a benchmark process (default: forkserver; docs/architecture.md says why)",
    )
    deliberate_arguments(parser, "time, recorded and kept apart under its own asv machine,")
    parser.add_argument(
        "--stack",
        default=None,
        metavar="NAME",
        help="run in stack NAME's environment (benchmarks/stacks/NAME.toml, made by `fusedbench stack create "
        "NAME`), its history under the machine <gpu>-stack-NAME",
    )
    parser.set_defaults(
        handler=lambda a: command_run(
            suite=a.suite, bench=a.bench, launch_method=a.launch_method, tune=a.tune, inject=a.inject, stack=a.stack
        )
    )


def command_run(
    *,
    suite: str,
    bench: str | None,
    launch_method: str,
    tune: str | None = None,
    inject: list[str] | None = None,
    stack: str | None = None,
) -> int:
    """Check and time a suite on this machine's GPU with asv (one provider tuned with --tune, or cells slowed on
    purpose with --inject; in a stack's environment with --stack)."""
    from fusedbench.cli.common import console, deliberate_of
    from fusedbench.errors import GpuUnavailable

    deliberate = deliberate_of(tune, inject)  # a bad --tune or --inject is refused here, before the stack's Python
    if stack is not None:
        forwarded = ["--tune", tune] if tune else []
        forwarded += [flag for target in inject or [] for flag in ("--inject", target)]
        return run_in_stack(stack, suite=suite, bench=bench, launch_method=launch_method, forwarded=forwarded)
    try:
        return run_suite(
            suite=suite,
            bench=bench,
            launch_method=launch_method,
            repo=os.getcwd(),
            echo=console().print,
            deliberate=deliberate,
        )
    except GpuUnavailable as exc:
        raise FusedbenchError(
            f"{exc}; without a GPU, `fusedbench report` and `fusedbench table` read the committed results/"
        ) from None


def run_in_stack(name: str, *, suite: str, bench: str | None, launch_method: str, forwarded: list[str]) -> int:
    """`fusedbench run` again, by the stack's Python: the check, asv (`-E existing:` that Python, so asv keys the
    results by the stack's environment) and the machine name (the stack's) all in the stack's environment."""
    from fusedbench.catalog.stacks import read_stack
    from fusedbench.measure.stacks import stack_python

    repo = os.getcwd()
    stack = read_stack(repo, name)
    python = stack_python(repo, stack)
    asked = (
        "import json, sys, importlib.metadata as m; found = {p: next(iter(m.distributions(name=p)), None) "
        "for p in sys.argv[1:]}; print(json.dumps({p: d.version for p, d in found.items() if d}))"
    )
    imported = subprocess.run([python, "-c", asked, *stack.packages], capture_output=True, text=True)
    found = json.loads(imported.stdout or "{}") if imported.returncode == 0 else {}
    wrong = [f"{p} {v} (it imports {found.get(p) or 'none'})" for p, v in stack.packages.items() if found.get(p) != v]
    if wrong:
        raise FusedbenchError(f"stack {name}'s Python does not run its pins: {'; '.join(wrong)}; a PYTHONPATH puts "
                              "other packages first: clear PYTHONPATH of them")  # fmt: skip
    argv = [python, "-m", "fusedbench", "run", "--suite", suite, "--launch-method", launch_method]
    argv += (["--bench", bench] if bench else []) + forwarded
    try:
        return subprocess.run(argv, cwd=repo).returncode
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
