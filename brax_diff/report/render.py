"""The report: a JSON-native model, rendered as JSON and (through Jinja) as Markdown.

:func:`build_report` turns the two extractions, their classified differences and the
per-environment rows into the report model (a plain dict; ``dumps(model)`` is the JSON
report). :func:`render_markdown` renders the model with ``templates/report.md.j2``.
:func:`changes_since` compares the model with a previous report's JSON. Everything is
sorted and free of timestamps, so the same inputs give byte-identical files.

:func:`generate` runs the whole pipeline for one scope with extractor objects
(``extractors/brax/extractor.py``'s ``BraxExtractor`` and a side's, e.g. ``extractors/slm/extractor.py``'s
``SlmExtractor``); the CLI only opens repositories and calls it.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from jinja2 import Environment, FileSystemLoader, StrictUndefined

import brax_diff

from ..compare.pairing import compare, key_order, values_equal
from ..compare.results import incomparable_reasons
from ..errors import ConfigError
from ..facts.model import Extraction, Provenance, dumps, format_value, md_cell
from ..safety.escape import md_code, md_text
from ..sources.permalinks import permalink
from .verification import verification_entries  # noqa: F401  (re-exported for the CLI)
from ..safety.io import read_json
from ..safety.jinja_bytecode import private_bytecode_cache
from ..facts.scope import FORMATS, Scope, extraction_calls  # noqa: F401 (re-exported)
from ..compare.severity import worst_at_or_above  # noqa: F401 (re-exported)
from ..compare.rules import (RISK_LEVELS, SEVERITIES, Classified, RuleTable, classify,
                    recommended_steps)
from ..facts.vocabulary import KEYS, PER_ENVIRONMENT, TOPICS

SCHEMA = 1  # bump when the report JSON changes shape
MAX_LINKS = 3  # lines linked per value in Markdown tables; the JSON keeps them all
SOURCE_TITLES = {"brax": "Brax", "playground": "MuJoCo Playground", "slm": "SLM-Lab", "rsl_rl": "RSL-RL"}


def templates_dir() -> Path:
    """Installed: brax_diff/templates; in a checkout: the top-level templates/ folder."""
    installed = Path(brax_diff.__file__).parent / "templates"
    return installed if installed.is_dir() else Path(brax_diff.__file__).parent.parent / "templates"


# --------------------------------------------------------------------------------------
# Formatting helpers shared by the templates
# --------------------------------------------------------------------------------------


# Line links are reference-style: ``[L36][google/brax/brax/training/agents/ppo/train.py#L36]``
# in the text, one ``[id]: url`` definition per line at the end of the report. The id names
# the line, not the commit, so when upstream moves only the definitions change and a table
# row changes only when its own value or lines do.
_LINK_REF = re.compile(r"\]\[([^\]\n]+#L\d+)\]")


def link_id(p: Provenance) -> str:
    # A reference label holds no "[", "]", "\\" or line break: an upstream path with one would
    # end the label early or start a link definition of its own.
    path = re.sub(r"[\[\]\\<>\s]", lambda c: f"%{ord(c.group()):02X}", p.path)
    return f"{short_repo(p.repo)}/{path}#L{p.line}"


def line_link(p: Provenance | dict, label: str | None = None) -> str:
    """``[L36][id]``; a line read from an uncommitted work-tree file is not linked."""
    p = Provenance.from_json(p) if isinstance(p, dict) else p
    label = md_text(label or f"L{p.line}")  # a label may be the repository's path
    return f"{label} (uncommitted)" if p.uncommitted else f"[{label}][{link_id(p)}]"


def linked(value: Any, provenance: list[dict] | None) -> str:
    """`` `16` · [L36][…] · [L41][…] ``: the value, then a link to each line it comes from
    (the first MAX_LINKS; the JSON lists them all)."""
    text = md_code(format_value(value))
    prov = [Provenance.from_json(p) for p in provenance or []]
    out = " · ".join([text, *(line_link(p) for p in prov[:MAX_LINKS])])
    if len(prov) > MAX_LINKS:
        out += f" (+{len(prov) - MAX_LINKS} in the JSON)"
    return out


def _provenance_in(value: Any) -> Iterable[Provenance]:
    if isinstance(value, dict):
        if {"repo", "commit", "path", "line"} <= value.keys():
            yield Provenance.from_json(value)
            return
        for item in value.values():
            yield from _provenance_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _provenance_in(item)


def link_definitions(text: str, model: dict) -> str:
    """The ``[id]: url`` lines for every line link ``text`` uses, sorted; each at the commit
    its provenance names: the last that changed its file (:func:`brax_diff.sources.permalinks.settle`);
    a model from before that step may still carry ``line_commits``."""
    commits = model.get("line_commits")
    urls = {link_id(p): permalink(p, commits) for p in _provenance_in(model) if not p.uncommitted}
    used = sorted(set(_LINK_REF.findall(text)) & set(urls))
    return "".join(f"[{ref}]: {urls[ref]}\n" for ref in used)


def fact_cell(fact: dict | None, side: str = "other") -> str:
    """A fact's table cell. ``side``: Brax's declared value is what train() was asked for (it
    rounds ``num_timesteps`` up to whole training steps), not an override a finding names."""
    if fact is None:
        return "—"
    if fact.get("unknown"):
        return "**unknown**"
    out = linked(fact["value"], fact.get("provenance"))
    if side == "brax" and "declared" in fact and not values_equal(fact["declared"], fact["value"]):
        return out + f" (requested {md_code(format_value(fact['declared']))})"
    if "declared" in fact and not values_equal(fact["declared"], fact["value"]):
        # The spec asks for another value than the code runs: an IMPORTANT finding names the override.
        out += f" (declared {md_code(format_value(fact['declared']))}; 🟠 **IMPORTANT**: the code overrides it)"
    return out


def short_repo(url: str) -> str:
    return url.split("github.com/", 1)[-1] if "github.com/" in url else url


@functools.lru_cache(maxsize=1)
def environment() -> Environment:
    """The Jinja environment every template renders in; one per process, so each template
    compiles once (the environment caches what it loaded, reloading a changed file)."""
    env = Environment(loader=FileSystemLoader(str(templates_dir())), undefined=StrictUndefined,
                      autoescape=False, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                      bytecode_cache=private_bytecode_cache("report", __file__))
    # Upstream text: `code` for a code span, `text` for a name in prose, `cell` for a message.
    env.filters.update(value=format_value, cell=md_cell, code=md_code, text=md_text, fact=fact_cell, repo=short_repo,
                       tojson=lambda v: json.dumps(v, sort_keys=True), line_link=line_link)
    env.globals.update(topics=TOPICS, severities=SEVERITIES, risk_levels=RISK_LEVELS, keys=KEYS, linked=linked,
                       per_environment=sorted(PER_ENVIRONMENT))
    return env


# --------------------------------------------------------------------------------------
# The report model
# --------------------------------------------------------------------------------------


def _sources(brax: Extraction, slm: Extraction) -> list[dict]:
    merged = {**brax.sources, **slm.sources}
    order = [name for name in SOURCE_TITLES if name in merged] + sorted(set(merged) - set(SOURCE_TITLES))
    return [{"name": name, "title": SOURCE_TITLES.get(name, name), **merged[name].to_json()} for name in order]


def _findings(brax: Extraction, slm: Extraction) -> list[dict]:
    out = []
    for side, extraction in (("brax", brax), ("slm", slm)):
        for finding in sorted(extraction.findings, key=lambda f: f.sort_key()):
            out.append({"side": side, **finding.to_json()})
    return out


def _summary(classified: list[Classified]) -> dict:
    counts = {s: 0 for s in SEVERITIES}
    counts["match"] = 0
    counts["unknown"] = 0
    for c in classified:
        counts["unknown" if c.status == "unknown" else (c.severity or "match")] += 1
    return counts


def _fixes_checked(fixes: dict | None) -> dict:
    """Whether the fix solver checked this report's fixes, and why not."""
    if fixes is None:
        return {"checked": False, "why": "no fix solver ran for this report"}
    return {"checked": bool(fixes.get("checked")), "why": fixes.get("why")}


def fix_outcome(c: Classified, fixes: dict | None) -> dict | None:
    """What the report says to do about ``c``: the fix solver's outcome (``brax-diff fix``,
    :func:`brax_diff.fix.solver.outcomes`) where it ran and covers the key; else the rule's fix,
    a spec edit labelled unchecked ("kind": "unchecked", never a recommendation), a code
    change as the rule says. None for a match or a key no rule covers."""
    if c.severity is None or c.fix is None:
        return None
    if fixes is not None and fixes.get("checked") and c.key in fixes["keys"]:
        return fixes["keys"][c.key]
    if not c.fix.spec:
        return {"kind": "code", "summary": "code change", "edits": [], "moves": [], "reason": None, "where": []}
    if fixes is None:
        why = "no fix solver ran for this report"
    elif not fixes.get("checked"):
        why = f"the fix solver cannot run here: {fixes['why']}"
    else:
        why = f"`brax-diff fix` does not write {c.key} into a spec variant (the run or the env builder sets it)"
    return {"kind": "unchecked", "summary": c.fix.summary, "edits": [], "moves": [], "reason": why, "where": []}


@dataclass(frozen=True)
class EnvRow:
    """One environment of the matrix: its Brax extraction and the SLM-Lab variant for it."""

    env: str
    brax: Extraction
    slm: Extraction | None
    variant: str | None = None


def env_matrix(rows: Iterable[EnvRow], table: RuleTable) -> dict:
    """The per-environment matrix of a family.

    ``columns``: keys whose values (either side) or classification vary across the
    environments, one cell per environment; ``uniform``: keys that differ from SLM-Lab
    the same way in every environment (one line each, not one column of identical
    cells); ``matching``: keys that match, with the same values, in every environment (the
    Markdown does not show them; ``report --check`` names their values when one of them
    stops matching or a difference resolves into one); ``rows``: environments, sorted,
    with the SLM-Lab variant each is compared to.
    """
    built = []
    for row in rows:
        slm = row.slm or Extraction("slm", {}, {})
        built.append((row, {c.key: c for c in classify(compare(row.brax, slm), table, fixes=False, fold=True)}))
    built.sort(key=lambda item: item[0].env)

    def cell(c: Classified | None) -> dict | None:
        if c is None:
            return None
        return {"brax": c.difference.brax_value, "slm": c.difference.slm_value,
                "status": c.status, "severity": c.severity}

    columns, uniform, matching = [], [], []
    for key in key_order():
        cells = [cell(cs.get(key)) for _, cs in built]
        if all(c is None for c in cells):
            continue
        first = cells[0]
        same = all(c is not None and first is not None and c["status"] == first["status"]
                   and c["severity"] == first["severity"] and values_equal(c["brax"], first["brax"])
                   and values_equal(c["slm"], first["slm"]) for c in cells)
        if not same:
            columns.append(key)
        else:
            (uniform if first["status"] != "match" else matching).append({"key": key, **first})
    out_rows = [{"env": row.env, "variant": row.variant,
                 "cells": {k: cell(cs[k]) for k in columns if k in cs}} for row, cs in built]
    incomparable = [{"env": row.env, "variant": row.variant, "why": why}
                    for row, cs in built if (why := incomparable_reasons(cs))]
    return {"columns": columns, "uniform": uniform, "matching": matching, "rows": out_rows,
            "incomparable": incomparable}


def _content(model: dict) -> dict:
    """What decides whether two reports say the same: everything but their history and the
    commits their links point at (set after the model is built)."""
    return {k: _lines_only(v) for k, v in model.items() if k not in ("changes", "line_commits")}


def _lines_only(value: Any) -> Any:
    """``value`` with each provenance entry's commit left out: a line is compared by its file and
    number (its commit is settled after the model is built: the last that changed the file)."""
    if isinstance(value, dict):
        if {"repo", "commit", "path", "line"} <= value.keys():
            return {k: v for k, v in value.items() if k != "commit"}
        return {k: _lines_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_lines_only(v) for v in value]
    return value


# Where a report's inputs are, not what they say: commit shas, dates, refs, line links.
_IDENTITY_KEYS = frozenset({"sources", "changes", "provenance", "previous_sources", "commit", "date", "ref",
                            "line_commits"})


def what_it_says(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: what_it_says(v) for k, v in value.items() if k not in _IDENTITY_KEYS}
    if isinstance(value, list):
        return [what_it_says(v) for v in value]
    return value


def same_findings(old: dict, new: dict) -> bool:
    """Whether two report models say the same (values, classifications, fixes, findings),
    whatever commits and lines they were read from. ``report --check`` asks this, so a
    scheduled CI run fails when a classification or value moves, not on every upstream commit."""
    return what_it_says(old) == what_it_says(new)


def _fact_moves(before: dict, after: dict) -> list[dict]:
    out = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old is None:
            out.append({"key": key, "change": "added", "from": None, "to": new["value"]})
        elif new is None:
            out.append({"key": key, "change": "removed", "from": old["value"], "to": None})
        elif not values_equal(old["value"], new["value"]):
            out.append({"key": key, "change": "changed", "from": old["value"], "to": new["value"]})
    return out


def changes_since(previous: dict | None, model: dict) -> dict | None:
    """What moved since ``previous`` (a report JSON): sources, facts on each side,
    classifications. A previous report with the same content passes its own changes on,
    so regenerating a report is idempotent (and ``--check`` stable)."""
    if previous is None:
        return None
    if _content(previous) == _content(model):
        return previous.get("changes")
    before = {s["name"]: s for s in previous.get("sources", [])}
    sources = []
    for src in model["sources"]:
        old = before.get(src["name"])
        if old is None or old.get("commit") != src["commit"]:
            sources.append({"name": src["name"], "title": src["title"],
                            "from": None if old is None else old.get("commit"), "to": src["commit"],
                            "from_date": None if old is None else old.get("date"), "to_date": src["date"]})
    facts = {side: _fact_moves(previous.get(side, {}).get("facts", {}), model[side]["facts"])
             for side in ("brax", "slm")}
    old_cls = {d["key"]: d for d in previous.get("differences", [])}
    classifications = []
    for d in model["differences"]:
        old = old_cls.pop(d["key"], None)
        was = None if old is None else {"status": old.get("status"), "severity": old.get("severity")}
        now = {"status": d["status"], "severity": d["severity"]}
        if was != now:
            classifications.append({"key": d["key"], "from": was, "to": now})
    for key in sorted(old_cls):
        old = old_cls[key]
        classifications.append({"key": key, "from": {"status": old.get("status"), "severity": old.get("severity")},
                                "to": None})
    return {"previous_sources": [{"name": s["name"], "commit": s.get("commit")} for s in previous.get("sources", [])],
            "sources": sources, "facts": facts, "classifications": classifications}


def build_report(brax: Extraction, slm: Extraction, table: RuleTable, *, scope: dict,
                 matrix: dict | None = None, previous: dict | None = None,
                 verification: dict | None = None, rules_origin: str = "shipped",
                 against: dict | None = None, fixes: dict | None = None,
                 tried: Callable[[str, Any], dict | None] | None = None) -> dict:
    """The report model (JSON-native). ``scope``: {"family", "env", "variant", "spec"};
    ``verification``: key -> {"verdict", ...} from ``brax-diff verify``, shown when given;
    ``against``: the side compared with Brax when it is not SLM-Lab ({"side", "title", "reads"}):
    the model names it, and no SLM-Lab spec fix is offered; ``fixes``: what the fix solver made
    of the scope (:func:`brax_diff.fix.solver.report_outcomes`; None: it did not run, and every spec
    edit is labelled unchecked)."""
    # A family report compares what the family decides; what each environment decides is in its matrix.
    keys = None if matrix is None else [k for k in KEYS if k not in PER_ENVIRONMENT]
    classified = classify(compare(brax, slm, keys), table, fixes=against is None, fold=True,  # one difference, one row
                          side="slm" if against is None else against["side"])
    outcomes = {c.key: fix_outcome(c, fixes) for c in classified}
    model = {
        "schema": SCHEMA,
        "scope": dict(sorted(scope.items())),
        "sources": _sources(brax, slm),
        "brax": brax.to_json(),
        "slm": slm.to_json(),
        "differences": [{**c.to_json(), "outcome": outcomes[c.key]} for c in classified],
        "summary": _summary(classified),
        "fixes_checked": _fixes_checked(fixes),
        "recommended": recommended_steps(classified, outcomes, tried=tried if against is None else None),
        "findings": _findings(brax, slm),
        "matrix": matrix,
        # Keys the family's environments set differently (either side): compared in the matrix only.
        "varying": None if matrix is None else [k for k in matrix["columns"] if k not in PER_ENVIRONMENT],
        "verification": verification,
        "rules": {"origin": rules_origin,
                  "references": {k: v.to_json() for k, v in sorted(table.references.items())}},
    }
    if against is not None:
        model["against"] = dict(sorted(against.items()))
    model["changes"] = changes_since(previous, model)
    return model


def render_json(model: dict) -> str:
    return dumps(model)


def topic_anchors() -> dict[str, str]:
    """GitHub's heading anchors of the numbered topic sections ("### 1. Batch collection")."""
    return {name: f"{i}-" + "-".join(title.lower().split()) for i, (name, title) in enumerate(TOPICS, start=1)}


def render_markdown(model: dict) -> str:
    """The Markdown report, from templates/report.md.j2."""
    by_key = {d["key"]: d for d in model["differences"]}
    topics = []
    for name, title in TOPICS:
        rows = [d for d in model["differences"] if d["topic"] == name]
        topics.append({"name": name, "title": title, "rows": rows,
                       "worst": min((d["severity"] for d in rows if d["severity"]),
                                    key=SEVERITIES.index, default=None)})
    text = environment().get_template("report.md.j2").render(
        m=model, topic_sections=topics, by_key=by_key, anchors=topic_anchors())
    text = text.rstrip("\n") + "\n"
    definitions = link_definitions(text, model)
    return text + ("\n<!-- Line links: the commits above. -->\n" + definitions if definitions else "")


def render_results_markdown(model: dict) -> str:
    """The cross-family results report (templates/results.md.j2), from :mod:`brax_diff.report.published`."""
    text = environment().get_template("results.md.j2").render(m=model, anchors=topic_anchors())
    text = text.rstrip("\n") + "\n"
    definitions = link_definitions(text, model)
    return text + ("\n<!-- Line links: the commits above. -->\n" + definitions if definitions else "")


def render_rules_markdown(table: RuleTable) -> str:
    """docs/rules.md: the rule table as Markdown (templates/rules.md.j2)."""
    from ..compare.rules import NULLARY_PREDICATES, PREDICATES
    from ..compare.rules import RULE_SIDES
    text = environment().get_template("rules.md.j2").render(
        table=table.to_json(), titles=dict(TOPICS), nullary=NULLARY_PREDICATES, unary=PREDICATES,
        side_titles=RULE_SIDES)
    return text.rstrip("\n") + "\n"


def read_previous(path: str | Path) -> dict | None:
    """A previous report's JSON; None when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return None
    data = read_json(path, "previous report", ConfigError)
    problem = report_shape_problem(data)
    if problem:
        raise ConfigError(f"previous report {path}: not a brax-diff report JSON (schema {SCHEMA}): {problem}")
    return data


def report_shape_problem(data: Any) -> str | None:
    """What keeps ``data`` from being a report JSON this code can compare with, or None.

    Only the parts ``changes_since`` and ``report --check`` read are checked."""
    if not isinstance(data, dict):
        return "not an object"
    if data.get("schema") != SCHEMA:
        return f"schema {data.get('schema')!r}"
    if not isinstance(data.get("differences"), list) or not all(
            isinstance(d, dict) and isinstance(d.get("key"), str) for d in data["differences"]):
        return "differences must be a list of objects with a key"
    if not isinstance(data.get("sources", []), list) or not all(
            isinstance(s, dict) and all(isinstance(s.get(k), str) for k in ("name", "title", "repo", "commit", "date"))
            for s in data.get("sources", [])):
        return "sources must be a list of objects with name, title, repo, commit and date"
    if not _provenance_ok(data):
        return "a provenance entry is not {repo, commit, path, line}"
    for side in ("brax", "slm"):
        facts = data.get(side, {}).get("facts", {}) if isinstance(data.get(side, {}), dict) else None
        if not isinstance(facts, dict) or not all(isinstance(f, dict) and "value" in f for f in facts.values()):
            return f"{side}.facts must map keys to objects with a value"
    changes = data.get("changes")
    if changes is not None and not _changes_shape_ok(changes):
        return "changes is not a changes section"
    return None


def _provenance_ok(value: Any) -> bool:
    """Every ``provenance`` list (what ``same_findings`` ignores, but the Markdown links) is well formed."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "provenance" and not (isinstance(item, list) and all(
                    isinstance(p, dict) and all(isinstance(p.get(k), str) for k in ("repo", "commit", "path"))
                    and isinstance(p.get("line"), int) for p in item)):
                return False
            if not _provenance_ok(item):
                return False
    elif isinstance(value, list):
        return all(_provenance_ok(item) for item in value)
    return True


def _objects_with(value: Any, keys: tuple[str, ...]) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) and all(k in v for k in keys) for v in value)


def _state_ok(state: Any) -> bool:
    return state is None or (isinstance(state, dict) and "status" in state)


def _changes_shape_ok(changes: Any) -> bool:
    """A previous report's changes section is passed on as it is (see changes_since): it must
    have every field the Markdown template reads."""
    return (isinstance(changes, dict)
            and _objects_with(changes.get("previous_sources"), ("name",))
            and _objects_with(changes.get("sources"), ("title", "from", "to", "from_date", "to_date"))
            and all(isinstance(s["to"], str) and isinstance(s["from"], (str, type(None))) for s in changes["sources"])
            and isinstance(changes.get("facts"), dict)
            and all(_objects_with(changes["facts"].get(side), ("key", "change", "from", "to")) for side in ("brax", "slm"))
            and _objects_with(changes.get("classifications"), ("key", "from", "to"))
            and all(_state_ok(c["from"]) and _state_ok(c["to"]) for c in changes["classifications"]))


# --------------------------------------------------------------------------------------
# The pipeline for one scope, with extractor objects
# --------------------------------------------------------------------------------------


def generate(brax_extractor: Any, slm_extractor: Any, table: RuleTable, scope: Scope, *,
             variant: str | None = None, spec: str | None = None, previous: dict | None = None,
             verification: dict | None = None, rules_origin: str = "shipped",
             progress: Callable[[str], None] = lambda text: None,
             brax_reference: str = "params", against: dict | None = None,
             solve_fixes: Callable[..., dict] | None = None, history: Any = None) -> dict:
    """The report model for one scope.

    ``solve_fixes(brax=, slm=, family=, env=, variant=)``: runs `brax-diff fix`'s solver
    on the scope (:func:`brax_diff.fix.solver.report_outcomes`), so each Fix says what writing it
    does; without it every spec edit is labelled unchecked.

    A family report compares the family's Brax config with the SLM-Lab variant mapped to
    the family (or ``variant``) and adds the matrix over the family's registered
    environments, each against the variant mapped to it. An env report compares that
    environment alone. ``progress`` is told what is being extracted.
    """
    variants: dict[str, Extraction] = {}

    def slm_variant(name: str) -> Extraction:
        if name not in variants:
            progress(f"{scope.name}: extracting SLM-Lab variant {name}")
            variants[name] = slm_extractor.variant(name)
        return variants[name]

    def slm_for(name: str, env: str) -> Extraction:
        """The variant as it runs ``env``: with the setup its env builder makes for it."""
        return slm_variant(name).with_setup(slm_extractor.setup(name, env))

    matrix = None
    if scope.env is not None:
        family = brax_extractor.family_of(scope.env)
        progress(f"{scope.env} ({family}): extracting Brax")
        brax = brax_extractor.env(scope.env)
        chosen = variant or slm_extractor.variant_for(family=family, env=scope.env)
    else:
        family = scope.family
        progress(f"{family}: extracting Brax's family config")
        brax = brax_extractor.family(family)
        chosen = variant or slm_extractor.variant_for(family=family)
        rows = []
        envs = brax_extractor.environments(family)
        for number, env in enumerate(envs, start=1):
            # An env the mapping does not name gets its family's default variant.
            row_variant = variant or slm_extractor.variant_for(family=family, env=env)
            progress(f"{family}: extracting Brax for {env} ({number}/{len(envs)})")
            rows.append(EnvRow(env, brax_extractor.env(env), slm_for(row_variant, env), row_variant))
        matrix = env_matrix(rows, table)
    slm = slm_for(chosen, scope.env) if scope.env is not None else slm_variant(chosen)
    if matrix is not None:  # what the family's environments train with, not its base config
        from ..facts.family import as_trained

        brax = as_trained(brax, {r.env: r.brax for r in rows})
    scope_data = {"family": family, "env": scope.env, "variant": chosen, "spec": spec, "brax_reference": brax_reference}
    fixes = None
    if solve_fixes is not None:
        progress(f"{scope.name}: writing and reading back the fixes of {chosen}")
        fixes = solve_fixes(brax=brax, slm=slm_variant(chosen), family=family, env=scope.env, variant=chosen)
    return build_report(brax, slm, table, scope=scope_data, matrix=matrix, previous=previous,
                        verification=verification, rules_origin=rules_origin, against=against,
                        fixes=fixes,
                        tried=None if history is None else (lambda spec, value: history.tried(chosen, spec, value)))


__all__ = ["build_report", "render_markdown", "render_json", "changes_since", "env_matrix", "EnvRow",
           "generate", "extraction_calls", "Scope", "read_previous", "worst_at_or_above", "environment", "templates_dir"]
