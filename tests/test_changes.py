"""Change points (`regressions.changes`, `fusedbench changes`): a shift found at its run in made-up series, the runs'
common factor taken out first, and on the committed history: 1.5% shifts written into its real series found at
their run, and what is found in them unshifted (docs/findings/2026-11-28-change-points.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import finding

from fusedbench.cli import main
from fusedbench.regressions.changes import (
    GROUP_SERIES,
    change_points_in,
    common_factors,
    find_changes,
    series_inputs,
    series_of,
)
from fusedbench.results.loader import load_results

pytest.importorskip("otava", reason="the change-point library (apache-otava, in the dev extra)")

ROOT = Path(__file__).parent.parent
SHIFT, EDGE, WITHIN, FLOOR_S = 0.015, 3, 1, 1e-3  # the findings' experiment: its shift, edges, tolerance, cells


def noisy(runs: int, seed: int, sd: float = 0.003) -> np.ndarray:
    return 1 + np.random.default_rng(seed).normal(0, sd, runs)


def test_a_one_and_a_half_per_cent_step_is_found_at_its_run_and_flat_noise_gives_none():
    for seed in range(5):
        series = noisy(16, seed)
        assert change_points_in(series) == []
        stepped = np.where(np.arange(16) >= 8, series * 1.015, series)
        ((run, before, after, pvalue),) = change_points_in(stepped)
        assert run == 8 and 0.01 < after / before - 1 < 0.02 and pvalue <= 0.05
    assert change_points_in(np.where(np.arange(16) >= 8, noisy(16, 0) * 1.006, noisy(16, 0))) == []  # under 1%


def frame(times: np.ndarray, labels: list[str]) -> pd.DataFrame:
    """A loaded table's cells of one machine and group (labels EPILOG/fp16/(M,K)x(K,N)/provider), a run a column."""
    rows = []
    for i, label in enumerate(labels):
        epilog, dtype, shape, provider = label.split("/")
        m, k, _, n = map(int, re.findall(r"\d+", shape))
        for run, time in enumerate(times[i]):
            rows.append({"machine": "gpu", "commit": f"{run:040x}", "group": "Quick", "epilog": epilog, "dtype": dtype,
                         "m": m, "k": k, "n": n, "provider": provider, "time_s": time, "version": "6",
                         "started_ms": 1000 * run})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_runs_common_factor_is_its_own_series_and_one_cells_step_is_left_to_that_cell():
    labels = [f"{e}/fp16/(64,64)x(64,64)/{p}" for e in ("BIAS", "RELU", "GELU") for p in ("fused", "unfused")]
    times = np.array([0.02 * noisy(18, seed) for seed in range(len(labels))])
    times[:, 6:] *= 1.03  # the card changed at run 6: every cell 3% slower
    times[2, 12:] *= 1.02  # and RELU's fused cell 2% slower from run 12 on
    versions = {("gpu", f"{run:040x}"): {"card": "GPU-a" if run < 6 else "GPU-b"} for run in range(18)}
    points = find_changes(frame(times, labels), versions)
    found = {(p.cell, p.run) for p in points}
    assert found == {(GROUP_SERIES, 6), ("RELU/fp16/(64,64)x(64,64)/fused", 12)}
    (group,) = [p for p in points if p.cell == GROUP_SERIES]
    assert group.to_json()["stack_changed"] == {"card": ["GPU-a", "GPU-b"]} and 0.025 < group.change < 0.035


def committed_series() -> dict:
    results = load_results(str(ROOT / "results"))
    table, _ = series_inputs(results)
    return {key: times for key, times in series_of(table).items() if times.shape[1] >= 10}


def shifted_detection(times: pd.DataFrame) -> tuple[int, int, int, int]:
    """(shifts found at their run within WITHIN, shifts written, change points in the unshifted cells' series,
    cell series) of one real series: each cell of FLOOR_S or more, made SHIFT slower from each run between EDGE runs
    from either end, the runs' common factors computed again with it."""
    found = written = false = cells = 0
    runs = times.shape[1]
    for label in times.index[times.median(axis=1) >= FLOOR_S]:
        factors = common_factors(times)
        false += len(change_points_in((times.loc[label] / factors).to_numpy()))
        cells += 1
        for start in range(EDGE, runs - EDGE + 1):
            shifted = times.copy()
            shifted.loc[label, shifted.columns[start:]] *= 1 + SHIFT
            series = (shifted.loc[label] / common_factors(shifted)).to_numpy()
            found += any(abs(run - start) <= WITHIN for run, *_ in change_points_in(series))
            written += 1
    return found, written, false, cells


def test_shifts_written_into_the_committed_series_are_found_at_their_run_as_the_findings_say():
    page = finding("change-points")
    totals = np.zeros(4, dtype=int)
    for (machine, group, version), times in sorted(committed_series().items()):
        found, written, false, cells = shifted_detection(times)
        totals += (found, written, false, cells)
        line = f"{machine} {group} ({version.split(':')[0]}, {times.shape[1]} runs): {found} of {written} found, "
        assert line + f"{false} change point(s) in its {cells} cells unshifted" in page, line
    found, written, false, cells = totals
    summary = f"over all: {found} of {written} found ({found / written:.0%}), {false} change point(s) in the {cells} "
    assert summary + "unshifted cell series" in page


def test_changes_names_the_card_that_changed_where_the_group_shifted_on_the_committed_history(capsys):
    assert main(["changes", str(ROOT / "results"), "--machine", "h200-141gb", "--format", "json"]) == 0
    points = json.loads(capsys.readouterr().out)
    group = [p for p in points if p["cell"] == GROUP_SERIES]
    assert group and all("card" in p["stack_changed"] for p in group)  # each shift of every cell: another card
    page = finding("change-points")
    for point in group:
        assert f"run {point['run']} of {point['runs']}, {point['change']:+.1%}" in page


def test_changes_cells_keeps_the_groups_series_and_the_cells_it_finds(capsys):
    assert main(["changes", str(ROOT / "results"), "--machine", "h200-141gb", "--cells", "NO_SUCH_EPILOG"]) == 0
    out = capsys.readouterr().out
    assert GROUP_SERIES in out and "GELU_AUX_BIAS" not in out
    assert main(["changes", str(ROOT / "results"), "--machine", "h200-141gb", "--cells", "GELU_AUX_BIAS"]) == 0
    assert "GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/textbook" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--min-change", "2"], "argument --min-change: expected a fraction between 0 and 1"),
        (["--min-change", "x"], "argument --min-change: expected a fraction between 0 and 1"),
        (["--cells", "RELU("], "--cells 'RELU(' is not a regular expression"),
        (["--machine", "no-such-gpu"], "no-such-gpu"),
    ],
)
def test_bad_input_is_one_line(capsys, argv, says):
    try:
        code = main(["changes", str(ROOT / "results"), *argv])
    except SystemExit as exited:
        code = exited.code
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_the_reports_history_says_where_a_series_shifted_and_what_changed_there(monkeypatch):
    import importlib.util

    from fusedbench.report import change_points_of, shifts_html

    results = load_results(str(ROOT / "results"), machines=["h200-141gb"])
    shown = shifts_html(change_points_of(results, "h200-141gb"))
    assert "card GPU-dad8f06a -&gt; GPU-c46da574" in shown or "card GPU-dad8f06a -> GPU-c46da574" in shown
    assert "+4.5%" in shown and "8 of 17" in shown
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert change_points_of(results, "h200-141gb") is None and "pip install -e '.[changes]'" in shifts_html(None)
