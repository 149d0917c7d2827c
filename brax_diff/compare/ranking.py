"""Which differences the environments that miss their published target share, read by direction.

Each environment's classified differences (one cell per key: both values, status, severity) become
*features*: a numeric key that differs is "Brax larger" or "the other side larger" (``num_envs``
8192 vs 2048 and 4096 vs 2048 are one feature, 1024 vs 2048 another); any other key is its pair of
values (``truncation`` Brax ``bootstrap``, SLM-Lab ``terminal``). A match, an unknown or a
difference no rule classifies is no feature, except for a context key (the environment's own code
decides it: ``reward_floor``, ``env_action_clip``), whose shared value is one. :func:`rank` counts, per feature and per pair of
features, the environments that miss and that pass which carry it, and sorts by separation
(the share of missing environments with it minus the share of passing ones), with a one-sided
Fisher exact p of carrying it that often by chance, adjusted over every single (Bonferroni over
Tarone's count of the singles that could reach the level at all; pairs are picked after looking at
the singles: their p is not adjusted, exploratory).

An environment whose score is not comparable (another episode length) still counts, for every
key but the ones that make it incomparable. An association, not a cause: a feature the missing
environments share is a place to look.
"""

from __future__ import annotations

import json
from itertools import combinations
from math import comb
from typing import Any, Iterable

from .severity import SEVERITIES
from ..facts.vocabulary import CONTEXT

PAIR_CANDIDATES = 15  # singles considered for pairs (most separating first)
PAIRS_SHOWN = 10


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def feature(key: str, cell: dict | None) -> dict | None:
    """The feature a cell carries, or None (a match, an unknown, an unclassified difference). A
    context key's match is its shared value (``reward_floor`` 0 on both sides)."""
    if cell is not None and cell.get("status") == "match" and key in CONTEXT:
        shared = cell.get("brax")
        return {"id": f"{key}=={json.dumps(shared, sort_keys=True)}", "key": key, "direction": "shared",
                "value": shared}
    if cell is None or cell.get("status") in ("match", "unknown") or cell.get("severity") is None:
        return None
    brax, other = cell.get("brax"), cell.get("slm")
    if _is_number(brax) and _is_number(other) and brax != other:
        direction = "brax_larger" if brax > other else "other_larger"
        return {"id": f"{key}:{direction}", "key": key, "direction": direction}
    ident = json.dumps([brax, other], sort_keys=True)
    return {"id": f"{key}={ident}", "key": key, "direction": "values", "brax": brax, "other": other}


def features(cells: dict[str, dict], excluded: Iterable[str] = ()) -> dict[str, dict]:
    """id -> feature (with its cell's severity) of one environment's cells; ``excluded``: keys
    not counted for it (what makes its score incomparable)."""
    out = {}
    skip = set(excluded)
    for key, cell in cells.items():
        found = feature(key, cell) if key not in skip else None
        if found is not None:
            out[found["id"]] = {**found, "severity": cell["severity"]}
    return out


def _separation(miss_with: int, miss_of: int, pass_with: int, pass_of: int) -> float | None:
    if not miss_of or not pass_of:
        return None
    return round(miss_with / miss_of - pass_with / pass_of, 4)


def _entry(base: dict, carriers: set[str], missing: list[str], passing: list[str]) -> dict:
    miss_with = sorted(e for e in missing if e in carriers)
    pass_with = sorted(e for e in passing if e in carriers)
    carrying, total = len(miss_with) + len(pass_with), len(missing) + len(passing)
    p = enrichment_p(len(miss_with), len(missing), carrying, total)
    best = enrichment_p(min(carrying, len(missing)), len(missing), carrying, total)  # all carriers missing
    return {**base, "missing": len(miss_with), "missing_of": len(missing), "passing": len(pass_with),
            "passing_of": len(passing),
            "separation": _separation(len(miss_with), len(missing), len(pass_with), len(passing)),
            "p": round(p, 6), "min_p": best, "missing_envs": miss_with, "passing_envs": pass_with}


def enrichment_p(carrying_missing: int, missing: int, carrying: int, total: int) -> float:
    """One-sided Fisher exact test: the chance that ``missing`` environments drawn at random from
    ``total`` include ``carrying_missing`` or more of the ``carrying`` ones (hypergeometric tail)."""
    if total <= 0 or missing <= 0:
        return 1.0
    whole = comb(total, missing)
    tail = sum(comb(carrying, x) * comb(total - carrying, missing - x)
               for x in range(carrying_missing, min(carrying, missing) + 1))
    return min(1.0, tail / whole)


LEVEL = 0.05


def tarone(min_ps: list[float], level: float = LEVEL) -> int:
    """Tarone's count for discrete tests: the smallest k such that at most k of the tests can reach
    ``level / k`` at all (a difference every environment carries never can). Bonferroni over those
    k holds the family-wise error rate over every test, as over all of them, with more power."""
    for k in range(1, len(min_ps) + 1):
        if sum(1 for p in min_ps if p <= level / k) <= k:
            return k
    return max(len(min_ps), 1)


def adjusted(entries: list[dict], level: float = LEVEL) -> None:
    """``p_adjusted`` on each entry: its p times Tarone's k where it can reach ``level / k``, else
    None (it cannot be told from chance with these environments, whatever the split)."""
    min_ps = [e["min_p"] for e in entries]
    k = tarone(min_ps, level)
    for e in entries:
        e["p_adjusted"] = round(min(1.0, e["p"] * k), 6) if e["min_p"] <= level / k else None
        e["tests"] = k


def _order(entry: dict) -> tuple:
    sep = entry["separation"]
    worst = SEVERITIES.index(entry["severity"]) if entry.get("severity") in SEVERITIES else len(SEVERITIES)
    return (sep is None, -(sep or 0.0), -entry["missing"], worst, entry["id"])


def rank(envs: list[dict]) -> dict:
    """``envs``: {"env", "miss": True | False | None (no verdict), "features": id -> feature}.
    The singles and the pairs that separate better than either of their parts, most separating
    first, each with its environments."""
    missing = sorted(e["env"] for e in envs if e["miss"] is True)
    passing = sorted(e["env"] for e in envs if e["miss"] is False)
    carriers: dict[str, set[str]] = {}
    described: dict[str, dict] = {}
    for e in envs:
        if e["miss"] is None:
            continue
        for fid, f in e["features"].items():
            carriers.setdefault(fid, set()).add(e["env"])
            seen = described.setdefault(fid, {k: v for k, v in f.items() if k != "severity"} | {"severity": None})
            if f["severity"] in SEVERITIES and (seen["severity"] is None or
                                                SEVERITIES.index(f["severity"]) < SEVERITIES.index(seen["severity"])):
                seen["severity"] = f["severity"]
    singles = sorted((_entry(described[fid], carriers[fid], missing, passing) for fid in carriers), key=_order)
    # Every single is a test of "the missing environments carry it more often than chance", held
    # together (Tarone's Bonferroni); min_p is what the split could give at best, not a result.
    adjusted(singles)
    for single in singles:
        single["min_p"] = round(single["min_p"], 6)
    candidates = [s for s in singles if s["missing"] >= 2][:PAIR_CANDIDATES]
    pairs = []
    for a, b in combinations(candidates, 2):
        if a["key"] == b["key"]:
            continue
        both = carriers[a["id"]] & carriers[b["id"]]
        worst = min((x["severity"] for x in (a, b) if x["severity"] in SEVERITIES), key=SEVERITIES.index,
                    default=None)
        first, second = sorted((a, b), key=lambda x: x["id"])
        entry = _entry({"id": f"{first['id']} & {second['id']}", "parts": [first["id"], second["id"]],
                        "severity": worst}, both, missing, passing)
        better = max(a["separation"] or 0.0, b["separation"] or 0.0)
        if entry["missing"] >= 2 and entry["separation"] is not None and entry["separation"] > better + 1e-9:
            pairs.append(entry)
    pairs.sort(key=_order)
    return {"missing": missing, "passing": passing, "singles": singles, "pairs": pairs[:PAIRS_SHOWN]}
