"""Side-by-side A/A records: the checkout's code on both sides of a confirmation, every workload of a suite's groups
timed in lock-step, the record `regressions.margins` earns a GPU's confirmation margins from."""

from __future__ import annotations

from collections.abc import Sequence

from fusedbench.catalog.formats import SIDE_BY_SIDE_FORMAT
from fusedbench.catalog.model import Request
from fusedbench.measure.confirm import Side, measure_again
from fusedbench.measure.gpu.confirm_worker import PROTOCOL


def measure_side_by_side(repo: str, machine: str, commit: str, requests: Sequence[Request], rounds: int) -> dict:
    """The checkout's code at `repo` on both sides, every request timed `rounds` times a side: the record."""
    measured = measure_again(requests, [Side("baseline", repo), Side("candidate", repo)], rounds)
    versions = measured.hellos["candidate"]["benchmark_versions"]
    groups = {}
    for side, cells in measured.cells.items():
        for request in requests:
            mine = [c.to_json() for c in cells if c.key in {request.key(p) for p in request.providers}]
            entry = groups.setdefault(request.group, {"version": versions[request.group], "cells": {}})
            entry["cells"].setdefault(side, []).extend(mine)
    return {
        "format": SIDE_BY_SIDE_FORMAT,
        "machine": machine,
        "commit": commit,
        "device": measured.hellos["candidate"]["device"],
        "versions": measured.hellos["candidate"]["versions"],
        "rounds": rounds,
        "seconds": measured.seconds,
        "calls": measured.calls,
        "not_measured": measured.not_measured,
        "protocol": PROTOCOL,
        "picks": [pick.to_json() for pick in measured.picks],
        "groups": groups,
    }
