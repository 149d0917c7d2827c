"""Which differences the environments that miss their published target share, read by direction.

Each environment's classified differences (one cell per key: both values, status, severity) become
*features*: a numeric key that differs is "Brax larger" or "the other side larger" (``num_envs``
8192 vs 2048 and 4096 vs 2048 are one feature, 1024 vs 2048 another); any other key is its pair of
values (``truncation`` Brax ``bootstrap``, SLM-Lab ``terminal``). A match, an unknown or a
difference no rule classifies is no feature. :func:`rank` counts, per feature and per pair of
features, the environments that miss and that pass which carry it, and sorts by separation
(the share of missing environments with it minus the share of passing ones).

An environment whose score is not comparable (another episode length) still counts, for every
key but the ones that make it incomparable. An association, not a cause: a feature the missing
environments share is a place to look.
"""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any, Iterable

from .severity import SEVERITIES

PAIR_CANDIDATES = 15  # singles considered for pairs (most separating first)
PAIRS_SHOWN = 10


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def feature(key: str, cell: dict | None) -> dict | None:
    """The feature a cell carries, or None (a match, an unknown, an unclassified difference)."""
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
    return {**base, "missing": len(miss_with), "missing_of": len(missing), "passing": len(pass_with),
            "passing_of": len(passing),
            "separation": _separation(len(miss_with), len(missing), len(pass_with), len(passing)),
            "missing_envs": miss_with, "passing_envs": pass_with}


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
