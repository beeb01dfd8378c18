"""The report's forked children: their value, their failures as one line, and the same page with or without them."""

from __future__ import annotations

import os
import sys

import pytest

from fusedbench.errors import FusedbenchError
from fusedbench.report import forked, render_report
from fusedbench.report.forked import in_child
from fusedbench.report.peers import in_peers_suite
from fusedbench.results.loader import load_results
from tests.test_report import FIXTURE

needs_fork = pytest.mark.skipif(not forked.can_fork(), reason="fork and a second core are needed for a child")


def _pid_and(value):
    return os.getpid(), value


def _fails():
    raise FusedbenchError("results/x.json: not asv's results")


def _dies():
    os._exit(3)


def _unpicklable():
    return lambda: None


@needs_fork
def test_a_child_computes_beside_the_parent_and_its_failures_are_raised_here():
    pid, value = in_child(_pid_and, {"cells": 3})()
    assert value == {"cells": 3} and pid != os.getpid()
    with pytest.raises(FusedbenchError, match="not asv's results"):
        in_child(_fails)()
    with pytest.raises(FusedbenchError, match=r"\(_dies\) ended without a result \(exit code 3\)"):
        in_child(_dies)()
    with pytest.raises(FusedbenchError, match=r"\(_unpicklable\) failed: .*pickle"):
        in_child(_unpicklable)()


def test_without_fork_the_work_is_done_at_once_in_the_caller(monkeypatch):
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    pending = in_child(_pid_and, 1)
    assert pending() == (os.getpid(), 1)
    with pytest.raises(FusedbenchError, match="not asv's results"):
        in_child(_fails)


@needs_fork
def test_the_page_is_the_same_bytes_with_children_and_without(monkeypatch):
    results = load_results(FIXTURE)
    with_children = render_report(results)
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    assert render_report(results) == with_children


@pytest.mark.skipif(sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2, reason="Linux and two cores fork")
def test_on_linux_with_two_cores_the_report_forks_each_machines_verdicts_and_peers_and_the_mlp_section(monkeypatch):
    import multiprocessing

    started = []
    process = multiprocessing.get_context("fork").Process
    monkeypatch.setattr(process, "start", lambda self, start=process.start: (started.append(1), start(self))[1])
    results = load_results(FIXTURE)
    render_report(results)
    peers = results.cells.loc[in_peers_suite(results.cells), "machine"]
    assert len(started) == len(set(results.cells["machine"])) + len(set(peers)) + 1
