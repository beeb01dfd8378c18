"""The `fusedbench` command: a thin argparse layer over keyword-only library functions.

Exit codes: 0 success; 1 a check found a failed cell; 2 usage, data or environment error
(one `error: ...` line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from fusedbench import __version__
from fusedbench.errors import FusedbenchError
from fusedbench.files import write_text_atomically
from fusedbench.shapes import shape_label

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


def _names(value: str) -> list[str]:
    """Accept repeated flags and comma-separated lists alike."""
    return [part.strip() for part in value.split(",") if part.strip()]


def _console() -> Console:
    # Wide enough for the check table when output goes to a file or a CI log.
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


def command_list(*, as_json: bool) -> int:
    """Print the catalog: epilogs, dtypes, shape sets and providers."""
    from fusedbench.catalog import catalog_json

    catalog = catalog_json()
    if as_json:
        print(json.dumps(catalog, indent=2))
        return EXIT_OK
    console = _console()
    epilogs = Table(title="epilogs (cublasLtEpilogue_t)")
    for column in ("name", "value", "inputs", "outputs", "computes"):
        epilogs.add_column(column)
    for e in catalog["epilogs"]:
        epilogs.add_row(e["name"], str(e["value"]), ", ".join(e["inputs"]), ", ".join(e["outputs"]), e["summary"])
    dtypes = Table(title="dtypes")
    for column in ("name", "operands", "result", "compute type", "tolerance", "M, N, K multiple of"):
        dtypes.add_column(column)
    for d in catalog["dtype_details"]:
        dtypes.add_row(
            d["name"],
            d["operand"],
            d["result"],
            d["compute_type"] or "default",
            f"{d['tolerance']:g}",
            str(d["shape_multiple"]),
        )
    shapes = Table(title="shape sets, (M,K)x(K,N)")
    for column in ("set", "shape", "what", "source"):
        shapes.add_column(column, overflow="fold")
    for name, members in catalog["shape_details"].items():
        for s in members:
            shapes.add_row(name, shape_label(*s["mkn"]), s["label"], s["source"])
    providers = Table(title="providers")
    for column in ("name", "what"):
        providers.add_column(column, overflow="fold")
    for p in catalog["provider_details"]:
        providers.add_row(p["name"], p["description"])
    for table in (epilogs, dtypes, shapes, providers):
        console.print(table)
    return EXIT_OK


def command_check(
    *,
    shapes: str,
    epilogs: Sequence[str],
    dtypes: Sequence[str],
    providers: Sequence[str],
    seed: int | None,
    json_path: str | None,
) -> int:
    """Verify cells on the GPU; exit 1 if any failed."""
    from fusedbench.check import cell_table, format_totals, reason_table, run_check, summary_table

    console = _console()
    with console.status("checking cells...") as status:
        done = [0]

        def progress(cell):
            done[0] += 1
            status.update(f"checked {done[0]} cells; now {cell.epilog}/{cell.dtype}/{cell.shape}")

        report = run_check(
            shapes=shapes, epilogs=epilogs, dtypes=dtypes, providers=providers, seed=seed, on_cell=progress
        )
    console.print(f"device: {report.device}; cuBLASLt {report.cublaslt_version}; seed {report.seed}")
    console.print(cell_table(report.cells))
    reasons = reason_table(report.cells)
    if reasons is not None:
        console.print(reasons)
    console.print(summary_table(report.cells))
    console.print(format_totals(report.cells))
    if json_path:
        write_text_atomically(json_path, json.dumps(report.to_json(), indent=2) + "\n")
    return EXIT_FAILED if report.failed else EXIT_OK


def command_run(*, suite: str, bench: str | None, launch_method: str) -> int:
    """Check and time a suite on this machine's GPU with asv."""
    from fusedbench.errors import GpuUnavailable
    from fusedbench.run import run_suite

    console = _console()
    try:
        return run_suite(suite=suite, bench=bench, launch_method=launch_method, repo=os.getcwd(), echo=console.print)
    except GpuUnavailable as exc:
        raise FusedbenchError(f"{exc}; without a GPU, `fusedbench table results/` reads committed results") from None


def command_table(*, results_dir: str, output_format: str) -> int:
    """Print the tidy table of asv results: a row per cell and run."""
    from fusedbench.results import format_markdown, load_table

    table = load_table(results_dir)
    if output_format == "csv":
        sys.stdout.write(table.to_csv(index=False))
    elif output_format == "json":
        sys.stdout.write(table.to_json(orient="records", indent=1) + "\n")
    else:
        sys.stdout.write(format_markdown(table))
    return EXIT_OK


def command_report(*, results_dir: str, out_dir: str, machines, commits, export: str | None, png: bool) -> int:
    """Write the HTML report of asv results."""
    import time

    from fusedbench.report import write_report

    started = time.perf_counter()
    path = write_report(
        results_dir=results_dir, out_dir=out_dir, machines=machines, commits=commits, export=export, png=png
    )
    size = os.path.getsize(path)
    _console().print(f"wrote {path} ({size / 2**20:.1f} MiB) in {time.perf_counter() - started:.1f} s")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fusedbench", description="What fusing work into a matmul buys on your GPU.")
    parser.add_argument("--version", action="version", version=f"fusedbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    listing = commands.add_parser("list", help="print the catalog of epilogs, dtypes, shapes and providers")
    listing.add_argument("--json", action="store_true", help="print it as one JSON object")
    listing.set_defaults(handler=lambda a: command_list(as_json=a.json))

    check = commands.add_parser("check", help="verify every provider against float64 references on the GPU")
    check.add_argument("--shapes", default="small", help="shape set to check on (default: small)")
    check.add_argument(
        "--epilog", action="extend", type=_names, default=[], help="epilog(s), repeatable or comma-separated"
    )
    check.add_argument(
        "--dtype", action="extend", type=_names, default=[], help="dtype(s): fp16, bf16, fp32, tf32, fp8"
    )
    check.add_argument(
        "--provider", action="extend", type=_names, default=[], help="provider(s) to check (default: all)"
    )
    check.add_argument("--seed", type=int, default=None, help="seed for the random operands (default: fresh each run)")
    check.add_argument("--json", dest="json_path", metavar="FILE", help="also write every cell as JSON to FILE")
    check.set_defaults(
        handler=lambda a: command_check(
            shapes=a.shapes,
            epilogs=a.epilog,
            dtypes=a.dtype,
            providers=a.provider,
            seed=a.seed,
            json_path=a.json_path,
        )
    )

    run = commands.add_parser(
        "run", help="the main job: check, time a suite with asv, write the report (run from the checkout)"
    )
    run.add_argument("--suite", default="default", help="quick, default or full (default: default)")
    run.add_argument(
        "--bench",
        default=None,
        metavar="REGEX",
        help="only the groups whose class name matches REGEX (e.g. Bf16, Seed)",
    )
    run.add_argument(
        "--launch-method",
        default="forkserver",
        choices=("forkserver", "spawn"),
        help="how asv starts a benchmark process (default: forkserver; see docs/architecture.md)",
    )
    run.set_defaults(handler=lambda a: command_run(suite=a.suite, bench=a.bench, launch_method=a.launch_method))

    table = commands.add_parser("table", help="the tidy table of asv results: a row per cell and run")
    table.add_argument("results_dir", nargs="?", default="results", help="asv's results folder (default: results)")
    table.add_argument("--format", dest="output_format", choices=("csv", "json", "md"), default="csv")
    table.set_defaults(handler=lambda a: command_table(results_dir=a.results_dir, output_format=a.output_format))

    report = commands.add_parser("report", help="one self-contained HTML speedup report from asv results")
    report.add_argument("results_dir", nargs="?", default="results", help="asv's results folder (default: results)")
    report.add_argument("-o", "--output", dest="out_dir", default="reports", help="folder for index.html (reports)")
    report.add_argument("--machine", action="extend", type=_names, default=[], help="only these machines")
    report.add_argument("--commit", action="extend", type=_names, default=[], help="only these commits (prefixes)")
    report.add_argument("--export", metavar="FILE", help="also write the tidy table to FILE (.csv or .parquet)")
    report.add_argument("--png", action="store_true", help="also write PNGs of the key figures (needs kaleido)")
    report.set_defaults(
        handler=lambda a: command_report(
            results_dir=a.results_dir,
            out_dir=a.out_dir,
            machines=a.machine,
            commits=a.commit,
            export=a.export,
            png=a.png,
        )
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except FusedbenchError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
