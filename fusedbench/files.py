"""Files fusedbench reads and writes: only regular files read, none larger than a reader expects; outputs written
atomically (readers see the old file or the new one), and checked before any work."""

from __future__ import annotations

import errno
import os
import stat
import tempfile

from fusedbench.errors import FusedbenchError

# No results file or record comes near it (the largest committed is under 1 MB); a larger one is not fusedbench's
MAX_READ_BYTES = 64 * 2**20
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


class RefusedFile(OSError):
    """A path that is not a regular file of at most the size a reader accepts, refused before it is read; the message
    says what it is, to follow the path ('is a FIFO, not a regular file')."""


def regular_file(path: str, limit: int = MAX_READ_BYTES) -> os.stat_result:
    """`path`'s status where it is a regular file (a link followed only to one) of at most `limit` bytes; otherwise
    RefusedFile saying what it is ('is a FIFO, not a regular file'), without opening it (a FIFO would block, a
    device never end)."""
    try:
        status = os.stat(path)
    except OSError as exc:
        raise RefusedFile(_unreachable(path, exc)) from None
    if not stat.S_ISREG(status.st_mode):
        raise RefusedFile(f"is {_KINDS.get(stat.S_IFMT(status.st_mode), 'something else')}, not a regular file")
    if status.st_size > limit:
        raise RefusedFile(f"is {status.st_size / 2**20:.0f} MiB, over the {limit / 2**20:.0f} MiB a file may be")
    return status


def read_regular(path: str, limit: int = MAX_READ_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (RefusedFile, saying why, otherwise)."""
    regular_file(path, limit)
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise RefusedFile(_unreachable(path, exc)) from None
    with os.fdopen(handle, "rb") as stream:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:  # replaced since it was looked at
            raise RefusedFile("changed while it was opened; read it again")
        data = stream.read(status.st_size + 1)  # its size, not the limit: read(limit) would allocate the limit
    if len(data) > status.st_size:
        raise RefusedFile("grew while it was read; read it again")
    return data


def _unreachable(path: str, exc: OSError) -> str:
    """Why a path cannot be read, in words: a link loop and a dangling link say so."""
    if exc.errno == errno.ELOOP:
        return "is a link that loops back on itself"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return f"is a link to {os.readlink(path)!r}, which does not exist"
    return f"cannot be read ({exc.strerror or exc})"


def refuse_dangling_link(path: str, flag: str) -> None:
    """An output named by a link that leads nowhere (dangling, or a loop) is refused: writing through it would fail
    after the work, or write where nobody looks."""
    if os.path.islink(path):
        try:
            os.stat(path)
        except OSError as exc:
            raise FusedbenchError(f"{flag} {path!r} {_unreachable(path, exc)}; name another path") from None


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
    """Refuse a folder an output cannot go into: a file in its place, a link to nowhere, or no permission to create or
    write it."""
    refuse_dangling_link(folder, flag)
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


def check_writable_file(path: str, flag: str, fix: str = "name a writable folder") -> None:
    """Refuse a file path whose folder is missing or not writable (`fix` says what to do instead), or that is a
    folder, a link to nowhere or a special file (a FIFO, a device: the output replaces what is there)."""
    refuse_dangling_link(path, flag)
    if os.path.isdir(path):
        raise FusedbenchError(f"{flag} {path!r} is a folder; name a file")
    if os.path.exists(path) and not os.path.isfile(path):
        raise FusedbenchError(f"{flag} {path!r} is not a regular file; name a file to write")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FusedbenchError(f"{flag} {path!r}: the folder {folder!r} does not exist; create it or name another")
    problem = _write_error(folder)
    if problem:
        raise FusedbenchError(f"{flag} {path!r}: cannot write in {folder!r} ({problem}); {fix}")
