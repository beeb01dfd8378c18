"""`fusedbench history`: one cell's median time at every run on a machine, and where asv's step detection puts the
start of its last step up."""

from __future__ import annotations

from fusedbench.cli.common import EXIT_OK, command_parser, emit, folder_arguments, load, nonempty
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = command_parser(
        commands, "history", "one cell's time over commits on a machine, and where a step began", page="verdict.md"
    )
    folder_arguments(parser)
    parser.add_argument("--machine", required=True, type=nonempty, help="the machine (asv's name, e.g. h100-80gb-hbm3)")
    parser.add_argument(
        "--cell",
        required=True,
        metavar="EPILOG/DTYPE/SHAPE/PROVIDER",
        help="e.g. RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused",
    )
    parser.set_defaults(
        handler=lambda a: command_history(results_dir=a.results_dir, machine=a.machine, cell=a.cell, strict=a.strict)
    )


def command_history(*, results_dir: str, machine: str, cell: str, strict: bool) -> int:
    """One cell's median time at every run on the machine that timed it, in the runs' order (`results.runs`), at the
    newest run's benchmark version, and where asv's step detection puts the start of its last regression."""
    from fusedbench.catalog.model import parse_cell
    from fusedbench.regressions.history import cell_series, regression_start
    from fusedbench.results.runs import group_runs, require_machine

    key = parse_cell(cell)
    results = load(results_dir, strict=strict)
    require_machine(group_runs(results), machine, results_dir)
    series = cell_series(results, machine, key)
    if series.empty:
        raise FusedbenchError(f"cell {cell} has no timed results on {machine}")
    version = series["version"].iloc[-1]  # asv compares within a version: the newest run's
    older = series[series["version"] != version]
    series = series[series["version"] == version]
    for commit, seconds in zip(series["commit"], series["time_s"], strict=True):
        emit(f"{commit[:8]}  {seconds * 1e3:9.3f} ms\n")
    if len(older):
        emit(f"({len(older)} earlier run(s) at other benchmark versions left out: another measurement)\n")
    start = regression_start(series)
    emit(f"step up (asv.step_detect): {'began at ' + start[:8] if start else 'none'}\n")
    return EXIT_OK
