"""`fusedbench advise`: the dispatch policy per machine, dtype, epilog and shape class, with its evidence."""

from __future__ import annotations

import math

from fusedbench.cli.common import EXIT_OK, command_parser, emit, folder_arguments, load, names, render, table


def add_parser(commands) -> None:
    parser = command_parser(
        commands,
        "advise",
        "the dispatch policy per machine, dtype, epilog and shape class: fuse, fuse-autotuned, unfused or a peer",
        page="report.md",
    )
    folder_arguments(parser)
    parser.add_argument(
        "--machine",
        action="extend",
        type=names,
        default=[],
        help="only these machines (default: every GPU's; a tuned run's machine only when named)",
    )
    parser.add_argument("--format", dest="output_format", choices=("text", "md", "json"), default="text")
    parser.set_defaults(
        handler=lambda a: command_advise(
            results_dir=a.results_dir, machines=a.machine, output_format=a.output_format, strict=a.strict
        )
    )


def command_advise(*, results_dir: str, machines, output_format: str, strict: bool) -> int:
    """Print the dispatch policy per machine, dtype, epilog and shape class, with its evidence."""
    import pandas

    from fusedbench.analysis.advice import SHAPE_CLASSES, advise
    from fusedbench.results.loader import format_markdown

    policy = advise(load(results_dir, strict=strict), machines)
    if output_format == "json":
        emit(policy.to_json(orient="records", indent=1) + "\n")
        return EXIT_OK
    shown = policy.assign(
        ratio=[interval_text(r.ratio, r.ci_low, r.ci_high) for r in policy.itertuples()],
        regret=[interval_text(r.regret, r.regret_low, r.regret_high) for r in policy.itertuples()],
        kernels=["" if pandas.isna(k) else str(k) for k in policy["kernels"]],
    )[["machine", "commit", "dtype", "epilog", "shape_class", "advice", "ratio", "kernels", "regret", "why"]]
    classes = "; ".join(f"{name}: {label}" for name, label in SHAPE_CLASSES.items())
    legend = f"ratio: unfused / fused, 95% interval (above 1: fusion pays); regret: fused / fused-autotuned; {classes}"
    if output_format == "md":
        emit(format_markdown(shown) + "\n" + legend + "\n")
        return EXIT_OK
    emit(render(table("fusedbench advise", list(shown.columns), shown.itertuples(index=False))) + legend + "\n")
    return EXIT_OK


def interval_text(value: float, low: float, high: float) -> str:
    if math.isnan(value):
        return ""
    return f"{value:.2f}" if math.isnan(low) else f"{value:.2f} [{low:.2f}, {high:.2f}]"
