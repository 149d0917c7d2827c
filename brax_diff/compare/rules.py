"""The rule table: how much each difference matters, and what to set in SLM-Lab.

The table is data (``brax_diff/data/rules.yaml``), in the spirit of ruff's rule registry:
each rule has a code (``BD001``), a name, the canonical keys it covers, its topic, a
severity given as ordered cases over the two values, a rationale, a fix naming the
SLM-Lab spec key and value, a risk, and references. Users extend or override it with a
YAML file of the same shape (``--rules FILE`` or ``rules = "FILE"`` in the settings):
a known code replaces the fields it names, a new code adds a rule, ``disabled: true``
removes one. ``sides: [slm]`` says a rule's rationale and fix are written for one side
compared with Brax (:data:`RULE_SIDES`); against another side it still classifies, and its
rationale says whom it was written for.

Severity cases use a small declarative predicate language, compiled once when the table
loads (nothing is ``eval``-ed; fix templates run in Jinja's sandbox). A predicate is a
name or a one-entry mapping; see :data:`PREDICATES` and ``docs/rules.md``::

    severity:
      - when: {all_of: [brax_larger, {other: {transitions_per_update: brax_larger}}]}
        then: IMPORTANT
      - when: differs
        then: MINOR

The first case that holds decides; a difference no case covers is MINOR; a match has no
severity.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml
from jinja2 import TemplateError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .pairing import Difference, is_number, values_equal
from ..errors import ConfigError
from ..facts.model import format_value
from ..safety.io import read_text
from ..safety.limits import LimitExceeded, load_json
from ..safety.limits_yaml import load_yaml, load_yaml_node, yaml_error_line
from ..safety.sandbox import TemplateLimit, check_template, render_bounded, sandbox
from .severity import SEVERITIES, at_or_above, severity_rank  # noqa: F401 (re-exported)
from ..facts.vocabulary import FOLDS, KEYS, TOPIC_TITLES

# Severities, most severe first. A match has none.
# Risk of applying a fix, lowest first: the recommended order takes low-risk fixes first
# within a severity, as the reference report does.
RISK_LEVELS = ("low", "medium", "high")
DEFAULT_SEVERITY = "MINOR"  # a difference no case covers
SHIPPED_RULES = Path(__file__).parent.parent / "data" / "rules.yaml"

_CODE = re.compile(r"^[A-Z]{2,4}\d{3}$")
_SPEC_IN_NOTE = re.compile(r"spec:\s*([A-Za-z_][\w.\[\]-]*)")
_RULE_FIELDS = {"code", "name", "topic", "keys", "severity", "rationale", "fix", "risk", "references", "disabled",
                "sides"}
# The sides compared with Brax that a rule's `sides:` may name (its rationale and fix are written
# for them; a rule without `sides:` is written for every side).
RULE_SIDES = {"slm": "SLM-Lab", "rsl_rl": "RSL-RL"}
_FIX_FIELDS = {"spec", "default_spec", "value", "text", "name", "alternatives"}
_ALTERNATIVE_FIELDS = {"name", "set", "text"}
_OPTION_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


# --------------------------------------------------------------------------------------
# The predicate language
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What a predicate sees: the difference being classified and all others by key."""

    difference: Difference
    by_key: dict[str, Difference]
    other: str = "SLM-Lab"  # the title of the side compared with Brax: what a reason calls it

    def on(self, key: str) -> "Context | None":
        other = self.by_key.get(key)
        return None if other is None else Context(other, self.by_key, self.other)


@dataclass(frozen=True)
class Predicate:
    """A compiled predicate: ``test`` decides, ``text`` says it in words for the docs.

    A report says why a case held in a sentence about the values compared, not in the
    predicate's own terms: ``reason`` (else ``text``) for one difference; ``negated`` where
    "not" of this predicate has a plain statement of its own (a side's value is what it is);
    ``selects_key`` marks ``key_in``, which picks keys and gives no reason."""

    test: Callable[[Context], bool]
    text: str
    reason: Callable[[Context], str] | None = None
    negated: Callable[[Context], str] | None = None
    selects_key: bool = False

    def __call__(self, ctx: Context) -> bool:
        return self.test(ctx)

    def explain(self, ctx: Context) -> str:
        """Why this predicate holds for ``ctx``, in words a reader of the report follows."""
        return self.text if self.reason is None else self.reason(ctx)


def _values(ctx: Context) -> tuple[Any, Any, bool]:
    d = ctx.difference
    known = d.brax is not None and d.slm is not None and not d.brax.is_unknown and not d.slm.is_unknown
    return d.brax_value, d.slm_value, known


def _numbers(ctx: Context) -> tuple[float, float] | None:
    b, s, both = _values(ctx)
    return (b, s) if both and is_number(b) and is_number(s) else None


def _ratio(a: float, b: float) -> float | None:
    if a == 0 or b == 0 or (a > 0) != (b > 0):
        return None
    return max(abs(a), abs(b)) / min(abs(a), abs(b))


def _size(value: Any) -> float | None:
    """What "larger" means: a number itself, a list by its length."""
    if is_number(value):
        return value
    if isinstance(value, list):
        return len(value)
    return None


def _larger(side: str) -> Callable[[Context], bool]:
    def test(ctx: Context) -> bool:
        b, s, both = _values(ctx)
        if not both or ctx.difference.status == "match":
            return False
        sb, ss = _size(b), _size(s)
        if sb is None or ss is None:
            return False
        return sb > ss if side == "brax" else ss > sb
    return test


def _ratio_at_least(threshold: float, complement: bool = False) -> Callable[[Context], bool]:
    def test(ctx: Context) -> bool:
        nums = _numbers(ctx)
        if nums is None:
            return False
        b, s = (1 - nums[0], 1 - nums[1]) if complement else nums
        ratio = _ratio(b, s)
        return ratio is not None and ratio >= threshold * (1 - 1e-12)
    return test


def _spoken(value: Any) -> str:
    """A value in a sentence: none for null, 2.718 for e (facts.format_value otherwise)."""
    return "none" if value is None else format_value(value)


def _no_value(ctx: Context) -> str | None:
    """Which side lacks the key altogether, when one does."""
    status = ctx.difference.status
    return {"missing_brax": "Brax has no value", "missing_slm": f"{ctx.other} has no value"}.get(status)


def _side_value(side: str) -> Callable[[Context], str]:
    return lambda ctx: f"{_side(side, ctx)}'s value is {_spoken(getattr(ctx.difference, f'{side}_value'))}"


def _larger_reason(side: str) -> Callable[[Context], str]:
    def reason(ctx: Context) -> str:
        value = getattr(ctx.difference, f"{side}_value")
        name = _side(side, ctx)
        return f"{name}'s list is longer" if isinstance(value, list) else f"{name}'s value is larger"
    return reason


# Nullary predicates, written as a bare name: (test, text for the docs, reason or None).
_NULLARY: dict[str, tuple[Callable[[Context], bool], str, Callable[[Context], str] | None]] = {
    "equal": (lambda c: c.difference.status == "match", "the values are equal", None),
    "differs": (lambda c: c.difference.status not in ("match", "unknown"), "the values differ (or one is missing)",
                lambda c: _no_value(c) or "the values differ"),
    "missing": (lambda c: c.difference.status.startswith("missing"), "one side has no value",
                lambda c: _no_value(c) or "one side has no value"),
    "brax_missing": (lambda c: c.difference.status == "missing_brax", "Brax has no value", None),
    "slm_missing": (lambda c: c.difference.status == "missing_slm", "SLM-Lab has no value",
                    lambda c: f"{c.other} has no value"),
    "brax_larger": (_larger("brax"), "Brax's value is larger (a list: longer)", _larger_reason("brax")),
    "slm_larger": (_larger("slm"), "SLM-Lab's value is larger (a list: longer)", _larger_reason("slm")),
    "length_differs": (
        lambda c: isinstance(c.difference.brax_value, list) and isinstance(c.difference.slm_value, list)
        and len(c.difference.brax_value) != len(c.difference.slm_value),
        "both are lists of different lengths", lambda c: "the lists differ in length"),
}

# What `not: NAME` says when it holds.
_NULLARY_NEGATED = {
    "equal": "the values are not equal", "differs": "the values do not differ", "missing": "both sides have a value",
    "brax_missing": "Brax has a value", "slm_missing": "SLM-Lab has a value",
    "brax_larger": "Brax's value is not larger", "slm_larger": "SLM-Lab's value is not larger",
    "length_differs": "the values are not lists of different lengths",
}


def _number_arg(name: str, arg: Any, where: str) -> float:
    if not is_number(arg) or arg <= 0:
        raise ConfigError(f"{where}: {name} needs a positive number, got {arg!r}")
    return float(arg)


def _list_arg(name: str, arg: Any, where: str) -> list:
    if not isinstance(arg, list) or not arg:
        raise ConfigError(f"{where}: {name} needs a non-empty list, got {arg!r}")
    return arg


def _compile_unary(name: str, arg: Any, where: str) -> Predicate:
    if name in ("ratio_at_least", "complement_ratio_at_least"):
        n = _number_arg(name, arg, where)
        if name == "ratio_at_least":
            return Predicate(_ratio_at_least(n), f"one value is at least {n:g}x the other")
        return Predicate(_ratio_at_least(n, complement=True),
                         f"1 - value on one side is at least {n:g}x the other's (effective horizon)",
                         lambda c, n=n: f"one side's effective horizon, 1 / (1 - value), is at least {n:g}x the other's")
    if name == "abs_diff_at_least":
        n = _number_arg(name, arg, where)
        def test(ctx: Context, n=n) -> bool:
            nums = _numbers(ctx)
            return nums is not None and abs(nums[0] - nums[1]) >= n * (1 - 1e-12)
        return Predicate(test, f"the values are at least {n:g} apart")
    if name in ("brax_is", "slm_is"):
        side = name.split("_")[0]
        def test(ctx: Context, side=side, arg=arg) -> bool:
            fact = getattr(ctx.difference, side)
            return fact is not None and not fact.is_unknown and values_equal(fact.value, arg)
        return Predicate(test, f"{_side(side)} is {_show(arg)}", _side_value(side), _side_value(side))
    if name in ("brax_below", "slm_below"):
        side, bound = name.split("_")[0], arg
        if not is_number(bound):
            raise ConfigError(f"{where}: {name} needs a number, got {bound!r}")
        def test(ctx: Context, side=side, bound=bound) -> bool:
            fact = getattr(ctx.difference, side)
            return fact is not None and not fact.is_unknown and is_number(fact.value) and fact.value < bound
        return Predicate(test, f"{_side(side)}'s value is below {_show(bound)}",
                         lambda c, side=side, bound=bound: f"{_side(side, c)}'s value "
                         f"{_spoken(getattr(c.difference, f'{side}_value'))} is below {_show(bound)}",
                         lambda c, side=side, bound=bound: f"{_side(side, c)}'s value is not below {_show(bound)}")
    if name in ("brax_below_key", "slm_below_key"):
        side, other = name.split("_")[0], arg
        _check_keys([other], where)
        def own(ctx: Context, side=side, other=other):
            sub = ctx.on(other)
            fact = None if sub is None else getattr(sub.difference, side)
            return None if fact is None or fact.is_unknown or not is_number(fact.value) else fact.value
        def test(ctx: Context, side=side) -> bool:
            fact, bound = getattr(ctx.difference, side), own(ctx)
            return (fact is not None and not fact.is_unknown and is_number(fact.value) and bound is not None
                    and 0 < fact.value < bound)
        return Predicate(test, f"{_side(side)}'s value is above 0 and below its own `{other}`",
                         lambda c, side=side, other=other: f"{_side(side, c)}'s value "
                         f"{_spoken(getattr(c.difference, f'{side}_value'))} is below its `{other}` of "
                         f"{_spoken(own(c))}",
                         lambda c, side=side, other=other: f"{_side(side, c)}'s value is not below its `{other}`")
    if name in ("brax_in", "slm_in"):
        side, choices = name.split("_")[0], _list_arg(name, arg, where)
        def test(ctx: Context, side=side, choices=choices) -> bool:
            fact = getattr(ctx.difference, side)
            return fact is not None and not fact.is_unknown and any(values_equal(fact.value, c) for c in choices)
        return Predicate(test, f"{_side(side)} is one of {', '.join(_show(c) for c in choices)}",
                         _side_value(side), _side_value(side))
    if name == "key_in":
        keys = _list_arg(name, arg, where)
        _check_keys(keys, where)
        return Predicate(lambda c, keys=tuple(keys): c.difference.key in keys,
                         f"the key is {' or '.join(f'`{k}`' for k in keys)}", selects_key=True)
    if name in ("any_of", "all_of"):
        parts = [compile_predicate(p, f"{where}.{name}[{i}]") for i, p in enumerate(_list_arg(name, arg, where))]
        if name == "any_of":
            return Predicate(lambda c, parts=parts: any(p(c) for p in parts),
                             "(" + " or ".join(p.text for p in parts) + ")",
                             lambda c, parts=parts: next(p for p in parts if p(c)).explain(c))
        return _all_of(parts)
    if name == "not":
        inner = compile_predicate(arg, f"{where}.not")
        return Predicate(lambda c, inner=inner: not inner(c), f"not {inner.text}",
                         inner.negated or (lambda c, inner=inner: f"it does not hold that {inner.text}"))
    if name == "other":
        if not isinstance(arg, dict) or len(arg) != 1:
            raise ConfigError(f"{where}: other needs one entry KEY: PREDICATE, got {arg!r}")
        (key, raw), = arg.items()
        _check_keys([key], where)
        inner = compile_predicate(raw, f"{where}.other.{key}")
        def test(ctx: Context, key=key, inner=inner) -> bool:
            sub = ctx.on(key)
            return sub is not None and inner(sub)
        return Predicate(test, f"for `{key}`: {inner.text}",
                         lambda c, key=key, inner=inner: f"for `{key}`, {inner.explain(c.on(key))}")
    known = sorted(set(_NULLARY) | set(PREDICATES))
    raise ConfigError(f"{where}: unknown predicate {name!r} (known: {', '.join(known)})")


# Predicates that take an argument, with what they mean (for errors and the docs).
PREDICATES = {
    "ratio_at_least": ("N", "both numbers, one at least N times the other"),
    "complement_ratio_at_least": ("N", "(1 - value) on one side at least N times the other's (discount horizons)"),
    "abs_diff_at_least": ("X", "both numbers, at least X apart"),
    "brax_is": ("V", "Brax's value equals V (null allowed)"),
    "slm_is": ("V", "SLM-Lab's value equals V (null allowed)"),
    "brax_below": ("N", "Brax's value is a number below N"),
    "slm_below": ("N", "SLM-Lab's value is a number below N"),
    "brax_below_key": ("KEY", "Brax's value is a number above 0 (0: none, as for a count of steps) and below "
                              "Brax's own value of KEY in the same scope"),
    "slm_below_key": ("KEY", "SLM-Lab's value is a number above 0 and below SLM-Lab's own value of KEY"),
    "brax_in": ("[V, ...]", "Brax's value is one of these"),
    "slm_in": ("[V, ...]", "SLM-Lab's value is one of these"),
    "key_in": ("[KEY, ...]", "the classified key is one of these (rules covering several keys)"),
    "any_of": ("[P, ...]", "one of the predicates holds"),
    "all_of": ("[P, ...]", "all of the predicates hold"),
    "not": ("P", "the predicate does not hold"),
    "other": ("{KEY: P}", "the predicate holds for another key's comparison"),
}
NULLARY_PREDICATES = {name: text for name, (_, text, _) in _NULLARY.items()}


def compile_predicate(raw: Any, where: str) -> Predicate:
    """A predicate from its YAML form; ConfigError naming ``where`` when it is malformed.

    A mapping with several entries means all of them.
    """
    if isinstance(raw, str):
        if raw not in _NULLARY:
            if raw in PREDICATES:
                raise ConfigError(f"{where}: predicate {raw!r} needs an argument ({raw}: {PREDICATES[raw][0]})")
            raise ConfigError(f"{where}: unknown predicate {raw!r} "
                              f"(known: {', '.join(sorted(set(_NULLARY) | set(PREDICATES)))})")
        test, text, reason = _NULLARY[raw]
        return Predicate(test, text, reason, lambda c, raw=raw: _NULLARY_NEGATED[raw].replace("SLM-Lab", c.other))
    if isinstance(raw, dict) and raw:
        parts = []
        for name, arg in raw.items():
            if name in _NULLARY:  # `{brax_larger: true}` reads naturally in YAML
                if arg is not True:
                    raise ConfigError(f"{where}: {name} takes no argument (write it bare or `{name}: true`)")
                parts.append(compile_predicate(name, where))
            else:
                parts.append(_compile_unary(str(name), arg, where))
        if len(parts) == 1:
            return parts[0]
        return _all_of(parts)
    raise ConfigError(f"{where}: a predicate is a name or a one-entry mapping, got {raw!r}")


def _all_of(parts: list[Predicate]) -> Predicate:
    """All of ``parts``; its reason joins theirs, leaving out ``key_in`` (the reader sees the key)."""
    def reason(ctx: Context, parts=parts) -> str:
        said = [p.explain(ctx) for p in parts if not p.selects_key] or [p.explain(ctx) for p in parts]
        return " and ".join(said)
    return Predicate(lambda c, parts=parts: all(p(c) for p in parts),
                     "(" + " and ".join(p.text for p in parts) + ")", reason)


def _side(side: str, ctx: Context | None = None) -> str:
    """``side``'s name: in a reason (``ctx``), the compared side's own title; in the docs, SLM-Lab's."""
    return "Brax" if side == "brax" else ctx.other if ctx is not None else "SLM-Lab"


def _show(value: Any) -> str:
    return json.dumps(value)


def _check_keys(keys: Iterable[Any], where: str) -> None:
    for key in keys:
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown canonical key {key!r} (see brax_diff/facts/vocabulary.py)")


# --------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    when: Predicate
    then: str
    raw: Any  # the YAML form, kept for `rules --format json`


@dataclass(frozen=True)
class Risk:
    level: str  # one of RISK_LEVELS
    text: str

    def to_json(self) -> dict:
        return {"level": self.level, "text": self.text}


@dataclass(frozen=True)
class Reference:
    id: str
    citation: str  # authors, year, title
    url: str

    def to_json(self) -> dict:
        return {"id": self.id, "citation": self.citation, "url": self.url}


@dataclass(frozen=True)
class FixAlternative:
    """Another way to the same fix (``brax-diff fix --alternative NAME``): spec keys set
    together, each value a template like ``FixTemplate.value``."""

    name: str
    set: tuple[tuple[str, str], ...]  # (spec key, value template), in the file's order
    text: str

    def to_json(self) -> dict:
        return {"name": self.name, "set": dict(self.set), "text": self.text}


@dataclass(frozen=True)
class FixTemplate:
    """How to fix a difference in SLM-Lab.

    ``spec`` names the spec key to set, always; when absent, the SLM-Lab fact's note
    (``spec: agent.algorithm.gamma``) names it, else ``default_spec``. ``value`` and
    ``text`` are Jinja templates run in the sandbox with ``brax``, ``slm`` (this key's
    values), ``key``, and ``values`` (every compared key -> {brax, slm}). ``name`` names
    this way of fixing when ``alternatives`` offer others.
    """

    spec: str | None = None
    default_spec: str | None = None
    value: str | None = None
    text: str = ""
    origin: str = field(default="", compare=False)  # "rules file F (line N): rule BD001: fix", for errors
    name: str | None = None
    alternatives: tuple[FixAlternative, ...] = ()

    def to_json(self) -> dict:
        out = {"spec": self.spec, "default_spec": self.default_spec, "value": self.value, "text": self.text}
        if self.name:  # only rules that offer alternatives have these: the others' JSON is unchanged
            out["name"] = self.name
        if self.alternatives:
            out["alternatives"] = [a.to_json() for a in self.alternatives]
        return out


@dataclass(frozen=True)
class Fix:
    """A rendered fix: set ``spec`` to ``value`` in the SLM-Lab spec (spec None: a code change)."""

    spec: str | None
    value: Any
    text: str
    has_value: bool = True

    @property
    def summary(self) -> str:
        if self.spec and self.has_value:
            shown = self.value if isinstance(self.value, str) else json.dumps(self.value)
            return f"set `{self.spec}: {shown}`"
        if self.spec:
            return f"change `{self.spec}`"
        return "code change"

    def to_json(self) -> dict:
        out = {"spec": self.spec, "text": self.text, "summary": self.summary}
        if self.has_value:
            out["value"] = self.value
        return out


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    topic: str
    keys: tuple[str, ...]
    cases: tuple[Case, ...]
    rationale: str
    fix: FixTemplate
    risk: Risk
    references: tuple[str, ...]
    sides: tuple[str, ...] = ()  # written for these sides only (RULE_SIDES); () for every side

    def written_for(self, side: str) -> bool:
        return not self.sides or side in self.sides

    def severity(self, ctx: Context) -> tuple[str | None, str | None]:
        """(severity, why the case that decided held, in words) for one difference; a match
        and an unknown have none (an unknown is neither a difference nor a match)."""
        if ctx.difference.status in ("match", "unknown"):
            return None, None
        for case in self.cases:
            if case.when(ctx):
                return case.then, case.when.explain(ctx)
        return DEFAULT_SEVERITY, "no case held (default)"

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "topic": self.topic,
            "keys": list(self.keys),
            "severity": [{"when": c.raw, "then": c.then, "text": c.when.text} for c in self.cases],
            "rationale": self.rationale,
            "fix": self.fix.to_json(),
            "risk": self.risk.to_json(),
            "references": list(self.references),
            **({"sides": list(self.sides)} if self.sides else {}),
        }


@dataclass(frozen=True)
class RuleTable:
    rules: tuple[Rule, ...]  # sorted by code
    references: dict[str, Reference]
    origin: str = str(SHIPPED_RULES)

    def rule_for(self, key: str) -> Rule | None:
        for rule in self.rules:
            if key in rule.keys:
                return rule
        return None

    def get(self, code: str) -> Rule | None:
        return next((r for r in self.rules if r.code == code), None)

    def to_json(self) -> dict:
        return {
            "rules": [r.to_json() for r in self.rules],
            "references": {k: self.references[k].to_json() for k in sorted(self.references)},
        }


# --------------------------------------------------------------------------------------
# Loading, validation, user overrides
# --------------------------------------------------------------------------------------


def _read_yaml(path: Path) -> tuple[dict, dict[int, int]]:
    """The rules file's mapping, and the line of each entry of its ``rules`` list (by index)."""
    text = read_text(path, "rules file", ConfigError)
    try:
        data, node = load_yaml_node(text, f"rules file {path}")
    except yaml.YAMLError as exc:
        line = yaml_error_line(exc)
        at = f" at line {line}" if line else ""
        raise ConfigError(f"rules file {path}: invalid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict) or not set(data) <= {"rules", "references"}:
        raise ConfigError(f"rules file {path}: expected a mapping with `rules:` (a list) and optional `references:`")
    if not isinstance(data.get("rules", []), list) or not isinstance(data.get("references", {}), dict):
        raise ConfigError(f"rules file {path}: `rules` must be a list and `references` a mapping")
    return data, _rule_lines(node)


def _rule_lines(node: Node | None) -> dict[int, int]:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value == "rules" and isinstance(value, SequenceNode):
                return {i: item.start_mark.line + 1 for i, item in enumerate(value.value)}
    return {}


def _places(data: dict, lines: dict[int, int], path: Path, fix_only: bool = False) -> dict[str, str]:
    """Rule code -> ``rules file F (line N)`` for the rules (with a fix, when ``fix_only``) ``data`` lists."""
    return {raw["code"]: f"rules file {path} (line {lines[i]})" for i, raw in enumerate(data.get("rules", []))
            if isinstance(raw, dict) and isinstance(raw.get("code"), str) and i in lines
            and (not fix_only or "fix" in raw)}


def _text(raw: dict, name: str, where: str, required: bool = True) -> str:
    value = raw.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: `{name}` must be a non-empty string")
    return " ".join(value.split())


def _finalize(value: Any) -> Any:
    """Print values as YAML reads them back: null, true, [256, 256]."""
    if value is None or isinstance(value, (bool, list, dict)):
        return json.dumps(value)
    return value


_TEMPLATES = sandbox(finalize=_finalize, kept_by=(__file__,))  # _finalize's module: it shapes the code


def _compile_template(source: str | None, where: str) -> None:
    if source is None or source in _shipped_template_sources():
        return  # the shipped table's templates are checked by its tests, not on every run
    try:
        check_template(_TEMPLATES, source)
    except TemplateError as exc:
        shown = source if len(source) <= 80 else source[:77] + "..."
        raise ConfigError(f"{where}: bad template {shown!r}: {exc}") from None


def build_rule(raw: dict, references: dict[str, Reference], where: str, place: str | None = None) -> Rule:
    """A Rule from its (merged) YAML mapping; ConfigError on anything malformed.

    ``place`` (``rules file F (line N)``) is where its fix is written, for render-time errors."""
    unknown = set(raw) - _RULE_FIELDS
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))} "
                          f"(fields: {', '.join(sorted(_RULE_FIELDS))})")
    code = raw.get("code")
    topic = raw.get("topic")
    if topic not in TOPIC_TITLES:
        raise ConfigError(f"{where}: unknown topic {topic!r} (topics: {', '.join(TOPIC_TITLES)})")
    keys = raw.get("keys")
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise ConfigError(f"{where}: `keys` must be a non-empty list of canonical keys")
    _check_keys(keys, where)
    for key in keys:
        if KEYS[key].topic != topic:
            raise ConfigError(f"{where}: key {key!r} belongs to topic {KEYS[key].topic!r}, not {topic!r}")
    cases_raw = raw.get("severity")
    if not isinstance(cases_raw, list) or not cases_raw:
        raise ConfigError(f"{where}: `severity` must be a list of {{when: PREDICATE, then: SEVERITY}} cases")
    cases = []
    for i, case in enumerate(cases_raw):
        at = f"{where}: severity[{i}]"
        if not isinstance(case, dict) or set(case) != {"when", "then"}:
            raise ConfigError(f"{at}: a case is {{when: PREDICATE, then: SEVERITY}}, got {case!r}")
        if case["then"] not in SEVERITIES:
            raise ConfigError(f"{at}: severity {case['then']!r} is not one of {', '.join(SEVERITIES)}")
        cases.append(Case(compile_predicate(case["when"], at), case["then"], case["when"]))
    fix_raw = raw.get("fix")
    if not isinstance(fix_raw, dict) or not set(fix_raw) <= _FIX_FIELDS:
        raise ConfigError(f"{where}: `fix` must be a mapping with fields {', '.join(sorted(_FIX_FIELDS))}")
    for name in ("spec", "default_spec", "value"):
        if fix_raw.get(name) is not None and not isinstance(fix_raw[name], str):
            raise ConfigError(f"{where}: fix.{name} must be a string")
    name = fix_raw.get("name")
    if name is not None and not (isinstance(name, str) and _OPTION_NAME.match(name)):
        raise ConfigError(f"{where}: fix.name must be a lower-case name like more-envs, got {name!r}")
    fix = FixTemplate(spec=fix_raw.get("spec"), default_spec=fix_raw.get("default_spec"),
                      value=fix_raw.get("value"), text=_text(fix_raw, "text", f"{where}: fix"),
                      origin=f"{place or where.split(': rule ')[0]}: rule {code}: fix", name=name,
                      alternatives=_build_alternatives(fix_raw.get("alternatives"), name, f"{where}: fix"))
    _compile_template(fix.value, f"{where}: fix.value")
    _compile_template(fix.text, f"{where}: fix.text")
    risk_raw = raw.get("risk")
    if not isinstance(risk_raw, dict) or risk_raw.get("level") not in RISK_LEVELS:
        raise ConfigError(f"{where}: `risk` must be {{level: {'|'.join(RISK_LEVELS)}, text: ...}}")
    risk = Risk(risk_raw["level"], _text(risk_raw, "text", f"{where}: risk"))
    refs = raw.get("references", [])
    if not isinstance(refs, list):
        raise ConfigError(f"{where}: `references` must be a list of reference ids")
    for ref in refs:
        if ref not in references:
            raise ConfigError(f"{where}: unknown reference {ref!r} (known: {', '.join(sorted(references))})")
    sides = raw.get("sides", [])
    if not isinstance(sides, list) or not all(s in RULE_SIDES for s in sides):
        raise ConfigError(f"{where}: `sides` must be a list of sides ({', '.join(RULE_SIDES)})")
    return Rule(code=code, name=_text(raw, "name", where), topic=topic, keys=tuple(keys), cases=tuple(cases),
                rationale=_text(raw, "rationale", where), fix=fix, risk=risk, references=tuple(refs),
                sides=tuple(sides))


def _build_alternatives(raw: Any, fix_name: str | None, where: str) -> tuple[FixAlternative, ...]:
    """``fix.alternatives``: a list of {name, set: {SPEC_KEY: TEMPLATE}, text}; names unique."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: `alternatives` must be a non-empty list of {{name, set, text}}")
    if fix_name is None:
        raise ConfigError(f"{where}: a fix with alternatives needs a `name` of its own")
    out, seen = [], {fix_name}
    for i, item in enumerate(raw):
        at = f"{where}.alternatives[{i}]"
        if not isinstance(item, dict) or set(item) != _ALTERNATIVE_FIELDS:
            raise ConfigError(f"{at}: an alternative is {{name, set, text}}, got {item!r}")
        name = item["name"]
        if not (isinstance(name, str) and _OPTION_NAME.match(name)) or name in seen:
            raise ConfigError(f"{at}: name {name!r} must be a lower-case name, unique within the rule")
        seen.add(name)
        sets = item["set"]
        if not isinstance(sets, dict) or not sets or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in sets.items()):
            raise ConfigError(f"{at}: `set` must map spec keys to value templates (strings)")
        for key, source in sets.items():
            _compile_template(source, f"{at}.set.{key}")
        out.append(FixAlternative(name, tuple(sets.items()), _text(item, "text", at)))
    return tuple(out)


def _build_references(raw: dict, origin: str) -> dict[str, Reference]:
    out = {}
    for ref_id, data in raw.items():
        where = f"rules file {origin}: reference {ref_id!r}"
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected {{citation: ..., url: ...}}")
        out[str(ref_id)] = Reference(str(ref_id), _text(data, "citation", where), _text(data, "url", where))
    return out


def merge_rule_data(base: dict, override: dict, origin: str) -> dict:
    """Merge a user rules mapping into the shipped one (both as read from YAML).

    A known code replaces the fields it names; a new code adds a rule; ``disabled: true``
    removes the rule. References merge by id.
    """
    rules = {r["code"]: dict(r) for r in base.get("rules", [])}
    for i, raw in enumerate(override.get("rules", [])):
        if not isinstance(raw, dict) or not isinstance(raw.get("code"), str):
            raise ConfigError(f"rules file {origin}: rules[{i}] needs a `code`")
        code = raw["code"]
        if raw.get("disabled") is True:
            if code not in rules:
                raise ConfigError(f"rules file {origin}: rule {code}: cannot disable an unknown rule")
            del rules[code]
            continue
        rules[code] = {**rules.get(code, {}), **raw}
    references = {**base.get("references", {}), **override.get("references", {})}
    return {"rules": list(rules.values()), "references": references}


def build_table(data: dict, origin: str, places: dict[str, str] | None = None) -> RuleTable:
    """Validate and compile a whole rules mapping; ``places``: code -> where its fix is written."""
    references = _build_references(data.get("references", {}), origin)
    rules: list[Rule] = []
    owner: dict[str, str] = {}
    seen: set[str] = set()
    for i, raw in enumerate(data.get("rules", [])):
        if not isinstance(raw, dict):
            raise ConfigError(f"rules file {origin}: rules[{i}] must be a mapping")
        code = raw.get("code")
        if not isinstance(code, str) or not _CODE.match(code):
            raise ConfigError(f"rules file {origin}: rules[{i}]: code {code!r} must look like BD001")
        if code in seen:
            raise ConfigError(f"rules file {origin}: rule {code} is defined twice")
        seen.add(code)
        if raw.get("disabled") is not None and raw.get("disabled") is not False:
            raise ConfigError(f"rules file {origin}: rule {code}: `disabled` must be true or false")
        rule = build_rule({k: v for k, v in raw.items() if k != "disabled"}, references,
                          f"rules file {origin}: rule {code}", (places or {}).get(code))
        for key in rule.keys:
            if key in owner:
                raise ConfigError(f"rules file {origin}: key {key!r} is covered by both {owner[key]} and {code}")
            owner[key] = code
        rules.append(rule)
    return RuleTable(tuple(sorted(rules, key=lambda r: r.code)), references, origin)


@functools.lru_cache(maxsize=1)
def _shipped_rules(mtime_ns: int) -> tuple[dict, dict[int, int]]:
    """The shipped rules file, parsed once per process (keyed by its mtime), by libyaml where
    PyYAML has it: the bounded pure-Python loader user files go through takes 0.1 s over it,
    libyaml 0.01 s, and tests run many reports in one process."""
    fast = getattr(yaml, "CSafeLoader", None)  # libyaml: the shipped file is ours, so no bounds are needed
    if fast is None:
        return _read_yaml(SHIPPED_RULES)
    loader = fast(SHIPPED_RULES.read_text(encoding="utf-8"))
    try:
        node = loader.get_single_node()
        return loader.construct_document(node), _rule_lines(node)
    finally:
        loader.dispose()


@functools.lru_cache(maxsize=1)
def _shipped_template_sources() -> frozenset[str]:
    """Every string under a shipped rule's ``fix`` (as written and whitespace-folded):
    ``tests/test_rules.py`` passes each through the sandbox's check, so loading the table
    need not compile 63 templates a run that renders a few dozen fixes never uses."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.update((value, " ".join(value.split())))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    data, _ = _shipped_rules(SHIPPED_RULES.stat().st_mtime_ns)
    for raw in data.get("rules", []):
        if isinstance(raw, dict):
            walk(raw.get("fix"))
    return frozenset(found)


def load_rules(user_file: str | Path | None = None) -> RuleTable:
    """The shipped table, with ``user_file`` merged over it when given."""
    data, lines = copy.deepcopy(_shipped_rules(SHIPPED_RULES.stat().st_mtime_ns))
    places = _places(data, lines, SHIPPED_RULES)
    origin = str(SHIPPED_RULES)
    if user_file is not None:
        path = Path(user_file)
        override, lines = _read_yaml(path)
        places.update(_places(override, lines, path, fix_only=True))
        data = merge_rule_data(data, override, str(path))
        origin = str(path)
    return build_table(data, origin, places)


# --------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Classified:
    """A Difference with its rule applied. A match has severity None and no fix."""

    difference: Difference
    severity: str | None
    rule: str | None = None  # the rule's code
    rule_name: str | None = None
    because: str | None = None  # the severity case that held, in words
    rationale: str | None = None
    fix: Fix | None = None
    risk: Risk | None = None
    references: tuple[Reference, ...] = field(default_factory=tuple)
    # Dependent keys whose difference is this one's seen again (vocabulary ``fold_into``):
    # listed in this row, not counted as rows of their own.
    folded: tuple[Difference, ...] = ()

    @property
    def key(self) -> str:
        return self.difference.key

    @property
    def topic(self) -> str:
        return self.difference.topic

    @property
    def status(self) -> str:
        return self.difference.status

    def to_json(self) -> dict:
        folded = {"folded": [{"key": f.key, "status": f.status, "brax": f.brax_value, "slm": f.slm_value,
                              "reason": f.reason} for f in self.folded]} if self.folded else {}
        return {
            **self.difference.to_json(),
            **folded,
            "severity": self.severity,
            "rule": self.rule,
            "rule_name": self.rule_name,
            "because": self.because,
            "rationale": self.rationale,
            "fix": None if self.fix is None else self.fix.to_json(),
            "risk": None if self.risk is None else self.risk.to_json(),
            "references": [r.id for r in self.references],
        }


def _spec_in_note(note: str | None) -> str | None:
    found = _SPEC_IN_NOTE.findall(note or "")
    return found[0] if len(found) == 1 else None


def _render(template: FixTemplate, field_name: str, variables: dict, source: str | None = None) -> str:
    """One field of a fix (or ``source``, one of its alternatives' templates) rendered in the
    sandbox; a limit that trips names the rule and its line."""
    try:
        return render_bounded(_TEMPLATES, getattr(template, field_name) if source is None else source, variables)
    except TemplateLimit as exc:
        raise TemplateLimit(f"{template.origin}.{field_name}: {exc}") from None


def _parse_value(text: str, origin: str) -> Any:
    """A rendered value back to data: JSON first (``1e-08`` is a float there, a string in
    YAML 1.1), then YAML for bare words; both within the nesting and size limits."""
    try:
        return load_json(text, origin)
    except LimitExceeded:
        raise
    except ValueError:
        return load_yaml(text, origin)


def _variables(ctx: Context, spec: str | None) -> dict:
    d = ctx.difference
    return {
        "key": d.key,
        "brax": d.brax_value,
        "slm": d.slm_value,
        "spec": spec,
        "values": {k: {"brax": o.brax_value, "slm": o.slm_value} for k, o in ctx.by_key.items()},
    }


def render_fix(template: FixTemplate, ctx: Context) -> Fix:
    """The fix for one difference; a value template that cannot be filled (a side's value
    is missing) leaves the value out rather than guessing."""
    d = ctx.difference
    spec = template.spec or _spec_in_note(d.slm.note if d.slm else None) or template.default_spec
    variables = _variables(ctx, spec)
    value, has_value = None, False
    if template.value is not None:
        try:
            rendered = _render(template, "value", variables)
            value, has_value = _parse_value(rendered, f"{template.origin}.value (rendered)"), rendered != ""
        except (TemplateError, TypeError, ValueError, ZeroDivisionError, ArithmeticError, yaml.YAMLError):
            value, has_value = None, False
    try:
        text = _render(template, "text", {**variables, "value": value})
    except (TemplateError, TypeError, ValueError, ArithmeticError):
        text = template.text
    return Fix(spec=spec, value=value, text=text, has_value=has_value)


def render_alternative(template: FixTemplate, alternative: FixAlternative, ctx: Context
                       ) -> list[tuple[str, Any]] | None:
    """The (spec key, value) pairs of one alternative for one difference; None when a value
    cannot be filled (as ``render_fix`` leaves a value out)."""
    variables = _variables(ctx, None)
    out = []
    for spec, source in alternative.set:
        try:
            rendered = _render(template, f"alternatives.{alternative.name}.set.{spec}", variables, source)
            if rendered == "":
                return None
            out.append((spec, _parse_value(rendered, f"{template.origin}.alternatives.{alternative.name} (rendered)")))
        except (TemplateError, TypeError, ValueError, ZeroDivisionError, ArithmeticError, yaml.YAMLError):
            return None
    return out


@functools.lru_cache(maxsize=None)
def _fold_condition(key: str) -> Predicate:
    into, when = FOLDS[key]
    return compile_predicate(when, f"vocabulary {key}.fold_when")


def folded_keys(differences: Iterable[Difference]) -> dict[str, str]:
    """Dependent key -> the key whose row it is listed in: a difference (or unknown) of a key
    the vocabulary folds, where its condition holds and the parent key is compared too."""
    differences = list(differences)
    by_key = {d.key: d for d in differences}
    out = {}
    for d in differences:
        if d.key not in FOLDS or d.status == "match" or FOLDS[d.key][0] not in by_key:
            continue
        if _fold_condition(d.key)(Context(d, by_key)):  # a test only: no reason is worded
            out[d.key] = FOLDS[d.key][0]
    return out


def classify(differences: Iterable[Difference], table: RuleTable, *, fixes: bool = True,
             fold: bool = False, side: str = "slm") -> list[Classified]:
    """Apply the table to each difference, in the given order; ``fixes=False`` leaves every
    fix out (the environment matrix shows severities only, and rendering fixes was most of
    its cost). ``fold`` (the report's rows): a dependent key whose difference is its parent's
    seen again (vocabulary ``fold_into``) is no row of its own but listed in the parent's row
    (``folded``); without it every key is classified (``fix`` checks each key it writes).
    ``side``: the side compared with Brax; a rule written for other sides (``sides:``) still
    classifies, and its rationale says whom it was written for."""
    differences = list(differences)
    by_key = {d.key: d for d in differences}
    folds = folded_keys(differences) if fold else {}
    out = []
    for d in differences:
        if d.key in folds:
            continue
        folded = tuple(by_key[k] for k, into in sorted(folds.items()) if into == d.key)
        rule = table.rule_for(d.key)
        ctx = Context(d, by_key, RULE_SIDES.get(side, side))
        if rule is None:
            severity = None if d.status in ("match", "unknown") else DEFAULT_SEVERITY
            out.append(Classified(d, severity, because=None if severity is None else "no rule covers this key",
                                  folded=folded))
            continue
        severity, because = rule.severity(ctx)
        out.append(Classified(
            difference=d,
            severity=severity,
            rule=rule.code,
            rule_name=rule.name,
            because=because,
            rationale=rule.rationale if rule.written_for(side) else (
                f"(Written for Brax vs {' and '.join(RULE_SIDES[s] for s in rule.sides)}.) {rule.rationale}"),
            fix=None if severity is None or not fixes else render_fix(rule.fix, ctx),
            risk=rule.risk,
            references=tuple(table.references[r] for r in rule.references),
            folded=folded,
        ))
    return out


def recommended_order(classified: Iterable[Classified]) -> list[Classified]:
    """Differences to act on: by severity, low-risk first within one, then report order."""
    items = [c for c in classified if c.severity is not None]
    position = {id(c): i for i, c in enumerate(items)}
    return sorted(items, key=lambda c: (severity_rank(c.severity),
                                        RISK_LEVELS.index(c.risk.level) if c.risk else len(RISK_LEVELS),
                                        position[id(c)]))


def recommended_steps(classified: list[Classified], outcomes: dict[str, dict] | None = None,
                      tried: Callable[[str, Any], dict | None] | None = None) -> list[dict]:
    """The recommended order: one step per distinct fix, by severity then risk (low-risk
    first within a severity, as the reference report orders its phases); `fix --phase N`
    numbers them the same. ``outcomes`` (key -> :func:`fix_outcome`): each step lists its
    keys' outcomes, keys with the same outcome together. ``tried(spec key, value)``: SLM-Lab's
    own history of a spec edit (:class:`brax_diff.history.spec_keys.SpecHistory`); a step whose
    rule sets a value the spec had and changed away from goes after the others of its severity."""
    steps: list[dict] = []
    index: dict[tuple, dict] = {}
    for c in recommended_order(classified):
        fix = c.fix.to_json() if c.fix else None
        ident = (c.rule, json.dumps(fix, sort_keys=True))
        if ident in index:
            index[ident]["keys"].append(c.key)
            continue
        step = {"severity": c.severity, "risk": c.risk.level if c.risk else None, "rule": c.rule,
                "rule_name": c.rule_name, "keys": [c.key], "fix": fix}
        index[ident] = step
        steps.append(step)
    if outcomes is not None:
        for step in steps:
            groups: dict[str, dict] = {}
            for key in step["keys"]:
                outcome = outcomes.get(key)
                ident = json.dumps(outcome, sort_keys=True)
                groups.setdefault(ident, {"keys": [], "outcome": outcome})["keys"].append(key)
            step["outcomes"] = list(groups.values())
    if tried is None:
        return steps
    for step in steps:
        edits = []
        if step["fix"] and step["fix"].get("spec") and "value" in step["fix"]:
            edits.append((step["fix"]["spec"], step["fix"]["value"]))
        for group in step.get("outcomes", []):
            for edit in (group["outcome"] or {}).get("edits", []):
                edits.append((edit["spec"], edit["value"]))
        records = []
        for spec, value in edits:
            record = tried(spec, value)
            if record is not None and record not in records:
                records.append(record)
        step["tried"] = records
        step["demoted"] = bool(step["fix"] and step["fix"].get("spec") and "value" in step["fix"]
                               and tried(step["fix"]["spec"], step["fix"]["value"]) is not None)
    return sorted(steps, key=lambda st: (severity_rank(st["severity"]), st["demoted"]))


__all__ = [
    "SEVERITIES", "RISK_LEVELS", "Classified", "Fix", "FixAlternative", "Rule", "RuleTable", "classify",
    "load_rules", "recommended_order", "at_or_above", "severity_rank", "compile_predicate", "render_alternative",
    "Context",
]
