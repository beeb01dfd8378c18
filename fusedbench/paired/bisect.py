"""`fusedbench bisect`: the first commit of a range, or the first stack of a list, whose cells are past their margin
beside the range's first, each step a paired measurement on `ab`'s workers (`paired.ab`).

The points are ordered, the first the reference (good), the last the one known or suspected slow. The first step
measures the last beside the reference over everything asked for: where it is not red there is nothing to find, and
where it is, the cells it alerts on are the cells that moved, and every later step measures only those (a few cells
of a large group cost seconds where the group costs minutes), at the midpoint of what is left, beside the
reference, until one point separates green from red. Every step is beside the same reference, so a step's verdict
does not lean on another's; each is kept as any paired session is (`paired.results`), and the whole as a bisect
record in the GPU's results folder (`RECORD_SUFFIX`): the points, each step's point, verdict, alerting cells,
machines, seconds and calls.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from fusedbench.catalog.model import cell_label
from fusedbench.errors import FusedbenchError
from fusedbench.files import write_text_atomically

RECORD_SUFFIX = ".fbbisect"


@dataclass(frozen=True)
class Step:
    """One paired measurement of a point beside the reference."""

    point: str
    index: int  # in the points, the reference 0
    outcome: str  # the verdict's: red, green or not judged
    alerts: list[str]  # the alerting cells' labels (a group's alert named by its group)
    machines: dict[str, str]
    seconds: float
    calls: int
    cells: str = ""  # the --cells regex the step measured ('' for everything asked)


@dataclass
class Bisection:
    """The steps taken and what they found: `first` the first point past the margin (None where the last is not)."""

    points: list[str]
    kind: str  # "commits" or "stacks"
    steps: list[Step] = field(default_factory=list)
    first: str | None = None
    stopped: str = ""  # why it stopped before an answer (an error at a step), '' where it has one

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps)

    def to_json(self) -> dict:
        return {"kind": self.kind, "points": self.points, "first": self.first, "stopped": self.stopped,
                "seconds": self.seconds, "steps": [asdict(step) for step in self.steps]}  # fmt: skip


def bisect(found: Bisection, measure: Callable[[str, int, str], Step]) -> Bisection:
    """Bisect `found`'s points with `measure(point, index, cells)`: a paired step of `point` beside the first over the
    cells the --cells regex `cells` finds ('' for everything asked), each step added to `found` as it is taken (kept
    where a later one fails). Stops at the first red point; a step neither red nor green (not judged) cannot place
    the change: FusedbenchError."""
    points = found.points
    if len(points) < 2:
        raise FusedbenchError(f"bisect needs a reference and at least one point after it, got {len(points)} point(s)")
    last = measure(points[-1], len(points) - 1, "")
    found.steps.append(last)
    if last.outcome != "red":
        return _judged(found, last)
    cells = moved_cells(last.alerts)
    good, bad = 0, len(points) - 1
    while bad - good > 1:
        middle = (good + bad) // 2
        step = measure(points[middle], middle, cells)
        found.steps.append(step)
        _judged(found, step)
        if step.outcome == "red":
            bad = middle
        else:
            good = middle
    found.first = points[bad]
    return found


def _judged(found: Bisection, step: Step) -> Bisection:
    if step.outcome not in ("red", "green"):
        raise FusedbenchError(
            f"the step at {step.point[:12]} was {step.outcome}: no margins of this GPU's judge those cells, so bisect "
            "cannot tell a change there from noise; narrow --bench or --cells to groups the GPU has margins for"
        )
    return found


def alert_labels(alerts) -> list[str]:
    """The alerting rows of a verdict (`regressions.gate.SuiteVerdict.alerts`) as labels: a cell's, or its group's
    where the alert is the group's."""
    labels = []
    for row in alerts.to_dict("records"):
        cell = isinstance(row.get("epilog"), str) and row.get("provider") not in (None, "*")
        key = (row["epilog"], row["dtype"], *(int(row[k]) for k in ("m", "k", "n")), row["provider"]) if cell else ()
        labels.append(cell_label(*key) if cell else str(row["group"]))
    return list(dict.fromkeys(labels))


def moved_cells(alerts: Sequence[str]) -> str:
    """The --cells regex of the workloads a red step alerted on, every provider of each (a speedup or an epilog's
    cost needs its unfused and gemm cells too); '' where only whole groups alerted (then every cell). A group's alert
    beside cells' is theirs: the group gate moves with its cells."""
    workloads = [label.rsplit("/", 1)[0] for label in alerts if label.count("/") == 3]
    return "|".join(f"^{re.escape(workload)}/" for workload in dict.fromkeys(workloads))


def commit_points(repo: str, good: str, bad: str) -> list[str]:
    """GOOD and the first-parent commits after it up to BAD that descend from it, oldest first (FusedbenchError
    naming a ref git does not know, or a BAD that does not descend from GOOD)."""
    resolved = []
    for ref in (good, bad):
        done = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            raise FusedbenchError(f"{ref!r} is no commit of {repo}: name a commit, branch or tag git knows")
        resolved.append(done.stdout.strip())
    between = f"{resolved[0]}..{resolved[1]}"
    listed = subprocess.run(["git", "-C", repo, "rev-list", "--first-parent", "--ancestry-path", "--reverse", between],
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    ancestor = subprocess.run(["git", "-C", repo, "merge-base", "--is-ancestor", *resolved]).returncode == 0
    if not listed or not ancestor:
        raise FusedbenchError(f"{bad!r} does not come after {good!r}: name the good commit first, then the slow one")
    return [resolved[0], *listed]


def write_record(results_dir: str, gpu: str, found: Bisection) -> str:
    """The bisection's record in the GPU's results folder; its path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(results_dir, gpu, f"bisect-{stamp}-{found.kind}{RECORD_SUFFIX}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_text_atomically(path, json.dumps(found.to_json(), indent=1) + "\n")
    return path
