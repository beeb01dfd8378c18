"""The `fusedbench` command: one module per command, each its flags (`add_parser`) beside its body.

Exit codes: 0 success; 1 a check found a failed cell, or `alert` a regression, and nothing else; 2 usage, data,
environment or output error (one `error: ...` line on stderr, never a traceback), and an unexpected error too (a
bug: one line naming the command and what failed; `--debug` or FUSEDBENCH_DEBUG=1 shows the traceback). Data
problems (a results file that cannot be read, a missing record, an empty folder) are `warning: ...` lines that name
the file and what was lost; with --strict they exit 2. A numeric warning, or any of numpy's or pandas', is an
error: the data that would cause one is refused at load, so one that is left is a bug.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence

from fusedbench import __version__
from fusedbench.cli import (
    ab,
    advise,
    alert,
    bisect,
    calibrate,
    changes,
    check,
    compare,
    history,
    listing,
    machine,
    mlp,
    protocols,
    report,
    run,
    stack,
    table,
)
from fusedbench.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_MEANINGS, EXIT_OK, EXIT_USAGE, Parser, help_epilog
from fusedbench.errors import FusedbenchError

# In the order `fusedbench --help` lists them: the main job first, then reading results, then the gate.
COMMANDS = (
    listing, check, run, stack, machine, table, advise, report, compare, alert, ab, bisect, history, changes, mlp,
    calibrate, protocols,
)  # fmt: skip


DEBUG_VARIABLE = "FUSEDBENCH_DEBUG"


def build_parser() -> Parser:
    verdict = "a verdict, and nothing else: `check` (and so `run`) found a failed cell, `alert` or `ab` is red"
    parser = Parser(
        prog="fusedbench",
        description="What fusing work into a matmul buys on your GPU.",
        epilog=help_epilog({**EXIT_MEANINGS, EXIT_FAILED: verdict}, "README.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fusedbench {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        default=os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"),
        help=f"print the traceback of an unexpected error (also {DEBUG_VARIABLE}=1)",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    _refuse_unknown_leading_options(parser, sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=RuntimeWarning)  # numpy's floating point, pandas' numbers
        warnings.showwarning = _raise_or_one_line
        try:
            return args.handler(args)
        except FusedbenchError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return EXIT_USAGE
        except BrokenPipeError:  # `fusedbench table | head`: the reader has what it wanted
            return EXIT_OK
        except KeyboardInterrupt:
            sys.stderr.write("interrupted\n")
            return EXIT_INTERRUPTED
        except Exception as exc:  # a bug: one line and exit 2, never a traceback that reads as a verdict (exit 1)
            if args.debug:
                traceback.print_exc()
            what = " ".join(f"{type(exc).__name__}: {exc}".split())
            sys.stderr.write(
                f"error: fusedbench {args.command} failed unexpectedly ({what[:400]}); this is a bug in fusedbench: "
                f"run it again with --debug (or {DEBUG_VARIABLE}=1) for the traceback and report it\n"
            )
            return EXIT_USAGE


def _refuse_unknown_leading_options(parser: Parser, argv: list[str]) -> None:
    """An unknown option before the command is named (argparse would say only that the command is missing)."""
    known = {name for action in parser._actions for name in action.option_strings}
    for token in argv:
        if not token.startswith("-"):
            return
        if token.partition("=")[0] not in known:
            parser.error(
                f"unknown option {token!r} before the command: fusedbench's own are {', '.join(sorted(known))}; a "
                "command's options follow the command"
            )


def _raise_or_one_line(message, category, filename, lineno, file=None, line=None) -> None:
    """warnings.showwarning inside a command: numpy's and pandas' warnings raised (the caller's error line), any
    other library's warning one line on stderr, never a source excerpt."""
    if category.__module__.partition(".")[0] in ("numpy", "pandas"):
        raise category(str(message))
    sys.stderr.write(f"warning: {category.__name__}: {' '.join(str(message).split())}\n")
