"""`fusedbench changes`: where each cell's series over runs shifted (`regressions.changes`), with the commits and
library versions either side."""

from __future__ import annotations

import argparse
import json
import re

from fusedbench.cli.common import EXIT_OK, command_parser, emit, folder_arguments, load, nonempty
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    from fusedbench.regressions.changes import MIN_CHANGE

    parser = command_parser(
        commands,
        "changes",
        "where each cell's series over runs shifted (e-divisive change points), and what changed around it",
        page="changes.md",
    )
    folder_arguments(parser)
    parser.add_argument("--machine", action="append", type=nonempty, help="only this machine's series (repeatable)")
    parser.add_argument("--cells", default=None, metavar="REGEX", help="only the cells whose label REGEX finds")
    parser.add_argument(
        "--min-change",
        type=fraction,
        default=MIN_CHANGE,
        help=f"the smallest shift kept, a fraction (default: {MIN_CHANGE}, {MIN_CHANGE * 100:.0f}%%)",
    )
    parser.add_argument("--format", dest="output_format", choices=("text", "md", "json"), default="text")
    parser.set_defaults(
        handler=lambda a: command_changes(
            a.results_dir, a.machine or [], a.cells, a.min_change, a.output_format, strict=a.strict
        )
    )


def fraction(value: str) -> float:
    """--min-change: a fraction strictly between 0 and 1."""
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, e.g. 0.01 for 1%, got {value!r}")
    return number


def command_changes(results_dir, machines, cells, min_change, output_format, *, strict) -> int:
    """Find and print every series' change points."""
    from fusedbench.regressions.changes import GROUP_SERIES, find_changes, series_inputs

    try:
        pattern = re.compile(cells) if cells is not None else None
    except re.error as exc:
        raise FusedbenchError(f"--cells {cells!r} is not a regular expression ({exc})") from None
    try:
        import otava  # noqa: F401 (the change-point library, an extra)
    except ImportError:
        raise FusedbenchError(
            "fusedbench changes needs the change-point library: pip install -e '.[changes]' (apache-otava)"
        ) from None
    results = load(results_dir, strict=strict, machines=machines or None)
    table, versions = series_inputs(results, machines)
    points = find_changes(table, versions, min_change=min_change)
    if pattern is not None:
        points = [p for p in points if p.cell == GROUP_SERIES or pattern.search(p.cell)]
    if output_format == "json":
        emit(json.dumps([p.to_json() for p in points], indent=1) + "\n")
        return EXIT_OK
    rows = [(p.machine, p.group, p.cell, f"{p.run}/{p.runs}", f"{p.commit_before[:8]} -> {p.commit_after[:8]}",
             f"{p.change:+.1%}", f"{p.pvalue:.3f}", p.what_changed())
            for p in points]  # fmt: skip
    head = ("machine", "group", "cell", "run", "commits", "change", "p", "versions that changed")
    if output_format == "md":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    else:
        widths = [max(len(str(x)) for x in column) for column in zip(head, *rows, strict=True)]
        lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)) for row in (head, *rows)]
    series = f"{len({(p.machine, p.group, p.version) for p in points})} series with a change point" if points else ""
    emit("\n".join(lines if rows else [f"no change point of {min_change:.1%} or more in {results_dir}"]) + "\n")
    if series:
        emit(f"{len(points)} change point(s) in {series}\n")
    return EXIT_OK
