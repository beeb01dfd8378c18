"""What `alert`, `compare` and `ab` share: their flags, the runs they are asked to judge, the verdict in a terminal
and the gate's exit code."""

from __future__ import annotations

import os
import re
import sys

from fusedbench.catalog.suites import SUITES
from fusedbench.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    command_parser,
    count,
    emit,
    load,
    nonempty,
    render,
    silence_stdout,
    warn,
)
from fusedbench.errors import FusedbenchError

REF_HELP = "COMMIT (a prefix, on --machine), MACHINE@COMMIT, or MACHINE@ (its newest runs)"
REF = re.compile(r"(?:(?P<machine>[^@\s]+)@)?(?P<commit>[0-9a-fA-F]*)")


def add_arguments(
    commands, name: str, helptext: str, baseline_default: str, formats=("text", "md", "json"), **exits: str
):
    """The command's parser with the flags alert and compare share (`formats`: its --format choices; `exits`: what
    its exit codes mean, as `cli.common.command_parser` takes them)."""
    parser = command_parser(commands, name, helptext, page="verdict.md", **exits)
    parser.add_argument(
        "results_dirs",
        nargs="*",
        default=[],
        type=nonempty,
        metavar="RESULTS",
        help="asv's results folder (default: results), or two: the baseline's, then the candidate's; a branch's "
        "results/ as @REF or git+REPO@REF",
    )
    parser.add_argument(
        "--machine",
        default=None,
        type=nonempty,
        help="the machine: only its results and its baseline machine's are read (default: the one with the newest "
        "run, every machine read to find it)",
    )
    parser.add_argument(
        "--suite",
        action="append",
        choices=tuple(SUITES),
        help="judge this suite, group by group (repeatable; default: the suites of the candidate's commit)",
    )
    parser.add_argument("--baseline", default=None, metavar="REF", help=REF_HELP + baseline_default)
    parser.add_argument(
        "--candidate", default=None, metavar="REF", help=REF_HELP + " (default: each group's newest run)"
    )
    parser.add_argument(
        "--preset",
        default=None,
        type=nonempty,
        help="threshold preset for every suite (default: each suite's, earned on the machine's GPU at the runs' "
        "benchmark versions; --dump-thresholds)",
    )
    parser.add_argument(
        "--format",
        dest="output_format",
        choices=formats,
        default="text",
        help="text (a terminal table), md, json"
        + (
            " or html (a page: the verdict, then every compared row in tables that sort and filter)"
            if "html" in formats
            else ""
        ),
    )
    parser.add_argument("--rows", type=count, default=40, help="rows of the terminal table (default: 40)")
    parser.add_argument(
        "--strict", action="store_true", help="exit 2 on any data problem in the results read instead of warning"
    )
    return parser


def options(args) -> dict:
    return {
        name: getattr(args, name)
        for name in ("results_dirs", "machine", "suite", "baseline", "candidate", "preset", "output_format", "rows")
    } | {"strict": args.strict}


def parse_ref(ref: str | None, flag: str) -> tuple[str | None, str | None]:
    """'MACHINE@COMMIT', 'MACHINE@' (its newest runs) or 'COMMIT' -> (machine or None, commit prefix or None)."""
    if ref is None:
        return None, None
    found = REF.fullmatch(ref)
    if found is None or not ref:
        raise FusedbenchError(f"{flag} {ref!r} is not COMMIT, MACHINE@COMMIT or MACHINE@ (e.g. h100-80gb-hbm3@7dd23c5)")
    return found["machine"], found["commit"] or None


def judged(*, results_dirs, machine, suite, baseline, candidate, preset, strict: bool, gate: bool = False):
    """Load the folders, resolve the choice of runs, judge it: the gate's MachineVerdict."""
    from fusedbench.catalog.deliberate import baseline_machine
    from fusedbench.regressions.gate import Sources, default_choice, judge, resolve
    from fusedbench.results.runs import group_runs, newest_machine

    if len(results_dirs) > 2:
        raise FusedbenchError(f"give one results folder, or two (baseline's, candidate's), not {len(results_dirs)}")
    folders = results_dirs or ["results"]
    if len(folders) == 2 and os.path.realpath(folders[0]) == os.path.realpath(folders[1]):
        raise FusedbenchError(f"{folders[0]!r} is named twice: give one results folder, or the baseline's and another")
    two = len(folders) == 2
    cand_machine, cand_ref = parse_ref(candidate, "--candidate")
    base_machine, base_ref = parse_ref(baseline, "--baseline")
    if cand_machine and machine and cand_machine != machine:
        raise FusedbenchError(f"--machine {machine!r} and --candidate {candidate!r} name two machines; give one")
    named = cand_machine or machine
    wanted = [named, base_machine or baseline_machine(named)] if named else None  # read only the machines judged
    if two:  # each folder must hold its side's machine: the baseline's, the candidate's
        base = load(folders[0], strict=strict, machines=wanted and wanted[::-1], origin=folders[0])
        loaded = [base, load(folders[1], strict=strict, machines=wanted, origin=folders[1])]
    else:
        loaded = [load(folders[0], strict=strict, machines=wanted)]
    machine_name = named or newest_machine(group_runs(loaded[-1]), folders[-1])
    base_machine = base_machine or baseline_machine(machine_name)  # a tuned run against its GPU's, a paired in its own
    if gate:
        refuse_unreadable(loaded, {machine_name, base_machine})
    cand_commit = resolve(loaded[-1], machine_name, cand_ref, folders[-1] if two else "")
    base_commit = resolve(loaded[0], base_machine, base_ref, folders[0] if two else "")
    if not two and base_machine == machine_name and base_commit is not None and base_commit == cand_commit:
        raise FusedbenchError(f"the baseline and the candidate are the same run ({machine_name}@{cand_commit[:8]})")
    choice = default_choice(
        loaded[-1],
        machine_name,
        suites=tuple(suite or ()),
        candidate=cand_commit,
        baseline=base_commit,
        baseline_machine=base_machine,
        preset=preset,
    )
    sources = Sources(loaded[-1], loaded[0], (folders[0], folders[-1]) if two else ("", ""))
    return judge(loaded[-1], choice, sources)


def refuse_unreadable(loaded, machines: set[str]) -> None:
    """A CI gate judges nothing it could not read in full on the machines it compares."""
    for results in loaded:
        lost = [p for p in results.problems if p.machine in machines]
        if lost:
            raise FusedbenchError(f"alert judges only results it can read in full: {lost[0]}")


def verdict_text(verdict, *, rows: int, only_alerts: bool, command: str = "alert") -> str:
    """The verdict for a terminal: its headline, then per suite its line, the runs compared, and a table of its
    alerts (or, for compare, of every row that is not 'same' and the group gates that moved)."""
    from fusedbench.regressions.render import headline, run_pairs, suite_line

    parts = [headline(verdict, gate=only_alerts, command=command)]
    for suite in verdict.suites:
        parts.append(suite_line(suite))
        pairs = run_pairs(suite)
        if pairs:
            parts.append(f"  compared: {pairs}; {suite.preset_line}")
        parts += suite_tables(suite, rows=rows, only_alerts=only_alerts)
    return render(*parts)


def suite_tables(suite, *, rows: int, only_alerts: bool) -> list:
    import pandas

    from fusedbench.regressions.compare import Verdict
    from fusedbench.regressions.gate import describe

    if only_alerts:
        shown = [describe(row) for _, row in suite.alerts.iterrows()]
    else:
        moved = [
            (g.group, row)
            for g in suite.groups
            if g.judged is not None
            for frame in (g.judged.comparison.cells, g.judged.comparison.groups)
            for _, row in frame[frame["verdict"] != Verdict.SAME].iterrows()
        ]
        shown = [describe(pandas.Series(row.to_dict() | {"group": group})) for group, row in moved]
    found = []
    if shown:
        title = "alerts, worst first" if only_alerts else "what is not 'same', worst first"
        found.append(f"  {title}:\n" + "\n".join(f"  - {line}" for line in shown[:rows]))
    if len(shown) > rows:
        found.append(f"... {len(shown) - rows} more rows (--rows N, or --format md / json for all)")
    return found


def warn_all(verdict) -> None:
    """Every suite's warnings on standard error, after the verdict is out."""
    for suite in verdict.suites:
        for warning in suite.warnings:
            warn(warning)


def gate_exit(
    verdict, *, output_format: str, rows: int, measured=(), measured_key: str = "", command: str = "alert"
) -> int:
    """Print a gate's verdict as `command` (alert, ab) gives it, with `measured` (lines saying what was measured for
    it, under `measured_key` in JSON), and what warns; append it to GitHub's step summary. The exit code: 1 red, 0
    green or not judged, 2 where it could not be written (a red verdict still 1)."""
    from fusedbench.regressions.gate import Outcome
    from fusedbench.regressions.render import dump as dump_json
    from fusedbench.regressions.render import summary_markdown, to_json, write_step_summary

    markdown = summary_markdown(verdict, command=command) + "".join(f"\n    {line}" for line in measured)
    if output_format == "json":
        text = dump_json(to_json(verdict) | ({measured_key: list(measured)} if measured_key else {}))
    elif output_format == "md":
        text = markdown
    else:
        text = verdict_text(verdict, rows=rows, only_alerts=True, command=command)
        text += "".join(f"{line}\n" for line in measured)
    red = verdict.outcome is Outcome.RED
    failures = []
    try:
        emit(text)
    except BrokenPipeError:  # `alert | head`: the verdict still decides the exit code
        silence_stdout()
    except FusedbenchError as exc:
        failures.append(exc)
    warn_all(verdict)
    try:
        write_step_summary(markdown)
    except FusedbenchError as exc:
        failures.append(exc)
    if failures:  # a verdict that could not be written: 2, but a regression is still 1 (it is what happened)
        sys.stderr.write(f"error: {failures[0]}\n")
        return EXIT_FAILED if red else EXIT_USAGE
    return EXIT_FAILED if red else EXIT_OK
