"""A family's values as its environments train with them.

A family config (Playground's ``*_params.py`` base over ``train()``'s defaults) is not what any
environment need train with: each environment's branch overrides it. :func:`as_trained` gives,
for each key a family scope decides, the family config's value where some environment trains with
it (saying how many), else the value all environments train with, else an explained unknown
naming how they differ: nothing is compared with, or fixed towards, a value no environment uses.
"""

from __future__ import annotations

from .model import Extraction, Fact, format_value
from .vocabulary import KEYS, PER_ENVIRONMENT


def as_trained(family: Extraction, envs: dict[str, Extraction]) -> Extraction:
    """``family`` with each non-per-environment key as ``envs`` (name -> extraction) train with it:
    the family config's value where at least one environment trains with it (its note says how
    many), else the value all environments share, else an explained unknown saying how they differ."""
    out = Extraction(family.side, dict(family.sources), dict(family.scope), dict(family.facts), list(family.findings))
    if not envs:
        return out
    names = sorted(envs)
    for key in KEYS:
        if key in PER_ENVIRONMENT:
            continue
        facts = [envs[name].facts.get(key) for name in names]
        if any(f is None for f in facts):
            continue
        base = family.facts.get(key)
        known = [f for f in facts if not f.is_unknown]
        if base is not None and not base.is_unknown:
            using = [name for name, f in zip(names, facts) if not f.is_unknown and f.value == base.value]
            if len(using) == len(names):
                continue
            if using:
                note = f"{len(using)} of {len(names)} environments train with it ({_names(using)})"
                out.facts[key] = Fact(key, base.value, base.provenance, f"{base.note}; {note}" if base.note else note,
                                      base.declared)
                continue
        if len(known) == len(facts) and all(f.value == facts[0].value for f in facts):
            first = facts[0]
            note = "every environment of the family trains with it (the family config says otherwise)"
            out.facts[key] = Fact(key, first.value, first.provenance, f"{first.note}; {note}" if first.note else note,
                                  first.declared)
            continue
        groups: dict[str, list[str]] = {}
        for name, fact in zip(names, facts):
            groups.setdefault("unknown" if fact.is_unknown else format_value(fact.value), []).append(name)
        shown = "; ".join(f"{value} in {_names(group)}" for value, group in sorted(groups.items()))
        out.facts[key] = Fact(key, None, (), unknown=f"{key}: no environment of the family trains with the family "
                                                     f"config's value; they train with {shown}: set per environment "
                                                     "(the matrix; fix --env)")
    return out


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
