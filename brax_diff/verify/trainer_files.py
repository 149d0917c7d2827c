"""Is the Brax trainer `verify` runs the one at the --brax ref?

The reference arm calls the *installed* ``brax`` package's ``ppo.train`` (0.14.2 here),
whatever ``--brax`` names: a ref's trainer cannot be imported without installing it. So the
trainer's files as installed are compared with the same files at the ref, by git blob id (the
installed file hashed as git hashes a blob), and verify.json records both sides
(``plan.reference_trainer``). Where they differ, ``verify`` says so in one line; the reference
then measures the installed trainer, not the ref's. Nothing is imported: the installed
package is found with importlib.util.find_spec and its files are read.
"""

from __future__ import annotations

import hashlib
import importlib.util
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

# ppo.train and what it runs: its losses and networks, and the acting / gradients / types modules they use
TRAINER_FILES = ("brax/training/agents/ppo/train.py", "brax/training/agents/ppo/losses.py",
                 "brax/training/agents/ppo/networks.py", "brax/training/acting.py",
                 "brax/training/gradients.py", "brax/training/types.py")


def git_blob_id(data: bytes) -> str:
    """The id git gives a blob of these bytes (sha1 of "blob <size>\\0" + bytes)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def installed_root(find_spec: Callable[[str], Any] = importlib.util.find_spec) -> Path | None:
    """The folder holding the installed ``brax`` package (found, not imported); None without one."""
    spec = find_spec("brax")
    if spec is None or not spec.origin or spec.origin in ("namespace", "built-in"):
        locations = list(getattr(spec, "submodule_search_locations", None) or []) if spec else []
        return Path(locations[0]).parent if locations else None
    return Path(spec.origin).parent.parent


def installed_trainer(root: Path | None = None, version: str | None = None) -> dict[str, Any]:
    """``{"version", "files": {path: blob id or None}}`` of the installed trainer."""
    if root is None:
        root = installed_root()
    if version is None:
        try:
            version = metadata.version("brax")
        except metadata.PackageNotFoundError:
            version = None
    files: dict[str, str | None] = {}
    for path in TRAINER_FILES:
        file = root / path if root is not None else None
        files[path] = git_blob_id(file.read_bytes()) if file is not None and file.is_file() else None
    return {"version": version, "files": files}


def ref_trainer(snapshot) -> dict[str, Any]:
    """``{"ref", "commit", "files": {path: blob id or None}}`` at a Brax :class:`~brax_diff.sources.repository.Snapshot`."""
    return {"ref": snapshot.ref, "commit": snapshot.sha,
            "files": {path: snapshot.object_id(path) for path in TRAINER_FILES}}


def compare(installed: dict[str, Any], ref: dict[str, Any] | None) -> dict[str, Any]:
    """Both sides and the files that differ; ``same`` is None when the ref's files were not read."""
    if ref is None:
        return {"installed": installed, "ref": None, "same": None, "differing": None}
    differing = [path for path in TRAINER_FILES if installed["files"].get(path) != ref["files"].get(path)]
    return {"installed": installed, "ref": ref, "same": not differing, "differing": differing}


def notice(comparison: dict[str, Any]) -> str | None:
    """The one line ``verify`` prints when the trainer it runs is not the ref's (None when it is)."""
    installed = comparison["installed"]
    version = installed.get("version") or "unknown version"
    if comparison["same"] is None:
        return (f"the reference trains the installed brax {version}; the --brax ref's trainer files were not read "
                "(planned from --brax-json), so whether it is the ref's trainer is unknown")
    if comparison["same"]:
        return None
    ref = comparison["ref"]
    names = ", ".join(path.removeprefix("brax/training/") for path in comparison["differing"])
    return (f"the reference trains the installed brax {version}, not the trainer at --brax {ref['ref']} "
            f"({ref['commit'][:12]}): {len(comparison['differing'])} of {len(TRAINER_FILES)} trainer files differ "
            f"({names})")
