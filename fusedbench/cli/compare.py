"""`fusedbench compare`: two runs cell by cell, suite by suite, as the gate sees them (exit 0 whatever changed;
`alert` is the one that fails)."""

from __future__ import annotations

from fusedbench.cli.common import EXIT_OK, emit
from fusedbench.cli.gating import add_arguments, judged, options, verdict_text, warn_all

BASELINE_DEFAULT = (
    " (default: each group's newest earlier run on the machine at the same benchmark version; with two folders, the"
    " first's newest)"
)


def add_parser(commands) -> None:
    parser = add_arguments(
        commands,
        "compare",
        "compare two runs cell by cell: each metric's change, its interval and a verdict",
        BASELINE_DEFAULT,
        formats=("text", "md", "json", "html"),
        ok="compared, whatever changed: compare shows, alert judges",
    )
    parser.set_defaults(handler=lambda a: command_compare(**options(a)))


def command_compare(*, output_format: str, rows: int, **selection) -> int:
    """Print every compared row that moved, per suite and group (all rows with --format json or html: a page, as the
    report draws one); `selection`: the runs, as `cli.gating.judged` takes them."""
    from fusedbench.regressions.render import comparison_markdown, dump, to_json

    verdict = judged(**selection)
    if output_format == "json":
        emit(dump(to_json(verdict, rows=True)))
    elif output_format == "md":
        emit(comparison_markdown(verdict))
    elif output_format == "html":
        from fusedbench.report import comparison_page

        emit(comparison_page(verdict))
    else:
        emit(verdict_text(verdict, rows=rows, only_alerts=False))
    warn_all(verdict)
    return EXIT_OK
