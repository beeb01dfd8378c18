"""GPU telemetry through NVML (nvidia-ml-py): snapshots, and a sampler that runs beside asv.

A run records a snapshot before and after, and samples every second in between, so a result
says which clocks, temperatures and power it was measured at, and whether the GPU throttled.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import asdict, dataclass, field

from fusedbench.errors import GpuUnavailable

# NVML clock-event reasons that mean the GPU slowed itself down (not idling, not app settings).
THROTTLE_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}


@dataclass(frozen=True)
class Snapshot:
    """One NVML reading of the measured GPU."""

    sm_clock_mhz: int
    memory_clock_mhz: int
    temperature_c: int
    power_w: float
    throttle_mask: int


def visible_gpu_handle(nvml):
    """NVML's handle of the GPU CUDA calls device 0: the first of CUDA_VISIBLE_DEVICES (an index or a
    UUID) where it is set, NVML's GPU 0 otherwise."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(first))
    if first.startswith(("GPU-", "MIG-")):
        return nvml.nvmlDeviceGetHandleByUUID(first)
    return nvml.nvmlDeviceGetHandleByIndex(0)


def nvml_device() -> tuple[str, int]:
    """The measured GPU's name and memory as NVML (and nvidia-smi) report them; CUDA reports a little less memory.

    Raises GpuUnavailable where NVML finds no driver or no GPU.
    """
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise GpuUnavailable(f"NVML found no NVIDIA driver or GPU ({exc})") from None
    try:
        handle = visible_gpu_handle(pynvml)
        name = pynvml.nvmlDeviceGetName(handle)
        memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    except pynvml.NVMLError as exc:
        raise GpuUnavailable(f"NVML found no NVIDIA GPU ({exc})") from None
    finally:
        pynvml.nvmlShutdown()
    return (name.decode() if isinstance(name, bytes) else name), memory


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def clock_reasons(nvml, handle) -> int:
    """NVML's mask of why the clocks are where they are now (`THROTTLE_REASONS` among them)."""
    try:
        return int(nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
    except AttributeError:  # older nvidia-ml-py
        return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def read_snapshot(nvml, handle) -> Snapshot:
    return Snapshot(
        sm_clock_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        memory_clock_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        temperature_c=int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        throttle_mask=clock_reasons(nvml, handle),
    )


@dataclass
class TelemetrySummary:
    """Before, after, and what the samples in between saw."""

    before: Snapshot | None = None
    after: Snapshot | None = None
    samples: list[Snapshot] = field(default_factory=list)

    @property
    def throttled(self) -> list[str]:
        """Every throttle reason seen during the run (empty: the GPU never slowed itself down)."""
        mask = 0
        for snapshot in self.samples:
            mask |= snapshot.throttle_mask
        return throttle_names(mask)

    def to_json(self) -> dict:
        return {
            "before": None if self.before is None else asdict(self.before),
            "after": None if self.after is None else asdict(self.after),
            "samples": len(self.samples),
            "max_temperature_c": max((s.temperature_c for s in self.samples), default=None),
            "max_power_w": max((s.power_w for s in self.samples), default=None),
            "min_sm_clock_mhz": min((s.sm_clock_mhz for s in self.samples), default=None),
            "max_sm_clock_mhz": max((s.sm_clock_mhz for s in self.samples), default=None),
            "throttled": self.throttled,
        }


class TelemetrySampler:
    """Reads NVML every `interval` seconds on a daemon thread until stopped."""

    def __init__(self, interval: float = 1.0):
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = visible_gpu_handle(pynvml)
        self._interval = interval
        self._stop = threading.Event()
        self.summary = TelemetrySummary(before=read_snapshot(pynvml, self._handle))
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def device_facts(self) -> dict:
        nvml, handle = self._nvml, self._handle
        return {
            "name": _text(nvml.nvmlDeviceGetName(handle)),
            "memory_total_bytes": int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
            "max_sm_clock_mhz": int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "driver": str(nvml.nvmlSystemGetDriverVersion()),
            "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),  # which card of a fleet: sessions may get others
            "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        }

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.summary.samples.append(read_snapshot(self._nvml, self._handle))

    def __enter__(self) -> TelemetrySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()
        self.summary.after = read_snapshot(self._nvml, self._handle)
        self._nvml.nvmlShutdown()


@contextlib.contextmanager
def optional_sampler():
    """A TelemetrySampler over the block where NVML sees a GPU, else None: a measurement made by other processes (a
    side-by-side one) keeps the GPU's state where it can, and is measured all the same where NVML sees none."""
    import pynvml

    try:
        sampler = TelemetrySampler()
    except pynvml.NVMLError:
        sampler = None
    if sampler is None:
        yield None
        return
    with sampler:
        yield sampler


# What `SampleTelemetry` keeps of every timed call, a list per cell in sample order (cells' `telemetry`).
SAMPLE_SERIES = ("sm_mhz_before", "sm_mhz_after", "power_w", "throttle")


class SampleTelemetry:
    """The GPU's state around every timed call (a `sampling.Probe`): the SM clock right before and right after,
    the instantaneous power right after (NVML's instant-power field: `nvmlDeviceGetPowerUsage` is a one-second
    average on Hopper, and the energy counter moves about every 100 ms), and the clock-event reasons seen before
    or after. Read outside the timed region; what is read before a call is only what is quick to read (the clock
    and the reasons, microseconds), so that the call still queues behind its lead-in."""

    def __init__(self):
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = visible_gpu_handle(pynvml)
        self._series: dict[str, dict[str, list[int]]] = {}
        self._pending: dict[str, tuple[int, int]] = {}
        self._has_power = self._instant_power() >= 0

    def _instant_power(self) -> int:
        """Watts now; -1 where NVML has no instant-power field for this GPU."""
        nvml = self._nvml
        try:
            (value,) = nvml.nvmlDeviceGetFieldValues(self._handle, [nvml.NVML_FI_DEV_POWER_INSTANT])
        except (nvml.NVMLError, AttributeError):
            return -1
        return round(value.value.uiVal / 1000) if value.nvmlReturn == nvml.NVML_SUCCESS else -1

    def _read(self) -> tuple[int, int]:
        nvml, handle = self._nvml, self._handle
        return int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)), clock_reasons(nvml, handle)

    def before(self, name: str) -> None:
        self._pending[name] = self._read()

    def after(self, name: str) -> None:
        clock_before, reasons_before = self._pending.pop(name)
        clock_after, reasons_after = self._read()
        series = self._series.setdefault(name, {key: [] for key in SAMPLE_SERIES})
        series["sm_mhz_before"].append(clock_before)
        series["sm_mhz_after"].append(clock_after)
        series["power_w"].append(self._instant_power() if self._has_power else -1)
        series["throttle"].append(reasons_before | reasons_after)

    def take(self, name: str) -> dict[str, list[int]]:
        """The series of the cell timed as `name` (its samples' order), and the GPU's temperature now; forgets them."""
        series = self._series.pop(name, {})
        if series:
            temperature = self._nvml.nvmlDeviceGetTemperature(self._handle, self._nvml.NVML_TEMPERATURE_GPU)
            series["temperature_c"] = [int(temperature)]
        return series

    def close(self) -> None:
        self._nvml.nvmlShutdown()
