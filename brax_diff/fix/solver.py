"""`brax-diff fix`: the SLM-Lab spec variant that applies the report's fixes, and what still differs.

The report ends in fixes ("set `agent.algorithm.val_loss_coef: 0.25`") and a recommended
order. :func:`solve` writes them into a new variant and reads it back, round after round,
until nothing moves:

* a fix's value is rendered from the comparison as it stands, so BD006's minibatch size sees
  the batch BD001's time_horizon makes;
* a spec key belongs to the first fix in the recommended order that sets it, so BD002's
  ``time_horizon: 30`` cannot undo BD001's ``time_horizon: 480`` (the key BD002 covers stays a
  difference, introduced by BD001);
* a fix none of whose keys read back as Brax's once written (a spec key no code reads at this
  ref, a name the code lacks, a value the batch guard rounds), or that makes the variant fail
  to train where its base does not, or that SLM-Lab's spec reading refuses, is taken out
  again: it needs a code change, and the residual says what reading it back showed.

:func:`outcomes` gives each differing key what `report` shows in its Fix column and
recommended order: the edits written that make it match, or a code change and why.

:func:`residual` compares the written variant, re-extracted, with Brax and sorts what still
differs: "needs a code change" (with the code lines of the SLM-Lab fact), "introduced by a
fix" (a value the written keys moved, matching before or not), "not applied" (left out by the
scope, or a spec key another fix owns) and "unknown" (never fixed). :func:`explain` runs the
same for each way a rule offers to fix one key (BD001: a longer horizon at the same envs, or
Brax's horizon at more envs) and puts the residuals side by side.

Everything is static: the spec is read and written as text, the code is only parsed.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from ..compare.pairing import compare, values_equal
from ..errors import BraxDiffError, FixError, SpecError
from ..facts.model import Extraction, Fact, Provenance, dumps, format_value, md_cell
from ..safety.escape import md_code
from ..compare.rules import Classified, Context, RuleTable, classify, recommended_order, render_alternative, recommended_steps
from ..sources.repository import Snapshot
from .specedit import SpecDocument, Write, get_path
from ..facts.vocabulary import KEYS, PER_ENVIRONMENT

MAX_ROUNDS = 8  # rounds of write-and-read-back; the shipped rules settle in 3 on the real refs
GROUPS = (
    ("code_change", "Needs a code change"),
    ("introduced", "Introduced by a fix"),
    ("not_applied", "Not applied"),
    ("unknown", "Unknown"),
)
_ABSENT = "(absent)"  # a spec key the base variant does not write
LAYER_NAMES = ("LazyLinear", "Linear")  # torcharc layers with out_features (as extractors.slm reads them)


# --------------------------------------------------------------------------------------
# Reading a spec text that is not committed: the variant being written
# --------------------------------------------------------------------------------------


class OverlaySnapshot:
    """``base`` with the files in ``texts`` read as given (the spec with the new variant).

    Their lines are marked uncommitted: no link at the commit shows them."""

    def __init__(self, base, texts: Mapping[str, str]) -> None:
        from ..sources.worktree import git_blob_id

        self.base = base
        self.texts = dict(texts)
        self.reads: dict[str, str | None] = {}
        self._ids = {path: git_blob_id(text.encode("utf-8")) for path, text in self.texts.items()}

    def __getattr__(self, name: str) -> Any:  # repository, commit, ref, sha, date, side, listdir
        return getattr(self.base, name)

    def object_id(self, path: str) -> str | None:
        return self._ids[path] if path in self.texts else self.base.object_id(path)

    # recorded in ``reads`` as a Snapshot records them: the same two methods, over object_id above
    blob_id = Snapshot.blob_id
    exists = Snapshot.exists

    def read(self, path: str) -> str:
        if path in self.texts:
            self.reads[path] = self._ids[path]
            return self.texts[path]
        return self.base.read(path)

    def where(self, path: str, line: int) -> Provenance:
        if path in self.texts:
            return Provenance(self.base.repository.web_url, self.base.sha, path, line, True)
        return self.base.where(path, line)

    def info(self):
        info = self.base.info()
        return replace(info, uncommitted=tuple(sorted(set(info.uncommitted) | set(self.texts))))


# --------------------------------------------------------------------------------------
# Which fixes: every one, a phase of the recommended order, or named keys
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixScope:
    """The fixes to apply: those of ``keys`` (None: every key), with a rule's alternative
    where ``alternatives`` names one (rule code -> alternative name)."""

    label: str
    keys: frozenset[str] | None = None
    alternatives: tuple[tuple[str, str], ...] = ()

    def allows(self, key: str) -> bool:
        return self.keys is None or key in self.keys

    def alternative(self, rule: str) -> str | None:
        return dict(self.alternatives).get(rule)

    def with_alternative(self, rule: str, name: str | None) -> "FixScope":
        chosen = {r: a for r, a in self.alternatives if r != rule}
        if name is not None:
            chosen[rule] = name
        return replace(self, alternatives=tuple(sorted(chosen.items())))


def _writable(c: Classified) -> str | None:
    """Why the fix of a difference cannot be written in the spec, or None when it can."""
    if c.fix is None:
        return "no rule covers it" if c.rule is None else "its rule has no fix"
    if not c.fix.spec:
        return f"its fix is a code change ({c.rule} {c.rule_name}: {c.fix.text})"
    if not c.fix.has_value:
        return f"its fix names {c.fix.spec} but no value to write ({c.rule} {c.rule_name}: {c.fix.text})"
    return None


def choose_scope(before: list[Classified], table: RuleTable, *, phase: int | None = None,
                 keys: Iterable[str] | None = None, alternatives: Iterable[str] = (),
                 order: list[Classified] | None = None,
                 tried: Callable[[str, Any], dict | None] | None = None) -> FixScope:
    """The scope the flags ask for; a FixError for an unknown phase or key, a phase or key
    whose fix is a code change, a key that is unknown or already matches, an unknown
    alternative. ``order``: the classification the report numbers its recommended order from
    (:meth:`FixInputs.report_order`), so that ``--phase N`` is the report's step N."""
    keys = list(keys) if keys is not None else None
    if phase is not None and keys is not None:
        raise FixError("--phase and --keys exclude each other")
    by_key = {c.key: c for c in before}
    if phase is not None:
        numbered = order if order is not None else before
        steps = recommended_steps(numbered, tried=tried)
        if not 1 <= phase <= len(steps):
            raise FixError(f"unknown phase {phase}: the recommended order has {len(steps)} phase(s), 1-{len(steps)}"
                           if steps else f"unknown phase {phase}: nothing differs, so there are no phases")
        step = steps[phase - 1]
        why = _writable(by_key.get(step["keys"][0]) or {c.key: c for c in numbered}[step["keys"][0]])
        if why is not None:
            raise FixError(f"phase {phase} ({step['rule']} {step['rule_name']}, {', '.join(step['keys'])}): {why}")
        scope = FixScope(f"phase {phase} of the recommended order ({step['rule']} {step['rule_name']})",
                         frozenset(step["keys"]))
    elif keys is not None:
        if not keys:
            raise FixError("--keys needs at least one canonical key")
        for key in keys:
            if key not in KEYS:
                raise FixError(f"unknown key {key!r} (the canonical keys: brax-diff rules, or docs/rules.md)")
            c = by_key.get(key)
            if c is None:
                raise FixError(f"--keys {key}: neither side has a value for it")
            if c.status == "unknown":
                raise FixError(f"--keys {key}: unknown ({c.difference.reason}); an unknown key is never fixed")
            if c.status == "match":
                raise FixError(f"--keys {key}: already matches Brax ({format_value(c.difference.brax_value)})")
            why = _writable(c)
            if why is not None:
                raise FixError(f"--keys {key}: {why}")
        scope = FixScope(f"the fixes of {', '.join(keys)}", frozenset(keys))
    else:
        scope = FixScope("every fix the spec can express")
    for name in alternatives:
        owners = [r for r in table.rules if name == r.fix.name or any(a.name == name for a in r.fix.alternatives)]
        if not owners:
            offered = sorted({a.name for r in table.rules for a in r.fix.alternatives}
                             | {r.fix.name for r in table.rules if r.fix.name})
            raise FixError(f"unknown --alternative {name!r} (the rules offer: {', '.join(offered) or 'none'})")
        rule = owners[0]
        if scope.keys is not None and not set(rule.keys) & scope.keys:
            raise FixError(f"--alternative {name} belongs to {rule.code} {rule.name}, which {scope.label} leaves out")
        scope = scope.with_alternative(rule.code, None if name == rule.fix.name else name)
    if scope.alternatives:
        scope = replace(scope, label=scope.label + "; " + ", ".join(f"{r} {a}" for r, a in scope.alternatives))
    return scope


# --------------------------------------------------------------------------------------
# Edits: a fix's spec keys and values, as written in the variant
# --------------------------------------------------------------------------------------


class NotExpressible(Exception):
    """This spec cannot hold the value where the fix names it (its parent is null, say)."""


@dataclass(frozen=True)
class Edit:
    """One spec key the variant sets, for the fix of ``keys`` (rule ``rule``)."""

    spec: str
    value: Any
    rule: str
    rule_name: str
    option: str | None  # the rule's alternative; None: its own fix
    keys: tuple[str, ...]
    brax_line: Provenance | None
    was: Any  # the base variant's value, _ABSENT when it sets none
    writes: tuple[Write, ...]

    def comment(self) -> str:
        where = ""
        if self.brax_line is not None:
            where = f": Brax {self.brax_line.path}:{self.brax_line.line} @{self.brax_line.commit[:7]}"
        return f"{self.rule} {self.rule_name}{' (' + self.option + ')' if self.option else ''}{where}"

    def to_json(self) -> dict:
        return {"spec": self.spec, "value": self.value, "was": self.was, "rule": self.rule,
                "rule_name": self.rule_name, "option": self.option, "keys": list(self.keys),
                "brax_line": None if self.brax_line is None else self.brax_line.to_json(),
                "writes": [{"path": ".".join(w.path), "value": w.value} for w in self.writes]}


def _writes(spec: str, value: Any, data: dict, comment: str) -> tuple[Write, ...]:
    """Where a fix's value goes in the variant's data. A list of widths for a torcharc arc
    (``critic_arc``) becomes the arc's Sequential with that many Linear/activation pairs,
    written like the ones it replaces."""
    path = tuple(spec.split("."))
    for depth in range(1, len(path)):
        parent = get_path(data, path[:depth], None)
        if not isinstance(parent, dict):
            shown = "absent" if get_path(data, path[:depth], _ABSENT) is _ABSENT else f"{format_value(parent)}"
            raise NotExpressible(f"{'.'.join(path[:depth])} is {shown} in this variant, so {spec} has no place")
    current = get_path(data, path, None)
    if isinstance(current, dict) and isinstance(value, list) and all(isinstance(w, int) for w in value):
        for module_name, module in (current.get("modules") or {}).items():
            if isinstance(module, dict) and isinstance(module.get("Sequential"), list):
                layers = _layer_stack(module["Sequential"], value)
                return (Write(path + ("modules", module_name, "Sequential"), layers, comment),)
        raise NotExpressible(f"{spec} is an arc without a modules: {{NAME: {{Sequential: [...]}}}} list of layers")
    return (Write(path, value, comment),)


def _layer_stack(layers: list, widths: list[int]) -> list:
    """``widths`` as the Sequential ``layers`` write them: Linear/activation pairs like the first."""
    pairs = [layers[i:i + 2] for i in range(0, len(layers), 2)]
    for pair in pairs:
        if (len(pair) != 2 or not _is_linear(pair[0]) or not isinstance(pair[1], dict) or len(pair[1]) != 1
                or next(iter(pair[1].values())) not in (None, {})):
            raise NotExpressible("the arc's Sequential is not a plain stack of Linear/activation pairs")
    if not pairs:
        raise NotExpressible("the arc's Sequential has no layers to copy")
    (layer_name, args), = pairs[0][0].items()
    out = []
    for width in widths:
        out.append({layer_name: {**args, "out_features": width}})
        out.append(copy.deepcopy(pairs[0][1]))
    return out


def _is_linear(module: Any) -> bool:
    return (isinstance(module, dict) and len(module) == 1 and next(iter(module)) in LAYER_NAMES
            and isinstance(next(iter(module.values())), dict) and "out_features" in next(iter(module.values())))


# --------------------------------------------------------------------------------------
# Solving: write, read back, until nothing moves
# --------------------------------------------------------------------------------------


@dataclass
class Dropped:
    """A rule whose written fix did not read back as Brax's (or broke training), and what
    reading it back showed: ``why`` in full, ``reason`` in a phrase the report's Fix column
    can hold, ``where`` the SLM-Lab code lines that decide it."""

    rule: str
    rule_name: str
    edits: list[Edit]
    why: str
    where: list[Provenance]
    reason: str = ""
    reason_where: list[Provenance] = field(default_factory=list)


@dataclass
class Solution:
    """What :func:`solve` wrote and read back."""

    base_variant: str
    name: str
    scope: FixScope
    edits: list[Edit]
    text: str | None  # the spec file with the variant; None when nothing is written
    before: list[Classified]
    after: list[Classified]
    slm_after: Extraction
    slm_before: Extraction
    blocked: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (owning rule, spec key)
    inexpressible: dict[str, str] = field(default_factory=dict)  # key -> why its fix cannot be written
    dropped: dict[str, Dropped] = field(default_factory=dict)
    rounds: int = 0
    settled: bool = True
    written_lines: dict[str, set[int]] = field(default_factory=dict)  # spec key -> lines in the new text
    spec_path: str = ""
    context: dict = field(default_factory=dict)  # family, env, spec, sources: what the report's header says


Extract = Callable[[str], Extraction]  # the spec text with the new variant -> its extraction


# The training setup each environment runs with is SLM-Lab's env builder's, and the run's length
# its command line's (-s max_frame=N), not the spec variant's: the report names those changes;
# a spec variant is compared on the rest.
SPEC_KEYS = tuple(key for key in KEYS if key not in PER_ENVIRONMENT and key != "training_env_steps")


def _classified(brax: Extraction, slm: Extraction, table: RuleTable) -> list[Classified]:
    return classify(compare(brax, slm, SPEC_KEYS), table)


def _wanted(c: Classified, by_key: dict, table: RuleTable, scope: FixScope
            ) -> tuple[list[tuple[str, Any]], str | None] | str:
    """The (spec key, value) pairs that fix ``c`` and the alternative they come from, or why
    it has none."""
    rule = table.get(c.rule) if c.rule else None
    alternative = scope.alternative(c.rule) if rule else None
    if rule is not None and alternative is not None:
        option = next(a for a in rule.fix.alternatives if a.name == alternative)
        pairs = render_alternative(rule.fix, option, Context(c.difference, by_key))
        if pairs is None:
            return f"{c.rule} {alternative}: a value cannot be filled in (a side's value is missing)"
        return pairs, alternative
    why = _writable(c)
    return why if why is not None else ([(c.fix.spec, c.fix.value)], None)


def solve(brax: Extraction, slm_before: Extraction, document: SpecDocument, base_variant: str, name: str,
          extract: Extract, table: RuleTable, scope: FixScope, header: list[str],
          max_rounds: int = MAX_ROUNDS) -> Solution:
    """Write the scope's fixes into variant ``name`` (``base_variant`` plus the fixes) and
    read it back with ``extract`` until no fix moves; see the module docstring."""
    before = _classified(brax, slm_before, table)
    base_data = document.resolved(base_variant)
    before_values = {k: f.value for k, f in slm_before.facts.items() if not f.is_unknown}
    dropped: dict[str, Dropped] = {}
    for _attempt in range(len(table.rules) + 1):
        dropped_before = set(dropped)
        edits: dict[str, Edit] = {}
        owner: dict[str, str] = {}
        classified, slm, text = before, slm_before, None
        settled, rounds = False, 0
        blocked: dict[str, tuple[str, str]] = {}
        inexpressible: dict[str, str] = {}
        while True:
            moved, blocked, inexpressible = _round(classified, brax, table, scope, edits, owner, dropped, base_data,
                                                   before_values)
            if not moved:
                settled = True
                break
            rounds += 1
            text = document.with_variant(base_variant, name, _all_writes(edits), header)
            try:
                slm = extract(text)
            except SpecError as exc:  # a value SLM-Lab's reading refuses (a minibatch_size of 0)
                refused = _refused(edits, exc)
                if refused is None:
                    raise
                dropped[refused.rule] = refused
                break
            classified = _classified(brax, slm, table)
            if rounds == max_rounds:  # would another round move anything? asked on copies
                moved, blocked, inexpressible = _round(classified, brax, table, scope, dict(edits), dict(owner),
                                                       dropped, base_data, before_values)
                settled = not moved
                break
        if set(dropped) - dropped_before:
            continue  # a value was refused on reading: solve again without its rule
        failed = _did_not_take(edits, classified, slm, slm_before, document.path)
        if not failed and edits:  # every fix takes: does the variant still train?
            lines = _edit_lines(document, text, name, edits.values())
            failed = _breaks_training(edits, slm, slm_before, lines, document.path)
        if not failed:
            break
        dropped.update(failed)
    ordered = sorted(edits.values(), key=lambda e: list(edits).index(e.spec))
    solution = Solution(base_variant, name, scope, ordered, text if edits else None, before, classified, slm,
                        slm_before, blocked, inexpressible, dropped, rounds, settled, spec_path=document.path)
    if solution.text is not None:
        solution.written_lines = _written_lines(document, solution)
    return solution


def _all_writes(edits: dict[str, Edit]) -> list[Write]:
    return [write for edit in edits.values() for write in edit.writes]


def _round(classified: list[Classified], brax: Extraction, table: RuleTable, scope: FixScope,
           edits: dict[str, Edit], owner: dict[str, str], dropped: dict[str, Dropped], base_data: dict,
           before_values: dict[str, Any]):
    """One pass over the differences in recommended order: set (or update) each fix's spec
    keys that are free or its own. Returns whether anything moved, the keys another fix's
    spec key blocks, and the keys whose fix cannot be written."""
    by_key = {c.key: c.difference for c in classified}
    moved = False
    blocked: dict[str, tuple[str, str]] = {}
    inexpressible: dict[str, str] = {}
    for c in recommended_order(classified):
        if not scope.allows(c.key) or c.rule in dropped:
            continue
        wanted = _wanted(c, by_key, table, scope)
        if isinstance(wanted, str):
            inexpressible[c.key] = wanted
            continue
        pairs, option = wanted
        taken = next(((owner[s], s) for s, v in pairs if owner.get(s) not in (None, c.rule)
                      and not values_equal(edits[s].value, v)), None)
        if taken is not None:
            blocked[c.key] = taken
            continue
        current = {s: edits[s].value if s in edits else get_path(base_data, tuple(s.split(".")), _ABSENT)
                   for s, _ in pairs}
        changes = [(s, v) for s, v in pairs if not values_equal(current[s], v)]
        if not changes:
            if not any(s in edits for s, _ in pairs):  # the spec already says it: writing it changes nothing
                said = ', '.join(f'{s}: {format_value(v)}' for s, v in pairs)
                fact = c.difference.slm
                guard = any(d.slm is not None and "batch guard" in (d.slm.note or "")
                            and any(f"spec: {s}" in d.slm.note for s, _ in pairs) for d in by_key.values())
                inexpressible[c.key] = (
                    f"the spec already sets `{said}` and {'the batch guard' if guard else 'the code'} replaces it: "
                    f"{c.key} runs "
                    f"{format_value(c.difference.slm_value)}" if fact is not None and fact.declared is not None
                    else f"the spec already sets {said} and {c.key} still reads {format_value(c.difference.slm_value)}")
            else:
                for s, _ in pairs:
                    if s in edits and c.key not in edits[s].keys:
                        edits[s] = replace(edits[s], keys=edits[s].keys + (c.key,))
            continue
        brax_fact = brax.facts.get(c.key)
        brax_line = brax_fact.provenance[0] if brax_fact is not None and brax_fact.provenance else None
        try:
            new = {}
            for s, v in changes:
                previous = edits.get(s)
                keys = previous.keys if previous and previous.rule == c.rule else ()
                was = get_path(base_data, tuple(s.split(".")), _ABSENT)
                edit = Edit(s, v, c.rule, c.rule_name, option, tuple(dict.fromkeys(keys + (c.key,))), brax_line,
                            was, ())
                writes = _writes(s, v, base_data, edit.comment())
                if writes[0].path != tuple(s.split(".")) and c.key in before_values:  # an arc: its widths before
                    was = before_values[c.key]
                new[s] = replace(edit, was=was, writes=writes)
        except NotExpressible as exc:
            inexpressible[c.key] = str(exc)
            continue
        for s, edit in new.items():
            edits[s] = edit
            owner[s] = c.rule
        moved = True
    return moved, blocked, inexpressible


def _closer(before: Any, after: Any, brax: Any) -> bool:
    """Whether ``after`` is Brax's value, or a number nearer to it (by ratio) than ``before``."""
    if values_equal(after, brax):
        return True
    numbers = [v for v in (before, after, brax) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) < 3:
        return False
    if min(numbers) > 0:
        return abs(math.log(after / brax)) < abs(math.log(before / brax)) * (1 - 1e-9)
    return abs(after - brax) < abs(before - brax) * (1 - 1e-9)


def _did_not_take(edits: dict[str, Edit], classified: list[Classified], slm: Extraction,
                  slm_before: Extraction, spec_path: str) -> dict[str, Dropped]:
    """Rules none of whose keys read back as Brax's with their fix written: each with what
    the variant read back (the value, and findings the written keys raise: a value the code
    replaces, an unread key, a name the code lacks). A value only nearer to Brax's is not
    taken: the report recommends a spec edit only where it makes the key match."""
    status = {c.key: c for c in classified}
    by_rule: dict[str, list[Edit]] = {}
    for edit in edits.values():
        by_rule.setdefault(edit.rule, []).append(edit)
    old = {(f.kind, f.message) for f in slm_before.findings}
    out = {}
    for rule, rule_edits in by_rule.items():
        keys = [k for e in rule_edits for k in e.keys]
        if any(status[k].status == "match" for k in keys if k in status):
            continue
        parts, where, reasons, code_where = [], [], [], []
        for key in dict.fromkeys(keys):
            fact = slm.facts.get(key)
            shown = "unknown" if fact is None or fact.is_unknown else format_value(fact.value)
            parts.append(f"{key} reads back as {shown}" + (f" ({fact.note})" if fact and fact.note else ""))
            where += [p for p in (fact.provenance if fact else ()) if p.path != spec_path]
        for finding in slm.findings:
            if (finding.kind, finding.message) not in old and any(e.spec in finding.message for e in rule_edits):
                parts.append(f"{finding.severity} {finding.kind}: {finding.message}")
                lines = [p for p in finding.provenance if p.path != spec_path]
                where += lines
                if not reasons:
                    reasons.append(_finding_reason(finding, rule_edits, slm))
                    code_where = lines
        written = ", ".join(f"{e.spec}: {format_value(e.value)}" for e in rule_edits)
        if not reasons:
            key = keys[0]
            fact = slm.facts.get(key)
            shown = "unknown" if fact is None or fact.is_unknown else format_value(fact.value)
            reasons.append(f"with `{written}` written, {key} reads back as {shown}, not Brax's "
                           f"{format_value(status[key].difference.brax_value) if key in status else '?'}")
            code_where = [p for p in (fact.provenance if fact else ()) if p.path != spec_path]
        out[rule] = Dropped(rule, rule_edits[0].rule_name, rule_edits,
                            f"writing {written} does not take: " + "; ".join(parts), _unique(where),
                            reasons[0], _unique(code_where))
    return out


def _refused(edits: dict[str, Edit], exc: Exception) -> Dropped | None:
    """The rule whose written value SLM-Lab's spec reading refuses (its message names the
    spec key), or None when it names none of them."""
    culprit = next((e for e in reversed(list(edits.values())) if e.spec in str(exc)), None)
    if culprit is None:
        return None
    rule_edits = [e for e in edits.values() if e.rule == culprit.rule]
    message = re.sub(r"^.*?: line \d+: variant \S+: ", "", str(exc))
    written = f"{culprit.spec}: {format_value(culprit.value)}"
    return Dropped(culprit.rule, culprit.rule_name, rule_edits, f"writing {written} is refused: {message}", [],
                   f"`{written}` is refused when the spec is read: {message}")


def _finding_reason(finding: Any, rule_edits: list[Edit], slm: Extraction) -> str:
    """A finding the written keys raise, as the reason their fix needs a code change."""
    written = ", ".join(f"{e.spec}: {format_value(e.value)}" for e in rule_edits)
    if finding.kind == "declared_not_effective":
        edit = next(e for e in rule_edits if e.spec in finding.message)
        ran = finding.message.rsplit("but the code runs ", 1)[-1].split(" (overridden at ", 1)[0]  # lines: `where`
        fact = slm.facts.get(finding.key) if finding.key else None
        who = "the batch guard" if fact is not None and "batch guard" in (fact.note or "") else "the code"
        return f"{who} replaces `{edit.spec}: {format_value(edit.value)}` with {ran}"
    if finding.kind == "unread_spec_key":
        return f"`{written}` is not read: {finding.message}"
    if finding.kind == "spec_code_mismatch":
        return f"`{written}` names what the code lacks: {finding.message}"
    return f"`{written}`: {finding.message}"


def _breaks_training(edits: dict[str, Edit], slm: Extraction, slm_before: Extraction,
                     lines: dict[str, set[int]], spec_path: str) -> dict[str, Dropped]:
    """Rules whose written keys make the variant fail to train where its base does not (a
    reason the base shares is not theirs): each found by the spec lines the failure names,
    else by a written key's name in its message, else the fix written last."""
    from brax_diff.extractors.slm.extractor import BLOCKING_KINDS

    old = {(f.kind, f.message) for f in slm_before.findings}
    new = [f for f in slm.findings if f.kind in BLOCKING_KINDS and f.severity == "ERROR"
           and (f.kind, f.message) not in old]
    out: dict[str, Dropped] = {}
    for finding in sorted(new, key=lambda f: f.sort_key()):
        spec_lines = {p.line for p in finding.provenance if p.path == spec_path}
        rules = [e.rule for e in edits.values() if lines.get(e.spec, set()) & spec_lines]
        # else the edit its message names (the last written of them: one at a time, the solver retries)
        named = [e.rule for e in edits.values() if e.spec in finding.message
                 or re.search(rf"\b{re.escape(e.spec.rsplit('.', 1)[-1])}\b", finding.message)]
        rules = rules or named[-1:] or [list(edits.values())[-1].rule]
        for rule in dict.fromkeys(rules):
            if rule in out:
                continue
            rule_edits = [e for e in edits.values() if e.rule == rule]
            written = ", ".join(f"{e.spec}: {format_value(e.value)}" for e in rule_edits)
            code = _unique(p for p in finding.provenance if p.path != spec_path)
            out[rule] = Dropped(rule, rule_edits[0].rule_name, rule_edits,
                                f"writing {written} cannot train: {finding.message}", code,
                                f"with `{written}` written the variant cannot train: {finding.message}", code)
    return out


def _unique(items: Iterable[Provenance]) -> list[Provenance]:
    return list(dict.fromkeys(items))


def _written_lines(document: SpecDocument, solution: Solution) -> dict[str, set[int]]:
    """Each edit's lines in the new text: its written paths and everything below them."""
    return _edit_lines(document, solution.text, solution.name, solution.edits)


def _edit_lines(document: SpecDocument, text: str, name: str, edits: Iterable[Edit]) -> dict[str, set[int]]:
    from brax_diff.extractors.slm.spec import read_spec_file

    lines = read_spec_file(text, document.path, document.sets).resolve(name).lines
    out: dict[str, set[int]] = {}
    for edit in edits:
        for write in edit.writes:
            out.setdefault(edit.spec, set()).update(
                line for path, line in lines.items() if path[:len(write.path)] == write.path)
    return out


# --------------------------------------------------------------------------------------
# The residual: what still differs once the variant is written, and why
# --------------------------------------------------------------------------------------


def _value(fact: Fact | None) -> Any:
    return None if fact is None or fact.is_unknown else fact.value


def _shown(fact: Fact | None) -> str:
    if fact is None:
        return "—"
    return "unknown" if fact.is_unknown else format_value(fact.value)


def _code_lines(fact: Fact | None, spec_path: str) -> list[Provenance]:
    return [p for p in (fact.provenance if fact else ()) if p.path != spec_path][:3]


def residual(solution: Solution, slm_after: Extraction | None = None, brax: Extraction | None = None,
             table: RuleTable | None = None, read_from: str | None = None) -> dict:
    """The residual report's model (JSON-native). ``slm_after`` (with ``brax`` and ``table``):
    the variant as read back from where it was written, instead of the solver's last reading.
    ``read_from`` says where the SLM-Lab spec was read back from when it is not the work tree
    (a copy written by --output, or the text in memory of a dry run)."""
    after, slm = solution.after, solution.slm_after
    if slm_after is not None:
        after, slm = _classified(brax, slm_after, table), slm_after
    before = {c.key: c for c in solution.before}
    edits_by_rule: dict[str, list[Edit]] = {}
    for edit in solution.edits:
        edits_by_rule.setdefault(edit.rule, []).append(edit)
    groups: dict[str, list[dict]] = {name: [] for name, _ in GROUPS}
    matched = []
    for c in after:
        old = before.get(c.key)
        if c.status == "match":
            if old is not None and old.status != "match":
                matched.append(c.key)
            continue
        group, row = _residual_row(c, old, solution, edits_by_rule)
        groups[group].append(row)
    old_findings = {(f.kind, f.message) for f in solution.slm_before.findings}
    added = [f.to_json() for f in slm.findings
             if (f.kind, f.message) not in old_findings and f.severity in ("ERROR", "IMPORTANT", "WARNING")]
    status_after = {c.key: c.status for c in after}
    written = [{**edit.to_json(), "matches": [k for k in edit.keys if status_after.get(k) == "match"]}
               for edit in solution.edits]
    # what the report's Fix column says of each key, from this same solution
    keyed = outcomes(solution)
    return {
        "variant": solution.name,
        "base_variant": solution.base_variant,
        "scope": {**{k: v for k, v in sorted(solution.context.items()) if k != "sources"},
                  "fixes": solution.scope.label},
        "sources": _read_sources(solution.context.get("sources", []), slm, read_from),
        "written": written,
        "matched": matched,
        "residual": groups,
        "findings_added": added,
        "dropped": [{"rule": d.rule, "rule_name": d.rule_name, "why": d.why} for d in solution.dropped.values()],
        "rounds": solution.rounds,
        "settled": solution.settled,
        "outcomes": keyed,
    }


def _read_sources(sources: list[dict], slm: Extraction, read_from: str | None = None) -> list[dict]:
    """The sources, SLM-Lab's as the variant was read back (a work tree lists the files it changed)."""
    read = slm.sources.get("slm")
    out = [{**s, **read.to_json()} if s["name"] == "slm" and read is not None else s for s in sources]
    return [{**s, "read_from": read_from} if s["name"] == "slm" and read_from else s for s in out]


def _residual_row(c: Classified, old: Classified | None, solution: Solution,
                  edits_by_rule: dict[str, list[Edit]]) -> tuple[str, dict]:
    """Which group a difference left after the fix belongs to, and its row."""
    brax_fact, slm_fact = c.difference.brax, c.difference.slm
    row = {"key": c.key, "brax": _value(brax_fact), "slm": _value(slm_fact), "rule": c.rule, "rule_name": c.rule_name}
    code = [p.to_json() for p in _code_lines(slm_fact, solution.spec_path)]
    if c.status == "unknown":
        return "unknown", {**row, "why": c.difference.reason}
    own = edits_by_rule.get(c.rule, []) if c.key not in solution.blocked else []
    written = ", ".join(f"{e.spec}: {format_value(e.value)}" for e in own)
    was = old.difference.slm if old is not None else None
    if old is not None and (old.status == "match" or _moved(was, slm_fact)):
        by = _attributed(solution, slm_fact)
        if not set(by) & {e.spec for e in own}:  # moved by other fixes' keys
            return "introduced", {**row, "slm_before": _value(was), "by": by, "where": code,
                                  "why": _why_introduced(brax_fact, slm_fact, c, solution)}
        return "code_change", {**row, "where": code,
                               "why": f"its fix is written ({written}) and {c.key} reads back as {_shown(slm_fact)}, "
                                      f"not Brax's: {slm_fact.note if slm_fact and slm_fact.note else 'the code decides'}"}
    if c.rule in solution.dropped:
        drop = solution.dropped[c.rule]
        return "code_change", {**row, "why": drop.why, "where": [p.to_json() for p in drop.where[:3]] or code}
    why = solution.inexpressible.get(c.key) or _writable(c)
    if why is not None and c.key not in solution.blocked:
        return "code_change", {**row, "why": why, "where": code}
    if own:
        return "code_change", {**row, "where": code,
                               "why": f"{c.rule}'s fix is written ({written}) and {c.key} stays {_shown(slm_fact)}: "
                                      f"{slm_fact.note if slm_fact and slm_fact.note else 'the code decides it'}"}
    if c.key in solution.blocked:
        rule, spec = solution.blocked[c.key]
        why = f"its fix sets {spec}, which {rule}'s fix sets (earlier in the recommended order)"
    elif not solution.scope.allows(c.key):
        why = f"outside {solution.scope.label}"
    else:
        why = "the fixes did not settle" if not solution.settled else "no fix moved it"
    return "not_applied", {**row, "why": why}


def _moved(was: Fact | None, now: Fact | None) -> bool:
    if was is None or now is None:
        return was is not now
    if was.is_unknown or now.is_unknown:
        return was.is_unknown != now.is_unknown
    return not values_equal(was.value, now.value)


def _attributed(solution: Solution, fact: Fact | None) -> list[str]:
    """The written spec keys a moved value comes from: those on its lines, else those its
    note names, else every written key."""
    lines = {p.line for p in (fact.provenance if fact else ()) if p.path.endswith((".yaml", ".yml"))}
    found = [spec for spec, written in solution.written_lines.items() if written & lines]
    if not found and fact is not None and fact.note:
        found = [e.spec for e in solution.edits if f"spec: {e.spec}" in fact.note]
    return found  # none: the written keys move it through the code (the row names its code lines)


def _why_introduced(brax_fact: Fact | None, slm_fact: Fact | None, c: Classified, solution: Solution) -> str:
    parts = []
    if brax_fact is not None and brax_fact.note:
        parts.append(f"Brax: {brax_fact.note}")
    if slm_fact is not None and slm_fact.note:
        parts.append(f"SLM-Lab: {slm_fact.note}")
    if c.key in solution.blocked:
        rule, spec = solution.blocked[c.key]
        parts.append(f"its own fix ({c.rule}) would set {spec}, which {rule} sets")
    elif c.rule in solution.dropped:
        parts.append(solution.dropped[c.rule].why)
    return "; ".join(parts) or (c.rationale or "")


# --------------------------------------------------------------------------------------
# Outcomes: one per differing key, what the report's Fix column and recommended order say
# --------------------------------------------------------------------------------------


def _spec_summary(edits: Iterable[Edit]) -> str:
    return "set " + ", ".join(f"`{e.spec}: {_shown_value(e.value)}`" for e in edits)


def _shown_value(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value)


def outcomes(solution: Solution) -> dict[str, dict]:
    """Each key that differs before the fix (with a severity), and what the solver made of it:

    * ``{"kind": "spec", "edits": [...], "summary": "set `a: v`", "moves": [...]}``: these
      edits are written, the key reads back as Brax's and the variant still trains; ``moves``
      lists the other keys the edits move to a value unlike Brax's (a new difference, or
      another value of one);
    * ``{"kind": "code", "summary": "code change", "reason": ..., "where": [...]}``: no spec
      edit makes it match; ``reason`` says why (None: the rule's own fix is a code change),
      ``where`` the SLM-Lab lines that decide it.

    ``fix`` writes exactly the edits of the first kind; the report shows them (JSON-native)."""
    after = {c.key: c for c in solution.after}
    moved = _moves(solution)
    out: dict[str, dict] = {}
    for c in solution.before:
        if c.severity is None or c.status in ("match", "unknown"):
            continue
        now = after.get(c.key)
        taking = [e for e in solution.edits if c.key in e.keys]
        if now is not None and now.status == "match" and not taking:  # another rule's edit moved it
            by = set(_attributed(solution, now.difference.slm))
            taking = [e for e in solution.edits if e.spec in by]
        if now is not None and now.status == "match" and not taking:
            out[c.key] = {"kind": "spec", "summary": "matches with the other spec edits written", "edits": [],
                          "moves": [], "reason": None, "where": []}
            continue
        if now is not None and now.status == "match" and taking:
            out[c.key] = {"kind": "spec", "summary": _spec_summary(taking),
                          "edits": [{"spec": e.spec, "value": e.value, "rule": e.rule} for e in taking],
                          "moves": sorted((m for e in taking for m in moved.get(e.spec, [])),
                                          key=lambda m: m["key"]),
                          "reason": None, "where": []}
            continue
        out[c.key] = {"kind": "code", "summary": "code change", "edits": [], "moves": [],
                      **_code_reason(c, now, taking, solution)}
    for outcome in out.values():  # a key two edits move is listed once per edit: once is enough
        outcome["moves"] = list({m["key"]: m for m in outcome["moves"]}.values())
    return out


def _code_reason(c: Classified, now: Classified | None, taking: list[Edit], solution: Solution) -> dict:
    """Why no spec edit fixes ``c`` (None: its rule's fix is a code change), and the lines."""
    code = [p.to_json() for p in _code_lines(now.difference.slm if now else c.difference.slm, solution.spec_path)]
    if c.rule in solution.dropped:
        drop = solution.dropped[c.rule]
        return {"reason": drop.reason or drop.why, "where": [p.to_json() for p in drop.reason_where[:3]] or code}
    if c.key in solution.blocked:
        rule, spec = solution.blocked[c.key]
        edit = next((e for e in solution.edits if e.spec == spec), None)
        value = f" to {format_value(edit.value)}" if edit is not None else ""
        shown = _shown(now.difference.slm) if now is not None else "?"
        return {"reason": f"its fix would set `{spec}`, which {rule}'s fix sets{value} (one value per spec key); "
                          f"with it, {c.key} reads {shown}", "where": code}
    if taking:
        written = ", ".join(f"{e.spec}: {format_value(e.value)}" for e in taking)
        shown = _shown(now.difference.slm) if now is not None else "?"
        return {"reason": f"with `{written}` written, {c.key} reads back as {shown}, not Brax's "
                          f"{format_value(c.difference.brax_value)}", "where": code}
    if c.fix is not None and not c.fix.spec:
        return {"reason": None, "where": code}
    why = solution.inexpressible.get(c.key) or _writable(c)
    if why is None:
        why = "the fixes did not settle" if not solution.settled else "no fix the spec can express moved it"
    return {"reason": why, "where": code}


def _moves(solution: Solution) -> dict[str, list[dict]]:
    """Spec key -> the keys its edit moves to a value unlike Brax's (matching before or not)."""
    before = {c.key: c for c in solution.before}
    out: dict[str, list[dict]] = {}
    for c in solution.after:
        old = before.get(c.key)
        if c.status in ("match", "unknown") or old is None or not _moved(old.difference.slm, c.difference.slm):
            continue
        move = {"key": c.key, "brax": _value(c.difference.brax), "from": _value(old.difference.slm),
                "to": _value(c.difference.slm)}
        for spec in _attributed(solution, c.difference.slm) or [e.spec for e in solution.edits
                                                                 if c.key in e.keys]:
            out.setdefault(spec, []).append(move)
    return out


def report_outcomes(brax_extractor: Any, slm_extractor_class: Any, slm_snapshot: Any, *, spec: str,
                    sets: dict[str, str] | None, mapping: dict | None, family: str | None, env: str | None,
                    variant: str, brax: Extraction, slm_before: Extraction, table: RuleTable) -> dict:
    """What `fix` makes of every fix of the report's scope (its variant, every fix the spec
    can express), for the report: ``{"checked": True, "keys": {key: outcome}}`` (see
    :func:`outcomes`), or ``{"checked": False, "why": ...}`` when the solver cannot run here
    (the spec cannot be read back, a variant it cannot write)."""
    try:
        inputs = prepare(brax_extractor, slm_extractor_class, slm_snapshot, spec=spec, sets=sets, mapping=mapping,
                         family=family, env=env, variant=variant, name=None, any_free_name=True, brax=brax,
                         slm_before=slm_before)
        solution = inputs.solve(table, FixScope("every fix the spec can express"))
    except BraxDiffError as exc:
        return {"checked": False, "why": str(exc)}
    return {"checked": True, "keys": outcomes(solution)}


# --------------------------------------------------------------------------------------
# Explain: each way a rule offers to fix a key, side by side
# --------------------------------------------------------------------------------------


def options_for(key: str, table: RuleTable, before: list[Classified]) -> tuple[str, list[tuple[str, str | None, str]]]:
    """(rule code, [(label, alternative name or None, text)]) for the rule covering ``key``;
    the rule's own fix comes first, its text as the report renders it."""
    if key not in KEYS:
        raise FixError(f"--explain {key}: unknown key (the canonical keys: brax-diff rules, or docs/rules.md)")
    rule = table.rule_for(key)
    if rule is None:
        raise FixError(f"--explain {key}: no rule covers it, so it has no fix")
    rendered = next((c.fix.text for c in before if c.key == key and c.fix is not None), rule.fix.text)
    options = [(rule.fix.name or "fix", None, rendered)]
    options += [(a.name, a.name, a.text) for a in rule.fix.alternatives]
    return rule.code, options


def explain(inputs: "FixInputs", table: RuleTable, scope: FixScope, key: str,
            step: Callable[[str], None] = lambda _message: None) -> dict:
    """``fix --explain KEY``: the scope solved once per option of KEY's rule, side by side.
    The rule's own fix is described as rendered in the last solution (so its numbers are the
    ones written, after the other fixes moved what they depend on), else as the report has it."""
    before = inputs.before(table)
    rule, options = options_for(key, table, before)
    models, described = [], []
    for label, alternative, text in options:
        step(f"writing and reading back {inputs.name} ({label})")
        solution = inputs.solve(table, scope.with_alternative(rule, alternative))
        if alternative is None:
            text = next((c.fix.text for c in solution.after if c.key == key and c.fix is not None), text)
        models.append(residual(solution))
        described.append((label, alternative, text))
    return explain_model(key, rule, described, models, inputs.brax, inputs.slm_before, table)


def _cell_of(model: dict, key: str) -> dict:
    for name, _ in GROUPS:
        for row in model["residual"][name]:
            if row["key"] == key:
                return {"group": name, "slm": row["slm"]}
    return {"group": "match", "slm": None}


def explain_model(key: str, rule: str, options: list[tuple[str, str | None, str]], residuals: list[dict],
                  brax: Extraction, slm_before: Extraction, table: RuleTable) -> dict:
    """The side-by-side model: one column per option; a row for the explained key, the
    rule's other keys, and every key the options leave in different states; the keys every
    option leaves the same are listed once."""
    keys = [key] + [k for k in (table.get(rule).keys if table.get(rule) else ()) if k != key]
    seen = []
    for model in residuals:
        for name, _ in GROUPS:
            seen += [row["key"] for row in model["residual"][name] if row["key"] not in seen]
    same = []
    for k in seen:
        cells = [_cell_of(model, k) for model in residuals]
        if k in keys:
            continue
        if all(c == cells[0] for c in cells):
            same.append({"key": k, **cells[0]})
        else:
            keys.append(k)
    rows = [{"key": k, "brax": _value(brax.facts.get(k)), "slm_before": _value(slm_before.facts.get(k)),
             "cells": [_cell_of(model, k) for model in residuals]} for k in keys]
    columns = []
    for (label, name, text), model in zip(options, residuals):
        columns.append({"option": label, "alternative": name, "text": text,
                        "written": [w for w in model["written"] if w["rule"] == rule],
                        "findings_added": model["findings_added"]})
    return {"key": key, "rule": rule, "options": columns, "rows": rows, "same_in_every_option": same}


# --------------------------------------------------------------------------------------
# From extractors to a solution: what the command line calls
def why_it_cannot_train(solution: Solution) -> str | None:
    """Why the variant written cannot train at its ref (the extractors' verdict, with its
    line), None if it can; a reason its base variant shares is said to be inherited."""
    from brax_diff.extractors.slm.extractor import trains

    trains_now, why = trains(solution.slm_after)
    if trains_now:
        return None
    inherited = trains(solution.slm_before)[1] == why
    return why + (f"; inherited from {solution.base_variant}, which no fix in scope changes" if inherited else "")


# --------------------------------------------------------------------------------------


@dataclass
class FixInputs:
    """Everything :func:`solve` needs for one scope, read from the snapshots."""

    brax: Extraction
    slm_before: Extraction
    document: SpecDocument
    variant: str
    name: str
    extract: Extract
    context: dict
    header: list[str]  # the comment above the variant; "{fixes}" is replaced by the scope's label
    reextract: Callable[[Any, str], Extraction]  # (snapshot, spec text or None) -> the written variant
    # For an environment: the variant with the setup its env builder makes (the report's row values).
    setup: Callable[[], Extraction] | None = None

    def before(self, table: RuleTable) -> list[Classified]:
        return _classified(self.brax, self.slm_before, table)

    def report_order(self, table: RuleTable) -> list[Classified]:
        """What the report's recommended order is numbered from: its rows (one difference, one
        row), over the keys its scope compares (a family: the keys it decides; an env: all)."""
        if self.context.get("env"):
            slm = self.slm_before.with_setup(self.setup()) if self.setup is not None else self.slm_before
            return classify(compare(self.brax, slm), table, fold=True)
        return classify(compare(self.brax, self.slm_before, [k for k in KEYS if k not in PER_ENVIRONMENT]), table,
                        fold=True)

    def solve(self, table: RuleTable, scope: FixScope) -> Solution:
        header = [line.replace("{fixes}", scope.label) for line in self.header]
        solution = solve(self.brax, self.slm_before, self.document, self.variant, self.name, self.extract, table,
                         scope, header)
        solution.context = dict(self.context)
        return solution


def check_spec_path(spec: str) -> str:
    """A spec path inside the repository: relative, with no ``..`` (a FixError otherwise)."""
    parts = spec.replace("\\", "/").split("/")
    if spec.startswith("/") or ".." in parts or not spec.strip():
        raise FixError(f"--spec {spec}: a path inside the SLM-Lab repository, such as "
                       "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml")
    return spec


def prepare(brax_extractor: Any, slm_extractor_class: Any, slm_snapshot: Any, *, spec: str,
            sets: dict[str, str] | None, mapping: dict | None, family: str | None, env: str | None,
            variant: str | None, name: str | None, any_free_name: bool = False,
            brax: Extraction | None = None, slm_before: Extraction | None = None) -> FixInputs:
    """Extract both sides of the scope, read the spec, and make the function that reads a
    spec text with the new variant back (the new variant is mapped like its base).
    ``any_free_name``: where the default name is taken, the first free ``<variant>_brax<N>``
    (verify reads the variant back and writes nothing, so its name is only a label).
    ``brax`` and ``slm_before``: the scope's extractions when the caller has them (the report)."""
    check_spec_path(spec)
    if env:
        family = brax_extractor.family_of(env)
        brax = brax if brax is not None else brax_extractor.env(env)
    else:
        if family not in brax_extractor.families():
            raise FixError(f"unknown family {family!r} (families: {', '.join(brax_extractor.families())})")
        if brax is None:  # what the family's environments train with, not its base config
            from ..facts.family import as_trained

            brax = as_trained(brax_extractor.family(family),
                              {e: brax_extractor.env(e) for e in brax_extractor.environments(family)})
    base = slm_extractor_class(slm_snapshot, spec=spec, sets=sets, mapping=mapping)
    chosen = variant or base.variant_for(family=family, env=env)
    if chosen not in base.variants():
        raise FixError(f"{spec}: no variant {chosen!r} (choose from: {', '.join(base.variants())})")
    slm_before = slm_before if slm_before is not None else base.variant(chosen)
    document = SpecDocument(slm_snapshot.read(spec), spec, sets)
    taken = set(document.spec_file.variants()) | set(document.top_level())
    if name is None and any_free_name:
        name = next(n for n in (f"{chosen}_brax" + (str(i) if i else "") for i in range(len(taken) + 2))
                    if n not in taken)
    name = name or f"{chosen}_brax"
    if name in taken:
        raise FixError(f"{spec} already has {name!r}; choose another --name")
    extended = copy.deepcopy(base.mapping)
    extended.setdefault("variants", {})[name] = copy.deepcopy(
        extended.get("variants", {}).get(chosen) or {"family": family})

    def reextract(snapshot: Any, text: str | None) -> Extraction:
        source = snapshot if text is None else OverlaySnapshot(snapshot, {spec: text})
        return slm_extractor_class(source, spec=spec, sets=sets, mapping=extended).variant(name)

    sources = [{"name": n, "title": t, **info.to_json()} for n, t, info in
               [("brax", "Brax", brax.sources.get("brax")), ("playground", "MuJoCo Playground",
                                                            brax.sources.get("playground")),
                ("slm", "SLM-Lab", slm_snapshot.info())] if info is not None]
    shas = ", ".join(f"{s['title']} {s['commit'][:7]}" for s in sources if s["name"] != "slm")
    header = [f"{name}: {chosen} with {{fixes}} ({env or family}; {shas}).",
              "Each key it sets names its rule and the Brax line it follows (brax-diff fix)."]
    context = {"family": family, "env": env, "spec": spec, "sources": sources}
    setup = None
    if env and hasattr(slm_extractor_class, "setup"):
        def setup() -> Extraction:
            return slm_extractor_class(slm_snapshot, spec=spec, sets=sets, mapping=mapping,
                                       playground=getattr(brax_extractor, "playground", None)).setup(chosen, env)
    return FixInputs(brax, slm_before, document, chosen, name, lambda text: reextract(slm_snapshot, text), context,
                     header, reextract, setup)


def written_variant(brax_extractor: Any, slm_extractor_class: Any, slm_snapshot: Any, *, spec: str,
                    sets: dict[str, str] | None, mapping: dict | None, env: str, variant: str | None,
                    keys: list[str] | None, table: RuleTable) -> Extraction:
    """The variant ``fix`` writes for ``env``'s variant and the fixes of ``keys`` (None: every
    fix the spec can express), read back from the text in memory: what verify's spec_fixes arm
    trains (``verify`` and ``report --verify`` both ask here). Nothing is written."""
    inputs = prepare(brax_extractor, slm_extractor_class, slm_snapshot, spec=spec, sets=sets, mapping=mapping,
                     family=None, env=env, variant=variant, name=None, any_free_name=True)
    try:
        scope = choose_scope(inputs.before(table), table, keys=keys)
    except FixError as exc:
        raise FixError(f"{exc} (--all-fixes settings moves it in the trainer instead)") from None
    written = inputs.solve(table, scope).slm_after
    if written is None or not hasattr(slm_extractor_class, "setup"):
        return written
    # What the env builder makes of env for the written variant's base (a spec fix does not move it).
    base = slm_extractor_class(slm_snapshot, spec=spec, sets=sets, mapping=mapping,
                               playground=getattr(brax_extractor, "playground", None))
    return written.with_setup(base.setup(inputs.variant, env))


# --------------------------------------------------------------------------------------
# Rendering (Markdown, so docs can quote it) and the unified diff
# --------------------------------------------------------------------------------------


def unified_diff(before: str, after: str, path: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))


def _where(items: list[dict]) -> str:
    return md_cell(", ".join(f"{p['path']}:{p['line']}" for p in items)) or "—"  # upstream paths


def _sources_line(sources: list[dict]) -> str:
    parts = []
    for s in sources:
        ref = s.get("ref") or ""
        text = f"{s['title']} {ref} ({s['commit'][:7]})" if ref and not s["commit"].startswith(ref) else \
            f"{s['title']} {s['commit'][:7]}"
        if s.get("read_from"):
            text += f", its {', '.join(s.get('uncommitted') or ['spec'])} read back from {s['read_from']}"
        elif s.get("uncommitted"):
            text += " with uncommitted " + ", ".join(s["uncommitted"])
        parts.append(text)
    return "; ".join(parts)


def render_residual(model: dict) -> str:
    """The residual report as Markdown."""
    scope = model["scope"]
    what = scope.get("env") or scope.get("family") or ""
    lines = [f"# brax-diff fix: {model['variant']} ({model['base_variant']} with {scope['fixes']}), {what}", ""]
    if model.get("sources"):
        lines += [_sources_line(model["sources"]), ""]
    written = model["written"]
    lines.append(f"## Written: {len(written)} spec key(s); {len(model['matched'])} difference(s) now match Brax")
    lines.append("")
    if written:
        lines += ["| Spec key | Was | Now | Rule | Brax line | Now matches |", "| --- | --- | --- | --- | --- | --- |"]
        for w in written:
            line = w["brax_line"]
            where = f"{line['path']}:{line['line']}" if line else "—"
            rule = f"{w['rule']} {w['rule_name']}" + (f" ({w['option']})" if w["option"] else "")
            was = w["was"] if w["was"] == _ABSENT else format_value(w["was"])
            lines.append(f"| {md_code(w['spec'])} | {md_cell(was)} | {_cell(w['value'])} | {rule} | "
                         f"{md_cell(where)} | {', '.join(md_code(k) for k in w['matches']) or '—'} |")
        lines.append("")
    else:
        lines += ["Nothing to write: no difference in scope has a fix the spec can express.", ""]
    total = sum(len(v) for v in model["residual"].values())
    lines += [f"## Residual: {total} difference(s) remain", ""]
    for name, title in GROUPS:
        rows = model["residual"][name]
        if not rows:
            continue
        lines += [f"### {title} ({len(rows)})", ""]
        if name == "code_change":
            lines += ["| Key | Brax | SLM-Lab | Rule | SLM-Lab code | Why |", "| --- | --- | --- | --- | --- | --- |"]
            lines += [f"| {md_code(r['key'])} | {_cell(r['brax'])} | {_cell(r['slm'])} | {r['rule'] or '—'} | "
                      f"{_where(r['where'])} | {md_cell(r['why'])} |" for r in rows]
        elif name == "introduced":
            lines += ["| Key | Brax | SLM-Lab before → after | By | Why |", "| --- | --- | --- | --- | --- |"]
            lines += [f"| {md_code(r['key'])} | {_cell(r['brax'])} | {_cell(r['slm_before'])} → {_cell(r['slm'])} | "
                      f"{', '.join(md_code(s) for s in r['by']) or 'the written keys, through ' + _where(r['where'])} | "
                      f"{md_cell(r['why'])} |" for r in rows]
        else:
            lines += ["| Key | Brax | SLM-Lab | Why |", "| --- | --- | --- | --- |"]
            lines += [f"| {md_code(r['key'])} | {_cell(r['brax'])} | {_cell(r['slm'])} | {md_cell(r['why'])} |"
                      for r in rows]
        lines.append("")
    if model["findings_added"]:
        lines += ["### Findings the variant adds", ""]
        for f in model["findings_added"]:
            lines.append(f"- {f['severity']} {f['kind']}: {md_cell(f['message'])} ({_where(f['provenance'])})")
        lines.append("")
    if not model["settled"]:
        lines += [f"The fixes did not settle in {model['rounds']} rounds; the last values read back are shown.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _cell(value: Any) -> str:
    return md_code(format_value(value))


def render_explain(model: dict) -> str:
    """The options of one key's rule, their residuals side by side, as Markdown."""
    options = model["options"]
    lines = [f"# brax-diff fix --explain {model['key']} ({model['rule']})", ""]
    if len(options) == 1:
        lines += [f"{model['rule']} offers one way to fix it.", ""]
    for column in options:
        written = ", ".join(f"`{w['spec']}: {format_value(w['value'])}`" for w in column["written"]) or "nothing"
        lines.append(f"- **{column['option']}**" + (f" (`--alternative {column['alternative']}`)"
                                                    if column["alternative"] else "")
                     + f": {column['text']} Writes {written}.")
    lines += ["", "| Key | Brax | SLM-Lab before | " + " | ".join(c["option"] for c in options) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in options) + " |"]
    for row in model["rows"]:
        cells = ["match" if cell["group"] == "match" else f"{_cell(cell['slm'])} ({cell['group'].replace('_', ' ')})"
                 for cell in row["cells"]]
        lines.append(f"| `{row['key']}` | {_cell(row['brax'])} | {_cell(row['slm_before'])} | " + " | ".join(cells)
                     + " |")
    lines.append("")
    if model["same_in_every_option"]:
        lines += ["The same under every option: " + ", ".join(
            f"`{r['key']}` ({r['group'].replace('_', ' ')})" for r in model["same_in_every_option"]) + ".", ""]
    for column in options:
        for f in column["findings_added"]:
            if f["severity"] == "ERROR":
                lines.append(f"- {column['option']} cannot train: {f['kind']}: {md_cell(f['message'])}")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_json(model: dict) -> str:
    return dumps(model)


__all__ = ["FixScope", "FixError", "OverlaySnapshot", "Solution", "choose_scope", "solve", "residual", "outcomes",
           "report_outcomes",
           "options_for", "explain", "explain_model", "written_variant", "render_residual", "render_explain", "unified_diff",
           "render_json", "Edit"]
