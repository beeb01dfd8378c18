"""The mlp suite judged as the epilog suites are: its cells compared by the clock the catalog's group names (a step's
kernels' GPU time, an epoch's wall clock), its A/A runs teaching a preset of their own, its flags never sent to the
worker that re-measures epilog cells. On the committed H100 A/A pair 6fd4f0d / 8fda10a."""

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import finding

from fusedbench.catalog.suites import EPOCH_TIME, GPU_TIME, WALL
from fusedbench.regressions.compare import NEVER_JUDGED, cells_run, compare_runs, judged_clock, mlp_as_cells
from fusedbench.regressions.confirm import flag, flagged_cells
from fusedbench.regressions.gate import Choice, judge
from fusedbench.regressions.thresholds import presets

H100 = "h100-80gb-hbm3"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def results(committed_results):
    return committed_results


def full(results, prefix: str) -> str:
    return next(c for c in results.mlp["commit"].unique() if c.startswith(prefix))


def test_a_step_is_judged_by_its_kernels_gpu_time_and_an_epoch_by_its_wall_clock(results):
    assert judged_clock("MlpStep") == GPU_TIME and judged_clock("MlpEpoch") == EPOCH_TIME
    commit = full(results, "8fda10a1")
    cells = mlp_as_cells(results, H100, commit).set_index(["group", "epilog", "dtype", "m", "k", "n", "provider"])
    table = results.mlp[(results.mlp["machine"] == H100) & (results.mlp["commit"] == commit)]
    table = table[table["status"] == "ok"]
    steps, epochs = table[table["group"] == "MlpStep"], table[table["group"] == "MlpEpoch"]
    assert len(steps) > 100 and len(epochs) == 9
    for rows, clock in ((steps, "gpu_s"), (epochs, "time_s")):
        named = rows[["group", "workload", "dtype", "hidden", "inputs", "batch", "version"]]
        keys = list(named.itertuples(index=False, name=None))
        compared = cells.loc[keys, "time_s"].to_numpy(dtype=float)
        assert compared == pytest.approx(rows[clock].to_numpy(dtype=float), rel=1e-6)
    step_raw = results.mlp_raw[steps.index]
    assert all(set(r) == {WALL, GPU_TIME} for r in step_raw)  # both clocks kept, the GPU's compared
    assert all(set(r) == {EPOCH_TIME} for r in results.mlp_raw[epochs.index])


def test_the_steps_gpu_time_holds_still_between_a_a_runs_where_their_wall_clock_moved(results):
    """Why a step is judged by its GPU time: between the two A/A runs the wall clock of the steps moved 19% in median,
    their kernels' time not at all (docs/regressions.md, 'The mlp suite')."""
    before, after = full(results, "6fd4f0d4"), full(results, "8fda10a1")
    base = cells_run(results, H100, before, groups=["MlpStep"])
    cand = cells_run(results, H100, after, groups=["MlpStep"])
    comparison = compare_runs(base, cand, presets()["h100-80gb-hbm3/mlp@6fd4f0d"])
    time = comparison.cells[(comparison.cells["metric"] == "time") & comparison.cells["ratio"].notna()]
    assert len(time) == int((base.cells["status"] == "ok").sum()) > 100
    assert abs(float(np.median(time["ratio"].astype(float))) - 1) < 0.005
    steps = results.mlp[(results.mlp["machine"] == H100) & (results.mlp["group"] == "MlpStep")]
    wall = steps.pivot_table(index=["layers", "batch", "dtype", "version"], columns="commit", values="time_s")
    assert float((wall[after] / wall[before]).median()) < 0.85


def test_the_mlp_suite_is_judged_on_the_h100_by_its_own_preset(results):
    verdict = judge(results, Choice(H100, ("mlp",), candidate=full(results, "8fda10a1")))
    (suite,) = verdict.suites
    assert suite.preset.name == "h100-80gb-hbm3/mlp@6fd4f0d" and "own A/A runs of the mlp suite" in suite.preset_line
    judged = {g.group: g.not_judged for g in suite.groups}
    assert judged == {"MlpStep": "", "MlpEpoch": NEVER_JUDGED["MlpEpoch"]}
    assert suite.compared > suite.cells / 2 and suite.outcome.value == "green"
    epochs = next(g for g in suite.groups if g.group == "MlpEpoch").judged.comparison.cells
    assert (epochs["ratio"].notna()).sum() > 0  # compared and shown all the same


def test_a_flagged_mlp_group_is_left_to_the_first_look_not_sent_to_the_worker(results):
    """8fda10a's epochs ran ~40% faster than 6fd4f0d's: judged the other way round the first look flags them, and
    confirmation leaves them alone (the worker re-measures epilog cells only)."""
    choice = Choice(H100, ("mlp",), candidate=full(results, "6fd4f0d4"), baseline=full(results, "8fda10a1"))
    verdict = judge(results, choice)
    epochs = next(g for g in verdict.suites[0].groups if g.group == "MlpEpoch")
    assert len(flagged_cells(epochs.judged.comparison)) > 0
    assert flag(verdict) == []


MLP_AA = {  # the A/A runs of the mlp suite, in run order
    "h100-80gb-hbm3": ["6fd4f0d4", "8fda10a1"],
    "h200-141gb": ["9b1b940e", "987ac76a", "48b52814", "da8bdd66", "60a1cf04"],
}


def clocks_text(results) -> str:
    """The docs' sentence on the steps' two clocks between A/A runs (each run against the one before it), and the
    presets they earned."""
    parts = []
    for machine, commits in MLP_AA.items():
        steps = results.mlp[(results.mlp["machine"] == machine) & (results.mlp["group"] == "MlpStep")]
        steps = steps[steps["status"] == "ok"]
        full = [next(c for c in steps["commit"].unique() if c.startswith(p)) for p in commits]
        ratios = {}
        for column in ("time_s", "gpu_s"):
            table = steps.pivot_table(index=["layers", "batch", "dtype", "version"], columns="commit", values=column)
            ratios[column] = pd.concat([table[b] / table[a] for a, b in itertools.pairwise(full)]).dropna()
        wall, gpu = ratios["time_s"], ratios["gpu_s"]
        preset = next(p for p in presets().values() if p.calibrated_on == machine and p.suite == "mlp")
        limits = ", ".join(f"{klass} {preset.threshold('time', klass):.1%}" for klass in ("small", "medium", "large"))
        parts.append(
            f"`{machine}`, {len(commits) - 1} consecutive pair(s), {len(wall)} step cells: the wall clock "
            f"x{wall.median():.3f} in median, x{wall.quantile(0.05):.2f}-{wall.quantile(0.95):.2f} from the 5th to "
            "the 95th percentile; "
            f"the GPU time x{gpu.median():.3f}, x{gpu.quantile(0.05):.3f}-{gpu.quantile(0.95):.3f} "
            f"(preset `{preset.name}`: a cell's time past {limits}, the group's past "
            f"{preset.threshold('time', 'group'):.1%}; A/A builds red {preset.rates['false_alarm_per_build']:.2%} "
            "of the time, in-sample)"
        )
    return "; ".join(parts)


def test_the_clocks_and_presets_the_docs_give_for_the_mlp_suite_are_the_committed_ones(results):
    docs = finding("threshold-presets")
    assert clocks_text(results) in docs
    epochs = results.mlp[(results.mlp["machine"] == H100) & (results.mlp["group"] == "MlpEpoch")]
    table = epochs.pivot_table(index=["dtype", "version"], columns="commit", values="time_s")
    before, after = full(results, "6fd4f0d4"), full(results, "8fda10a1")
    ratio = (table[after] / table[before]).dropna()
    span = f"x{ratio.min():.2f}-{ratio.max():.2f}"
    assert f"wall clock, which came out {span} between the H100's two runs" in docs
    assert f"on one H100 it came out {span}" in NEVER_JUDGED["MlpEpoch"]
