"""The asv suite hands the recorded GPU samples to asv unchanged (driven through asv_runner, no GPU)."""

import os

import pytest
from asv_runner.discovery import get_benchmark_from_name

from fusedbench.measure import SAMPLES

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks")


def run_cell(benchmark_id: str, cache) -> object:
    """What asv_runner's `run` does in a benchmark's own process, minus the pickle file."""
    benchmark = get_benchmark_from_name(BENCHMARKS, benchmark_id)
    benchmark.set_cache(cache)
    if benchmark.do_setup():
        return None
    try:
        return benchmark.do_run()
    finally:
        benchmark.do_teardown()


def fake_group(status_for_torch: str = "unsupported"):
    samples = [0.010 + i * 1e-4 for i in range(SAMPLES)]
    return {
        "device": "fake",
        "cells": {
            ("DEFAULT", "(65536,16384)x(16384,8192)", "fused"): {"status": "ok", "reason": "", "samples": samples},
            ("DEFAULT", "(65536,16384)x(16384,8192)", "torch"): {
                "status": status_for_torch,
                "reason": "torch has no op",
                "samples": [],
            },
        },
        "samples": samples,
    }


def test_a_cell_reports_exactly_its_recorded_samples():
    cache = fake_group()
    # Quick's params: 5 epilogs x 1 shape x 6 providers; DEFAULT/seed/fused is index 2.
    result = run_cell("cells.Quick.time_cell-2", cache)
    assert result["number"] == 1
    assert result["samples"] == pytest.approx(cache["samples"])


def test_a_refused_cell_is_an_asv_skip():
    assert run_cell("cells.Quick.time_cell-4", fake_group()) is None  # DEFAULT/seed/torch


def test_every_group_has_a_class_with_its_own_setup_cache():
    from asv_runner.benchmarks._base import get_setup_cache_key
    from asv_runner.discovery import disc_benchmarks

    from fusedbench.suites import GROUPS

    benchmarks = list(disc_benchmarks(BENCHMARKS))
    classes = {b.name.split(".")[1] for b in benchmarks if b.name.startswith("cells.")}
    assert classes == set(GROUPS)
    keys = [get_setup_cache_key(b._setup_cache) for b in benchmarks]
    assert len(keys) == len(set(keys))  # asv shares a cache between benchmarks with the same key
