"""Reading and writing files so that a bad file is one error line and a reader never sees
half of a write.

* :func:`read_text` / :func:`read_json`: a missing, unreadable, oversized, non-UTF-8 or
  malformed file is one :class:`BraxDiffError` naming it (and the line, where known).
* :func:`write_atomic`: one file, via a temporary file renamed over it.
* :func:`sealed` / :func:`unsealed`: a cache file with a digest of its JSON, so damage that
  leaves valid JSON is a miss.
* :func:`write_all`: several files of one directory (a report's Markdown and JSON, every
  family of a run) replaced as one set. They are written to a staging directory beside
  them; a ``COMMIT`` list written there last marks the set complete; then each file is
  renamed into place with SIGINT and SIGTERM held back. A crash before ``COMMIT`` leaves
  the old files; a crash after it is finished by the next write to that directory
  (:func:`finish_interrupted_writes`); ``report --check`` names an unfinished set.
* :func:`signals_as_exceptions`: SIGTERM raises like SIGINT, so every ``finally`` that
  removes a temporary file runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import fcntl
import os
import shutil
import signal
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import BraxDiffError
from .limits import MAX_FILE_BYTES, LimitExceeded, decode_text, load_json

STAGING_PREFIX = ".brax-diff-staging-"
COMMIT_LIST = "COMMIT"
_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; ``signum`` says which (exit 128 + signum).

    Not a KeyboardInterrupt, so that no ``except KeyboardInterrupt`` on the way swallows it
    and the CLI can name the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)


def sealed(data: Any) -> str:
    """``data`` as a cache file: ``{"data", "sha256"}``, the digest of its canonical JSON. A
    cache file is read back as facts and links: damage that leaves valid JSON (a flipped digit
    in a commit sha or a value) must be a miss, not a wrong value."""
    return _canonical({"data": data, "sha256": hashlib.sha256(_canonical(data).encode()).hexdigest()}) + "\n"


def unsealed(found: Any) -> Any:
    """What :func:`sealed` wrote; None when ``found`` is not a sealed entry or its digest differs."""
    if not (isinstance(found, dict) and set(found) == {"data", "sha256"} and isinstance(found["sha256"], str)):
        return None
    try:
        text = _canonical(found["data"])
    except (TypeError, ValueError):
        return None
    return found["data"] if hashlib.sha256(text.encode()).hexdigest() == found["sha256"] else None


def _mode_for(target: Path) -> int:
    """The file's current mode when it exists, else what open() would give: 0666 less the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)  # the only way to read the umask; set back at once
        os.umask(mask)
        return 0o666 & ~mask


def _write_file(path: Path, data: bytes, mode: int = 0o666, durable: bool = True) -> None:
    """Create ``path`` (it must not exist) with ``data`` and ``mode``, flushed to disk when ``durable``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, mode)  # exactly ``mode``: the final file keeps the old one's, or the umask's
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
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


def _not_regular(mode: int) -> str | None:
    """What a file of this (lstat) mode is when not a regular file: a write renamed over it
    would replace a symbolic link, or a device such as /dev/full."""
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "a special file"


def check_writable(target: str | os.PathLike) -> None:
    """One error line when ``target`` cannot be written: it is a directory or anything else
    that is not a regular file (it is never replaced), or a file sits where one of its parent
    directories would be. Creates nothing."""
    target = Path(target)
    if target.is_dir():
        raise BraxDiffError(f"cannot write {target}: it is a directory")
    try:
        kind = _not_regular(os.lstat(target).st_mode)
    except OSError:
        kind = None  # nothing there (yet): the write creates it
    if kind is not None:
        raise BraxDiffError(f"cannot write {target}: it is {kind}, not a regular file")
    for parent in target.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise BraxDiffError(f"cannot write {target}: {parent} is not a directory")
            return


def _make_parent(target: Path) -> None:
    check_writable(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BraxDiffError(f"cannot write {target}: cannot create {target.parent}: {_why(exc)}") from None


def write_atomic(path: str | os.PathLike, data: str | bytes, *, durable: bool = True) -> Path:
    """Write to a temporary file beside ``path``, fsync, then rename over it.

    Either the old content or the whole new content is on disk, never a mix; on any
    error or signal the temporary file is removed and an OSError (ENOSPC, EFBIG, ...)
    becomes one error line. ``durable=False`` skips the fsync, for caches whose readers
    treat an unreadable file as a miss (after a power cut the rename may outlive the bytes;
    a cold report writes ~280 cache files).
    """
    target = Path(path)
    _make_parent(target)
    tmp = target.parent / f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        tmp.unlink(missing_ok=True)
        _write_file(tmp, _as_bytes(data), _mode_for(target), durable)
        os.replace(tmp, target)
    except OSError as exc:
        _discard(tmp)
        raise BraxDiffError(f"cannot write {target}: {_why(exc)}") from None
    except BaseException:
        _discard(tmp)
        raise
    return target


def _discard(tmp: Path) -> None:
    """Remove a temporary file if it is there. On a read-only filesystem even unlinking a file
    that is not there answers EROFS: that OSError would replace the one being reported (and
    escape a cache's "continuing without it")."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """An exclusive flock on the directory itself: one writer of a report set at a time."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def edit_lock(path: str | os.PathLike) -> Iterator[None]:
    """Held while one process reads, rewrites and reads back ``path`` in place: another one
    waits, then reads what this one wrote (two `fix --in-place` runs keep both variants). The
    lock is a file beside it, ``.<name>.brax-diff.lock``, removed when released."""
    path = Path(path)
    lock = path.parent / f".{path.name}.brax-diff.lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise BraxDiffError(f"cannot lock {path}: cannot create {lock}: {_why(exc)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held, current = os.fstat(fd), os.stat(lock)
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                break
        except FileNotFoundError:
            pass  # the last holder removed the file we waited on: lock the one there now
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()  # before the lock is released: a waiter then finds the name gone and retries
        os.close(fd)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (they are delivered then)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _staging_dirs(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.name.startswith(STAGING_PREFIX) and p.is_dir())
    except OSError:
        return []


def _committed_names(staging: Path) -> list[str] | None:
    try:
        names = (staging / COMMIT_LIST).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return [n for n in names if n and "/" not in n and n not in (".", "..")]


def _finish(staging: Path) -> None:
    """Move a committed set's files still in ``staging`` into place; then remove ``staging``."""
    names = _committed_names(staging)
    for name in names or []:
        if (staging / name).exists():
            os.replace(staging / name, staging.parent / name)
    _fsync_dir(staging.parent)
    shutil.rmtree(staging, ignore_errors=True)


def interrupted_writes(directory: str | os.PathLike) -> list[Path]:
    """Files of a report set whose write was cut off after it was committed (not yet in place)."""
    pending = []
    for staging in _staging_dirs(Path(directory)):
        names = _committed_names(staging)
        pending += [Path(directory) / n for n in names or [] if (staging / n).exists()]
    return sorted(pending)


def finish_interrupted_writes(directory: str | os.PathLike) -> None:
    """Complete sets a crash cut off after their commit; drop staging a crash left before it."""
    directory = Path(directory)
    if not directory.is_dir() or not _staging_dirs(directory):
        return
    try:
        with _directory_lock(directory), _signals_held():
            for staging in _staging_dirs(directory):
                if _committed_names(staging) is None:
                    shutil.rmtree(staging, ignore_errors=True)
                else:
                    _finish(staging)
    except OSError as exc:
        raise BraxDiffError(f"cannot finish an interrupted write in {directory}: {_why(exc)}") from None


def write_all(files: Mapping[str | os.PathLike, str | bytes]) -> list[Path]:
    """Replace every file in ``files`` (one directory) as one set: all new, or all as before.

    Returns the paths written, in the given order. Bad targets (a directory, a parent that
    is a file) are refused before anything is written.
    """
    targets = {Path(p): _as_bytes(data) for p, data in files.items()}
    if not targets:
        return []
    parents = {p.parent for p in targets}
    if len(parents) != 1:
        raise ValueError(f"write_all writes into one directory, not {sorted(map(str, parents))}")
    for target in targets:
        _make_parent(target)
    directory = parents.pop()
    finish_interrupted_writes(directory)
    try:
        with _directory_lock(directory):
            staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory))
            try:
                for target, data in targets.items():
                    _write_file(staging / target.name, data, _mode_for(target))
                _fsync_dir(staging)
                with _signals_held():
                    # From here the set is committed: a crash is finished by the next write.
                    _write_file(staging / COMMIT_LIST, "".join(f"{t.name}\n" for t in targets).encode())
                    _fsync_dir(staging)
                    _finish(staging)
            except BaseException:
                if _committed_names(staging) is None:
                    shutil.rmtree(staging, ignore_errors=True)
                raise
    except OSError as exc:
        written = "; the next report run finishes the write" if interrupted_writes(directory) else ""
        raise BraxDiffError(f"cannot write the report files in {directory}: {_why(exc)}{written}") from None
    return list(targets)


# --------------------------------------------------------------------------------------
# Signals
# --------------------------------------------------------------------------------------


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM raise :class:`Interrupted`, so cleanup code runs;
    outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in _HELD_SIGNALS}
    for s in _HELD_SIGNALS:
        signal.signal(s, _raise_interrupted)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


__all__ = ["read_bytes", "read_text", "read_json", "write_atomic", "write_all", "edit_lock", "finish_interrupted_writes",
           "interrupted_writes", "check_writable", "signals_as_exceptions", "Interrupted", "STAGING_PREFIX"]
