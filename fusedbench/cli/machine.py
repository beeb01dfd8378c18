"""`fusedbench machine`: name asv's machine after this GPU (or a tuned run's) and print the name."""

from __future__ import annotations

import os

from fusedbench.cli.common import EXIT_OK, emit
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "machine", help="name asv's machine after this GPU (h100-80gb-hbm3) and print the name, for asv run --machine"
    )
    parser.add_argument(
        "--tune", default=None, metavar="PROVIDER:SETTING=N", help="the tuned run's machine name (see run --tune)"
    )
    parser.set_defaults(handler=lambda a: command_machine(a.tune))


def command_machine(tune: str | None = None) -> int:
    """Name asv's machine after this GPU (or a tuned run's) and print the name (for `asv run --machine`)."""
    from fusedbench.catalog.tuning import parse_tuning
    from fusedbench.errors import GpuUnavailable
    from fusedbench.measure.machine import gpu_machine_name, register_asv_machine

    tuning = parse_tuning(tune) if tune is not None else None
    try:
        name = gpu_machine_name()
    except GpuUnavailable as exc:
        raise FusedbenchError(
            f"{exc}; fusedbench machine names asv's machine after its GPU: run it on the GPU runner"
        ) from None
    if tuning is not None:
        name = tuning.machine(name)
    register_asv_machine(name, cwd=os.getcwd())
    emit(name + "\n")
    return EXIT_OK
