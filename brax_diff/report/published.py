"""The results join: every published score beside what produced it, across every family.

Each published row (:mod:`brax_diff.compare.results`) is compared with the spec variant the row
names (``SPEC_NAME``), read at the SLM-Lab code the results came from (``code``: by default the
commit of the results file, or ``--results-code``), run for the row's own budget (``-s
max_frame=N``, from the row, its section or ``--set``), and with Brax as it trains the same
environment. Both budgets are given in env steps with action repeat (Brax's unit; SLM-Lab's frames
are agent steps). Each environment's classified differences are then read by direction and ranked
by how many missing against passing environments carry them (:mod:`brax_diff.compare.ranking`).

A row that cannot be joined (no registered environment, a variant the spec does not define at
that code, a row without a score) is listed with its reason, never dropped.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..compare.pairing import compare
from ..compare.ranking import features, rank
from ..compare.results import NEAR_FRACTION, SCORE_SCALE_KEYS, Result, ResultsSource, incomparable_reasons, status
from ..compare.rules import classify
from ..errors import BraxDiffError
from ..facts.model import Provenance
from .render import SCHEMA

TARGET_NOTES = Path(__file__).parent.parent / "data" / "target_notes.yaml"


@functools.lru_cache(maxsize=1)
def target_notes() -> dict[str, dict]:
    """env -> {text, source}: what is known outside the code about how its target was produced."""
    import yaml

    out = {}
    for entry in yaml.safe_load(TARGET_NOTES.read_text(encoding="utf-8")):
        for env in entry["envs"]:
            out[env] = {"text": " ".join(entry["text"].split()), "source": dict(entry["source"])}
    return out


# SLM-Lab's own status symbols: ⚠️ "Close (>80%)" and ❌ miss the target, ✅ reaches it.
OWN_MISS = {"pass": False, "near": True, "fail": True}


@dataclass
class Joiner:
    """What the join reads: Brax (per environment), the other side at the results' code (one
    extractor per budget), and the variant the compared ref maps each environment to."""

    brax: Any  # .families(), .environments(family), .env(env)
    other_for: Callable[[int | None], Any]  # frames -> extractor with .variants(), .variant(), .setup()
    code: Any  # the snapshot of the results' code
    compared: Any | None = None  # the extractor at --slm, for "the compared ref maps it to another variant"
    compared_commit: str | None = None
    default_frames: int | None = None  # --set max_frame
    playground: Any | None = None  # Playground's snapshot: each environment's reward floor


def _cells(classified) -> dict[str, dict]:
    return {c.key: {"brax": c.difference.brax_value, "slm": c.difference.slm_value, "status": c.status,
                    "severity": c.severity, "rule": c.rule} for c in classified}


def _own_status(row: Result, targets_row: Result | None) -> str | None:
    """SLM-Lab's own status of the run scored: the scores' symbol, else the targets table's
    when it names the same run (its HF data folder)."""
    symbol = row.symbol
    if symbol is None and targets_row is not None and targets_row.symbol and row.run and row.run == targets_row.run:
        symbol = targets_row.symbol
    if symbol is None:
        return None
    from ..compare.results import STATUS_SYMBOLS

    return STATUS_SYMBOLS.get(symbol.replace("\ufe0f", "️").strip())


def _budget(row: Result, targets_row: Result | None, default: int | None) -> tuple[int | None, str | None, int | None,
                                                                                   str]:
    """(frames, where written, line, which file) of the run scored."""
    if row.frames_from == "Frames column":
        return row.frames, row.frames_from, row.frames_line, "scores"
    if (targets_row is not None and targets_row.frames_from == "Frames column" and row.run
            and row.run == targets_row.run):
        return targets_row.frames, "Frames column", targets_row.frames_line, "targets"
    if row.frames is not None:
        return row.frames, row.frames_from, row.frames_line, "scores"
    if default is not None:
        return default, "--set max_frame", None, "flag"
    return None, None, None, "none"


def _line(source: ResultsSource | None, line: int | None) -> dict | None:
    if source is None or line is None or source.repo is None or source.commit is None or source.path is None:
        return None
    return Provenance(source.repo, source.commit, source.path, line).to_json()


def join(joiner: Joiner, table: Any, scores: ResultsSource, targets: ResultsSource | None) -> dict:
    """The results model (JSON-native): rows, unjoined rows, the ranking, sources."""
    from brax_diff.extractors.slm.extractor import trains

    families = {env: family for family in joiner.brax.families() for env in joiner.brax.environments(family)}
    lower = {env.lower(): env for env in families}
    unjoined = [s.to_json() for s in scores.skipped]
    rows, ranked, sources = [], [], {}
    for env in sorted(scores.rows):
        row = scores.rows[env]
        if env not in families:
            near = lower.get(env.lower())
            unjoined.append({"env": env, "line": row.line, "why": "not a registered Playground environment"
                             + (f" (the registry spells it {near})" if near else "")})
            continue
        if row.score is None:
            unjoined.append({"env": env, "line": row.line, "why": "the row has no score"})
            continue
        targets_row = targets.rows.get(env) if targets is not None else None
        frames, frames_from, frames_line, frames_file = _budget(row, targets_row, joiner.default_frames)
        other = joiner.other_for(frames)
        variant, variant_from = row.variant, "the row's SPEC_NAME"
        if variant is None:
            variant, variant_from = other.variant_for(family=families[env], env=env), "the mapping (the row names none)"
        if variant not in other.variants():
            unjoined.append({"env": env, "line": row.line,
                             "why": f"variant {variant} is not defined in {other.spec_path} at the results' code"})
            continue
        try:
            slm = other.variant(variant).with_setup(other.setup(variant, env))
        except BraxDiffError as exc:
            unjoined.append({"env": env, "line": row.line, "why": f"{variant} cannot be read there: {exc}"})
            continue
        brax = joiner.brax.env(env)
        for name, info in {**brax.sources, **slm.sources}.items():
            sources.setdefault(name, info)
        classified = classify(compare(brax, slm), table, fixes=False, fold=True)
        by_key = {c.key: c for c in classified}
        why_not = incomparable_reasons(by_key)
        cells = _cells(classified)
        target = row.target if row.target is not None else (targets_row.target if targets_row else None)
        ratio, tool = status(row.score, target, None)  # the tool's reading: the score against the target
        own = _own_status(row, targets_row)
        miss = OWN_MISS.get(own) if own is not None else (None if tool == "unknown" else tool != "pass")
        ok, cannot = trains(slm)
        mapped = None
        if joiner.compared is not None:
            try:
                mapped = joiner.compared.variant_for(family=families[env], env=env)
            except BraxDiffError:
                mapped = None
        budget_line = _line(scores if frames_file == "scores" else targets, frames_line)
        # The env SLM-Lab scored on decides its floor (the Brax side's when SLM-Lab's cannot be read).
        read = [f for f in (slm.facts.get("reward_floor"), brax.facts.get("reward_floor")) if f is not None]
        floor = next((f for f in read if not f.is_unknown), read[0] if read else None)
        rows.append({
            "env": env, "family": families[env], "variant": variant, "variant_from": variant_from,
            "score": row.score, "target": target, "ratio": ratio, "status": tool, "own_status": own,
            "miss": miss, "run": row.run, "line": _line(scores, row.line),
            "comparable": not why_not, "incomparable": why_not,
            "trains": ok, "cannot_train": cannot,
            # A return of exactly 0 where no step can earn below 0: no scored step earned anything.
            "reward_floor": None if floor is None else {
                "floor": floor.value, "provenance": [p.to_json() for p in floor.provenance],
                **({"unknown": floor.unknown} if floor.is_unknown else {})},
            "collapse": bool(floor is not None and floor.value == 0.0 and row.score == 0.0),
            "target_note": target_notes().get(env),
            "compared_variant": mapped if mapped != variant else None,
            "budget": {"slm_frames": frames, "slm_frames_from": frames_from,
                       "slm_frames_line": [budget_line] if budget_line else [],
                       "slm": slm.facts["training_env_steps"].to_json(),
                       "brax": brax.facts["training_env_steps"].to_json(),
                       "slm_action_repeat": slm.value("action_repeat"), "brax_action_repeat": brax.value("action_repeat")},
            "cells": {k: c for k, c in cells.items() if c["status"] != "match"},
        })
        excluded = [w["key"] for w in why_not]
        # A variant that cannot train at this code did not make the score: its facts rank nothing.
        ranked.append({"env": env, "miss": miss if ok else None, "features": features(cells, excluded)})
    ranking = rank(ranked)
    order = [name for name in ("brax", "playground", "slm") if name in sources] + sorted(
        set(sources) - {"brax", "playground", "slm"})
    from .render import SOURCE_TITLES

    return {
        "schema": SCHEMA, "kind": "results",
        "sources": [{"name": n, "title": SOURCE_TITLES.get(n, n), **sources[n].to_json()} for n in order],
        "scores": scores.to_json(), "targets": targets.to_json() if targets else None,
        "near_fraction": NEAR_FRACTION,
        "code": {"commit": joiner.code.sha, "compared_commit": joiner.compared_commit,
                 "same_as_compared": joiner.compared_commit in (None, joiner.code.sha)},
        "rows": rows, "unjoined": sorted(unjoined, key=lambda u: (u["line"] or 0, u["env"])),
        "not_published": sorted(env for env in families if env not in scores.rows),
        "ranking": ranking, "score_scale_keys": list(SCORE_SCALE_KEYS),
    }
