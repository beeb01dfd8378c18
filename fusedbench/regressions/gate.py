"""The gate: one verdict per machine and suite, which `alert`, `compare` and the report all render.

A suite is judged group by group (its groups' newest runs often come from different commits): each
group's candidate run against its baseline (`results.runs` chooses both), compared cell by cell
(`regressions.compare`) under the preset in force for the machine, and the comparison turned into
alerts and warnings (`judge_comparison`). The suite is then

- **red** where any group has an alert (`AlertKind`): a regression (time or epilog cost slower, or a
  whole group's time), a new fusion inversion (fused significantly below INVERSION x unfused where
  the baseline was not), a fusion loss (unfused / fused fell beyond its threshold), a cell missing
  from a group the candidate ran, a cell that starts failing;
- **not judged** where fewer than half of the suite's cells (as the catalog counts them) were
  compared: a group with no earlier run at its benchmark version, one the preset has no calibration
  for (its noise was never measured: a threshold would be a guess), one that never ran;
- **green** otherwise.

Warnings never fail: changes beyond a threshold too noisy to tell, inversions and failures already in the
baseline, groups not run or at another benchmark version. Pure: pandas over loaded results.

A paired run (`fusedbench ab`, a machine of its own per session) is judged within its session: its candidate (asv
has it last) against its base, the run before it, each group by its GPU's confirmation margins, those earned from
paired A/A sessions where it has them (`thresholds.margins_for`; a session narrowed by `ab --cells`, by those
sessions of its cells earned first; a group without margins of its own is compared and not judged),
fused-autotuned with the pick held fixed and the picks judged apart (`regressions.picks`). Its suite is the groups
the session measured (`ab --bench` picks a few of a large suite): the rest of the suite it was never asked for.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass, field

import pandas as pd

from fusedbench.analysis.speedups import INVERSION
from fusedbench.catalog.deliberate import PAIRED_MARK, baseline_machine, gpu_machine
from fusedbench.catalog.model import Pick, cell_label
from fusedbench.catalog.suites import SUITES
from fusedbench.errors import FusedbenchError
from fusedbench.frames import plain_rows
from fusedbench.regressions.compare import (
    ALL_PROVIDERS,
    CELL,
    COMPARED,
    NEVER_JUDGED,
    Comparison,
    Run,
    Verdict,
    cells_run,
    compare_runs,
)
from fusedbench.regressions.history import cell_series, regression_start
from fusedbench.regressions.metrics import METRICS, TIME, WORSE_WHEN_LOWER, AlertKind
from fusedbench.regressions.picks import held_fixed, pick_comparison, pick_margins
from fusedbench.regressions.thresholds import CONFIRMATION, Preset, margins_for, preset_for
from fusedbench.results.loader import ResultSet
from fusedbench.results.runs import (
    baseline_of,
    covering_suites,
    group_cell_count,
    group_runs,
    newest_runs,
    require_machine,
    resolve_commit,
    run_at,
)

KNOWN_SHOWN = 3  # known inversions named in the warning (the worst); the rest are counted
JUDGED_SHARE = 0.5  # a suite with fewer of its cells compared than this is not judged
SELF_BASELINE = "its baseline would be the run itself"  # a group whose only baseline is its own run
NO_MARGINS = "no margins of this GPU's for it, side-by-side or paired: compared and shown, not judged"
PAIRED_LINE = (
    "each group by its GPU's confirmation margins (its paired A/A sessions' where it has them), the base's code beside "
    "the candidate's on one card"
)


class Outcome(enum.Enum):
    """A suite's (or a machine's) verdict; alert's exit code is 1 for RED and 0 otherwise."""

    GREEN = "green"
    RED = "red"
    NOT_JUDGED = "not judged"


@dataclass(frozen=True)
class Judged:
    """A comparison judged: what fails the build and what only warns."""

    comparison: Comparison
    alerts: pd.DataFrame  # the failing rows (cells and groups), with `kind` and `began_at`
    warnings: list[str]

    @property
    def failed(self) -> bool:
        return not self.alerts.empty


def _inverted(value: float, high: float, line: float) -> bool:
    """Significantly below the line (fused below INVERSION x unfused): the value and its whole interval under it."""
    return value < line and high < line


def _cell_alert(row, warnings: list[str], known: list[tuple[float, str]]) -> AlertKind | None:
    """The alert one compared row raises (None: none), its warnings added to `warnings`, a fusion inversion
    present in both runs to `known`."""
    verdict, metric = row["verdict"], row["metric"]
    kind = None
    if verdict is Verdict.FAILED:
        if row["known"]:
            warnings.append(f"{where(row)} still fails (it failed in the baseline too): {row['reason']}")
        else:
            kind = AlertKind.FAILED
    elif verdict is Verdict.MISSING:
        kind = AlertKind.MISSING
    elif (line := METRICS[metric].inverts_below) is not None:
        now = _inverted(row["candidate"], row["candidate_high"], line)
        before = row["baseline"] < line
        if now and before:
            known.append((row["candidate"], f"{where(row)} {row['candidate']:.2f}x (was {row['baseline']:.2f}x)"))
        if verdict is Verdict.SLOWER:
            kind = AlertKind.FUSION_INVERSION if now and not before else METRICS[metric].alert
        elif now and not before:
            warnings.append(
                f"{where(row)}: fused is now {row['candidate']:.2f}x unfused, below "
                f"{line:g}x, but the change is within the noise ({_change(row)})"
            )
    elif verdict is Verdict.SLOWER:
        kind = METRICS[metric].alert
    if verdict is Verdict.UNDECIDED and _worse(row):
        warnings.append(f"{where(row)} {metric}: {_change(row)}, beyond its threshold but too noisy to tell")
    return kind


def _gate_alerts(comparison: Comparison) -> list[dict]:
    """A row for each group gate whose median change is slower beyond its threshold."""
    found = []
    for _, gate in comparison.groups.iterrows():
        if gate["verdict"] is Verdict.SLOWER:
            kind = METRICS[gate["metric"]].alert
            found.append(
                dict.fromkeys(COMPARED)
                | {key: gate[key] for key in ("group", "provider", "metric", "verdict", "ratio", "ci_low", "ci_high")}
                | {
                    "threshold": gate["threshold"],
                    "reason": f"the median change of the group's {gate['cells']} {_whose(gate['provider'])}cells",
                    "kind": kind.value,
                }
            )
    return found


def judge_comparison(comparison: Comparison) -> Judged:
    """The alerts and warnings of one comparison (module docstring)."""
    cells, warnings, failing = comparison.cells, [], []
    known: list[tuple[float, str]] = []  # inversions present in both runs: one summary line, worst first
    columns = list(cells.columns)
    for index, values in zip(cells.index, plain_rows(cells, columns), strict=True):  # dicts: Series are slow
        kind = _cell_alert(dict(zip(columns, values, strict=True)), warnings, known)
        if kind is not None:
            failing.append((index, kind.value))
    gpus = {gpu_machine(run.machine) for run in (comparison.baseline, comparison.candidate)}
    if len(gpus) > 1:
        warnings.append(
            f"the runs are of different machines ({comparison.baseline.machine}, {comparison.candidate.machine}): "
            "every change includes the difference between them, and the thresholds are for one machine's noise"
        )
    if known:
        worst = "; ".join(text for _, text in sorted(known)[:KNOWN_SHOWN])
        more = f" and {len(known) - KNOWN_SHOWN} more (--format json)" if len(known) > KNOWN_SHOWN else ""
        warnings.append(
            f"{len(known)} known fusion inversion(s), fused below {INVERSION:g}x unfused in both runs: {worst}{more}"
        )
    alerts = cells.loc[[i for i, _ in failing]].assign(kind=[k for _, k in failing])
    gates = _gate_alerts(comparison)
    if gates:
        alerts = pd.concat([pd.DataFrame(gates), alerts], ignore_index=True)
    for verdict, what in ((Verdict.NOT_RUN, "not run by the candidate"), (Verdict.INCOMPARABLE, "incomparable")):
        groups = sorted(set(cells[cells["verdict"] == verdict]["group"]))
        if groups:
            warnings.append(f"group(s) {', '.join(groups)} {what}: {_count(cells, verdict)} cells not compared")
    return Judged(comparison, alerts.reset_index(drop=True).assign(began_at=""), warnings)


def judge_picks(comparison: Comparison, picks: list[Pick]) -> pd.DataFrame:
    """An alert row for each pick of the candidate's slower than the base's beyond the picks' margin, its reason naming
    both algorithms (`regressions.picks.pick_comparison` compared them); empty where none is."""
    alerts = judge_comparison(comparison).alerts
    alerts = alerts[alerts["epilog"].notna() & (alerts["metric"] == TIME)]  # the picks' cells; no group gate
    chosen = {p.key.label: p.algorithms for p in picks}
    reasons = [
        f"the candidate's autotuning picked {chosen[where(row)]['candidate']}, slower than the base's "
        f"{chosen[where(row)]['baseline']} (both timed on both sides)"
        for _, row in alerts.iterrows()
    ]
    return alerts.assign(reason=reasons).reset_index(drop=True)


def with_picks(judged: Judged, machine: str, commits: dict[str, str], version: str, picks: list[Pick]) -> Judged:
    """A group's judgement with its picks judged (`judge_picks`) and their alerts added."""
    if not picks:
        return judged
    margins = pick_margins(judged.comparison.preset)
    found = judge_picks(pick_comparison(machine, commits, version, picks, margins), picks)
    if found.empty:
        return judged
    alerts = pd.concat([judged.alerts, found.assign(began_at="")], ignore_index=True)
    return Judged(judged.comparison, alerts, judged.warnings)


def _whose(provider: str) -> str:
    return "" if provider == ALL_PROVIDERS else f"{provider} "


def _count(cells: pd.DataFrame, verdict: Verdict) -> int:
    return int((cells["verdict"] == verdict).sum())


def _worse(row) -> bool:
    ratio = row["ratio"]
    return (ratio < 1) if row["metric"] in WORSE_WHEN_LOWER else (ratio > 1)


def where(row) -> str:
    """The row's cell label, or its group gate's name."""
    if row.get("epilog") is None or (isinstance(row.get("epilog"), float) and math.isnan(row["epilog"])):
        return f"group {row['group']}" + ("" if row["provider"] == ALL_PROVIDERS else f" ({row['provider']})")
    return cell_label(row["epilog"], row["dtype"], row["m"], row["k"], row["n"], row["provider"])


def _change(row) -> str:
    if row["ratio"] is None or pd.isna(row["ratio"]):
        return ""
    return f"x{row['ratio']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}], threshold {row['threshold']:.1%}"


def describe(row) -> str:
    """One line for one compared row: where, metric, verdict (or alert kind), change, reason, where a step began."""
    head = f"{row['kind']}: " if isinstance(row.get("kind"), str) else ""
    verdict = row["verdict"].value if isinstance(row["verdict"], Verdict) else row["verdict"]
    change = _change(row)
    reason = "; ".join(part for part in (row.get("reason"), _began(row)) if part)
    change = f" {change}" if change else ""
    reason = f" - {reason}" if reason else ""
    return f"{head}{where(row)} {row['metric']} {verdict}{change}{reason}"


def _began(row) -> str:
    began = row.get("began_at")
    return f"the step began at commit {began[:8]}" if isinstance(began, str) and began else ""


@dataclass(frozen=True)
class GroupJudgement:
    """One group of a suite: its candidate run against its baseline, judged; or why it was not."""

    group: str
    cells: int  # the group's cells in the catalog
    candidate: Run | None  # None: the group has no run to judge (never ran, or not at the chosen commit)
    baseline: Run | None = None
    judged: Judged | None = None
    not_judged: str = ""  # why it was not compared, the group unnamed ('' where it was)

    @functools.cached_property
    def compared(self) -> int:
        """How many of the candidate's cells the baseline also holds: each compared by time, or by status (a cell
        refused in both runs is judged unchanged, one that stopped running is missing)."""
        if self.judged is None or self.not_judged:
            return 0
        comparison = self.judged.comparison
        keys = [pd.MultiIndex.from_frame(run.cells[CELL]) for run in (comparison.baseline, comparison.candidate)]
        return len(keys[1].intersection(keys[0]))


@dataclass(frozen=True)
class SuiteVerdict:
    """One machine's suite, judged group by group."""

    machine: str
    suite: str
    preset: Preset
    preset_line: str  # why this preset
    groups: tuple[GroupJudgement, ...]

    @property
    def cells(self) -> int:
        return sum(g.cells for g in self.groups)

    @property
    def compared(self) -> int:
        return sum(g.compared for g in self.groups)

    @property
    def alerts(self) -> pd.DataFrame:
        found = [g.judged.alerts for g in self.groups if g.judged is not None and g.judged.failed and not g.not_judged]
        return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=[*COMPARED, "kind", "began_at"])

    @property
    def warnings(self) -> list[str]:
        return [w for g in self.groups if g.judged is not None and not g.not_judged for w in g.judged.warnings]

    @property
    def outcome(self) -> Outcome:
        if not self.alerts.empty:
            return Outcome.RED
        return Outcome.NOT_JUDGED if self.compared < JUDGED_SHARE * self.cells else Outcome.GREEN

    @property
    def reason(self) -> str:
        """One line: what was compared against what, and why it is not judged where it is not."""
        count = f"{self.compared} of {self.cells} cells compared"
        if self.outcome is Outcome.NOT_JUDGED:
            causes: dict[str, list[str]] = {}
            for group in self.groups:
                if group.not_judged:
                    causes.setdefault(group.not_judged, []).append(group.group)
            return f"{count}, fewer than half: " + "; ".join(f"{c} ({', '.join(g)})" for c, g in causes.items())
        return count


@dataclass(frozen=True)
class MachineVerdict:
    """What the gate says of one machine: a verdict per suite."""

    machine: str
    suites: tuple[SuiteVerdict, ...] = field(default_factory=tuple)

    @property
    def outcome(self) -> Outcome:
        outcomes = {s.outcome for s in self.suites}
        if Outcome.RED in outcomes:
            return Outcome.RED
        return Outcome.GREEN if Outcome.GREEN in outcomes else Outcome.NOT_JUDGED

    @property
    def alerts(self) -> int:
        return sum(len(s.alerts) for s in self.suites)


@dataclass(frozen=True)
class Choice:
    """Which runs to judge: each group's newest run on `machine` (or its run at `candidate`), against its baseline
    (`results.runs.baseline_of`; for a tuned machine its GPU's run at the same commit, else the GPU's newest before
    it; or the run at `baseline` on `baseline_machine`; or, given a second results folder, that folder's newest run
    of the group)."""

    machine: str
    suites: tuple[str, ...]
    candidate: str | None = None  # a full commit hash
    baseline: str | None = None  # a full commit hash
    baseline_machine: str | None = None  # default: the candidate's GPU (a tuned run is judged against its GPU's)
    preset: str | None = None  # a preset's name; default: each suite's on the machine (`thresholds.preset_for`)


def _candidate_row(runs: pd.DataFrame, choice: Choice, group: str) -> pd.Series | None:
    if choice.candidate is not None:
        return run_at(runs, choice.machine, group, choice.candidate)
    newest = newest_runs(runs, machines=[choice.machine], groups=[group])
    return None if newest.empty else newest.iloc[-1]


def _baseline_row(runs, base_runs, choice: Choice, candidate: pd.Series) -> pd.Series | None:
    """The candidate's baseline run, or None; `base_runs` is the baseline folder's runs (or `runs` itself)."""
    machine = choice.baseline_machine or baseline_machine(choice.machine)
    group = candidate["group"]
    if choice.baseline is not None:
        return run_at(base_runs, machine, group, choice.baseline)
    if base_runs is not runs:
        newest = newest_runs(base_runs, machines=[machine], groups=[group])
        return None if newest.empty else newest.iloc[-1]
    if machine == choice.machine:
        return baseline_of(runs, candidate)
    # another machine (a tuned run's GPU, or one named MACHINE@): its run of the group at the same commit (for a
    # tuned run, the same code untuned), else its newest at the candidate's version
    mine = runs[(runs["machine"] == machine) & (runs["group"] == group) & (runs["version"] == candidate["version"])]
    same = mine[mine["commit"] == candidate["commit"]]
    return same.iloc[-1] if not same.empty else (None if mine.empty else mine.iloc[-1])


def _no_baseline(choice: Choice, base: pd.Series | None) -> str:
    """Why a group's candidate has no baseline to be compared with."""
    if base is not None:
        return f"the baseline {base['commit'][:8]} ran another benchmark version"
    if choice.baseline is not None:
        return f"no run at the baseline commit {choice.baseline[:8]}"
    return "no earlier run at the same benchmark version (the first runs of a changed measurement)"


@dataclass(frozen=True)
class Sources:
    """Where the candidate's and the baseline's runs come from: one results folder, or two (`origins` names them)."""

    results: ResultSet
    baseline_results: ResultSet
    origins: tuple[str, str] = ("", "")  # (the baseline's folder, the candidate's), where two are compared

    @property
    def two(self) -> bool:
        return self.baseline_results is not self.results


def _judge_group(
    sources: Sources, runs, base_runs, choice: Choice, preset: Preset, group: str, candidate: pd.Series | None
) -> GroupJudgement:
    """One group's judgement (GroupJudgement) of its `candidate` run (`_candidate_row`)."""
    cells = group_cell_count(group)
    if candidate is None:
        where = f"at {choice.candidate[:8]}" if choice.candidate else f"on {choice.machine}"
        return GroupJudgement(group, cells, None, not_judged=f"not run {where}")
    cand = cells_run(sources.results, choice.machine, candidate["commit"], sources.origins[1], groups=[group])
    if PAIRED_MARK in choice.machine:  # a paired session is judged over the cells it was asked for (`ab --cells`)
        cells = len(cand.cells[CELL].drop_duplicates())
    base = _baseline_row(runs, base_runs, choice, candidate)
    if base is None or base["version"] != candidate["version"]:
        return GroupJudgement(group, cells, cand, not_judged=_no_baseline(choice, base))
    if (base["machine"], base["commit"]) == (choice.machine, candidate["commit"]) and not sources.two:
        return GroupJudgement(group, cells, cand, not_judged=SELF_BASELINE)
    baseline = cells_run(
        sources.baseline_results, str(base["machine"]), str(base["commit"]), sources.origins[0], groups=[group]
    )
    picks = paired_picks(sources.results, cand, group) if PAIRED_MARK in choice.machine else []
    compared = judge_comparison(compare_runs(held_fixed(baseline, picks), cand, preset))
    commits = {"baseline": baseline.commit, "candidate": cand.commit}
    compared = with_picks(compared, choice.machine, commits, str(candidate["version"]), picks)
    if group in NEVER_JUDGED:
        return GroupJudgement(group, cells, cand, baseline, compared, not_judged=NEVER_JUDGED[group])
    if preset is CONFIRMATION:
        return GroupJudgement(group, cells, cand, baseline, compared, not_judged=NO_MARGINS)
    if not preset.earned_at(group, candidate["version"]):  # compared, never judged by another measurement's noise
        what = "another benchmark version of it" if group in preset.versions else "other groups"
        why = f"no calibration: preset {preset.name!r} was earned on A/A runs of {what}"
        return GroupJudgement(group, cells, cand, baseline, compared, not_judged=why)
    return GroupJudgement(group, cells, cand, baseline, _with_step_starts(compared, sources.results, cand))


def _with_step_starts(judged: Judged, results: ResultSet, candidate: Run) -> Judged:
    """Each cell alert on time with the commit its step began at, where the machine's history shows one earlier
    than the candidate (asv's step detection over the group's runs at the candidate's version)."""
    if judged.alerts.empty:
        return judged
    began = []
    for _, row in judged.alerts.iterrows():
        start = None
        if isinstance(row.get("epilog"), str) and row["metric"] == TIME:
            key = {k: row[k] for k in ("epilog", "dtype", "m", "k", "n", "provider", "group")}
            series = cell_series(results, candidate.machine, key, candidate.groups.get(row["group"]))
            at = series.index[series["commit"] == candidate.commit]
            if len(at):  # a candidate cell with no time (failed, missing) has no step to date
                start = regression_start(series[: at.max() + 1])
        began.append(start if start is not None and start != candidate.commit else "")
    return Judged(judged.comparison, judged.alerts.assign(began_at=began), judged.warnings)


def judge(results: ResultSet, choice: Choice, sources: Sources | None = None) -> MachineVerdict:
    """The gate's verdict on `choice.machine`, suite by suite (module docstring); `sources` where the baseline's
    runs come from a results folder of their own."""
    sources = sources or Sources(results, results)
    runs = group_runs(sources.results)
    require_machine(runs, choice.machine, sources.origins[1])
    base_runs = group_runs(sources.baseline_results) if sources.two else runs
    require_machine(base_runs, choice.baseline_machine or baseline_machine(choice.machine), sources.origins[0])
    paired = PAIRED_MARK in choice.machine and choice.preset is None
    asked = (paired_record(sources.results, choice.machine).get("cells") or "") if paired else ""
    suites = []
    for suite in choice.suites:
        candidates = {group: _candidate_row(runs, choice, group) for group in SUITES[suite]}
        if paired:  # a paired session measured the groups it was asked for (`ab --bench`): its verdict covers those
            candidates = {group: row for group, row in candidates.items() if row is not None} or candidates
        versions = {group: str(row["version"]) for group, row in candidates.items() if row is not None}
        if paired:
            preset, preset_line = CONFIRMATION, PAIRED_LINE
        else:
            preset, preset_line = preset_for(choice.machine, suite, choice.preset, versions)
        groups = tuple(
            _judge_group(
                sources,
                runs,
                base_runs,
                choice,
                margins_for(choice.machine, group, versions[group], asked) if paired and group in versions else preset,
                group,
                candidate,
            )
            for group, candidate in candidates.items()
        )
        suites.append(SuiteVerdict(choice.machine, suite, preset, preset_line, groups))
    verdict = MachineVerdict(choice.machine, tuple(suites))
    itself = [g for s in verdict.suites for g in s.groups if g.not_judged == SELF_BASELINE]
    if itself and not any(g.baseline for s in verdict.suites for g in s.groups):
        raise FusedbenchError(
            f"the baseline {choice.baseline[:8] if choice.baseline else ''} is the candidate itself (the newest run "
            f"of {', '.join(g.group for g in itself)}); name an earlier commit with --baseline"
        )
    if choice.baseline is not None and not any(g.baseline for s in verdict.suites for g in s.groups):
        raise FusedbenchError(
            f"the baseline {choice.baseline[:8]} shares no group at one benchmark version with "
            f"{choice.candidate[:8] if choice.candidate else 'the newest runs'} on {choice.machine}, so nothing can be "
            "compared; choose a baseline that ran the same groups"
        )
    return verdict


def suites_of_commit(runs: pd.DataFrame, machine: str, commit: str) -> tuple[str, ...]:
    """The suites `alert` judges by default: those holding the groups `machine` ran at `commit`."""
    mine = runs[(runs["machine"] == machine) & (runs["commit"] == commit)]
    return tuple(covering_suites(mine["group"]))


def paired_record(results: ResultSet, session: str) -> dict:
    """What a paired session's records say of the pairing (`paired.results`): its order, code, rounds, the --cells
    regex it was narrowed by."""
    return next((dict(r.environment.get("paired", {})) for r in results.records if r.machine == session), {})


def paired_picks(results: ResultSet, candidate: Run, group: str) -> list[Pick]:
    """fused-autotuned's two picks of a paired run's group, where they differed (its candidate's record says)."""
    for record in results.records:
        if (record.machine, record.commit, record.group) == (candidate.machine, candidate.commit, group):
            return [Pick.from_json(pick) for pick in record.environment.get("paired", {}).get("picks", [])]
    return []


def default_choice(results: ResultSet, machine: str, **given) -> Choice:
    """`alert`'s and `compare`'s defaults: the suites of the candidate's (or the newest run's) commit."""
    runs = group_runs(results)
    require_machine(runs, machine)
    candidate = given.get("candidate")
    commit = candidate or str(runs.loc[runs["machine"] == machine, "commit"].iloc[-1])
    suites = tuple(dict.fromkeys(given.pop("suites", None) or suites_of_commit(runs, machine, commit)))
    return Choice(machine, tuple(suites), **given)


def judge_every_suite(results: ResultSet, machines: list[str]) -> list[MachineVerdict]:
    """The report's verdicts: per machine, every suite that holds a group the machine ran, each as `fusedbench alert
    --machine M --suite S` gives it."""
    runs = group_runs(results)
    return [
        judge(results, Choice(m, tuple(covering_suites(runs.loc[runs["machine"] == m, "group"])))) for m in machines
    ]


def resolve(results: ResultSet, machine: str, ref: str | None, origin: str = "") -> str | None:
    """A commit prefix made the full commit of a run on `machine` (None stays None)."""
    return None if ref is None else resolve_commit(group_runs(results), machine, ref, origin)
