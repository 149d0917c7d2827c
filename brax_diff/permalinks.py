"""Line links that stay put while upstream moves around them.

A line read at commit C is linked at the last commit at or before C that changed its file:
the same bytes, so the same line, and the link stays the same until that file changes. A
report regenerated after upstream commits that touch no file it read then changes only in
its source table, and a moved fact changes the links into its own file, not every link.
"""

from __future__ import annotations

import subprocess
from typing import Iterable, Mapping

from .facts import Provenance
from .sources import Snapshot


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


def _last_change(snapshot: Snapshot, path: str) -> str:
    """The last commit at or before the snapshot's that changed ``path``, when the file there
    is the same blob; else the snapshot's own commit."""
    done = subprocess.run(["git", "-C", snapshot.repository.git.git_dir, "log", "-1", "--format=%H", snapshot.sha,
                           "--", path], capture_output=True, text=True)
    found = done.stdout.strip()
    if done.returncode != 0 or not found or found == snapshot.sha:
        return snapshot.sha
    try:
        same = (snapshot.repository.git.commit(found).tree / path).hexsha == Snapshot.object_id(snapshot, path)
    except (KeyError, ValueError):
        same = False
    return found if same else snapshot.sha


def line_commits(model: dict, snapshots: Mapping[str, Snapshot], known: dict[str, str] | None = None) -> dict[str, str]:
    """``file_key(repo, commit, path)`` -> the commit to link that file's lines at, for every
    committed line the model cites from one of ``snapshots``. ``known`` memoises across scopes."""
    known = {} if known is None else known
    by_source = {(snap.repository.web_url, snap.sha): snap for snap in snapshots.values()}
    out = {}
    for p in _provenance(model):
        snap = by_source.get((p["repo"], p["commit"]))
        if snap is None or p.get("uncommitted"):
            continue
        key = file_key(p["repo"], p["commit"], p["path"])
        if key not in known:
            known[key] = _last_change(snap, p["path"])
        if known[key] != p["commit"]:
            out[key] = known[key]
    return dict(sorted(out.items()))


def permalink(p: Provenance, commits: Mapping[str, str] | None) -> str:
    """The line's URL at the commit ``commits`` names for its file (default: the one read)."""
    commit = (commits or {}).get(file_key(p.repo, p.commit, p.path), p.commit)
    return Provenance(p.repo, commit, p.path, p.line).url
