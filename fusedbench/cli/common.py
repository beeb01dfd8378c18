"""What every command shares: the argument parser's one-line errors, argument types, output that fails as an
error line (never a traceback), rich tables as text, and loading a results folder with its warnings."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence

from fusedbench.errors import FusedbenchError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# What every command's exit codes but 1 mean (`fusedbench.cli.main` makes them so); 1 is a verdict, its own per command.
EXIT_MEANINGS = {
    EXIT_OK: "success",
    EXIT_USAGE: "an error: bad input, unreadable data, a failed write, no GPU where one is needed, or a bug (one "
    "`error:` line saying what to do)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}
# The checkout fusedbench is installed from (an editable install's), whose docs/ has each command's page.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


def command_parser(commands, name: str, summary: str, *, page: str, verdict: str = "", ok: str = "") -> Parser:
    """A command's parser whose --help ends with its exit codes and the page of the docs that covers it (`page`, a
    file in docs/): `verdict` is what exit 1 means for this command ("" where it never exits 1), `ok` what 0 means
    where it is more than success."""
    codes = {**EXIT_MEANINGS, **({EXIT_OK: ok} if ok else {}), **({EXIT_FAILED: verdict} if verdict else {})}
    return commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=help_epilog(codes, f"docs/{page}"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def help_epilog(codes: dict[int, str], page: str) -> str:
    """The end of a --help: what each exit code means, and where the page about it is (`page`, from the checkout's
    root: its full path where this install has the checkout)."""
    path = os.path.join(CHECKOUT, page)
    return (
        "exit codes:\n"
        + "".join(
            textwrap.fill(codes[code], 100, initial_indent=f"  {code:<3}  ", subsequent_indent=" " * 7) + "\n"
            for code in sorted(codes)
        )
        + f"\ndocs: {path if os.path.isfile(path) else page + ' in the fusedbench repository'}"
    )


def names(value: str) -> list[str]:
    """Accept repeated flags and comma-separated lists alike; an empty name is a mistake, not 'all'."""
    found = [part.strip() for part in value.split(",")]
    if not value.strip() or not all(found):
        raise argparse.ArgumentTypeError(f"expected one or more comma-separated names, got {value!r}")
    return found


def nonempty(value: str) -> str:
    """A name that may not be empty (an empty --machine would read as 'unset')."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"expected a name, got {value!r}")
    return value


def seed(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number < 2**32:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 2**32 - 1, got {value!r}")
    return number


def count(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of rows, 0 or more, got {value!r}")
    return int(value)


def console(file=None):
    """A rich console: the terminal's width, or wide enough for the check table when output goes to a file or a
    CI log."""
    from rich.console import Console

    width = shutil.get_terminal_size().columns if sys.stdout is not None and sys.stdout.isatty() else 200
    return Console(file=file, width=width, highlight=False)


def table(title: str, columns: Sequence[str], rows):
    """A rich table whose cells are plain text: `y[y < 0] = 0` is code, not markup."""
    from rich.markup import escape
    from rich.table import Table

    found = Table(title=title)
    for column in columns:
        found.add_column(column, overflow="fold")
    for row in rows:
        found.add_row(*(escape(str(value)) for value in row))
    return found


def render(*items) -> str:
    """Rich tables (or plain strings) as text, so that writing them out fails the way every other output does."""
    out = console(io.StringIO())
    for item in items:
        out.print(item, markup=False, soft_wrap=True) if isinstance(item, str) else out.print(item)
    return out.file.getvalue()


def emit(text: str) -> None:
    """Write to standard output, a full disk or a closed pipe becoming a FusedbenchError, not a traceback."""
    if sys.stdout is None:  # started with standard output closed (`>&-`)
        raise FusedbenchError("standard output is closed: nothing can be printed; give the command somewhere to write")
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        raise
    except OSError as exc:
        silence_stdout()
        raise FusedbenchError(f"could not write to standard output ({exc.strerror or exc})") from None


def silence_stdout() -> None:
    """Point stdout at /dev/null, so Python's own flush at exit does not fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def warn(text: str) -> None:
    sys.stderr.write(f"warning: {text}\n")


def load(results_dir: str, *, strict: bool, machines=None, origin: str = ""):
    """The results of a folder, or of a branch's results/ (`results.sources`: `@results`, `git+URL@REF`), each data
    problem a warning line (an error with --strict). With `machines`, of those only (a command about one machine need
    not read every runner's history); the first, with no results, is an error naming the machines that have some
    (`origin`: the folder, where the command reads two)."""
    import pandas as pd

    from fusedbench.results.loader import load_results, machine_names
    from fusedbench.results.runs import group_runs, require_machine
    from fusedbench.results.sources import results_folder

    folder = results_folder(results_dir)
    results = load_results(folder, machines)
    for problem in results.problems:  # before an error that the machine has no results: they may say why
        warn(problem)
    if machines and machines[0] not in set(group_runs(results)["machine"]):
        require_machine(pd.DataFrame({"machine": machine_names(folder)}), machines[0], origin)
    if strict and results.problems:
        raise FusedbenchError(f"{len(results.problems)} data problem(s) in {results_dir} (--strict)")
    return results


def require_gpu(what: str, instead: str) -> None:
    """A command that measures on this machine's GPU refuses without one, in one line, before it does anything."""
    from fusedbench.errors import GpuUnavailable
    from fusedbench.measure.telemetry import nvml_device

    try:
        nvml_device()
    except (GpuUnavailable, ImportError) as exc:
        raise FusedbenchError(f"{what} on this machine's GPU, and there is none ({exc}); {instead}") from None


def folder_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results_dir",
        nargs="?",
        default="results",
        type=nonempty,
        help="asv's results folder (default: results), or a branch's results/: @REF, git+REPO@REF",
    )
    parser.add_argument("--strict", action="store_true", help="exit 2 on any data problem instead of warning")


def results_arguments(parser: argparse.ArgumentParser) -> None:
    folder_arguments(parser)
    parser.add_argument("--machine", action="extend", type=names, default=[], help="only these machines")
    parser.add_argument("--commit", action="extend", type=names, default=[], help="only these commits (prefixes)")


def deliberate_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """--tune and --inject: a deliberate change to a run, kept apart under a machine of its own (`catalog.deliberate`);
    `what` says what the flags do for this command."""
    from fusedbench.catalog.tuning import SETTINGS, TUNABLE_PROVIDERS

    tune_help = f"{what} one provider ({', '.join(TUNABLE_PROVIDERS)}) with a cuBLASLt setting changed: " + "; ".join(
        f"{name}=N: {meaning}" for name, meaning in SETTINGS.items()
    )
    inject_help = (
        f"{what} chosen cells made slower by a fraction on the GPU, inside their timed region (an injected "
        "regression, to check that an alert catches it): CELL=P%% (EPILOG/DTYPE/SHAPE/PROVIDER) or GROUP=P%%; "
        "repeat the flag for several targets"
    )
    parser.add_argument("--tune", default=None, metavar="PROVIDER:SETTING=N", help=tune_help)
    parser.add_argument("--inject", action="append", default=None, metavar="TARGET=P%", help=inject_help)


def deliberate_of(tune: str | None, inject: Sequence[str] | None):
    """The `catalog.deliberate.Deliberate` that --tune and --inject ask for (FusedbenchError naming a bad value)."""
    from fusedbench.catalog.deliberate import Deliberate
    from fusedbench.catalog.injection import parse_injection
    from fusedbench.catalog.tuning import parse_tuning

    return Deliberate(
        parse_tuning(tune) if tune is not None else None, parse_injection(inject) if inject is not None else None
    )
