"""Opening the three sides for a command: each repository at its configured location and ref.

The commands call :func:`open_snapshots` with the settings and a ``step`` callback (the
terminal's progress line), and :func:`head_warnings` once the extractions have run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from .config import Settings
from .errors import SourceError
from .sources.repository import Repository, Snapshot, is_url, open_all
from .sources.worktree import WORKTREE, head_differs, resolve_ref

TITLES = {"brax": "Brax", "playground": "Playground", "slm": "SLM-Lab", "rsl_rl": "RSL-RL"}


def open_snapshots(settings: Settings, sides: Iterable[str],
                   step: Callable[[str], None] = lambda text: None) -> dict[str, Snapshot]:
    """side -> Snapshot at the side's ref (``WORKTREE``: the files on disk). Every repository
    that cannot be opened is named in one error (see :func:`open_all`)."""
    cache_root = Path(settings.cache_dir) if settings.cache_dir else None
    sides = list(sides)
    for side in sides:
        check_worktree_location(side, getattr(settings, f"{side}_repo"), getattr(settings, f"{side}_ref"))

    def open_one(side: str) -> Repository:
        location = getattr(settings, f"{side}_repo")
        step(f"{TITLES[side]}: {'cloning or fetching' if is_url(location) else 'opening'} {location}")
        return Repository(location, side, cache_root=cache_root)

    repositories = open_all(sides, open_one)
    snapshots = {}
    for side in sides:
        ref = getattr(settings, f"{side}_ref")
        step(f"{TITLES[side]}: resolving {ref} in {repositories[side].location}")
        snapshots[side] = resolve_ref(repositories[side], ref)
    return snapshots


def check_worktree_location(side: str, location: str, ref: str) -> None:
    """``WORKTREE`` with a URL repository: one error now, before a clone that cannot serve it."""
    if ref == WORKTREE and is_url(location):
        raise SourceError(f"{side}: {WORKTREE} reads a local checkout's files; --{side.replace('_', '-')}-repo is a URL "
                          f"({location}); give the checkout's path")


def head_warnings(snapshots: dict[str, Snapshot]) -> list[str]:
    """One line per side read at HEAD whose files read differ in its work tree."""
    return [line for side, snap in snapshots.items() if (line := head_differs(snap, f"--{side}"))]
