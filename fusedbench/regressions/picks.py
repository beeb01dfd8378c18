"""fused-autotuned's choice, told apart from the code: whether the candidate's autotuning picked a slower algorithm
than the base's.

Measured side by side, each code autotunes in its own process; where the two picks differ, both are timed on both
sides (`catalog.model.Pick`). The cell itself is compared with the pick held fixed, the candidate's on both sides
(`held_fixed`); the picks are compared apart (`pick_comparison`): the candidate's pick against the base's, each
timed on both sides, round i of one beside round i of the other (the two calls of a side's round follow each
other), by the interval rule of a cell and a margin of the picks' own (`pick_margins`). `gate.judge_picks` makes a
slower pick an alert of its own, named as the choice; a faster one is no alert. Pure: no GPU.

The picks' margin covers autotuning's own spread: two processes of the same code autotune to algorithms that time
apart, 3.8% on the H100's quick BIAS cell in a paired A/A build (docs/findings/2026-11-28-ab-paired-runs.md) and up
to 11.1% on its llm cells (docs/findings/2026-11-26-confirmation.md). Judged by the cell's margin (3.5%), the same
code's A/A build went red on its pick; an autotuner that picks worse than that spread is what a pick alert says.
Where a GPU's paired A/A sessions saw two autotunings wider apart (the H200's GELU cell at (32768,1024)x(1024,16384):
320x128 or 176x128 tiles, 14.1-14.5% apart), the margins they earn carry that spread (`Preset.picks`), and picks are
judged by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from fusedbench.catalog.model import SIDES, Cell, Pick
from fusedbench.regressions.compare import CELL, Comparison, Run, as_run, compare_runs
from fusedbench.regressions.thresholds import Preset

PICK_MARGIN = 0.11  # the widest two autotunings of the same code came out apart (module docstring)


def pick_margins(cell_margins: Preset) -> Preset:
    """The margins a pick is judged by: the cell's, widened to the picks' own where narrower (PICK_MARGIN, or the
    spread the margins' A/A sessions saw where wider)."""
    margin = max(PICK_MARGIN, cell_margins.picks)
    widened = {key: max(value, margin) for key, value in cell_margins.thresholds.items()}
    return replace(cell_margins, name=f"{cell_margins.name} (picks: {margin:.1%})", thresholds=widened)


def worst_pick(comparison: Comparison) -> float:
    """The widest apart, as a log change, two picks of an A/A session came out where their interval excludes no
    change, either way (an A/A pair's sides are interchangeable); 0 where none does."""
    cells = comparison.cells[comparison.cells["metric"] == "time"].dropna(subset=["ratio"])
    logs = np.log(cells["ratio"].astype(float).to_numpy())
    apart = (cells["ci_low"].astype(float).to_numpy() > 1) | (cells["ci_high"].astype(float).to_numpy() < 1)
    return float(np.abs(logs[apart]).max()) if apart.any() else 0.0


def pick_comparison(
    machine: str, commits: dict[str, str], version: str, picks: Sequence[Pick], margins: Preset
) -> Comparison:
    """The candidate's picks against the base's, as two runs of fused-autotuned cells compared, each pick's samples
    from both sides one after the other, each side's cut to the rounds both picks took there (the candidate's pick,
    the cell's own slot, may have taken extra rounds, in a second preparation, where it moved)."""
    runs = []
    for pick in SIDES:
        cells = [Cell.measured(p.key, [s for side in SIDES for s in p.samples[pick][side][: _shared(p, side)]])
                 for p in picks]  # fmt: skip
        runs.append(as_run(machine, commits[pick], version, picks[0].group, cells))
    return compare_runs(runs[0], runs[1], margins)


def _shared(pick: Pick, side: str) -> int:
    return min(len(pick.samples[chosen][side]) for chosen in SIDES)


def held_fixed(base: Run, picks: Sequence[Pick]) -> Run:
    """The base's run with each picked cell's samples those of the candidate's pick on the base's side: compared with
    the candidate's own (its pick on its side), the cell's change is the code's, the choice held fixed."""
    if not picks:
        return base
    timed = {(p.key.epilog, p.key.dtype, p.key.m, p.key.k, p.key.n, p.key.provider, p.group):
             tuple(p.samples["candidate"]["baseline"]) for p in picks}  # fmt: skip
    cells = base.cells.copy()
    keys = [tuple(row) for row in cells[CELL].itertuples(index=False, name=None)]
    cells["raw"] = [timed.get(key, raw) for key, raw in zip(keys, cells["raw"], strict=True)]
    return Run(base.machine, base.commit, pd.DataFrame(cells), base.origin)
