"""asv's machine name for this GPU, and `fusedbench machine`, which registers it with asv.

asv keys results by machine name and defaults to the host name, which on an ephemeral CI runner
is new for every job, so a GPU's history would break at every build. fusedbench names the
machine after the GPU model instead (`h100-80gb-hbm3`), whichever command starts asv.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys

from fusedbench.errors import FusedbenchError


def machine_name(gpu_name: str, memory_bytes: int) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3', 'NVIDIA H200' -> 'h200-141gb'.

    Where the name has no size, the memory in GiB, rounded up, is added (an H200 reports 140.4).
    """
    words = re.sub(r"^nvidia\s+", "", gpu_name.strip().lower()).split()
    if not any(re.fullmatch(r"\d+gb", word) for word in words):
        words.insert(1, f"{math.ceil(memory_bytes / 2**30)}gb")
    return re.sub(r"[^a-z0-9]+", "-", "-".join(words)).strip("-")


def gpu_machine_name() -> str:
    """This machine's GPU 0 as an asv machine name, from NVML (no CUDA libraries needed); GpuUnavailable without one."""
    from fusedbench.catalog.stacks import machine_in_stack
    from fusedbench.measure.stacks import current_stack
    from fusedbench.measure.telemetry import nvml_device

    name, memory = nvml_device()
    return machine_in_stack(machine_name(name, memory), current_stack())


def register_asv_machine(name: str, *, cwd: str) -> None:
    """Write `name` into asv's machine file (~/.asv-machine.json), asv's other fields at their detected defaults."""
    result = subprocess.run(
        [sys.executable, "-m", "asv", "machine", "--yes", "--machine", name],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise FusedbenchError(f"asv machine --machine {name} failed ({detail[-1] if detail else result.returncode})")
