"""Sources: git repositories read as blobs at a commit. Nothing is checked out.

A repository is a local path (work tree or bare repository) or a URL. URLs are cloned
once (``git clone --mirror``) into a cache directory and fetched on later runs; offline,
the cached clone is used, and a missing one is a clear error.

A :class:`Snapshot` is a repository at one resolved commit. Extractors read files from
it with :meth:`Snapshot.read`; every read is recorded with its blob id, so a caller can
tell later whether another commit would read the same bytes (see ``history``).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    import git

from ..safety import limits
from ..safety.escape import one_line
from ..errors import SourceError
from ..facts.model import Provenance, SourceInfo

# The upstream repositories, by side name.
DEFAULT_URLS = {
    "brax": "https://github.com/google/brax",
    "playground": "https://github.com/google-deepmind/mujoco_playground",
    "slm": "https://github.com/kengz/SLM-Lab",
    "rsl_rl": "https://github.com/leggedrobotics/rsl_rl",
}

_GITHUB = re.compile(r"^(?:https?://|ssh://git@|git@)github\.com[:/]([^/]+)/([^/]+?)(?:\.git)?/?$")


# Settings under which git runs nothing a repository's own configuration names: brax-diff
# reads upstream repositories and runs none of their code. Given as `-c` settings (in the
# environment, so GitPython's git processes and git's own children get them too), they
# outrank the repository's.
_INERT_SETTINGS = (
    ("log.showSignature", "false"),  # else `git log` runs gpg.program on a signed commit
    ("core.fsmonitor", "false"),  # a command run whenever the index is read
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("diff.external", ""),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value empties the list of helpers
    # Output brax-diff decodes as UTF-8: a repository may ask for its log in UTF-16 or Latin-1.
    ("i18n.logOutputEncoding", "UTF-8"),
)
# The transports a clone or fetch of a URL may use. A read uses none: a partial clone fetches
# a missing object from its promisor remote, whose settings (uploadpack, vcs, sshCommand) name
# commands. GIT_ALLOW_PROTOCOL overrides every protocol.*.allow setting; GIT_NO_LAZY_FETCH
# (git 2.44) stops the fetch before it starts.
CLONE_TRANSPORTS = "file:git:http:https:ssh"


def git_environment(transports: str = "") -> dict[str, str]:
    """The variables every git process brax-diff starts runs with (see _INERT_SETTINGS); a
    read gets no transport, a clone or fetch ``CLONE_TRANSPORTS``."""
    settings = " ".join(f"'{key}={value}'" for key, value in _INERT_SETTINGS)
    inherited = os.environ.get("GIT_CONFIG_PARAMETERS")
    return {"GIT_CONFIG_PARAMETERS": f"{inherited} {settings}" if inherited else settings,
            "GIT_ALLOW_PROTOCOL": transports, "GIT_NO_LAZY_FETCH": "1", "GIT_TERMINAL_PROMPT": "0"}


def run_git(*args: str, transports: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``git ARGS`` under ``git_environment`` (text output, never raising)."""
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          env={**os.environ, **git_environment(transports), **(env or {})})


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


def normalize_url(url: str) -> str:
    """The URL that names one repository: scheme and host lower-cased, trailing slashes
    dropped. Nothing else is folded (``a.git`` and ``a`` may be two repositories)."""
    url = url.strip().rstrip("/")
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)(.*)$", url)
    if match:
        return f"{match.group(1).lower()}://{match.group(2).lower()}{match.group(3)}"
    return url


def _clone_path(url: str, root: Path) -> Path:
    """``<root>/repos/<readable slug>-<hash>.git``: the hash of the normalized URL keeps two
    repositories apart even when their slugs agree (``a/b.git`` and ``a+b.git``)."""
    normalized = normalize_url(url)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", re.sub(r"^[a-z+]+://", "", normalized)).strip("-.")[-60:].strip("-.")
    digest = hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:16]
    return root / "repos" / f"{slug or 'repo'}-{digest}.git"


def _is_repository(path: Path) -> bool:
    return run_git("--git-dir", str(path), "rev-parse", "--is-bare-repository").returncode == 0


@contextlib.contextmanager
def _locked(lock_path: Path):
    """An exclusive flock on ``lock_path``: one process clones or fetches a repository at a time."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _warn(message: str) -> None:
    print(f"warning: {one_line(message)}", file=sys.stderr)


def _locate(path: Path, side: str, location: str) -> tuple[str, bool, str | None]:
    """(git dir, bare, work tree top) of the repository at ``path``, as git itself sees it (one
    process, no GitPython); a path that is not a repository's top is a SourceError, as it was
    when GitPython opened it."""
    done = run_git("-C", str(path), "rev-parse", "--absolute-git-dir", "--is-bare-repository",
                   "--is-inside-git-dir", "--show-cdup")
    lines = done.stdout.split("\n")
    here = path.resolve()
    if done.returncode == 0 and len(lines) >= 3:
        git_dir, bare, inside = lines[0], lines[1] == "true", lines[2] == "true"
        if (bare or inside) and here == Path(git_dir).resolve():
            return git_dir, bare, None if bare else str(Path(git_dir).parent)
        if not bare and not inside and len(lines) >= 4 and lines[3] == "":  # the work tree's top
            return git_dir, False, os.path.abspath(path)
    raise SourceError(f"{side}: {location} is not a git repository")


@functools.cache
def _checked_db():
    """GitPython's object database, with a damaged repository as a SourceError: `git cat-file
    --batch` stops short on a damaged object (GitPython returns the bytes it got, so the file
    read as empty) and dies, and the next read writes to a closed pipe (a BrokenPipeError the
    CLI's handler for a closed stdout would take for `| head`) or reads an empty answer."""
    import io

    from git.db import GitCmdObjectDB
    from gitdb.base import OStream

    class CheckedObjectDB(GitCmdObjectDB):
        def stream(self, binsha: bytes) -> OStream:
            why = f"git object {binsha.hex()} in {os.path.dirname(self.root_path())}"
            try:
                found = super().stream(binsha)
                if found.size > limits.MAX_FILE_BYTES:  # the reader refuses it unread (LimitExceeded)
                    return found
                data = found.read()
            except (BrokenPipeError, ConnectionError) as exc:
                raise SourceError(f"{why} cannot be read ({exc.strerror or exc}): the repository is damaged "
                                  "(try `git fsck`)") from None
            except ValueError as exc:
                # The dead cat-file's pipe can also still take the request and answer nothing:
                # GitPython then reads an empty header and guesses "dubious ownership", which
                # _locate's rev-parse has already ruled out.
                if not str(exc).startswith("SHA is empty"):
                    raise
                raise SourceError(f"{why} cannot be read (git cat-file stopped answering): the repository is "
                                  "damaged (try `git fsck`)") from None
            if len(data) != found.size:
                raise SourceError(f"{why} has {len(data)} of its {found.size} bytes: the repository is damaged "
                                  "(try `git fsck`)")
            return OStream(found.binsha, found.type, found.size, io.BytesIO(data))

    return CheckedObjectDB


def _open(path: Path) -> "git.Repo":
    import git

    repo = git.Repo(path, odbt=_checked_db())
    repo.git.update_environment(**git_environment())
    if not repo.bare:
        # A bare repository with extensions.worktreeConfig keeps core.bare in config.worktree,
        # which GitPython does not read: it then takes the parent folder for a work tree and
        # every ref lookup fails. Ask git itself.
        done = run_git("-C", str(path), "rev-parse", "--is-bare-repository")
        if done.stdout.strip() == "true":
            repo._bare = True
            repo._working_tree_dir = None
            repo.git = repo.GitCommandWrapperType(repo.git_dir)
            repo.git.update_environment(**git_environment())
            repo.odb = type(repo.odb)(repo.odb.root_path, repo.git)
    return repo


_TREE_MODE = 0o040000


class ObjectIds:
    """``path`` -> object id at a commit, reading each git tree object once.

    Consecutive commits share most subtrees, so over a walk this reads a few trees per
    commit instead of one per path component per path (GitPython's ``tree / path``); and
    a fact-cache lookup (a few hundred paths at one commit) reads each directory once.
    """

    def __init__(self, repo: "Repository") -> None:
        self.repo = repo
        self.trees: dict[bytes, dict[str, tuple[int, bytes]]] = {}
        # (commit sha, path) -> id: a report asks for each many times, and the fact cache
        # knows the answers at the commits it stored (``remember``), so a warm run reads no tree.
        self.found: dict[tuple[str, str], str | None] = {}
        self.remembered: set[str] = set()

    def remember(self, sha: str, answers: dict[str, str | None]) -> None:
        """Answers known at commit ``sha`` (each the id that commit's tree gives the path); once per commit."""
        if sha in self.remembered:
            return
        self.remembered.add(sha)
        self.learn(sha, answers)

    def learn(self, sha: str, answers: dict[str, str | None]) -> None:
        """Add answers at commit ``sha`` (another process read them: see brax_diff.extract.parallel)."""
        for path, object_id in answers.items():
            self.found.setdefault((sha, path), object_id)

    def _entries(self, binsha: bytes) -> dict[str, tuple[int, bytes]]:
        found = self.trees.get(binsha)
        if found is None:
            from git.objects.fun import tree_entries_from_data

            data = self.repo.object_stream(binsha, self.repo.side).read()
            found = {name: (mode, sha) for sha, mode, name in tree_entries_from_data(data)}
            self.trees[binsha] = found
        return found

    def names(self, tree_id: str) -> list[str]:
        """The entry names of a tree object, sorted."""
        return sorted(self._entries(bytes.fromhex(tree_id)))

    def __call__(self, commit, path: str) -> str | None:
        """Blob id of ``path`` at ``commit`` (a sha or GitPython's Commit; tree id of ``dir/``);
        None when absent."""
        asked = (commit if isinstance(commit, str) else commit.hexsha, path)
        if asked not in self.found:
            if isinstance(commit, str):
                commit = self.repo.git.commit(commit)
            self.found[asked] = self._look_up(commit, path)
        return self.found[asked]

    def _look_up(self, commit, path: str) -> str | None:
        want_tree = path.endswith("/")
        parts = [p for p in path.strip("/").split("/") if p]
        mode, sha = _TREE_MODE, commit.tree.binsha
        for part in parts:
            if mode != _TREE_MODE:
                return None
            entry = self._entries(sha).get(part)
            if entry is None:
                return None
            mode, sha = entry
        is_tree = mode == _TREE_MODE
        if is_tree != want_tree or (not is_tree and mode >> 12 not in (0o10, 0o12)):
            return None  # a submodule (gitlink) is neither
        return sha.hex()


def _local_clone_hint(sides: list[str]) -> str:
    """Every side's repository is the flag --SIDE-repo and the setting SIDE-repo."""
    if len(sides) == 1:
        return f"to use a local clone, pass --{sides[0]}-repo PATH or set {sides[0]}-repo in brax-diff.toml"
    def listed(words: list[str]) -> str:
        return ", ".join(words[:-1]) + f" and {words[-1]}"

    return (f"to use local clones, pass {listed([f'--{s}-repo PATH' for s in sides])} or set "
            f"{listed([f'{s}-repo' for s in sides])} in brax-diff.toml")


class CloneUnavailable(SourceError):
    """A URL that cannot be cloned and has no cached clone: what a run meets offline."""

    def __init__(self, side: str, problem: str) -> None:
        self.side, self.problem = side, problem
        super().__init__(f"{side}: {problem}; {_local_clone_hint([side])}")


def open_all(sides: Iterable[str], open_one: Callable[[str], "Repository"]) -> dict[str, "Repository"]:
    """side -> ``open_one(side)`` for every side. Every repository that cannot be opened (a URL
    offline with no cached clone, a missing path) is named in one error, not only the first:
    offline, the user learns all the clones to point at in one run."""
    opened: dict[str, Repository] = {}
    failed: list[SourceError] = []
    for side in sides:
        try:
            opened[side] = open_one(side)
        except SourceError as exc:
            failed.append(exc)
    if len(failed) == 1:
        raise failed[0]
    if failed:
        offline = [exc.side for exc in failed if isinstance(exc, CloneUnavailable)]
        parts = [f"{exc.side}: {exc.problem}" if isinstance(exc, CloneUnavailable) else str(exc) for exc in failed]
        raise SourceError("; ".join(parts + ([_local_clone_hint(offline)] if offline else [])))
    return opened




class Repository:
    """A git repository opened for blob reads. ``side`` names it in messages."""

    def __init__(self, location: str | os.PathLike, side: str, *, cache_root: str | os.PathLike | None = None,
                 fetch: bool = True) -> None:
        self.side = side
        self.location = str(location)
        if is_url(self.location):
            try:
                path = self._ensure_clone(self.location, Path(cache_root or cache_dir()), fetch)
            except SourceError as exc:
                raise CloneUnavailable(side, str(exc)) from None
        else:
            path = Path(self.location).expanduser()
            if not path.exists():
                raise SourceError(f"{side}: repository path {self.location} does not exist")
        self.path = path
        self.git_dir, self.bare, self.working_tree_dir = _locate(path, side, self.location)
        self._git: "git.Repo | None" = None
        self.web_url = self._web_url()
        self._object_ids: ObjectIds | None = None

    @property
    def git(self) -> "git.Repo":
        """GitPython's repository, opened (and GitPython imported: 0.13 s) on first use: a run
        the fact cache answers reads no git object and never needs it."""
        if self._git is None:
            import git

            try:
                self._git = _open(Path(self.git_dir) if self.bare else self.path)
            except (git.InvalidGitRepositoryError, git.NoSuchPathError):
                raise SourceError(f"{self.side}: {self.location} is not a git repository") from None
        return self._git

    def git_command(self, *args: str) -> subprocess.CompletedProcess:
        """``git ARGS`` on this repository (text output, never raising)."""
        return run_git("--git-dir", self.git_dir, *args)

    def object_stream(self, binsha: bytes, what: str):
        """GitPython's stream of an object; one a partial clone lacks is a SourceError, since git
        runs here with no transport to fetch it (see git_environment)."""
        try:
            return self.git.odb.stream(binsha)
        except ValueError:  # GitPython's word for `git cat-file` answering "missing"
            partial = self.git_command("config", "--get", "extensions.partialClone").stdout.strip()
            why = ("brax-diff does not fetch what a partial clone lacks" if partial else
                   "the repository is damaged (try `git fsck`)")  # cat-file says "missing" for an unreadable header
            raise SourceError(f"{what}: git object {binsha.hex()} is missing from {self.location}; {why}") from None

    def head_sha(self) -> str | None:
        done = self.git_command("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None

    @property
    def object_ids(self) -> ObjectIds:
        """Path lookups at any commit of this repository, sharing the trees read."""
        if self._object_ids is None:
            self._object_ids = ObjectIds(self)
        return self._object_ids

    @staticmethod
    def _ensure_clone(url: str, root: Path, fetch: bool) -> Path:
        target = _clone_path(url, root)
        try:
            with _locked(target.with_suffix(".lock")):
                return Repository._clone_or_fetch(url, target, fetch)
        except OSError as exc:
            raise SourceError(f"cannot use the clone cache {target.parent} for {url}: "
                              f"{exc.strerror or exc}") from None

    @staticmethod
    def _clone_or_fetch(url: str, target: Path, fetch: bool) -> Path:
        """Under the repository's lock: fetch the cached clone, or clone it whole."""
        for leftover in target.parent.glob(glob.escape(target.name) + ".partial-*"):
            shutil.rmtree(leftover, ignore_errors=True)  # a clone killed part-way (we hold the lock)
        if target.exists() and not _is_repository(target):
            _warn(f"the cached clone of {url} in {target} is not a git repository; cloning it again")
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink()
        if target.exists():
            if fetch:
                done = run_git("--git-dir", str(target), "fetch", "--prune", "--quiet", transports=CLONE_TRANSPORTS)
                if done.returncode != 0:
                    _warn(f"could not fetch {url} (offline?); using the cached clone in {target}")
            return target
        partial = Path(tempfile.mkdtemp(prefix=target.name + ".partial-", dir=target.parent))
        try:
            done = run_git("clone", "--mirror", "--quiet", "--", url, str(partial), transports=CLONE_TRANSPORTS)
            if done.returncode != 0:
                reason = (done.stderr.strip().splitlines() or ["git clone failed"])[-1]
                raise SourceError(f"cannot clone {url} and no cached clone exists in {target}: {reason}")
            os.rename(partial, target)  # only a whole clone ever sits at the cache path
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        return target

    def _web_url(self) -> str:
        if is_url(self.location):
            found = github_web_url(self.location)
            if found:
                return found
        done = self.git_command("remote", "get-url", "--all", "origin")  # as GitPython's Remote.urls
        for url in done.stdout.splitlines() if done.returncode == 0 else []:
            found = github_web_url(url)
            if found:
                return found
        return DEFAULT_URLS.get(self.side, self.location)

    def resolve(self, ref: str) -> "Snapshot":
        """A branch, tag, short or full sha, ``HEAD``, ``main~3``, ``main@{1}``, ``:/message`` -> a
        Snapshot (``WORKTREE``, the files on disk, is :func:`.worktree.resolve_ref`'s).

        git itself resolves the ref (GitPython's own parser fails on ``@{...}`` forms); a ref
        that is not a commit here is one SourceError, whatever git says.
        """
        if not ref or ref.startswith("-") or any(ch in ref for ch in "\0\n\r"):
            raise SourceError(f"{self.side}: cannot resolve ref {ref!r} in {self.location}: not a git ref")
        if ref.startswith(":/"):  # a commit message search: a suffix would be read as part of the pattern
            candidates = [ref]
        else:
            candidates = [ref] if ref.startswith("origin/") else [ref, f"origin/{ref}"]
        reason = ""
        for candidate in candidates:
            spelled = candidate if candidate.startswith(":/") else f"{candidate}^{{commit}}"
            done = self.git_command("rev-parse", "--verify", "--quiet", "--end-of-options", spelled)
            sha = done.stdout.strip()
            if done.returncode == 0 and candidate.startswith(":/"):
                kind = self.git_command("cat-file", "-t", sha) if re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", sha) else None
                if kind is None or kind.stdout.strip() != "commit":
                    break
            if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", sha):
                return Snapshot(self, sha, ref)
            reason = reason or (done.stderr.strip().splitlines() or [""])[-1].removeprefix("fatal: ")
        shallow = (Path(self.git_dir) / "shallow").is_file()
        raise SourceError(f"{self.side}: cannot resolve ref {ref!r} in {self.location}"
                          + (f": {reason}" if reason else "")
                          + ("; this clone is shallow, so older commits are not in it: git fetch --unshallow"
                             if shallow else ""))

    @property
    def shallow_boundary(self) -> frozenset[str]:
        """The commits a shallow clone's history stops at (empty for a full clone): a fact there
        did not "appear", the history before it is missing."""
        try:
            return frozenset((Path(self.git_dir) / "shallow").read_text().split())
        except OSError:
            return frozenset()


@dataclass
class Snapshot:
    """A repository at one commit; files are read as blobs.

    ``at`` is the commit: its sha, or GitPython's Commit. Given a sha, GitPython is not
    touched until a tree or blob is read (``commit``), so a run answered from the fact cache
    never imports it; ``known_date`` is the commit date when a cache already knows it."""

    repository: Repository
    at: "git.Commit | str"
    ref: str
    # Everything this snapshot's answers depended on: path -> blob id (None: missing),
    # "dir/" -> tree id for listings. History and the fact cache compare these ids.
    reads: dict[str, str | None] = field(default_factory=dict)
    known_date: str | None = field(default=None, compare=False)

    @property
    def commit(self) -> "git.Commit":
        if isinstance(self.at, str):
            self.at = self.repository.git.commit(self.at)
        return self.at

    @property
    def sha(self) -> str:
        return self.at if isinstance(self.at, str) else self.at.hexsha

    @property
    def date(self) -> str:
        if self.known_date is None:
            self.known_date = self.commit.committed_datetime.isoformat()
        return self.known_date

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
        return self.repository.object_ids(self.at, path)

    def blob_id(self, path: str) -> str | None:
        """Blob id of ``path``; recorded in ``reads``, since the caller's answer depends on it."""
        found = self.object_id(path)
        self.reads.setdefault(path, found)
        return found

    def exists(self, path: str) -> bool:
        return self.blob_id(path) is not None

    def read(self, path: str) -> str:
        """The file's text at this commit; a missing file is a one-line SourceError."""
        found = self.object_id(path)
        self.reads[path] = found
        if found is None:
            raise SourceError(f"{self.side}: {path} not found at {self.ref} ({self.sha[:12]}) "
                              f"in {self.repository.location}")
        stream = self.repository.object_stream(bytes.fromhex(found), f"{self.side}: {path} at {self.ref} ({self.sha[:12]})")
        if stream.size > limits.MAX_FILE_BYTES:
            raise limits.LimitExceeded(f"{self.side}: {path} at {self.ref} ({self.sha[:12]}): {stream.size} bytes; "
                                       f"the limit is {limits.MAX_FILE_BYTES} bytes")
        return stream.read().decode("utf-8", errors="replace")

    def listdir(self, path: str) -> list[str]:
        """Names in a directory at this commit (sorted); [] when it does not exist."""
        key = path.strip("/") + "/"  # a listing is recorded as "dir/" -> tree id
        found = self.object_id(key)
        self.reads.setdefault(key, found)
        return [] if found is None else self.repository.object_ids.names(found)
