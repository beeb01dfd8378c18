"""A cache of parsed results: reading a long history of asv results is most of what a report or a verdict waits
for, and the files rarely change between two reads.

The cache holds one ResultSet per results folder and choice of machines, under the user's cache folder
(`$FUSEDBENCH_CACHE`, else `$XDG_CACHE_HOME/fusedbench`, else `~/.cache/fusedbench`). It is used only where its
fingerprint matches: the path and content of every file under the folder and of fusedbench's own code (content,
not modification times, which are coarser than an edit), so a new run, an edited record or an upgraded
fusedbench reads everything again. A cache that cannot be read or written is skipped silently: it only ever saves
time. Each record's cells (the telemetry and provenance of every cell: most of the cache's bytes, and read by no
report section or verdict) are kept as bytes of their own and unpickled where they are first read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path

from fusedbench.files import write_bytes_atomically

CODE = Path(__file__).resolve().parents[1]  # the fusedbench package: its code decides what a parse yields


def cache_folder() -> Path:
    """Where parsed results are kept."""
    if os.environ.get("FUSEDBENCH_CACHE"):
        return Path(os.environ["FUSEDBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusedbench"


def fingerprint(results_dir: str, machines: Collection[str] | None) -> str:
    """What a parse of `results_dir` depends on: each file's path and content, the machines chosen and every source
    file of fusedbench (hashing 70 MB of results takes a quarter of a second)."""
    digest = hashlib.sha256(repr(sorted(machines) if machines is not None else None).encode())
    for root in (results_dir, str(CODE)):
        for folder, subfolders, files in os.walk(root):
            subfolders.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                if root == str(CODE) and not name.endswith(".py"):
                    continue
                digest.update(f"{os.path.relpath(path, root)}\0".encode())
                with open(path, "rb") as stream:
                    digest.update(hashlib.sha256(stream.read()).digest())
    return digest.hexdigest()


def cached(results_dir: str, machines: Collection[str] | None, parse: Callable):
    """`parse(results_dir, machines)`, or the ResultSet a parse of the same files by the same code gave before."""
    place = cache_folder() / (hashlib.sha256(os.path.abspath(results_dir).encode()).hexdigest()[:16] + ".pickle")
    try:
        key = fingerprint(results_dir, machines)
    except OSError:  # a file went away while listing: parse, which says what is wrong
        return parse(results_dir, machines)
    try:
        with open(place, "rb") as stream:
            kept = pickle.load(stream)
        if kept["fingerprint"] == key:
            return kept["results"]
    except Exception:  # no cache, an old or broken one: parse
        pass
    results = parse(results_dir, machines)
    light = replace(results, records=[replace(r, cells=KeptCells(pickle.dumps(r.cells))) for r in results.records])
    with contextlib.suppress(OSError):
        write_bytes_atomically(str(place), pickle.dumps({"fingerprint": key, "results": light}, protocol=5))
    return results


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
