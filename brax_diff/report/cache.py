"""Rendered reports kept by a digest of everything they are made from, so a rerun whose
inputs have not moved classifies and renders nothing (and imports neither Jinja nor the rule
table's YAML).

A scope's report files are a pure function of

* brax-diff's own code and shipped files (every file of the package, the templates, the
  extractors): :func:`code_digest`;
* the rule table's files (the shipped one is in the package; a user's is read here) and its
  origin as the report names it;
* the scope and what shapes it: the variant and spec asked for;
* each extraction the report reads, fixed by its fact-cache entry (recipe: the extractor's
  code, scope and identity, i.e. mapping and ``--set`` values; the blob ids it read; the
  commits it was made at) and the snapshots its provenance is moved to (repository, commit,
  ref, date): :meth:`brax_diff.extract.cached.CachedExtractor.answer_identity`;
* the report it replaces (its "changes since" section) and the verification it shows.

:func:`report_key` is the digest of all of them. A report reading a work tree is never kept
(its bytes are not a commit's), nor one whose extractions the fact cache could not all
answer (the run that extracts them stores the report for the next). Entries live under
``<fact cache root>/reports/v2/``; an unreadable entry is a miss, a write that fails only
slower.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import BraxDiffError
from ..safety.io import sealed, unsealed
from ..safety.io import read_bytes, read_text, write_atomic

LAYOUT_VERSION = "v2"  # v2: sealed entries (safety.io.sealed)
_PACKAGE = Path(__file__).resolve().parent.parent  # brax_diff/


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """Digest of every file the report is computed and rendered by: the brax_diff package
    (modules, shipped rules and mapping, installed templates), the checkout's templates/ and
    the extractors (compiled bytecode left out: it is the sources')."""
    digest = hashlib.sha256()
    from .. import EXTRACTORS_DIR

    roots = [_PACKAGE, _PACKAGE.parent / "templates"]
    if Path(EXTRACTORS_DIR).parent != _PACKAGE:  # a source checkout: the top-level folder
        roots.append(Path(EXTRACTORS_DIR))
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(root.parent)).encode())
            digest.update(b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def file_digest(path: str | Path | None, what: str) -> str | None:
    """Digest of a user's file (rules, the previous report), read as every input file is
    (a FIFO or /dev/zero is one error line); None for none."""
    if path is None:
        return None
    return hashlib.sha256(read_bytes(path, what)).hexdigest()


def report_key(inputs: dict[str, Any]) -> str:
    """The key of a report made from ``inputs`` (JSON data naming every input, see above)."""
    text = json.dumps({"code": code_digest(), "inputs": inputs}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scope_key(scope: Any, calls: list, snapshots: dict, *, variant: str | None, spec: str, rules: str | None,
              rules_origin: str, verdicts: dict | None, previous_path: Path | None,
              history: str | None = None) -> str | None:
    """The key of a scope's report (a :class:`~brax_diff.facts.scope.Scope`) made from ``calls``
    (:func:`brax_diff.facts.scope.extraction_calls`, through the fact cache) at ``snapshots``, with
    the flags that shape it; None when the report cannot be kept: it reads a work tree, or
    the fact cache lacks one of its extractions."""
    from ..facts.model import dumps
    from ..sources.repository import Snapshot

    if any(type(snapshot) is not Snapshot for snapshot in snapshots.values()):
        return None
    answers = []
    for extractor, method, arguments in calls:
        identity = extractor.answer_identity(method, *arguments)
        if identity is None:
            return None
        answers.append([method, *arguments, identity])
    try:
        previous = (file_digest(previous_path, "previous report")
                    if previous_path is not None and previous_path.exists() else None)
        rules_file = file_digest(rules, "rules file")
    except OSError:
        return None  # the run that reads it says why
    return report_key({
        "scope": [scope.family, scope.env], "variant": variant, "spec": spec, "answers": answers,
        "snapshots": {side: [s.repository.web_url, s.sha, s.ref, s.date] for side, s in sorted(snapshots.items())},
        "rules": [rules_origin, rules_file], "previous": previous,
        "verification": None if verdicts is None else dumps(verdicts),
        "history": history,  # --history-ref's commit (the spec's history read for each recommendation)
    })


class ReportCache:
    """Rendered reports (Markdown and JSON) by :func:`report_key`."""

    def __init__(self, fact_cache_root: str | Path) -> None:
        self.root = Path(fact_cache_root) / "reports" / LAYOUT_VERSION
        self.disabled = False

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[str, str] | None:
        """(Markdown, JSON) of the report kept under ``key``; None when there is none."""
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            entry = unsealed(json.loads(read_text(path, "report cache entry")))
        except (BraxDiffError, ValueError, RecursionError):
            return None
        if not (isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("md"), str)
                and isinstance(entry.get("json"), str)):
            return None
        return entry["md"], entry["json"]

    def put(self, key: str, markdown: str, json_text: str) -> None:
        if self.disabled:
            return
        entry = sealed({"key": key, "md": markdown, "json": json_text})
        try:
            write_atomic(self._path(key), entry, durable=False)
        except BraxDiffError:
            self.disabled = True  # the fact cache says so already, where it matters
