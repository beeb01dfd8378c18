"""The protocol screen's analysis: each candidate's repeat-to-repeat spread by cell class, its cost, and what
fusing buys under it. The GPU side (`measure.gpu.screen`) ran on the device as `fusedbench protocols`, whose
committed runs the last test reads; no GPU test drives it yet."""

import pytest
from conftest import finding

from fusedbench.regressions.screening import SUMMARY_COLUMNS, fusion_speedups, summarize


def run(protocol, repeat, fused_ms, unfused_ms, seconds=2.0):
    def cell(ms):
        return {"samples": [ms / 1e3] * 9 + [ms * 1.5 / 1e3], "telemetry": {"sm_mhz_before": [1980] * 10}}

    return {
        "protocol": protocol,
        "repeat": repeat,
        "group": "Fp16Seed",
        "workload": "RELU_BIAS/fp16/(65536,16384)x(16384,8192)",
        "seconds": seconds,
        "cells": {"fused": cell(fused_ms), "unfused": cell(unfused_ms)},
    }


def test_each_candidates_spread_is_max_minus_min_of_a_cells_medians_over_its_repeats_by_class():
    runs = [run("quiet", r, 10.0 + 0.01 * r, 2.0) for r in range(3)] + [
        run("noisy", r, 10.0 + r, 2.0) for r in range(3)
    ]
    rows = {(row["protocol"], row["class"]): row for row in summarize(runs)}
    assert set(rows) == {(p, c) for p in ("quiet", "noisy") for c in (">= 5 ms", "1-5 ms", "all")}
    assert rows[("quiet", ">= 5 ms")]["spread_median"] == pytest.approx(0.02 / 10.01)
    assert rows[("noisy", ">= 5 ms")]["spread_p95"] == pytest.approx(2.0 / 11.0)
    assert rows[("noisy", "1-5 ms")]["spread_median"] == 0.0  # the unfused cell did not move
    assert rows[("quiet", "all")]["cells"] == 2 and rows[("quiet", "all")]["seconds"] == 6.0
    assert all(set(row) == set(SUMMARY_COLUMNS) for row in rows.values())


def test_fusion_speedups_are_told_protocol_by_protocol():
    runs = [run("burst", r, 10.0, 12.0) for r in range(3)] + [run("sustained", r, 12.0, 13.2) for r in range(3)]
    speedups = fusion_speedups(runs)
    workload = runs[0]["workload"]
    assert speedups[("burst", workload)] == pytest.approx(1.2)
    assert speedups[("sustained", workload)] == pytest.approx(1.1)


def test_the_screen_table_in_the_docs_is_the_committed_screens():
    """docs/measurement.md's screen tables and its burst-against-sustained speedups are recomputed from the runs
    committed beside them."""

    from fusedbench.regressions.screening import summary_markdown

    docs = finding("protocol-screen", folded=False)
    for name in ("2026-11-25-h100-screen-2", "2026-11-25-h100-screen-1-energy-counter"):
        assert summary_markdown(summarize(runs_of(name))) in docs, name
    speedups = fusion_speedups(runs_of("2026-11-25-h100-screen-2"))
    for workload in dict.fromkeys(w for _, w in speedups):
        epilog, _, shape = workload.split("/")
        by = [f"{speedups[(protocol, workload)]:.3f}" for protocol in ("burst", "sustained", "back-to-back")]
        assert f"| {epilog} {shape} | {' | '.join(by)} |" in docs, workload


def runs_of(name: str) -> list[dict]:
    import gzip
    import json
    from pathlib import Path

    with gzip.open(Path(__file__).parent.parent / "docs" / "screens" / f"{name}.json.gz") as stream:
        return json.load(stream)["runs"]
