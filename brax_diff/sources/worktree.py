"""Work-tree mode: a checkout's files as they are on disk, beside the blob reads at a commit.

``--slm WORKTREE`` (or ``--brax``/``--playground WORKTREE``) resolves to HEAD's commit and
reads every file from the work tree, so an edit shows in the next report before it is
committed. Everything stays static: the files are read and parsed, never imported.

In a file that differs from HEAD, each line is matched to HEAD's blob (a line diff): a line
the edit left alone keeps its link, at the committed blob's line number; a changed or added
line is marked ``uncommitted`` (no link at HEAD shows it). The source lists the files read
that differ. An unchanged file has the id git gives it (``git hash-object``), so the fact
cache treats it exactly as its committed blob; a changed file's id pairs its bytes with the
committed blob's (``DISK:COMMITTED``), since its lines' links depend on both.

:func:`head_differs` is the other direction: the user asked for ``HEAD`` in a checkout
whose files read differ on disk, and is told so in one line.
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping

from ..safety import limits
from ..errors import SourceError
from ..facts.model import Provenance, SourceInfo
from .repository import Repository, Snapshot

WORKTREE = "WORKTREE"


def git_blob_id(data: bytes) -> str:
    """The id git gives a file with these bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def work_tree_root(repository: Repository) -> Path | None:
    """The top of the repository's work tree; None for a bare repository or a URL's clone."""
    if repository.bare or not repository.working_tree_dir:
        return None
    return Path(repository.working_tree_dir)


def _inside(root: Path, path: str) -> Path | None:
    """``root / path`` when it stays inside the work tree (no ``..``, no symlink out), else None:
    a WORKTREE snapshot reads what a commit could hold, nothing else on the machine."""
    target = root / path.strip("/") if path.strip("/") else root
    try:
        resolved, top = target.resolve(), root.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None
    return target if resolved == top or top in resolved.parents else None


def _disk_bytes(root: Path, path: str) -> bytes | None:
    target = _inside(root, path)
    try:
        if target is None or not target.is_file():
            return None
        if target.stat().st_size > limits.MAX_FILE_BYTES:  # the same cap as a blob
            raise limits.LimitExceeded(f"{path} in the work tree: {target.stat().st_size} bytes; "
                                       f"the limit is {limits.MAX_FILE_BYTES} bytes")
        return target.read_bytes()
    except OSError:
        return None


def _disk_names(root: Path, path: str) -> list[str] | None:
    folder = _inside(root, path)
    if folder is None or not folder.is_dir():
        return None
    return sorted(name for name in (p.name for p in folder.iterdir()) if name != ".git")


@dataclass
class WorkTreeSnapshot(Snapshot):
    """HEAD's commit, with every file read from the work tree on disk."""

    # (path, blob id on disk) -> {work-tree line: committed line}, for the lines an edit left alone
    _line_maps: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, repository: Repository) -> "WorkTreeSnapshot":
        root = work_tree_root(repository)
        if root is None:
            raise SourceError(f"{repository.side}: {WORKTREE} reads a checkout's files, and {repository.location} "
                              "has no work tree (a bare repository or a URL); give the checkout's path")
        commit = repository.head_sha()
        if commit is None:
            raise SourceError(f"{repository.side}: {repository.location} has no commit yet")
        return cls(repository, commit, WORKTREE)

    @property
    def root(self) -> Path:
        return Path(self.repository.working_tree_dir)

    def committed_id(self, path: str) -> str | None:
        """The object id of ``path`` at HEAD's commit."""
        return Snapshot.object_id(self, path)

    def _file_id(self, path: str, data: bytes) -> str:
        disk, committed = git_blob_id(data), self.committed_id(path)
        return disk if disk == committed else f"{disk}:{committed or 'none'}"

    def object_id(self, path: str) -> str | None:
        if not path.endswith("/"):
            data = _disk_bytes(self.root, path)
            return None if data is None else self._file_id(path, data)
        names = _disk_names(self.root, path)
        if names is None:
            return None
        committed = self.committed_id(path)
        if committed is not None and names == self._committed_names(path):
            return committed  # the same names as committed: the listing answers the same
        return "worktree:" + hashlib.sha1("\n".join(names).encode()).hexdigest()

    def _committed_names(self, path: str) -> list[str]:
        clean = path.strip("/")
        obj = self._object(clean) if clean else self.commit.tree
        return sorted(item.name for item in obj) if obj is not None and obj.type == "tree" else []

    def is_uncommitted(self, path: str) -> bool:
        return self.object_id(path) != self.committed_id(path)

    def read(self, path: str) -> str:
        data = _disk_bytes(self.root, path)
        if data is None:
            self.reads[path] = None
            raise SourceError(f"{self.side}: {path} not found in the work tree {self.root}")
        self.reads[path] = self._file_id(path, data)
        return data.decode("utf-8", errors="replace")

    def listdir(self, path: str) -> list[str]:
        key = path.strip("/") + "/"
        self.reads.setdefault(key, self.object_id(key))
        return _disk_names(self.root, path) or []

    def where(self, path: str, line: int) -> Provenance:
        """Line ``line`` of the file on disk: at its committed line number when the edit left
        it alone, else marked uncommitted (at its line on disk)."""
        if not self.is_uncommitted(path):
            return Provenance(self.repository.web_url, self.sha, path, line)
        committed = self._line_map(path).get(line)
        if committed is None:
            return Provenance(self.repository.web_url, self.sha, path, line, True)
        return Provenance(self.repository.web_url, self.sha, path, committed)

    def _line_map(self, path: str) -> dict[int, int]:
        data = _disk_bytes(self.root, path) or b""
        key = (path, git_blob_id(data))  # the bytes on disk now (`fix --in-place` rewrites the spec)
        if key not in self._line_maps:
            committed = []
            if self.committed_id(path) is not None:  # a plain snapshot at HEAD: its reads are not ours
                committed = Snapshot(self.repository, self.at, self.ref).read(path).splitlines()
            disk = data.decode("utf-8", errors="replace").splitlines()
            matcher = difflib.SequenceMatcher(None, committed, disk, autojunk=False)
            self._line_maps[key] = {b + k + 1: a + k + 1 for a, b, size in matcher.get_matching_blocks()
                                    for k in range(size)}
        return self._line_maps[key]

    def uncommitted_reads(self) -> tuple[str, ...]:
        """The files read so far that differ from HEAD's commit, sorted."""
        return tuple(sorted(p for p in self.reads if not p.endswith("/") and self.is_uncommitted(p)))

    def info(self) -> SourceInfo:
        return replace(super().info(), uncommitted=self.uncommitted_reads())


def resolve_ref(repository: Repository, ref: str) -> Snapshot:
    """``ref`` in ``repository``: ``WORKTREE`` is HEAD's commit with every file read from the
    work tree on disk; anything else a commit (:meth:`Repository.resolve`)."""
    return WorkTreeSnapshot.of(repository) if ref == WORKTREE else repository.resolve(ref)


def relink(data: dict, snapshots: Iterable[Snapshot]) -> dict:
    """An extraction's JSON with no ``uncommitted`` mark on a line of a file that is committed
    as read (a cached extraction is reused whenever the ids read match, and a file's id is its
    blob's once the edit is committed). The lines of a file that still differs keep their
    marks: its id pairs the bytes on disk with the committed blob, which fix every line's link."""
    by_repo = {snap.repository.web_url: snap for snap in snapshots}

    def mark(p: dict) -> dict:
        snap = by_repo.get(p["repo"])
        if isinstance(snap, WorkTreeSnapshot) and p["commit"] == snap.sha and snap.is_uncommitted(p["path"]):
            return p
        return {k: v for k, v in p.items() if k != "uncommitted"}

    facts = {key: {**fact, "provenance": [mark(p) for p in fact.get("provenance", [])]}
             for key, fact in data.get("facts", {}).items()}
    findings = [{**f, "provenance": [mark(p) for p in f.get("provenance", [])]} for f in data.get("findings", [])]
    return {**data, "facts": facts, "findings": findings}


def refresh_sources(model: dict, snapshots: Mapping[str, Snapshot]) -> dict:
    """A report model whose sources list what each work tree read differs in, now that every
    extraction of the scope has run (an extractor names its sources before it reads)."""
    infos = {side: snap.info().to_json() for side, snap in snapshots.items()}
    for source in model.get("sources", []):
        info = infos.get(source.get("name"))
        if info is not None:
            source.pop("uncommitted", None)
            source.update(info)
    for part in ("brax", "slm"):
        sources = (model.get(part) or {}).get("sources", {})
        for side in sources:
            if side in infos:
                sources[side] = infos[side]
    return model


def head_differs(snapshot: Snapshot, flag: str) -> str | None:
    """One line when ``snapshot`` is ``HEAD`` of a checkout whose files read differ on disk."""
    if snapshot.ref != "HEAD" or isinstance(snapshot, WorkTreeSnapshot):
        return None
    root = work_tree_root(snapshot.repository)
    if root is None or snapshot.repository.head_sha() != snapshot.sha:
        return None
    differ = []
    for path, committed in sorted(snapshot.reads.items()):
        if path.endswith("/"):
            continue
        data = _disk_bytes(root, path)
        if (None if data is None else git_blob_id(data)) != committed:
            differ.append(path)
    if not differ:
        return None
    shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
    return (f"{snapshot.side}: read HEAD ({snapshot.sha[:12]}), but {len(differ)} file(s) read differ in the work "
            f"tree ({shown}); {flag} WORKTREE reads them as on disk")
