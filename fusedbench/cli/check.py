"""`fusedbench check`: every provider against float64 references on the GPU; exit 1 where a cell failed."""

from __future__ import annotations

import json
from collections.abc import Sequence

from fusedbench.cli.common import EXIT_FAILED, EXIT_OK, command_parser, console, emit, names, render, seed
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = command_parser(
        commands,
        "check",
        "verify every provider against float64 references on the GPU",
        page="run.md",
        verdict="a cell failed: a wrong result or an error",
    )
    parser.add_argument("--shapes", default="small", help="shape set to check on (default: small)")
    parser.add_argument(
        "--suite", help="check the epilogs, dtypes and providers that suite times (quick, default, full, peers)"
    )
    parser.add_argument(
        "--epilog", action="extend", type=names, default=[], help="epilog(s), repeatable or comma-separated"
    )
    parser.add_argument(
        "--dtype", action="extend", type=names, default=[], help="dtype(s): fp16, bf16, fp32, tf32, fp8"
    )
    parser.add_argument(
        "--provider", action="extend", type=names, default=[], help="provider(s) to check (default: all)"
    )
    parser.add_argument(
        "--seed", type=seed, default=None, help="seed for the random operands (default: fresh each run)"
    )
    parser.add_argument("--json", dest="json_path", metavar="FILE", help="also write every cell as JSON to FILE")
    parser.set_defaults(
        handler=lambda a: command_check(
            shapes=a.shapes,
            suite=a.suite,
            epilogs=a.epilog,
            dtypes=a.dtype,
            providers=a.provider,
            seed=a.seed,
            json_path=a.json_path,
        )
    )


def suite_cells(suite: str, epilogs, dtypes, providers) -> tuple[list, list, list]:
    """The epilogs, dtypes and providers a suite times, where none were named."""
    from fusedbench.catalog.suites import suite_groups

    groups = suite_groups(suite)
    if not any(g.epilogs for g in groups):
        raise FusedbenchError(
            f"suite {suite!r} times the MLP's training step, verified as it is measured (`fusedbench run --suite "
            f"{suite}`); check verifies epilog cells: pass --suite quick, default, full or peers"
        )
    return (
        epilogs or sorted({e for g in groups for e in g.epilogs}),
        dtypes or sorted({g.dtype for g in groups}),
        providers or sorted({p for g in groups for p in g.providers}),
    )


def command_check(
    *,
    shapes: str,
    suite: str | None,
    epilogs: Sequence[str],
    dtypes: Sequence[str],
    providers: Sequence[str],
    seed: int | None,
    json_path: str | None,
) -> int:
    """Verify cells on the GPU; exit 1 if any failed."""
    from fusedbench.catalog.providers import select_providers
    from fusedbench.files import check_writable_file, write_text_atomically
    from fusedbench.measure.check import cell_table, format_totals, reason_table, run_check, summary_table

    if json_path:
        check_writable_file(json_path, "--json")
    if suite:
        epilogs, dtypes, providers = suite_cells(suite, epilogs, dtypes, providers)
    select_providers(providers)
    out = console()
    with out.status("checking cells...") as status:
        done = [0]

        def progress(cell):
            done[0] += 1
            status.update(f"checked {done[0]} cells; now {cell.key.epilog}/{cell.key.dtype}/{cell.key.shape}")

        report = run_check(
            shapes=shapes, epilogs=epilogs, dtypes=dtypes, providers=providers, seed=seed, on_cell=progress
        )
    tables = (cell_table(report.cells), reason_table(report.cells), summary_table(report.cells))
    emit(
        render(
            f"device: {report.device}; cuBLASLt {report.cublaslt_version}; seed {report.seed}",
            *(printed for printed in tables if printed is not None),
            format_totals(report.cells),
        )
    )
    if json_path:
        write_text_atomically(json_path, json.dumps(report.to_json(), indent=2) + "\n")
    return EXIT_FAILED if report.failed else EXIT_OK
