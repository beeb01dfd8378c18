"""`fusedbench stack`: the pinned stacks of benchmarks/stacks/, their environments made (`create`) and listed."""

from __future__ import annotations

import os

from fusedbench.cli.common import EXIT_OK, command_parser, emit, nonempty
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = command_parser(
        commands,
        "stack",
        "make a pinned stack's environment (create NAME), or list the stacks and their environments (list)",
        page="stacks.md",
    )
    parser.add_argument("action", choices=("create", "list"), help="create NAME's environment, or list the stacks")
    parser.add_argument(
        "name", nargs="?", type=nonempty, metavar="NAME", help="the stack (benchmarks/stacks/NAME.toml)"
    )
    parser.add_argument(
        "--wheels",
        default=None,
        metavar="DIR",
        help="install the pins from the wheels in DIR alone (pip --no-index --find-links DIR; default: pip's index)",
    )
    parser.set_defaults(handler=lambda a: command_stack(a.action, a.name, a.wheels))


def command_stack(action: str, name: str | None, wheels: str | None) -> int:
    """Make stack NAME's environment over this one, or list every stack with its environment's state."""
    from fusedbench.catalog.stacks import read_stack, stack_names
    from fusedbench.measure.stacks import create_environment, environment_dir, made_from, read_marker

    repo = os.getcwd()
    if action == "list":
        if name is not None:
            raise FusedbenchError(
                f"stack list takes no NAME (got {name!r}); `fusedbench stack create {name}` makes one"
            )
        for each in stack_names(repo):
            stack = read_stack(repo, each)
            made = read_marker(environment_dir(repo, each))
            state = "made" if made and made_from(made, stack) else "not made (or from an older lock file)"
            pins = ", ".join(stack.requirements() + [f"preload {p}" for p in stack.preload])
            emit(f"{each}: {pins} ({state}){f' - {stack.description}' if stack.description else ''}\n")
        return EXIT_OK
    if name is None:
        raise FusedbenchError("stack create needs the stack's NAME, e.g. `fusedbench stack create nvmath-0.9`")
    if wheels is not None and not os.path.isdir(wheels):
        raise FusedbenchError(f"--wheels {wheels!r} is no folder: name the folder that holds the stack's wheels")
    stack = read_stack(repo, name)
    pip_args = ["--no-index", "--find-links", os.path.abspath(wheels)] if wheels else []
    python = create_environment(repo, stack, pip_args)
    emit(f"stack {name}: {python} (asv: -E existing:{python}; fusedbench run --stack {name})\n")
    return EXIT_OK
