"""Which run is which (`results.runs`): one ordering, by when asv started a run, for every command and section."""

from __future__ import annotations

import math

import pandas as pd

from fusedbench.results.runs import (
    baseline_of,
    commits_in_order,
    covering_suites,
    gpu_machines,
    newest_runs,
    order_runs,
)


def cells(*runs: tuple[str, str, str, float, str]) -> pd.DataFrame:
    """A cell per (machine, commit, group, started_ms, version), in the order given."""
    return pd.DataFrame(runs, columns=["machine", "commit", "group", "started_ms", "version"])


def test_runs_are_ordered_by_when_asv_started_them_not_by_the_order_they_were_read():
    runs = order_runs(cells(("gpu", "new", "A", 2, "1"), ("gpu", "old", "A", 1, "1"), ("gpu", "c", "C", math.nan, "1")))
    assert list(runs["commit"]) == ["c", "old", "new"]  # a run without a start time counts as the oldest
    newest = newest_runs(runs)
    assert dict(zip(newest["group"], newest["commit"], strict=True)) == {"A": "new", "C": "c"}


def test_each_groups_newest_run_is_its_own_whatever_the_other_groups_did():
    # group A re-run at an older commit after B ran at a newer one: A's newest is its own last run
    runs = order_runs(cells(("gpu", "X", "A", 1, "1"), ("gpu", "Y", "B", 2, "1"), ("gpu", "X", "A", 3, "1")))
    newest = newest_runs(runs, machines=["gpu"])
    assert dict(zip(newest["group"], newest["commit"], strict=True)) == {"A": "X", "B": "Y"}
    assert commits_in_order(runs, "gpu") == ["Y", "X"]  # each commit placed by its newest run


def test_the_baseline_is_the_newest_earlier_run_of_the_group_at_the_same_version_of_another_commit():
    runs = order_runs(
        cells(
            ("gpu", "a", "A", 1, "1"),
            ("gpu", "b", "A", 2, "1"),
            ("other", "c", "A", 3, "1"),  # another machine
            ("gpu", "d", "B", 4, "1"),  # another group
            ("gpu", "e", "A", 5, "2"),  # another version
            ("gpu", "f", "A", 6, "1"),
            ("gpu", "g", "A", 7, "1"),  # started after the candidate
        )
    )
    candidate = runs[runs["commit"] == "f"].iloc[0]
    assert baseline_of(runs, candidate)["commit"] == "b"
    assert baseline_of(runs, runs[runs["commit"] == "e"].iloc[0]) is None  # the first run of version 2
    assert baseline_of(runs, runs[runs["commit"] == "a"].iloc[0]) is None


def test_tuned_machines_are_left_out_and_suites_cover_the_groups_fewest_first():
    assert gpu_machines(["h100", "h100-tuned-fused-algorithm-7", "h200", "h100"]) == ["h100", "h200"]
    assert covering_suites(["Quick"]) == ["quick"]
    assert covering_suites(["Fp16Seed", "Blog", "Quick"]) == ["quick", "default"]  # not full: default holds them
    assert covering_suites(["Fp32Llm", "Fp16Seed"]) == ["default", "full"]
    assert covering_suites(["Fp16SeedCutlass", "MlpStep"]) == ["peers", "mlp"]
