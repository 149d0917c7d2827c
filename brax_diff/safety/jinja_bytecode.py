"""Compiled Jinja templates kept between runs (compiling one costs a millisecond or more, and
a warm report renders a few dozen).

They live in Jinja's own per-user private temporary directory (code is loaded from there,
so not in a cache directory others may share). Each user of the cache names its files with a
digest of the code that configures its environment, whose options shape the compiled code;
Jinja checks the template source's checksum and the Python version itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from jinja2 import FileSystemBytecodeCache
from jinja2.bccache import Bucket


class QuietBytecodeCache(FileSystemBytecodeCache):
    """Jinja's on-disk cache of compiled templates; one it cannot read or write is only slower."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 (a truncated or foreign file: compile instead)
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def private_bytecode_cache(kind: str, *configured_by: str | Path) -> QuietBytecodeCache | None:
    """The cache of ``kind``'s templates, its file names carrying a digest of the files
    ``configured_by`` (the modules that set the environment's options); None when there is no
    private temporary directory to be had."""
    digest = hashlib.sha256()
    for path in configured_by:
        digest.update(Path(path).read_bytes())
    try:
        return QuietBytecodeCache(pattern=f"__brax_diff_{kind}_{digest.hexdigest()[:16]}_%s.cache")
    except (OSError, RuntimeError):
        return None
