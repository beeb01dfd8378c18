"""`fusedbench bisect GOOD BAD` (or `--stacks A,B,...`): the first commit, or stack, past the margin beside the
first, each step a paired measurement of the cells that moved (`paired.bisect`)."""

from __future__ import annotations

import os

from fusedbench.cli.ab import paired_rounds
from fusedbench.cli.common import EXIT_OK, command_parser, emit, names, nonempty, require_gpu
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    from fusedbench.measure.sampling import SAMPLES

    parser = command_parser(
        commands,
        "bisect",
        "find the first commit of GOOD..BAD (or the first of --stacks) past the margin, each step measured side by "
        "side with the first on this GPU",
        page="bisect.md",
    )
    parser.add_argument("good", nargs="?", type=nonempty, metavar="GOOD", help="the last commit known good")
    parser.add_argument("bad", nargs="?", type=nonempty, metavar="BAD", help="a later commit that is slower")
    parser.add_argument(
        "--stacks",
        type=names,
        default=None,
        metavar="A,B,...",
        help="in place of GOOD BAD: stacks in order, the first good, the last slower (each made by `stack create`)",
    )
    parser.add_argument(
        "--suite", default="quick", help="the suite whose cells the first step measures (default: quick)"
    )
    parser.add_argument("--bench", default=None, metavar="REGEX", help="only the suite's groups matching REGEX")
    parser.add_argument("--cells", default=None, metavar="REGEX", help="only the cells whose label REGEX finds")
    parser.add_argument(
        "--rounds", type=paired_rounds, default=SAMPLES, help=f"timed calls of each cell a side (default: {SAMPLES})"
    )
    parser.set_defaults(handler=lambda a: command_bisect(a.good, a.bad, a.stacks, a.suite, a.bench, a.cells, a.rounds))


def command_bisect(good, bad, stacks, suite, bench, cells, rounds) -> int:
    """Resolve the points, bisect them on this GPU, print each step and the answer, and keep the record."""
    from fusedbench.catalog.suites import select_groups
    from fusedbench.measure.checkout import asv_results_dir, require_clean_checkout
    from fusedbench.measure.machine import gpu_machine_name
    from fusedbench.paired.ab import cell_groups, chosen_requests
    from fusedbench.paired.bisect import Bisection, bisect, commit_points, write_record

    if (good is None or bad is None) == (stacks is None) or (stacks is not None and (good or bad)):
        raise FusedbenchError("name GOOD and BAD (two commits) or --stacks A,B,... (in order), one of the two")
    groups = cell_groups(select_groups(suite, bench))
    chosen_requests(groups, cells)  # a bad --cells is refused before anything is measured
    repo = os.getcwd()
    head = require_clean_checkout(repo).commit
    points = commit_points(repo, good, bad) if stacks is None else list(stacks)
    kind = "commits" if stacks is None else "stacks"
    check_points(repo, points, kind)  # every point, before the first step's minutes are spent
    require_gpu("bisect measures each step", "run it on the GPU machine, in a clean checkout")
    gpu = gpu_machine_name()

    def measure(point: str, index: int, moved: str):
        step = measure_step(repo, head, (points[0], point, index), kind, suite, groups, moved or cells, rounds, gpu)
        alerts = f" ({len(step.alerts)} alert(s): {', '.join(step.alerts[:3])})" if step.alerts else ""
        where = f"{describe(point, kind)} ({index} of {len(points) - 1}) beside {describe(points[0], kind)}"
        emit(
            f"step {len(found_steps) + 1}: {where}: {step.outcome}{alerts}, {step.seconds:.0f} s, {step.calls} calls\n"
        )
        return step

    found = Bisection(points, kind)
    found_steps = found.steps
    try:
        bisect(found, measure)
    except FusedbenchError as exc:
        found.stopped = str(exc)
        kept = write_record(asv_results_dir(repo), gpu, found)
        raise FusedbenchError(f"{exc} (the steps taken are kept in {kept})") from None
    path = write_record(asv_results_dir(repo), gpu, found)
    minutes = f"{len(found.steps)} paired step(s), {found.seconds / 60:.1f} GPU-minutes"
    if found.first is None:
        emit(f"{describe(points[-1], kind)} is not past the margin beside {describe(points[0], kind)}: nothing to "
             f"bisect ({minutes}); kept in {path}\n")  # fmt: skip
    else:
        emit(f"first past the margin: {describe(found.first, kind)} ({minutes}); kept in {path}\n")
    return EXIT_OK


def check_points(repo: str, points: list[str], kind: str) -> None:
    """Every point measurable beside the first, or FusedbenchError naming the first that is not: a stack named twice,
    unknown or without its environment; a commit whose declared dependencies differ from the first's."""
    from fusedbench.paired.ab import dependency_changes, resolve_stacks

    if kind == "stacks":
        if len(set(points)) < len(points):
            raise FusedbenchError(f"--stacks {','.join(points)} names a stack twice: name each once, in order")
        for point in points[1:]:
            resolve_stacks(repo, [points[0], point])
        return
    for point in points[1:]:
        differ = dependency_changes(repo, points[0], point)
        if differ:
            raise FusedbenchError(f"{point[:8]} depends on other packages than {points[0][:8]} ({'; '.join(differ)}): "
                                  "bisect the stacks with --stacks instead")  # fmt: skip


def describe(point: str, kind: str) -> str:
    if kind == "stacks":
        return f"stack {point}"
    import subprocess

    subject = subprocess.run(["git", "log", "-1", "--format=%s", point], capture_output=True, text=True).stdout
    return f"{point[:8]} {subject.strip()[:60]!r}"


def measure_step(repo, head, where, kind, suite, groups, cells, rounds, gpu):
    """`where`'s point beside its reference (reference, point, index) on `ab`'s workers over the cells `cells` finds,
    kept and judged as `ab` keeps and judges a pair: its Step."""
    from fusedbench.cli.gating import judged
    from fusedbench.measure.checkout import asv_results_dir
    from fusedbench.paired.ab import Pair, chosen_requests, measure_and_keep, resolve_stacks
    from fusedbench.paired.bisect import Step, alert_labels

    reference, point, index = where
    if kind == "stacks":
        pair = resolve_stacks(repo, [reference, point])
    else:
        pair = Pair(reference, point, candidate_checkout=point == head)
    machines, measured = measure_and_keep(repo, pair, chosen_requests(groups, cells), rounds, gpu, cells)
    sides = {
        side: f"{machines[side]}@{commit}" for side, commit in (("baseline", pair.base), ("candidate", pair.candidate))
    }
    verdict = judged(results_dirs=[asv_results_dir(repo)], machine=machines["candidate"], suite=[suite],
                     baseline=sides["baseline"], candidate=sides["candidate"], preset=None, strict=True,
                     gate=True)  # fmt: skip
    alerts = [label for suite in verdict.suites for label in alert_labels(suite.alerts)]
    return Step(point, index, verdict.outcome.value, alerts, machines, measured.seconds, measured.calls, cells or "")
