"""Run a plan: every run once (cached), then the gap, the verdicts, plots and one JSON result.

A run that raises or goes NaN is recorded as failed with its error and counted as such;
it is never silently dropped. Finished runs come from the cache, so an interrupted
``verify`` resumes where it stopped.

The statistics compare only runs of one ``score_kind`` and one env-step count, and use the
seeds every compared arm finished (seed i of each arm shares reset keys and, where the shapes
allow, initial weights). Families (Holm-Bonferroni):

* ``gap``: all_fixes (trainer-level, code changes included) vs baseline, reference vs baseline,
  reference vs all_fixes, and where planned spec_fixes (the variant ``brax-diff fix`` writes)
  vs baseline and reference vs spec_fixes;
* ``stand_in``: the gap against the stand-in (Brax's settings and loss semantics in this
  trainer), where planned: stand_in vs baseline, all_fixes and spec_fixes. It reads as the gap
  against Brax only as far as the stand-in is shown to be Brax's trainer (``equivalence``).
  gap and stand_in are the report's list of conclusions: one Holm over both, each row pooled
  and per environment, with the stand-in's equivalence and paired differences (:func:`judge`);
* ``loo``: all_fixes vs loo:<key> for each key (is that fix worth anything given the others?);
* ``variants``: variant:<key> vs baseline.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BraxDiffError
from ..facts.model import dumps
from ..safety.io import write_atomic
from . import stats
from .cache import FAILED, OK, RunCache, RunResult
from .plan import (ALL_FIXES, ARM_TITLES, BASELINE, BRAX, GAP_COMPARISONS, REFERENCE, SPEC_FIXES,
                   STAND_IN, STAND_IN_COMPARISONS, TORCH, Plan, check_executor, units)
from .worker import Progress, Runner, configure_cpu_process, pick_device, quiet_xla_logs, run_worker_unit, start_worker

CPU_HINT = ("no GPU visible to both JAX and PyTorch: training on the CPU; `brax-diff verify --plan` estimates "
            "the time, and --preset cpu sizes a plan for a 2-core machine")

UNBOUNDED = "unbounded"  # verify.json's closed_fraction when its interval is the whole line


@dataclass
class VerifyResult:
    plan: Plan
    results: list[RunResult]
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    gap: dict[str, Any] = field(default_factory=dict)
    plots: dict[str, str] = field(default_factory=dict)
    device: str = "cpu"
    seconds: float = 0.0
    platform: dict[str, Any] = field(default_factory=dict)  # platform.describe() of the machine that ran it
    equivalence: dict[str, Any] | None = None  # stand_in vs reference (.equivalence), when both ran

    @property
    def failed(self) -> list[RunResult]:
        return [r for r in self.results if r.status == FAILED]

    def throughput(self) -> dict[str, dict[str, Any]]:
        """Env steps/s of each trainer over its finished runs (the whole run, evaluations included)."""
        out: dict[str, dict[str, Any]] = {}
        for trainer in (TORCH, BRAX):
            runs = [r for r in self.results if r.spec.trainer == trainer and r.status == OK and r.seconds > 0]
            if runs:
                steps, seconds = sum(r.env_steps for r in runs), sum(r.seconds for r in runs)
                cpu = sum(r.cpu_seconds for r in runs)
                out[trainer] = {"runs": len(runs), "env_steps": steps, "seconds": round(seconds, 1),
                                "env_steps_per_s": round(steps / seconds, 1), "cpu_seconds": round(cpu, 1),
                                "env_steps_per_cpu_s": round(steps / cpu, 1) if cpu > 0 else None}
        return out

    def to_json(self) -> dict:
        from .platform import describe

        return {
            "plan": self.plan.to_json(),
            "platform": self.platform or describe(),
            "device": self.device,
            "gap": self.gap,
            **({"equivalence": self.equivalence} if self.equivalence is not None else {}),
            "verdicts": self.verdicts,
            "plots": dict(sorted(self.plots.items())),
            "throughput": self.throughput(),
            "runs": [{"arm": r.spec.arm, "env": r.spec.env, "seed": r.spec.seed, "trainer": r.spec.trainer,
                      "status": r.status, "score": r.score, "score_kind": r.score_kind, "env_steps": r.env_steps,
                      "steps": r.steps, "scores": r.scores, "seconds": round(r.seconds, 1),
                      "cpu_seconds": round(r.cpu_seconds, 1), "error": r.error}
                     for r in self.results],
        }


# -- statistics over runs ----------------------------------------------------------------
def _finished(results: list[RunResult], env: str, arm: str) -> dict[int, RunResult]:
    return {r.spec.seed: r for r in results
            if r.spec.env == env and r.spec.arm == arm and r.status == OK and r.score is not None}


def paired_scores(results: list[RunResult], envs: list[str], x_arm: str, y_arm: str):
    """(x, y) score matrices (seeds, envs) over the seeds both arms finished in every env.

    Raises BraxDiffError when the runs are not the same quantity (score kind, env steps)."""
    x_runs = {env: _finished(results, env, x_arm) for env in envs}
    y_runs = {env: _finished(results, env, y_arm) for env in envs}
    seeds = sorted(set.intersection(*(set(x_runs[e]) & set(y_runs[e]) for e in envs))) if envs else []
    compared = [runs[e][s] for runs in (x_runs, y_runs) for e in envs for s in seeds]
    kinds = {r.score_kind for r in compared}
    steps = {r.env_steps for r in compared}
    if len(kinds) > 1 or len(steps) > 1:
        raise BraxDiffError(f"{x_arm} vs {y_arm}: runs of different kinds cannot be compared "
                            f"(score kinds {sorted(kinds)}, env steps {sorted(steps)})")
    x = [[x_runs[e][s].score for e in envs] for s in seeds]
    y = [[y_runs[e][s].score for e in envs] for s in seeds]
    return x, y, seeds


def _family(results: list[RunResult], plan: Plan, family: str | dict[str, str],
            comparisons: dict[str, tuple[str, str, list[str]]], extra: dict[str, float] | None = None,
            extra_levels: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Decide one family, one Holm over ``{name: (x arm, y arm, envs)}``; entries in the
    verify.json form. ``family``: its name, or each comparison's (a list of conclusions that
    spans families is still one Holm). ``extra``: other p-values held under the same Holm;
    the level each was held to goes into ``extra_levels``."""
    matrices, meta = {}, {}
    for name, (x_arm, y_arm, envs) in comparisons.items():
        x, y, seeds = paired_scores(results, envs, x_arm, y_arm)
        meta[name] = (x_arm, y_arm, envs, seeds)
        if seeds:
            matrices[name] = (x, y)
    decided = stats.decide_family(matrices, solve_threshold=plan.solve_threshold, extra_pvalues=extra)
    for name in extra or {}:
        if extra_levels is not None:
            extra_levels[name] = decided[name].level
    out = []
    for name in sorted(comparisons):
        x_arm, y_arm, envs, seeds = meta[name]
        entry: dict[str, Any] = {"family": family if isinstance(family, str) else family[name], "name": name,
                                 "arm": x_arm, "vs": y_arm, "envs": envs}
        if "@" in name:  # one environment of a pooled comparison (per_env_name)
            entry["env"] = name.split("@", 1)[1]
        tested = x_arm if ":" in x_arm else y_arm  # loo: all_fixes vs loo:<key>; variants: variant:<key> vs baseline
        if ":" in tested:
            entry["key"] = tested.split(":", 1)[1]
        if name in decided:
            entry.update(decided[name].to_json())
        else:
            entry.update(verdict=stats.INCONCLUSIVE, seeds=0, ci=None, min_detectable_effect=None,
                         reason="no seed finished in both arms")
        entry["seed_list"] = seeds
        out.append(entry)
    return out


def per_env_name(name: str, env: str) -> str:
    """A list comparison on one environment alone."""
    return f"{name}@{env}"


def verdicts(plan: Plan, results: list[RunResult], extra: dict[str, float] | None = None,
             extra_levels: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Every comparison the plan's arms allow, family by family; ``extra`` p-values (the
    equivalence test) join the list of conclusions' Holm, their levels in ``extra_levels``."""
    arms = set(plan.arms())
    out: list[dict[str, Any]] = []
    # The gap and stand_in rows are the report's list of conclusions: one Holm over every one of
    # them, pooled and (with several environments) on each alone, so that the list as a whole
    # holds 5 % whichever rows it states (per environment where the pooled effect hides a sign).
    listed: dict[str, tuple[str, str, list[str]]] = {}
    family_of: dict[str, str] = {}
    for family, table in (("gap", GAP_COMPARISONS), ("stand_in", STAND_IN_COMPARISONS)):
        for name, (x, y) in table.items():
            if {x, y} <= arms:
                listed[name], family_of[name] = (x, y, list(plan.envs)), family
    if len(plan.envs) > 1:
        for name, (x, y, _) in list(listed.items()):
            for env in plan.envs:
                listed[per_env_name(name, env)], family_of[per_env_name(name, env)] = (x, y, [env]), family_of[name]
    if listed:
        out += _family(results, plan, family_of, listed, extra, extra_levels)
    for prefix, family, base in (("loo:", "loo", ALL_FIXES), ("variant:", "variants", BASELINE)):
        comparisons = {}
        for arm in sorted(a for a in arms if a.startswith(prefix)):
            envs = [e for e in plan.envs if any(r.arm == arm and r.env == e for r in plan.runs)]
            # leave-one-out: x is all_fixes (with the fix), y the arm without it
            comparisons[arm] = (base, arm, envs) if family == "loo" else (arm, base, envs)
        if comparisons:
            out += _family(results, plan, family, comparisons)
    return out


EQUIVALENCE = "stand_in_equivalent_to_reference"  # the equivalence test's name in the list's Holm
DIFFERS = "stand_in_differs_from_reference"  # the paired difference's, per environment


def judge(plan: Plan, results: list[RunResult]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The verdicts and the equivalence of the stand-in, every claim the report's conclusions
    list held under one Holm: the equivalence test (an intersection-union test over the
    environments, p the largest of its one-sided p-values) is one more test of the list, and
    "equivalent" holds only at the level it gets there."""
    same = equivalence(plan, results)
    extra: dict[str, float] = {}
    if same is not None:
        if same.get("p") is not None:
            extra[EQUIVALENCE] = same["p"]
        for env, test in same["envs"].items():  # "the stand-in differs on <env>" is a conclusion too
            if (test.get("paired_difference") or {}).get("p") is not None:
                extra[per_env_name(DIFFERS, env)] = test["paired_difference"]["p"]
    levels: dict[str, float] = {}
    decided = verdicts(plan, results, extra or None, levels)
    if same is not None and EQUIVALENCE in levels:
        level = levels[EQUIVALENCE]
        same["level"] = level
        for test in same["envs"].values():
            if test.get("equivalent") is not None:
                test["equivalent"] = bool(max(test["p_lower"], test["p_upper"]) <= level)
        same["equivalent"] = bool(same["p"] <= level)
    for env, test in (same or {}).get("envs", {}).items():
        if per_env_name(DIFFERS, env) in levels:
            test["paired_difference"]["level"] = levels[per_env_name(DIFFERS, env)]
    return decided, same


def equivalence(plan: Plan, results: list[RunResult]) -> dict[str, Any] | None:
    """Is the stand-in Brax as score distributions: :func:`.equivalence.equivalence_summary` of
    stand_in vs reference per env, at the plan's margin; None when the plan has not both arms."""
    from .equivalence import equivalence_summary

    if not {STAND_IN, REFERENCE} <= set(plan.arms()):
        return None
    scores, paired = {}, {}
    for env in plan.envs:
        stand_in, reference = _finished(results, env, STAND_IN), _finished(results, env, REFERENCE)
        scores[env] = ([stand_in[s].score for s in sorted(stand_in)], [reference[s].score for s in sorted(reference)])
        both = sorted(set(stand_in) & set(reference))
        paired[env] = ([stand_in[s].score for s in both], [reference[s].score for s in both])
    return equivalence_summary(scores, plan.equivalence_margin, paired=paired, per_env_margin=True)


def gap_summary(plan: Plan, results: list[RunResult], decided: list[dict[str, Any]]) -> dict[str, Any]:
    """How far baseline and all_fixes are from Brax's trainer, and the fraction of the gap closed.

    Every row of the list (gap and stand_in families) read as "<arm> vs <reference or
    stand_in>", pooled; ``per_env``: the same rows on each environment alone (decided in the
    same Holm), with ``sign_disagrees`` naming the rows whose environments' differences have
    opposite signs (the pooled row then hides one of them).

    closed_fraction = (all_fixes - baseline) / (reference - baseline) on the arms' means, with
    Fieller's interval from the paired per-seed differences, at the level the gap's own row
    (reference vs baseline) was held to. Only when that row is decisive (its interval excludes
    0) is the fraction a number; otherwise it is ``"unbounded"``: a ratio whose denominator may
    be 0 has no number to print."""
    arms = set(plan.arms())
    if not {BASELINE, ALL_FIXES, REFERENCE} <= arms:
        return {}
    by_name = {d["name"]: d for d in decided if d["family"] in ("gap", "stand_in")}
    seeds = sorted(set.intersection(*(set(_finished(results, e, a)) for e in plan.envs
                                      for a in (BASELINE, ALL_FIXES, REFERENCE))))
    out: dict[str, Any] = {"envs": list(plan.envs), "seeds": len(seeds), "env_steps": plan.budget,
                           "score_kind": plan.scoring.kind}
    rows = {"baseline_vs_reference": ("reference_vs_baseline", True),
            "all_fixes_vs_reference": ("reference_vs_all_fixes", True),
            "all_fixes_vs_baseline": ("all_fixes_vs_baseline", False),
            "spec_fixes_vs_reference": ("reference_vs_spec_fixes", True),
            "spec_fixes_vs_baseline": ("spec_fixes_vs_baseline", False)}
    rows.update({f"{y}_vs_stand_in": (name, True) for name, (_, y) in STAND_IN_COMPARISONS.items()})
    per_env: dict[str, dict[str, Any]] = {}
    disagree = []
    for row, (name, flip) in rows.items():
        if name not in by_name:
            continue
        out[row] = _flip(by_name[name]) if flip else by_name[name]
        envs = {env: by_name[per_env_name(name, env)] for env in plan.envs if per_env_name(name, env) in by_name}
        if envs:
            per_env[row] = {env: _flip(e) if flip else e for env, e in envs.items()}
            signs = {math.copysign(1.0, e["delta"]) for e in per_env[row].values()
                     if e.get("delta") is not None and e["delta"] != 0}
            if len(signs) > 1:
                disagree.append(row)
    if per_env:
        out["per_env"] = per_env
        out["sign_disagrees"] = disagree
    if len(seeds) < 2:
        out.update(closed_fraction=None, closed_fraction_ci=None, reason="fewer than 2 seeds finished in all three arms")
        return out
    matrices = {arm: np.array([[_finished(results, e, arm)[s].score for e in plan.envs] for s in seeds]).mean(axis=1)
                for arm in (BASELINE, ALL_FIXES, REFERENCE)}
    for arm in (BASELINE, ALL_FIXES, REFERENCE):
        out[f"{arm}_mean"] = float(matrices[arm].mean())
    closed_d = matrices[ALL_FIXES] - matrices[BASELINE]  # per seed: the paired differences
    gap_d = matrices[REFERENCE] - matrices[BASELINE]
    gap_row = by_name.get("reference_vs_baseline", {})
    level = 1.0 - gap_row.get("ci_level", 1.0 - stats.ALPHA)
    ci = gap_row.get("ci")
    resolved = gap_row.get("verdict") in (stats.SUPPORTED, stats.NOT_SUPPORTED) and ci and (ci[0] > 0 or ci[1] < 0)
    n = len(seeds)
    covariance = np.cov(np.stack([closed_d, gap_d]), ddof=1) / n
    interval = (stats.fieller_ratio(float(closed_d.mean()), float(gap_d.mean()), float(covariance[0, 0]),
                                    float(covariance[1, 1]), float(covariance[0, 1]), n - 1, alpha=level)
                if resolved else None)
    # a ratio whose denominator may be 0 has no number to print: its point estimate is noise
    out["closed_fraction"] = float(closed_d.mean() / gap_d.mean()) if interval is not None else UNBOUNDED
    out["closed_fraction_ci"] = None if interval is None else list(interval)
    out["closed_fraction_level"] = 1.0 - level
    if interval is None:
        out["reason"] = (f"the gap between baseline and reference is not resolved at {n} seeds (its interval at "
                         f"{1.0 - level:.4g} contains 0), so the fraction is unbounded")
    return out


def _flip(entry: dict[str, Any]) -> dict[str, Any]:
    """A gap-family entry read the other way round (baseline - reference instead of reference - baseline)."""
    flipped = dict(entry)
    flipped["arm"], flipped["vs"] = entry["vs"], entry["arm"]
    flipped["name"] = f"{entry['vs']}_vs_{entry['arm']}"
    for key in ("delta",):
        if flipped.get(key) is not None:
            flipped[key] = -flipped[key]
    if flipped.get("mean_x") is not None:
        flipped["mean_x"], flipped["mean_y"] = entry["mean_y"], entry["mean_x"]
    if flipped.get("ci"):
        flipped["ci"] = [-entry["ci"][1], -entry["ci"][0]]
    flipped["verdict"] = {stats.SUPPORTED: stats.NOT_SUPPORTED, stats.NOT_SUPPORTED: stats.SUPPORTED}.get(
        entry["verdict"], entry["verdict"])
    if flipped.get("poi") is not None:
        flipped["poi"] = 1.0 - entry["poi"]
    if isinstance(entry.get("solving"), dict):  # the probability of solving, read the other way round too
        solving = dict(entry["solving"])
        for x, y in (("rate_x", "rate_y"), ("rate_x_ci", "rate_y_ci"), ("only_x", "only_y")):
            if x in solving and y in solving:
                solving[x], solving[y] = entry["solving"][y], entry["solving"][x]
        solving["verdict"] = {stats.SUPPORTED: stats.NOT_SUPPORTED, stats.NOT_SUPPORTED: stats.SUPPORTED}.get(
            solving.get("verdict"), solving.get("verdict"))
        flipped["solving"] = solving
    return flipped


# -- plots -------------------------------------------------------------------------------
def _curves(results: list[RunResult], env: str, arm: str):
    return [(r.steps, r.scores) for r in results if r.spec.env == env and r.spec.arm == arm and r.status == OK]


def write_plots(plan: Plan, results: list[RunResult], output: Path) -> dict[str, str]:
    """One PNG per env for the gap (baseline, the fix arms, reference, stand_in), one per leave-one-out and
    per variant key (first environment that ran it); name -> path relative to ``output``."""
    from .plots import learning_curves

    ylabel = (f"evaluation return ({'deterministic' if plan.scoring.deterministic else 'stochastic'} policy, "
              f"{plan.scoring.eval_envs} episodes)")
    arms = plan.arms()
    plots: dict[str, str] = {}
    for env in plan.envs:
        if BASELINE in arms and (ALL_FIXES in arms or REFERENCE in arms):
            name = f"plots/{env}-gap.png"
            shown = [(BASELINE, "baseline (SLM-Lab settings)"), (ALL_FIXES, ARM_TITLES[ALL_FIXES]),
                     (SPEC_FIXES, ARM_TITLES[SPEC_FIXES]), (REFERENCE, "reference (Brax ppo.train)"),
                     (STAND_IN, "stand_in (Brax's settings and loss semantics, PyTorch)")]
            title = f"{env}: SLM-Lab settings, all fixes, Brax's trainer" + (" and the stand-in" if STAND_IN in arms else "")
            learning_curves(output / name, title,
                            {label: _curves(results, env, arm) for arm, label in shown if arm in arms}, ylabel)
            plots[f"gap:{env}"] = name
    for arm in arms:
        if not arm.startswith(("loo:", "variant:")):
            continue
        env = next(r.env for r in plan.runs if r.arm == arm)
        key = arm.split(":", 1)[1]
        base, label = (ALL_FIXES, f"loo ({key} back at SLM-Lab's value)") if arm.startswith("loo:") else (
            BASELINE, f"variant ({key} = Brax)")
        name = f"plots/{env}-{arm.replace(':', '-')}.png"
        learning_curves(output / name, f"{env}: {arm}", {base: _curves(results, env, base),
                                                         label: _curves(results, env, arm)}, ylabel)
        plots[arm] = name
    return plots


def run_plan(plan: Plan, cache_dir: str | Path, progress: bool = True, output_dir: str | Path | None = None,
             retry_failed: bool = False, device: str | None = None, log=None, jobs: int = 1,
             executor: str = "local", address: str | None = None) -> VerifyResult:
    """Run every run of ``plan`` not already in the cache, then judge and plot.

    Runs are grouped into units of work (:func:`units`: a PyTorch arm's seeds train as one
    batched model). ``executor="local"``: ``jobs`` > 1 runs that many units at once, each in
    a process of its own with one thread (on a CPU: one per core). ``executor="ray"``: every
    unit is a Ray task (:mod:`.ray_executor`) on the cluster at ``address`` (None: a Ray
    started here), its results stored here as each task returns. ``log`` receives
    human-readable lines (default: stderr). Results go to ``output_dir/verify.json`` and
    ``output_dir/plots/`` when given.
    """
    log = log or (lambda line: print(line, file=sys.stderr))
    started = time.perf_counter()
    quiet_xla_logs()
    if jobs < 1:
        raise BraxDiffError(f"--jobs must be >= 1, got {jobs}")
    check_executor(executor, address)
    cache = RunCache(cache_dir)
    cluster = None
    if executor == "ray":
        from .ray_executor import RayCluster

        cluster = RayCluster.connect(address, log)  # an unreachable cluster stops here, the cache untouched
    try:
        done, device = _run_units(plan, cache, cluster, device, progress, retry_failed, log, jobs)
    finally:
        if cluster is not None:
            cluster.close()
    results = [done[i] for i in range(len(plan.runs))]
    decided, same = judge(plan, results)
    result = VerifyResult(plan, results, decided, gap_summary(plan, results, decided), device=device,
                          seconds=time.perf_counter() - started, equivalence=same)
    if output_dir is not None:
        result.plots = write_plots(plan, results, Path(output_dir))
        write_atomic(Path(output_dir) / "verify.json", dumps(result.to_json()))
    return result


def _run_units(plan: Plan, cache: RunCache, cluster, device: str | None, progress: bool, retry_failed: bool, log,
               jobs: int) -> tuple[dict[int, RunResult], str]:
    """Every run of ``plan`` (from the cache, or trained unit by unit here, in processes, or
    on Ray) by plan index, and the device they trained on."""
    from .envs import enable_compilation_cache

    enable_compilation_cache(Path(cache.directory) / "xla")
    if cluster is None:
        device = device or pick_device()
        if device == "cpu":
            log(CPU_HINT)
            warning = configure_cpu_process()
            if warning:
                log(f"warning: {warning}")
    else:
        device = cluster.device
    bar = Progress(plan, progress)
    done: dict[int, RunResult] = {}
    pending: list[int] = []
    for index, spec in enumerate(plan.runs):
        cached = cache.load(spec)
        if cached is not None and (cached.status == OK or not retry_failed):
            done[index] = cached
            bar.finish_run(cached)
        else:
            pending.append(index)
    first_of = {}  # run identity -> the first pending index with it: identical arms train once
    for index in pending:
        first_of.setdefault(cache.path(plan.runs[index]), index)
    unique = sorted(first_of.values())
    work = units(plan, unique, cluster.cpus if cluster is not None else jobs)
    try:
        if cluster is not None:
            cluster.run(plan, work, done, cache, bar)
        elif jobs == 1 or len(work) < 2:
            runner = Runner(cache, device, bar)
            for unit in work:
                for index, result in zip(unit, runner.run_unit([plan.runs[i] for i in unit])):
                    done[index] = result
                    bar.finish_run(result)
        else:
            _run_in_processes(plan, work, done, cache, device, bar, jobs)
        for index in pending:
            if index not in done:
                done[index] = replace(done[first_of[cache.path(plan.runs[index])]], spec=plan.runs[index])
                bar.finish_run(done[index])
    finally:
        bar.close()
    return done, device


WORKER_DEATHS_ALLOWED = 3  # a unit whose worker process dies this often more is recorded as failed (as on Ray)


def _run_in_processes(plan: Plan, work: list[list[int]], done: dict[int, RunResult], cache: RunCache, device: str,
                      bar: "Progress", jobs: int) -> None:
    """Every unit of ``work`` in a pool of ``jobs`` processes, at most ``jobs`` units in flight.

    A worker process that dies (a segfault in a native library, the OOM killer) breaks the whole
    pool: every unit then in flight is charged one death and queued again in a fresh pool, and a
    unit with a death runs alone, so the next death is its own. After WORKER_DEATHS_ALLOWED more
    deaths its runs are recorded as failed (kept by the cache; ``--retry-failed`` reruns them),
    as the Ray executor does; every other unit still runs."""
    import multiprocessing
    from collections import Counter, deque
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from .worker import failed_result

    context = multiprocessing.get_context("spawn")  # a fresh interpreter: JAX and torch start clean
    queue: deque[tuple[int, ...]] = deque(tuple(unit) for unit in work)
    deaths: Counter[tuple[int, ...]] = Counter()
    while queue:
        with ProcessPoolExecutor(jobs, mp_context=context, initializer=start_worker,
                                 initargs=(str(cache.directory), device)) as pool:
            in_flight: dict = {}
            try:
                while queue or in_flight:
                    alone = any(deaths[u] for u in in_flight.values())
                    while queue and not alone and len(in_flight) < jobs and not (deaths[queue[0]] and in_flight):
                        unit = queue.popleft()
                        in_flight[pool.submit(run_worker_unit, [plan.runs[i].to_json() for i in unit])] = unit
                        alone = bool(deaths[unit])
                    finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for future in finished:
                        results = future.result()  # BrokenProcessPool: a worker died (below)
                        unit = in_flight.pop(future)
                        for index, data in zip(unit, results):
                            done[index] = replace(RunResult.from_json(data), spec=plan.runs[index])
                            bar.finish_run(done[index])
            except BrokenProcessPool as exc:
                for unit in reversed(list(in_flight.values())):  # requeued in their order, at the front
                    # A unit that finished as the pool broke stored its results from its worker: taken
                    # from the cache, not trained again (it used to run twice, charged a death).
                    stored = [cache.load(plan.runs[i]) for i in unit]
                    if all(r is not None and r.status == OK for r in stored):
                        for index, found in zip(unit, stored):
                            done[index] = replace(found, spec=plan.runs[index])
                            bar.finish_run(done[index])
                        continue
                    deaths[unit] += 1
                    if deaths[unit] <= WORKER_DEATHS_ALLOWED:
                        queue.appendleft(unit)
                        continue
                    why = RuntimeError(f"its worker process died {deaths[unit]} times ({exc})")
                    for index in unit:
                        done[index] = failed_result(plan.runs[index], why, 0.0, device)
                        cache.store(done[index])
                        bar.finish_run(done[index])
            except BaseException:
                for future in in_flight:
                    future.cancel()
                raise


def _ci(entry: dict[str, Any]) -> str:
    if not entry.get("ci"):
        return ""
    low, high = entry["ci"]
    return f" [{low:+.1f}, {high:+.1f}] at {entry.get('ci_level', 0.95):.1%}"


def arm_scores(plan: Plan, results: list[RunResult]) -> list[dict[str, Any]]:
    """Per environment and arm, in the plan's order: the mean score of the finished seeds and
    its 95% interval (Student's t on the seeds; None under 2 seeds)."""
    out = []
    for env in plan.envs:
        for arm in plan.arms():
            if not any(r.env == env and r.arm == arm for r in plan.runs):
                continue
            scores = [r.score for _, r in sorted(_finished(results, env, arm).items())]
            out.append({"env": env, "arm": arm, "seeds": len(scores),
                        "mean": sum(scores) / len(scores) if scores else None,
                        "ci": list(stats.mean_interval(scores)) if len(scores) > 1 else None})
    return out


def _comparison(entry: dict[str, Any]) -> str:
    """One comparison: Δ = arm - vs, its interval at its level, the verdict and what it rests on."""
    delta = "" if entry.get("delta") is None else f" {entry['delta']:+.1f}"
    detail = entry.get("reason") or ""
    if entry["verdict"] == stats.INCONCLUSIVE and entry.get("min_detectable_effect") is not None:
        detail = "; ".join(filter(None, (detail, f"detectable: |effect| >= {entry['min_detectable_effect']:.1f}")))
    if entry["verdict"] == stats.INCONCLUSIVE and "min_detectable_solve_share" in entry:
        share = entry["min_detectable_solve_share"]
        detail = "; ".join(filter(None, (detail, "or " + (f"{share:.0%} more seeds solving" if share is not None
                                                          else "not even every seed solving"))))
    solving = entry.get("solving")
    solved = ""
    if solving and (solving["rate_x"] or solving["rate_y"]):  # said only where some run solved
        solved = (f"; solved (>= {solving['threshold']:g}) {solving['rate_x']:.0%} vs {solving['rate_y']:.0%}, "
                  f"exact McNemar p={solving['p']:.3g}: {solving['verdict']}")
    label = entry["arm"] + " - " + entry["vs"] + (f" on {entry['env']}" if entry.get("env") else "")
    return (f"{label:<34}{delta}{_ci(entry)}  {entry['verdict']}"
            f"{f' ({detail})' if detail else ''}  n={entry.get('seeds', 0)}{solved}")


def _equivalence(entry: dict[str, Any]) -> str:
    """One env's TOST and paired difference as one line."""
    if entry.get("equivalent") is None:
        tost = f"TOST untestable ({entry.get('reason', '')})"
    else:
        tost = (f"Δ {entry['difference']:+.1f}, TOST p {entry['p_lower']:.3g} / {entry['p_upper']:.3g}: "
                f"{'equivalent' if entry['equivalent'] else 'not shown equivalent'}")
    paired = entry.get("paired_difference")
    if not paired:
        return tost
    if paired.get("p") is None:
        return f"{tost}; paired: {paired.get('reason', '')}"
    low, high = paired["ci"]
    return (f"{tost}; paired over {paired['seeds']} seeds: Δ {paired['difference']:+.1f} [{low:+.1f}, {high:+.1f}], "
            f"p {paired['p']:.3g}, stand_in lower in {paired['lower_in']}: "
            f"{'different' if paired['p'] <= paired.get('level', paired['alpha']) else 'no difference resolved'}")


def render(result: VerifyResult) -> str:
    """Every arm's score, the gap, every comparison's verdict, then failed runs, as plain text."""
    lines = [f"verify: {len(result.results)} runs on {result.device} in {result.seconds:.0f} s "
             f"({len(result.failed)} failed); score: {result.plan.scoring.kind} at {result.plan.budget:,} env steps",
             "scores (mean of the finished seeds, 95% interval):"]
    for row in arm_scores(result.plan, result.results):
        interval = f" [{row['ci'][0]:.1f}, {row['ci'][1]:.1f}]" if row["ci"] else ""
        mean = "no finished run" if row["mean"] is None else f"{row['mean']:.1f}{interval}"
        lines.append(f"  {row['env']}  {row['arm']:<32} {mean}  n={row['seeds']}")
    gap = result.gap
    if gap:
        lines.append(f"gap ({gap['seeds']} seeds, {', '.join(gap['envs'])}; Δ = first - second):")
        for name in ("baseline_vs_reference", "all_fixes_vs_reference", "all_fixes_vs_baseline",
                     "spec_fixes_vs_reference", "spec_fixes_vs_baseline"):
            if name in gap:
                lines.append(f"  {_comparison(gap[name])}")
            if name in gap.get("sign_disagrees", []):  # the pooled row hides opposite signs: each env
                lines.extend(f"    {_comparison(entry)}" for entry in gap["per_env"][name].values())
        fraction = gap.get("closed_fraction")
        if fraction == UNBOUNDED:
            lines.append(f"  fraction of the gap the fixes close: unbounded ({gap.get('reason', '')})")
        elif fraction is not None:
            interval = gap.get("closed_fraction_ci")
            lines.append(f"  fraction of the gap the fixes close: {fraction:.2f} [{interval[0]:.2f}, {interval[1]:.2f}] "
                         f"at {gap.get('closed_fraction_level', 0.95):.1%} (Fieller)")
        elif gap.get("reason"):
            lines.append(f"  fraction of the gap the fixes close: unknown ({gap['reason']})")
    others = [entry for entry in result.verdicts if entry["family"] != "gap" or not gap]
    if others:
        lines.append("comparisons (Δ = first - second, each interval at its test's level):")
        lines.extend(f"  {entry['family']:<8} {_comparison(entry)}" for entry in others)
    if result.equivalence:
        same = result.equivalence
        margins = ", ".join(f"±{e['margin']:.3g} on {env}" for env, e in same["envs"].items())
        lines.append(f"stand_in vs reference (Δ = stand_in - reference): equivalent within {margins} (paired TOST at "
                     f"{same.get('level') or same['alpha']:.3g})? and different at all (paired sign-flip)?")
        for env, entry in result.equivalence["envs"].items():
            lines.append(f"  {env}  {_equivalence(entry)}")
    for failed in result.failed:
        lines.append(f"  FAILED {failed.spec.env} {failed.spec.arm} seed {failed.spec.seed}: {failed.error}")
    return "\n".join(lines) + "\n"


class _RecordedPlan:
    """What the statistics read of a plan, from a verify.json's ``plan`` and ``runs``."""

    def __init__(self, plan: dict[str, Any], runs: list[dict[str, Any]]):
        from types import SimpleNamespace

        self.envs = list(plan["envs"])
        self.budget = plan["budget"]
        self.solve_threshold = plan.get("solve_threshold")
        self.equivalence_margin = plan.get("equivalence_margin", 100.0)
        self.scoring = SimpleNamespace(kind=plan.get("scoring", {}).get("score_kind", ""))
        self.runs = [SimpleNamespace(arm=r["arm"], env=r["env"], seed=r["seed"], trainer=r.get("trainer")) for r in runs]

    def arms(self) -> list[str]:
        return list(dict.fromkeys(r.arm for r in self.runs))


def recompute(data: dict[str, Any]) -> dict[str, Any]:
    """A verify.json with its statistics (verdicts, gap, equivalence) recomputed from its own
    runs by this version's rules, everything else as recorded: evidence trained under older
    rules is restated without training a run again."""
    plan = _RecordedPlan(data["plan"], data["runs"])
    results = [RunResult(spec, r["status"], list(r.get("steps") or []), list(r.get("scores") or []), r.get("score"),
                         int(r.get("env_steps") or 0), float(r.get("seconds") or 0.0), r.get("error"),
                         score_kind=r.get("score_kind", ""), cpu_seconds=float(r.get("cpu_seconds") or 0.0))
               for spec, r in zip(plan.runs, data["runs"])]
    decided, restated = judge(plan, results)  # type: ignore[arg-type]
    out = dict(data)
    out["verdicts"] = decided
    out["gap"] = gap_summary(plan, results, decided)  # type: ignore[arg-type]
    if restated is not None:
        out["equivalence"] = restated
    return out
