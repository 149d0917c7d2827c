"""Extractors answered from the fact cache when the blobs they read have not changed.

`report` extracts every registered environment of a family; most runs read the same blobs
as the last one. :class:`CachedExtractor` wraps an extractor and answers its scope methods
(``env``, ``family``, ``defaults``, ``variant``) from :class:`~brax_diff.extract.factcache.FactCache`,
keyed by the blob ids the method read (see :attr:`Snapshot.reads`), so a rerun parses
nothing. Methods that answer plain JSON (``environments``, ``family_of``, ``variant_for``)
can be cached the same way. Everything else passes through to the wrapped extractor.

Given a ``factory`` instead of an extractor, the extractor is built on the first miss: a
run answered wholly from the cache never imports the extractors (libcst alone takes a
second to import) nor reads their files.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Iterable, Mapping

from ..facts.model import Extraction, dumps
from .factcache import CachedResult, FactCache, rebase_provenance, shipped_version
from ..sources.repository import Snapshot
from ..sources.worktree import relink


def recall(cache: FactCache, snapshot: Snapshot) -> None:
    """Give ``snapshot`` what the cache knows at its commit (path ids, the date), so that
    looking paths up there reads no tree and imports no GitPython. Work trees and overlays
    answer from other bytes than the commit's, so they are left alone."""
    if type(snapshot) is not Snapshot:
        return
    date, ids = cache.commit_answers(snapshot.sha)
    snapshot.repository.object_ids.remember(snapshot.sha, ids)
    if date is not None and snapshot.known_date is None:
        snapshot.known_date = date


class CachedExtractor:
    """``inner``'s methods named in ``methods`` (answering an Extraction) and ``values``
    (answering JSON: a list of names, a name) go through the cache; the rest pass through.

    ``inner`` may be None with a ``factory`` that builds it when a call misses the cache.
    ``identity`` names what else the answers depend on (the spec path, ``--set`` values,
    the mapping): it is part of the cache key with the extractors' code fingerprint.
    """

    def __init__(self, inner: Any, name: str, snapshots: Mapping[str, Snapshot], cache: FactCache,
                 methods: tuple[str, ...], identity: Any = None, *, values: tuple[str, ...] = (),
                 factory: Callable[[], Any] | None = None) -> None:
        if inner is None and factory is None:
            raise TypeError("CachedExtractor needs an extractor or a factory")
        self._made = inner
        self._factory = factory
        self._name = name
        self._snapshots = dict(snapshots)
        self._cache = cache
        self._methods = frozenset(methods)
        self._values = frozenset(values)
        self._version = shipped_version(dumps(identity))
        self._answers: dict[tuple, Any] = {}  # value answers of this process, by (method, args)
        self._hits: dict[str, CachedResult] = {}  # stored extractions found, by recipe (see `answers`)
        for snapshot in self._snapshots.values():  # once: the snapshots are fixed, their commits' answers too
            recall(cache, snapshot)

    @property
    def _inner(self) -> Any:
        if self._made is None:
            self._made = self._factory()
        return self._made

    def __getattr__(self, attr: str) -> Any:
        if attr in self._methods:
            return functools.partial(self._call, attr)
        if attr in self._values:
            return functools.partial(self._value, attr)
        return getattr(self._inner, attr)

    def _recipe(self, method: str, args: tuple) -> str:
        return FactCache.recipe_key(f"{self._name}.{method}", self._version, {"args": list(args)})

    def _stored(self, recipe: str) -> CachedResult | None:
        """The cache's extraction for ``recipe``, looked up once per process (the snapshots
        are fixed, so is the answer)."""
        if recipe not in self._hits:
            hit = self._cache.lookup(recipe, self._ids_now)
            if hit is None or hit.extraction is None:
                return None
            self._hits[recipe] = hit
        return self._hits[recipe]

    def answers(self, method: str, *args: Any) -> bool:
        """Whether the cache holds ``method(*args)``'s extraction (kept for the call itself)."""
        return self._stored(self._recipe(method, args)) is not None

    def answer_identity(self, method: str, *args: Any) -> dict | None:
        """What the stored answer to ``method(*args)`` is made from: its recipe (this
        extractor's code, identity and scope), the blob ids it read and where it was made
        (see :mod:`brax_diff.report.cache`); None when the cache does not hold it. The
        snapshots now depend on those blobs, as if the call had been made."""
        recipe = self._recipe(method, args)
        hit = self._stored(recipe)
        if hit is None:
            return None
        self._depend_on(hit)
        return {"recipe": recipe, "reads": FactCache.reads_key(hit.reads), "commits": hit.commits, "repos": hit.repos}

    def _call(self, method: str, *args: Any) -> Extraction:
        recipe = self._recipe(method, args)
        hit = self._stored(recipe)
        reused = self._reuse(hit) if hit is not None else None
        if reused is not None:
            self._depend_on(hit)
            return reused
        result = getattr(self._inner, method)(*args)
        self._hits[recipe] = self._store(recipe, result.to_json())
        return result

    def _value(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A JSON answer (``environments``: a list of names); an error is never cached."""
        asked = (method, args, tuple(sorted(kwargs.items())))
        if asked in self._answers:  # `report` asks family_of once per scope and env
            return copy.deepcopy(self._answers[asked])
        recipe = FactCache.recipe_key(f"{self._name}.{method}", self._version,
                                      {"args": list(args), "kwargs": dict(sorted(kwargs.items()))})
        hit = self._cache.lookup(recipe, self._ids_now)
        if hit is not None and isinstance(hit.extraction, dict) and set(hit.extraction) == {"value"}:
            self._depend_on(hit)
            answer = hit.extraction["value"]
        else:
            answer = getattr(self._inner, method)(*args, **kwargs)
            self._store(recipe, {"value": answer})
        self._answers[asked] = answer
        return copy.deepcopy(answer)

    def _depend_on(self, hit: CachedResult) -> None:
        for side, paths in hit.reads.items():  # the answer depends on them as if read now
            if side in self._snapshots:
                for path, blob in paths.items():
                    self._snapshots[side].reads.setdefault(path, blob)

    def _store(self, recipe: str, answer: dict) -> CachedResult:
        # The reads so far are a superset of what this call depended on (the extractor
        # parses each file once and shares it between calls): a safe key.
        reads = {side: dict(snap.reads) for side, snap in self._snapshots.items() if snap.reads}
        for side, snap in self._snapshots.items():
            if type(snap) is Snapshot and snap.reads:  # ids at its commit, for the next run's lookups
                self._cache.remember_commit(snap.sha, snap.date, snap.reads)
        stored = CachedResult(reads=reads, commits={side: snap.sha for side, snap in self._snapshots.items()},
                              repos={side: snap.repository.web_url for side, snap in self._snapshots.items()},
                              extraction=answer, error=None)
        self._cache.store(recipe, stored)
        return stored

    def _ids_now(self, side: str, paths: list[str]) -> dict[str, str | None]:
        snapshot = self._snapshots[side]
        return {path: snapshot.object_id(path) for path in paths}

    def _reuse(self, hit: CachedResult) -> Extraction | None:
        """The stored extraction, moved to the commits of this run (same blobs, same lines);
        None when the stored extraction is malformed (the cache is then bypassed, not trusted)."""
        moves = {(hit.repos[side], hit.commits[side]): (snap.repository.web_url, snap.sha)
                 for side, snap in self._snapshots.items() if side in hit.commits and side in hit.repos}
        try:
            extraction = Extraction.from_json(relink(rebase_provenance(hit.extraction, moves),
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


def brax_extractor(snapshots: Mapping[str, Snapshot], cache: FactCache | None) -> Any:
    """Brax's extractor over ``snapshots`` (``brax``, optional ``playground``), answered from
    ``cache`` when given; extractors.brax (and libcst) is imported on the first miss only."""
    def make() -> Any:
        from brax_diff.extractors.brax.extractor import BraxExtractor

        return BraxExtractor(snapshots["brax"], snapshots.get("playground"))

    if cache is None:
        return make()
    sides = {side: snap for side, snap in snapshots.items() if side in ("brax", "playground") and snap is not None}
    return CachedExtractor(None, "brax", sides, cache, BRAX_METHODS, values=BRAX_VALUES, factory=make)


def prefetch(calls: list[tuple[Any, str, Any]], cache: FactCache, snapshots: Iterable[Snapshot]) -> list[str]:
    """Extract, over forked processes (:mod:`brax_diff.extract.parallel`), every call of ``calls``
    (extractor, method, argument) the cache cannot answer, so the calls themselves then find
    their answers in the cache. An extractor's first call parses what its other calls share
    (SLM-Lab's code, Brax's ``train()``): with the calls of several extractors missing, each
    process takes whole extractors (the first one's here, as `report` orders them SLM-Lab's,
    the others' in a child), so each parses only its own; with one extractor's, its first call
    runs here and the processes share the rest
    from a queue, with what it parsed. A run the cache answers forks nothing. Returns the
    lines the other processes printed."""
    from .parallel import processes, run_groups, run_queue

    if processes() < 2:
        return []
    missing = [(e, m, a) for e, m, a in calls if not (isinstance(e, CachedExtractor) and e.answers(m, *a))]
    if len(missing) < 3:
        return []  # too little to split
    groups: dict[int, list] = {}  # extractor -> its missing calls, in order
    for extractor, method, argument in missing:
        groups.setdefault(id(extractor), []).append(functools.partial(getattr(extractor, method), *argument))
    repositories = list({id(s.repository): s.repository for s in snapshots if s is not None}.values())
    if len(groups) > 1:
        return run_groups(list(groups.values()), cache, repositories)
    first, *rest = next(iter(groups.values()))
    first()
    return run_queue(rest, cache, repositories)


# What `report` and `extract brax` ask Brax's extractor, through the cache.
BRAX_METHODS = ("defaults", "family", "env")
BRAX_VALUES = ("families", "environments", "family_of")
