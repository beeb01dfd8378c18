"""How far the measurement inside asv's setup_cache has got, told to `fusedbench run`, which cannot see in.

The measurement writes `<group>.progress` into the folder PROGRESS_DIR_VARIABLE names (where
`fusedbench run` sets it); `ProgressEcho` prints the newest one every few seconds.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable

from fusedbench.files import write_text_atomically

PROGRESS_DIR_VARIABLE = "FUSEDBENCH_PROGRESS_DIR"
PROGRESS_SUFFIX = ".progress"


def write_progress(group: str, done: int, total: int, last: str) -> None:
    """Leave the group's progress where `fusedbench run` looks (nothing outside `fusedbench run`)."""
    folder = os.environ.get(PROGRESS_DIR_VARIABLE)
    if folder:
        payload = {"group": group, "done": done, "total": total, "last": last}
        write_text_atomically(os.path.join(folder, f"{group}{PROGRESS_SUFFIX}"), json.dumps(payload))


def progress_line(folder: str) -> str | None:
    """'measuring Fp16Seed: 36/96 cells (RELU_BIAS/fp16/...)' from the newest progress file, if any."""
    newest, payload = -1.0, None
    for name in os.listdir(folder):
        if name.endswith(PROGRESS_SUFFIX):
            path = os.path.join(folder, name)
            try:
                modified = os.path.getmtime(path)
                if modified > newest:
                    with open(path) as stream:
                        newest, payload = modified, json.load(stream)
            except (OSError, ValueError):
                continue  # being replaced right now; the next poll reads it
    if payload is None:
        return None
    return f"measuring {payload['group']}: {payload['done']}/{payload['total']} cells ({payload['last']})"


class ProgressEcho(threading.Thread):
    """Echoes the measurement's progress every `interval` seconds while asv is quiet in setup_cache."""

    def __init__(self, folder: str, echo: Callable[[str], None], interval: float = 15.0):
        super().__init__(daemon=True)
        self._folder, self._echo, self._interval = folder, echo, interval
        self._stopping = threading.Event()

    def run(self) -> None:
        last = None
        while not self._stopping.wait(self._interval):
            line = progress_line(self._folder)
            if line is not None and line != last:
                self._echo(f"  {line}")
                last = line

    def stop(self) -> None:
        self._stopping.set()  # (Thread has a _stop of its own)
        self.join()
