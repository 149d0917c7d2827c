"""A ``brax-diff verify`` result (its verify.json) as the report shows it.

Static: reads JSON, imports nothing of the training stack. The report leads with the gap
(baseline and all_fixes against Brax's trainer, the fraction of the gap the fixes close),
then what each fix is worth with the others applied (leave-one-out), and puts each key's
verdict beside its classification. Every number keeps its interval and its level, and every
inconclusive one the effect its seed count could have found.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .errors import BraxDiffError

GAP_ROWS = (
    ("baseline_vs_reference", "SLM-Lab's settings (baseline) vs Brax's trainer (reference)"),
    ("all_fixes_vs_reference", "every expressible fix (all_fixes) vs Brax's trainer (reference)"),
    ("all_fixes_vs_baseline", "every expressible fix (all_fixes) vs SLM-Lab's settings (baseline)"),
)


def check_result(data: Any, origin: str) -> dict:
    """A verify.json's structure, or a one-line error naming what is wrong."""
    if not isinstance(data, dict):
        raise BraxDiffError(f"{origin}: not a verify.json (not an object)")
    if isinstance(data.get("verdicts"), dict):
        raise BraxDiffError(f"{origin}: a verify.json of brax-diff < 0.2 (verdicts by key, scores not comparable); "
                            "rerun `brax-diff verify`")
    for name in ("runs", "verdicts"):
        if not isinstance(data.get(name), list) or not all(isinstance(e, dict) for e in data[name]):
            raise BraxDiffError(f"{origin}: not a verify.json ({name} must be a list of objects)")
    if not isinstance(data.get("gap", {}), dict) or not isinstance(data.get("plan", {}), dict):
        raise BraxDiffError(f"{origin}: not a verify.json (gap and plan must be objects)")
    for entry in data["verdicts"]:
        if not isinstance(entry.get("verdict"), str) or not isinstance(entry.get("arm"), str):
            raise BraxDiffError(f"{origin}: not a verify.json (a verdict without arm or verdict)")
    return data


def _link(result_dir: Path, report_dir: Path, path: str | None) -> str | None:
    if not path:
        return None
    return Path(os.path.relpath(Path(result_dir) / path, report_dir)).as_posix()


def reading(entry: dict) -> str:
    """A verdict in words: which arm scores higher, or what could not be resolved."""
    if entry.get("ci") is None:
        mde = entry.get("min_detectable_effect")
        reason = entry.get("reason", "not tested")
        return f"inconclusive: {reason}" + (f"; a difference of ±{mde:.3g} or more would have been found"
                                              if mde else "")
    x, y = entry["arm"], entry["vs"]
    if entry["verdict"] == "supported":
        return f"{x} scores higher"
    if entry["verdict"] == "not_supported":
        return f"{x} scores lower"
    mde = entry.get("min_detectable_effect")
    return "not resolved" + (f": a true difference of ±{mde:.3g} or more would have been found (80% power)"
                             if mde else "")


def _entry(entry: dict, result_dir: Path, report_dir: Path, plots: dict) -> dict:
    keep = ("family", "arm", "vs", "key", "verdict", "seeds", "delta", "ci", "ci_level", "p",
            "min_detectable_effect", "mean_x", "mean_y", "tests_in_family", "reason")
    out = {k: entry[k] for k in keep if k in entry}
    out["reading"] = reading(entry)
    tested = entry["vs"] if entry.get("family") == "loo" else entry["arm"]
    plot = plots.get(tested) if entry.get("family") in ("loo", "variants") else None
    if plot:
        out["plot"] = _link(result_dir, report_dir, plot)
    return out


def verification_entries(result: dict, result_dir: Path, report_dir: Path) -> dict:
    """The report's verification model: protocol, gap, leave-one-out ranking, and per key the
    verdict shown beside its classification (leave-one-out where run, else the variant arm)."""
    plan = result.get("plan", {})
    plots = result.get("plots", {})
    scoring = plan.get("scoring", {})
    entries = [_entry(e, result_dir, report_dir, plots) for e in result["verdicts"]]
    keys: dict[str, dict] = {}
    for family in ("variants", "loo"):  # leave-one-out wins where both ran
        for entry in entries:
            if entry.get("family") == family and entry.get("key"):
                keys[entry["key"]] = entry
    gap = dict(result.get("gap") or {})
    for name, _ in GAP_ROWS:
        if isinstance(gap.get(name), dict):
            gap[name] = dict(gap[name], reading=reading(gap[name]))
    envs = plan.get("envs", [])
    gap_plots = [_link(result_dir, report_dir, plots[f"gap:{env}"]) for env in envs if f"gap:{env}" in plots]
    loo = sorted((e for e in entries if e.get("family") == "loo"),
                 key=lambda e: (-(e.get("delta") if e.get("delta") is not None else float("-inf")), e["arm"]))
    runs = result["runs"]
    return {
        "protocol": {
            "envs": envs, "seeds": plan.get("seeds"), "env_steps": plan.get("budget"),
            "requested_budget": plan.get("requested_budget"), "num_envs": plan.get("num_envs"),
            "arm_groups": plan.get("arm_groups", []), "score_kind": scoring.get("score_kind"),
            "eval_envs": scoring.get("eval_envs"), "deterministic": scoring.get("deterministic"),
            "checkpoints": scoring.get("evals"), "device": result.get("device"),
            "overrides": plan.get("overrides", {}), "warnings": plan.get("warnings", []),
            "spec_sets": plan.get("spec_sets", {}),
            "runs": len(runs), "failed": sum(1 for r in runs if r.get("status") != "ok"),
            "throughput": result.get("throughput", {}),
        },
        "gap": gap,
        "gap_rows": [{"name": name, "title": title} for name, title in GAP_ROWS if isinstance(gap.get(name), dict)],
        "gap_plots": gap_plots,
        "leave_one_out": loo,
        "keys": dict(sorted(keys.items())),
        "source": _link(result_dir, report_dir, "verify.json"),
    }
