"""What a protocol screen (`fusedbench protocols`, `measure.gpu.screen`) found: per candidate and cell class, the
repeat-to-repeat spread of each cell's median, the spread within a run, the SM clock and power it ran at, how
much of its variance the clock explains, and the seconds it cost. The rule that picks a protocol: the lowest
95th-percentile spread of the cells of at least 1 ms among those whose suite fits the time goal."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

import numpy as np

from fusedbench.catalog.model import sample_clocks, sample_watts
from fusedbench.regressions.thresholds import CLASS_LABELS, CLASSES, cell_class
from fusedbench.stats import clock_explains, relative_iqr, spread

SUMMARY_COLUMNS = (
    "protocol",
    "class",
    "cells",
    "spread_median",
    "spread_p95",
    "rel_iqr_median",
    "sm_mhz_median",
    "power_w_median",
    "clock_explains_median",
    "seconds",
)


def _percentile(values: list[float], share: float) -> float:
    """Linearly interpolated, as `calibrate` and pandas take theirs."""
    values = [v for v in values if not math.isnan(v)]
    return float(np.percentile(values, 100 * share)) if values else math.nan


def _median(values) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def summarize(runs: list[dict]) -> list[dict]:
    """A row per (protocol, cell class) of the screen's runs (SUMMARY_COLUMNS), plus an "all" row per protocol."""
    medians: dict[tuple, list[float]] = defaultdict(list)
    within: dict[tuple, list[float]] = defaultdict(list)
    states: dict[tuple, list[tuple[float, float, float]]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    for run in runs:
        seconds[run["protocol"]] += run["seconds"]
        for provider, cell in run["cells"].items():
            key = (run["protocol"], run["group"], run["workload"], provider)
            samples, telemetry = cell["samples"], cell["telemetry"]
            medians[key].append(statistics.median(samples))
            within[key].append(relative_iqr(samples))
            clocks, power = sample_clocks(telemetry), sample_watts(telemetry)
            states[key].append((_median(clocks), _median(power), clock_explains(samples, clocks)))
    rows = []
    for protocol in dict.fromkeys(key[0] for key in medians):
        keys = [key for key in medians if key[0] == protocol]
        by_class = defaultdict(list)
        for key in keys:
            by_class[cell_class(statistics.median(medians[key]))].append(key)
        for name in [name for name, _ in CLASSES] + ["all"]:
            chosen = keys if name == "all" else by_class.get(name, [])
            if chosen:
                rows.append(_summary_row(protocol, name, chosen, medians, within, states, seconds[protocol]))
    return rows


def _summary_row(protocol, name, keys, medians, within, states, seconds) -> dict:
    spreads = [spread(medians[key]) for key in keys]
    return {
        "protocol": protocol,
        "class": CLASS_LABELS.get(name, name),
        "cells": len(keys),
        "spread_median": _median(spreads),
        "spread_p95": _percentile(spreads, 0.95),
        "rel_iqr_median": _median([v for key in keys for v in within[key]]),
        "sm_mhz_median": _median([s[0] for key in keys for s in states[key]]),
        "power_w_median": _median([s[1] for key in keys for s in states[key]]),
        "clock_explains_median": _median([s[2] for key in keys for s in states[key]]),
        "seconds": seconds,
    }


def fusion_speedups(runs: list[dict], over: str = "unfused", fused: str = "fused") -> dict[tuple[str, str], float]:
    """(protocol, workload) -> the median over repeats of `over`'s median time over `fused`'s: what fusing buys,
    protocol by protocol (a GEMM slows at the power cap; a memory-bound pass does not)."""
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in runs:
        cells = run["cells"]
        if over in cells and fused in cells:
            ratio = statistics.median(cells[over]["samples"]) / statistics.median(cells[fused]["samples"])
            ratios[(run["protocol"], run["workload"])].append(ratio)
    return {key: statistics.median(values) for key, values in ratios.items()}


def shown(value, column: str) -> str:
    """One summary value as text: spreads in per cent to two places, the clock's share to two, seconds to one."""
    if isinstance(value, float) and math.isnan(value):
        return ""
    if column.startswith(("spread", "rel_iqr")):
        return f"{100 * value:.2f}%"
    if column == "clock_explains_median":
        return f"{value:.2f}"
    return f"{value:.1f}" if column == "seconds" else f"{value:.0f}" if isinstance(value, float) else str(value)


def summary_markdown(rows: list[dict]) -> str:
    """The summary as the Markdown table docs/findings/2026-11-25-protocol-screen.md shows."""
    lines = ["| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
    lines += ["| " + " | ".join(shown(row[c], c) for c in SUMMARY_COLUMNS) + " |" for row in rows]
    return "\n".join(lines) + "\n"
