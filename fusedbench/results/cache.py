"""A cache of parsed results: reading a long history of asv results is most of what a report or a verdict waits
for, and the files rarely change between two reads.

The cache holds one ResultSet per results folder and choice of machines, under the user's cache folder
(`$FUSEDBENCH_CACHE`, else `$XDG_CACHE_HOME/fusedbench`, else `~/.cache/fusedbench`). It is used only where its
fingerprint matches: the path and content of every file under the folder and of fusedbench's own code (content,
not modification times, which are coarser than an edit), so a new run, an edited record or an upgraded
fusedbench reads everything again. A cache that cannot be read or written is skipped silently: it only ever saves
time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from collections.abc import Callable, Collection
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
    with contextlib.suppress(OSError):
        write_bytes_atomically(str(place), pickle.dumps({"fingerprint": key, "results": results}, protocol=5))
    return results
