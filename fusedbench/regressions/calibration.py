"""Thresholds earned from A/A runs, and the false-alarm and detection rates they give.

An A/A pair is two runs of the same code on one machine. A run compared with a resample of
itself sees only the noise within a run, about a quarter of the real noise (the power state
moves whole workloads between runs), so every estimate here is made on pairs of *different*
runs: each replicate build resamples both runs by rounds (one resample of round indices for
every cell of a run, so pairing holds, `bootstrap.bootstrap_medians`) and compares them.

- Either run of a pair may be the baseline (in CI the baseline is whatever ran before, maybe on another
  card), so every pair is judged both ways.
- A preset is one suite's: a default-suite build compares ~1,000 cells of a class where a quick one
  compares ~30, so the worst of them is wider there, and one preset for both would judge the quick
  suite by the default suite's noise. It sets each (metric, cell class) threshold, and each metric's
  gates (a group's median change), to the (1 - alpha / classes) quantile of that class's worst change
  per replicate build, the largest over the suite's pairs, so a whole build is red on any A/A pair at
  most about `alpha` of the time (Bonferroni over the classes).
- Detection injects a slowdown into the candidate of a replicate (one cell's time, one cell's
  epilog cost, a whole group) and counts the builds whose alert catches it.
Pure: numpy and pandas over the committed results; tests/test_calibration.py runs it in CI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from fusedbench.catalog.model import Status
from fusedbench.catalog.suites import CONTROL_GROUPS, SUITES
from fusedbench.errors import FusedbenchError
from fusedbench.regressions.compare import (
    NEVER_JUDGED,
    Paired,
    Run,
    gate_class,
    gates,
    pair_runs,
    restrict,
    select_run,
)
from fusedbench.regressions.metrics import EPILOG_COST, METRICS, TIME, WORSE_WHEN_LOWER
from fusedbench.regressions.thresholds import CLASSES, GATES, GROUP_GATE, PROVIDER_GATE, Preset, cell_class
from fusedbench.results.loader import ResultSet
from fusedbench.results.runs import covering_suites

ALPHA = 0.05  # at most 1 build in 20 red on an A/A pair
REPLICATES = 1000
STEP = 0.005  # thresholds are rounded up to half a per cent
GOALS = {  # what must be caught at least DETECT of the time: (metric, classes, effect)
    "a 10% slowdown of one cell >= 5 ms (time)": (TIME, ("large",), 0.10),
    "a 10% rise in epilog cost where the GEMM is >= 1 ms": (EPILOG_COST, ("large", "medium"), 0.10),
    "a 3% slowdown of a whole group (time)": (TIME, (GROUP_GATE,), 0.03),
    "a 3% slowdown of one provider in a group (time)": (TIME, (PROVIDER_GATE,), 0.03),
}
DETECT = 0.95
CELLS_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # the cell counts a confirmation's margins are earned for


@dataclass(frozen=True)
class ReplicateBuilds:
    """One A/A pair's replicate builds: every row's change per replicate, worse-is-above-1, in logs."""

    rows: pd.DataFrame  # the paired rows: metric, cell_class, group
    point: np.ndarray  # each row's change in the pair itself, worse-is-above-zero, in logs
    log_worse: np.ndarray  # rows x replicates
    log_worse_low: np.ndarray  # rows x replicates: each replicate's interval low end, in logs (the pair's
    # interval moved with the replicate: a nested bootstrap per replicate would cost REPLICATES times more)
    gates: dict[tuple[str, str, str], np.ndarray]  # (group, provider, metric) -> its rows (compare.gates)
    # what is derived once and asked for again and again (a minimum detectable effect tries a hundred)
    derived: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def gate_shifts(self, metric: str, gate: str) -> np.ndarray:
        """gates x replicates: the median log change in `metric` (worse-is-above-zero) of each gate of a kind."""
        key = ("gate_shifts", metric, gate)
        if key not in self.derived:
            shifts = [
                np.median(self.log_worse[rows], axis=0)
                for (_, provider, m), rows in self.gates.items()
                if m == metric and gate_class(provider) == gate
            ]
            self.derived[key] = np.stack(shifts) if shifts else np.empty((0, self.log_worse.shape[1]))
        return self.derived[key]

    def reversed(self) -> ReplicateBuilds:
        """The same replicates with the runs' roles swapped: the candidate as the baseline."""
        return _builds(self.rows, -self.point, -self.log_worse, self.gates)


def _builds(rows: pd.DataFrame, point: np.ndarray, log_worse: np.ndarray, found_gates: dict) -> ReplicateBuilds:
    below = point - (np.percentile(log_worse, 2.5, axis=1) if len(rows) else np.empty(0))
    return ReplicateBuilds(rows, point, log_worse, log_worse - below[:, None], found_gates)


def replicate_builds(base: Run, cand: Run, *, replicates: int = REPLICATES, seed: int = 0) -> ReplicateBuilds:
    paired: Paired = pair_runs(base, cand, replicates=replicates, seed=seed)
    rows = paired.rows.copy()
    rows["cell_class"] = [cell_class(s) for s in rows["scale_s"]]
    flip = rows["metric"].isin(WORSE_WHEN_LOWER).to_numpy()[:, None]
    boot = paired.cand_boot / paired.base_boot
    log_worse = np.log(np.where(flip, 1 / boot, boot))
    point = np.log(np.where(flip[:, 0], paired.base / paired.cand, paired.cand / paired.base))
    return _builds(rows, point, log_worse, gates(rows))


def _class_keys(builds: ReplicateBuilds) -> pd.Series:
    if "class_keys" not in builds.derived:
        builds.derived["class_keys"] = builds.rows["metric"] + "/" + builds.rows["cell_class"]
    return builds.derived["class_keys"]


def class_maxima(builds: ReplicateBuilds) -> dict[str, np.ndarray]:
    """Per class key ('time/large', ..., 'time/group'): the worst log change of each replicate build among
    the rows whose interval lies above no change (only those can alert; -inf where none does), and the
    worst group shift per metric."""
    keys = _class_keys(builds)
    alerting = np.where(builds.log_worse_low > 0, builds.log_worse, -np.inf)
    maxima = {key: alerting[(keys == key).to_numpy()].max(axis=0) for key in dict.fromkeys(keys)}
    for metric in METRICS:
        for gate in GATES:
            shifts = builds.gate_shifts(metric, gate)
            if len(shifts):
                maxima[f"{metric}/{gate}"] = shifts.max(axis=0)
    return maxima


def rounded_up(change: float) -> float:
    """A relative change rounded up to STEP (at least STEP): what a threshold or margin is set to."""
    return round(max(STEP, math.ceil(float(change) / STEP - 1e-9) * STEP), 4)


def derive_thresholds(pairs: list[ReplicateBuilds], alpha: float = ALPHA) -> tuple[dict[str, float], dict[str, str]]:
    """Each class's threshold (relative, rounded up to STEP) and, in words, the noise it came from.

    The quantile is taken pair by pair and the largest kept: a default-suite build has ~1,000 rows of
    a class where a quick one has ~30, so pooling their maxima would set thresholds that keep quick
    builds green and not default ones."""
    by_class: dict[str, list[np.ndarray]] = {}
    for builds in pairs:
        for key, maxima in class_maxima(builds).items():
            by_class.setdefault(key, []).append(maxima)
    each = alpha / len(by_class)
    thresholds, noise = {}, {}
    for key, parts in by_class.items():
        # no change counts as 0 (-inf where no row could alert): a quantile of the clipped maxima, the same number
        quantiles = [math.expm1(float(np.quantile(np.maximum(maxima, 0.0), 1 - each))) for maxima in parts]
        raw = max(quantiles)
        thresholds[key] = rounded_up(raw)
        metric, klass = key.split("/")
        if klass in GATES:
            what = f"{sum(1 for b in pairs for _, p, m in b.gates if m == metric and gate_class(p) == klass)} gates"
        else:
            what = f"{sum(int((_class_keys(b) == key).sum()) for b in pairs)} cell rows"
        median = math.expm1(float(np.median(np.maximum(np.concatenate(parts), 0.0))))
        noise[key] = (
            f"worst change per A/A build over {what} of {len(parts)} comparisons (each pair both ways): "
            f"median {median:+.1%}; "
            f"{1 - each:.2%} quantile {min(quantiles):+.1%} to {raw:+.1%} by comparison"
        )
    return thresholds, noise


def margins_by_cells(pairs: list[ReplicateBuilds], whole: Preset, alpha: float = ALPHA) -> dict[str, dict[int, float]]:
    """Per cell class, the margin for a confirmation that judges at most k of its cells, for each k of CELLS_LADDER:
    the (1 - alpha / (classes * k)) quantile of one cell's alerting change (0 where its interval includes no change),
    pooled over every cell and replicate build of the pairs, so that k cells are red on an A/A pair at most alpha /
    classes of the time (Bonferroni over the k cells, as over the classes). A confirmation of one flagged workload
    judges a few cells where the whole-record rule (`derive_thresholds`) keeps the worst of 28-390; never wider than
    `whole`'s margin, which holds for any number of a group's cells."""
    pools: dict[str, list[np.ndarray]] = {}
    for builds in pairs:
        keys = _class_keys(builds).to_numpy()
        alerting = np.where(builds.log_worse_low > 0, builds.log_worse, 0.0)
        for key in dict.fromkeys(keys):
            pools.setdefault(key, []).append(alerting[keys == key].ravel())
    each = alpha / len({key for builds in pairs for key in class_maxima(builds)})
    ladders = {}
    for key, parts in pools.items():
        pooled, bound = np.concatenate(parts), whole.threshold(*key.split("/"))
        ladders[key] = {k: min(bound, rounded_up(math.expm1(np.quantile(pooled, 1 - each / k)))) for k in CELLS_LADDER}
    return ladders


def make_preset(name: str, calibrated_on: str, runs: tuple, pairs: list[ReplicateBuilds]) -> Preset:
    """A preset from A/A pairs; a class the pairs lack takes its metric's largest cell threshold."""
    found, noise = derive_thresholds(pairs)
    thresholds = {}
    for metric in METRICS:
        known = [v for k, v in found.items() if k.startswith(metric + "/") and k.split("/")[1] not in GATES]
        for klass in (*(c for c, _ in CLASSES), *GATES):
            key = f"{metric}/{klass}"
            thresholds[(metric, klass)] = found.get(key, max(known, default=max(found.values())))
            if key not in found:
                noise[key] = "no A/A rows of this class: the metric's largest threshold"
    return Preset(name, thresholds, calibrated_on, runs, noise)


def _thresholds_of(builds: ReplicateBuilds, preset: Preset) -> np.ndarray:
    """Each row's threshold under the preset (one lookup per metric and class, not per row)."""
    keys = _class_keys(builds)
    table = {key: preset.threshold(*key.split("/")) for key in dict.fromkeys(keys)}
    cache = ("thresholds", tuple(sorted(table.items())))
    if cache not in builds.derived:
        builds.derived[cache] = keys.map(table).to_numpy(dtype=float)
    return builds.derived[cache]


def red_builds(builds: ReplicateBuilds, preset: Preset) -> np.ndarray:
    """Which replicate builds a preset turns red: a cell beyond its threshold with its interval above no
    change, or a group's median change beyond its gate."""
    limit = np.log1p(_thresholds_of(builds, preset))[:, None]
    red = ((builds.log_worse > limit) & (builds.log_worse_low > 0)).any(axis=0)
    for metric in METRICS:
        for gate in GATES:
            shifts = builds.gate_shifts(metric, gate)
            if len(shifts):
                red |= (shifts > math.log1p(preset.threshold(metric, gate))).any(axis=0)
    return red


def detection(
    builds: ReplicateBuilds, preset: Preset, metric: str, classes: tuple[str, ...], effect: float, rng
) -> float:
    """The share of replicate builds that catch `effect` (0.10: 10% worse) injected into one random row of
    the metric and classes (or, for a gate class, into every row of the metric of each gate of that kind)."""
    log_effect = math.log1p(effect)
    if len(classes) == 1 and classes[0] in GATES:
        shifts = builds.gate_shifts(metric, classes[0])
        if not len(shifts):
            return math.nan
        return float((shifts + log_effect > math.log1p(preset.threshold(metric, classes[0]))).mean())
    key = ("candidates", metric, classes)
    if key not in builds.derived:
        mask = ((builds.rows["metric"] == metric) & builds.rows["cell_class"].isin(classes)).to_numpy()
        builds.derived[key] = np.flatnonzero(mask)
    candidates = builds.derived[key]
    if not len(candidates):
        return math.nan
    picks = rng.choice(candidates, size=builds.log_worse.shape[1])
    limits = np.log1p(_thresholds_of(builds, preset))[picks]
    replicate = np.arange(len(picks))
    changed = builds.log_worse[picks, replicate] + log_effect
    return float(((changed > limits) & (builds.log_worse_low[picks, replicate] + log_effect > 0)).mean())


def minimum_detectable(
    builds_list: list[ReplicateBuilds], preset: Preset, metric: str, classes: tuple[str, ...], seed: int = 0
) -> float:
    """The smallest effect (on a half-per-cent grid up to 50%) caught in at least DETECT of the builds."""
    for step in range(1, 101):
        effect = round(step * STEP, 4)
        rng = np.random.default_rng(seed)
        found = [detection(b, preset, metric, classes, effect, rng) for b in builds_list]
        found = [r for r in found if not math.isnan(r)]
        if not found:
            return math.nan
        if float(np.mean(found)) >= DETECT:
            return effect
    return math.nan


def rates(builds_list: list[ReplicateBuilds], preset: Preset, seed: int = 0) -> dict:
    """The false-alarm rate per build, each goal's detection rate, and the minimum detectable effect per class."""
    rng = np.random.default_rng(seed)
    red = [red_builds(b, preset) for b in builds_list]
    false_alarm = round(float(np.mean(np.concatenate(red))), 4)
    goals = {}
    for goal, (metric, classes, effect) in GOALS.items():
        found = [detection(b, preset, metric, classes, effect, rng) for b in builds_list]
        found = [r for r in found if not math.isnan(r)]
        goals[goal] = round(float(np.mean(found)), 4) if found else None
    mde = {}
    for metric, klass in preset.thresholds:
        effect = minimum_detectable(builds_list, preset, metric, (klass,), seed)
        mde[f"{metric}/{klass}"] = None if math.isnan(effect) else effect
    return {
        "false_alarm_per_build": false_alarm,
        "detection": goals,
        "minimum_detectable": mde,
    }


def suite_named(groups: set[str]) -> str:
    """The suite of these groups ('default', 'quick'), or the groups joined. A suite that has gained a control
    group since (the default suite's Blog) still names the runs made before it, one with a group never judged
    (the mlp suite's MlpEpoch) names its runs without it, and runs of part of a suite name that suite."""
    spare = CONTROL_GROUPS | set(NEVER_JUDGED)
    named = [name for name, members in SUITES.items() if groups <= set(members) <= groups | spare]
    if named:
        return named[0]
    # part of a suite, the A/A runs of its other groups still to come: that suite's (the smallest that holds them),
    # whose preset then judges only the groups it was earned on (`Preset.fits`)
    holding = sorted((len(members), name) for name, members in SUITES.items() if groups <= set(members))
    return holding[0][1] if holding else "+".join(sorted(groups))


def aa_pairs(runs: list[Run], machine: str) -> list[tuple[Run, Run]]:
    """Every pair of the given runs (same code, one machine) that share a group at one benchmark version (and is ever
    judged), each pair restricted to those groups, and split by suite: runs that timed the default and the mlp suites
    teach each its own preset."""
    pairs = []
    for index, base in enumerate(runs):
        for cand in runs[index + 1 :]:
            shared: dict[str, set[str]] = {}
            for group, version in base.groups.items():
                if cand.groups.get(group) == version and group not in NEVER_JUDGED:
                    shared.setdefault((covering_suites([group]) or [group])[0], set()).add(group)
            pairs += [(restrict(base, groups), restrict(cand, groups)) for groups in shared.values()]
    if not pairs:
        names = ", ".join(run.commit[:8] for run in runs)
        raise FusedbenchError(f"no two of the runs {names} on {machine} share a group")
    return pairs


def calibrate(results: ResultSet, machine: str, run_sets: list[list[str]]) -> dict[str, Preset]:
    """A preset per suite the A/A runs on `machine` timed ({suite: preset named '<machine>/<suite>@<first run>'}),
    with the benchmark versions it was earned at and its false-alarm and detection rates. Each set holds runs of
    one measurement code (pairs are made within a set only), so A/A runs of an older and a newer version of the
    code can both teach a preset, each set maybe from other machine sessions. A preset names only the runs of its
    own suite, so it can be recomputed from them."""
    sets = [[select_run(results, machine, commit) for commit in commits] for commits in run_sets]
    for runs in sets:
        commits = [run.commit for run in runs]
        twice = next((c for c in commits if commits.count(c) > 1), None)
        if twice:
            raise FusedbenchError(f"--runs names run {twice[:8]} twice: an A/A pair needs two different runs")
    by_suite: dict[str, list[tuple[int, Run, Run]]] = {}
    for number, runs in enumerate(sets):
        for base, cand in aa_pairs(runs, machine):
            by_suite.setdefault(suite_named(set(base.groups)), []).append((number, base, cand))
    presets = {}
    for suite, pairs in by_suite.items():
        timed = {(number, run.commit) for number, base, cand in pairs for run in (base, cand)}
        runs = tuple(
            tuple(run.commit for run in members if (number, run.commit) in timed)
            for number, members in enumerate(sets)
            if any(n == number for n, _ in timed)
        )
        versions: dict[str, str] = {}
        for _, base, _ in pairs:
            for group, version in base.groups.items():
                if versions.setdefault(group, version) != version:
                    raise FusedbenchError(
                        f"the {suite} suite's A/A runs time {group} at two benchmark versions: a preset is earned at "
                        "one; calibrate the runs of each version on their own"
                    )
        name = f"{machine}/{suite}@{runs[0][0][:7]}"
        presets[suite] = preset_from_pairs(name, machine, runs, [(b, c) for _, b, c in pairs], suite, versions)
    return presets


def both_ways(pairs: list[tuple[Run, Run]]) -> list[ReplicateBuilds]:
    """Each A/A pair's replicate builds, judged both ways: the candidate as the candidate, then as the baseline."""
    builds = []
    for index, (base, cand) in enumerate(pairs):
        forward = replicate_builds(base, cand, seed=index)
        builds += [forward, forward.reversed()]
    return builds


def preset_from_pairs(
    name: str,
    machine: str,
    runs: tuple,
    pairs: list[tuple[Run, Run]],
    suite: str,
    versions: dict[str, str],
    *,
    protocol: int = 0,
    sessions: bool = False,
) -> Preset:
    """A preset from A/A pairs of runs, each pair judged both ways, with its false-alarm and detection rates; margins
    (measured side by side at a worker `protocol`) also by the number of cells judged (`margins_by_cells`) where the
    records pin fused-autotuned's algorithm (protocol 2 on): earlier margins keep the rule they decided by. Pairs
    that are paired A/A `sessions` earn each class the worst a session showed instead (`session_thresholds`)."""
    builds = both_ways(pairs)
    if sessions:
        thresholds, noise, red = session_thresholds(builds, len(pairs))
        preset = Preset(name, thresholds, machine, runs, noise)
    else:
        preset = make_preset(name, machine, runs, builds)
    found = rates(builds, preset)
    if sessions:  # a session's false-alarm rate: those the others' margins turn red, leaving one out at a time
        by_group = {group: sum(group in cand.groups for _, cand in pairs) for group in versions}
        found |= {"sessions": len(pairs), "sessions_by_group": by_group, "left_out_red": len(red),
                  "left_out_red_sessions": red, "false_alarm_per_build": round(len(red) / len(pairs), 4)}  # fmt: skip
    found |= {"false_alarm_by_suite": {suite: found["false_alarm_per_build"]}, "pairs_by_suite": {suite: len(pairs)}}
    preset = replace(preset, rates=found, pairs=len(pairs), suite=suite, versions=versions, protocol=protocol)
    return replace(preset, by_cells=margins_by_cells(builds, preset)) if protocol > 1 and not sessions else preset


MIN_SESSIONS = math.ceil(1 / ALPHA) - 1  # the next session passes one class's worst of N with chance 1/(N+1) <= ALPHA


def session_thresholds(builds: list[ReplicateBuilds], sessions: int) -> tuple[dict, dict[str, str], list[int]]:
    """Margins from paired A/A sessions (`fusedbench ab` beside an empty commit), each judged both ways in `builds`
    (two a session, in order): per class, the worst change any session showed that could alert (a cell's or a gate's
    whose interval lies above no change) and STEP more, rounded up to STEP (`_margins_of`); in words, what each came
    from; and which sessions (their indices) the margins the others earn would turn red (leave one out): a session's
    false-alarm rate.

    A paired session is a real re-run of the pair, both sides in lock-step on one card, so the sessions themselves
    are the noise, not replicates of one: the median of 10 rounds resampled wanders far wider than sessions do (25
    quick sessions on four H100s moved no cell past 1.1%, where the replicates' rule, `derive_thresholds`, earned
    9%). Sessions being exchangeable, the next one passes the worst of N in one class with chance 1/(N+1), which
    MIN_SESSIONS keeps at most ALPHA; over all classes at once it is what leaving one out counts, and a held-out
    card's sessions say what it is on a card none came from. The detection rates and minimum effects are then those
    of the replicates (`rates`), which wander wider: a floor."""
    worst = [_alerting_worst(each) for each in builds]
    margins = _margins_of(worst)
    thresholds, noise = {}, {}
    for metric in METRICS:
        known = [v for (m, _), v in margins.items() if m == metric]
        for klass in (*(c for c, _ in CLASSES), *GATES):
            key = f"{metric}/{klass}"
            if (metric, klass) in margins:
                thresholds[(metric, klass)] = margins[(metric, klass)]
                seen = [w[key] for w in worst if key in w]
                noise[key] = (f"worst change of {len(seen) // 2} A/A sessions (each both ways) that could alert: "
                              f"{math.expm1(max(seen)):+.1%}")  # fmt: skip
            else:
                thresholds[(metric, klass)] = max(known, default=STEP)
                noise[key] = "no A/A rows of this class: the metric's largest margin"
    red = []
    for index in range(sessions):
        others = _margins_of(worst[: 2 * index] + worst[2 * index + 2 :])
        mine = worst[2 * index : 2 * index + 2]
        if any(math.expm1(v) > others.get(tuple(k.split("/")), 0.0) for w in mine for k, v in w.items() if v > 0):
            red.append(index)
    return thresholds, noise, red


def _alerting_worst(each: ReplicateBuilds) -> dict[str, float]:
    """Per class key, the worst log change of one build among those whose interval lies above no change (0 where
    none does): a cell's, or a gate's median."""
    keys = _class_keys(each).to_numpy()
    found: dict[str, float] = {}
    if len(keys):
        alerting = np.where(np.percentile(each.log_worse, 2.5, axis=1) > 0, each.point, 0.0)
        for key in dict.fromkeys(keys):
            found[key] = float(alerting[keys == key].max())
    for (_, provider, metric), members in each.gates.items():
        key = f"{metric}/{gate_class(provider)}"
        low = float(np.percentile(np.median(each.log_worse[members], axis=0), 2.5))
        found[key] = max(found.get(key, 0.0), float(np.median(each.point[members])) if low > 0 else 0.0)
    return found


def _margins_of(worst: list[dict[str, float]]) -> dict[tuple[str, str], float]:
    """(metric, class) -> the worst of these builds' changes and STEP more, rounded up to STEP: a session is red where
    any of some ten classes passes its margin, and the worst of N alone was passed by 2 of 24 H100 sessions left out
    one at a time (a time of 1.10% over the others' 1.0%; a fusion speedup of 1.31% over 1.0%)."""
    found: dict[str, float] = {}
    for each in worst:
        for key, value in each.items():
            found[key] = max(found.get(key, 0.0), value)
    return {tuple(key.split("/")): rounded_up(math.expm1(value) + STEP) for key, value in found.items()}


def aa_spreads(
    results: ResultSet, machine: str, commits: list[str], *, shortest: float = 1e-3, leave_out: tuple[str, ...] = ()
) -> pd.Series:
    """Each cell's A/A spread over runs of one code state ((max - min) / median of its times, `stats.spread`),
    indexed by group, epilog, dtype, shape and provider: the cells timed in every run, at least `shortest` seconds
    at the median, of providers not in `leave_out`."""
    from fusedbench.stats import spread

    cells = results.cells
    ours = (cells.machine == machine) & cells.commit.str.startswith(tuple(commits))
    chosen = cells[ours & (cells.status == Status.OK.value)]
    chosen = chosen[~chosen.provider.isin(leave_out)]
    by_cell = chosen.groupby(["group", "epilog", "dtype", "m", "k", "n", "provider"]).time_s
    timed_everywhere = by_cell.count() == len(commits)
    long_enough = by_cell.median() >= shortest
    spreads = by_cell.apply(lambda times: spread(list(times)))
    return spreads[timed_everywhere & long_enough]
