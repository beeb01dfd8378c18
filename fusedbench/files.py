"""Files fusedbench writes: atomically (readers see the old file or the new one), and checked before any work."""

from __future__ import annotations

import json
import os
import tempfile

from fusedbench.errors import FusedbenchError


def write_bytes_atomically(path: str, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder, then rename it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".fusedbench-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; these files are for reading
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def write_text_atomically(path: str, text: str) -> None:
    write_bytes_atomically(path, text.encode("utf-8"))


def read_record(path: str, record_format: str, what: str) -> dict:
    """A JSON record of `record_format` (its "format" field), with its `path`: one error line where it cannot be read
    or is another kind of file (`what` names the kind in the line)."""
    try:
        with open(path, encoding="utf-8") as stream:
            record = json.load(stream)
    except (OSError, ValueError) as exc:
        raise FusedbenchError(f"{what} {path} cannot be read ({exc})") from None
    if not isinstance(record, dict) or record.get("format") != record_format:
        raise FusedbenchError(f"{path} is not a {record_format} record")
    return record | {"path": path}


def _nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _write_error(folder: str) -> str | None:
    """Why a file cannot be created in `folder` (None if it can): tried with a temporary file, removed at once."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def check_writable_folder(folder: str, flag: str) -> None:
    """Refuse a folder an output cannot go into: a file in its place, or no permission to create or write it."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise FusedbenchError(f"{flag} {folder!r} is a file, not a folder; name a folder")
    existing = _nearest_existing(folder)
    if not os.path.isdir(existing):
        raise FusedbenchError(f"{flag} {folder!r} lies under the file {existing!r}; name a folder")
    problem = _write_error(existing)
    if problem:
        raise FusedbenchError(
            f"{flag} {folder!r}: {existing!r} takes no new files (creating one there fails: {problem}); "
            "name a writable folder"
        )


def check_writable_file(path: str, flag: str) -> None:
    """Refuse a file path whose folder is missing or not writable, or that is a folder."""
    if os.path.isdir(path):
        raise FusedbenchError(f"{flag} {path!r} is a folder; name a file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FusedbenchError(f"{flag} {path!r}: the folder {folder!r} does not exist; create it or name another")
    problem = _write_error(folder)
    if problem:
        raise FusedbenchError(f"{flag} {path!r}: cannot write in {folder!r} ({problem}); name a writable folder")
