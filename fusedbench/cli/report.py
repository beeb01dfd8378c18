"""`fusedbench report`: one self-contained HTML speedup report from asv results (and the tidy table, and PNGs)."""

from __future__ import annotations

import os
import time

from fusedbench.cli.common import EXIT_OK, command_parser, emit, load, nonempty, results_arguments


def add_parser(commands) -> None:
    parser = command_parser(
        commands, "report", "one self-contained HTML speedup report from asv results", page="report.md"
    )
    results_arguments(parser)
    parser.add_argument(
        "-o", "--output", dest="out_dir", default="reports", type=nonempty, help="folder for index.html (reports)"
    )
    parser.add_argument(
        "--export", metavar="FILE", type=nonempty, help="also write the tidy table to FILE (.csv or .parquet)"
    )
    parser.add_argument("--png", action="store_true", help="also write PNGs of the key figures (needs kaleido)")
    parser.set_defaults(
        handler=lambda a: command_report(
            results_dir=a.results_dir,
            out_dir=a.out_dir,
            machines=a.machine,
            commits=a.commit,
            export=a.export,
            png=a.png,
            strict=a.strict,
        )
    )


def command_report(
    *, results_dir: str, out_dir: str, machines, commits, export: str | None, png: bool, strict: bool
) -> int:
    """Write the HTML report of asv results."""
    from fusedbench.report import check_report_outputs, write_report

    started = time.perf_counter()
    check_report_outputs(out_dir=out_dir, export=export, png=png)
    results = load(results_dir, strict=strict)
    path = write_report(results, out_dir=out_dir, machines=machines, commits=commits, export=export, png=png)
    size = os.path.getsize(path)
    also = f"; the table in {export}" if export else ""
    emit(f"wrote {path} ({size / 2**20:.1f} MiB) in {time.perf_counter() - started:.1f} s{also}\n")
    return EXIT_OK
