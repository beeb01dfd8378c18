"""Atomic file writes: readers see the old file or the new one, never half of either."""

from __future__ import annotations

import os
import tempfile


def write_text_atomically(path: str, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder, then rename it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".fusedbench-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; these files are for reading
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
