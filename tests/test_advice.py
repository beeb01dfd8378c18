"""`fusedbench advise`: the policy rule on runs built to give each answer, and the command's formats."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fusedbench.analysis.advice import COLUMNS, advise
from fusedbench.catalog.shapes import shape_set
from fusedbench.catalog.suites import GROUPS
from fusedbench.cli import main
from fusedbench.errors import FusedbenchError
from fusedbench.results.loader import ResultSet

ROUNDS = 10


def run(
    times: dict[str, dict[str, float]],
    *,
    group="Fp16Membound",
    dtype="fp16",
    kernels=None,
    refused=(),
    seed=0,
    noise=0.003,
):
    """A run of `group`: per epilog, each provider's time (s) at every shape of the group's set, with a clock
    drift shared by every provider of a round and `noise`; `refused` epilogs have their fused cells refused."""
    rng = np.random.default_rng(seed)
    cells, detail = [], []
    for epilog, providers in times.items():
        for shape in shape_set(GROUPS[group].shape_set):
            drift = 1 + 0.05 * rng.random(ROUNDS)
            for provider, seconds in providers.items():
                refuse = epilog in refused and provider.startswith("fused")
                raw = () if refuse else tuple(seconds * drift * (1 + noise * rng.standard_normal(ROUNDS)))
                cells.append(
                    {
                        "machine": "h100-80gb-hbm3",
                        "commit": "c" * 40,
                        "group": group,
                        "dtype": dtype,
                        "epilog": epilog,
                        "m": shape.m,
                        "k": shape.k,
                        "n": shape.n,
                        "provider": provider,
                        "status": "unsupported" if refuse else "ok",
                        "reason": "cuBLASLtError: CUBLAS_STATUS_NOT_SUPPORTED" if refuse else "",
                        "kernels": pd.NA if refuse else (kernels or {}).get(provider, 1),
                    }
                )
                detail.append({"started_ms": 1_000, "raw": raw, "paired": True, "version": "1"})
    frame = pd.DataFrame(cells)
    frame["kernels"] = frame["kernels"].astype("Int64")
    return ResultSet(cells=frame, ceilings=pd.DataFrame(), records=[], problems=[], detail=pd.DataFrame(detail))


def merged(*runs: ResultSet) -> ResultSet:
    return ResultSet(
        cells=pd.concat([r.cells for r in runs], ignore_index=True),
        ceilings=pd.DataFrame(),
        records=[],
        problems=[],
        detail=pd.concat([r.detail for r in runs], ignore_index=True),
    )


def test_fusion_that_pays_is_fuse_with_its_ratio_and_interval():
    (advice,) = advise(run({"RELU_BIAS": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3}})).itertuples()
    assert advice.advice == "fuse" and advice.shapes == 4
    assert advice.ratio == pytest.approx(1.5, rel=0.01) and advice.ci_low < advice.ratio < advice.ci_high
    assert advice.ci_high - advice.ci_low < 0.02  # paired rounds: the shared drift cancels
    assert advice.why == "fusion saves 33%"


def test_a_heuristic_that_autotune_beats_by_more_than_2_percent_is_fuse_autotuned():
    times = {"GELU": {"unfused": 1.5e-3, "fused": 1.1e-3, "fused-autotuned": 1.0e-3}}
    (advice,) = advise(run(times)).itertuples()
    assert advice.advice == "fuse-autotuned" and advice.ratio == pytest.approx(1.5, rel=0.01)
    assert advice.regret == pytest.approx(1.1, rel=0.01) and advice.regret_low > 1.02
    slight = {"GELU": {"unfused": 1.5e-3, "fused": 1.01e-3, "fused-autotuned": 1.0e-3}}  # 1%: not worth a tuning
    assert advise(run(slight))["advice"].tolist() == ["fuse"]
    unsure = {"GELU": {"unfused": 1.5e-3, "fused": 1.03e-3, "fused-autotuned": 1.0e-3}}  # 3%, but within the noise
    (advice,) = advise(run(unsure, noise=0.06)).itertuples()
    assert advice.regret > 1.02 > advice.regret_low and advice.advice == "fuse"


def test_fusion_that_loses_is_unfused_and_a_second_kernel_is_named():
    times = {"DRELU_BGRAD": {"unfused": 1.0e-3, "fused": 1.9e-3, "fused-autotuned": 1.9e-3}}
    (advice,) = advise(run(times, kernels={"fused": 2, "fused-autotuned": 2})).itertuples()
    assert advice.advice == "unfused" and advice.ratio == pytest.approx(1 / 1.9, rel=0.01) and advice.ci_high < 1
    assert advice.kernels == 2
    assert advice.why == (
        "fused is 90% slower than the GEMM + one pass; the fused call launches 2 kernels (fused API, unfused execution)"
    )


def test_within_the_noise_is_fuse_and_a_refusal_is_unfused_with_the_librarys_words():
    times = {
        "DEFAULT": {"unfused": 1.0e-3, "fused": 1.005e-3, "fused-autotuned": 1.005e-3},  # 0.5%: one kernel's noise
        "BGRADA": {"unfused": 1.2e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3},
    }
    policy = advise(run(times, refused={"BGRADA"})).set_index("epilog")
    assert policy.at["DEFAULT", "advice"] == "fuse" and policy.at["DEFAULT", "why"].startswith("fusion costs 0.")
    assert policy.at["DEFAULT", "why"].endswith("%, but its interval reaches within 1% of even: no clear loss")
    assert policy.at["DEFAULT", "ci_high"] < 1  # measurably slower, but by less than LOSS
    assert policy.at["BGRADA", "advice"] == "unfused" and np.isnan(policy.at["BGRADA", "ratio"])
    assert policy.at["BGRADA", "why"] == "fused: cuBLASLtError: CUBLAS_STATUS_NOT_SUPPORTED"


def test_the_newest_run_of_each_group_is_advised_on(tmp_path):
    old = run({"RELU": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3}})
    new = run({"RELU": {"unfused": 1.0e-3, "fused": 1.5e-3, "fused-autotuned": 1.5e-3}}, seed=1)
    new.cells["commit"] = "d" * 40
    new.detail["started_ms"] = 2_000
    (advice,) = advise(merged(old, new)).itertuples()
    assert advice.commit == "dddddddd" and advice.advice == "unfused"


def test_advise_prints_a_table_markdown_and_json_with_the_issues_keys(capsys):
    fixture = "tests/fixtures/results-provenance"
    assert main(["advise", fixture, "--format", "json"]) == 0
    policy = json.loads(capsys.readouterr().out)
    assert len(policy) == 5 and set(COLUMNS) == set(policy[0])
    keys = {"machine", "dtype", "epilog", "shape_class", "advice", "ratio", "ci_low", "ci_high"}
    assert keys <= set(policy[0]) and {p["advice"] for p in policy} <= {"fuse", "fuse-autotuned", "unfused"}
    drelu = next(p for p in policy if p["epilog"] == "DRELU_BGRAD")
    assert drelu["kernels"] == 2 and "2 kernels" in drelu["why"]
    assert main(["advise", fixture, "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("| machine | commit | dtype | epilog | shape_class | advice | ratio |")
    assert main(["advise", fixture]) == 0
    assert "fusedbench advise" in capsys.readouterr().out
    assert main(["advise", fixture, "--machine", "a100"]) == 2
    assert "--machine 'a100' has no results; machines with results: h200-141gb" in capsys.readouterr().err


def test_runs_without_kernel_records_and_tuned_machines():
    """Results from before kernel records advise without a kernel count; a tuned run's machine only when named."""
    old = run({"RELU": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3}})
    old.cells["kernels"] = pd.array([pd.NA] * len(old.cells), dtype="Int64")
    (advice,) = advise(old).itertuples()
    assert advice.advice == "fuse" and pd.isna(advice.kernels)
    tuned = run({"RELU": {"unfused": 1.0e-3, "fused": 2.0e-3, "fused-autotuned": 1.0e-3}}, seed=2)
    tuned.cells["machine"] = "h100-80gb-hbm3-tuned-fused-algorithm-7"
    both = merged(old, tuned)
    assert advise(both)["machine"].tolist() == ["h100-80gb-hbm3"]
    named = advise(both, ["h100-80gb-hbm3-tuned-fused-algorithm-7"])
    assert named["advice"].tolist() == ["fuse-autotuned"]


def test_unpaired_runs_are_not_advised_on_and_a_failed_heuristic_call_judges_the_autotuned_one():
    """Runs before the paired rounds give no interval: advice skips them (an error if that is all there is).
    Where the heuristic's fused cell failed and the autotuned one ran, the autotuned call is judged."""
    unpaired = run({"RELU": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3}})
    unpaired.detail["paired"] = False
    with pytest.raises(FusedbenchError, match="no ladder results timed in paired rounds"):
        advise(unpaired)
    broken = run({"GELU": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3}})
    failed = broken.cells["provider"] == "fused"
    broken.cells.loc[failed, "status"] = "failed"
    broken.detail.loc[failed, "raw"] = pd.Series([()] * int(failed.sum()), index=broken.detail.index[failed])
    (advice,) = advise(broken).itertuples()
    assert advice.advice == "fuse-autotuned" and advice.ratio == pytest.approx(1.5, rel=0.01)
    assert advice.why == "fusion saves 33%"


def test_a_workload_in_two_groups_of_one_run_is_advised_from_the_larger_group():
    small = run({"RELU": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3}}, group="Fp16Seed")
    quick = run({"RELU": {"unfused": 1.0e-3, "fused": 2.0e-3, "fused-autotuned": 2.0e-3}}, group="Fp16Seed", seed=3)
    quick.cells["group"] = "Quick"
    extra = run({"GELU": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3}}, group="Fp16Seed", seed=4)
    for both in (merged(small, extra, quick), merged(quick, small, extra)):
        both.detail["started_ms"] = None  # no start times either: the tie is broken by the group, not by order
        policy = advise(both).set_index("epilog")
        assert policy.at["RELU", "advice"] == "fuse" and len(policy) == 2


def test_a_peer_clearly_faster_than_the_ladders_advice_is_advised_by_name():
    times = {"DRELU_BGRAD": {"unfused": 1.0e-3, "fused": 1.9e-3, "fused-autotuned": 1.9e-3, "triton": 0.8e-3}}
    kernels = {"fused": 2, "fused-autotuned": 2, "triton": 3}
    (advice,) = advise(run(times, group="Fp16MemboundPeers", kernels=kernels)).itertuples()
    assert advice.advice == "triton" and advice.ratio == pytest.approx(1.25, rel=0.01)  # unfused over the peer
    assert advice.kernels == 3 and advice.shapes == 4  # the peer's own evidence
    assert advice.why.startswith("triton is 25% faster than unfused (the ladder's advice); fused is 90% slower")
    pays = {"RELU_BIAS": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3, "triton": 0.9e-3}}
    (advice,) = advise(run(pays, group="Fp16MemboundPeers")).itertuples()
    assert advice.advice == "triton" and advice.why.startswith("triton is 11% faster than fused")


def test_a_peer_timed_in_a_group_of_its_own_is_weighed_against_the_advice_as_that_group_timed_it():
    """cutlass-evt times beside fused and unfused only: its class is paired within its group, whose fused ran
    slower than the ladder's (another run, another clock); a peer faster there than that group's fused is advised,
    with the group's commit in the row."""
    ladder = run({"GELU_AUX_BIAS": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3}})
    alone = run(
        {"GELU_AUX_BIAS": {"unfused": 1.8e-3, "fused": 1.2e-3, "cutlass-evt": 1.0e-3}}, group="Fp16MemboundCutlass"
    )
    alone.cells["commit"] = "d" * 40
    (advice,) = advise(merged(ladder, alone)).itertuples()
    assert advice.advice == "cutlass-evt" and advice.ratio == pytest.approx(1.8, rel=0.01)  # its group's unfused
    assert advice.why.startswith("cutlass-evt is 20% faster than fused (the ladder's advice)")
    assert advice.commit == "cccccccc,dddddddd" and advice.shapes == 4
    slower = run(
        {"GELU_AUX_BIAS": {"unfused": 1.4e-3, "fused": 0.9e-3, "cutlass-evt": 0.95e-3}}, group="Fp16MemboundCutlass"
    )
    (advice,) = advise(merged(ladder, slower)).itertuples()  # faster than the ladder's fused, but not its group's
    assert advice.advice == "fuse" and advice.commit == "cccccccc"
    with pytest.raises(FusedbenchError, match="no ladder results"):  # a group of peers alone advises nothing
        advise(alone)


def test_a_peer_within_the_noise_or_slower_leaves_the_ladders_advice():
    for triton in (0.995e-3, 1.3e-3):  # 0.5% faster is not told from even; slower never wins
        times = {"RELU_BIAS": {"unfused": 1.5e-3, "fused": 1.0e-3, "fused-autotuned": 1.0e-3, "triton": triton}}
        (advice,) = advise(run(times, group="Fp16MemboundPeers")).itertuples()
        assert advice.advice == "fuse" and advice.why == "fusion saves 33%"
