"""Which run is which: the one place every command and every report section asks.

A *run* is one machine's measurement of one benchmark group at one commit. asv keeps a group's timings
in the commit's results file, and fusedbench times a suite a group at a time, often over several
sessions (the peers suite never ran whole at one commit), so "the newest run" is asked per group, and a
suite's newest measurement is its groups' newest runs, which may come from different commits.

One ordering, everywhere: when asv started the run, the latest start among the group's benchmarks in
the commit's results (`started_ms`, which asv records per benchmark). A run whose results hold no start
time is older than any that do; ties keep the order the files were read in (machine folder, file
name). Git is never asked, so the same results give the same choice wherever they are read: in CI, in
a report built from a shallow checkout, on a laptop.

- `group_runs`: every run, oldest first;
- `newest_runs`: each machine's and group's newest;
- `baseline_of`: what a run is judged against: the same machine's and group's newest run started
  before it at the same benchmark version (asv compares nothing across versions), of another commit;
- `gpu_machines`: the machines of untuned runs (a tuned run degrades a provider on purpose: it is
  shown, advised on and judged only where named).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from fusedbench.catalog.deliberate import gpu_machine
from fusedbench.catalog.suites import GROUPS, MLP_GROUPS, SUITES
from fusedbench.errors import FusedbenchError
from fusedbench.results.loader import ResultSet

RUN = ["machine", "commit", "group"]
RUN_COLUMNS = [*RUN, "version", "started_ms", "cells"]  # version: asv's benchmark version of the group


def group_runs(results: ResultSet) -> pd.DataFrame:
    """Every run (RUN_COLUMNS) of epilog and mlp cells, oldest first."""
    epilog = results.cells[RUN].join(results.detail[["version", "started_ms"]])
    frames = [frame for frame in (epilog, mlp_cells(results.mlp)) if not frame.empty]
    return order_runs(pd.concat(frames, ignore_index=True) if frames else epilog)


def mlp_cells(mlp: pd.DataFrame) -> pd.DataFrame:
    """The mlp table's cells as `order_runs` reads them (its `version` column is the MLP's version, a provider)."""
    return mlp[[*RUN, "benchmark_version", "started_ms"]].rename(columns={"benchmark_version": "version"})


def order_runs(cells: pd.DataFrame) -> pd.DataFrame:
    """The runs (RUN_COLUMNS) of cells that carry RUN, `version` and `started_ms`, oldest first."""
    if cells.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    runs = (
        cells.groupby(RUN, sort=False)
        .agg(version=("version", "first"), started_ms=("started_ms", "max"), cells=("group", "size"))
        .reset_index()
    )
    return runs.sort_values("started_ms", na_position="first", kind="stable").reset_index(drop=True)[RUN_COLUMNS]


def gpu_machines(machines: Iterable[str]) -> list[str]:
    """The machines of untuned runs, in the order given, each once."""
    return [m for m in dict.fromkeys(machines) if gpu_machine(m) == m]


def newest_runs(
    runs: pd.DataFrame, *, machines: Sequence[str] = (), groups: Iterable[str] | None = None
) -> pd.DataFrame:
    """Each (machine, group)'s newest run, oldest first; of the named machines only (every machine when none)."""
    chosen = runs if not machines else runs[runs["machine"].isin(machines)]
    if groups is not None:
        chosen = chosen[chosen["group"].isin(list(groups))]
    return chosen.groupby(["machine", "group"], sort=False).tail(1)


def cells_of_runs(cells: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The cells (epilog or mlp) that belong to these runs."""
    chosen = pd.MultiIndex.from_frame(runs[RUN])
    return cells[pd.MultiIndex.from_frame(cells[RUN]).isin(chosen)]


def commits_in_order(runs: pd.DataFrame, machine: str) -> list[str]:
    """A machine's commits in the order of their newest runs, oldest first."""
    mine = runs.loc[runs["machine"] == machine, "commit"]
    return list(dict.fromkeys(reversed(list(mine))))[::-1]


def baseline_of(runs: pd.DataFrame, run: pd.Series) -> pd.Series | None:
    """The run `run` is judged against (module docstring); None where there is none."""
    earlier = runs.loc[: run.name - 1] if run.name in runs.index else runs.iloc[0:0]
    same = earlier[
        (earlier["machine"] == run["machine"])
        & (earlier["group"] == run["group"])
        & (earlier["version"] == run["version"])
        & (earlier["commit"] != run["commit"])
    ]
    return None if same.empty else same.iloc[-1]


def run_at(runs: pd.DataFrame, machine: str, group: str, commit: str) -> pd.Series | None:
    """The run of `group` on `machine` at `commit` (a full hash); None where there is none."""
    found = runs[(runs["machine"] == machine) & (runs["group"] == group) & (runs["commit"] == commit)]
    return None if found.empty else found.iloc[-1]


def resolve_commit(runs: pd.DataFrame, machine: str, prefix: str, origin: str = "") -> str:
    """The one commit with runs on `machine` that `prefix` names; an error lists the commits that have runs."""
    mine = list(dict.fromkeys(runs.loc[runs["machine"] == machine, "commit"]))
    matches = [c for c in mine if c.startswith(prefix)] if prefix else []
    if len(matches) != 1:
        what = "matches no" if not matches else "is ambiguous among the"
        where = f" in {origin}" if origin else ""
        have = ", ".join(c[:8] for c in reversed(mine)) or "none"
        raise FusedbenchError(
            f"commit {prefix!r} {what} runs of {machine}{where}; commits with runs there, newest first: {have}"
        )
    return matches[0]


def require_machine(runs: pd.DataFrame, machine: str, origin: str = "") -> None:
    """An error naming the machines with runs where `machine` has none."""
    if machine not in set(runs["machine"]):
        have = ", ".join(sorted(set(runs["machine"]))) or "none"
        where = f" in {origin}" if origin else ""
        raise FusedbenchError(f"machine {machine!r} has no results{where}; machines with results: {have}")


def newest_machine(runs: pd.DataFrame, origin: str) -> str:
    """The machine of the newest untuned run (the newest run's, where every machine is tuned)."""
    if runs.empty:
        raise FusedbenchError(f"{origin} holds no fusedbench results")
    untuned = runs[runs["machine"].isin(gpu_machines(runs["machine"]))]
    return str((untuned if not untuned.empty else runs).iloc[-1]["machine"])


def group_cell_count(group: str) -> int:
    """How many cells the checkout's catalog gives a group (0 for a group it no longer knows)."""
    known = GROUPS.get(group) or MLP_GROUPS.get(group)
    return known.cell_count if known is not None else 0


def covering_suites(groups: Iterable[str]) -> list[str]:
    """The suites that hold these groups, fewest first: quick, default, peers and mlp in that order, then full
    for groups only it times (a default group is also in full, which would repeat default's verdict)."""
    left, chosen = set(groups), []
    for suite in ("quick", "default", "peers", "mlp", "full"):
        if left & set(SUITES[suite]):
            chosen.append(suite)
            left -= set(SUITES[suite])
    return chosen
