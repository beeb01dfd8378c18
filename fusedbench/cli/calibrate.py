"""`fusedbench calibrate`: earn a threshold preset per suite from A/A runs (the same code run again on one machine),
and a GPU's confirmation margins from side-by-side A/A records (`regressions.margins`)."""

from __future__ import annotations

from fusedbench.catalog.suites import MLP_GROUPS, SUITES
from fusedbench.cli.common import (
    EXIT_OK,
    command_parser,
    emit,
    folder_arguments,
    load,
    names,
    nonempty,
    render,
    require_gpu,
    table,
)
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = command_parser(
        commands,
        "calibrate",
        "earn a threshold preset per suite from A/A runs (the same code run again)",
        page="calibrate.md",
    )
    folder_arguments(parser)
    parser.add_argument("--machine", type=nonempty, help="the machine the A/A runs or records were made on")
    earned = parser.add_mutually_exclusive_group(required=True)
    earned.add_argument(
        "--runs",
        action="append",
        type=names,
        metavar="C1,C2,...",
        help="a set of A/A runs' commits, all of one measurement code (repeat for another set)",
    )
    earned.add_argument(
        "--side-by-side",
        type=names,
        metavar="C1,C2,...",
        help="the commits of side-by-side A/A records: earn the machine's confirmation margins from them",
    )
    earned.add_argument(
        "--paired",
        type=names,
        metavar="S1,S2,...",
        help="paired A/A sessions (machines <gpu>-paired-<session> of `fusedbench ab` beside an empty commit): earn "
        "their GPU's confirmation margins from them (sessions narrowed by `ab --cells R`: margins of R's cells, which "
        "judge sessions of R alone)",
    )
    earned.add_argument(
        "--measure-side-by-side",
        action="store_true",
        help="on the GPU machine, in a clean checkout: time --suite's workloads with this code on both sides of a "
        "confirmation and keep the record under the results folder (docs/calibrate.md)",
    )
    timed_by_cells = [name for name, groups in SUITES.items() if not set(groups) <= set(MLP_GROUPS)]
    parser.add_argument("--suite", choices=timed_by_cells, help="with --measure-side-by-side (default: quick)")
    parser.add_argument(
        "--bench",
        help="with --measure-side-by-side: only the suite's groups matching this regex; with --side-by-side: margins "
        "earned on the records' groups matching it only (groups whose noise differs earn theirs apart)",
    )
    parser.add_argument(
        "--shard",
        type=shard,
        metavar="K/N",
        help="with --measure-side-by-side: only every N-th workload from the K-th (0-based), a record of its own: a "
        "group too long for one job measured in N (default: 0/1, all)",
    )
    parser.add_argument(
        "--held-out-card",
        type=nonempty,
        metavar="GPU-xxxx",
        help="with --paired: leave out the sessions on the card whose UUID starts so, and judge them by the margins "
        "the others earn: the false-alarm rate on a card the margins never saw (--write keeps those margins)",
    )
    parser.add_argument("--write", action="store_true", help="keep the presets in fusedbench/regressions/presets.json")
    parser.set_defaults(handler=_handler)


def _handler(a) -> int:
    """One of the three jobs; a flag that belongs to another is refused, never ignored."""
    measuring_only = [
        flag
        for flag, value in (("--suite", a.suite), ("--bench", a.bench and not a.side_by_side), ("--shard", a.shard))
        if value
    ]
    if a.measure_side_by_side:
        for flag, value in (("--machine", a.machine), ("--write", a.write)):
            if value:
                raise FusedbenchError(
                    f"{flag} does not go with --measure-side-by-side: it measures on this machine's GPU, under its "
                    "name, and writes a record; earn margins from records with --side-by-side"
                )
        return command_measure_side_by_side(
            results_dir=a.results_dir, suite=a.suite or "quick", bench=a.bench, part=a.shard or (0, 1)
        )
    if a.held_out_card and not a.paired:
        raise FusedbenchError("--held-out-card goes with --paired only; leave it out here")
    if a.paired and not measuring_only:
        if a.machine:
            raise FusedbenchError("--machine does not go with --paired: the sessions name their GPU; leave it out")
        return command_paired_margins(
            results_dir=a.results_dir, sessions=a.paired, held_out=a.held_out_card, write=a.write
        )
    if measuring_only:
        flag = measuring_only[0]
        belongs = "--measure-side-by-side" + (" or --side-by-side" if flag == "--bench" else "")
        raise FusedbenchError(f"{flag} goes with {belongs} only; leave it out here")
    if not a.machine:
        raise FusedbenchError("--machine is needed: the machine whose A/A runs or records to calibrate on")
    if a.write:  # before the work and its table, not after
        from fusedbench.files import check_writable_file
        from fusedbench.regressions.thresholds import PRESETS_FILE

        check_writable_file(
            PRESETS_FILE, "--write", "calibrate from a checkout you can write (pip install -e .), or leave out --write"
        )
    if a.side_by_side:
        return command_margins(
            results_dir=a.results_dir, machine=a.machine, commits=a.side_by_side, bench=a.bench, write=a.write
        )
    return command_calibrate(results_dir=a.results_dir, machine=a.machine, runs=a.runs, write=a.write, strict=a.strict)


def command_calibrate(*, results_dir: str, machine: str, runs: list[list[str]], write: bool, strict: bool) -> int:
    """Derive a threshold preset per suite from A/A runs, print their thresholds, noise and rates (and keep them, with
    --write)."""
    from fusedbench.regressions.calibration import calibrate
    from fusedbench.regressions.thresholds import save_preset

    for commits in runs:
        if len(commits) < 2:
            raise FusedbenchError(f"--runs {','.join(commits)}: a set needs at least two A/A runs of the same code")
    results = load(results_dir, strict=strict, machines=[machine])
    presets = calibrate(results, machine, runs)
    for preset in presets.values():
        emit(render(preset_table(preset, machine), *rate_lines(preset)))
    emit(render(*spread_lines(results, machine, runs)))
    if write:
        for preset in presets.values():
            emit(save_preset(preset) + "\n")
    return EXIT_OK


def command_margins(*, results_dir: str, machine: str, commits: list[str], bench: str | None, write: bool) -> int:
    """Earn the machine's confirmation margins from its side-by-side A/A records (those of the groups matching
    `bench`, where given), print them (keep them, with --write)."""
    from fusedbench.catalog.suites import bench_pattern
    from fusedbench.regressions.margins import earn_margins, read_side_by_side
    from fusedbench.regressions.thresholds import save_preset
    from fusedbench.results.sources import results_folder

    records = read_side_by_side(results_folder(results_dir), machine, commits)
    groups = None
    if bench is not None:
        held = sorted({group for record in records for group in record["groups"]})
        groups = [group for group in held if bench_pattern(bench).search(group)]
        if not groups:
            raise FusedbenchError(
                f"no group of the side-by-side records matches --bench {bench!r}; they hold {', '.join(held)}"
            )
    preset = earn_margins(machine, records, groups)
    emit(render(preset_table(preset, machine), *rate_lines(preset)))
    if write:
        emit(save_preset(preset) + "\n")
    return EXIT_OK


def command_paired_margins(*, results_dir: str, sessions: list[str], held_out: str | None, write: bool) -> int:
    """Earn a GPU's confirmation margins from paired A/A sessions, print them and, with a card held out, how its
    sessions fare under them (keep the margins, with --write)."""
    from fusedbench.regressions.calibration import MIN_SESSIONS
    from fusedbench.regressions.margins import earn_paired_margins
    from fusedbench.regressions.thresholds import save_preset

    if write:
        from fusedbench.files import check_writable_file
        from fusedbench.regressions.thresholds import PRESETS_FILE

        check_writable_file(PRESETS_FILE, "--write", "calibrate from a checkout you can write, or leave out --write")
    results = load(results_dir, strict=True, machines=sessions)
    preset, held = earn_paired_margins(results, sessions, held_out)
    few = {group: n for group, n in preset.rates["sessions_by_group"].items() if n < MIN_SESSIONS}
    if write and few:
        group, n = min(few.items(), key=lambda item: item[1])
        raise FusedbenchError(
            f"--write: {group}'s margins from {n} A/A session(s) would be passed by the next one more than 1 time in "
            f"20 in each class (1 in {n + 1}); earn them from {MIN_SESSIONS} or more, or leave out --write"
        )
    emit(render(preset_table(preset, preset.calibrated_on), *rate_lines(preset)))
    if held:
        out = preset.rates["held_out"]
        emit(
            f"held out {held_out}: {len(out['red'])} of {len(out['sessions'])} sessions red by these margins, "
            f"{out['alerts']} alerts over {out['cells']} cells' times compared"
            f"{': ' + ', '.join(out['red']) if out['red'] else ''}\n"
        )
    if write:
        emit(save_preset(preset) + "\n")
    return EXIT_OK


def shard(value: str) -> tuple[int, int]:
    """'K/N' (0 <= K < N): the K-th of N interleaved parts of the workloads."""
    import argparse

    found = value.split("/")
    if len(found) != 2 or not all(x.strip().isdigit() for x in found) or not 0 <= int(found[0]) < int(found[1]):
        raise argparse.ArgumentTypeError(f"expected K/N with 0 <= K < N (e.g. 0/2 and 1/2), got {value!r}")
    return int(found[0]), int(found[1])


def command_measure_side_by_side(*, results_dir: str, suite: str, bench: str | None, part=(0, 1)) -> int:
    """Time the suite's workloads (every N-th from the K-th, `part` = (K, N)) side by side, this checkout's code on
    both sides, and write the record."""
    import os
    from datetime import datetime, timezone

    from fusedbench.catalog.suites import select_groups
    from fusedbench.files import write_text_atomically
    from fusedbench.measure.checkout import require_clean_checkout
    from fusedbench.measure.machine import gpu_machine_name
    from fusedbench.paired.margins import measure_side_by_side
    from fusedbench.regressions.confirm import ROUNDS
    from fusedbench.regressions.margins import AA_SUFFIX, requests_for
    from fusedbench.regressions.render import dump

    groups = select_groups(suite, bench)
    require_gpu("--measure-side-by-side times cells", "run it on the GPU machine, in a clean checkout")
    checkout = require_clean_checkout(os.getcwd())
    machine = gpu_machine_name()
    requests = requests_for(groups)[part[0] :: part[1]]
    record = measure_side_by_side(os.getcwd(), machine, checkout.commit, requests, ROUNDS["cell"])
    record["shard"] = f"{part[0]}/{part[1]}"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    path = os.path.join(results_dir, machine, f"{checkout.commit[:8]}-side-by-side-{stamp}{AA_SUFFIX}")
    write_text_atomically(path, dump(record))
    cells = sum(len(entry["cells"]["candidate"]) for entry in record["groups"].values())
    emit(
        f"side by side, {checkout.commit[:8]} on both sides: {len(record['groups'])} group(s), {cells} cells x "
        f"{record['rounds']} rounds a side, {record['seconds']:.0f} s ({record['calls']} timed calls); "
        f"{len(record['not_measured'])} not measured\nside-by-side A/A record: {path}\n"
    )
    return EXIT_OK


def preset_table(preset, machine: str):
    from fusedbench.regressions.thresholds import CLASS_LABELS

    rows = [
        (
            key,
            CLASS_LABELS.get(key.split("/")[-1], "groups"),
            f"{value:.1%}",
            preset.noise.get(key, ""),
            effect(preset.rates["minimum_detectable"].get(key)),
        )
        for key, value in (("/".join(k), v) for k, v in preset.thresholds.items())
    ]
    from fusedbench.catalog.deliberate import PAIRED_MARK
    from fusedbench.regressions.thresholds import MARGINS_SUITE

    made_of = f"{sum(map(len, preset.runs))} runs"
    named = [name for names in preset.runs for name in names]
    if preset.suite == MARGINS_SUITE and any(PAIRED_MARK in name for name in named):
        made_of = f"paired sessions {', '.join(name.split(PAIRED_MARK)[1] for name in named)}"
        made_of += f" over the cells --cells {preset.cells!r} finds (they judge sessions of it)" if preset.cells else ""
    elif preset.suite == MARGINS_SUITE:
        made_of = f"side-by-side records at {', '.join(c[:7] for c in named)}"
    return table(
        f"preset {preset.name}: {preset.pairs} A/A pair(s) of {made_of} on {machine}",
        ("metric/class", "times", "threshold", "noise", "detected at 95%"),
        rows,
    )


def rate_lines(preset) -> list[str]:
    """The false-alarm rate by suite and each goal's detection rate, a line each."""
    from fusedbench.regressions.calibration import GOALS
    from fusedbench.regressions.picks import PICK_MARGIN

    if preset.from_sessions:  # margins of paired sessions (`calibration.session_thresholds`)
        widest = " (the widest apart these sessions' two autotunings came out, half a per cent more, rounded up)"
        sessions, red = preset.rates["sessions"], preset.rates["left_out_red"]
        lines = [
            f"false alarms: {red} of {sessions} sessions red by the margins the others earn, each left out in turn "
            f"({preset.rates['false_alarm_per_build']:.1%}; goal: at most 5%); detection below is of resampled rounds, "
            "which wander wider than sessions: a floor",
            f"picks: fused-autotuned's two autotunings judged apart past {max(PICK_MARGIN, preset.picks):.1%}"
            + (widest if preset.picks > PICK_MARGIN else ""),
        ]
    else:
        by_suite = ", ".join(
            f"{name}: {rate:.1%} of builds from {preset.rates['pairs_by_suite'][name]} pair(s)"
            for name, rate in preset.rates["false_alarm_by_suite"].items()
        )
        rate = preset.rates["false_alarm_per_build"]
        lines = [f"false alarms: {rate:.1%} of A/A builds red ({by_suite}; goal: at most 5%)"]
    for goal in GOALS:
        lines.append(f"detection of {goal}: {effect(preset.rates['detection'][goal], 'rate')} (goal: at least 95%)")
    return lines


def spread_lines(results, machine: str, runs: list[list[str]]) -> list[str]:
    """Each set's per-cell A/A spread ((max - min) / median over its runs) of the cells of at least 1 ms, a line each:
    the noise the thresholds are made of, in the terms docs/measurement.md reports it."""
    from fusedbench.regressions.calibration import aa_spreads

    lines = []
    for commits in runs:
        spreads = aa_spreads(results, machine, commits)
        if spreads.empty:
            lines.append(f"A/A spread over {','.join(commits)}: no epilog cell of at least 1 ms was timed in every run")
            continue
        lines.append(
            f"A/A spread over {','.join(commits)}, {len(spreads)} cells of at least 1 ms: median "
            f"{spreads.median():.2%}, 95th percentile {spreads.quantile(0.95):.2%}, max {spreads.max():.2%}"
        )
    return lines


def effect(value, kind: str = "effect") -> str:
    if value is None or value != value:
        return "not reached" if kind == "effect" else "no such cells"
    return f"{value:.1%}"
