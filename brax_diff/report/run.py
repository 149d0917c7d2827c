"""One `report` run, scope by scope: the library side of `brax-diff report`.

:class:`ReportRun` holds the run's extractors (answered from the fact cache where it can,
built only when a call misses), extracts what the scopes need at once over forked processes
on a cold run (:func:`brax_diff.extract.cached.prefetch`), and gives each scope's report: copied
from the report cache when the same inputs made it before, else generated, rendered and
kept. The CLI (:mod:`brax_diff.cli.report`) decides where the texts go and prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..errors import BraxDiffError
from ..facts.scope import AGAINST, RSL_RL, RSL_RL_FAMILIES, Scope


class ReportRun:
    """The extractors and caches one `report` invocation shares across its scopes."""

    def __init__(self, snapshots: dict, settings: Any, table: Callable[[], Any], extractor_classes: tuple,
                 set_values: dict, mapping: dict | None, *, variant: str | None, no_cache: bool,
                 step: Callable[[str], None] = lambda text: None, brax_reference: str = "params",
                 against: str = "slm", history_ref: str | None = None) -> None:
        from ..extract.cached import BRAX_METHODS, BRAX_VALUES, CachedExtractor, recall
        from ..extract.factcache import FactCache
        from ..extract.factcache import cache_root as fact_cache_root

        self.snapshots, self.settings, self.table, self.variant = snapshots, settings, table, variant
        self.brax_reference = brax_reference
        self.set_values, self.mapping = set_values, mapping
        self.step = step
        self.against = against
        self._history = None
        self.history_sha = None
        if history_ref is not None and against == "slm":
            from ..sources.worktree import resolve_ref

            self.history_sha = resolve_ref(snapshots["slm"].repository, history_ref).sha
        BraxExtractor, SlmExtractor = extractor_classes
        self.extractor_classes = extractor_classes
        brax_snap, playground_snap = snapshots["brax"], snapshots["playground"]
        slm_snap = snapshots.get(against)

        def make_brax():
            if brax_reference == "params":  # the extractor of every other command (and of test doubles)
                return BraxExtractor(brax_snap, playground_snap)
            return BraxExtractor(brax_snap, playground_snap, reference=brax_reference)

        def make_slm():
            if against == RSL_RL:  # the other side is RSL-RL: it fills the place SLM-Lab has in the report
                from brax_diff.extractors.rsl_rl import RslRlExtractor

                return RslRlExtractor(slm_snap, playground_snap)
            return SlmExtractor(slm_snap, spec=settings.spec, sets=set_values, mapping=mapping,
                                playground=playground_snap)

        self.cache = self.reports = self.links = None
        if no_cache:
            self.brax, self.slm = make_brax(), make_slm()
            return
        # A rerun whose blobs have not moved parses nothing, and builds no extractor.
        from .cache import ReportCache

        self.cache = FactCache(fact_cache_root(settings.cache_dir))
        self.reports = ReportCache(fact_cache_root(settings.cache_dir))
        for snapshot in snapshots.values():
            recall(self.cache, snapshot)
        early = None if against == RSL_RL or slm_snap.exists(settings.spec) else make_slm()  # a missing spec: now
        self.brax = CachedExtractor(None, "brax", {"brax": brax_snap, "playground": playground_snap}, self.cache,
                                    BRAX_METHODS, values=BRAX_VALUES, factory=make_brax,
                                    identity=None if brax_reference == "params" else {"reference": brax_reference})
        if against == RSL_RL:
            self.slm = CachedExtractor(None, RSL_RL, {RSL_RL: slm_snap, "playground": playground_snap}, self.cache,
                                       ("variant", "setup"), values=("variant_for",), factory=make_slm)
            return
        self.slm = CachedExtractor(early, "slm", {"slm": slm_snap, "playground": playground_snap}, self.cache,
                                   ("variant", "setup"),
                                   identity={"spec": settings.spec, "sets": set_values, "mapping": mapping},
                                   values=("variant_for",), factory=make_slm)

    def scopes(self, family: str | None, env: str | None) -> list[Scope]:
        """The scopes asked for: one environment, one family, or every family."""
        if env and self.against != RSL_RL:
            self.brax.family_of(env)  # an unknown env is a clear error before any work
            return [Scope(env=env)]
        families = self.brax.families()
        if self.against == RSL_RL:  # only the families Playground has an RSL-RL config for
            families = [f for f in families if f in RSL_RL_FAMILIES]
            if env and self.brax.family_of(env) not in RSL_RL_FAMILIES:
                raise BraxDiffError(f"{env!r} is in family {self.brax.family_of(env)!r}, which has no RSL-RL config "
                                    f"(families: {', '.join(RSL_RL_FAMILIES)})")
        if family:
            if family not in families:
                raise BraxDiffError(f"unknown family {family!r} (families: {', '.join(families)})")
            return [Scope(family=family)]
        if env:
            return [Scope(env=env)]
        return [Scope(family=f) for f in families]

    def extract_ahead(self, scopes: list[Scope]) -> list[str]:
        """Extract what the scopes need that the cache lacks, over forked processes (a cold
        run: Brax and SLM-Lab at once); the lines the other processes printed."""
        if self.cache is None:
            return []
        from ..extract.cached import prefetch
        from ..facts.scope import extraction_calls

        self.step("extracting Brax and SLM-Lab")
        calls = extraction_calls(self.brax, self.slm, scopes, self.variant)
        # SLM-Lab's first: this process takes them and a child Brax's, so the fix solver, which
        # re-reads SLM-Lab's code here, finds every file parsed (else it parsed them all again).
        calls.sort(key=lambda call: call[0] is not self.slm)
        return prefetch(calls, self.cache, self.snapshots.values())

    def report(self, scope: Scope, *, previous_path: Path | None, verdicts: list | None,
               linked_at: dict[str, str]
               ) -> tuple[dict[str, str], dict, dict | Path | None]:
        """One scope's report: its texts ({"md": ..., "json": ...}), its model and the report
        it replaces (a model, or the path of one a kept report has not read). ``linked_at``
        is shared by the run's scopes (the commits each line was linked at)."""
        settings = self.settings
        rules_origin = "shipped" if settings.rules is None else settings.label(settings.rules)

        def report_key() -> str | None:
            if self.reports is None:
                return None
            from .cache import scope_key
            from ..facts.scope import extraction_calls

            return scope_key(scope, extraction_calls(self.brax, self.slm, [scope], self.variant), self.snapshots,
                             variant=self.variant, spec=settings.spec, rules=settings.rules,
                             rules_origin=rules_origin, verdicts=verdicts, previous_path=previous_path,
                             history=self.history_sha)

        key = report_key()
        kept = self.reports.get(key) if key is not None else None
        if kept is not None:  # nothing to classify or render: the same inputs made these texts
            texts = dict(zip(("md", "json"), kept))
            replaced = previous_path if previous_path and previous_path.exists() else None
            return texts, json.loads(texts["json"]), replaced

        from ..extract.factcache import cache_root as fact_cache_root
        from ..sources.permalinks import LinkCache, line_commits, settle
        from .render import generate, read_previous, render_json, render_markdown
        from ..sources.worktree import refresh_sources

        if self.links is None and self.cache is not None:
            self.links = LinkCache(fact_cache_root(settings.cache_dir))
        replaced = read_previous(previous_path) if previous_path else None
        model = generate(self.brax, self.slm, self.table(), scope, variant=self.variant, spec=settings.spec,
                         verification=verdicts, previous=replaced, rules_origin=rules_origin, progress=self.step,
                         brax_reference=self.brax_reference,
                         against=AGAINST.get(self.against),
                         solve_fixes=self.solve_fixes if self.against == "slm" else None,
                         history=self.spec_history() if self.against == "slm" else None)
        model = refresh_sources(model, self.snapshots)  # what each work tree read differs in
        # Every line at the last commit that changed its file, in the JSON as in the links.
        settle(model, line_commits(model, self.snapshots, linked_at, self.links))
        texts = {"md": render_markdown(model), "json": render_json(model)}
        key = key or report_key()  # the extractions this run made are in the fact cache now
        if key is not None:
            self.reports.put(key, texts["md"], texts["json"])
        return texts, model, replaced

    def spec_history(self) -> Any:
        """SLM-Lab's history of the spec file (:mod:`brax_diff.history.spec_keys`) over the
        ancestry of ``--history-ref`` (default: the compared commit)."""
        if self._history is None:
            from ..history.spec_keys import SpecHistory

            snapshot = self.snapshots["slm"]
            self._history = SpecHistory(snapshot.repository, self.history_sha or snapshot.sha, self.settings.spec,
                                        self.set_values)
        return self._history

    def resolve_slm(self, ref: str) -> Any:
        """SLM-Lab at another ref of the compared repository (``--results-code``)."""
        from ..sources.worktree import resolve_ref

        return resolve_ref(self.snapshots["slm"].repository, ref)

    def other_at(self, snapshot: Any, frames: int | None) -> Any:
        """SLM-Lab's extractor at ``snapshot``, with ``-s max_frame=frames`` added to the run's
        ``--set`` values (the published run's own budget); through the fact cache."""
        from ..extract.cached import CachedExtractor

        sets = dict(self.set_values)
        if frames is not None:
            sets["max_frame"] = str(frames)
        playground = self.snapshots["playground"]
        _, SlmExtractor = self.extractor_classes

        def make():
            return SlmExtractor(snapshot, spec=self.settings.spec, sets=sets, mapping=self.mapping,
                                playground=playground)

        if self.cache is None:
            return make()
        return CachedExtractor(None, "slm", {"slm": snapshot, "playground": playground}, self.cache,
                               ("variant", "setup"),
                               identity={"spec": self.settings.spec, "sets": sets, "mapping": self.mapping},
                               values=("variant_for",), factory=make)

    def results_report(self, scores: Any, targets: Any, code: Any, linked_at: dict[str, str]
                       ) -> tuple[dict[str, str], dict]:
        """The cross-family results report (:mod:`brax_diff.report.published`): texts and model."""
        from ..extract.factcache import cache_root as fact_cache_root
        from ..sources.permalinks import LinkCache, line_commits, settle
        from .published import Joiner, join
        from .render import render_json, render_results_markdown

        made: dict[int | None, Any] = {}

        def other_for(frames: int | None) -> Any:
            if frames not in made:
                made[frames] = self.other_at(code, frames)
            return made[frames]

        self.step("joining the published results with the code that produced them")
        default = self.set_values.get("max_frame")
        from ..compare.results import frames_number

        joiner = Joiner(self.brax, other_for, code, compared=self.slm, compared_commit=self.snapshots["slm"].sha,
                        default_frames=frames_number(default) if default is not None else None,
                        playground=self.snapshots["playground"])
        model = join(joiner, self.table(), scores, targets)
        if self.links is None and self.cache is not None:
            self.links = LinkCache(fact_cache_root(self.settings.cache_dir))
        snapshots = {**self.snapshots, "slm": code}
        settle(model, line_commits(model, snapshots, linked_at, self.links))
        return {"md": render_results_markdown(model), "json": render_json(model)}, model

    def solve_fixes(self, *, brax: Any, slm: Any, family: str, env: str | None, variant: str) -> dict:
        """`brax-diff fix`'s solver on the scope (the report's Fix column and recommended
        order): the variant with every fix the spec can express, written in memory and read
        back by SLM-Lab's own extractor (:func:`brax_diff.fix.solver.report_outcomes`)."""
        def solve() -> dict:
            from brax_diff.extractors.slm.extractor import SlmExtractor

            from ..fix.solver import report_outcomes

            return report_outcomes(self.brax, SlmExtractor, self.snapshots["slm"], spec=self.settings.spec,
                                   sets=self.set_values, mapping=self.mapping, family=family, env=env,
                                   variant=variant, brax=brax, slm_before=slm, table=self.table())

        from ..sources.repository import Snapshot

        snapshot = self.snapshots["slm"]
        if self.cache is None or type(snapshot) is not Snapshot:  # a work tree's bytes are not a commit's
            return solve()
        # Kept in the fact cache like an extraction: by what it is made from (both extractions'
        # values, the scope, the flags, brax-diff's code and rules) and the SLM-Lab blobs it read.
        import hashlib

        from ..extract.factcache import CachedResult, FactCache, rebase_provenance
        from ..facts.model import dumps
        from .render import what_it_says
        from .cache import code_digest, file_digest

        def digest(extraction: Any) -> str:
            return hashlib.sha256(dumps(what_it_says(extraction.to_json())).encode()).hexdigest()

        try:
            rules = file_digest(self.settings.rules, "rules file")
        except OSError:
            return solve()
        recipe = FactCache.recipe_key("report.fix_outcomes", code_digest(), {
            "brax": digest(brax), "slm": digest(slm), "family": family, "env": env, "variant": variant,
            "spec": self.settings.spec, "sets": self.set_values, "mapping": self.mapping, "rules": rules})
        hit = self.cache.lookup(recipe, lambda side, paths: {p: snapshot.object_id(p) for p in paths})
        if hit is not None and isinstance(hit.extraction, dict) and isinstance(hit.extraction.get("fixes"), dict):
            moves = {(hit.repos.get("slm"), hit.commits.get("slm")): (snapshot.repository.web_url, snapshot.sha)}
            return rebase_provenance(hit.extraction["fixes"], moves)
        answer = solve()
        self.cache.store(recipe, CachedResult(reads={"slm": dict(snapshot.reads)}, commits={"slm": snapshot.sha},
                                              repos={"slm": snapshot.repository.web_url},
                                              extraction={"fixes": answer}, error=None))
        return answer
