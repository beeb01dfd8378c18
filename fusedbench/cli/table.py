"""`fusedbench table`: the tidy table of asv results, a row per cell and run, as CSV, JSON or Markdown."""

from __future__ import annotations

import sys

from fusedbench.cli.common import EXIT_OK, command_parser, emit, load, results_arguments


def add_parser(commands) -> None:
    parser = command_parser(
        commands, "table", "the tidy table of asv results: a row per cell and run", page="report.md"
    )
    results_arguments(parser)
    parser.add_argument("--format", dest="output_format", choices=("csv", "json", "md"), default="csv")
    parser.add_argument("--mlp", action="store_true", help="the mlp suite's cells (the MLP's training step) instead")
    parser.set_defaults(
        handler=lambda a: command_table(
            results_dir=a.results_dir,
            output_format=a.output_format,
            machines=a.machine,
            commits=a.commit,
            strict=a.strict,
            mlp=a.mlp,
        )
    )


def command_table(*, results_dir: str, output_format: str, machines, commits, strict: bool, mlp: bool = False) -> int:
    """Print the tidy table of asv results: a row per cell and run (the epilog cells, or with `mlp` the mlp suite's)."""
    from fusedbench.results.loader import format_markdown, select_cells

    results = load(results_dir, strict=strict)
    chosen = {kind: select_cells(frame, machines=machines, commits=commits, known=results.runs())
              for kind, frame in (("cells", results.cells), ("mlp", results.mlp))}  # fmt: skip
    table = chosen["mlp" if mlp else "cells"]
    if table.empty and not mlp and not chosen["mlp"].empty:
        sys.stderr.write("note: the runs chosen are the mlp suite's: add --mlp for their table\n")
    if output_format == "csv":
        emit(table.to_csv(index=False))
    elif output_format == "json":
        emit(table.to_json(orient="records", indent=1) + "\n")
    else:
        emit(format_markdown(table))
    return EXIT_OK
