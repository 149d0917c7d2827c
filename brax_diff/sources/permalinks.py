"""Line links that stay put while upstream moves around them.

A line read at commit C is linked at the last commit at or before C that changed its file:
the same bytes, so the same line, and the link stays the same until that file changes. A
report regenerated after upstream commits that touch no file it read then changes only in
its source table, and a moved fact changes the links into its own file, not every link.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import BraxDiffError
from ..facts.model import Provenance
from ..safety.io import read_json, write_atomic
from ..safety.io import sealed, unsealed
from .repository import Snapshot, run_git

# Bump when what is stored changes: old files are then never read.
LINKS_LAYOUT = "v2"  # v2: sealed entries (safety.io.sealed)


def _provenance(value) -> Iterable[dict]:
    if isinstance(value, dict):
        if {"repo", "commit", "path", "line"} <= value.keys():
            yield value
            return
        for item in value.values():
            yield from _provenance(item)
    elif isinstance(value, list):
        for item in value:
            yield from _provenance(item)


def file_key(repo: str, commit: str, path: str) -> str:
    return f"{repo.rstrip('/')}/blob/{commit}/{path}"


def last_change(snapshot: Snapshot, path: str) -> str:
    """The last commit at or before the snapshot's that changed ``path``, when the file there
    is the same blob; else the snapshot's own commit."""
    done = run_git("-C", snapshot.repository.git_dir, "log", "-1", "--format=%H", snapshot.sha, "--", path)
    found = done.stdout.strip()
    if done.returncode != 0 or not found or found == snapshot.sha:
        return snapshot.sha
    try:
        same = (snapshot.repository.git.commit(found).tree / path).hexsha == Snapshot.object_id(snapshot, path)
    except (KeyError, ValueError):
        same = False
    return found if same else snapshot.sha


class LinkCache:
    """``last_change`` answers on disk, one file per commit read: a commit's history never
    changes, so neither does the answer for one of its files; a warm report then runs no
    ``git log`` (one per file read, a tenth of a second). The key also holds the
    repository's shallow boundary, which deepening a clone moves. A file it cannot read is
    a miss; one it cannot write is only slower."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root) / "links" / LINKS_LAYOUT
        self._loaded: dict[Path, dict[str, str]] = {}

    def _file(self, snapshot: Snapshot) -> Path:
        shallow = Path(snapshot.repository.git_dir) / "shallow"
        try:
            boundary = shallow.read_bytes()
        except OSError:
            boundary = b""
        digest = hashlib.sha256(snapshot.sha.encode() + b"\0" + boundary).hexdigest()[:32]
        return self.root / f"{digest}.json"

    def answers(self, snapshot: Snapshot) -> tuple[Path, dict[str, str]]:
        path = self._file(snapshot)
        if path not in self._loaded:
            found = None
            if path.is_file():
                try:
                    found = unsealed(read_json(path, "link cache entry"))
                except BraxDiffError:
                    found = None
            valid = isinstance(found, dict) and all(isinstance(k, str) and isinstance(v, str) and len(v) in (40, 64)
                                                    for k, v in found.items())
            self._loaded[path] = dict(found) if valid else {}
        return path, self._loaded[path]

    def store(self, path: Path, answers: dict[str, str]) -> None:
        try:
            write_atomic(path, sealed(dict(sorted(answers.items()))), durable=False)
        except BraxDiffError:
            pass


def line_commits(model: dict, snapshots: Mapping[str, Snapshot], known: dict[str, str] | None = None,
                 cache: LinkCache | None = None) -> dict[str, str]:
    """``file_key(repo, commit, path)`` -> the commit to link that file's lines at, for every
    committed line the model cites from one of ``snapshots``. ``known`` memoises across
    scopes, ``cache`` across runs."""
    known = {} if known is None else known
    # By repository, not by commit: a fact the cache kept from an earlier commit cites that
    # commit, and the cache answered only because every blob it read is the same here.
    by_repo = {snap.repository.web_url: snap for snap in snapshots.values()}
    out = {}
    changed: dict[Path, dict[str, str]] = {}
    for p in _provenance(model):
        snap = by_repo.get(p["repo"])
        if snap is None or p.get("uncommitted"):
            continue
        key = file_key(p["repo"], p["commit"], p["path"])
        if key not in known:
            stored_at, stored = cache.answers(snap) if cache is not None else (None, {})
            if p["path"] in stored:
                known[key] = stored[p["path"]]
            else:
                known[key] = last_change(snap, p["path"])
                if stored_at is not None:
                    stored[p["path"]] = known[key]
                    changed[stored_at] = stored
        if known[key] != p["commit"]:
            out[key] = known[key]
    for stored_at, stored in changed.items():
        cache.store(stored_at, stored)
    return dict(sorted(out.items()))


def settle(model: dict, commits: Mapping[str, str]) -> dict:
    """Every provenance entry of ``model`` at the commit ``commits`` names for its file (the last
    that changed it): the JSON then says what the Markdown links say, and neither depends on which
    commit a cached fact was first read at."""
    for p in _provenance(model):
        p["commit"] = commits.get(file_key(p["repo"], p["commit"], p["path"]), p["commit"])
    return model


def permalink(p: Provenance, commits: Mapping[str, str] | None) -> str:
    """The line's URL at the commit ``commits`` names for its file (default: the one read)."""
    commit = (commits or {}).get(file_key(p.repo, p.commit, p.path), p.commit)
    return Provenance(p.repo, commit, p.path, p.line).url
