"""A ``brax-diff verify`` result (its verify.json) as the report shows it.

Static: reads JSON, imports nothing of the training stack. The report leads with what a
maintainer may conclude and what not (:func:`conclusions`: whether the stand-in is shown to be
Brax's trainer first, then each comparison resolved or not and what its seeds could have
found, then the scale the runs stand for), then the gap (baseline, the fixes and the stand-in
against Brax's trainer, the fraction of the gap the fixes close), the scores per environment,
what each fix is worth with the others applied (leave-one-out), and puts each key's verdict
beside its classification. Every number keeps its interval and its level, and every
inconclusive one the effect its seed count could have found.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import BraxDiffError

GAP_ROWS = (
    ("baseline_vs_reference", "SLM-Lab's settings (baseline) vs Brax's trainer (reference)"),
    ("all_fixes_vs_reference", "{fixes} (all_fixes) vs Brax's trainer (reference)"),
    ("all_fixes_vs_baseline", "{fixes} (all_fixes) vs SLM-Lab's settings (baseline)"),
    ("spec_fixes_vs_reference", "the spec variant `brax-diff fix` writes (spec_fixes) vs Brax's trainer (reference)"),
    ("spec_fixes_vs_baseline", "the spec variant `brax-diff fix` writes (spec_fixes) vs SLM-Lab's settings (baseline)"),
    ("baseline_vs_stand_in", "SLM-Lab's settings (baseline) vs the stand-in (stand_in)"),
    ("all_fixes_vs_stand_in", "{fixes} (all_fixes) vs the stand-in (stand_in)"),
    ("spec_fixes_vs_stand_in", "the spec variant `brax-diff fix` writes (spec_fixes) vs the stand-in (stand_in)"),
)
# Arms in the order the per-environment table shows them, with what each is.
ARMS = (("baseline", "SLM-Lab's settings"), ("spec_fixes", "the spec variant `brax-diff fix` writes"),
        ("all_fixes", "every expressible fix, code changes included"),
        ("stand_in", "Brax's settings and loss semantics in the PyTorch trainer"),
        ("reference", "Brax's own trainer"))
# What all_fixes trained (plan.all_fixes.from; a verify.json without it predates the spec arm)
ALL_FIXES_TITLES = {"settings": "every expressible fix, trainer-level, code changes included",
                    "spec": "the spec variant `brax-diff fix` writes"}


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
    x = entry.get("arm", "the arm")
    if entry.get("verdict") == "supported":
        return f"{x} scores higher"
    if entry.get("verdict") == "not_supported":
        return f"{x} scores lower"
    return "not resolved" + (f": {would_find(entry)}" if would_find(entry) else "")


def would_find(entry: dict) -> str:
    """What the seeds could have found, simulated on the verdict's own test: a location shift,
    and (where measured) an effect made of more seeds solving."""
    mde = entry.get("min_detectable_effect")
    if not mde:
        return ""
    out = f"a true shift of ±{mde:.3g} or more would have been found with 80% probability"
    if "min_detectable_solve_share" in entry:
        share = entry["min_detectable_solve_share"]
        out += (f", an effect of more seeds solving only if {share:.0%} or more of them newly solve" if share is not None
                else ", an effect of more seeds solving not even if every seed newly solved")
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _typed(entry: dict) -> dict:
    """The fields of one verdict the report shows, each of the type it needs; a field of
    another type is left out rather than shown wrong (or crashing the rendering)."""
    out: dict[str, Any] = {}
    for name in ("family", "arm", "vs", "key", "verdict", "reason", "env"):
        if isinstance(entry.get(name), str):
            out[name] = entry[name]
    for name in ("delta", "ci_level", "p", "min_detectable_effect", "mean_x", "mean_y"):
        if _number(entry.get(name)):
            out[name] = entry[name]
    if "min_detectable_solve_share" in entry and (entry["min_detectable_solve_share"] is None
                                                  or _number(entry["min_detectable_solve_share"])):
        out["min_detectable_solve_share"] = entry["min_detectable_solve_share"]
    for name in ("seeds", "tests_in_family"):
        if isinstance(entry.get(name), int) and not isinstance(entry.get(name), bool):
            out[name] = entry[name]
    ci = entry.get("ci")
    if isinstance(ci, list) and len(ci) == 2 and all(map(_number, ci)) and "ci_level" in out:
        out["ci"] = ci
    return out


def _equivalence(raw: Any) -> dict | None:
    """verify.json ``equivalence`` (stand_in vs reference, TOST per env), typed; None if absent."""
    if not isinstance(raw, dict) or not isinstance(raw.get("envs"), dict):
        return None
    envs = []
    for env, test in sorted(raw["envs"].items()):
        if not isinstance(test, dict):
            continue
        row: dict[str, Any] = {"env": str(env), "equivalent": test.get("equivalent")
                               if test.get("equivalent") in (True, False) else None}
        for name in ("difference", "p_lower", "p_upper", "margin"):
            if _number(test.get(name)):
                row[name] = test[name]
        for name in ("n_stand_in", "n_reference"):
            if isinstance(test.get(name), int) and not isinstance(test.get(name), bool):
                row[name] = test[name]
        if isinstance(test.get("reason"), str):
            row["reason"] = test["reason"]
        paired = test.get("paired_difference")
        if (isinstance(paired, dict) and _number(paired.get("difference")) and _number(paired.get("p"))
                and isinstance(paired.get("ci"), list) and len(paired["ci"]) == 2 and all(map(_number, paired["ci"]))
                and isinstance(paired.get("seeds"), int)):
            row["paired"] = {name: paired[name] for name in ("difference", "p", "ci", "seeds")}
            # held at its level in the list of conclusions' Holm where verify put it there
            level = paired.get("level") if _number(paired.get("level")) else (
                paired.get("alpha") if _number(paired.get("alpha")) else 0.05)
            row["paired"]["different"] = paired["p"] <= level if _number(paired.get("level")) else paired["p"] < level
        envs.append(row)
    return {"margin": raw.get("margin") if _number(raw.get("margin")) else None,
            "alpha": raw.get("alpha") if _number(raw.get("alpha")) else None,
            "level": raw.get("level") if _number(raw.get("level")) else None,
            "equivalent": raw.get("equivalent") if raw.get("equivalent") in (True, False) else None, "envs": envs,
            "margin_rule": raw.get("margin_rule") if isinstance(raw.get("margin_rule"), str) else None,
            # a verify.json from before the paired test reads (and renders) as it did
            **({"paired": True} if any("paired" in row for row in envs) else {})}


def per_env_scores(runs: list[dict], envs: list[str], threshold: Any) -> dict:
    """Each arm's finished scores per env: mean, count, and how many reached ``threshold``
    (the plan's solve threshold; None: not counted). Descriptive: the tests are the gap's."""
    present = {r.get("arm") for r in runs}
    arms = [(arm, what) for arm, what in ARMS if arm in present]
    rows = []
    for env in envs:
        cells = {}
        for arm, _ in arms:
            scores = [r["score"] for r in runs if r.get("env") == env and r.get("arm") == arm
                      and r.get("status") == "ok" and _number(r.get("score"))]
            cells[arm] = {"n": len(scores), "mean": sum(scores) / len(scores) if scores else None,
                          "solved": sum(1 for x in scores if x >= threshold) if _number(threshold) else None}
        rows.append({"env": env, "cells": cells})
    return {"arms": [{"name": arm, "what": what} for arm, what in arms], "rows": rows,
            "threshold": threshold if _number(threshold) else None}


def _pm(value: float) -> str:
    return f"{value:+.4g}"


def conclusions(gap: dict, rows: list[dict], equivalence: dict | None, protocol: dict, planned_arms: set[str]
                ) -> dict[str, list[str]]:
    """What a maintainer may conclude from the runs and what not, in sentences: the stand-in
    first (is the gap against the reference the gap against Brax?), then each comparison of the
    gap table, then the fraction closed, then the scale the runs stand for."""
    may: list[str] = []
    may_not: list[str] = []
    margin = equivalence.get("margin") if equivalence else None
    if equivalence is not None:
        failed = [e for e in equivalence["envs"] if e["equivalent"] is False]
        untested = [e for e in equivalence["envs"] if e["equivalent"] is None]
        different = [e for e in equivalence["envs"] if e.get("paired", {}).get("different")]
        rule = equivalence.get("margin_rule")
        within = (", ".join(f"±{e['margin']:.3g} on {e['env']}" for e in equivalence["envs"] if "margin" in e)
                  + f" (the margin {rule})") if rule else f"±{margin:g} on every environment"
        paired = [e for e in equivalence["envs"] if "paired" in e]
        reading = ("Paired by seed, stand_in − reference is " + "; ".join(
            f"{_pm(e['paired']['difference'])} [{_pm(e['paired']['ci'][0])}, {_pm(e['paired']['ci'][1])}] on {e['env']}"
            for e in paired) + " (95 %, " + f"{paired[0]['paired']['seeds']} seeds): " if paired else "")
        if equivalence["equivalent"] is True:
            may.append(f"{reading}the stand-in (Brax's settings and loss semantics in the PyTorch trainer) scores as "
                       f"Brax's own trainer does, within {within} (two one-sided tests at "
                       f"{equivalence.get('level') or equivalence.get('alpha') or 0.05:.3g}): the gap against it is "
                       "the gap against Brax"
                       + (", to within that margin." if different else "."))
            may[-1] = may[-1][:1].upper() + may[-1][1:]
        else:
            what = "; ".join(f"{e['env']} {_pm(e['difference'])}" for e in failed if "difference" in e)
            level = equivalence.get("level")
            margins = ", ".join(f"±{e['margin']:.3g} on {e['env']}" for e in failed if "margin" in e)
            may_not.append(
                "**The stand-in is not shown to be Brax's trainer**"
                + (f" at the level the list's Holm holds it to ({level:.3g})" if level else "") + ": "
                + (reading[:1].lower() + reading[1:] if failed and paired else "")
                + (f"its scores are not shown within {margins if rule else f'±{margin:g}'} of the reference's on "
                   f"{', '.join(e['env'] for e in failed)}" + ("" if paired else f" (mean stand_in − reference: {what})")
                   if failed else "")
                + ("; " if failed and untested else "")
                + (f"{', '.join(e['env'] for e in untested)}: too few runs to test" if untested else "")
                + ". A gap against the reference then mixes SLM-Lab's differences with differences between the two "
                  "trainers that no spec or code fix in SLM-Lab moves; the rows against the stand-in hold those apart.")
        if different:
            may_not.append(
                "The stand-in's scores are not Brax's trainer's exactly: paired by seed, they differ on "
                + "; ".join(f"{e['env']} by {_pm(e['paired']['difference'])} [{_pm(e['paired']['ci'][0])}, "
                            f"{_pm(e['paired']['ci'][1])}] over {e['paired']['seeds']} seeds (p {e['paired']['p']:.2g})"
                            for e in different)
                + ". A comparison against the stand-in there carries that difference too.")
    elif "reference" in planned_arms:
        may_not.append("No stand-in ran (`--arms gap,stand_in` runs it): a gap against Brax's trainer mixes SLM-Lab's "
                       "differences with differences between the two trainers.")
    seeds = gap.get("seeds")
    per_env = gap.get("per_env") or {}
    disagree = set(gap.get("sign_disagrees") or [])
    for row in rows:
        title = row["title"][:1].upper() + row["title"][1:]  # a sentence of its own
        entries = [(None, gap.get(row["name"]) or {})]
        if row["name"] in disagree:  # the pooled row hides opposite signs: each environment instead
            entries = sorted(per_env.get(row["name"], {}).items())
        else:  # a resolved environment is a conclusion of the same list
            entries += [(env, e) for env, e in sorted(per_env.get(row["name"], {}).items())
                        if e.get("verdict") in ("supported", "not_supported")]
        for env, entry in entries:
            where = f" on {env}" if env else (" (pooled over the environments)" if per_env.get(row["name"]) else "")
            n = entry.get("seeds", seeds)
            if entry.get("verdict") in ("supported", "not_supported") and "ci" in entry:
                higher = "higher" if entry["verdict"] == "supported" else "lower"
                may.append(f"{title}{where}: {entry.get('arm', 'the first')} scores {higher}, by "
                           f"{abs(entry['delta']):.4g} ([{entry['ci'][0]:.4g}, {entry['ci'][1]:.4g}] at "
                           f"{entry['ci_level']:.1%}, {n} paired seeds).")
            elif "delta" in entry:
                found = would_find(entry)
                may_not.append(f"{title}{where}: not resolved at {n} paired seeds (mean difference "
                               f"{_pm(entry['delta'])})" + (f"; {found}, a smaller one would not" if found else "")
                               + ".")
        if row["name"] in disagree:
            signs = ", ".join(f"{env} {_pm(e['delta'])}" for env, e in sorted(per_env[row["name"]].items())
                              if "delta" in e)
            may_not.append(f"{title}, pooled over the environments: their differences have opposite signs ({signs}), "
                           "so the pooled difference describes neither.")
    fraction, interval = gap.get("closed_fraction"), gap.get("closed_fraction_ci")
    level = gap.get("closed_fraction_level") if _number(gap.get("closed_fraction_level")) else 0.95
    if fraction == "unbounded":
        may_not.append("How much of the gap the fixes close: the gap itself is not resolved, so the fraction is "
                       "unbounded.")
    elif _number(fraction) and interval:
        shown = f"{level:.0%}" if abs(level * 100 - round(level * 100)) < 1e-9 else f"{level:.2%}"
        span = f"{fraction:.3g} [{interval[0]:.3g}, {interval[1]:.3g}] at {shown} (Fieller)"
        if interval[0] > 0 or interval[1] < 0:
            may.append(f"The fixes (all_fixes) move SLM-Lab's score toward Brax's trainer's by a fraction {span} of "
                       "the gap" if interval[0] > 0 else
                       f"The fixes (all_fixes) move SLM-Lab's score away from Brax's trainer's: fraction {span}.")
        else:
            may_not.append(f"Whether the fixes (all_fixes) close any of the gap: the fraction {span} holds 0.")
    may_not.append(regime(protocol))
    return {"may": may, "may_not": may_not}


def regime(protocol: dict) -> str:
    """What regime the runs measure, against SLM-Lab's own operating point: the scale, the share
    of SLM-Lab's budget, how many updates each trainer makes; their ranking is not the
    published gap."""
    scale = []
    if protocol.get("num_envs"):
        scale.append(f"{protocol['num_envs']} envs")
    scale += [f"{k}={v}" for k, v in sorted((protocol.get("overrides") or {}).items())]
    steps, budget = protocol.get("env_steps"), protocol.get("slm_budget")
    if steps:
        scale.append(f"{steps:,} env steps a run"
                     + (f" ({steps / budget:.2%} of SLM-Lab's {budget:,})" if budget else ""))
    updates = protocol.get("updates") or {}
    said = ", ".join(f"{arm} {n}" for arm, n in updates.items())
    return ("What happens at SLM-Lab's own operating point: these runs measure another regime"
            + (f" ({', '.join(scale)})" if scale else "")
            + (f", in which the arms make {said} updates" if said else "")
            + ". Early in training the trainer that updates more often leads, so their ranking is what this "
              "regime predicts, not the published gap; a difference not resolved here may still matter at 2,048 envs "
              "and the full budget.")


def _entry(entry: dict, result_dir: Path, report_dir: Path, plots: dict) -> dict:
    out = _typed(entry)
    out["reading"] = reading(out)
    tested = out.get("vs") if out.get("family") == "loo" else out.get("arm")
    plot = plots.get(tested) if out.get("family") in ("loo", "variants") and isinstance(plots, dict) else None
    plot = plot if isinstance(plot, str) else None
    if plot:
        out["plot"] = _link(result_dir, report_dir, plot)
    return out


def _updates(plan: dict, envs: list[str]) -> dict[str, int]:
    """Updates per run of each arm on the first environment (budget / env steps per update)."""
    steps = plan.get("update_steps") if isinstance(plan.get("update_steps"), dict) else {}
    first = steps.get(envs[0]) if envs and isinstance(steps.get(envs[0]), dict) else {}
    budget = plan.get("budget")
    if not isinstance(budget, int) or isinstance(budget, bool):
        return {}
    return {arm: budget // n for arm, n in first.items() if isinstance(n, int) and n > 0 and ":" not in arm}


def verification_entries(result: dict, result_dir: Path, report_dir: Path) -> dict:
    """The report's verification model: protocol, gap, leave-one-out ranking, and per key the
    verdict shown beside its classification (leave-one-out where run, else the variant arm)."""
    plan = result.get("plan") if isinstance(result.get("plan"), dict) else {}
    plots = result.get("plots") if isinstance(result.get("plots"), dict) else {}
    scoring = plan.get("scoring") if isinstance(plan.get("scoring"), dict) else {}
    entries = [_entry(e, result_dir, report_dir, plots) for e in result["verdicts"]]
    keys: dict[str, dict] = {}
    for family in ("variants", "loo"):  # leave-one-out wins where both ran
        for entry in entries:
            if entry.get("family") == family and entry.get("key"):
                keys[entry["key"]] = entry
    raw_gap = result.get("gap") or {}
    gap: dict[str, Any] = {}
    for name, _ in GAP_ROWS:
        if isinstance(raw_gap.get(name), dict):
            row = _typed(raw_gap[name])
            gap[name] = dict(row, reading=reading(row))
    if isinstance(raw_gap.get("per_env"), dict):
        gap["per_env"] = {}
        for name, envs in raw_gap["per_env"].items():
            if name in gap and isinstance(envs, dict):
                gap["per_env"][name] = {}
                for env, entry in envs.items():
                    if isinstance(entry, dict):
                        row = _typed(entry)
                        gap["per_env"][name][str(env)] = dict(row, reading=reading(row))
        gap["sign_disagrees"] = [n for n in raw_gap.get("sign_disagrees") or [] if n in gap["per_env"]]
    if _number(raw_gap.get("closed_fraction_level")):
        gap["closed_fraction_level"] = raw_gap["closed_fraction_level"]
    for name in ("closed_fraction", "baseline_mean", "all_fixes_mean", "reference_mean"):
        if _number(raw_gap.get(name)):
            gap[name] = raw_gap[name]
    if raw_gap.get("closed_fraction") == "unbounded":  # never a number: its denominator may be 0
        gap["closed_fraction"] = "unbounded"
    interval = raw_gap.get("closed_fraction_ci")
    if isinstance(interval, list) and len(interval) == 2 and all(map(_number, interval)):
        gap["closed_fraction_ci"] = interval
    if _number(gap.get("closed_fraction")) and "closed_fraction_ci" not in gap:
        # a ratio without its interval (a verify.json older than "unbounded"): its denominator's
        # interval held 0, so the number is noise and is not shown
        gap["closed_fraction"] = "unbounded"
    if isinstance(raw_gap.get("reason"), str):
        gap["reason"] = raw_gap["reason"]
    if isinstance(raw_gap.get("seeds"), int):
        gap["seeds"] = raw_gap["seeds"]
    envs = [e for e in plan.get("envs", []) if isinstance(e, str)] if isinstance(plan.get("envs"), list) else []
    gap_plots = [{"env": env, "link": _link(result_dir, report_dir, plots[f"gap:{env}"])} for env in envs
                 if isinstance(plots.get(f"gap:{env}"), str)]
    loo = sorted((e for e in entries if e.get("family") == "loo"),
                 key=lambda e: (-e.get("delta", float("-inf")), e.get("arm", "")))
    runs = result["runs"]

    def whole(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def mapping(value: Any) -> dict:
        return {str(k): v for k, v in value.items() if isinstance(v, (str, int, float, bool))} if isinstance(
            value, dict) else {}

    all_fixes = plan.get("all_fixes") if isinstance(plan.get("all_fixes"), dict) else {}
    all_fixes_from = all_fixes.get("from") if all_fixes.get("from") in ALL_FIXES_TITLES else "settings"
    throughput = {}
    for trainer, figures in (result.get("throughput") or {}).items():
        if isinstance(figures, dict) and _number(figures.get("env_steps_per_s")):
            throughput[str(trainer)] = {k: v for k, v in figures.items() if _number(v)}
    protocol = {
            "envs": envs, "seeds": whole(plan.get("seeds")), "env_steps": whole(plan.get("budget")),
            "requested_budget": whole(plan.get("requested_budget")), "num_envs": whole(plan.get("num_envs")),
            "score_kind": scoring.get("score_kind") if isinstance(scoring.get("score_kind"), str) else None,
            "eval_envs": whole(scoring.get("eval_envs")), "deterministic": scoring.get("deterministic") is True,
            "checkpoints": whole(scoring.get("evals")),
            "arm_groups": [a for a in plan.get("arm_groups", []) if isinstance(a, str)]
            if isinstance(plan.get("arm_groups"), list) else [],
            "device": result.get("device") if isinstance(result.get("device"), str) else None,
            "overrides": mapping(plan.get("overrides")), "spec_sets": mapping(plan.get("spec_sets")),
            "warnings": [w for w in plan.get("warnings", []) if isinstance(w, str)]
            if isinstance(plan.get("warnings"), list) else [],
            "runs": len(runs), "failed": sum(1 for r in runs if r.get("status") != "ok"),
            "throughput": throughput,
            # the fixes all_fixes moved: each would be one leave-one-out arm
            "slm_budget": next((a.get("slm") for a in plan.get("ablations", []) if isinstance(a, dict)
                                and a.get("key") == "training_env_steps" and _number(a.get("slm"))), None)
            if isinstance(plan.get("ablations"), list) else None,
            "updates": _updates(plan, envs),
            "tests_in_list": max((e.get("tests_in_family", 0) for e in entries if e.get("family") in ("gap", "stand_in")),
                                 default=0),
            "fixes_moved": len({a.get("key") for a in plan.get("ablations", []) if isinstance(a, dict)
                                and a.get("action") == "variant"}) if isinstance(plan.get("ablations"), list) else None,
    }
    gap_rows = [{"name": name, "title": title.format(fixes=ALL_FIXES_TITLES[all_fixes_from])}
                for name, title in GAP_ROWS if name in gap]
    equivalence = _equivalence(result.get("equivalence"))
    planned = {r.get("arm") for r in runs if isinstance(r, dict)}
    return {
        "protocol": protocol,
        "conclusions": conclusions(gap, gap_rows, equivalence, protocol, planned),
        "equivalence": equivalence,
        "per_env": per_env_scores([r for r in runs if isinstance(r, dict)], envs, plan.get("solve_threshold")),
        "gap": gap,
        "gap_rows": gap_rows,
        "all_fixes_from": all_fixes_from,
        "gap_plots": gap_plots,
        "leave_one_out": loo,
        "keys": dict(sorted(keys.items())),
        "source": _link(result_dir, report_dir, "verify.json"),
    }
