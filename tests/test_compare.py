"""Comparing two runs and turning the comparison into alerts, on synthetic runs whose changes are known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fusedbench.catalog.model import Status
from fusedbench.regressions.compare import Run, Verdict, compare_runs
from fusedbench.regressions.gate import (
    AlertKind,
    GroupJudgement,
    MachineVerdict,
    Outcome,
    SuiteVerdict,
    judge_comparison,
)
from fusedbench.regressions.metrics import FUSION_SPEEDUP, TIME
from fusedbench.regressions.render import summary_markdown, to_json, write_step_summary
from fusedbench.regressions.thresholds import Preset

SHAPE = (8192, 4096, 8192)
PROVIDERS = {"gemm": 10e-3, "fused": 10.2e-3, "unfused": 12e-3, "textbook": 13e-3}  # seconds
EPILOGS = ("RELU", "BIAS", "GELU")
PRESET = Preset(
    "test",
    {(m, k): 0.05 for m in ("time", "epilog-cost", "fusion-speedup") for k in ("large", "medium", "small")}
    | {(m, gate): 0.02 for m in ("time", "epilog-cost", "fusion-speedup") for gate in ("group", "provider")},
    calibrated_on="none",
)


def make_run(commit, *, scale=None, status=None, group="Fp16Seed", version="v1", jitter=0.002, seed=0, groups=None):
    """A run of EPILOGS x PROVIDERS at SHAPE: 10 rounds each, a shared clock drift per round (what
    pairing cancels) plus `jitter` per sample; `scale` / `status` map (epilog, provider) to a change."""
    rng = np.random.default_rng(seed)
    drift = 1 + 0.01 * rng.standard_normal(10)
    rows = []
    for epilog in EPILOGS:
        for provider, seconds in PROVIDERS.items():
            factor = (scale or {}).get((epilog, provider), 1.0)
            samples = tuple(seconds * factor * drift * (1 + jitter * rng.standard_normal(10)))
            state = (status or {}).get((epilog, provider), Status.OK)
            rows.append(
                {
                    "machine": "h100-80gb-hbm3",
                    "commit": commit,
                    "epilog": epilog,
                    "dtype": "fp16",
                    "m": SHAPE[0],
                    "k": SHAPE[1],
                    "n": SHAPE[2],
                    "provider": provider,
                    "status": state.value,
                    "reason": "" if state is Status.OK else f"{state.value} on purpose",
                    "time_s": float(np.median(samples)) if state is Status.OK else np.nan,
                    "group": (groups or {}).get(epilog, group),
                    "version": version,
                    "started_ms": 0,
                    "raw": samples if state is Status.OK else (),
                    "paired": True,
                }
            )
    return Run("h100-80gb-hbm3", commit, pd.DataFrame(rows))


def judged(base, cand):
    return judge_comparison(compare_runs(base, cand, PRESET))


def as_verdict(judged, cells: int = len(EPILOGS) * len(PROVIDERS)) -> MachineVerdict:
    """One comparison as the gate's verdict on a one-group suite (what alert renders)."""
    comparison = judged.comparison
    group = GroupJudgement("Fp16Seed", cells, comparison.candidate, comparison.baseline, judged)
    return MachineVerdict(
        comparison.candidate.machine, (SuiteVerdict("h100", "default", PRESET, "preset 'test'", (group,)),)
    )


def rows_of(verdicts, verdict):
    cells = verdicts.comparison.cells
    return cells[cells["verdict"] == verdict]


def test_two_runs_of_the_same_code_alert_on_nothing():
    verdicts = judged(make_run("a" * 40, seed=1), make_run("b" * 40, seed=2))
    cells = verdicts.comparison.cells
    assert set(cells["verdict"]) == {Verdict.SAME}
    assert set(cells["metric"]) == {"time", "epilog-cost", "fusion-speedup"}
    assert len(cells) == 3 * 4 + 3 * 3 + 3  # time per cell, cost per non-gemm cell, one fusion speedup each
    assert not verdicts.failed and verdicts.warnings == []


def test_a_slower_cell_is_a_regression_in_time_and_epilog_cost_and_nothing_else_moves():
    verdicts = judged(make_run("a" * 40, seed=1), make_run("b" * 40, seed=2, scale={("GELU", "textbook"): 1.2}))
    alerts = verdicts.alerts
    assert set(alerts["kind"]) == {AlertKind.REGRESSION.value}
    assert set(zip(alerts["epilog"], alerts["provider"], alerts["metric"], strict=True)) == {
        ("GELU", "textbook", "time"),
        ("GELU", "textbook", "epilog-cost"),
    }
    slow = alerts[alerts["metric"] == TIME].iloc[0]
    assert 1.17 < slow["ratio"] < 1.23 and slow["ci_low"] > 1 and slow["threshold"] == 0.05
    assert len(rows_of(verdicts, Verdict.SLOWER)) == 2


def test_a_faster_cell_is_faster_and_never_an_alert():
    verdicts = judged(make_run("a" * 40, seed=1), make_run("b" * 40, seed=2, scale={("BIAS", "textbook"): 0.8}))
    assert not verdicts.failed
    assert set(rows_of(verdicts, Verdict.FASTER)["provider"]) == {"textbook"}


def test_fused_falling_below_unfused_is_a_new_inversion_and_an_old_one_only_warns():
    slow_fused = {("RELU", "fused"): 1.3}  # 13.3 ms against unfused 12 ms: speedup 0.90
    verdicts = judged(make_run("a" * 40, seed=1), make_run("b" * 40, seed=2, scale=slow_fused))
    inversion = verdicts.alerts[verdicts.alerts["metric"] == FUSION_SPEEDUP]
    assert list(inversion["kind"]) == [AlertKind.FUSION_INVERSION.value] and inversion.iloc[0]["ratio"] < 0.8
    known = judged(make_run("a" * 40, seed=1, scale=slow_fused), make_run("b" * 40, seed=2, scale=slow_fused))
    assert not known.failed and any("known fusion inversion" in w for w in known.warnings)


def test_fusion_paying_less_without_inverting_is_a_fusion_loss():
    verdicts = judged(make_run("a" * 40, seed=1), make_run("b" * 40, seed=2, scale={("GELU", "unfused"): 0.9}))
    assert list(verdicts.alerts["kind"]) == [AlertKind.FUSION_LOSS.value]  # unfused got faster: fusion buys less


def test_missing_and_newly_failing_cells_fail_known_failures_warn():
    base = make_run("a" * 40, seed=1, status={("BIAS", "textbook"): Status.FAILED})
    cand = make_run(
        "b" * 40,
        seed=2,
        status={
            ("RELU", "unfused"): Status.SKIPPED,
            ("GELU", "fused"): Status.FAILED,
            ("BIAS", "textbook"): Status.FAILED,
        },
    )
    verdicts = judged(base, cand)
    kinds = dict(
        zip(
            zip(verdicts.alerts["epilog"], verdicts.alerts["provider"], strict=True),
            verdicts.alerts["kind"],
            strict=True,
        )
    )
    assert kinds[("RELU", "unfused")] == AlertKind.MISSING.value
    assert kinds[("GELU", "fused")] == AlertKind.FAILED.value
    alerts = verdicts.alerts
    reasons = {(row.epilog, row.provider): row.reason for row in alerts.itertuples()}
    reason_of = {  # each says the candidate's own reason, as its record gave it
        key: cand.cells.set_index(["epilog", "provider"]).loc[key, "reason"]
        for key in (("RELU", "unfused"), ("GELU", "fused"))
    }
    assert reasons[("RELU", "unfused")] == f"skipped: {reason_of[('RELU', 'unfused')]}"
    assert reasons[("GELU", "fused")] == reason_of[("GELU", "fused")]
    assert ("BIAS", "textbook") not in kinds
    assert any("BIAS/fp16" in w and "still fails" in w for w in verdicts.warnings)


def test_a_cell_new_in_the_candidate_is_new_and_does_not_fail():
    base = make_run("a" * 40, seed=1, status={("RELU", "torch"): Status.UNSUPPORTED})
    verdicts = judged(base, make_run("b" * 40, seed=2))
    assert not verdicts.failed


def test_groups_not_run_or_of_another_version_are_reported_never_failed():
    groups = {"GELU": "Fp16Llm"}
    base = make_run("a" * 40, seed=1, groups=groups)
    cand = make_run("b" * 40, seed=2, groups=groups)
    cand_without = Run(cand.machine, cand.commit, cand.cells[cand.cells["group"] != "Fp16Llm"])
    verdicts = judged(base, cand_without)
    assert set(rows_of(verdicts, Verdict.NOT_RUN)["epilog"]) == {"GELU"} and not verdicts.failed
    assert any("Fp16Llm not run by the candidate" in w for w in verdicts.warnings)
    cand_changed = make_run("b" * 40, seed=2, groups=groups, scale={("GELU", "gemm"): 2.0})
    cand_changed.cells.loc[cand_changed.cells["group"] == "Fp16Llm", "version"] = "v2"
    verdicts = judged(base, cand_changed)
    assert set(rows_of(verdicts, Verdict.INCOMPARABLE)["epilog"]) == {"GELU"} and not verdicts.failed


def test_a_whole_group_three_per_cent_slower_is_caught_by_the_group_gate_alone():
    everything = {(e, p): 1.03 for e in EPILOGS for p in PROVIDERS}
    verdicts = judged(
        make_run("a" * 40, seed=1, jitter=0.001), make_run("b" * 40, seed=2, jitter=0.001, scale=everything)
    )
    assert rows_of(verdicts, Verdict.SLOWER).empty  # no cell beyond its 5%
    gates = verdicts.alerts  # the group's gate and each provider's on time; cost and fusion did not move
    assert set(gates["provider"]) == {*PROVIDERS, "*"} and len(gates) == len(PROVIDERS) + 1
    assert set(zip(gates["group"], gates["metric"], gates["kind"], strict=True)) == {("Fp16Seed", "time", "regression")}
    assert gates["ratio"].between(1.02, 1.04).all() and gates["epilog"].isna().all()
    assert ((gates["ci_low"] < gates["ratio"]) & (gates["ratio"] < gates["ci_high"])).all()  # each gate's own interval


def test_one_provider_slower_everywhere_is_caught_by_its_own_gate():
    fused = {(e, "fused"): 1.04 for e in EPILOGS}  # a library upgrade that slows cuBLASLt's epilogs only
    verdicts = judged(make_run("a" * 40, seed=1, jitter=0.001), make_run("b" * 40, seed=2, jitter=0.001, scale=fused))
    assert rows_of(verdicts, Verdict.SLOWER).empty
    gates = verdicts.alerts  # the whole group's time and cost medians stay put: only fused moved
    assert set(zip(gates["provider"], gates["metric"], gates["kind"], strict=True)) == {
        ("fused", "time", "regression"),
        ("fused", "epilog-cost", "regression"),
        ("fused", "fusion-speedup", "fusion-loss"),
        ("*", "fusion-speedup", "fusion-loss"),  # every fusion-speedup row is fused's
    }


def test_a_change_beyond_the_threshold_inside_the_noise_is_undecided_and_only_warns():
    noisy = make_run("b" * 40, seed=2, jitter=0.2, scale={("RELU", "textbook"): 1.08})
    verdicts = judged(make_run("a" * 40, seed=1, jitter=0.2), noisy)
    undecided = rows_of(verdicts, Verdict.UNDECIDED)
    assert not undecided.empty
    assert ((undecided["ci_low"] <= 1) & (undecided["ci_high"] >= 1)).all()  # the interval holds "no change"
    assert Verdict.UNDECIDED not in set(verdicts.alerts["verdict"])
    assert any("too noisy to tell" in w for w in verdicts.warnings)


def test_the_json_has_every_compared_cell_and_alerts_with_the_documented_keys():
    verdicts = judged(make_run("a" * 40, seed=1), make_run("b" * 40, seed=2, scale={("GELU", "textbook"): 1.2}))
    document = json.loads(json.dumps(to_json(as_verdict(verdicts), rows=True)))
    (suite,) = document["suites"]
    (group,) = suite["groups"]
    keys = {
        "epilog",
        "dtype",
        "m",
        "k",
        "n",
        "provider",
        "metric",
        "verdict",
        "ratio",
        "ci_low",
        "ci_high",
        "threshold",
        "reason",
    }
    assert group["baseline"]["commit"] == "a" * 40 and group["candidate"]["commit"] == "b" * 40
    assert len(group["rows"]) == len(verdicts.comparison.cells) and keys <= set(group["rows"][0])
    assert {a["kind"] for a in suite["alerts"]} == {"regression"} and keys | {"kind"} <= set(suite["alerts"][0])
    assert {c["metric"] for c in group["rows"]} == {"time", "epilog-cost", "fusion-speedup"}
    assert (document["outcome"], suite["outcome"], suite["compared"], suite["cells"]) == ("red", "red", 12, 12)


def test_the_step_summary_is_appended_worst_first_and_kept_under_the_limit(tmp_path):
    verdicts = judged(
        make_run("a" * 40, seed=1),
        make_run("b" * 40, seed=2, scale={("GELU", "textbook"): 1.5, ("RELU", "fused"): 1.1}),
    )
    text = summary_markdown(as_verdict(verdicts))
    assert text.startswith("## fusedbench alert: RED")
    lines = [line for line in text.splitlines() if line.startswith("- regression")]
    assert "GELU/fp16" in lines[0]  # the 50% one before the 10% one
    assert len(summary_markdown(as_verdict(verdicts), limit=600).encode()) <= 600
    path = tmp_path / "summary.md"
    path.write_text("earlier step\n")
    assert write_step_summary(text, {"GITHUB_STEP_SUMMARY": str(path)}) == str(path)
    assert path.read_text() == "earlier step\n" + text
    assert write_step_summary(text, {}) is None


@pytest.mark.parametrize("flip", [False, True])
def test_the_verdict_is_symmetric_in_which_run_is_the_baseline(flip):
    slow = make_run("b" * 40, seed=2, scale={("BIAS", "fused"): 1.2})
    fast = make_run("a" * 40, seed=1)
    verdicts = judged(slow, fast) if flip else judged(fast, slow)
    row = verdicts.comparison.cells
    row = row[(row["epilog"] == "BIAS") & (row["provider"] == "fused") & (row["metric"] == TIME)].iloc[0]
    assert row["verdict"] is (Verdict.FASTER if flip else Verdict.SLOWER)


def test_runs_that_share_no_group_at_one_version_are_refused_not_reported_green():
    from fusedbench.errors import FusedbenchError

    other = make_run("b" * 40, seed=2, group="Fp16Llm")
    with pytest.raises(FusedbenchError, match=r"share no group at one benchmark version .* nothing can be compared"):
        compare_runs(make_run("a" * 40, seed=1), other, PRESET)


def test_two_machines_compare_with_a_warning_that_the_change_includes_the_machines():
    h200 = make_run("a" * 40, seed=2)
    h200 = Run("h200-141gb", h200.commit, h200.cells.assign(machine="h200-141gb"))
    verdicts = judged(make_run("a" * 40, seed=1), h200)
    assert any(
        w.startswith("the runs are of different machines (h100-80gb-hbm3, h200-141gb)") for w in verdicts.warnings
    )
    tuned = Run("h100-80gb-hbm3-tuned-fused-algorithm-7", h200.commit, h200.cells)
    assert not any("different machines" in w for w in judged(make_run("a" * 40, seed=1), tuned).warnings)


def test_a_suite_with_fewer_than_half_its_cells_compared_is_not_judged_and_an_alert_still_turns_it_red():
    same = judged(make_run("a" * 40, seed=1), make_run("b" * 40, seed=2))
    assert as_verdict(same).outcome is Outcome.GREEN  # 12 of 12 compared
    assert as_verdict(same, cells=25).outcome is Outcome.NOT_JUDGED  # 12 of 25: fewer than half
    assert as_verdict(same, cells=24).outcome is Outcome.GREEN  # 12 of 24: half
    slower = judged(make_run("a" * 40, seed=1), make_run("b" * 40, seed=2, scale={("GELU", "fused"): 1.3}))
    assert as_verdict(slower, cells=1000).outcome is Outcome.RED


def test_each_metric_is_one_registry_entry_with_its_series_direction_alert_and_thresholds():
    from fusedbench.regressions.metrics import METRICS, AlertKind, metric_rows
    from fusedbench.regressions.thresholds import presets

    rounds = np.array([1.0, 2.0, 4.0])
    samples = {"gemm": rounds, "fused": rounds * 1.1, "unfused": rounds * 1.5}
    found = {(provider, metric): series for provider, metric, series, _ in metric_rows(samples)}
    assert set(found) == {
        ("gemm", "time"),
        ("fused", "time"),
        ("fused", "epilog-cost"),
        ("unfused", "time"),
        ("unfused", "epilog-cost"),
        ("fused", "fusion-speedup"),
    }
    assert np.allclose(found[("fused", "epilog-cost")], 1.1) and np.allclose(
        found[("fused", "fusion-speedup")], 1.5 / 1.1
    )
    # the seconds each row's threshold class is read from: its own median for time, the GEMM's for the others
    scales = {(provider, metric): scale for provider, metric, _, scale in metric_rows(samples)}
    assert scales[("fused", "time")] == pytest.approx(2.2) and scales[("unfused", "time")] == pytest.approx(3.0)
    assert scales[("unfused", "epilog-cost")] == scales[("fused", "fusion-speedup")] == 2.0
    no_gemm = {(p, m): scale for p, m, _, scale in metric_rows({"fused": rounds, "unfused": rounds * 1.5})}
    assert no_gemm[("fused", "fusion-speedup")] == 2.0  # fused's median where no GEMM was timed
    # the scales are np.median's numbers: odd and even rounds, ties, a NaN round
    rng = np.random.default_rng(3)
    for series in (rng.random(7), rng.random(10), np.array([2.0, 1.0, 2.0, 5.0]), np.array([1.0, np.nan, 3.0])):
        ((_, _, _, scale),) = metric_rows({"gemm": series})
        assert scale == np.median(series) or (np.isnan(scale) and np.isnan(np.median(series)))
    assert [m for m in METRICS if METRICS[m].worse_when_lower] == ["fusion-speedup"]
    assert {m.alert for m in METRICS.values()} == {AlertKind.REGRESSION, AlertKind.FUSION_LOSS}
    for preset in presets().values():  # every metric has a threshold for every class in every committed preset
        assert {metric for metric, _ in preset.thresholds} == set(METRICS)


def test_a_cells_status_is_read_with_no_reason_as_none():
    from fusedbench.regressions.compare import CELL, _statuses

    run = make_run("a" * 40, status={("RELU", "unfused"): Status.SKIPPED})
    run.cells.loc[run.cells["status"] == Status.SKIPPED.value, "reason"] = np.nan  # a record that gave none
    keys = pd.MultiIndex.from_frame(run.cells[CELL])
    found = _statuses(run, keys)
    assert len(found) == len(run.cells) and set(found.values()) >= {("skipped", None), ("ok", "")}


def test_a_cell_with_extra_rounds_is_paired_with_its_workload_over_the_rounds_they_share():
    """A paired run gives a cell near its margin extra rounds after those its workload's cells share: its epilog
    cost is still a round-by-round ratio, over the shared rounds."""
    import numpy as np

    from fusedbench.regressions.metrics import EPILOG_COST, metric_rows

    samples = {"fused": np.array([2.0, 2.2, 2.4, 9.0, 9.0]), "gemm": np.array([1.0, 1.1, 1.2])}
    series = {(provider, metric): values for provider, metric, values, _ in metric_rows(samples)}
    assert list(series[("fused", EPILOG_COST)]) == [2.0, 2.0, 2.0]
