"""Pairing the two sides key by key: match, differs, or missing on one side.

Values compare as values, not as text: numbers with a tolerance (``1e-3`` equals
``0.001``), lists element-wise (``(32,)*4`` equals ``[32, 32, 32, 32]`` once facts have
made both lists), ``None`` only equals ``None`` and booleans only equal booleans (``True``
is not ``1`` here: a flag and a count are different facts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from ..facts.model import Extraction, Fact, format_value
from ..facts.vocabulary import KEYS, TOPICS

# "unknown": a side's extractor could not read the key at its ref (the fact says why): never
# a match, never a difference with a fix.
STATUSES = ("match", "differs", "unknown", "missing_brax", "missing_slm")

# Relative tolerance for floats: tight enough that 0.995 and 0.99 differ, loose enough
# that 1e-3 and 0.001 (or 0.1 + 0.2 and 0.3) are one value.
REL_TOL = 1e-9
ABS_TOL = 1e-12

SIDE_NAMES = {"brax": "Brax", "slm": "SLM-Lab", "rsl_rl": "RSL-RL"}


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def values_equal(a: Any, b: Any) -> bool:
    """Value equality with a float tolerance, element-wise over lists."""
    if is_number(a) and is_number(b):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class Difference:
    """One canonical key, both sides.

    ``status`` is one of STATUSES; ``reason`` says in words why the sides differ or why
    one side has no value (None for an exact match).
    """

    key: str
    topic: str
    status: str
    brax: Fact | None
    slm: Fact | None
    reason: str | None = None

    @property
    def brax_value(self) -> Any:
        return None if self.brax is None else self.brax.value

    @property
    def slm_value(self) -> Any:
        return None if self.slm is None else self.slm.value

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "topic": self.topic,
            "status": self.status,
            "brax": None if self.brax is None else self.brax.to_json(),
            "slm": None if self.slm is None else self.slm.to_json(),
            "reason": self.reason,
        }


def key_order() -> list[str]:
    """Canonical keys in report order: by topic (TOPICS order), then as declared."""
    rank = {name: i for i, (name, _) in enumerate(TOPICS)}
    declared = list(KEYS)
    return sorted(declared, key=lambda k: (rank[KEYS[k].topic], declared.index(k)))


def _missing_reason(extraction: Extraction, key: str) -> str:
    """Why a side has no value: a finding about the key if the extractor left one."""
    side = SIDE_NAMES.get(extraction.side, extraction.side)
    notes = sorted(f.message for f in extraction.findings if f.key == key)
    if notes:
        return f"no {side} value: " + "; ".join(notes)
    return f"no {side} value: the extractor found no setting for it"


def _ratio(a: Any, b: Any) -> float | None:
    if not (is_number(a) and is_number(b)) or a == 0 or b == 0 or (a > 0) != (b > 0):
        return None
    return max(abs(a), abs(b)) / min(abs(a), abs(b))


def _differs_reason(brax: Any, slm: Any, other: str = "SLM-Lab") -> str:
    text = f"Brax {format_value(brax)} vs {other} {format_value(slm)}"
    ratio = _ratio(brax, slm)
    if ratio is not None:
        larger = "Brax" if abs(brax) > abs(slm) else other
        return f"{text} ({larger} {ratio:.4g}x larger)"
    if isinstance(brax, list) and isinstance(slm, list) and len(brax) != len(slm):
        return f"{text} ({len(brax)} vs {len(slm)} entries)"
    return text


def _unknown_reason(brax: Fact, slm: Fact, other: str = "SLM-Lab") -> str:
    parts = [f"unknown on {name}: {fact.unknown}" for name, fact in (("Brax", brax), (other, slm))
             if fact.is_unknown]
    return "; ".join(parts)


def pair(key: str, brax: Fact | None, slm: Fact | None, brax_x: Extraction, slm_x: Extraction) -> Difference:
    topic = KEYS[key].topic if key in KEYS else ""
    if (brax is not None and brax.is_unknown) or (slm is not None and slm.is_unknown):
        if brax is not None and slm is not None:
            return Difference(key, topic, "unknown", brax, slm,
                              _unknown_reason(brax, slm, SIDE_NAMES.get(slm_x.side, slm_x.side)))
        known = brax if brax is not None else slm
        return Difference(key, topic, "unknown", brax, slm, f"unknown: {known.unknown}")
    if brax is None:
        return Difference(key, topic, "missing_brax", None, slm, _missing_reason(brax_x, key))
    if slm is None:
        return Difference(key, topic, "missing_slm", brax, None, _missing_reason(slm_x, key))
    if values_equal(brax.value, slm.value):
        return Difference(key, topic, "match", brax, slm, None)
    return Difference(key, topic, "differs", brax, slm,
                      _differs_reason(brax.value, slm.value, SIDE_NAMES.get(slm_x.side, slm_x.side)))


def compare(brax: Extraction, slm: Extraction, keys: Iterable[str] | None = None) -> list[Difference]:
    """One Difference per canonical key that either side has a value for, in report order.

    ``keys`` limits the comparison (default: the whole vocabulary). Keys neither side
    knows are left out: there is nothing to say about them.
    """
    wanted = set(keys) if keys is not None else None
    out = []
    for key in key_order():
        if wanted is not None and key not in wanted:
            continue
        b, s = brax.facts.get(key), slm.facts.get(key)
        if b is None and s is None:
            continue
        out.append(pair(key, b, s, brax, slm))
    return out
