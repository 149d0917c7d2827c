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
    for side in sorted(sides, key=lambda s: s == "rsl_rl"):  # RSL-RL's default ref is read from Playground
        ref = getattr(settings, f"{side}_ref")
        if ref is None and side == "rsl_rl":
            ref = pinned_rsl_rl_ref(snapshots["playground"]) if "playground" in snapshots else None
        if ref is None:
            raise SourceError(f"{side}: no ref given (--{side.replace('_', '-')})")
        step(f"{TITLES[side]}: resolving {ref} in {repositories[side].location}")
        snapshots[side] = resolve_ref(repositories[side], ref)
    return {side: snapshots[side] for side in sides}


LOCKFILE = "uv.lock"
RSL_RL_PACKAGE = "rsl-rl-lib"


def pinned_rsl_rl_ref(playground: Snapshot) -> str:
    """The rsl_rl release Playground's lockfile pins at its commit (``rsl-rl-lib`` 3.2.0 ->
    tag ``v3.2.0``): what ``uv sync --extra learning`` installs for its ``train_rsl_rl.py``. A
    Playground commit that pins none is one error line asking for ``--rsl-rl``; no release is
    guessed for it."""
    import tomllib

    where = f"Playground's {LOCKFILE} at {playground.ref} ({playground.sha[:12]})"
    ask = "give --rsl-rl REF (an rsl_rl tag such as v3.3.0)"
    if not playground.exists(LOCKFILE):
        raise SourceError(f"rsl_rl: no default ref: {where} does not exist; {ask}")
    try:
        packages = tomllib.loads(playground.read(LOCKFILE)).get("package", [])
    except (tomllib.TOMLDecodeError, AttributeError) as exc:
        raise SourceError(f"rsl_rl: no default ref: {where} is not TOML ({exc}); {ask}") from None
    versions = sorted({p.get("version") for p in packages if isinstance(p, dict) and p.get("name") == RSL_RL_PACKAGE
                       and isinstance(p.get("version"), str)})
    if len(versions) != 1:
        found = f"pins {RSL_RL_PACKAGE} {' and '.join(versions)}" if versions else f"pins no {RSL_RL_PACKAGE}"
        raise SourceError(f"rsl_rl: no default ref: {where} {found}; {ask}")
    return f"v{versions[0]}"


def check_worktree_location(side: str, location: str, ref: str) -> None:
    """``WORKTREE`` with a URL repository: one error now, before a clone that cannot serve it."""
    if ref == WORKTREE and is_url(location):
        raise SourceError(f"{side}: {WORKTREE} reads a local checkout's files; --{side.replace('_', '-')}-repo is a URL "
                          f"({location}); give the checkout's path")


def head_warnings(snapshots: dict[str, Snapshot]) -> list[str]:
    """One line per side read at HEAD whose files read differ in its work tree."""
    return [line for side, snap in snapshots.items() if (line := head_differs(snap, f"--{side}"))]
