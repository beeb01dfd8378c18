"""The dispatch policy a framework engineer takes away: per machine, dtype, epilog and shape class,
whether to call the fused epilog (`fuse`), the fused epilog autotuned (`fuse-autotuned`), or the GEMM
and one pass (`unfused`), each with its evidence.

Pure: a function of the results (`fusedbench.results.loader`). A shape class is one of the catalog's shape
sets as the suite measures it (memory-bound small K, LLM layers, the seed's large shape). Its
figure is the geometric mean, over the class's shapes, of each shape's median per-round ratio
unfused / fused (above 1: fusion pays), with a 95% interval from one bootstrap of rounds shared by
every shape (`bootstrap.bootstrap_medians`), so the class's interval keeps each shape's pairing.

The rule, in order:
- no fused cell timed (a library refused, the run had none): `unfused`, with the refusal;
- autotune beats the heuristic: fused / fused-autotuned lies wholly above `analysis.REGRET`:
  judge the autotuned call, else the heuristic's;
- the judged call loses to the GEMM + pass by more than `LOSS` (its interval wholly below 0.99):
  `unfused` (within 1% the two are one kernel's noise apart: the plain GEMM, DEFAULT, is the same
  kernel both ways);
- otherwise the judged call: `fuse` or `fuse-autotuned`. An interval across 1 is advice to fuse: one
  call, no intermediate in memory, no measurable loss;
- where the peers suite timed a peer in the class and the advised call over the peer lies wholly above
  1 / LOSS (the peer is faster by more than the noise between equals), the peer: its name is the advice, the
  advised call's figure stays in the evidence. A peer timed beside the ladder (`triton`) is paired with the
  ladder's cells; one timed in a group of its own beside fused and unfused only (torch-compile, cutlass-evt,
  the seed walkthrough's rungs: `PEER_ONLY_GROUPS`) with the advised call as that group timed it, so it is
  weighed where the advice is fuse or unfused (those groups time no autotuned call).
Where the fused call launches more than one kernel, the evidence says so (fused API, unfused execution).
Machines of tuned runs (`fusedbench run --tune`) are left out unless named with --machine.
"""

from __future__ import annotations

import enum
import math
from collections import namedtuple

import numpy as np
import pandas as pd

from fusedbench.analysis.speedups import ladder_cells
from fusedbench.bootstrap import BOOTSTRAP, CONFIDENCE, bootstrap_medians
from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.epilogs import EPILOGS
from fusedbench.catalog.model import Status
from fusedbench.catalog.providers import AUTOTUNED, FUSED, PEERS, UNFUSED
from fusedbench.catalog.suites import GROUPS, PEER_ONLY_GROUPS
from fusedbench.errors import FusedbenchError
from fusedbench.frames import plain_rows
from fusedbench.results.derived import REGRET
from fusedbench.results.loader import ResultSet
from fusedbench.results.runs import cells_of_runs, gpu_machines, group_runs, newest_runs

SHAPE_CLASSES = {
    "membound": "memory-bound, small K",
    "llm": "LLM layers",
    "seed": "the seed's large shape",
}
COLUMNS = [
    "machine",
    "commit",
    "dtype",
    "epilog",
    "shape_class",
    "advice",  # fuse, fuse-autotuned, unfused, or a peer's name
    "ratio",  # unfused / the advised call (or / the best fused call, where the advice is unfused)
    "ci_low",
    "ci_high",
    "shapes",  # how many of the class's shapes the figure is over
    "kernels",  # the most kernels the judged fused call (or the advised peer) launched at one shape
    "regret",  # fused / fused-autotuned over the class (the heuristic's cost)
    "regret_low",
    "regret_high",
    "why",
]
OK = Status.OK.value
LOSS = 0.99  # unfused / fused wholly below this: the fused call is slower by more than noise between equals


class Advice(enum.Enum):
    FUSE = "fuse"
    FUSE_AUTOTUNED = "fuse-autotuned"
    UNFUSED = "unfused"


def _paired_cells(results: ResultSet, machines: list[str]) -> pd.DataFrame:
    """The cells of each group's newest run (`results.runs`) where that run was timed in paired rounds (advice needs
    their intervals), on the named machines or on every machine but those of tuned runs (a tuned run degrades a
    provider on purpose: advised on only by name), each with its shape class."""
    runs = group_runs(results)
    if machines:
        require = set(machines) - set(runs["machine"])
        if require:
            have = ", ".join(sorted(set(runs["machine"]))) or "none"
            raise FusedbenchError(f"--machine {sorted(require)[0]!r} has no results; machines with results: {have}")
    newest = newest_runs(runs, machines=list(machines) or gpu_machines(runs["machine"]))
    cells = cells_of_runs(results.cells, newest).join(results.detail[["raw", "paired"]])
    cells = cells[cells["paired"].astype(bool)]
    return cells.assign(shape_class=[GROUPS[group].shape_set for group in cells["group"]])


def newest_cells(results: ResultSet, machines: list[str]) -> pd.DataFrame:
    """Each machine's newest measurement of every ladder workload, all its providers from one run: each group's
    newest run, and of two groups that timed a workload (Quick and Fp16Seed) the larger (`analysis.ladder_cells`)."""
    cells = ladder_cells(_paired_cells(results, machines), across_commits=True)
    if cells.empty:
        raise FusedbenchError(
            "no ladder results timed in paired rounds to advise from; `fusedbench run` on a GPU machine writes them"
        )
    return cells


def peer_only_cells(results: ResultSet, machines: list[str]) -> pd.DataFrame:
    """The newest run of each peers group that times its peers beside fused and unfused alone (PEER_ONLY_GROUPS)."""
    cells = _paired_cells(results, machines)
    return cells[cells["group"].isin(PEER_ONLY_GROUPS)]


ROW = ["group", "m", "k", "n", "provider", "status", "raw", "paired", "kernels", "commit", "reason"]


Row = namedtuple("Row", ROW)


def _rows(cells: pd.DataFrame) -> list[tuple]:
    """Cells as plain tuples (ROW's fields): the advice reads each class's cells a dozen ways, and a DataFrame per
    reading cost seconds a report."""
    return [Row(*values) for values in plain_rows(cells, ROW)]


def _timed(rows: list) -> list[tuple]:
    """The ok rows as (group, m, k, n, provider, raw, paired), in their order."""
    return [(r.group, r.m, r.k, r.n, r.provider, r.raw, r.paired) for r in rows if r.status == OK]


def _most_kernels(rows: list, provider: str) -> float | int:
    """The most kernels an ok cell of `provider` launched; NaN where none recorded them (runs before records)."""
    counts = [r.kernels for r in rows if r.provider == provider and r.status == OK and not pd.isna(r.kernels)]
    return int(max(counts)) if counts else math.nan


def _series(timed: list[tuple], numerator: str, denominator: str, groups=None) -> list[np.ndarray]:
    """Per shape of the class where both were timed in rounds of equal length (of `groups` only, where named):
    numerator / denominator per round, shapes in (m, k, n) order (the bootstrap's draws are per series)."""
    by_shape: dict[tuple, dict[str, tuple]] = {}
    for group, m, k, n, provider, raw, paired in timed:
        if provider in (numerator, denominator) and (groups is None or group in groups):
            by_shape.setdefault((m, k, n), {}).setdefault(provider, (raw, paired))
    out = []
    for shape in sorted(by_shape):
        both = by_shape[shape]
        if numerator not in both or denominator not in both:
            continue
        (top, paired), (bottom, _) = both[numerator], both[denominator]
        top, bottom = np.asarray(top), np.asarray(bottom)
        if len(top) and len(top) == len(bottom) and paired:
            out.append(top / bottom)
    return out


def _class_ratio(series: list[np.ndarray], draws: np.ndarray) -> tuple[float, float, float]:
    """Geometric mean over shapes of each shape's median, and its bootstrap interval."""
    if not series:
        return math.nan, math.nan, math.nan
    point = float(np.exp(np.mean(np.log([np.median(s) for s in series]))))
    replicates = np.exp(np.mean(np.log(bootstrap_medians(series, draws)), axis=0))
    tail = (1 - CONFIDENCE) / 2 * 100
    return point, float(np.percentile(replicates, tail)), float(np.percentile(replicates, 100 - tail))


def _not_timed(rows: list) -> str:
    """Why a class has no fused / unfused pair to judge: the first reason a fused or unfused cell gives."""
    for provider in (FUSED, AUTOTUNED, UNFUSED):
        reasons = [r.reason for r in rows if r.provider == provider and r.status != OK and r.reason]
        if reasons:
            return f"{provider}: {reasons[0]}"
    return "no fused and unfused cells were timed together"


def advise_class(cells: list, draws: np.ndarray, alone: list) -> dict:
    """The advice for one (machine, dtype, epilog, shape class) from its ladder cells (all shapes of the class), and
    the class's cells of the groups that time peers alone (`alone`), where there are any; each as `_rows`."""
    timed = _timed(cells)
    fused = _class_ratio(_series(timed, UNFUSED, FUSED), draws)
    tuned = _class_ratio(_series(timed, UNFUSED, AUTOTUNED), draws)
    regret = _class_ratio(_series(timed, FUSED, AUTOTUNED), draws)
    if math.isnan(fused[0]) and math.isnan(tuned[0]):
        return {"advice": Advice.UNFUSED, "ratio": (math.nan,) * 3, "shapes": 0, "why": _not_timed(cells)}
    beaten = not math.isnan(regret[1]) and regret[1] > REGRET
    autotuned = not math.isnan(tuned[0]) and (beaten or math.isnan(fused[0]))
    judged, provider = (tuned, AUTOTUNED) if autotuned else (fused, FUSED)
    shapes = len(_series(timed, UNFUSED, provider))
    kernels = _most_kernels(cells, provider)
    notes = []
    if beaten and autotuned:
        notes.append(f"the heuristic's algorithm costs {regret[0] - 1:.0%} (autotune wins)")
    if kernels > 1:
        notes.append(f"the fused call launches {kernels} kernels (fused API, unfused execution)")
    slower = 1 / judged[0] - 1  # fused over unfused, less one
    if judged[2] < LOSS:
        advice = Advice.UNFUSED
        notes.insert(0, f"fused is {slower:.0%} slower than the GEMM + one pass")
    else:
        advice = Advice.FUSE_AUTOTUNED if autotuned else Advice.FUSE
        if judged[2] < 1:
            gain = f"costs {slower:.1%}, but its interval reaches within {1 - LOSS:.0%} of even: no clear loss"
        elif judged[1] <= 1:
            gain = "within the noise"
        else:
            gain = f"saves {-slower:.0%}"
        notes.insert(0, f"fusion {gain}")
    found = {"advice": advice, "ratio": judged, "shapes": shapes, "kernels": kernels, "regret": regret}
    advised = UNFUSED if advice is Advice.UNFUSED else provider
    return found | _faster_peer(cells + alone, draws, advised, notes)


def _faster_peer(cells: list, draws: np.ndarray, advised: str, notes: list[str]) -> dict:
    """The advice's last step: the fastest peer that beats the `advised` provider by more than the noise between
    equals (its name becomes the advice, unfused over it the ratio); else the ladder's advice as it stands. Each
    peer is paired within the groups that timed it."""
    best = None
    timed = _timed(cells)
    for peer in PEERS:
        groups = {r.group for r in cells if r.provider == peer}
        over_peer = _class_ratio(_series(timed, advised, peer, groups), draws)
        if not math.isnan(over_peer[1]) and over_peer[1] > 1 / LOSS and (best is None or over_peer[0] > best[2][0]):
            best = (peer, groups, over_peer)
    if best is None:
        return {"why": "; ".join(notes)}
    peer, groups, over_peer = best
    notes.insert(0, f"{peer} is {over_peer[0] - 1:.0%} faster than {advised} (the ladder's advice)")
    mine = [r for r in cells if r.group in groups]
    return {
        "advice": peer,  # its evidence is the peer's own: unfused over it, its shapes and kernels
        "ratio": _class_ratio(_series(timed, UNFUSED, peer, groups), draws),
        "shapes": len(_series(timed, UNFUSED, peer, groups)),
        "kernels": _most_kernels(mine, peer),
        "commits": {r.commit for r in mine},
        "why": "; ".join(notes),
    }


def advise(results: ResultSet, machines: list[str] = (), *, seed: int = 0) -> pd.DataFrame:
    """The policy table (COLUMNS), a row per machine, dtype, epilog and shape class, in catalog order."""
    cells = newest_cells(results, list(machines))
    alone = peer_only_cells(results, list(machines)).set_index(["machine", "dtype", "epilog", "shape_class"])
    alone = alone.sort_index()
    longest = max((len(r) for r in (*cells["raw"], *alone["raw"])), default=1) or 1
    draws = np.random.default_rng(seed).random((BOOTSTRAP, longest))
    rows = []
    order = ["machine", "dtype", "epilog", "shape_class"]
    catalog = {  # the catalog's orders: dtypes, epilogs, shape sets
        "dtype": list(DTYPES),
        "epilog": [spec.name for spec in EPILOGS.values()],
        "shape_class": list(SHAPE_CLASSES),
    }
    cells = cells.sort_values(
        order, key=lambda column: column.map(catalog[column.name].index) if column.name in catalog else column
    )
    classes: dict[tuple, list] = {}  # each class's rows, in the sorted order
    for key, row in zip(plain_rows(cells, order), _rows(cells), strict=True):
        classes.setdefault(key, []).append(row)
    alone = alone.reset_index()
    peers_alone: dict[tuple, list] = {}
    for key, row in zip(plain_rows(alone, order), _rows(alone), strict=True):
        peers_alone.setdefault(key, []).append(row)
    for (machine, dtype, epilog, shape_class), part in classes.items():
        found = advise_class(part, draws, peers_alone.get((machine, dtype, epilog, shape_class), []))
        ratio, regret = found["ratio"], found.get("regret", (math.nan,) * 3)
        commits = sorted({r.commit for r in part} | found.get("commits", set()))
        rows.append(
            {
                "machine": machine,
                "commit": ",".join(c[:8] for c in commits),
                "dtype": dtype,
                "epilog": epilog,
                "shape_class": shape_class,
                "advice": found["advice"].value if isinstance(found["advice"], Advice) else found["advice"],
                "ratio": ratio[0],
                "ci_low": ratio[1],
                "ci_high": ratio[2],
                "shapes": found["shapes"],
                "kernels": found.get("kernels", math.nan),
                "regret": regret[0],
                "regret_low": regret[1],
                "regret_high": regret[2],
                "why": found["why"],
            }
        )
    policy = pd.DataFrame(rows, columns=COLUMNS)
    return policy.assign(kernels=policy["kernels"].astype("Int64"))
