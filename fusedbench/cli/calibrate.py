"""`fusedbench calibrate`: earn a threshold preset per suite from A/A runs (the same code run again on one machine)."""

from __future__ import annotations

from fusedbench.cli.common import EXIT_OK, emit, folder_arguments, load, names, nonempty, render, table
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "calibrate", help="earn a threshold preset per suite from A/A runs (the same code run again)"
    )
    folder_arguments(parser)
    parser.add_argument("--machine", required=True, type=nonempty, help="the machine the A/A runs were made on")
    parser.add_argument(
        "--runs",
        required=True,
        action="append",
        type=names,
        metavar="C1,C2,...",
        help="a set of A/A runs' commits, all of one measurement code (repeat for another set)",
    )
    parser.add_argument("--write", action="store_true", help="keep the presets in fusedbench/regressions/presets.json")
    parser.set_defaults(
        handler=lambda a: command_calibrate(
            results_dir=a.results_dir, machine=a.machine, runs=a.runs, write=a.write, strict=a.strict
        )
    )


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
    return table(
        f"preset {preset.name}: {preset.pairs} A/A pair(s) of {sum(map(len, preset.runs))} runs on {machine}",
        ("metric/class", "times", "threshold", "noise", "detected at 95%"),
        rows,
    )


def rate_lines(preset) -> list[str]:
    """The false-alarm rate by suite and each goal's detection rate, a line each."""
    from fusedbench.regressions.calibration import GOALS

    by_suite = ", ".join(
        f"{name}: {rate:.1%} of builds from {preset.rates['pairs_by_suite'][name]} pair(s)"
        for name, rate in preset.rates["false_alarm_by_suite"].items()
    )
    lines = [
        f"false alarms: {preset.rates['false_alarm_per_build']:.1%} of A/A builds red ({by_suite}; goal: at most 5%)"
    ]
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
