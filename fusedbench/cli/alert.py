"""`fusedbench alert`: the CI gate. Exit 0: green, or not judged (too little compared to tell; nothing failed);
1: a regression, and nothing else (a red verdict that could not be written is still 1, with the error line);
2: anything else (bad input, unreadable data, a failed write), after the verdict where there is one."""

from __future__ import annotations

from fusedbench.cli.common import EXIT_OK, emit, require_gpu
from fusedbench.cli.gating import add_arguments, gate_exit, judged, options
from fusedbench.errors import FusedbenchError

BASELINE_DEFAULT = (
    " (default: each group's newest earlier run on the machine at the same benchmark version; a tuned run's, its GPU's;"
    " with two folders, the first's newest)"
)


def add_parser(commands) -> None:
    parser = add_arguments(
        commands,
        "alert",
        "the CI gate: each group's newest run against its baseline; exit 1 when it regresses (red), 0 when not",
        BASELINE_DEFAULT,
        ok="green, or not judged (too little compared to tell; the verdict says which)",
        verdict="red: an alert (a regression, a new fusion inversion or loss, a missing or newly failing cell), and "
        "nothing else",
    )
    parser.add_argument(
        "--dump-thresholds",
        action="store_true",
        help="print the preset in force for each suite (or each --suite) and exit",
    )
    parser.add_argument(
        "--confirm",
        action="store_true",
        help="on the GPU machine, in the checkout of the candidate: measure what the first look flags again, the "
        "baseline's code beside the candidate's, and decide by that (docs/regressions.md)",
    )
    parser.set_defaults(handler=lambda a: command_alert(**options(a), dump=a.dump_thresholds, confirm=a.confirm))


def command_alert(*, output_format: str, rows: int, dump: bool, confirm: bool = False, **selection) -> int:
    """Judge (`selection`: the runs, as `cli.gating.judged` takes them), confirm what it flags where asked, print
    the verdict (and what warns), append it to GitHub's step summary; exit 1 on an alert."""
    if dump:
        return dump_thresholds(
            selection["results_dirs"],
            selection["machine"],
            selection["suite"],
            selection["preset"],
            selection["strict"],
        )
    if confirm:
        from fusedbench.results.sources import is_ref

        written = (selection["results_dirs"] or ["results"])[-1]
        if is_ref(written):
            raise FusedbenchError(
                f"--confirm writes its record into the results folder, and {written!r} is a ref's extracted copy: name "
                "a folder (a checkout of the branch: git worktree add DIR BRANCH)"
            )
        require_gpu(
            "--confirm measures flagged cells again", "run alert without --confirm here, and with it on the GPU runner"
        )
    verdict = judged(**selection, gate=True)
    if not confirm:
        return gate_exit(verdict, output_format=output_format, rows=rows)
    verdict, lines = confirmed_verdict(verdict, (selection["results_dirs"] or ["results"])[-1], selection["strict"])
    return gate_exit(verdict, output_format=output_format, rows=rows, measured=lines, measured_key="confirmation")


def confirmed_verdict(verdict, folder: str, strict: bool):
    """The verdict after confirmation, and the lines that say what was measured again; a record of it is written
    beside the candidate's results where anything was."""
    import os
    from datetime import datetime, timezone

    from fusedbench.cli.common import load
    from fusedbench.files import write_text_atomically
    from fusedbench.paired.confirm import confirm_verdict
    from fusedbench.regressions.confirm import CONFIRM_SUFFIX, confirmation_lines, to_record
    from fusedbench.regressions.render import dump as dump_json

    judged = [verdict.machine, *{g.baseline.machine for s in verdict.suites for g in s.groups if g.baseline}]
    after, confirmations = confirm_verdict(verdict, load(folder, strict=strict, machines=judged), os.getcwd())
    lines = [f"first look: {verdict.outcome.value} ({verdict.alerts} alerts); after confirmation: "
             f"{after.outcome.value} ({after.alerts} alerts)", *confirmation_lines(confirmations)]  # fmt: skip
    if confirmations:
        commit = confirmations[0].candidate.commit
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        path = os.path.join(folder, verdict.machine, f"{commit[:8]}-confirm-{stamp}{CONFIRM_SUFFIX}")
        write_text_atomically(path, dump_json(to_record(verdict, after, confirmations)))
        lines.append(f"confirmation record: {path}")
    return after, lines


def dump_thresholds(results_dirs, machine, suites, preset, strict: bool) -> int:
    """Print the preset in force for each suite asked (default: every suite) on the machine (the newest run's where
    none is named) at its newest runs' benchmark versions, and why, with the margins that would decide each group's
    side-by-side confirmation (the GPU's own, else the fixed 'confirmation'): {suite: preset}. Which preset is in
    force depends on the machine's runs: a folder or a machine without any is an error, not another GPU's presets."""
    from fusedbench.catalog.suites import SUITES
    from fusedbench.cli.common import load
    from fusedbench.regressions.gate import paired_record
    from fusedbench.regressions.render import dump
    from fusedbench.regressions.thresholds import margins_for, preset_for
    from fusedbench.results.runs import group_runs, newest_machine, newest_runs

    folder = (results_dirs or ["results"])[-1]
    results = load(folder, strict=strict, machines=None if machine is None else [machine])
    runs = group_runs(results)
    machine = machine if machine is not None else newest_machine(runs, folder)
    asked = paired_record(results, machine).get("cells") or ""  # a paired session narrowed by --cells
    newest = newest_runs(runs, machines=[machine])
    versions = dict(zip(newest["group"], newest["version"].astype(str), strict=True))
    in_force = {}
    for suite in dict.fromkeys(suites or SUITES):
        mine = {group: versions[group] for group in SUITES[suite] if group in versions}
        found, line = preset_for(machine, suite, preset, mine)
        margins = {group: margins_for(machine, group, version, asked).name for group, version in mine.items()}
        in_force[suite] = found.to_json() | {"in_force_because": line, "confirmation_margins": margins}
    emit(dump(in_force))
    return EXIT_OK
