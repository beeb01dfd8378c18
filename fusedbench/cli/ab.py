"""`fusedbench ab BASE`: a change measured beside its base on this GPU, every cell of a suite in lock-step, and
judged side by side (`paired.ab`)."""

from __future__ import annotations

import argparse
import os

from fusedbench.cli.common import command_parser, count, nonempty, require_gpu
from fusedbench.cli.gating import gate_exit


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
    parser.add_argument("base", type=nonempty, metavar="BASE", help="the commit the change is measured against")
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
    *, base: str, suite: str, bench: str | None, cells: str | None, rounds: int, output_format: str, rows: int
) -> int:
    """Resolve BASE beside the clean checkout, measure both codes on this GPU, keep them as a paired run, and judge
    it as alert judges one; exit as alert."""
    from fusedbench.catalog.suites import select_groups
    from fusedbench.cli.gating import judged
    from fusedbench.measure.checkout import asv_results_dir
    from fusedbench.measure.machine import gpu_machine_name
    from fusedbench.paired.ab import cell_groups, chosen_requests, measure_and_keep, resolve_pair

    requests = chosen_requests(cell_groups(select_groups(suite, bench)), cells)
    repo = os.getcwd()
    pair = resolve_pair(repo, base)
    require_gpu("ab measures both codes", "run it on the GPU machine, in the candidate's checkout")
    machine, measured = measure_and_keep(repo, pair, requests, rounds, gpu_machine_name(), cells)
    verdict = judged(results_dirs=[asv_results_dir(repo)], machine=machine, suite=[suite], baseline=None,
                     candidate=None, preset=None, strict=True, gate=True)  # fmt: skip
    cells = len(measured.cells["candidate"])
    extra = (f", {len(measured.extra_rounds)} that moved given {max(measured.extra_rounds.values())} more in a "
             "fresh preparation") if measured.extra_rounds else ""  # fmt: skip
    lines = [
        f"measured: {pair.base[:8]} (base) beside {pair.candidate[:8]} (candidate) on "
        f"{measured.hellos['candidate']['device']}, {cells} cells a side, {rounds} rounds{extra}, in "
        f"{measured.seconds:.0f} s ({measured.calls} calls); kept as machine {machine}",
        *(f"autotuning: {pick.key.label} picked {pick.algorithms['candidate']} (candidate), "
          f"{pick.algorithms['baseline']} (base): both timed on both sides" for pick in measured.picks),
        *(f"not measured: {line}" for line in measured.not_measured),
    ]  # fmt: skip
    return gate_exit(
        verdict, output_format=output_format, rows=rows, measured=lines, measured_key="measured", command="ab"
    )
