"""`fusedbench machine`: name asv's machine after this GPU (or a tuned or injected run's) and print the name."""

from __future__ import annotations

import os

from fusedbench.cli.common import EXIT_OK, command_parser, deliberate_arguments, deliberate_of, emit
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = command_parser(
        commands,
        "machine",
        "name asv's machine after this GPU (h100-80gb-hbm3) and print the name, for asv run --machine",
        page="ci.md",
    )
    deliberate_arguments(parser, "the machine name of a run with")
    parser.set_defaults(handler=lambda a: command_machine(a.tune, a.inject))


def command_machine(tune: str | None = None, inject: list[str] | None = None) -> int:
    """Name asv's machine after this GPU (or a tuned or injected run's) and print it (for `asv run --machine`)."""
    from fusedbench.errors import GpuUnavailable
    from fusedbench.measure.machine import gpu_machine_name, register_asv_machine

    deliberate = deliberate_of(tune, inject)
    try:
        name = gpu_machine_name()
    except GpuUnavailable as exc:
        raise FusedbenchError(
            f"{exc}; fusedbench machine names asv's machine after its GPU: run it on the GPU runner"
        ) from None
    name = deliberate.machine(name)
    register_asv_machine(name, cwd=os.getcwd())
    emit(name + "\n")
    return EXIT_OK
