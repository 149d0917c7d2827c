"""Reading and writing files so that a bad file is one error line and a reader never sees
half of a write.

* :func:`read_text` / :func:`read_json`: a missing, unreadable, oversized, non-UTF-8 or
  malformed file is one :class:`BraxDiffError` naming it (and the line, where known).
* :func:`write_atomic`: one file, via a temporary file renamed over it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path
from typing import Any

from .errors import BraxDiffError
from .limits import MAX_FILE_BYTES, LimitExceeded, decode_text, load_json


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def read_bytes(path: str | os.PathLike, what: str, error: type[BraxDiffError] = BraxDiffError) -> bytes:
    """The file's bytes; one ``error`` line when it is missing, a directory, unreadable or too large."""
    path = Path(path)
    try:
        # O_NONBLOCK: a FIFO named as a rules file must not wait for a writer for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise error(f"{what} {path}: cannot read: {_why(exc)}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{what} {path}: cannot read: it is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {path}: cannot read: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise LimitExceeded(f"{what} {path}: {info.st_size} bytes; the limit is {MAX_FILE_BYTES} bytes")
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:  # st_size may be 0 (procfs) or grow while we read
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        raise LimitExceeded(f"{what} {path}: more than {MAX_FILE_BYTES} bytes; the limit is {MAX_FILE_BYTES} bytes")
    except OSError as exc:
        raise error(f"{what} {path}: cannot read: {_why(exc)}") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, what: str, error: type[BraxDiffError] = BraxDiffError) -> str:
    """The file as UTF-8 text (see :func:`read_bytes`); non-UTF-8 bytes are one error line."""
    data = read_bytes(path, what, error)
    try:
        return decode_text(data, f"{what} {path}")
    except BraxDiffError as exc:
        raise error(str(exc)) from None


def read_json(path: str | os.PathLike, what: str, error: type[BraxDiffError] = BraxDiffError) -> Any:
    """The file's JSON document, within the nesting and number limits."""
    origin = f"{what} {path}"
    text = read_text(path, what, error)
    try:
        return load_json(text, origin)
    except LimitExceeded:
        raise
    except ValueError as exc:  # JSONDecodeError, or an integer past the digit limit
        line = getattr(exc, "lineno", None)
        raise error(f"{origin}: invalid JSON{f' at line {line}' if line else ''}: "
                    f"{getattr(exc, 'msg', None) or exc}") from None


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


def _write_file(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist) with ``data``, flushed to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _check_target(target: Path) -> None:
    if target.is_dir():
        raise BraxDiffError(f"cannot write {target}: it is a directory")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BraxDiffError(f"cannot write {target}: cannot create {target.parent}: {_why(exc)}") from None
    if not target.parent.is_dir():
        raise BraxDiffError(f"cannot write {target}: {target.parent} is not a directory")


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write to a temporary file beside ``path``, fsync, then rename over it.

    Either the old content or the whole new content is on disk, never a mix; on any
    error or signal the temporary file is removed and an OSError (ENOSPC, EFBIG, ...)
    becomes one error line.
    """
    target = Path(path)
    _check_target(target)
    tmp = target.parent / f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        tmp.unlink(missing_ok=True)
        _write_file(tmp, _as_bytes(data))
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BraxDiffError(f"cannot write {target}: {_why(exc)}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


__all__ = ["read_bytes", "read_text", "read_json", "write_atomic"]
