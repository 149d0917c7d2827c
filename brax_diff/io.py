"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import BraxDiffError


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write to a temporary file beside ``path``, fsync, then rename over it.

    Either the old content or the whole new content is on disk, never a mix.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise BraxDiffError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, _mode_for(target))  # mkstemp creates 0600; a report is as readable as any file
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _mode_for(target: Path) -> int:
    """The file's current mode when it exists, else what open() would give: 0666 less the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)  # the only way to read the umask; set back at once
        os.umask(mask)
        return 0o666 & ~mask
