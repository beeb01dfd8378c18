"""`fusedbench protocols`: screen the measurement protocols on this GPU, each candidate's repeat-to-repeat spread
and time cost side by side (docs/calibrate.md; docs/measurement.md says how the one every run uses was chosen)."""

from __future__ import annotations

import json

from fusedbench.cli.common import EXIT_OK, command_parser, emit, names, render, table
from fusedbench.errors import FusedbenchError
from fusedbench.files import check_writable_file, write_text_atomically

DEFAULT_GROUPS = ("Fp16Seed", "Fp16Llm", "Fp16Membound")


def add_parser(commands) -> None:
    parser = command_parser(
        commands, "protocols", "screen the measurement protocols on this GPU (spread and cost)", page="calibrate.md"
    )
    parser.add_argument(
        "--group",
        action="extend",
        type=names,
        default=[],
        help=f"groups to screen on (default: {', '.join(DEFAULT_GROUPS)})",
    )
    parser.add_argument(
        "--protocol", action="extend", type=names, default=[], help="candidates to screen (default: every one)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs of every candidate on each workload (default 3)")
    parser.add_argument(
        "--workloads",
        type=int,
        default=3,
        help="workloads per group, spread evenly over its epilogs and shapes (default 3; 0: all, which takes long)",
    )
    parser.add_argument("--json", dest="json_path", metavar="FILE", help="also write every run's samples to FILE")
    parser.set_defaults(
        handler=lambda a: command_protocols(
            groups=a.group or list(DEFAULT_GROUPS),
            protocols=a.protocol,
            repeats=a.repeats,
            workloads=a.workloads,
            json_path=a.json_path,
        )
    )


def _chosen(groups, protocols):
    from fusedbench.catalog.suites import GROUPS
    from fusedbench.measure.sampling import PROTOCOLS

    for name, known in (*((g, GROUPS) for g in groups), *((p, PROTOCOLS) for p in protocols)):
        if name not in known:
            kind = "group" if known is GROUPS else "protocol"
            raise FusedbenchError(f"no {kind} {name!r}; pick from {', '.join(known)}")
    return [GROUPS[g] for g in groups], [PROTOCOLS[p] for p in protocols or PROTOCOLS]


def command_protocols(*, groups, protocols, repeats: int, workloads: int, json_path: str | None) -> int:
    """Screen `protocols` (all by default) on `groups`, print the summary, and write the runs to `json_path`."""
    if repeats < 2:
        raise FusedbenchError(f"--repeats {repeats}: a spread needs at least 2 runs of each candidate; pass 2 or more")
    if workloads < 0:
        raise FusedbenchError(f"--workloads {workloads}: pass how many workloads of each group to screen, 0 for all")
    chosen_groups, chosen_protocols = _chosen(groups, protocols)
    if json_path:
        check_writable_file(json_path, "--json")  # before minutes of GPU time, not after
    from fusedbench.measure.gpu import load_gpu_stack
    from fusedbench.measure.gpu.screen import screen_protocols
    from fusedbench.measure.telemetry import TelemetrySampler
    from fusedbench.regressions.screening import SUMMARY_COLUMNS, shown, summarize

    stack = load_gpu_stack("fusedbench protocols")
    with TelemetrySampler() as sampler:  # which card, driver and power cap, and what the GPU went through
        runs = screen_protocols(stack, chosen_groups, chosen_protocols, repeats=repeats, workloads=workloads)
        gpu = sampler.device_facts()
    summary = summarize(runs)
    if json_path:
        facts = {"device": stack.device_name, "gpu": gpu, "versions": stack.versions()}
        payload = {**facts, "telemetry": sampler.summary.to_json(), "summary": summary, "runs": runs}
        write_text_atomically(json_path, json.dumps(payload))

    rows = [[shown(row[column], column) for column in SUMMARY_COLUMNS] for row in summary]
    emit(render(table(f"protocols on {stack.device_name}", SUMMARY_COLUMNS, rows)))
    return EXIT_OK
