"""Change points: where a cell's series over runs shifted, found by e-divisive (Apache Otava's implementation).

A pair of runs cannot see a drift of 1-2% over a week of nightly runs; the series can. Each series is one machine's
(one GPU model and stack), one group's, at one benchmark version and sampling protocol, its runs in the order asv
started them (`results.runs`), one value a run: the cell's median time.

Runs of one machine move together, by the card and the session's power state (1-3%), which would hide one cell's
shift and invent others: each run's **common factor**, the median over the group's cells of each cell's time over
that cell's median over the series, is taken out of every cell of the run, and the factors form a series of their
own (the group's: a shift there moved every cell, a stack or a card). Each series then goes to e-divisive
(Matteson and James's, through `otava.analysis.compute_change_points_orig`: a permutation test, a fixed seed, so the
same series gives the same answer), and a change point is kept where it is significant (`MAX_PVALUE`) and the median
after it differs from the median before it by `MIN_CHANGE` or more (the series' own steps smaller than that are
noise for this purpose: docs/findings/2026-11-28-change-points.md measured both on the committed history).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusedbench.catalog.model import KEY, cell_label

MAX_PVALUE = 0.05
MIN_CHANGE = 0.01
MIN_RUNS = 6  # e-divisive needs a few runs on each side of a shift to call it
SEED = 1  # the permutation test's: the same series, the same change points
GROUP_SERIES = "(every cell: the run's common factor)"


@dataclass(frozen=True)
class ChangePoint:
    """A shift in one series: the first run after it (its index and commit), the medians either side, the
    permutation test's p-value."""

    machine: str
    group: str
    version: str
    cell: str  # the cell's label, or GROUP_SERIES
    run: int  # index in the series of the first run after the shift
    runs: int  # the series' length
    commit_before: str
    commit_after: str
    before: float
    after: float
    pvalue: float
    versions_before: dict
    versions_after: dict

    @property
    def change(self) -> float:
        return self.after / self.before - 1

    def what_changed(self) -> str:
        """The versions, driver or card that differ between the runs either side ('-' for none)."""
        changed = self.to_json()["stack_changed"]
        return "; ".join(f"{name} {before} -> {after}" for name, (before, after) in changed.items()) or "-"

    def to_json(self) -> dict:
        return {
            "machine": self.machine,
            "group": self.group,
            "version": self.version,
            "cell": self.cell,
            "run": self.run,
            "runs": self.runs,
            "commit_before": self.commit_before,
            "commit_after": self.commit_after,
            "before": self.before,
            "after": self.after,
            "change": self.change,
            "pvalue": self.pvalue,
            "stack_changed": {
                name: [self.versions_before.get(name), self.versions_after.get(name)]
                for name in sorted(set(self.versions_before) | set(self.versions_after))
                if self.versions_before.get(name) != self.versions_after.get(name)
            },
        }


def change_points_in(values: Sequence[float], *, max_pvalue: float = MAX_PVALUE, min_change: float = MIN_CHANGE):
    """[(index of the first value after a shift, median before, median after, p-value)] of one series, between the
    change points either side of it."""
    from otava.analysis import compute_change_points_orig

    series = np.asarray(values, dtype=float)
    found, _ = compute_change_points_orig(list(series), max_pvalue=max_pvalue, seed=SEED)
    found = sorted(found, key=lambda point: point.index)
    bounds = [0, *(point.index for point in found), len(series)]
    kept = []
    for j, point in enumerate(found):
        before, after = np.median(series[bounds[j] : point.index]), np.median(series[point.index : bounds[j + 2]])
        if abs(after / before - 1) >= min_change:
            kept.append((int(point.index), float(before), float(after), float(point.stats.pvalue)))
    return kept


def common_factors(times: pd.DataFrame) -> pd.Series:
    """Each run's common factor (a column of `times`, cells by runs): the median over its cells of each cell's time
    over that cell's median over the runs."""
    return (times.div(times.median(axis=1), axis=0)).median(axis=0)


def series_of(cells: pd.DataFrame) -> dict[tuple[str, str, str], pd.DataFrame]:
    """The cells' median times as series: per (machine, group, version and protocol), a frame of cells (labels) by
    runs (commits in the order asv started them), only the cells timed in every run."""
    found = {}
    for (machine, group, version), frame in cells.groupby(["machine", "group", "version"], sort=False):
        order = frame.groupby("commit", sort=False)["started_ms"].max().sort_values(kind="stable").index
        frame = frame.assign(label=[cell_label(*row) for row in frame[list(KEY)].itertuples(index=False)])
        times = frame.pivot_table(index="label", columns="commit", values="time_s", aggfunc="first")
        times = times.reindex(columns=order).dropna(axis=0, how="any")
        if len(order) >= MIN_RUNS and not times.empty:
            found[(machine, group, version)] = times
    return found


def find_changes(cells: pd.DataFrame, versions: dict[tuple[str, str], dict], *, min_change: float = MIN_CHANGE,
                 max_pvalue: float = MAX_PVALUE) -> list[ChangePoint]:  # fmt: skip
    """Every change point of every series of `cells` (the loaded table's epilog cells with `version`, `started_ms`
    and the sampling protocol folded into `version`), the group's series first; `versions`: each (machine, commit)'s
    library versions, to name what changed around a shift."""
    points = []
    for (machine, group, version), times in series_of(cells).items():
        factors = common_factors(times)
        runs = list(times.columns)
        series = [(GROUP_SERIES, factors.to_numpy())]
        series += [(label, (row / factors).to_numpy()) for label, row in times.iterrows()]
        for label, values in series:
            for run, before, after, pvalue in change_points_in(values, max_pvalue=max_pvalue, min_change=min_change):
                points.append(ChangePoint(machine, group, version, label, run, len(runs), runs[run - 1], runs[run],
                                          before, after, pvalue, versions.get((machine, runs[run - 1]), {}),
                                          versions.get((machine, runs[run]), {})))  # fmt: skip
    return points


def series_inputs(results, machines: Sequence[str] = ()) -> tuple[pd.DataFrame, dict]:
    """From loaded results (`results.loader.ResultSet`): the epilog cells that can form series (timed; of plain
    runs, a stack's included, of `machines` where named; `version` the benchmark version and the sampling protocol
    its record names), and each (machine, commit)'s library versions, driver and card, from its records."""
    from fusedbench.catalog.deliberate import INJECTED_MARK, PAIRED_MARK, TUNED_MARK

    cells = results.cells.join(results.detail[["version", "started_ms"]])
    marked = "|".join(re.escape(mark) for mark in (PAIRED_MARK, TUNED_MARK, INJECTED_MARK))
    plain = ~cells["machine"].str.contains(marked, regex=True)
    chosen = cells[plain & cells["time_s"].notna() & (cells["machine"].isin(machines) if machines else True)]
    protocol = {(r.machine, r.commit, r.group): r.sampling or "" for r in results.records}
    sampling = [protocol.get(key, "") for key in chosen[["machine", "commit", "group"]].itertuples(index=False)]
    chosen = chosen.assign(version=chosen["version"].astype(str) + [f" | {p}" if p else "" for p in sampling])
    versions = {}
    for record in results.records:
        environment = record.environment
        found = dict(environment.get("versions") or {})
        gpu = environment.get("gpu") or {}
        facts = {"driver": gpu.get("driver"), "card": (gpu.get("uuid") or "")[:12] or None}
        versions[(record.machine, record.commit)] = found | {k: v for k, v in facts.items() if v}
    return chosen, versions
