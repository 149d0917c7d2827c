"""Build small git repositories in a temporary folder from hand-written files.

Dates are fixed, so shas are the same on every run and every machine.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path


def _git(cwd: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def make_repo(path: Path, commits: list[dict[str, str | None]], *, branch: str = "main",
              messages: list[str] | None = None, origin: str | None = None) -> list[str]:
    """Create a repository at ``path`` with one commit per dict of {file path: text or None}.

    ``None`` deletes the file. Texts are dedented. Returns the commit shas in order.
    """
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", branch)
    _git(path, "config", "user.email", "fixture@example.com")
    _git(path, "config", "user.name", "Fixture")
    _git(path, "config", "commit.gpgsign", "false")
    if origin:
        _git(path, "remote", "add", "origin", origin)
    shas = []
    for index, files in enumerate(commits):
        shas.append(add_commit(path, files, message=(messages or [])[index] if messages and index < len(messages)
                               else f"commit {index}", index=index))
    return shas


def add_commit(path: Path, files: dict[str, str | None], *, message: str = "change", index: int | None = None) -> str:
    """Write/delete files and commit them; returns the new sha."""
    for rel, text in files.items():
        target = path / rel
        if text is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    if index is None:
        index = int(_git(path, "rev-list", "--count", "--all") or 0) if (path / ".git").exists() else 0
    stamp = f"2025-01-{1 + index % 28:02d}T12:00:00+00:00"
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "--allow-empty", "-m", message, env=env)
    return _git(path, "rev-parse", "HEAD")
