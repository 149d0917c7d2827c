"""Sources: git repositories read as blobs at a commit. Nothing is checked out.

A repository is a local path (work tree or bare repository) or a URL. URLs are cloned
once (``git clone --mirror``) into a cache directory and fetched on later runs; offline,
the cached clone is used, and a missing one is a clear error.

A :class:`Snapshot` is a repository at one resolved commit. Extractors read files from
it with :meth:`Snapshot.read`; every read is recorded with its blob id, so a caller can
tell later whether another commit would read the same bytes (see ``history``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import git

from .errors import SourceError
from .facts import Provenance, SourceInfo

# The upstream repositories, by side name.
DEFAULT_URLS = {
    "brax": "https://github.com/google/brax",
    "playground": "https://github.com/google-deepmind/mujoco_playground",
    "slm": "https://github.com/kengz/SLM-Lab",
}

_GITHUB = re.compile(r"^(?:https?://|ssh://git@|git@)github\.com[:/]([^/]+)/([^/]+?)(?:\.git)?/?$")


def github_web_url(url: str) -> str | None:
    """``git@github.com:org/repo.git`` or ``https://github.com/org/repo`` -> web URL."""
    match = _GITHUB.match(url.strip())
    return f"https://github.com/{match.group(1)}/{match.group(2)}" if match else None


def is_url(location: str) -> bool:
    return "://" in location or bool(re.match(r"^[\w.-]+@[\w.-]+:", location))


def cache_dir() -> Path:
    """Where URL clones live: $BRAX_DIFF_CACHE_DIR, else $XDG_CACHE_HOME/brax-diff."""
    explicit = os.environ.get("BRAX_DIFF_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "brax-diff"


def _clone_path(url: str, root: Path) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "+", re.sub(r"^[a-z+]+://", "", url)).strip("+")
    return root / "repos" / f"{slug}.git"


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _open(path: Path) -> git.Repo:
    repo = git.Repo(path)
    if not repo.bare:
        # A bare repository with extensions.worktreeConfig keeps core.bare in config.worktree,
        # which GitPython does not read: it then takes the parent folder for a work tree and
        # every ref lookup fails. Ask git itself.
        done = subprocess.run(["git", "-C", str(path), "rev-parse", "--is-bare-repository"],
                              capture_output=True, text=True)
        if done.stdout.strip() == "true":
            repo._bare = True
            repo._working_tree_dir = None
            repo.git = repo.GitCommandWrapperType(repo.git_dir)
            repo.odb = type(repo.odb)(repo.odb.root_path, repo.git)
    return repo


class Repository:
    """A git repository opened for blob reads. ``side`` names it in messages."""

    def __init__(self, location: str | os.PathLike, side: str, *, cache_root: Path | None = None,
                 fetch: bool = True) -> None:
        self.side = side
        self.location = str(location)
        if is_url(self.location):
            try:
                path = self._ensure_clone(self.location, cache_root or cache_dir(), fetch)
            except SourceError as exc:
                # Every side's repository is the flag --SIDE-repo and the setting SIDE-repo.
                raise SourceError(f"{side}: {exc}; to use a local clone, pass --{side}-repo PATH or set "
                                  f"{side}-repo in brax-diff.toml") from None
        else:
            path = Path(self.location).expanduser()
            if not path.exists():
                raise SourceError(f"{side}: repository path {self.location} does not exist")
        try:
            self.git = _open(path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise SourceError(f"{side}: {self.location} is not a git repository") from None
        self.web_url = self._web_url()

    @staticmethod
    def _ensure_clone(url: str, root: Path, fetch: bool) -> Path:
        target = _clone_path(url, root)
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        if target.exists():
            if fetch:
                done = subprocess.run(["git", "-C", str(target), "fetch", "--prune", "--quiet"],
                                      capture_output=True, text=True, env=env)
                if done.returncode != 0:
                    _warn(f"could not fetch {url} (offline?); using the cached clone in {target}")
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        subprocess.run(["rm", "-rf", str(partial)], check=False)
        done = subprocess.run(["git", "clone", "--mirror", "--quiet", url, str(partial)],
                              capture_output=True, text=True, env=env)
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["git clone failed"])[-1]
            raise SourceError(f"cannot clone {url} and no cached clone exists in {target}: {reason}")
        partial.rename(target)  # only a whole clone ever sits at the cache path
        return target

    def _web_url(self) -> str:
        if is_url(self.location):
            found = github_web_url(self.location)
            if found:
                return found
        try:
            origin = self.git.remote("origin")
            for url in origin.urls:
                found = github_web_url(url)
                if found:
                    return found
        except (ValueError, git.GitCommandError):
            pass
        return DEFAULT_URLS.get(self.side, self.location)

    def resolve(self, ref: str) -> "Snapshot":
        """A branch, tag, short or full sha, ``HEAD`` or ``main~3`` -> a Snapshot; ``WORKTREE``:
        HEAD's commit with every file read from the work tree on disk."""
        if ref == "WORKTREE":
            from .worktree import WorkTreeSnapshot  # a Snapshot subclass (it imports this module)

            return WorkTreeSnapshot.of(self)
        candidates = [ref] if ref.startswith("origin/") else [ref, f"origin/{ref}"]
        for candidate in candidates:
            try:
                commit = self.git.commit(candidate)
                return Snapshot(self, commit, ref)
            except (git.BadName, git.BadObject, ValueError, git.GitCommandError):
                continue
        raise SourceError(f"{self.side}: cannot resolve ref {ref!r} in {self.location}")


@dataclass
class Snapshot:
    """A repository at one commit; files are read as blobs."""

    repository: Repository
    commit: git.Commit
    ref: str
    # Everything this snapshot's answers depended on: path -> blob id (None: missing),
    # "dir/" -> tree id for listings. History and the fact cache compare these ids.
    reads: dict[str, str | None] = field(default_factory=dict)

    @property
    def sha(self) -> str:
        return self.commit.hexsha

    @property
    def date(self) -> str:
        return self.commit.committed_datetime.isoformat()

    @property
    def side(self) -> str:
        return self.repository.side

    def info(self) -> SourceInfo:
        return SourceInfo(repo=self.repository.web_url, commit=self.sha, date=self.date, ref=self.ref)

    def where(self, path: str, line: int) -> Provenance:
        return Provenance(self.repository.web_url, self.sha, path, line)

    def _object(self, path: str):
        try:
            return self.commit.tree / path
        except KeyError:
            return None

    def object_id(self, path: str) -> str | None:
        """Blob id of ``path`` (tree id of ``dir/``) at this commit; None when absent. Reads nothing."""
        is_dir = path.endswith("/")
        clean = path.strip("/")
        obj = self._object(clean) if clean else self.commit.tree
        return obj.hexsha if obj is not None and obj.type == ("tree" if is_dir else "blob") else None

    def blob_id(self, path: str) -> str | None:
        """Blob id of ``path``; recorded in ``reads``, since the caller's answer depends on it."""
        found = self.object_id(path)
        self.reads.setdefault(path, found)
        return found

    def exists(self, path: str) -> bool:
        return self.blob_id(path) is not None

    def read(self, path: str) -> str:
        """The file's text at this commit; a missing file is a one-line SourceError."""
        obj = self._object(path)
        if obj is None or obj.type != "blob":
            self.reads[path] = None
            raise SourceError(f"{self.side}: {path} not found at {self.ref} ({self.sha[:12]}) "
                              f"in {self.repository.location}")
        self.reads[path] = obj.hexsha
        return obj.data_stream.read().decode("utf-8", errors="replace")

    def listdir(self, path: str) -> list[str]:
        """Names in a directory at this commit (sorted); [] when it does not exist."""
        key = path.strip("/") + "/"  # a listing is recorded as "dir/" -> tree id
        self.reads.setdefault(key, self.object_id(key))
        obj = self._object(path.strip("/")) if path.strip("/") else self.commit.tree
        if obj is None or obj.type != "tree":
            return []
        return sorted(item.name for item in obj)
