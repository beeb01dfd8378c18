"""`fusedbench ab BASE`: a change measured beside its base on this GPU, every cell of a suite in lock-step, and
judged side by side (`paired.ab`)."""

from __future__ import annotations

import argparse
import os

from fusedbench.cli.common import command_parser, count, nonempty, require_gpu
from fusedbench.cli.gating import gate_exit
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    from fusedbench.measure.sampling import SAMPLES

    parser = command_parser(
        commands,
        "ab",
        "measure the checkout beside BASE on this GPU, every cell of a suite in lock-step, and judge the change",
        page="ab.md",
        ok="green, or not judged (no margins of this GPU's for the groups; the verdict says which)",
        verdict="red: an alert (a cell or group slower than its margin, a new fusion inversion or loss, "
        "a cell that no longer runs), and nothing else",
    )
    parser.add_argument(
        "base", nargs="?", type=nonempty, metavar="BASE", help="the commit the change is measured against"
    )
    parser.add_argument(
        "--stack",
        action="append",
        default=[],
        type=nonempty,
        metavar="NAME",
        help="in place of BASE, twice: the checkout's code in stack NAME's environment (the base), then in the "
        "second's (benchmarks/stacks/NAME.toml, made by `fusedbench stack create NAME`)",
    )
    parser.add_argument("--suite", default="quick", help="the suite whose cells are measured (default: quick)")
    parser.add_argument("--bench", default=None, metavar="REGEX", help="only the suite's groups matching REGEX")
    parser.add_argument(
        "--cells",
        default=None,
        metavar="REGEX",
        help="only the cells whose EPILOG/dtype/shape/provider REGEX finds, e.g. 'RELU_BIAS/.*/fused$'",
    )
    parser.add_argument(
        "--rounds",
        type=paired_rounds,
        default=SAMPLES,
        help=f"timed calls of each cell a side (default: {SAMPLES}, a run's)",
    )
    parser.add_argument("--format", dest="output_format", choices=("text", "md", "json"), default="text")
    parser.add_argument("--rows", type=count, default=40, help="rows of the terminal table (default: 40)")
    parser.set_defaults(
        handler=lambda a: command_ab(
            base=a.base,
            stacks=a.stack,
            suite=a.suite,
            bench=a.bench,
            cells=a.cells,
            rounds=a.rounds,
            output_format=a.output_format,
            rows=a.rows,
        )
    )


def paired_rounds(value: str) -> int:
    """--rounds: a whole number, 2 or more (a paired interval needs two rounds a side)."""
    if not value.isdigit() or int(value) < 2:
        raise argparse.ArgumentTypeError(f"expected a whole number of rounds a side, 2 or more, got {value!r}")
    return int(value)


def command_ab(
    *,
    base: str | None,
    suite: str,
    bench: str | None,
    cells: str | None,
    rounds: int,
    output_format: str,
    rows: int,
    stacks: list[str] = (),
) -> int:
    """Resolve BASE beside the clean checkout (or the checkout in two stacks), measure both sides on this GPU, keep
    them as a paired run, and judge it as alert judges one; exit as alert."""
    from fusedbench.catalog.suites import select_groups
    from fusedbench.cli.gating import judged
    from fusedbench.measure.checkout import asv_results_dir
    from fusedbench.measure.machine import gpu_machine_name
    from fusedbench.paired.ab import (
        cell_groups,
        chosen_requests,
        measure_and_keep,
        resolve_pair,
        resolve_stacks,
        stack_differences,
    )

    if (base is None) == (not stacks):
        raise FusedbenchError("name BASE (a commit) or two stacks (--stack A --stack B), one of the two")
    requests = chosen_requests(cell_groups(select_groups(suite, bench)), cells)
    repo = os.getcwd()
    pair = resolve_pair(repo, base) if base is not None else resolve_stacks(repo, stacks)
    require_gpu("ab measures both sides", "run it on the GPU machine, in the candidate's checkout")
    machines, measured = measure_and_keep(repo, pair, requests, rounds, gpu_machine_name(), cells)
    baseline = f"{machines['baseline']}@{pair.base}" if pair.stacks else None
    verdict = judged(results_dirs=[asv_results_dir(repo)], machine=machines["candidate"], suite=[suite],
                     baseline=baseline, candidate=None, preset=None, strict=True, gate=True)  # fmt: skip
    cells = len(measured.cells["candidate"])
    extra = (f", {len(measured.extra_rounds)} that moved given {max(measured.extra_rounds.values())} more in a "
             "fresh preparation") if measured.extra_rounds else ""  # fmt: skip
    sides = (f"{pair.base[:8]} (base) beside {pair.candidate[:8]} (candidate)" if pair.stacks is None else
             f"stack {pair.stacks[0].name} (base) beside stack {pair.stacks[1].name} (candidate), both at "
             f"{pair.base[:8]}")  # fmt: skip
    kept = " and ".join(dict.fromkeys(machines[side] for side in ("baseline", "candidate")))
    lines = [
        f"measured: {sides} on {measured.hellos['candidate']['device']}, {cells} cells a side, {rounds} rounds"
        f"{extra}, in {measured.seconds:.0f} s ({measured.calls} calls); kept as machine {kept}",
        *(f"stacks differ: {line}" for line in (stack_differences(measured.hellos) if pair.stacks else [])),
        *(f"autotuning: {pick.key.label} picked {pick.algorithms['candidate']} (candidate), "
          f"{pick.algorithms['baseline']} (base): both timed on both sides" for pick in measured.picks),
        *(f"not measured: {line}" for line in measured.not_measured),
    ]  # fmt: skip
    return gate_exit(
        verdict, output_format=output_format, rows=rows, measured=lines, measured_key="measured", command="ab"
    )
