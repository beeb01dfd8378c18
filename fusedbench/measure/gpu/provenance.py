"""Which GPU kernels a provider's hot call launches, from CUPTI's activity records (cupti-python).

A fused epilog that cuBLASLt runs as a GEMM plus a separate epilogue kernel ("fused API,
unfused execution", seen by llm.c for some bf16 epilogs) times like a fusion that does not pay;
the kernel list says which it is. After a workload's timing, each provider's call runs
RECORDED_CALLS times more, cold (L2 flushed first, as every timed sample is), with CUPTI's
concurrent-kernel records on and nothing else, so the list holds that call's kernels only: not the
flush, not the timing events (which are not kernels); each kernel's time is its median over the
calls (one cold call's time varies by 10-20% on an H200). CUPTI stays off while samples are timed.

Kernel names come mangled where the code is C++ (`_ZN8cublasLt8epilogue4impl12globalKernel...`);
`short_name` keeps the qualified name (`cublasLt::epilogue::impl::globalKernel`), enough to tell
kernels apart and short enough for a table.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections.abc import Callable
from typing import Any

from fusedbench.measure.gpu.arrays import synchronize

RECORDED_CALLS = 3
COPY_RECORD = "memcpy"
INSTALL_HINT = "install cupti-python (part of fusedbench[cu12] / fusedbench[cu13]) to record kernels"
_LENGTH_PREFIXED = re.compile(r"(\d+)")


def short_name(name: str) -> str:
    """A kernel's qualified name without its template and parameter lists (mangled or not)."""
    if not name.startswith("_Z"):
        return name.split("(")[0].split("<")[0]
    rest, parts = name[2:], []
    nested = rest.startswith("N")
    rest = rest[1:] if nested else rest
    while True:
        match = _LENGTH_PREFIXED.match(rest)
        if match is None:
            break
        length, start = int(match.group(1)), match.end()
        parts.append(rest[start : start + length])
        rest = rest[start + length :]
        if not nested:
            break
    return "::".join(parts) or name


@functools.cache
def kernel_recorder() -> KernelRecorder:
    """The process's one recorder (CUPTI takes one pair of buffer callbacks per process)."""
    return KernelRecorder()


class KernelRecorder:
    """Records the kernels one call launches. `unavailable` says why it cannot (no cupti-python, CUPTI refused)."""

    def __init__(self) -> None:
        self.unavailable = ""
        self._records: list[tuple[str, float]] = []
        try:
            from cupti import cupti
        except ImportError:
            self.unavailable = INSTALL_HINT
            return
        self._cupti = cupti
        try:
            cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
        except Exception as exc:  # cuptiError: another profiler holds CUPTI, or the driver is too old
            self.unavailable = f"CUPTI refused to record ({type(exc).__name__}: {' '.join(str(exc).split())})"

    @staticmethod
    def _buffer_requested():
        return 8 << 20, 0  # bytes per buffer, and no limit on records per buffer

    def _buffer_completed(self, activities: list) -> None:
        for activity in activities:
            if activity.kind == self._cupti.ActivityKind.CONCURRENT_KERNEL:
                self._records.append((short_name(activity.name), (activity.end - activity.start) / 1e3))
            elif activity.kind == self._cupti.ActivityKind.MEMCPY:
                self._records.append((COPY_RECORD, (activity.end - activity.start) / 1e3))

    def record(self, call: Callable[[], Any], *, copies: bool = False) -> list[dict[str, Any]]:
        """Run `call` once with kernel records on: each kernel's short name and GPU time (us), in launch order.
        With `copies`, the memory copies instead (named COPY_RECORD), which are not kernels."""
        if self.unavailable:
            raise RuntimeError(self.unavailable)
        cupti = self._cupti
        kind = cupti.ActivityKind.MEMCPY if copies else cupti.ActivityKind.CONCURRENT_KERNEL
        synchronize()
        self._records = []
        cupti.activity_enable(kind)
        try:
            call()
            synchronize()
        finally:
            cupti.activity_flush_all(1)
            cupti.activity_disable(kind)
        return [{"name": name, "us": round(us, 3)} for name, us in self._records]


def kernel_provenance(call: Callable[[], Any], before: Callable[[], None], *, copies: bool = False) -> dict[str, Any]:
    """What a cell's record keeps of its kernels (or, with `copies`, of its memory copies): RECORDED_CALLS cold
    calls' list (`before` runs before each, unrecorded) as `median_kernels` sums it up, or why there is none."""
    recorder = kernel_recorder()
    if recorder.unavailable:
        return {"kernels_unrecorded": recorder.unavailable}
    calls = []
    try:
        for _ in range(RECORDED_CALLS):
            before()
            calls.append(recorder.record(call, copies=copies))
    except Exception as exc:
        return {"kernels_unrecorded": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
    return {"kernels": median_kernels(calls)}


def median_kernels(calls: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The kernels most of the calls launched (the earliest such list on a tie), each with its median time over
    the calls that launched exactly those."""
    sequences = [tuple(kernel["name"] for kernel in launched) for launched in calls]
    names = max(sequences, key=sequences.count)
    alike = [launched for launched, sequence in zip(calls, sequences, strict=True) if sequence == names]
    return [
        {"name": name, "us": round(statistics.median(launched[i]["us"] for launched in alike), 3)}
        for i, name in enumerate(names)
    ]
