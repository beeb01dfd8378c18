"""A cell's series over commits on one machine, and the commit where a regression began.

asv's own step detection (`asv.step_detect`, what `asv publish` marks regressions with) finds the
steps; fusedbench only lines the medians up in the order of the runs (`results.runs`: when asv started
them), so `fusedbench alert` can name the first commit of a slowdown that built up over several runs
instead of blaming the last one.
"""

from __future__ import annotations

import pandas as pd

from fusedbench.analysis.speedups import ladder_cells
from fusedbench.catalog.model import KEY
from fusedbench.results.loader import ResultSet
from fusedbench.results.runs import RUN, group_runs


def cell_series(results: ResultSet, machine: str, key: dict, version: str | None = None) -> pd.DataFrame:
    """(commit, time_s, version) of one cell at every run on `machine` that timed it, oldest run first (with this
    benchmark version only, where one is given: asv does not compare across versions either). `key` names the cell
    by KEY, and by its group where it has one; without one each commit's ladder cell is read (no control's, and of a
    quick and a default run at one commit the default group's: `analysis.ladder_cells`)."""
    cells = results.cells.join(results.detail[["version"]])
    cells = cells[cells["machine"] == machine]
    if "group" not in key:
        cells = ladder_cells(cells)
    columns = [*KEY, "group"] if "group" in key else KEY
    chosen = (cells[columns] == pd.Series(key)[columns]).all(axis=1)
    if version is not None:
        chosen &= cells["version"] == version
    mine = cells[chosen].dropna(subset=["time_s"])
    order = {tuple(run): i for i, run in enumerate(group_runs(results)[RUN].itertuples(index=False))}
    mine = mine.assign(_run=[order[run] for run in mine[RUN].itertuples(index=False)]).sort_values("_run")
    return mine[["commit", "time_s", "version"]].reset_index(drop=True)


def regression_start(series: pd.DataFrame, threshold: float = 0.0) -> str | None:
    """The first commit after the last step up asv finds in the series (None: no step, or too few points)."""
    from asv.step_detect import detect_regressions, detect_steps

    if len(series) < 3:
        return None
    steps = detect_steps(list(series["time_s"]))
    _, _, positions = detect_regressions(steps, threshold=threshold)
    if not positions:
        return None
    _, after, _, _ = positions[-1]
    return str(series["commit"].iloc[after])
