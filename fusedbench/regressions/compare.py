"""Two runs, cell by cell: each metric's change with its interval, and a verdict.

Metrics (`regressions.metrics.METRICS`: time, epilog cost, fusion speedup), each the median of a per-round
series of one run. Both calls of a round saw the same clock, so the paired metrics cancel much of the power
cap's drift; they are not immune to a run's power state (docs/findings/2026-11-25-threshold-presets.md has the noise).

The interval is a bootstrap of the runs' rounds: one resample of round indices for every cell of
both runs, so the pairing within a run holds, and so does the pairing between the runs: both
follow the same round order (the same carryover-balanced sequence for each workload), so what
depends on a round's position (the clock rising after set-up) cancels in a resample as it does
in the medians themselves. It only knows the noise within the two runs:
between runs the GPU's power state moves whole workloads, so a verdict also needs the change
to pass the preset's threshold for its metric and cell class, calibrated on A/A runs
(`fusedbench.regressions.calibration`, `fusedbench.regressions.thresholds`). Pure: numpy and pandas, no GPU.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusedbench.bootstrap import BOOTSTRAP, bootstrap_medians, last_axis_medians, percentile_interval
from fusedbench.catalog.model import KEY, WORKLOAD, Cell, Status
from fusedbench.catalog.suites import GPU_TIME, MLP_GROUPS
from fusedbench.errors import FusedbenchError
from fusedbench.frames import plain_rows
from fusedbench.regressions.metrics import TIME, WORSE_WHEN_LOWER, metric_rows
from fusedbench.regressions.thresholds import GROUP_GATE, PROVIDER_GATE, Preset, cell_class
from fusedbench.results.loader import ResultSet
from fusedbench.results.runs import group_runs, require_machine, resolve_commit

CELL = [*KEY, "group"]  # one cell of a run: a workload may be timed in two groups (the Blog control's textbook)
OK = Status.OK.value


class Verdict(enum.Enum):
    """What a cell's metric did between the runs."""

    FASTER = "faster"  # better beyond the threshold, and the interval excludes no change
    SAME = "same"  # within the threshold
    SLOWER = "slower"  # worse beyond the threshold, and the interval excludes no change
    UNDECIDED = "undecided"  # beyond the threshold, but too noisy to tell (the interval includes no change)
    MISSING = "missing"  # timed in the baseline, not in the candidate although its group ran
    NEW = "new"  # timed in the candidate only
    FAILED = Status.FAILED.value  # the candidate's cell failed
    NOT_RUN = "not-run"  # the candidate did not run the cell's group
    INCOMPARABLE = "incomparable"  # the group's benchmark version changed (asv's "x")


@dataclass(frozen=True)
class Run:
    """One machine's results at one commit (possibly from its own results folder)."""

    machine: str
    commit: str
    cells: pd.DataFrame  # the ResultSet's cells of this run, with its detail columns
    origin: str = ""  # the results folder, where two are compared

    @property
    def label(self) -> str:
        return f"{self.machine}@{self.commit[:8]}" + (f" ({self.origin})" if self.origin else "")

    @property
    def groups(self) -> dict[str, str]:
        """Each group the run has cells of -> its benchmark version."""
        return dict(plain_rows(self.cells, ["group", "version"]))


def as_run(machine: str, commit: str, version: str, group: str, cells: Sequence[Cell]) -> Run:
    """Cells measured again, as a Run `compare_runs` reads (one group at its benchmark version)."""
    rows = [c.to_json() | {"raw": list(c.samples), "group": group, "version": version} for c in cells]
    return Run(machine, commit, pd.DataFrame(rows, columns=[*CELL, "status", "reason", "raw", "version"]))


def select_run(results: ResultSet, machine: str, commit: str | None, origin: str = "") -> Run:
    """Every group `machine` ran at `commit` (a prefix; None: the commit of its newest run) as one Run; an error
    names what exists (`results.runs` orders the runs)."""
    runs = group_runs(results)
    require_machine(runs, machine, origin)
    if commit is None:
        chosen = str(runs.loc[runs["machine"] == machine, "commit"].iloc[-1])
    else:
        chosen = resolve_commit(runs, machine, commit, origin)
    return cells_run(results, machine, chosen, origin)


def cells_run(results: ResultSet, machine: str, commit: str, origin: str = "", groups=None) -> Run:
    """The Run of `machine`'s cells at `commit`, epilog and mlp (of `groups` only, where given)."""
    cells = results.cells.loc[results.run_rows(machine, commit)]
    if groups is not None:
        cells = cells[cells["group"].isin(list(groups))]
    cells = cells.join(results.detail.loc[cells.index])
    if groups is not None and not any(group in MLP_GROUPS for group in groups):  # an epilog group's run: no mlp
        return Run(machine, commit, cells, origin)
    mlp = mlp_as_cells(results, machine, commit, groups)
    return Run(machine, commit, pd.concat([cells, mlp], ignore_index=True) if len(mlp) else cells, origin)


def mlp_as_cells(results: ResultSet, machine: str, commit: str, groups=None) -> pd.DataFrame:
    """The mlp suite's cells of a run in the columns epilog cells are compared by (`catalog.suites.MlpGroup.cell_key`:
    the workload as the epilog, the hidden layer's GEMM as the shape, the MLP's version as the provider), each timed
    by `judged_clock`."""
    mlp = results.mlp
    rows = (mlp["machine"] == machine) & (mlp["commit"] == commit)
    if groups is not None:
        rows &= mlp["group"].isin(list(groups))
    chosen = mlp[rows]
    by_clock = results.mlp_raw.reindex(chosen.index)
    raw = [
        r.get(judged_clock(group), ()) if isinstance(r, dict) else ()
        for r, group in zip(by_clock, chosen["group"], strict=True)
    ]
    renamed = {"workload": "epilog", "hidden": "m", "inputs": "k", "batch": "n", "version": "provider"}
    cells = chosen.rename(columns=renamed | {"benchmark_version": "version"})
    cells = cells[["machine", "commit", "group", *KEY, "status", "reason", "version", "started_ms"]]
    return cells.assign(time_s=[float(np.median(r)) if len(r) else np.nan for r in raw], raw=raw)


def judged_clock(group: str) -> str:
    """The clock an mlp group is compared by: a step's kernels' GPU time where the group records it (the wall clock of
    these small steps is the host's: between two A/A runs on one H100 it moved 19% in median, the GPU time 0.0%,
    docs/findings/2026-11-25-threshold-presets.md), else its wall clock (an epoch's, never judged: `NEVER_JUDGED`)."""
    clocks = MLP_GROUPS[group].benchmarks
    return GPU_TIME if GPU_TIME in clocks else next(iter(clocks))


# Groups compared and shown, never judged nor calibrated, and why.
NEVER_JUDGED = {
    "MlpEpoch": "an epoch's wall clock is the host's (between two A/A runs on one H100 it came out x0.54-0.92): "
    "compared, never judged",
}


@dataclass(frozen=True)
class Series:
    """Every metric of one run as per-round series: a row per (cell, metric), its rounds in `values`."""

    rows: pd.DataFrame  # KEY, group, metric, scale_s (what the cell class is judged by)
    values: list[np.ndarray]


def metric_series(run: Run) -> Series:
    """The run's metrics (`regressions.metrics`) for every timed cell, each workload's cells of a group together
    (they share rounds)."""
    ok = run.cells[run.cells["status"] == OK]
    workloads: dict[tuple, dict[str, np.ndarray]] = {}  # each workload's samples by provider, in the cells' order
    keys = plain_rows(ok, [*WORKLOAD, "group"])
    for workload, provider, raw in zip(keys, ok["provider"].tolist(), ok["raw"].tolist(), strict=True):
        samples = workloads.setdefault(workload, {})
        if len(raw):
            samples[provider] = np.asarray(raw, dtype=float)
    rows, values = [], []
    for workload, raw in workloads.items():
        where = dict(zip([*WORKLOAD, "group"], workload, strict=True))
        for provider, metric, series, scale in metric_rows(raw):
            rows.append(where | {"provider": provider, "metric": metric, "scale_s": scale})
            values.append(series)
    return Series(pd.DataFrame(rows, columns=[*KEY, "group", "metric", "scale_s"]), values)


def medians(values: list[np.ndarray]) -> np.ndarray:
    """Each series' median, the series of one length at once (a call per series cost seconds a report)."""
    out = np.empty(len(values))
    by_length: dict[int, list[int]] = {}
    for index, series in enumerate(values):
        by_length.setdefault(len(series), []).append(index)
    for indices in by_length.values():
        out[indices] = last_axis_medians(np.stack([values[i] for i in indices]))
    return out


@dataclass(frozen=True)
class Paired:
    """The (cell, metric) rows both runs timed, with each run's point medians and bootstrap medians."""

    rows: pd.DataFrame  # KEY, group, metric, scale_s (the baseline's)
    base: np.ndarray
    cand: np.ndarray
    base_boot: np.ndarray  # rows x replicates
    cand_boot: np.ndarray


def pair_runs(base: Run, cand: Run, *, replicates: int = BOOTSTRAP, seed: int = 0) -> Paired:
    """Match the metric series of two runs and resample their rounds, one resample for both (the seed
    fixes the draws, so the same results give the same intervals)."""
    b, c = metric_series(base), metric_series(cand)
    longest = max((len(v) for v in [*b.values, *c.values]), default=1)
    draws = np.random.default_rng(seed).random((replicates, longest))
    b_index = {r: i for i, r in enumerate(plain_rows(b.rows, [*CELL, "metric"]))}
    c_index = {r: i for i, r in enumerate(plain_rows(c.rows, [*CELL, "metric"]))}
    common = [k for k in b_index if k in c_index]
    bi = [b_index[k] for k in common]
    ci = [c_index[k] for k in common]
    base_boot = bootstrap_medians(b.values, draws)[bi] if b.values else np.empty((0, replicates))
    cand_boot = bootstrap_medians(c.values, draws)[ci] if c.values else np.empty((0, replicates))
    return Paired(
        rows=b.rows.iloc[bi].reset_index(drop=True),
        base=medians(b.values)[bi] if b.values else np.empty(0),
        cand=medians(c.values)[ci] if c.values else np.empty(0),
        base_boot=base_boot,
        cand_boot=cand_boot,
    )


def worse_ratio(ratio: np.ndarray, metrics: pd.Series) -> np.ndarray:
    """Ratios turned so that above 1 is always worse (fusion speedup falls when it gets worse)."""
    flip = metrics.isin(WORSE_WHEN_LOWER).to_numpy()
    return np.where(flip, 1 / ratio, ratio)


def judge(worse: np.ndarray, worse_low: np.ndarray, worse_high: np.ndarray, threshold: np.ndarray) -> list[Verdict]:
    """The verdict of each change given in worse-is-above-1 form, its interval and its threshold."""
    verdicts = []
    for w, low, high, t in zip(worse, worse_low, worse_high, threshold, strict=True):
        if w > 1 + t:
            verdicts.append(Verdict.SLOWER if low > 1 else Verdict.UNDECIDED)
        elif w < 1 / (1 + t):
            verdicts.append(Verdict.FASTER if high < 1 else Verdict.UNDECIDED)
        else:
            verdicts.append(Verdict.SAME)
    return verdicts


COMPARED = [
    *KEY,
    "group",
    "metric",
    "cell_class",
    "verdict",
    "ratio",  # candidate / baseline
    "ci_low",
    "ci_high",
    "threshold",  # relative: 0.05 means a change beyond 5% either way
    "baseline",  # the metric's value in each run (seconds for time, the ratio otherwise)
    "candidate",
    "candidate_low",  # the candidate's own 95% interval (what a fusion inversion is judged on)
    "candidate_high",
    "reason",
    "known",  # a failed cell that failed in the baseline too: a warning, not an alert
]


@dataclass(frozen=True)
class Comparison:
    baseline: Run
    candidate: Run
    preset: Preset
    cells: pd.DataFrame  # COMPARED, a row per (cell, metric)
    groups: pd.DataFrame  # GROUP_COMPARED, a row per group both runs timed at the same version


def measured_rows(paired: Paired, preset: Preset) -> pd.DataFrame:
    """The compared metrics of cells both runs timed, with intervals, thresholds and verdicts."""
    rows = paired.rows.copy()
    ratio = paired.cand / paired.base
    low, high = percentile_interval(paired.cand_boot / paired.base_boot)
    rows["cell_class"] = [cell_class(s) for s in rows["scale_s"]]
    rows["threshold"] = [preset.threshold(m, k) for m, k in plain_rows(rows, ["metric", "cell_class"])]
    worse = worse_ratio(ratio, rows["metric"])
    flip = rows["metric"].isin(WORSE_WHEN_LOWER).to_numpy()
    worse_low = np.where(flip, 1 / high, low)
    worse_high = np.where(flip, 1 / low, high)
    rows["verdict"] = judge(worse, worse_low, worse_high, rows["threshold"].to_numpy())
    rows["ratio"], rows["ci_low"], rows["ci_high"] = ratio, low, high
    rows["baseline"], rows["candidate"] = paired.base, paired.cand
    rows["candidate_low"], rows["candidate_high"] = percentile_interval(paired.cand_boot)
    rows["reason"] = ""
    rows["known"] = False
    return rows


def status_rows(base: Run, cand: Run) -> pd.DataFrame:
    """Cells that cannot be compared by time: not run, incomparable, missing, new, failed (metric: time)."""
    b_keys, c_keys = (pd.MultiIndex.from_frame(run.cells[CELL]) for run in (base, cand))
    b, c = (_statuses(run, keys) for run, keys in ((base, b_keys), (cand, c_keys)))
    cand_groups, base_groups = cand.groups, base.groups
    rows = []
    for key in b_keys.union(c_keys):  # pandas' order of the cells, as the verdicts list them
        (b_status, b_reason), (c_status, c_reason) = b.get(key, (None, None)), c.get(key, (None, None))
        group = key[-1]
        if group not in cand_groups:
            verdict, reason = Verdict.NOT_RUN, f"the candidate did not run group {group}"
        elif group in base_groups and base_groups[group] != cand_groups[group]:
            verdict, reason = Verdict.INCOMPARABLE, f"group {group}'s benchmark version changed"
        elif c_status == Status.FAILED.value:
            too = " (it failed in the baseline too)" if b_status == Status.FAILED.value else ""
            verdict, reason = Verdict.FAILED, f"{c_reason}{too}"
        elif b_status == OK and c_status != OK:
            why = c_reason if c_status is not None else "absent from the candidate's results"
            verdict, reason = Verdict.MISSING, f"{c_status or 'absent'}: {why}"
        elif c_status == OK and b_status != OK and group in base_groups:
            why = b_reason if b_status is not None else "absent from the baseline's results"
            verdict, reason = Verdict.NEW, f"the baseline's cell was {b_status or 'absent'}: {why}"
        else:
            continue
        known = verdict is Verdict.FAILED and b_status == Status.FAILED.value
        rows.append(
            dict(zip(CELL, key, strict=True)) | {"metric": TIME, "verdict": verdict, "reason": reason, "known": known}
        )
    return pd.DataFrame(rows, columns=[*KEY, "group", "metric", "verdict", "reason", "known"])


def _statuses(run: Run, keys: pd.MultiIndex) -> dict[tuple, tuple]:
    """Each cell's (status, reason), None where missing, by its CELL key (`keys`, in the cells' order): plain lookups,
    where reindexing and joining two frames a group took a second a report."""
    rows = plain_rows(run.cells, ["status", "reason"])
    values = [(status, None if pd.isna(reason) else reason) for status, reason in rows]
    return dict(zip(keys, values, strict=True))


GROUP_COMPARED = ["group", "provider", "metric", "gate", "verdict", "ratio", "ci_low", "ci_high", "threshold", "cells"]
ALL_PROVIDERS = "*"


def gates(rows: pd.DataFrame) -> dict[tuple[str, str, str], np.ndarray]:
    """The group gates over compared rows: (group, provider, metric) -> row positions, where provider
    ALL_PROVIDERS is every provider's cells of the group (GROUP_GATE: a change of the whole stack, as a
    driver or GPU state makes), and a provider's own cells of the group its PROVIDER_GATE (a change in one
    library's path: cuBLASLt's epilogs, cupy's kernels)."""
    found = {}
    for (group, metric), part in rows.groupby(["group", "metric"], sort=False):
        found[(group, ALL_PROVIDERS, metric)] = part.index.to_numpy()
        for provider, mine in part.groupby("provider", sort=False):
            found[(group, provider, metric)] = mine.index.to_numpy()
    return found


def gate_class(provider: str) -> str:
    return GROUP_GATE if provider == ALL_PROVIDERS else PROVIDER_GATE


def group_rows(paired: Paired, measured: pd.DataFrame, preset: Preset) -> pd.DataFrame:
    """Each gate's median change over its cells, with a bootstrap interval over the same resamples, judged
    against the metric's threshold for that kind of gate."""
    rows = []
    log_boot = np.log(paired.cand_boot / paired.base_boot)
    log_ratio = np.log(measured["ratio"].to_numpy(dtype=float))
    found = gates(measured)
    # every gate's bootstrap medians as one matrix, its interval in one call (a call per gate cost a second a report)
    replicates = [np.exp(np.median(log_boot[index], axis=0)) for index in found.values()]
    lows, highs = percentile_interval(np.stack(replicates) if replicates else np.empty((0, 0)))
    for ((group, provider, metric), index), low, high in zip(found.items(), lows[:, None], highs[:, None], strict=True):
        shift = float(np.exp(np.median(log_ratio[index])))
        gate = gate_class(provider)
        threshold = preset.threshold(metric, gate)
        flip = metric in WORSE_WHEN_LOWER
        worse, w_low, w_high = (1 / shift, 1 / high, 1 / low) if flip else (shift, low, high)
        (verdict,) = judge(np.array([worse]), w_low, w_high, np.array([threshold]))
        rows.append([group, provider, metric, gate, verdict, shift, low[0], high[0], threshold, len(index)])
    return pd.DataFrame(rows, columns=GROUP_COMPARED)


def compare_runs(base: Run, cand: Run, preset: Preset, *, replicates: int = BOOTSTRAP) -> Comparison:
    """Every cell and metric of two runs, compared; groups only where both ran them at one version."""
    comparable = {g for g, v in cand.groups.items() if base.groups.get(g) == v}
    if not comparable:
        raise FusedbenchError(
            f"{cand.label} and {base.label} share no group at one benchmark version "
            f"(candidate: {', '.join(cand.groups) or 'none'}; baseline: {', '.join(base.groups) or 'none'}), "
            "so nothing can be compared; choose a baseline that ran the same groups"
        )
    paired = pair_runs(restrict(base, comparable), restrict(cand, comparable), replicates=replicates)
    measured = measured_rows(paired, preset)
    cells = pd.concat([measured, status_rows(base, cand)], ignore_index=True)
    order = _worst_first(cells)
    return Comparison(
        base, cand, preset, cells.loc[order, COMPARED].reset_index(drop=True), group_rows(paired, measured, preset)
    )


def restrict(run: Run, groups: set[str]) -> Run:
    """The run with only the cells of these groups."""
    return Run(run.machine, run.commit, run.cells[run.cells["group"].isin(groups)], run.origin)


SEVERITY = [
    Verdict.FAILED,
    Verdict.MISSING,
    Verdict.SLOWER,
    Verdict.UNDECIDED,
    Verdict.NEW,
    Verdict.INCOMPARABLE,
    Verdict.NOT_RUN,
    Verdict.SAME,
    Verdict.FASTER,
]


def _worst_first(cells: pd.DataFrame) -> list:
    """Failures and losses first; within a verdict, the largest worsening first."""
    severity = cells["verdict"].map(SEVERITY.index)
    worse = pd.Series(worse_ratio(cells["ratio"].astype(float).to_numpy(), cells["metric"]), index=cells.index)
    return list(pd.DataFrame({"s": severity, "w": -worse.fillna(0)}).sort_values(["s", "w"], kind="stable").index)
