"""The README and docs/ hold to the code: every command they show parses, each command's flags are documented on the
page its --help names (and no flag the parser lacks), every link resolves, every committed run is listed, what a
transcript shows is what the command prints, and CI runs the README's own test command."""

import re
import shlex
from pathlib import Path

import pytest

from fusedbench.cli import build_parser, main

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
# The manual and the method; findings are dated records of what was run then.
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
FINDINGS = sorted((DOCS / "findings").glob("*.md"))


def subcommands() -> dict:
    (action,) = [a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction"]
    return action.choices


def shown_commands(text: str, program: str) -> list[list[str]]:
    """Every indented line that runs `program` (a transcript's `$ ` dropped), joined across backslash continuations."""
    text = re.sub(r"\\\n\s*", " ", text)
    commands, output = [], False
    for line in text.splitlines():
        output = output and line.startswith("    ")  # a transcript's output runs to its block's end
        if not line.startswith("    ") or output:
            continue
        output = line.startswith("    $ ")
        for part in re.split(r"&&|;", line.strip().removeprefix("$ ").split("  #")[0]):
            if part.split()[:1] == [program]:
                commands.append(shlex.split(re.split(r"\s>>?\s", part)[0]))  # a redirection is the shell's
    return commands


def test_every_fusedbench_command_the_docs_show_parses():
    parser, shown = build_parser(), 0
    for page in PAGES:
        for words in shown_commands(page.read_text(), "fusedbench"):
            arguments = ["default" if "$" in word else word for word in words[1:]]  # SUITE=default, $(...)
            try:
                parser.parse_args(arguments)
            except SystemExit:
                pytest.fail(f"{page.relative_to(ROOT)} shows a command the parser refuses: {shlex.join(words)}")
            shown += 1
    assert shown >= 40


def page_of(command) -> Path:
    """The page a command's --help names."""
    (path,) = re.findall(r"^docs: (\S+)$", command.format_help(), re.M)
    return Path(path)


def documented_flags(page: Path) -> dict[str, set[str]]:
    """Per `### \\`fusedbench CMD\\`` section of a page, the flags and positionals (as --help names them) its table's
    first column names."""
    found, command = {}, None
    for line in page.read_text().splitlines():
        heading = re.match(r"### `fusedbench (\w+)`", line)
        if heading:
            command = heading.group(1)
            found[command] = set()
        elif line.startswith("#"):
            command = None
        elif command and line.startswith("| `"):
            first = line.split("|")[1]
            found[command] |= set(re.findall(r"`(-[-\w]+|[A-Z_]+)`", first))
    return found


def exit_codes(help_text: str) -> list[str]:
    return re.findall(r"^  (\d+) ", help_text.split("exit codes:\n")[1], re.M)


def test_fusedbench_help_names_the_exit_codes_and_the_readme():
    text = build_parser().format_help()
    assert exit_codes(text) == ["0", "1", "2", "130"]
    assert re.search(r"^docs: (\S+)$", text, re.M).group(1) == str(ROOT / "README.md")


def test_each_commands_help_names_its_exit_codes_and_its_page():
    verdicts = {"check", "run", "alert", "ab"}  # the only commands whose exit 1 means anything: a verdict
    for name, command in subcommands().items():
        expected = ["0", "1", "2", "130"] if name in verdicts else ["0", "2", "130"]
        assert exit_codes(command.format_help()) == expected, name
        page = page_of(command)
        assert page.is_file() and page.parent == DOCS, (name, page)


def test_every_flag_is_documented_on_its_commands_page_and_no_other():
    documented = {}
    for page in PAGES:
        for name, flags in documented_flags(page).items():
            assert name not in documented, f"fusedbench {name}'s flags are documented twice"
            documented[name] = (page, flags)
    for name, command in subcommands().items():
        page, flags = documented.get(name, (None, set()))
        assert page == DOCS / page_of(command).name, f"fusedbench {name}: its flags belong on {page_of(command)}"
        options = {o for a in command._actions for o in a.option_strings if o not in ("-h", "--help")}
        options |= {a.metavar or a.dest.upper() for a in command._actions if not a.option_strings}
        assert flags == options, f"fusedbench {name}: documented {sorted(flags)}, the parser's {sorted(options)}"


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_resolves_to_a_file_and_its_heading():
    for page in PAGES + FINDINGS:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"https?:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            assert resolved.exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"
            if anchor:
                headings = re.findall(r"^#+ (.*)$", resolved.read_text(), re.M)
                assert anchor in map(slug, headings), f"{page.relative_to(ROOT)} links {target}: no such heading"


def test_the_readme_reads_in_two_minutes_and_the_method_pages_in_one_sitting():
    assert len(README.splitlines()) <= 200
    for name in ("measurement.md", "regressions.md"):
        assert len((DOCS / name).read_text().splitlines()) <= 150, name


def test_findings_are_dated_and_every_one_is_indexed():
    index = (DOCS / "findings" / "README.md").read_text()
    dated = [page for page in FINDINGS if page.name != "README.md"]
    assert len(dated) >= 10
    for page in dated:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md", page.name), page.name
        assert page.read_text().splitlines()[2].startswith("Measured 20"), f"{page.name} does not say when"
        assert f"]({page.name})" in index, f"{page.name} is not in the findings index"


def test_every_committed_run_is_listed_in_results_md_and_every_listed_run_is_committed():
    rows = [line.split("|")[1:3] for line in (DOCS / "results.md").read_text().splitlines() if line.startswith("| `")]
    listed = [(machines, set(re.findall(r"\b[0-9a-f]{7}\b", commits))) for machines, commits in rows]
    committed = set()
    for folder in (p for p in (ROOT / "results").iterdir() if p.is_dir()):
        for name in {m.group(1) for f in folder.iterdir() if (m := re.match(r"([0-9a-f]{8})-", f.name))}:
            committed.add((folder.name, name[:7]))
    for machine, commit in sorted(committed):
        names = (f"`{machine}`", f"`-{machine.rsplit('-', 1)[1]}`")
        assert any(commit in commits and any(n in machines for n in names) for machines, commits in listed), (
            f"docs/results.md does not list {machine} at {commit}"
        )
    for _, commits in listed:
        assert commits <= {commit for _, commit in committed}, f"docs/results.md lists a run not in results/: {commits}"


def transcripts() -> list[tuple[Path, list[str], list[str]]]:
    """Each `$ fusedbench ...` block of the docs: the page, the command, and the lines it shows."""
    found = []
    for page in PAGES:
        for block in re.findall(r"^    \$ (fusedbench .*)\n((?:    (?!\$).*\n)*)", page.read_text(), re.M):
            found.append((page, shlex.split(block[0])[1:], [line[4:] for line in block[1].splitlines()]))
    return found


@pytest.mark.parametrize("page, argv, shown", transcripts(), ids=lambda v: v.name if isinstance(v, Path) else None)
def test_a_transcript_shows_what_the_command_prints(page, argv, shown, capsys, monkeypatch):
    """On the committed results: each shown line is the printed one ('...' at its end: the start of it)."""
    monkeypatch.chdir(ROOT)
    main(argv)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) >= len(shown)
    for wanted, line in zip(shown, printed[: len(shown)], strict=True):
        assert line.startswith(wanted[:-3]) if wanted.endswith("...") else line == wanted, (page.name, wanted, line)


def test_the_plain_asv_ci_line_names_the_machine_and_suite_through_fusedbench():
    ci = (DOCS / "ci.md").read_text()
    (asv_run,) = [words for words in shown_commands(ci, "asv") if words[1] == "run"]
    joined = " ".join(asv_run)
    for expected in ("-E existing:same", "--record-samples", "--show-stderr", "--launch-method forkserver"):
        assert expected in joined
    assert "--machine $MACHINE" in joined and "MACHINE=$(fusedbench machine)" in ci
    assert '$(fusedbench list --asv-bench "$SUITE")' in ci and "$(git rev-parse HEAD)" in ci


def test_the_readme_installs_every_extra_the_main_commands_need_and_ci_runs_its_test_command():
    install = re.search(r"install and run the main job.*?\n\n    ([^\n]+)\n", README, re.S).group(1)
    assert install == "pip install -e '.[cu13,torch,mlp]' && fusedbench run"  # mlp: `fusedbench mlp`'s digits
    setup = re.search(r"Run the tests.*?\n\n    ([^\n]+)\n", README, re.S).group(1)
    assert setup == "pip install -e '.[dev]' && python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install --quiet -e '.[dev]'" in ci and "\npython -m pytest\n" in ci
