"""The README's commands are ones the CLI accepts, and CI runs the README's own test command."""

import re
import shlex
from pathlib import Path

from fusedbench.cli import build_parser

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def readme_commands(program: str) -> list[list[str]]:
    """Every indented README line that runs `program`, joined across backslash continuations."""
    text = re.sub(r"\\\n\s*", " ", README)
    lines = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    commands = []
    for line in lines:
        for part in re.split(r"&&|;", line.split("  #")[0]):
            words = shlex.split(part.strip())
            if words[:1] == [program]:
                commands.append(words)
    return commands


def test_every_fusedbench_command_in_the_readme_parses():
    commands = readme_commands("fusedbench")
    assert len(commands) >= 10
    parser = build_parser()
    for words in commands:
        parser.parse_args(["default" if "$" in word else word for word in words[1:]])  # SUITE=default


def test_the_plain_asv_ci_line_names_the_machine_and_suite_through_fusedbench():
    (asv_run,) = [words for words in readme_commands("asv") if words[1] == "run"]
    joined = " ".join(asv_run)
    for expected in ("-E existing:same", "--record-samples", "--show-stderr", "--launch-method forkserver"):
        assert expected in joined
    assert "--machine $(fusedbench machine)" in joined or "--machine" in asv_run
    assert "$(fusedbench machine)" in README and '$(fusedbench list --asv-bench "$SUITE")' in README
    assert "$(git rev-parse HEAD)" in README


def test_ci_runs_the_readmes_test_command():
    setup = re.search(r"Run the tests.*?\n\n    ([^\n]+)\n", README, re.S).group(1)
    assert setup == "pip install -e '.[dev]' && python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install --quiet -e '.[dev]'" in ci and "\npython -m pytest\n" in ci
