"""History: every commit in a range that changes a resolved canonical fact.

The engine is generic. A :class:`Recipe` says how to turn snapshots of one or more
sides (``{"brax": Snapshot, "playground": Snapshot}``) into an :class:`Extraction`; the
engine walks one side's first-parent history, holding the other sides at fixed commits,
and reports each commit whose extraction differs from the previous one in a fact VALUE
(a key changing, appearing or disappearing). Provenance is not compared, so a commit that
only moves lines or reformats is not listed.

Cost follows the commits that touch the files read, not the length of history:

1. every extraction records what it read (``Snapshot.reads``: path -> blob id; directory
   listings are recorded here too, as ``dir/`` -> tree id);
2. ``git log --first-parent -- <paths read>`` lists the only commits that can matter;
3. a listed commit where every read path still has the same blob id is skipped unparsed;
4. an extraction that does run is cached on disk by the blob ids it read
   (:mod:`brax_diff.extract.factcache`), so a rerun parses nothing.

After each extraction the read set is re-derived (a file added, renamed or newly
imported changes it) and the candidate list is re-queried when its paths changed.
"""

from __future__ import annotations

import importlib
import json
import importlib.util
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from ..errors import BraxDiffError, SourceError
from ..facts.model import Extraction, Fact, SourceInfo, dumps
from ..extract.factcache import CachedResult, FactCache, rebase_provenance, shipped_version  # noqa: F401 (re-exported)
from ..sources.repository import ObjectIds, Repository, Snapshot, open_all, run_git  # noqa: F401 (ObjectIds: re-exported)
from ..sources.worktree import resolve_ref
from ..safety.escape import md_code, md_prose, one_line

ExtractFn = Callable[[Mapping[str, Snapshot]], Extraction]
SHALLOW_NOTE = ("this clone is shallow and its history stops at this commit: these facts did not appear here, "
                "the commits before it are missing (git fetch --unshallow)")


# ---------------------------------------------------------------------------------------
# What to extract


@dataclass(frozen=True)
class Recipe:
    """How to extract one scope's facts from snapshots of ``sides``.

    ``name`` and ``version`` identify the extractor in the cache: ``version`` must change
    whenever the extractor's code does (see :func:`shipped_version`). ``scope`` is JSON-native
    and labels the output (``{"env": "AlohaHandOver"}``).
    """

    name: str
    version: str
    scope: dict[str, Any]
    sides: tuple[str, ...]
    extract: ExtractFn = field(compare=False, repr=False)

    @property
    def label(self) -> str:
        return scope_label(self.scope)


def scope_label(scope: Mapping[str, Any]) -> str:
    """``{"env": "X", "family": None}`` -> ``env=X``."""
    return ", ".join(f"{k}={v}" for k, v in sorted(scope.items()) if v is not None) or "defaults"


def object_id(commit, path: str) -> str | None:
    """Blob id of ``path`` at ``commit`` (tree id for ``dir/``); None when absent."""
    is_dir = path.endswith("/")
    clean = path.strip("/")
    try:
        obj = commit.tree / clean if clean else commit.tree
    except KeyError:
        return None
    wanted = "tree" if is_dir else "blob"
    return obj.hexsha if obj.type == wanted else None


# ---------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    date: str  # committer date, ISO 8601
    subject: str
    url: str  # the commit on the web

    def to_json(self) -> dict:
        return {"sha": self.sha, "date": self.date, "subject": self.subject, "url": self.url}


@dataclass(frozen=True)
class Change:
    """One key between two consecutive extractions."""

    key: str
    kind: str  # "changed" | "appeared" | "disappeared"
    old: Fact | None
    new: Fact | None

    def to_json(self) -> dict:
        def side(fact: Fact | None) -> dict | None:
            if fact is None:
                return None
            return {"value": fact.value, "links": [p.url for p in fact.provenance]}

        return {"key": self.key, "kind": self.kind, "old": side(self.old), "new": side(self.new)}


@dataclass(frozen=True)
class Entry:
    """A commit and the fact changes it made in one scope."""

    commit: CommitInfo
    scope: dict[str, Any]
    changes: tuple[Change, ...]
    note: str | None = None  # the extraction started or stopped failing, and why

    def to_json(self) -> dict:
        out = {"scope": dict(sorted(self.scope.items())), "changes": [c.to_json() for c in self.changes]}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Walk:
    """One side's range walked for some recipes, the other sides held fixed."""

    side: str
    range: str
    start: str | None  # baseline commit (None: from the beginning of history)
    end: str
    repo: str  # web URL of the walked side
    held: dict[str, SourceInfo]
    scopes: list[dict[str, Any]]
    commits: int = 0  # first-parent commits in the range
    touching: int = 0  # of those, commits git listed as touching a file read
    extractions: int = 0  # extractions needed (cached or not): touching commits whose blobs changed
    entries: list[Entry] = field(default_factory=list)

    def grouped(self) -> list[tuple[CommitInfo, list[Entry]]]:
        """Entries grouped by commit, in the walk's (oldest first) order."""
        groups: dict[str, tuple[CommitInfo, list[Entry]]] = {}
        for entry in self.entries:
            groups.setdefault(entry.commit.sha, (entry.commit, []))[1].append(entry)
        return list(groups.values())

    def to_json(self) -> dict:
        return {
            "side": self.side,
            "range": self.range,
            "repo": self.repo,
            "start": self.start,
            "end": self.end,
            "held": {name: info.to_json() for name, info in sorted(self.held.items())},
            "scopes": [dict(sorted(s.items())) for s in self.scopes],
            "stats": {"commits": self.commits, "touching_reads": self.touching, "extractions": self.extractions},
            "commits": [
                {**commit.to_json(), "scopes": [e.to_json() for e in entries]}
                for commit, entries in self.grouped()
            ],
        }


@dataclass
class History:
    walks: list[Walk]

    def to_json(self) -> dict:
        return {"walks": [w.to_json() for w in self.walks]}


# ---------------------------------------------------------------------------------------
# Comparing two extractions


def same_value(a: Any, b: Any) -> bool:
    """Value equality where 1 == 1.0 but True != 1 (a bool flag turning into a count is a change)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def fact_changes(old: Mapping[str, Fact], new: Mapping[str, Fact]) -> list[Change]:
    """Keys whose value changed, appeared or disappeared; provenance is ignored."""
    changes = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before is None:
            changes.append(Change(key, "appeared", None, after))
        elif after is None:
            changes.append(Change(key, "disappeared", before, None))
        elif not same_value(before.value, after.value):
            changes.append(Change(key, "changed", before, after))
    return changes


@dataclass(frozen=True)
class Outcome:
    """One extraction's result at one set of commits."""

    facts: dict[str, Fact] | None  # None when the extraction failed
    error: str | None
    reads: dict[str, dict[str, str | None]]  # side -> path -> id


EMPTY = Outcome(facts=None, error=None, reads={})


def transition_note(old: Outcome, new: Outcome) -> str | None:
    if old.facts is not None and new.facts is None:
        return f"extraction fails from here: {new.error}"
    if old.facts is None and new.facts is not None and old.error:
        return f"extraction succeeds from here (before: {old.error})"
    return None


# ---------------------------------------------------------------------------------------
# Git helpers (one subprocess per query; GitPython for blob ids)


def parse_range(text: str) -> tuple[str | None, str]:
    """``A..B`` -> (A, B); a bare ``B`` -> (None, B): the whole history up to B."""
    if "..." in text:
        raise BraxDiffError(f"range {text!r}: use A..B (symmetric A...B ranges are not supported)")
    if ".." in text:
        start, end = text.split("..", 1)
        if not start or not end:
            raise BraxDiffError(f"range {text!r}: write A..B with both ends, or a bare ref for all history")
        return start, end
    if not text:
        raise BraxDiffError("empty range")
    return None, text


def _git(repo: Repository, *args: str) -> str:
    done = run_git("-C", repo.git_dir, *args, env={"GIT_LITERAL_PATHSPECS": "0"})
    if done.returncode != 0:
        message = (done.stderr.strip().splitlines() or ["git failed"])[-1]
        raise SourceError(f"{repo.side}: git {args[0]} failed in {repo.location}: {message}")
    return done.stdout


def _revs(start: str | None, end: str) -> list[str]:
    return [end, f"^{start}"] if start else [end]


def first_parent_log(repo: Repository, start: str | None, end: str) -> list[CommitInfo]:
    """Commits in ``start..end`` (or all up to ``end``), first-parent order, oldest first."""
    out = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x1f%cI%x1f%s%x1e", *_revs(start, end), "--")
    commits = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if record:
            sha, date, subject = record.split("\x1f", 2)
            commits.append(CommitInfo(sha, date, subject, f"{repo.web_url.rstrip('/')}/commit/{sha}"))
    return commits


def is_ancestor(repo: Repository, ancestor: str, descendant: str) -> bool:
    """Whether commit ``ancestor`` is reachable from ``descendant``."""
    return run_git("-C", repo.git_dir, "merge-base", "--is-ancestor", ancestor, descendant).returncode == 0


def pathspec(path: str) -> str:
    """A read-set entry as a literal pathspec from the repository's top (``dir/`` too)."""
    clean = path.strip("/")
    return f":(top,literal){clean}" if clean else ":(top)"


def touching_commits(repo: Repository, start: str | None, end: str, paths: Iterable[str]) -> list[str]:
    """First-parent commits in the range that change any of ``paths``, oldest first."""
    specs = [pathspec(p) for p in sorted(set(paths))]
    if not specs:
        return []
    out = _git(repo, "log", "--first-parent", "--reverse", "--format=%H", *_revs(start, end), "--", *specs)
    return out.split()


# ---------------------------------------------------------------------------------------
# The engine


class HistoryEngine:
    """Walks ranges for recipes. ``repos`` maps side name -> Repository."""

    def __init__(self, repos: Mapping[str, Repository], cache: FactCache | None = None,
                 step: Callable[[str], None] | None = None) -> None:
        self.repos = dict(repos)
        self.cache = cache
        self.step = step or (lambda text: None)  # what the walk is doing now (the terminal's progress line)
        self.parsed = 0  # extractions actually run (cache misses) in every process, for benchmarks
        self._touching_memo: dict[tuple, list[str]] = {}
        self._hits: dict[tuple, CachedResult] = {}  # answers the prefetch found, for the walk
        self._asked_in_vain: set[tuple] = set()  # the prefetch's misses (counted once, by it)
        self._held_sides: set[str] = set()  # the sides the walk under way holds at one commit
        self._held: dict[tuple[str, str], Snapshot] = {}  # their snapshots, by (side, sha)

    def ids(self, side: str) -> ObjectIds:
        return self.repos[side].object_ids

    # -- one extraction, through the cache ------------------------------------------------
    def _snapshots(self, commits: Mapping[str, Any]) -> dict[str, Snapshot]:
        """Snapshots to extract at: a new one for the walked side, and for each held side the
        same one throughout the walk, so that what an extractor evaluates from that side alone
        (Playground's configs) is run once and shared (brax_diff.extractors.brax.extractor). Its
        reads are then those of every extraction so far, a superset: a safe cache key."""
        snapshots = {side: Snapshot(self.repos[side], commit, commit.hexsha) for side, commit in commits.items()}
        for side, commit in commits.items():
            if side in self._held_sides:
                snapshots[side] = self._held.setdefault((side, commit.hexsha), snapshots[side])
        return snapshots

    def outcome(self, recipe: Recipe, commits: Mapping[str, Any], preferred: dict[str, list[str]] | None = None,
                *, missed: bool = False) -> Outcome:
        """The recipe's facts at ``commits`` (side -> git.Commit), from the cache when possible
        (``missed``: the cache was just asked, in vain)."""
        recipe_key = FactCache.recipe_key(recipe.name, recipe.version, recipe.scope) if self.cache else ""
        if self.cache is not None and not missed:
            hit = self._lookup(recipe_key, commits, preferred)
            if hit is not None:
                return self._from_cache(hit, commits)
        snapshots = self._snapshots(commits)
        self.parsed += 1
        try:
            extraction = recipe.extract(snapshots)
            facts, error = dict(extraction.facts), None
        except BraxDiffError as exc:
            extraction, facts, error = None, None, str(exc)
        reads = {side: dict(snap.reads) for side, snap in snapshots.items() if snap.reads}
        if self.cache is not None:
            self.cache.store(recipe_key, CachedResult(
                reads=reads,
                commits={side: c.hexsha for side, c in commits.items()},
                repos={side: self.repos[side].web_url for side in commits},
                extraction=extraction.to_json() if extraction is not None else None,
                error=error,
            ))
        return Outcome(facts, error, reads)

    def _lookup(self, recipe_key: str, commits: Mapping[str, Any], preferred: dict[str, list[str]] | None,
                keep: bool = False) -> CachedResult | None:
        """The cache's answer at ``commits``; ``keep``: remember a hit for the next call (the
        prefetch asks first, the walk then reuses the answer)."""
        asked = self._asked(recipe_key, commits)
        if asked in self._hits:
            return self._hits[asked] if keep else self._hits.pop(asked)
        hit = self.cache.lookup(recipe_key, lambda side, paths: {p: self.ids(side)(commits[side], p) for p in paths},
                                preferred, count=asked not in self._asked_in_vain)
        if hit is not None and keep:
            self._hits[asked] = hit
        return hit

    @staticmethod
    def _asked(recipe_key: str, commits: Mapping[str, Any]) -> tuple:
        return recipe_key, tuple(sorted((side, c.hexsha) for side, c in commits.items()))

    def _from_cache(self, hit: CachedResult, commits: Mapping[str, Any]) -> Outcome:
        moves = {(hit.repos[s], hit.commits[s]): (self.repos[s].web_url, commits[s].hexsha)
                 for s in hit.commits if s in commits and s in hit.repos}
        error = hit.error
        if error:
            for (_, old), (_, new) in moves.items():
                error = error.replace(old, new).replace(old[:12], new[:12])
        facts = None
        if hit.extraction is not None:
            facts = Extraction.from_json(rebase_provenance(hit.extraction, moves)).facts
        return Outcome(facts, error, hit.reads)

    # -- a walk ---------------------------------------------------------------------------
    def walk(self, recipes: list[Recipe], side: str, rev_range: str, held: Mapping[str, str]) -> Walk:
        """Every commit of ``side`` in ``rev_range`` that changes a fact of any recipe.

        ``held`` maps each other side a recipe needs to the ref it stays at.
        """
        repo = self.repos[side]
        self.step(f"{side}: listing the commits of {rev_range}")
        start_ref, end_ref = parse_range(rev_range)
        end = resolve_ref(repo, end_ref).commit
        start = resolve_ref(repo, start_ref).commit if start_ref else None
        held_commits = {}
        for recipe in recipes:
            for other in recipe.sides:
                if other != side and other not in held_commits:
                    if other not in held:
                        raise BraxDiffError(f"{recipe.name} needs a ref for {other}")
                    if held[other] is None and other == "rsl_rl":  # the release Playground pins, where it stands
                        from ..session import pinned_rsl_rl_ref

                        at = end_ref if side == "playground" else held["playground"]
                        held = {**held, other: pinned_rsl_rl_ref(resolve_ref(self.repos["playground"], at))}
                    held_commits[other] = resolve_ref(self.repos[other], held[other]).commit
        self._held_sides, self._held = set(held_commits), {}
        log = first_parent_log(repo, start.hexsha if start else None, end.hexsha)
        if not log and start is not None and start.hexsha != end.hexsha and is_ancestor(repo, end.hexsha,
                                                                                         start.hexsha):
            # A reversed range lists nothing, which reads as "nothing changed": say why instead.
            raise BraxDiffError(f"--{side} {rev_range}: the range is empty because {end_ref} is an ancestor of "
                                f"{start_ref}; did you mean {end_ref}..{start_ref}?")
        walk = Walk(side=side, range=rev_range, start=start.hexsha if start else None, end=end.hexsha,
                    repo=repo.web_url, scopes=[r.scope for r in recipes], commits=len(log),
                    held={s: SourceInfo(self.repos[s].web_url, c.hexsha, c.committed_datetime.isoformat(), held[s])
                          for s, c in sorted(held_commits.items())})
        order = {c.sha: i for i, c in enumerate(log)}
        touched: set[str] = set()
        entries: list[tuple[int, int, Entry]] = []
        for recipe_index, recipe in enumerate(recipes):
            others = {s: held_commits[s] for s in recipe.sides if s != side}
            for entry in self._walk_recipe(recipe, side, start, log, others, touched, walk):
                entries.append((order[entry.commit.sha], recipe_index, entry))
        walk.touching = len(touched)
        walk.entries = [entry for _, _, entry in sorted(entries, key=lambda t: (t[0], t[1]))]
        return walk

    def _walk_recipe(self, recipe: Recipe, side: str, start, log: list[CommitInfo], others: dict,
                     touched: set[str], walk: Walk) -> list[Entry]:
        repo = self.repos[side]
        by_sha = {c.sha: c for c in log}
        entries: list[Entry] = []
        self.step(f"{side} {walk.range}: extracting {recipe.label} at the start")
        if start is not None:
            state = self.outcome(recipe, {side: start, **others})
            last = start.hexsha
        elif log:
            first = repo.git.commit(log[0].sha)
            state = self.outcome(recipe, {side: first, **others})
            walk.extractions += 1
            touched.add(log[0].sha)
            first_entries = self._entry(recipe, log[0], EMPTY, state)
            if log[0].sha in repo.shallow_boundary:  # not where the facts began: where the clone stops
                first_entries = [replace(e, note=SHALLOW_NOTE) for e in first_entries]
            entries += first_entries
            last = log[0].sha
        else:
            return entries
        ever_worked = state.facts is not None
        requery = True
        while requery:
            requery = False
            paths = sorted(state.reads.get(side, {}))
            candidates = self._touching(repo, last, walk.end, paths)
            self._prefetch(recipe, side, [s for s in candidates if s in by_sha], state, others)
            for number, sha in enumerate(candidates, start=1):
                if sha not in by_sha:
                    continue
                self.step(f"{side} {walk.range}: {recipe.label} at {sha[:7]} "
                          f"({number} of {len(candidates)} commits touching what it reads)")
                touched.add(sha)
                commit = repo.git.commit(sha)
                current = {p: self.ids(side)(commit, p) for p in paths}
                if current == state.reads[side]:
                    continue  # e.g. a change reverted within a merge: same blobs, same facts
                new = self.outcome(recipe, {side: commit, **others},
                                   preferred={s: sorted(r) for s, r in state.reads.items()})
                walk.extractions += 1
                entries += self._entry(recipe, by_sha[sha], state, new)
                ever_worked = ever_worked or new.facts is not None
                requery = set(new.reads.get(side, {})) != set(paths)
                state, last = new, sha
                if requery:
                    break  # the read set moved: ask git again with the new paths
        if not ever_worked and state.error:
            # Never extracted anything in the whole range (a misspelt --env, a wrong --spec):
            # say why instead of printing an empty history.
            raise BraxDiffError(f"{recipe.label}: {state.error}")
        return entries

    def _touching(self, repo: Repository, start: str | None, end: str, paths: list[str]) -> list[str]:
        key = (repo.git_dir, start, end, tuple(paths))
        if key not in self._touching_memo:  # asked by the prefetch, then by the walk
            self._touching_memo[key] = touching_commits(repo, start, end, paths) if paths else []
        return self._touching_memo[key]

    def _prefetch(self, recipe: Recipe, side: str, shas: list[str], state: Outcome, others: dict) -> None:
        """Extract, split over forked processes (:mod:`brax_diff.extract.parallel`), the commits the
        walk will extract if its read set stays as ``state``'s: each touching commit whose
        blobs differ from the last one extracted. The walk then finds them in the cache; a
        read set that moves makes it extract what was not guessed itself."""
        from ..extract.parallel import processes, run_shares

        workers = processes()
        if self.cache is None or workers < 2:
            return
        ids, paths = self.ids(side), sorted(state.reads.get(side, {}))
        preferred = {s: sorted(r) for s, r in state.reads.items()}
        recipe_key = FactCache.recipe_key(recipe.name, recipe.version, recipe.scope)
        previous, wanted = state.reads.get(side, {}), []
        for sha in shas:
            commit = self.repos[side].git.commit(sha)
            current = {p: ids(commit, p) for p in paths}
            if current != previous:
                previous = current
                if self._lookup(recipe_key, {side: commit, **others}, preferred, keep=True) is None:
                    wanted.append(commit)  # a miss: extract it ahead
                elif not wanted:
                    return  # the next extraction is in the cache: so, likely, the rest (a warm run)
        # Their misses are counted: the walk's second lookup of each is not a hit or miss of its own.
        self._asked_in_vain.update(self._asked(recipe_key, {side: c, **others}) for c in wanted)
        if len(wanted) < 2:
            return

        def share(commits: list) -> Callable[[], int]:
            def extract() -> int:
                before = self.parsed
                for commit in commits:
                    self.outcome(recipe, {side: commit, **others}, preferred=preferred, missed=True)
                return self.parsed - before
            return extract

        # Runs of consecutive commits, not every n-th: a blob a commit brings is then parsed by
        # one process, not by each.
        count = min(workers, len(wanted))
        self.step(f"{side}: extracting {recipe.label} at {len(wanted)} commits in {count} processes")
        bounds = [len(wanted) * i // count for i in range(count + 1)]
        shares = [share(wanted[start:end]) for start, end in zip(bounds, bounds[1:])]
        parsed, lines = run_shares(shares, self.cache, self.repos.values())
        self.parsed += sum(n for n in parsed if isinstance(n, int))
        for line in lines:  # a child's warnings (a cache it could not write)
            print(one_line(line), file=sys.stderr)

    @staticmethod
    def _entry(recipe: Recipe, commit: CommitInfo, old: Outcome, new: Outcome) -> list[Entry]:
        changes = fact_changes(old.facts or {}, new.facts or {})
        return [Entry(commit, recipe.scope, tuple(changes), transition_note(old, new))] if changes else []


# ---------------------------------------------------------------------------------------
# Rendering


def _value(value: Any) -> str:
    return md_code(value if isinstance(value, str) else json.dumps(value, sort_keys=True))


def _links(fact: Fact, label: str) -> str:
    urls = [p.url for p in fact.provenance]
    if not urls:
        return ""
    shown = ", ".join(f"[{label}{'' if len(urls) == 1 else i + 1}]({url})" for i, url in enumerate(urls[:3]))
    return shown + (f" (+{len(urls) - 3})" if len(urls) > 3 else "")


def _change_line(change: Change) -> str:
    if change.kind == "appeared":
        links = _links(change.new, "source")
        return f"- {md_code(change.key)} appeared: {_value(change.new.value)}" + (f" ({links})" if links else "")
    if change.kind == "disappeared":
        links = _links(change.old, "was")
        return f"- {md_code(change.key)} disappeared (was {_value(change.old.value)})" + (f" ({links})" if links else "")
    links = ", ".join(x for x in (_links(change.old, "old"), _links(change.new, "new")) if x)
    return f"- {md_code(change.key)}: {_value(change.old.value)} → {_value(change.new.value)}" + (f" ({links})" if links else "")


def render_markdown(history: History) -> str:
    lines = ["# Fact history", ""]
    for walk in history.walks:
        span = f"`{walk.start[:12]}`..`{walk.end[:12]}`" if walk.start else f"whole history to `{walk.end[:12]}`"
        lines.append(f"## {walk.side} {walk.range} ({span})")
        lines.append("")
        scopes = "; ".join(scope_label(s) for s in walk.scopes)
        lines.append(f"Scope: {scopes}.")
        for name, info in sorted(walk.held.items()):
            lines.append(f"Held: {name} `{info.ref}` at [`{info.commit[:12]}`]({info.repo.rstrip('/')}/commit/{info.commit}).")
        lines.append(f"{walk.commits} first-parent commits; {walk.touching} touch the files read; "
                     f"{walk.extractions} extracted; {len(walk.grouped())} change a fact.")
        lines.append("")
        if not walk.entries:
            lines += ["No fact changed in this range.", ""]
        multi = len(walk.scopes) > 1
        for commit, entries in walk.grouped():
            # The subject is the repository's: no HTML or link of its own.
            lines.append(f"### {commit.date[:10]} [`{commit.sha[:12]}`]({commit.url}) {md_prose(commit.subject)}")
            lines.append("")
            for entry in entries:
                if multi:
                    lines.append(f"**{scope_label(entry.scope)}**")
                    lines.append("")
                if entry.note:
                    lines.append(f"_{entry.note}_")
                    lines.append("")
                lines.extend(_change_line(c) for c in entry.changes)
                lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_json(history: History) -> str:
    return dumps(history.to_json())


# ---------------------------------------------------------------------------------------
# Recipes for the shipped extractors (imported lazily: the engine itself needs none)

BRAX_SIDES = ("brax", "playground")
SLM_SIDES = ("slm",)
RSL_RL_SIDES = ("rsl_rl", "playground")  # RSL-RL is read on Playground's configs
def _import(module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise BraxDiffError(f"{module}.{name} is not available in this installation") from None


def _require(module: str, name: str) -> None:
    """Fail early when an extractor is missing, without importing it (libcst takes ~1 s to
    import, and a fully cached walk never needs it)."""
    if sys.modules.get(module) is not None:
        return
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise BraxDiffError(f"{module}.{name} is not available in this installation")


def brax_recipe(family: str | None = None, env: str | None = None) -> Recipe:
    """Brax facts (brax + playground) for a family, an environment, or train() defaults."""
    _require("brax_diff.extractors.brax.extractor", "BraxExtractor")

    def extract(snaps: Mapping[str, Snapshot]) -> Extraction:
        extractor = _import("brax_diff.extractors.brax.extractor", "BraxExtractor")(snaps["brax"], snaps.get("playground"))
        if env:
            return extractor.env(env)
        return extractor.family(family) if family else extractor.defaults()

    return Recipe("brax", shipped_version(), {"family": family, "env": env}, BRAX_SIDES, extract)


def slm_recipe(variant: str, spec: str, mapping: dict | None = None) -> Recipe:
    """SLM-Lab facts for one spec variant."""
    _require("brax_diff.extractors.slm.extractor", "SlmExtractor")

    def extract(snaps: Mapping[str, Snapshot]) -> Extraction:
        return _import("brax_diff.extractors.slm.extractor", "SlmExtractor")(snaps["slm"], spec=spec, mapping=mapping).variant(variant)

    return Recipe(f"slm:{spec}", shipped_version(dumps(mapping)), {"variant": variant}, SLM_SIDES, extract)


def rsl_rl_recipe(family: str | None = None, env: str | None = None) -> Recipe:
    """RSL-RL facts (rsl_rl + playground) for a family or an environment."""
    _require("brax_diff.extractors.rsl_rl", "RslRlExtractor")

    def extract(snaps: Mapping[str, Snapshot]) -> Extraction:
        extractor = _import("brax_diff.extractors.rsl_rl", "RslRlExtractor")(snaps["rsl_rl"], snaps["playground"])
        return extractor.env(env) if env else extractor.family(family)

    return Recipe("rsl_rl", shipped_version(), {"family": family, "env": env}, RSL_RL_SIDES, extract)


@dataclass(frozen=True)
class HistoryRequest:
    """What `brax-diff history` was asked: ranges per side (None: held) and one scope."""

    ranges: dict[str, str]  # side -> "A..B" or "B"; only the sides to walk
    held: dict[str, str]  # side -> ref for every side (used when that side is not walked)
    family: str | None = None
    env: str | None = None
    variant: str | None = None
    spec: str = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"
    mapping: dict | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.family, self.env, self.variant)) > 1:
            raise BraxDiffError("give at most one of --family, --env, --variant")
        if not self.ranges:
            raise BraxDiffError("give a range to walk: --brax, --playground, --slm and/or --rsl-rl (A..B, or B for all history)")
        unknown = sorted(set(self.ranges) - set(BRAX_SIDES + SLM_SIDES + RSL_RL_SIDES))
        if unknown:
            raise BraxDiffError(f"unknown side(s): {', '.join(unknown)}")


def _refs_while_walking(request: HistoryRequest) -> dict[str, str]:
    """Where each side stands while another is walked: its given ref, or B for a side given as
    A..B (the walked side's entry is only used to read the SLM-Lab mapping at B)."""
    refs = dict(request.held)
    for side, text in request.ranges.items():
        refs[side] = parse_range(text)[1]
    return refs


def recipes_for(request: HistoryRequest, side: str, repos: Mapping[str, Repository],
                refs: Mapping[str, str]) -> list[Recipe]:
    """The recipes a walk of ``side`` needs for the request's scope.

    Brax sides use --family/--env (a --variant maps to its family); the SLM side uses
    --variant (a --family/--env maps to its variant). No scope: every family / variant.
    """
    if side == "rsl_rl":
        if request.variant:
            raise BraxDiffError("--variant is an SLM-Lab spec variant; walk RSL-RL with --family or --env")
        if request.env or request.family:
            return [rsl_rl_recipe(family=request.family, env=request.env)]
        families = _import("brax_diff.extractors.rsl_rl", "FAMILIES")
        return [rsl_rl_recipe(family=f) for f in families]
    if side in BRAX_SIDES:
        if request.env or request.family:
            return [brax_recipe(family=request.family, env=request.env)]
        if request.variant:
            family = _slm_extractor(request, repos, refs).family_of(request.variant)
            if family is None:
                raise BraxDiffError(f"variant {request.variant!r} maps to no Brax family; use --family or --env")
            return [brax_recipe(family=family)]
        families = _import("brax_diff.extractors.brax.extractor", "FAMILIES")
        return [brax_recipe(family=f) for f in families]
    if request.variant:
        variants = [request.variant]
    elif request.env or request.family:
        extractor = _slm_extractor(request, repos, refs)
        try:
            variants = [extractor.variant_for(family=request.family, env=request.env)]
        except BraxDiffError:
            if request.family is not None:
                raise
            # An env the mapping does not name: its family's default variant (the family from
            # Playground's registries, so the Playground repository is opened only here).
            family = _family_of_env(request.env, repos, refs)
            variants = [extractor.variant_for(family=family, env=request.env)]
    else:
        variants = _slm_extractor(request, repos, refs).variants()
    return [slm_recipe(v, request.spec, request.mapping) for v in variants]


def _family_of_env(env: str, repos: Mapping[str, Repository], refs: Mapping[str, str]) -> str:
    """The Playground family whose registry names ``env``, at the held Playground ref."""
    BraxExtractor = _import("brax_diff.extractors.brax.extractor", "BraxExtractor")
    # family_of reads only Playground's registries; the Brax snapshot is never touched.
    return BraxExtractor(None, resolve_ref(repos["playground"], refs["playground"])).family_of(env)


def _slm_extractor(request: HistoryRequest, repos: Mapping[str, Repository], refs: Mapping[str, str]):
    SlmExtractor = _import("brax_diff.extractors.slm.extractor", "SlmExtractor")
    return SlmExtractor(resolve_ref(repos["slm"], refs["slm"]), spec=request.spec, mapping=request.mapping)


class _Repos(dict):
    """Repositories by side, each opened (for a URL: cloned) the first time it is needed."""

    def __init__(self, open_repo: Callable[[str], Repository]) -> None:
        super().__init__()
        self._open = open_repo

    def __missing__(self, side: str) -> Repository:
        self[side] = found = self._open(side)
        return found


def run_history(request: HistoryRequest, open_repo: Callable[[str], Repository],
                cache: FactCache | None, step: Callable[[str], None] | None = None) -> tuple[History, HistoryEngine]:
    """Walk every requested side (brax, playground, slm order) for the request's scope;
    ``step`` hears what the walk is doing (the terminal's progress line)."""
    needed = set()
    for side in request.ranges:
        needed |= set(RSL_RL_SIDES if side == "rsl_rl" else BRAX_SIDES if side in BRAX_SIDES else SLM_SIDES)
        if side in BRAX_SIDES and request.variant:
            needed |= set(SLM_SIDES)
    repos = _Repos(open_repo)
    repos.update(open_all(sorted(needed), open_repo))  # every one that cannot be opened named at once
    engine = HistoryEngine({side: repos[side] for side in sorted(needed)}, cache, step)
    walks = []
    for side in (s for s in BRAX_SIDES + SLM_SIDES + ("rsl_rl",) if s in request.ranges):
        refs = _refs_while_walking(request)
        walks.append(engine.walk(recipes_for(request, side, repos, refs), side, request.ranges[side], refs))
    return History(walks), engine
