"""Screen measurement protocols on this GPU: the same prepared cells timed under every candidate lead-in, again
and again, so that each candidate's repeat-to-repeat spread and its time cost can be compared
(`fusedbench protocols`; the analysis is `measure.screening`).

Each workload's providers are prepared once; then, repeat after repeat, every protocol times them in its rounds,
the protocols taking turns, each repeat starting one further along (a rotation: their cyclic order stays). No
CUPTI and no records: this is a study of how to measure, not a run.
"""

from __future__ import annotations

import time

from fusedbench.catalog.suites import BenchmarkGroup
from fusedbench.errors import Skipped
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.bench import prepare_all, workload_operands
from fusedbench.measure.gpu.timing import Timing
from fusedbench.measure.sampling import Protocol


def chosen_workloads(group: BenchmarkGroup, count: int) -> list:
    """`count` of the group's workloads spread evenly over its list (epilogs and shapes alike); all for 0."""
    workloads = group.workloads()
    if count <= 0 or count >= len(workloads):
        return workloads
    return [workloads[round(i * (len(workloads) - 1) / max(1, count - 1))] for i in range(count)]


def screen_protocols(
    stack: GpuStack, groups: list[BenchmarkGroup], protocols: list[Protocol], *, repeats: int, workloads: int
) -> list[dict]:
    """A run per (protocol, repeat, group, workload): its wall seconds (lead-ins, warm-up and samples) and each
    provider's samples and telemetry."""
    timings = {protocol.name: Timing.open(stack, protocol) for protocol in protocols}
    runs: list[dict] = []
    try:
        for group in groups:
            for index, workload in enumerate(chosen_workloads(group, workloads)):
                try:
                    operands = workload_operands(stack, workload, index)
                except Skipped:
                    continue
                prepared, _ = prepare_all(stack, operands, workload.cell_keys(group.providers))
                try:
                    for repeat in range(repeats):
                        turn = protocols[repeat % len(protocols) :] + protocols[: repeat % len(protocols)]
                        for protocol in turn:
                            runs.append(_one_run(timings[protocol.name], prepared, protocol, repeat, group, workload))
                finally:
                    for ready in prepared.values():
                        ready.release()
                del operands
    finally:
        for timing in timings.values():
            timing.close()
    return runs


def _one_run(timing: Timing, prepared: dict, protocol: Protocol, repeat: int, group, workload) -> dict:
    started = time.perf_counter()
    timed = timing.sample({provider: ready.run for provider, ready in prepared.items()})
    seconds = time.perf_counter() - started
    # Every provider's readings, a failed one's too: left behind, they would run on into its next repeat's.
    telemetry = {provider: timing.probe.take(provider) for provider in timed}
    return {
        "protocol": protocol.name,
        "repeat": repeat,
        "group": group.name,
        "workload": workload.label,
        "seconds": seconds,
        "cells": {
            provider: {"samples": samples, "telemetry": telemetry[provider]}
            for provider, samples in timed.items()
            if not isinstance(samples, Exception)
        },
    }
