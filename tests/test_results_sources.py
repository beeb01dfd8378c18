"""Results read from a branch of this repository or of another (`results.sources`): `@REF` and `git+REPO@REF`,
extracted once per commit into the cache, a moved branch read anew, what cannot be read refused in a line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import git, make_checkout

from fusedbench.cli import main

ROOT = Path(__file__).parent.parent
SESSION = "h200-141gb-stack-nvmath-1.0-paired-20261128T112604Z-434d"  # a small machine folder of the committed results


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A code branch without results, and a `results` branch holding one machine's runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = make_checkout(tmp_path / "repo", {"README.md": "code\n"})
    git(root, "checkout", "-q", "-b", "results")
    shutil.copytree(ROOT / "results" / SESSION, root / "results" / SESSION)
    shutil.copy(ROOT / "results" / "benchmarks.json", root / "results")
    git(root, "add", "results")
    git(root, "commit", "-qm", "a run")
    git(root, "checkout", "-q", "main")
    monkeypatch.chdir(root)
    return root


def table(capsys, source: str) -> tuple[int, str, str]:
    code = main(["table", source, "--format", "csv"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_branchs_results_are_read_without_a_checkout_and_read_anew_when_it_moves(repo, tmp_path, capsys):
    assert not (repo / "results").exists()
    code, out, _ = table(capsys, "@results")
    assert code == 0 and out.count(SESSION) == 192  # every cell of its two groups
    (cached,) = (tmp_path / "cache" / "fusedbench" / "results").iterdir()
    assert cached.name == git(repo, "rev-parse", "results").strip()
    git(repo, "checkout", "-q", "results")
    shutil.rmtree(repo / "results" / SESSION)
    git(repo, "commit", "-qam", "the run taken back")
    git(repo, "checkout", "-q", "main")
    code, out, _ = table(capsys, "@results")
    assert code == 0 and SESSION not in out  # the branch's newest commit, not the cached one
    assert len(list((tmp_path / "cache" / "fusedbench" / "results").iterdir())) == 2


def test_another_repositorys_branch_is_fetched_and_read(repo, capsys):
    code, out, _ = table(capsys, f"git+{repo}@results")
    assert code == 0 and out.count(SESSION) == 192


@pytest.mark.parametrize(
    "source, says",
    [
        ("@nosuch", "'@nosuch': 'nosuch' is no branch, tag or commit of"),
        ("@main", "'@main': "),
        ("git+/no/such/repository@results", "git cannot fetch 'results' from /no/such/repository"),
    ],
)
def test_a_source_that_cannot_be_read_is_one_line(repo, capsys, source, says):
    code, _, err = table(capsys, source)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_a_remote_that_reads_as_a_git_option_is_fetched_as_a_url_and_runs_nothing(repo, tmp_path, capsys):
    touched = tmp_path / "ran"
    code, _, err = table(capsys, f"git+--upload-pack=touch {touched}@results")
    assert code == 2 and "git cannot fetch" in err and not touched.exists()


def test_alert_confirm_refuses_to_write_into_a_refs_extracted_copy(repo, capsys):
    code = main(["alert", "@results", "--confirm"])
    err = capsys.readouterr().err
    assert code == 2 and "--confirm writes its record into the results folder" in err
