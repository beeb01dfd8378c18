"""Shared fixtures; `gpu`-marked tests skip with the reason when no usable GPU stack is present."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import tempfile
from pathlib import Path

import pytest

from fusedbench.errors import GpuUnavailable


@functools.cache
def _gpu_stack_or_reason():
    from fusedbench.measure.gpu import load_gpu_stack

    try:
        return load_gpu_stack("running the gpu tests"), None
    except GpuUnavailable as exc:
        return None, str(exc)


def pytest_configure(config):
    """Parsed results are cached in a folder of this session's own, never the user's cache."""
    os.environ["FUSEDBENCH_CACHE"] = tempfile.mkdtemp(prefix="fusedbench-cache-")


def pytest_collection_modifyitems(config, items):
    if not any("gpu" in item.keywords for item in items):
        return
    stack, reason = _gpu_stack_or_reason()
    if stack is None:
        skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def gpu_stack():
    stack, reason = _gpu_stack_or_reason()
    if stack is None:
        pytest.skip(f"needs a GPU: {reason}")
    return stack


@pytest.fixture(scope="session")
def committed_results():
    """results/ as committed, read once for the whole run (about 20 s): never modify it."""
    from pathlib import Path

    from fusedbench.results.loader import load_results

    return load_results(str(Path(__file__).parent.parent / "results"))


ASV_CONF = '{"version": 1, "project": "fusedbench", "repo": ".", "branches": ["main"], "results_dir": "results"}\n'


def git(folder, *args: str) -> str:
    import subprocess

    identity = ["-c", "user.name=fusedbench tests", "-c", "user.email=tests@fusedbench"]
    return subprocess.run(["git", *identity, *args], cwd=folder, check=True, capture_output=True, text=True).stdout


@contextlib.contextmanager
def blocked_after(seconds: int):
    """Code that opens a FIFO waits for a writer forever: fail the test after `seconds` instead."""
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("blocked: a special file was opened"))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)


def make_checkout(root, files=None, folders=None):
    """A committed fusedbench checkout at `root`: asv.conf.json, the suite, `files` (path -> text)
    and `folders` (path -> a folder to copy there)."""
    import shutil
    from pathlib import Path

    root = Path(root)
    for path, text in {"asv.conf.json": ASV_CONF, "benchmarks/cells.py": "# the suite\n", **(files or {})}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for path, source in (folders or {}).items():
        shutil.copytree(source, root / path)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "a fusedbench checkout for a test")
    return root


FINDINGS = Path(__file__).parent.parent / "docs" / "findings"


def finding(topic: str, folded: bool = True) -> str:
    """The text of the dated findings page on `topic` (docs/findings/<date>-<topic>.md), its whitespace folded unless
    asked: the figures a test recomputes from the committed results are quoted from there."""
    (page,) = FINDINGS.glob(f"????-??-??-{topic}.md")
    return " ".join(page.read_text().split()) if folded else page.read_text()
