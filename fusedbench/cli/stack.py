"""`fusedbench stack`: the pinned stacks of benchmarks/stacks/, their environments made (`create`) and listed."""

from __future__ import annotations

import os

from fusedbench.cli.common import EXIT_OK, command_parser, emit, nonempty
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = command_parser(
        commands,
        "stack",
        "pinned stacks: make one's environment (create NAME), list them, write the newest of one (newest NAME TO) "
        "or the chain from one to another (chain NAME TO)",
        page="stacks.md",
    )
    parser.add_argument("action", choices=("create", "list", "newest", "chain"), help="what to do (docs/stacks.md)")
    parser.add_argument(
        "name", nargs="?", type=nonempty, metavar="NAME", help="the stack (benchmarks/stacks/NAME.toml)"
    )
    parser.add_argument(
        "to", nargs="?", type=nonempty, metavar="TO", help="newest, chain: the stack written, or reached"
    )
    parser.add_argument(
        "--wheels",
        default=None,
        metavar="DIR",
        help="pip's packages from the wheels in DIR alone (pip --no-index --find-links DIR; default: pip's index)",
    )
    parser.set_defaults(handler=lambda a: command_stack(a.action, a.name, a.to, a.wheels))


def command_stack(action: str, name: str | None, to: str | None, wheels: str | None) -> int:
    """Make stack NAME's environment over this one, list every stack, or write the stacks it can move to."""
    from fusedbench.catalog.stacks import read_stack

    repo = os.getcwd()
    wanted = {"list": 0, "create": 1, "newest": 2, "chain": 2}[action]
    given = [n for n in (name, to) if n is not None]
    if len(given) != wanted:
        usage = {"list": "stack list", "create": "stack create NAME", "newest": "stack newest NAME TO",
                 "chain": "stack chain NAME TO"}[action]  # fmt: skip
        raise FusedbenchError(f"`fusedbench {usage}` takes {wanted} stack name(s), got {len(given)}")
    if wheels is not None and not os.path.isdir(wheels):
        raise FusedbenchError(f"--wheels {wheels!r} is no folder: name the folder that holds the stack's wheels")
    pip_args = ["--no-index", "--find-links", os.path.abspath(wheels)] if wheels else []
    if action == "list":
        list_stacks(repo)
    elif action == "create":
        from fusedbench.measure.stacks import create_environment

        python = create_environment(repo, read_stack(repo, name), pip_args)
        emit(f"stack {name}: {python} (asv: -E existing:{python}; fusedbench run --stack {name})\n")
    elif action == "newest":
        from fusedbench.catalog.stack_moves import newest_of, write_stack

        stack = newest_of(read_stack(repo, name), to, pip_args)
        emit(f"stack {to}: {', '.join(stack.requirements())} ({write_stack(repo, stack)})\n")
    else:
        from fusedbench.catalog.stack_moves import chain, write_stack

        steps = chain(read_stack(repo, name), read_stack(repo, to))
        for stack in steps[:-1]:
            write_stack(repo, stack)
        emit(",".join([name, *(stack.name for stack in steps)]) + "\n")
    return EXIT_OK


def list_stacks(repo: str) -> None:
    """Every stack of the checkout, its pins and preloads, and whether its environment was made from this lock file."""
    from fusedbench.catalog.stacks import read_stack, stack_names
    from fusedbench.measure.stacks import environment_dir, made_from, read_marker

    for each in stack_names(repo):
        stack = read_stack(repo, each)
        made = read_marker(environment_dir(repo, each))
        state = "made" if made and made_from(made, stack) else "not made (or from an older lock file)"
        pins = ", ".join(stack.requirements() + [f"preload {p}" for p in stack.preload])
        emit(f"{each}: {pins} ({state}){f' - {stack.description}' if stack.description else ''}\n")
