"""Extractors answered from the fact cache when the blobs they read have not changed.

`report` extracts every registered environment of a family; most runs read the same blobs
as the last one. :class:`CachedExtractor` wraps an extractor and answers its scope methods
(``env``, ``family``, ``defaults``, ``variant``) from :class:`~brax_diff.factcache.FactCache`,
keyed by the blob ids the method read (see :attr:`Snapshot.reads`), so a rerun parses
nothing. Everything else passes through to the wrapped extractor.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from .facts import Extraction, dumps
from .factcache import CachedResult, FactCache
from .history import _rebase_provenance, shipped_version
from .sources import Snapshot
from .worktree import relink


class CachedExtractor:
    """``inner``'s methods named in ``methods`` go through the cache; the rest pass through.

    ``identity`` names what else the answers depend on (the spec path, ``--set`` values,
    the mapping): it is part of the cache key with the extractors' code fingerprint.
    """

    def __init__(self, inner: Any, name: str, snapshots: Mapping[str, Snapshot], cache: FactCache,
                 methods: tuple[str, ...], identity: Any = None) -> None:
        self._inner = inner
        self._name = name
        self._snapshots = dict(snapshots)
        self._cache = cache
        self._methods = frozenset(methods)
        self._version = shipped_version(dumps(identity))

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        return functools.partial(self._call, attr) if attr in self._methods else value

    def _call(self, method: str, *args: Any) -> Extraction:
        recipe = FactCache.recipe_key(f"{self._name}.{method}", self._version, {"args": list(args)})
        hit = self._cache.lookup(recipe, self._ids_now)
        reused = self._reuse(hit) if hit is not None and hit.extraction is not None else None
        if reused is not None:
            for side, paths in hit.reads.items():  # the answer depends on them as if read now
                if side in self._snapshots:
                    for path, blob in paths.items():
                        self._snapshots[side].reads.setdefault(path, blob)
            return reused
        result = getattr(self._inner, method)(*args)
        # The reads so far are a superset of what this call depended on (the extractor
        # parses each file once and shares it between calls): a safe key.
        reads = {side: dict(snap.reads) for side, snap in self._snapshots.items() if snap.reads}
        self._cache.store(recipe, CachedResult(
            reads=reads, commits={side: snap.sha for side, snap in self._snapshots.items()},
            repos={side: snap.repository.web_url for side, snap in self._snapshots.items()},
            extraction=result.to_json(), error=None))
        return result

    def _ids_now(self, side: str, paths: list[str]) -> dict[str, str | None]:
        snapshot = self._snapshots[side]
        return {path: snapshot.object_id(path) for path in paths}

    def _reuse(self, hit: CachedResult) -> Extraction | None:
        """The stored extraction, moved to the commits of this run (same blobs, same lines);
        None when the stored extraction is malformed (the cache is then bypassed, not trusted)."""
        moves = {(hit.repos[side], hit.commits[side]): (snap.repository.web_url, snap.sha)
                 for side, snap in self._snapshots.items() if side in hit.commits and side in hit.repos}
        try:
            extraction = Extraction.from_json(relink(_rebase_provenance(hit.extraction, moves),
                                                     self._snapshots.values()))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        extraction.sources = {side: self._snapshots[side].info() for side in extraction.sources
                              if side in self._snapshots}
        return extraction

    @property
    def hits(self) -> int:
        return self._cache.hits

    @property
    def misses(self) -> int:
        return self._cache.misses
