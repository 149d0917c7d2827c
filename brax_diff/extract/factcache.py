"""An on-disk cache of extraction results, keyed by the exact bytes the extraction read.

An extraction is a pure function of (extractor code, scope, the blobs it read). So a
result is stored under a hash of

    recipe  = extractor name + version (a fingerprint of its code) + scope
    reads   = {side: {path: blob id}}  for every path the extraction read

and is valid for any commits where those paths hold those blobs. To look a result up
before extracting we must guess which paths would be read: the cache keeps, per recipe,
the *path sets* earlier extractions read, and tries each one (the blob ids of a path set
at the wanted commits give a key). A hit is sound: the same code reading the same bytes
reads the same paths and returns the same facts.

Layout under ``<root>/facts/v3/<recipe hash>/``::

    pathsets.json      # [{side: [paths...]}, ...] most recent first
    <reads hash>.json  # {"reads", "commits", "repos", "extraction" | "error"}

and, per commit an extraction read, what that commit's tree gives each path read and the
commit's date, in ``<root>/facts/v3/commits/<sha>.json`` (``{"date", "ids"}``): both are
fixed by the sha, so a rerun at that commit looks its path sets up without reading a tree
(or importing GitPython).

Every file is written atomically and sealed (:func:`sealed`: its JSON with a digest of it); an
unreadable file, or one whose digest does not match (a flipped bit that is still JSON), is a
miss, never an error or a wrong value.
Location: ``Settings.cache_dir``, else $BRAX_DIFF_CACHE_DIR, else $XDG_CACHE_HOME/brax-diff
(``~/.cache/brax-diff``).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import BraxDiffError
from ..safety.escape import one_line
from ..safety.io import read_text, sealed, unsealed, write_atomic
from ..sources.repository import cache_dir as default_cache_dir

# Bump when the entry layout changes: old entries are then simply never read.
LAYOUT_VERSION = "v3"  # v3: sealed entries; v2: keys hash compact JSON (v1 hashed the indented form)
# Path sets remembered per recipe; a recipe reads a handful of distinct sets over history.
MAX_PATHSETS = 64

Reads = dict[str, dict[str, "str | None"]]  # side -> path -> blob/tree id (None: missing)
PathSet = dict[str, list[str]]  # side -> sorted paths


def cache_root(configured: str | None = None) -> Path:
    """``configured`` (Settings.cache_dir) wins; else the environment / XDG default."""
    return Path(configured).expanduser() if configured else default_cache_dir()


def _digest(data: Any, length: int = 32) -> str:
    # Compact separators: json's C encoder (the indented form is encoded in Python, and a warm
    # report hashes 120 keys, some of a few hundred paths).
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


@dataclass(frozen=True)
class CachedResult:
    """One stored extraction: the facts JSON (or the one-line error) and where it was made."""

    reads: Reads
    commits: dict[str, str]  # side -> commit sha the result was extracted at
    repos: dict[str, str]  # side -> repository web URL at extraction time
    extraction: dict | None  # Extraction.to_json(), None when the extraction failed
    error: str | None

    def to_json(self) -> dict:
        return {"reads": self.reads, "commits": self.commits, "repos": self.repos,
                "extraction": self.extraction, "error": self.error}

    @classmethod
    def from_json(cls, data: Any) -> "CachedResult | None":
        """The stored result; None when ``data`` does not have the entry layout."""
        def str_map(value: Any, nullable: bool = False) -> bool:
            return isinstance(value, dict) and all(
                isinstance(k, str) and (isinstance(v, str) or (nullable and v is None)) for k, v in value.items())

        if not isinstance(data, dict):
            return None
        reads, extraction, error = data.get("reads"), data.get("extraction"), data.get("error")
        if not (isinstance(reads, dict) and all(isinstance(side, str) and str_map(paths, nullable=True)
                                                for side, paths in reads.items())
                and str_map(data.get("commits")) and str_map(data.get("repos"))
                and (extraction is None or isinstance(extraction, dict))
                and (error is None or isinstance(error, str))):
            return None
        return cls(reads=reads, commits=data["commits"], repos=data["repos"], extraction=extraction, error=error)


class FactCache:
    """Extraction results on disk; ``hits``/``misses`` count this process's lookups."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root) / "facts" / LAYOUT_VERSION
        self.hits = 0
        self.misses = 0
        self._pathsets: dict[str, list[PathSet]] = {}
        self._commits: dict[str, tuple[str | None, dict[str, str | None]]] = {}
        self.disabled = False  # set when a write failed
        # In a forked child (brax_diff.extract.parallel): commit answers learnt, kept for the parent to
        # write, since several processes may learn about one commit.
        self.pending_commits: dict[str, dict] | None = None

    @staticmethod
    def recipe_key(name: str, version: str, scope: Mapping[str, Any]) -> str:
        return _digest({"name": name, "version": version, "scope": dict(scope)}, 24)

    @staticmethod
    def reads_key(reads: Reads) -> str:
        return _digest({side: dict(sorted(paths.items())) for side, paths in sorted(reads.items())})

    def _dir(self, recipe: str) -> Path:
        return self.root / recipe

    def _load_json(self, path: Path) -> Any:
        """The entry's document; None (a miss) when unreadable, not JSON or its digest differs
        (:func:`~brax_diff.safety.io.unsealed`). Plain ``json.loads``:
        the entries are this tool's own output, and the C parser's bounds (recursion, 4,300-digit
        integers) make a damaged one a miss; the input files' nesting regex and integer hook took
        a tenth of a warm report, which reads every entry it is made from for its key."""
        if not path.is_file():
            return None
        try:
            return unsealed(json.loads(read_text(path, "fact cache entry")))
        except (BraxDiffError, ValueError, RecursionError):  # unreadable, corrupt or past a limit: a miss
            return None

    def pathsets(self, recipe: str) -> list[PathSet]:
        """Path sets earlier extractions of this recipe read, most recent first."""
        if recipe not in self._pathsets:
            found = self._load_json(self._dir(recipe) / "pathsets.json")
            self._pathsets[recipe] = [p for p in found if isinstance(p, dict)] if isinstance(found, list) else []
        return self._pathsets[recipe]

    def forget_pathsets(self) -> None:
        """Read the path sets from disk again (another process stored entries)."""
        self._pathsets.clear()

    def lookup(self, recipe: str, ids_at: Callable[[str, list[str]], dict[str, str | None]],
               preferred: PathSet | None = None, *, count: bool = True) -> CachedResult | None:
        """The stored result valid at the commits ``ids_at(side, paths)`` reads ids from.

        ``preferred`` (the path set the previous extraction read) is tried first. ``count=False``:
        not a hit or miss of its own (an answer this run's prefetch stored, asked again).
        """
        candidates = ([preferred] if preferred else []) + [p for p in self.pathsets(recipe) if p != preferred]
        for pathset in candidates:
            reads = {side: ids_at(side, paths) for side, paths in pathset.items()}
            result = CachedResult.from_json(self._load_json(self._dir(recipe) / f"{self.reads_key(reads)}.json"))
            if result is not None and result.reads == reads:  # guards against a (theoretical) hash collision
                self.hits += count
                return result
        self.misses += count
        return None

    def _commit_file(self, sha: str) -> Path:
        return self.root / "commits" / f"{sha}.json"

    def commit_answers(self, sha: str) -> tuple[str | None, dict[str, str | None]]:
        """(date, path -> object id) known at commit ``sha``; (None, {}) when nothing is."""
        if sha not in self._commits:
            found = self._load_json(self._commit_file(sha)) if re.fullmatch(r"[0-9a-f]{40,64}", sha) else None
            ids = found.get("ids") if isinstance(found, dict) else None
            date = found.get("date") if isinstance(found, dict) else None
            valid = isinstance(ids, dict) and all(isinstance(k, str) and (v is None or isinstance(v, str))
                                                  for k, v in ids.items())
            self._commits[sha] = (date if isinstance(date, str) and valid else None, dict(ids) if valid else {})
        return self._commits[sha]

    def remember_commit(self, sha: str, date: str, ids: Mapping[str, str | None]) -> None:
        """Add ``ids`` (each the object id the tree of ``sha`` gives the path) to what is known."""
        if self.disabled:
            return
        _, known = self.commit_answers(sha)
        if all(known.get(path, "?") == object_id for path, object_id in ids.items()):
            return
        merged = {**known, **ids}
        self._commits[sha] = (date, merged)
        if self.pending_commits is not None:
            self.pending_commits[sha] = {"date": date, "ids": merged}
            return
        try:
            write_atomic(self._commit_file(sha), sealed({"date": date, "ids": dict(sorted(merged.items()))}),
                         durable=False)
        except BraxDiffError as exc:
            self.disabled = True
            print(f"warning: fact cache not written ({one_line(exc)}); continuing without it", file=sys.stderr)

    def store(self, recipe: str, result: CachedResult) -> None:
        """Keep ``result``. The cache only saves time: a write that fails (a full disk, a
        file in the way) is one warning, and this process stops writing the cache."""
        if self.disabled:
            return
        directory = self._dir(recipe)
        pathset = {side: sorted(paths) for side, paths in sorted(result.reads.items())}
        known = self.pathsets(recipe)
        try:
            write_atomic(directory / f"{self.reads_key(result.reads)}.json", sealed(result.to_json()),
                         durable=False)
            if pathset in known and known[0] == pathset:
                return
            updated = [pathset] + [p for p in known if p != pathset]
            self._pathsets[recipe] = updated[:MAX_PATHSETS]
            write_atomic(directory / "pathsets.json", sealed(self._pathsets[recipe]), durable=False)
        except BraxDiffError as exc:
            self.disabled = True
            print(f"warning: fact cache not written ({one_line(exc)}); continuing without it", file=sys.stderr)


# What the cache keys and reuse depend on, here rather than in history (which `report`,
# answered from the cache, need not import).

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # brax_diff/


def shipped_version(extra: str = "") -> str:
    """Fingerprint of everything the shipped extractors' output depends on: the ``brax_diff.extractors``
    package, the fact model and vocabulary, and the shipped data files (mappings)."""
    digest = hashlib.sha256(extra.encode())
    from .. import EXTRACTORS_DIR

    files = sorted(p for p in Path(EXTRACTORS_DIR).rglob("*.py") if "__pycache__" not in p.parts)
    files += [_PACKAGE_ROOT / name for name in ("facts/model.py", "facts/vocabulary.py", "sources/repository.py")]
    files += sorted((_PACKAGE_ROOT / "data").glob("*"))
    for path in files:
        if path.is_file():
            digest.update(path.relative_to(path.parents[1]).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def rebase_provenance(data: dict, moves: Mapping[tuple[str, str], tuple[str, str]]) -> dict:
    """Point a cached extraction's provenance at the commits it is reused for.

    The blobs read are identical, so every line number still holds; only (repo, commit) moves.
    """
    def move(p: dict) -> dict:
        repo, commit = moves.get((p["repo"], p["commit"]), (p["repo"], p["commit"]))
        return {**p, "repo": repo, "commit": commit}

    facts = {key: {**fact, "provenance": [move(p) for p in fact.get("provenance", [])]}
             for key, fact in data.get("facts", {}).items()}
    findings = [{**f, "provenance": [move(p) for p in f.get("provenance", [])]} for f in data.get("findings", [])]
    return {**data, "facts": facts, "findings": findings}
