"""`fusedbench list`: the catalog (epilogs, dtypes, shape sets, providers, suites), or one suite's asv --bench."""

from __future__ import annotations

import json

from fusedbench.cli.common import EXIT_OK, command_parser, emit, nonempty, render, table


def add_parser(commands) -> None:
    parser = command_parser(
        commands, "list", "print the catalog: epilogs, dtypes, shapes, providers and suites", page="run.md"
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print it as one JSON object")
    output.add_argument(
        "--asv-bench",
        metavar="SUITE",
        type=nonempty,
        help="print only the asv --bench expression that selects SUITE and the ceilings",
    )
    parser.set_defaults(handler=lambda a: command_list(as_json=a.json, asv_bench=a.asv_bench))


def command_list(*, as_json: bool, asv_bench: str | None) -> int:
    """Print the catalog: epilogs, dtypes, shape sets, providers and suites (or one suite's asv --bench)."""
    from fusedbench.catalog.listing import catalog_json
    from fusedbench.catalog.suites import suite_bench_regex

    if asv_bench is not None:
        emit(suite_bench_regex(asv_bench) + "\n")
        return EXIT_OK
    catalog = catalog_json()
    if as_json:
        emit(json.dumps(catalog, indent=2) + "\n")
        return EXIT_OK
    emit(render(*catalog_tables(catalog)))
    return EXIT_OK


def catalog_tables(catalog: dict) -> list:
    """The catalog as five rich tables."""
    from fusedbench.catalog.shapes import shape_label

    epilogs = (
        (e["name"], e["value"], ", ".join(e["inputs"]), ", ".join(e["outputs"]), e["summary"])
        for e in catalog["epilogs"]
    )
    dtypes = (
        (
            d["name"],
            d["operand"],
            d["result"],
            d["compute_type"] or "default",
            f"{d['tolerance']:g}",
            d["shape_multiple"],
        )
        for d in catalog["dtype_details"]
    )
    shapes = (
        (name, shape_label(*s["mkn"]), s["label"], s["source"])
        for name, members in catalog["shape_details"].items()
        for s in members
    )
    providers = ((p["name"], p["description"], ", ".join(p["libraries"])) for p in catalog["provider_details"])
    suites = [
        row
        for suite, groups in catalog["suites"].items()
        for row in (
            *((suite, g["group"], g["dtype"], g["shape_set"], g["cells"]) for g in groups),
            (suite, "(all)", "", "", sum(g["cells"] for g in groups)),
        )
    ]
    return [
        table("epilogs (cublasLtEpilogue_t)", ("name", "value", "inputs", "outputs", "computes"), epilogs),
        table("dtypes", ("name", "operands", "result", "compute type", "tolerance", "M, N, K multiple of"), dtypes),
        table("shape sets, (M,K)x(K,N)", ("set", "shape", "what", "source"), shapes),
        table("providers", ("name", "what", "libraries"), providers),
        table(
            "suites (`fusedbench run --suite NAME`; one asv class per group)",
            ("suite", "group", "dtype", "shapes", "cells"),
            suites,
        ),
    ]
