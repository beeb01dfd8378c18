"""The GPU side of timing: a clock from CUDA events, an L2 flush between samples, a heater for the sustained
lead-in (`sampling.SUSTAINED`), the stretch of an injected slowdown, and `Timing`, which puts them together with
the protocol's lead-in and the per-sample telemetry: how every call fusedbench times on the GPU is timed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.sampling import PROTOCOL, SAMPLES, LeadIn, Protocol, sample_interleaved
from fusedbench.measure.telemetry import SampleTelemetry

WARMUP_ROUNDS = 1  # one call of every run, on top of the warm-up call each provider's preparation makes
WARMUP_SECONDS = 0.05  # and at least this much GPU time: raises the SM clock after the host-side set-up

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


# Two one-thread kernels on the timed stream: `stamp` reads the GPU's nanosecond timer (%globaltimer: wall time,
# whatever the SM clock does) right before the timed region; `spin`, right after the call, busy-waits until the
# call has lasted 1 + fraction times what it took up to then, less the spin's own launch (`overhead_ns`).
_STRETCH_SOURCE = r"""
__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void fusedbench_stamp(unsigned long long* stamp) { *stamp = now_ns(); }
extern "C" __global__ void fusedbench_spin(const unsigned long long* stamp, double fraction, long long overhead_ns) {
    const unsigned long long start = now_ns();
    const long long wait = (long long)(fraction * (double)(start - *stamp)) - overhead_ns;
    while ((long long)(now_ns() - start) < wait) {
    }
}
"""


class Stretcher:
    """An injected slowdown on the GPU (`sampling.Stretch`): each stretched call lasts 1 + fraction times its own
    duration, exactly where it would run, so the protocol's state and the call itself are those of a plain run."""

    CALIBRATION_CALLS = 21

    def __init__(self, cupy):
        module = cupy.RawModule(code=_STRETCH_SOURCE)
        self._cupy = cupy
        self._stamp_kernel = module.get_function("fusedbench_stamp")
        self._spin_kernel = module.get_function("fusedbench_spin")
        self._stamp = cupy.zeros(1, dtype=cupy.uint64)
        self.overhead_ns = 0
        self.overhead_ns = self._overhead_ns(CudaEventClock(cupy))

    def _overhead_ns(self, clock: CudaEventClock) -> int:
        """What a zero-length spin adds to a timed region (its launch and its one thread), in ns."""

        def timed(region) -> float:
            times = []
            for _ in range(self.CALIBRATION_CALLS):
                self.mark()
                clock.start()
                region()
                times.append(clock.stop())
            return sorted(times)[len(times) // 2]

        spun = timed(lambda: self.stretch(0.0))
        empty = timed(lambda: None)
        return max(0, round((spun - empty) * 1e9))

    def mark(self) -> None:
        self._stamp_kernel((1,), (1,), (self._stamp,))

    def stretch(self, fraction: float) -> None:
        args = (self._stamp, self._cupy.float64(fraction), self._cupy.int64(self.overhead_ns))
        self._spin_kernel((1,), (1,), args)


@dataclass
class Timing:
    """How every call of a measurement is timed: CUDA events, an L2 flush, the protocol's lead-in, and the GPU's
    state read around each sample (`probe`; None where nobody keeps it). Close it to release NVML."""

    clock: CudaEventClock
    flush: L2Flusher
    lead_in: LeadIn
    probe: SampleTelemetry | None
    stretcher: Stretcher | None = None  # where a measurement injects a slowdown

    @classmethod
    def open(
        cls, stack: GpuStack, protocol: Protocol = PROTOCOL, *, telemetry: bool = True, stretch: bool = False
    ) -> Timing:
        """The timing of a measurement (`stretch`: one that injects a slowdown)."""
        heater = Heater(stack.cupy) if protocol.heat_s(1.0) else None
        clock, flush = CudaEventClock(stack.cupy), L2Flusher(stack.cupy)
        stretcher = Stretcher(stack.cupy) if stretch else None
        # NVML last: nothing allocated after it can fail and leave it initialised
        probe = SampleTelemetry() if telemetry else None
        return cls(clock, flush, LeadIn(protocol, heat=heater), probe, stretcher)

    def sample(self, runs, order_seed: int = 0, samples: int = SAMPLES, slower=None) -> dict:
        """`sample_interleaved` of `runs` (name -> call) under this timing; `slower` (name -> fraction) the runs
        made slower on purpose (`catalog.injection`)."""
        return sample_interleaved(
            runs,
            clock=self.clock,
            samples=samples,
            warmup=WARMUP_ROUNDS,
            warmup_seconds=WARMUP_SECONDS,
            between_samples=self.flush,
            order_seed=order_seed,
            lead_in=self.lead_in,
            probe=self.probe,
            slower=slower,
            stretch=self.stretcher,
        )

    def close(self) -> None:
        if self.probe is not None:
            self.probe.close()
