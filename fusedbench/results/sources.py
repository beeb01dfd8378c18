"""Where results are read from: a folder, or the `results/` of a branch (any git ref) of this repository or another.

The history outgrows the code: runs and regenerated reports belong on a branch of their own, and every command that
reads results can read them there, without a checkout of it:

    results/                              a folder (asv's results folder)
    @results, @origin/results             the results/ folder of a ref of the checkout's repository
    git+URL@REF                           of a ref of another repository (a path or a URL git can fetch)

A ref's folder is extracted once per commit (`git archive`) into the user's cache, keyed by the commit, so a branch
that moves is read anew and one that does not is read from the cache; an extraction that fails leaves nothing
behind. A remote ref is fetched (depth 1) into a bare repository of the cache first.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile

from fusedbench.errors import FusedbenchError

REMOTE = re.compile(r"git\+(?P<repo>.+)@(?P<ref>[^@\s]+)")
RESULTS = "results"


def cache_dir() -> str:
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fusedbench")


def is_ref(source: str) -> bool:
    """Whether `source` names a ref's results (read from an extracted copy) rather than a folder."""
    return source.startswith("@") or REMOTE.fullmatch(source) is not None


def results_folder(source: str, repo: str = ".") -> str:
    """The local folder `source` names (module docstring); FusedbenchError naming what cannot be read."""
    if source.startswith("@"):
        return _extracted(repo, source[1:], source)
    remote = REMOTE.fullmatch(source)
    if remote:
        return _extracted(*_fetched(remote["repo"], remote["ref"], source), source)
    return source


def _git(repo: str, *args: str, binary: bool = False):
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=not binary)


def _extracted(repo: str, ref: str, source: str) -> str:
    """The results/ folder of `ref` in `repo`, extracted into the cache (once per commit)."""
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found.returncode != 0 or not found.stdout.strip():
        raise FusedbenchError(f"{source!r}: {ref!r} is no branch, tag or commit of {os.path.abspath(repo)}; "
                              "`git branch -a` lists them (fetch it first where it is a remote's)")  # fmt: skip
    commit = found.stdout.strip()
    folder = os.path.join(cache_dir(), "results", commit)
    if os.path.isdir(os.path.join(folder, RESULTS)):
        return os.path.join(folder, RESULTS)
    archived = _git(repo, "archive", "--format=tar", commit, RESULTS, binary=True)
    if archived.returncode != 0:
        raise FusedbenchError(f"{source!r}: {commit[:8]} has no {RESULTS}/ folder to read "
                              f"({archived.stderr.decode().strip().splitlines()[-1:]})")  # fmt: skip
    try:
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=f".{commit[:8]}-", dir=os.path.dirname(folder))
    except OSError as exc:
        raise FusedbenchError(f"{source!r}: the cache {cache_dir()} cannot be written ({exc.strerror}); set "
                              "XDG_CACHE_HOME to a writable folder") from None  # fmt: skip
    try:
        with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
            tar.extractall(scratch, filter="data")
        os.replace(scratch, folder)  # whole or not at all; another process's identical copy may have won the race
    except OSError as exc:
        if not os.path.isdir(os.path.join(folder, RESULTS)):
            raise FusedbenchError(f"{source!r}: its results cannot be extracted into {folder} ({exc})") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return os.path.join(folder, RESULTS)


def _fetched(url: str, ref: str, source: str) -> tuple[str, str]:
    """(a bare repository of the cache, the local ref) with `ref` of `url` fetched into it (depth 1), under a ref of
    its own (two reads of one remote's refs at once do not share FETCH_HEAD)."""
    bare = os.path.join(cache_dir(), "remotes", hashlib.sha256(url.encode()).hexdigest()[:16])
    if not os.path.isdir(bare):
        made = subprocess.run(["git", "init", "-q", "--bare", bare], capture_output=True, text=True)
        if made.returncode != 0:
            raise FusedbenchError(f"{source!r}: the cache's repository cannot be made ({made.stderr.strip()})")
    local = f"refs/fusedbench/{hashlib.sha256(ref.encode()).hexdigest()[:16]}"
    fetched = _git(bare, "fetch", "-q", "--depth", "1", "--", url, f"+{ref}:{local}")  # `--`: a URL is no option
    if fetched.returncode != 0:
        tail = fetched.stderr.strip().splitlines()[-1:] or ["?"]
        raise FusedbenchError(f"{source!r}: git cannot fetch {ref!r} from {url} ({tail[0]})")
    return bare, local
