"""The cache of parsed results: the same files read by the same code give the kept parse; any change reads again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fusedbench.results import cache, loader

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results-provenance")


@pytest.fixture
def parses(monkeypatch, tmp_path):
    """The results folder (a copy to edit) and a list that grows by one at every real parse."""
    monkeypatch.setenv("FUSEDBENCH_CACHE", str(tmp_path / "cache"))
    calls = []
    real = loader._parse_results

    def counted(results_dir, machines):
        calls.append(results_dir)
        return real(results_dir, machines)

    monkeypatch.setattr(loader, "_parse_results", counted)
    folder = tmp_path / "results"
    shutil.copytree(FIXTURE, folder)
    return str(folder), calls


def test_the_same_files_read_twice_are_parsed_once_and_give_the_same_tables(parses):
    folder, calls = parses
    first = loader.load_results(folder)
    second = loader.load_results(folder)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(first.cells, second.cells)
    pd.testing.assert_frame_equal(first.roofs, second.roofs)
    assert [p.text for p in first.problems] == [p.text for p in second.problems]
    loader.load_results(folder, machines=["h200-141gb"])  # another choice of machines: its own parse
    assert len(calls) == 2


def test_a_kept_records_cells_are_unpickled_only_where_read_and_are_the_parsed_ones(parses):
    folder, _ = parses
    parsed = loader.load_results(folder).records
    kept = loader.load_results(folder).records
    assert [(r.machine, r.commit, r.group, r.environment) for r in kept] == [
        (r.machine, r.commit, r.group, r.environment) for r in parsed
    ]
    cells = [r.cells for r in kept]
    assert all(isinstance(c, cache.KeptCells) and c._cells is None for c in cells)  # nothing unpickled yet
    assert kept == parsed and [tuple(c) for c in cells] == [r.cells for r in parsed]
    assert kept[0].cells != parsed[0].cells[1:] and kept[0].cells != "cells"  # equal to its own cells only
    assert [c.key for c in kept[0].cells[1:3]] == [c.key for c in parsed[0].cells[1:3]] and len(kept[0].cells) > 2


def test_an_edited_added_or_removed_file_is_read_again(parses):
    folder, calls = parses
    before = loader.load_results(folder)
    (path,) = [p for p in sorted(os.listdir(os.path.join(folder, "h200-141gb"))) if p.endswith(".json") and "-" in p]
    target = os.path.join(folder, "h200-141gb", path)
    text = Path(target).read_text(encoding="utf-8")
    stat = os.stat(target)
    assert '": ' in text  # the same JSON, one space moved: same size, same modification time, other bytes
    Path(target).write_text(text.replace('": ', '":', 1) + " ", encoding="utf-8")
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(target).st_size == stat.st_size
    loader.load_results(folder)
    assert len(calls) == 2
    with open(os.path.join(folder, "notes.txt"), "w", encoding="utf-8") as stream:
        stream.write("a file more")
    loader.load_results(folder)
    os.remove(os.path.join(folder, "notes.txt"))
    after = loader.load_results(folder)
    assert len(calls) == 4
    assert len(after.cells) == len(before.cells)


def test_a_broken_or_unwritable_cache_only_costs_a_parse(parses, monkeypatch, tmp_path):
    folder, calls = parses
    loader.load_results(folder)
    for kept in (tmp_path / "cache").glob("*.pickle"):
        kept.write_bytes(b"not a pickle")
    assert not loader.load_results(folder).cells.empty and len(calls) == 2
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("FUSEDBENCH_CACHE", str(blocked / "cache"))  # a folder that cannot be made
    assert not loader.load_results(folder).cells.empty and len(calls) == 3


class Planted:
    """What a planted cache would run on unpickling: it leaves a file behind."""

    def __init__(self, flag: Path):
        self.flag = flag

    def __reduce__(self):
        return (Path.touch, (self.flag,))


def test_a_cache_file_fusedbench_did_not_write_is_never_unpickled(parses, tmp_path):
    import pickle

    folder, calls = parses
    loader.load_results(folder)
    (kept,) = (tmp_path / "cache").glob("*.pickle")
    flag = tmp_path / "ran"
    planted = pickle.dumps({"fingerprint": "x", "results": Planted(flag)})
    signed = kept.read_bytes()
    altered = signed[:-9] + bytes([signed[-9] ^ 1]) + signed[-8:]
    for forged in (planted, cache.MAGIC + bytes(32) + planted, altered):
        kept.write_bytes(forged)  # a plain pickle, one signed with another key, a signed one altered
        assert not loader.load_results(folder).cells.empty
        assert not flag.exists()
    assert len(calls) == 4  # each forged cache cost a parse, and was replaced by a signed one


def test_a_key_others_may_read_turns_the_cache_off(parses, tmp_path):
    folder, calls = parses
    loader.load_results(folder)
    (tmp_path / "cache" / "key").chmod(0o644)
    loader.load_results(folder)
    loader.load_results(folder)
    assert len(calls) == 3


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("FUSEDBENCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_folder() == tmp_path / "fusedbench"
    monkeypatch.setenv("FUSEDBENCH_CACHE", str(tmp_path / "mine"))
    assert cache.cache_folder() == tmp_path / "mine"
