"""The GPU side of timing: a clock from CUDA events, and an L2 flush between samples."""

from __future__ import annotations

# Writing this many times the L2 size evicts every line a previous sample left there.
L2_FLUSH_FACTOR = 2


class CudaEventClock:
    """GPU time between two CUDA events on the current stream; stop() waits for the end event only."""

    def __init__(self, cupy):
        self._cupy = cupy
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def start(self) -> None:
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._cupy.cuda.get_elapsed_time(self._start, self._end) / 1e3  # ms -> s


class L2Flusher:
    """Evicts L2 by writing a buffer of L2_FLUSH_FACTOR x the device's L2 size."""

    def __init__(self, cupy):
        l2_bytes = int(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["l2CacheSize"])
        self._cupy = cupy
        self._buffer = cupy.empty(L2_FLUSH_FACTOR * l2_bytes, dtype=cupy.uint8)

    def __call__(self) -> None:
        self._buffer.fill(0)
