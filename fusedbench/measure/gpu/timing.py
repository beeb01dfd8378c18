"""The GPU side of timing: a clock from CUDA events, an L2 flush between samples, and a heater for the
sustained lead-in (`sampling.SUSTAINED`)."""

from __future__ import annotations

import math

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


class Heater:
    """Queues dense fp16 GEMMs for a given time: the load that holds the GPU at its power cap (no sync: the timed
    call follows it on the stream with no idle gap in between)."""

    SIZE = 4096  # 0.14 TFLOP a call, about 0.2 ms on an H100: fine-grained enough for 5 ms of heat

    def __init__(self, cupy):
        self._cupy = cupy
        self._a = cupy.random.standard_normal((self.SIZE, self.SIZE), dtype=cupy.float32).astype(cupy.float16)
        self._b = self._a.T.copy()
        self._c = cupy.empty_like(self._a)
        clock = CudaEventClock(cupy)
        self._gemm()  # cuBLAS picks its kernel outside the calibration
        clock.start()
        for _ in range(20):
            self._gemm()
        self._seconds_per_call = clock.stop() / 20

    def _gemm(self) -> None:
        self._cupy.matmul(self._a, self._b, out=self._c)

    def __call__(self, seconds: float) -> None:
        for _ in range(max(1, math.ceil(seconds / self._seconds_per_call))):
            self._gemm()
