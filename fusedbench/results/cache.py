"""A cache of parsed results: reading a long history of asv results is most of what a report or a verdict waits
for, and the files rarely change between two reads.

The cache holds one ResultSet per results folder and choice of machines, under the user's cache folder
(`$FUSEDBENCH_CACHE`, else `$XDG_CACHE_HOME/fusedbench`, else `~/.cache/fusedbench`). It is used only where its
fingerprint matches: the path and content of every file under the folder and of fusedbench's own code (content,
not modification times, which are coarser than an edit), so a new run, an edited record or an upgraded
fusedbench reads everything again. A cache that cannot be read or written is skipped silently: it only ever saves
time. Each record's cells (the telemetry and provenance of every cell: most of the cache's bytes, and read by no
report section or verdict) are kept as bytes of their own and unpickled where they are first read.

Unpickling runs code, so a cache file is signed (HMAC-SHA256) with a key of the user's own, made once, private
(0600) in the cache folder: a file fusedbench did not write for this user (another user's, a planted one, a damaged
one) fails the signature and is never unpickled. Only regular files are read, the fingerprint's included
(files.read_regular): a FIFO or a device among the results is named in the fingerprint, never opened.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import pickle
import secrets
import stat
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path

from fusedbench.files import RefusedFile, read_regular, write_bytes_atomically

CODE = Path(__file__).resolve().parents[1]  # the fusedbench package: its code decides what a parse yields
MAGIC = b"fusedbench-cache/1\n"  # then the signature of the pickle, then the pickle
CACHE_LIMIT = 4 * 2**30  # a parse of every committed result pickles to about 70 MB
KEY_BYTES = 32


def cache_folder() -> Path:
    """Where parsed results are kept."""
    if os.environ.get("FUSEDBENCH_CACHE"):
        return Path(os.environ["FUSEDBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusedbench"


def fingerprint(results_dir: str, machines: Collection[str] | None) -> str:
    """What a parse of `results_dir` depends on: each file's path and content, the machines chosen and every source
    file of fusedbench (hashing 70 MB of results takes a quarter of a second)."""
    digest = hashlib.sha256(repr(sorted(machines) if machines is not None else None).encode())
    digest.update(_tree_digest(results_dir))
    digest.update(_code_digest())
    return digest.hexdigest()


@functools.cache
def _code_digest() -> bytes:
    """fusedbench's own sources, hashed once a process (they do not change under a running command)."""
    return _tree_digest(str(CODE), suffix=".py")


def _tree_digest(root: str, suffix: str = "") -> bytes:
    """Every file's path (relative to `root`) and content; a file that is not a regular one by what it is, unread."""
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        for name in sorted(files):
            if not name.endswith(suffix):
                continue
            path = os.path.join(folder, name)
            digest.update(os.fsencode(os.path.relpath(path, root)) + b"\0")  # a name need not be UTF-8
            try:
                digest.update(hashlib.sha256(read_regular(path)).digest())
            except RefusedFile as refused:  # what the parse will say of it, never its content
                digest.update(f"refused: {refused}".encode())
    return digest.digest()


def cached(results_dir: str, machines: Collection[str] | None, parse: Callable):
    """`parse(results_dir, machines)`, or the ResultSet a parse of the same files by the same code gave before."""
    place = cache_folder() / (hashlib.sha256(os.path.abspath(results_dir).encode()).hexdigest()[:16] + ".pickle")
    try:
        key = fingerprint(results_dir, machines)
    except OSError:  # a file went away while listing: parse, which says what is wrong
        return parse(results_dir, machines)
    try:
        signing = signing_key()
    except OSError:  # nowhere private to keep a key: no cache
        return parse(results_dir, machines)
    with contextlib.suppress(OSError):  # no cache yet: parse
        kept = _unpickled(read_regular(str(place), CACHE_LIMIT), signing)
        if kept is not None and kept["fingerprint"] == key:
            return kept["results"]
    results = parse(results_dir, machines)
    light = replace(results, records=[replace(r, cells=KeptCells(pickle.dumps(r.cells))) for r in results.records])
    payload = pickle.dumps({"fingerprint": key, "results": light}, protocol=5)
    with contextlib.suppress(OSError):
        write_bytes_atomically(str(place), MAGIC + hmac.digest(signing, payload, "sha256") + payload)
    return results


def _unpickled(data: bytes, signing: bytes):
    """What a cache file holds, where it carries this user's signature; None for any other file (unread)."""
    signature, payload = data[len(MAGIC) : len(MAGIC) + 32], data[len(MAGIC) + 32 :]
    if not data.startswith(MAGIC) or not hmac.compare_digest(signature, hmac.digest(signing, payload, "sha256")):
        return None
    try:
        return pickle.loads(payload)
    except Exception:  # signed by this user but of an older fusedbench (a class renamed since): parse
        return None


def signing_key() -> bytes:
    """The user's key for the cache's signatures, made on first use: a regular file of this user's that no one else
    may read or write (OSError otherwise, and the cache is not used)."""
    folder = cache_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "key"
    with contextlib.suppress(FileExistsError):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(handle, "wb") as stream:
            stream.write(secrets.token_bytes(KEY_BYTES))
    status = os.lstat(path)
    private = stat.S_ISREG(status.st_mode) and not status.st_mode & 0o077
    if not private or status.st_uid != os.getuid():
        raise PermissionError(f"{path} is not a private file of this user's")
    key = read_regular(str(path), KEY_BYTES)
    if len(key) != KEY_BYTES:
        raise PermissionError(f"{path} is not a key")  # being written by another process right now
    return key


class KeptCells(Sequence):
    """A record's cells as the cache keeps them: pickled bytes, unpickled on first read (a report reads a record's
    environment, not its cells, and unpickling every cell cost more than a second of each report)."""

    def __init__(self, pickled: bytes) -> None:
        self._pickled, self._cells = pickled, None

    def _loaded(self) -> tuple:
        if self._cells is None:
            self._cells = pickle.loads(self._pickled)
        return self._cells

    def __getitem__(self, index):
        return self._loaded()[index]

    def __len__(self) -> int:
        return len(self._loaded())

    def __iter__(self):  # the tuple's own iterator, not Sequence's index after index
        return iter(self._loaded())

    def __eq__(self, other) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __reduce__(self):  # kept pickled as it came
        return (KeptCells, (self._pickled,))
