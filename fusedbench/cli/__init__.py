"""The `fusedbench` command: one module per command, each its flags (`add_parser`) beside its body.

Exit codes: 0 success; 1 a check found a failed cell, or `alert` a regression, and nothing else; 2 usage, data,
environment or output error (one `error: ...` line on stderr, never a traceback). Data problems (a results file
that cannot be read, a missing record, an empty folder) are `warning: ...` lines that name the file and what was
lost; with --strict they exit 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from fusedbench import __version__
from fusedbench.cli import (
    advise,
    alert,
    calibrate,
    check,
    compare,
    history,
    listing,
    machine,
    mlp,
    protocols,
    report,
    run,
    table,
)
from fusedbench.cli.common import EXIT_OK, EXIT_USAGE, Parser
from fusedbench.errors import FusedbenchError

# In the order `fusedbench --help` lists them: the main job first, then reading results, then the gate.
COMMANDS = (listing, check, run, machine, table, advise, report, compare, alert, history, mlp, calibrate, protocols)


def build_parser() -> Parser:
    parser = Parser(prog="fusedbench", description="What fusing work into a matmul buys on your GPU.")
    parser.add_argument("--version", action="version", version=f"fusedbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except FusedbenchError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:  # `fusedbench table | head`: the reader has what it wanted
        return EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
