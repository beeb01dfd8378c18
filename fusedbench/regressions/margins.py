"""A GPU's confirmation margins, earned from side-by-side A/A measurements.

A confirmation decides a flagged cell by how far its candidate moved from its baseline measured side by side
(`regressions.confirm`). How far an unchanged cell moves that way is the card's: on an H200 the cells of at least
1 ms stayed within 1.2%, on an H100 a textbook cell of 6.6-7.1 ms came out 2.2% apart. So each GPU earns its own
margins, the way it earns its first-look thresholds: `fusedbench calibrate --measure-side-by-side` times a suite's
workloads with the checkout's code on both sides of a confirmation (`paired.margins`: two workers in lock-step, the
rounds of a flagged cell) and keeps the record (`catalog.formats.SIDE_BY_SIDE_FORMAT`,
`<commit>-side-by-side-<time>.fbaa` under the machine's results);
`fusedbench calibrate --side-by-side C1,C2` turns the records of one or more sessions into a preset named
`<GPU>/confirmation@<commits>` by the calibration's rule (each record one A/A pair, judged both ways; with `--bench`,
from some of their groups only), and `regressions.thresholds.margins_for` puts it in force for the groups it was earned
on. Paired A/A sessions (`fusedbench ab` of a commit beside an empty commit, kept as asv results) earn margins the same
way (`earn_paired_margins`, `calibrate --paired`), a card's sessions held out to tell the false-alarm rate they give
on a card they never saw.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from dataclasses import replace

import pandas as pd

from fusedbench.catalog.formats import SideBySideForm, cell_from_json, read_record
from fusedbench.catalog.model import Request
from fusedbench.errors import FusedbenchError
from fusedbench.regressions.compare import Run, cells_run, compare_runs
from fusedbench.regressions.metrics import TIME
from fusedbench.regressions.thresholds import MARGINS_SUITE, Preset
from fusedbench.results.loader import ResultSet
from fusedbench.results.runs import group_runs

AA_SUFFIX = ".fbaa"


def requests_for(groups) -> list[Request]:
    """Every workload of the groups (catalog `BenchmarkGroup`s), with the group's providers."""
    return [
        Request(group.name, w.epilog.name, w.dtype.name, w.m, w.k, w.n, tuple(group.providers))
        for group in groups
        for w in group.workloads()
    ]


def read_side_by_side(results_dir: str, machine: str, commits: Sequence[str]) -> list[dict]:
    """Every side-by-side A/A record of each commit (a prefix) under the machine's results (a commit may have one per
    group or session), in the order named, each with its `path`."""
    folder = os.path.join(results_dir, machine)
    listed = sorted(n for n in os.listdir(folder) if n.endswith(AA_SUFFIX)) if os.path.isdir(folder) else []
    found = []
    for commit in commits:
        mine = [n for n in listed if n.startswith(commit[:8])]
        if not mine:
            raise FusedbenchError(
                f"--side-by-side {commit}: no side-by-side A/A record of it in {folder} (records: "
                f"{', '.join(listed) or 'none'}); measure one with `fusedbench calibrate --measure-side-by-side`"
            )
        found += [read_record(os.path.join(folder, name), SideBySideForm, "side-by-side record") for name in mine]
    return found


def record_runs(record: dict) -> tuple[Run, Run]:
    """A record's two sides as runs `compare_runs` reads (every group, each at its benchmark version)."""
    from fusedbench.regressions.compare import as_run

    sides = []
    for side in ("baseline", "candidate"):
        parts = [
            as_run(record["machine"], record["commit"], entry["version"], group,
                   [cell_from_json(data) for data in entry["cells"][side]]).cells
            for group, entry in record["groups"].items()
        ]  # fmt: skip
        sides.append(Run(record["machine"], record["commit"], pd.concat(parts, ignore_index=True)))
    return sides[0], sides[1]


def earn_margins(machine: str, records: Sequence[dict], groups: Collection[str] | None = None) -> Preset:
    """The confirmation margins the records earn, a preset `<machine>/confirmation@<commits>`, or, earned on only some
    of their `groups`, `<machine>/confirmation@<commits>:<groups>`: groups whose side-by-side noise differs (the llm
    shapes' records hold ~390 cells each and re-tune fused-autotuned in each worker) earn margins apart, since the
    rule keeps a whole record's worst change, and pooling them would judge a quick cell by the llm groups' noise."""
    from fusedbench.regressions.calibration import preset_from_pairs

    if groups is not None:
        held = sorted({group for record in records for group in record["groups"]})
        missing = sorted(set(groups) - set(held))
        if not groups or missing:
            raise FusedbenchError(
                f"the side-by-side records hold no group {', '.join(missing) or '(none named)'} (they hold "
                f"{', '.join(held)}); name groups they time"
            )
        records = [r | {"groups": {g: e for g, e in r["groups"].items() if g in groups}} for r in records]
        records = [r for r in records if r["groups"]]
    protocols = {record_protocol(record) for record in records}
    if 1 in protocols and len(protocols) > 1:
        raise FusedbenchError(
            "the side-by-side records were measured at worker protocols "
            f"{' and '.join(map(str, sorted(protocols)))}: fused-autotuned is pinned in one and not in the other; "
            "name the records of one protocol"
        )
    versions: dict[str, str] = {}
    for record in records:
        if record["machine"] != machine:
            raise FusedbenchError(f"{record['path']} was measured on {record['machine']}, not on {machine}")
        for group, entry in record["groups"].items():
            if versions.setdefault(group, entry["version"]) != entry["version"]:
                raise FusedbenchError(
                    f"the side-by-side records time {group} at two benchmark versions: margins are earned at one; "
                    "name the records of each version on their own"
                )
    commits = tuple(dict.fromkeys(record["commit"] for record in records))
    name = f"{machine}/confirmation@{'+'.join(commit[:7] for commit in commits)}"
    if groups is not None:
        name += ":" + "+".join(sorted(versions))
    pairs = [record_runs(record) for record in records]
    return preset_from_pairs(name, machine, (commits,), pairs, MARGINS_SUITE, versions, protocol=max(protocols))


def record_protocol(record: dict) -> int:
    """The worker protocol a record was measured at (it says so from 3 on): 2 and 3 time fused-autotuned at one pick
    on both sides (2 pinned the other side to it; 3 times both sides' picks on both, its record lists them), 1 let
    each side time its own."""
    return record.get("protocol") or (2 if "pinned" in record else 1)


PAIRED_PROTOCOL = 3  # paired runs (`fusedbench ab`) are measured at worker protocol 3 on: each side autotunes


def paired_sides(results: ResultSet, session: str) -> tuple[Run, Run]:
    """A paired session's two sides as runs, as the gate compares them: its base (the run before its candidate), with
    fused-autotuned held at the candidate's pick where the picks differed, and its candidate."""
    from fusedbench.regressions.gate import paired_picks
    from fusedbench.regressions.picks import held_fixed
    from fusedbench.results.runs import commits_in_order

    commits = commits_in_order(group_runs(results), session)
    if len(commits) != 2:
        raise FusedbenchError(f"{session} holds {len(commits)} commits, not a paired session's two (base, candidate)")
    base, cand = (cells_run(results, session, commit) for commit in commits)
    for group in cand.groups:
        base = held_fixed(base, paired_picks(results, cand, group))
    return base, cand


def judged_session(results: ResultSet, session: str, preset: Preset):
    """A paired session judged by `preset` as the gate judges it: its cells with fused-autotuned's pick held fixed,
    and the picks themselves where they differed (an autotuning that picked slower is a false alarm too)."""
    from fusedbench.regressions.gate import judge_comparison, paired_picks, with_picks

    base, cand = paired_sides(results, session)
    judged = judge_comparison(compare_runs(base, cand, preset))
    commits = {"baseline": base.commit, "candidate": cand.commit}
    for group, version in cand.groups.items():
        judged = with_picks(judged, session, commits, version, paired_picks(results, cand, group))
    return judged


def session_picks(results: ResultSet, session: str, sides: tuple[Run, Run], preset: Preset) -> float:
    """How far apart, as a log change, the two autotunings of a paired A/A session's picks (its `sides`, base and
    candidate) came out at the widest (`picks.worst_pick`; 0 where they chose alike or within their interval)."""
    from fusedbench.regressions.gate import paired_picks
    from fusedbench.regressions.picks import pick_comparison, worst_pick

    base, cand = sides
    commits = {"baseline": base.commit, "candidate": cand.commit}
    found = {group: paired_picks(results, cand, group) for group in cand.groups}
    compared = [pick_comparison(session, commits, cand.groups[g], picks, preset) for g, picks in found.items() if picks]
    return max((worst_pick(comparison) for comparison in compared), default=0.0)


def with_earned_picks(preset: Preset, worst: list[float]) -> Preset:
    """The margins with the picks' own earned from their sessions' picks (`worst`, one per session, in order): the
    widest two autotunings came out apart and STEP more, rounded up, where any came out apart; and the sessions the
    others' picks margin (PICK_MARGIN at least) turns red, left out one at a time, counted with the cells' own."""
    from fusedbench.regressions.calibration import STEP, rounded_up
    from fusedbench.regressions.picks import PICK_MARGIN

    def earned(values: list[float]) -> float:
        return rounded_up(math.expm1(max(values)) + STEP) if any(v > 0 for v in values) else 0.0

    red = set(preset.rates["left_out_red_sessions"])
    red |= {i for i, w in enumerate(worst) if math.expm1(w) > max(PICK_MARGIN, earned(worst[:i] + worst[i + 1 :]))}
    sessions = preset.rates["sessions"]
    rates = dict(preset.rates) | {"left_out_red": len(red), "left_out_red_sessions": sorted(red),
                                  "false_alarm_per_build": round(len(red) / sessions, 4)}  # fmt: skip
    rates["false_alarm_by_suite"] = {suite: rates["false_alarm_per_build"] for suite in rates["false_alarm_by_suite"]}
    return replace(preset, picks=earned(worst), rates=rates)


def session_card(results: ResultSet, session: str) -> str:
    """The UUID of the card a paired session ran on, as its records keep it ('' where none says)."""
    cards = {(r.environment.get("gpu") or {}).get("uuid", "") for r in results.records if r.machine == session}
    return cards.pop() if len(cards) == 1 else ""


def earn_paired_margins(results: ResultSet, sessions: Sequence[str], held_out: str | None = None) -> tuple:
    """The confirmation margins paired A/A sessions (`fusedbench ab` of a commit beside an empty one) earn, each
    session one A/A pair judged both ways, those on the card whose UUID starts with `held_out` left out to judge:
    (the preset `<gpu>/confirmation@paired:<sessions>`, and each held-out session's (name, comparison judged))."""
    from fusedbench.catalog.deliberate import PAIRED_MARK, gpu_machine
    from fusedbench.regressions.calibration import preset_from_pairs
    from fusedbench.regressions.gate import paired_record

    for session in sessions:
        if PAIRED_MARK not in session:
            raise FusedbenchError(f"--paired {session!r} is no paired session (<gpu>{PAIRED_MARK}<session>, ab's)")
        code = paired_record(results, session).get("code", {})
        if len(set(code.values())) > 1:
            raise FusedbenchError(
                f"--paired {session!r} is no A/A session: its candidate's code differs from its base's"
            )
    scopes = {session: paired_record(results, session).get("cells") or "" for session in sessions}
    if len(set(scopes.values())) > 1:
        named = "; ".join(
            f"{f'--cells {scope!r}' if scope else 'whole groups'}: {', '.join(s for s in scopes if scopes[s] == scope)}"
            for scope in dict.fromkeys(scopes.values())
        )
        raise FusedbenchError(
            f"--paired names sessions of {len(set(scopes.values()))} sets of cells ({named}): margins are earned over "
            "one (the worst of fewer cells wanders less); name the sessions of one"
        )
    named_twice = sorted({s for s in sessions if list(sessions).count(s) > 1})
    if named_twice:
        raise FusedbenchError(f"--paired names {', '.join(named_twice)} twice: an A/A pair counts once")
    gpus = sorted({gpu_machine(session) for session in sessions})
    if len(gpus) != 1:
        raise FusedbenchError(f"--paired names sessions of {len(gpus)} GPUs ({', '.join(gpus)}): margins are a GPU's")
    (gpu,) = gpus
    kept = [s for s in sessions if not (held_out and session_card(results, s).startswith(held_out))]
    judged = [s for s in sessions if s not in kept]
    if (held_out and not judged) or not kept:
        raise FusedbenchError(
            f"--held-out-card {held_out}: it must leave out some of the sessions and keep others (a card's UUID "
            f"begins 'GPU-'; theirs: {', '.join(sorted({session_card(results, s)[:12] for s in sessions}))})"
        )
    pairs = [paired_sides(results, session) for session in kept]
    versions = {group: version for _, cand in pairs for group, version in cand.groups.items()}
    name = f"{gpu}/confirmation@paired:{'+'.join(session.rsplit('-', 1)[1] for session in kept)}"
    preset = preset_from_pairs(
        name, gpu, (tuple(kept),), pairs, MARGINS_SUITE, versions, protocol=PAIRED_PROTOCOL, sessions=True
    )
    picks = [session_picks(results, s, sides, preset) for s, sides in zip(kept, pairs, strict=True)]
    preset = with_earned_picks(replace(preset, cells=scopes[kept[0]]), picks)
    verdicts = [(s, judged_session(results, s, preset)) for s in judged]
    if verdicts:  # what the margins did on a card none of their sessions came from, kept with them
        held = {
            "card": held_out,
            "sessions": [s for s, _ in verdicts],
            "red": [s for s, judged in verdicts if judged.failed],
            "alerts": sum(len(judged.alerts) for _, judged in verdicts),
            "cells": sum(int((judged.comparison.cells["metric"] == TIME).sum()) for _, judged in verdicts),
        }
        preset = replace(preset, rates=dict(preset.rates) | {"held_out": held})
    return preset, verdicts
