"""The GPU verification sized to its window: measure each trainer at its real shape, run what
fits, and say what the full evidence would cost.

The GPU machine is lent for minutes (15 in all, at most 10 a command, 1-2 of them to start), has
no network and carries at most 64 MiB. So the work is split in two:

* ``prepare`` (here, where the repositories are): the Brax and SLM-Lab Extractions of one
  environment, and the variant ``brax-diff fix`` writes for it, saved as JSON in a bundle
  folder; ``scripts/verify-gpu-prepare.sh`` adds the wheels the GPU machine lacks.
* ``run`` (there): nothing is read from a repository. Timed runs of a few updates measure
  Brax's trainer at Playground's config (the reference) and the PyTorch trainer with Brax's
  settings (the stand-in); from those rates the two are planned to Brax's own budget if it fits,
  with as many paired seeds as fit (up to 20), else to the largest budget that fits two seeds
  (with fewer checkpoints, then one seed, if need be: :func:`fit_window`), in what is left of
  the call's deadline; they train through :func:`brax_diff.verify.run_plan`
  (verdicts, equivalence, verify.json); then one update of SLM-Lab's baseline at its own env
  count is timed, and ``window.json`` records the rates, the fit, and what baseline /
  spec_fixes / all_fixes / reference at 10 and 20 seeds would cost.
* ``plan`` (anywhere, static): what ``run`` would plan at stated rates, before a GPU is lent.

The cost of a run is ``overhead + updates x update_seconds + (evals + 1) x eval_seconds``, each
term measured (``Rate``); the overhead (compilation, building the environment) is the measured
one of a first run in the process, charged to every run: an upper bound where the compilation
cache serves later runs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import BraxDiffError

MIN_SEEDS, MAX_SEEDS = 2, 20  # the fewest paired seeds worth planning; more add little beyond 20
BRAX_TIMING_UPDATES = 4  # Brax's trainer compiles its training epoch twice: the third and fourth are steady
TORCH_TIMING_UPDATES = 2  # the first builds the environment's step (jit): the second is steady
FULL_EVIDENCE_ARMS = ("baseline", "spec_fixes", "all_fixes", "reference")
FULL_EVIDENCE_SEEDS = (10, 20)


@dataclass(frozen=True)
class Rate:
    """One trainer's measured cost at one shape."""

    arm: str
    trainer: str
    env: str
    num_envs: int
    update_env_steps: int  # env steps of one update (action repeats counted)
    update_seconds: float  # one update, steady (compiled)
    eval_seconds: float  # one checkpoint's evaluation, steady
    overhead_seconds: float  # the rest of a first run: compilation, building the environment
    measured_seconds: float  # the timing run's wall time

    @property
    def env_steps_per_s(self) -> float:
        return self.update_env_steps / self.update_seconds if self.update_seconds > 0 else math.inf

    def run_seconds(self, budget: int, evals: int) -> float:
        updates = math.ceil(budget / self.update_env_steps)
        return self.overhead_seconds + updates * self.update_seconds + (evals + 1) * self.eval_seconds

    def to_json(self) -> dict:
        return dict(asdict(self), env_steps_per_s=round(self.env_steps_per_s, 1))


def rate_from_timings(spec_arm: str, trainer: str, env: str, num_envs: int, update_env_steps: int,
                      update_seconds: list[float], eval_seconds: list[float], total_seconds: float,
                      warm: bool = False) -> Rate:
    """A Rate from one timing run: the steady update time is the median of the updates after
    the first (which compiles; every update where ``warm``), the steady evaluation the median
    after the first (which traces the evaluator); whatever the run spent beyond those is its
    overhead."""
    if len(update_seconds) < (1 if warm else 2) or not eval_seconds:
        raise BraxDiffError(f"{env} {spec_arm}: a timing run needs {1 if warm else 2} update(s) and an evaluation, "
                            f"got {len(update_seconds)} and {len(eval_seconds)}")
    update = statistics.median(update_seconds if warm else update_seconds[1:])
    evaluation = statistics.median(eval_seconds[1:] or eval_seconds)
    overhead = max(0.0, total_seconds - len(update_seconds) * update - len(eval_seconds) * evaluation)
    return Rate(spec_arm, trainer, env, num_envs, update_env_steps, update, evaluation, overhead, total_seconds)


@dataclass
class Fit:
    """What the window holds: ``seeds`` paired seeds of ``arms`` at ``budget`` env steps."""

    arms: tuple[str, ...]
    budget: int
    target_budget: int  # Brax's own budget for the environment
    seeds: int
    evals: int
    seconds: float  # the planned runs' estimated wall time
    window_seconds: float
    reason: str

    def to_json(self) -> dict:
        return dict(asdict(self), arms=list(self.arms), seconds=round(self.seconds, 1))


def fit_window(rates: Mapping[str, Rate], arms: tuple[str, ...], target_budget: int, evals: int,
               window_seconds: float, min_seeds: int = MIN_SEEDS, max_seeds: int = MAX_SEEDS,
               seed_cap: int | None = None) -> Fit:
    """The budget, checkpoints and seed count of ``arms`` that fit ``window_seconds``, in this
    order of preference: Brax's own budget (``target_budget``) with as many paired seeds as fit
    (up to ``max_seeds``, at least ``min_seeds``); else the largest budget in whole checkpointed
    updates at which ``min_seeds`` fit, with ``evals`` checkpoints, then with fewer (a checkpoint
    costs an evaluation and sets the budget's unit); else the same with one seed, which gives
    rates and a learning curve but no paired comparison (the reason says so). ``seed_cap``
    lowers both seed counts (a tiny run). Raises when not one update of every arm fits once."""
    max_seeds = min(max_seeds, seed_cap) if seed_cap else max_seeds
    min_seeds = min(min_seeds, max_seeds)
    step = math.lcm(*(rates[a].update_env_steps for a in arms))

    def per_seed(budget: int, checkpoints: int) -> float:
        return sum(rates[a].run_seconds(budget, checkpoints) for a in arms)

    target = math.ceil(target_budget / (step * evals)) * step * evals
    if per_seed(target, evals) * min_seeds <= window_seconds:
        seeds = max(min_seeds, min(max_seeds, int(window_seconds // per_seed(target, evals))))
        return Fit(arms, target, target_budget, seeds, evals, seeds * per_seed(target, evals), window_seconds,
                   f"Brax's own budget ({target:,} env steps) fits {seeds} paired seed(s)")
    fewer = sorted({max(1, evals // 2 ** k) for k in range(evals.bit_length() + 1)}, reverse=True)
    for seeds in sorted({min_seeds, 1}, reverse=True):
        for checkpoints in fewer:
            unit = step * checkpoints
            units = int((window_seconds / seeds - per_seed(0, checkpoints))
                        // max(per_seed(unit, checkpoints) - per_seed(0, checkpoints), 1e-9))
            if units < 1:
                continue
            budget = min(units * unit, target)
            said = [f"Brax's own budget ({target:,} env steps) needs {per_seed(target, evals) * min_seeds:.0f} s "
                    f"for {min_seeds} seeds; {budget:,} env steps ({100 * budget / target:.1f} %) fit"]
            if checkpoints < evals:
                said.append(f"with {checkpoints} checkpoint(s), not {evals}")
            if seeds < min_seeds:
                said.append("with one seed: rates and a learning curve, no paired comparison")
            return Fit(arms, budget, target_budget, seeds, checkpoints, seeds * per_seed(budget, checkpoints),
                       window_seconds, ", ".join(said))
    raise BraxDiffError(f"not one update of {', '.join(arms)} fits in {window_seconds:.0f} s (one seed of one "
                        f"update: {per_seed(step, 1):.0f} s)")


@dataclass
class FullEvidence:
    """What the full evidence would cost from the measured rates."""

    rows: list[dict] = field(default_factory=list)

    def to_json(self) -> list[dict]:
        return self.rows


def full_evidence_cost(rates: Mapping[str, Rate], shapes: Mapping[str, tuple], envs: list[str], budget: int,
                       evals: int, seed_counts: tuple[int, ...] = FULL_EVIDENCE_SEEDS,
                       how: str = "measured") -> FullEvidence:
    """Minutes for every arm of FULL_EVIDENCE_ARMS on each of ``envs`` at ``budget``, per seed
    count. An arm not timed is costed at the timed arm of its shape (``shapes``: arm -> the
    settings that set its cost); with no timed arm of its shape, at the slowest timed PyTorch
    rate, and the row says it is a bound. Rates were measured on one environment: the others
    are costed at its rate (their physics differ), which the row says."""
    torch_arms = [a for a, r in rates.items() if r.trainer != "brax-ppo"]
    rows, per_arm = [], []
    for arm in FULL_EVIDENCE_ARMS:
        timed = arm if arm in rates else next((a for a in rates if shapes.get(a) == shapes.get(arm)), None)
        basis = how if timed == arm else f"at {timed}'s rate (same shape)" if timed else None
        if timed is None:
            timed = max(torch_arms, key=lambda a: rates[a].update_seconds / rates[a].update_env_steps)
            basis = f"bound: at the slowest PyTorch rate ({timed}), no timed run has this arm's shape"
        per_run = rates[timed].run_seconds(budget, evals)
        per_arm.append(per_run)
        rows.append({"arm": arm, "basis": basis, "per_run_seconds": round(per_run, 1),
                     **{f"minutes_at_{n}_seeds": round(per_run * n * len(envs) / 60, 1) for n in seed_counts}})
    total = {f"minutes_at_{n}_seeds": round(sum(per_arm) * n * len(envs) / 60, 1) for n in seed_counts}
    rows.append({"arm": "all", "envs": envs, "budget": budget, "evals": evals,
                 "basis": f"rates {how} on {next(iter(rates.values())).env}, applied to every environment",
                 **total})
    return FullEvidence(rows)


# -- the GPU machine's side ---------------------------------------------------------------------------


def _shape(settings: Mapping[str, Any]) -> tuple:
    """What sets a PyTorch run's cost per env step."""
    keys = ("num_envs", "unroll_length", "unrolls_per_update", "epochs_per_update", "minibatches_per_epoch",
            "policy_hidden_layers", "value_hidden_layers")
    return tuple(json.dumps(settings.get(k), sort_keys=True) for k in keys)


def measure_torch(spec, device: str, warm: bool = False) -> Rate:
    """Time one PyTorch run of ``spec`` (a checkpoint after every update, see ``timing_spec``):
    each update's time is its interval less the evaluations in it. ``warm``: the environment's
    step is already compiled at this shape, so the first update is steady too."""
    from . import ppo_torch
    from .settings import TrainerSettings
    from .worker import Progress, Runner

    started = time.perf_counter()
    runner = Runner(None, device, Progress.disabled())
    settings = TrainerSettings.from_json(spec.settings)
    env = runner.env(spec.env, settings.num_envs, settings.episode_length)
    evaluator = runner.evaluator(spec, settings, spec.seed)
    marks: list[float] = [time.perf_counter()]
    evals: list[tuple[float, float]] = []  # (end, seconds)

    def timed_eval(agent) -> float:
        t = time.perf_counter()
        score = evaluator(agent)
        evals.append((time.perf_counter(), time.perf_counter() - t))
        return score

    ppo_torch.train(env, settings, spec.budget, spec.seed, device, lambda steps: marks.append(time.perf_counter()),
                    evaluate=timed_eval, eval_every=spec.scoring.eval_every)
    total = time.perf_counter() - started
    updates = [(b - a) - sum(s for end, s in evals if a < end <= b) for a, b in zip(marks, marks[1:])]
    return rate_from_timings(spec.arm, spec.trainer, spec.env, settings.num_envs, spec.budget // len(updates),
                             updates, [s for _, s in evals], total, warm=warm)


def timing_spec(spec, update_env_steps: int, updates: int):
    """``spec`` cut to ``updates`` updates, a checkpoint after each."""
    from dataclasses import replace

    from .plan import Scoring

    return replace(spec, budget=updates * update_env_steps,
                   scoring=Scoring(updates, update_env_steps, spec.scoring.eval_envs, spec.scoring.deterministic))


def measure_brax(spec) -> Rate:
    """Time one run of Brax's trainer with ``spec``'s settings (one update per checkpoint), from
    its own metrics: ``training/sps`` per epoch and ``eval/epoch_eval_time`` per checkpoint."""
    from brax.training.agents.ppo import train as ppo

    from .brax_reference import train_kwargs
    from .jax_compat import apply

    apply()
    metrics: list[dict] = []
    started = time.perf_counter()
    env, kwargs = train_kwargs(spec.settings, spec.env, spec.budget, spec.seed, spec.scoring,
                               lambda steps, m: metrics.append(dict(m, steps=int(steps))))
    ppo.train(environment=env, **kwargs)
    total = time.perf_counter() - started
    update_steps = spec.budget // spec.scoring.evals
    updates = [update_steps / float(m["training/sps"]) for m in metrics if "training/sps" in m]
    evals = [float(m["eval/epoch_eval_time"]) for m in metrics if "eval/epoch_eval_time" in m]
    num_envs = int(spec.settings.get("train", {}).get("num_envs", 0))
    return rate_from_timings(spec.arm, spec.trainer, spec.env, num_envs, update_steps, updates, evals, total)


def _package_dir(module: str) -> str | None:
    import importlib.util
    import os

    spec = importlib.util.find_spec(module)
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else None


def _target_budget(brax) -> int:
    value = brax.value("training_env_steps")
    if isinstance(value, Mapping):  # {"effective": N, "declared": M}
        value = value.get("effective", value.get("value"))
    if not isinstance(value, (int, float)) or value <= 0:
        raise BraxDiffError(f"Brax's training budget for {brax.scope} is unknown ({value!r}): pass --budget")
    return int(value)


DEADLINE_SECONDS = 540  # of a 10-minute command: what is left after the wheels install
BASELINE_RESERVE = 120  # at most this many seconds kept after the planned runs to time SLM-Lab's baseline
MARGIN = 20  # seconds for writing, and for what the estimate missed


def baseline_reserve(stand_in: Rate, baseline_update: int | None) -> float:
    """Seconds to keep for timing one update of SLM-Lab's baseline after the runs: twice its
    update at the stand-in's cost per env step (both train 16 epochs over what they collect),
    two checkpoints and 20 s to build its evaluator, at most BASELINE_RESERVE; none without one."""
    if baseline_update is None:
        return 0.0
    per_step = stand_in.update_seconds / stand_in.update_env_steps
    return min(BASELINE_RESERVE, 2 * per_step * baseline_update + 2 * stand_in.eval_seconds + 20)


def run(bundle: Path, output: Path, deadline_seconds: float = DEADLINE_SECONDS, window_seconds: float | None = None,
        env: str | None = None, cache: Path | None = None, tiny: bool = False, budget: int | None = None,
        evals: int = 10, eval_envs: int = 128, log: Callable[[str], None] = print) -> dict:
    """Measure, fit, train and cost (module docstring) within ``deadline_seconds`` of the call;
    writes ``window.json`` after the runs and again when the baseline is timed, and verify.json.

    The planned runs come first: the reference and the stand-in are timed (a few updates each),
    the window is what is left before the deadline less BASELINE_RESERVE and MARGIN (at most
    ``window_seconds``), and SLM-Lab's baseline, whose update can be 4 M env steps and 32,768
    gradient steps, is timed last, on one update in the warm process, for the full-evidence
    estimate only."""
    from . import build_plan, run_plan
    from .envs import physics_impl
    from .inputs import load_extraction
    from .worker import pick_device

    started = time.perf_counter()
    meta = json.loads((bundle / "bundle.json").read_text())
    env = env or meta["env"]
    brax = load_extraction(bundle / "brax.json", "brax")
    slm = load_extraction(bundle / "slm.json", "slm")
    fixed = load_extraction(bundle / "spec_fixes.json", "slm") if (bundle / "spec_fixes.json").exists() else None
    device = pick_device()
    # A tiny run (the CPU test of this path): 4 envs, 10-step episodes, 2 evaluation episodes.
    scale = dict(num_envs=4, overrides={"episode_length": 10}, eval_envs=2) if tiny else dict(eval_envs=eval_envs)
    evals = 1 if tiny else evals
    target = budget or _target_budget(brax)
    log(f"window: {env} on {device} (physics impl {physics_impl() or 'default'}); Brax's own budget {target:,} env "
        f"steps; deadline {deadline_seconds:.0f} s")
    # Where the trainers come from (the bundle's wheels or an install): this log only, never window.json.
    log(f"trainers from: {json.dumps({m: _package_dir(m) for m in ('brax', 'mujoco_playground', 'jax', 'torch')})}")

    def plan(arms, seeds, plan_budget, plan_evals):
        return build_plan({env: brax}, {env: slm}, envs=[env], seeds=seeds, budget=plan_budget, evals=plan_evals,
                          arms=arms, fixed={env: fixed} if fixed is not None else None, **scale)

    def elapsed() -> float:
        return time.perf_counter() - started

    report: dict[str, Any] = {"env": env, "device": device, "physics_impl": physics_impl() or "default",
                              "bundle": meta, "deadline_seconds": deadline_seconds}

    def write(final: bool) -> None:
        from ..facts.model import dumps
        from ..safety.io import write_atomic

        report["complete"] = final
        write_atomic(output / "window.json", dumps(report))

    # 1. Timing runs of the two arms the window trains: their own update size, a checkpoint after each update.
    # SLM-Lab's arms are planned apart: a variant that cannot train at its ref stops only them.
    probe = plan(("stand_in",), 1, 1, 1)
    try:
        slm_probe = plan(("gap",), 1, 1, 1)
    except BraxDiffError as exc:
        slm_probe, report["slm_arms"] = None, f"not planned: {exc}"
        log(f"SLM-Lab's arms {report['slm_arms']}")
    runs = probe.runs + (slm_probe.runs if slm_probe is not None else [])
    sizes = {**(slm_probe.update_steps[env] if slm_probe is not None else {}), **probe.update_steps[env]}
    shapes = {r.arm: _shape(r.settings) for r in runs if r.trainer != "brax-ppo"}
    rates: dict[str, Rate] = {}

    def measure(arm: str, updates: int, warm: bool = False) -> None:
        spec = timing_spec(next(r for r in runs if r.arm == arm), sizes[arm], updates)
        rates[arm] = measure_brax(spec) if arm == "reference" else measure_torch(spec, device, warm)
        log(f"measured {arm}: {rates[arm].env_steps_per_s:,.0f} env steps/s at {rates[arm].num_envs} envs "
            f"({rates[arm].update_env_steps:,} per update), {rates[arm].eval_seconds:.1f} s per checkpoint, "
            f"{rates[arm].overhead_seconds:.0f} s to start ({rates[arm].measured_seconds:.0f} s timing)")

    measure("reference", BRAX_TIMING_UPDATES)
    measure("stand_in", TORCH_TIMING_UPDATES)

    # 2. The fit, then the runs.
    arms = ("reference", "stand_in")
    reserve = baseline_reserve(rates["stand_in"], sizes.get("baseline"))
    window = deadline_seconds - elapsed() - reserve - MARGIN
    window = min(window, window_seconds) if window_seconds else window
    report["rates"] = {a: r.to_json() for a, r in rates.items()}
    try:
        fit = fit_window(rates, arms, target, evals, window, seed_cap=1 if tiny else None)
    except BraxDiffError as exc:
        report["fit"] = {"window_seconds": round(window, 1), "error": str(exc)}
        write(final=False)  # the rates are what this call measured: kept
        raise
    log(f"fit: {fit.seeds} seed(s) x {', '.join(arms)} at {fit.budget:,} env steps, about {fit.seconds / 60:.1f} min "
        f"of a {window:.0f} s window ({fit.reason})")
    planned = plan(("stand_in",), fit.seeds, fit.budget, fit.evals)
    result = run_plan(planned, cache or output / "cache", progress=False, output_dir=output, jobs=1)
    report.update(fit=fit.to_json(), ran_seconds=round(result.seconds, 1), equivalence=result.equivalence)
    log(f"ran {len(planned.runs)} run(s) in {result.seconds / 60:.1f} min; estimated {fit.seconds / 60:.1f} min")
    report["rates"] = {a: r.to_json() for a, r in rates.items()}
    write(final=False)  # what the window measured survives a baseline timing the deadline cuts off

    # 3. SLM-Lab's baseline, timed last (for the estimate only), then what the full evidence costs.
    left = deadline_seconds - elapsed() - MARGIN
    if slm_probe is not None and left > 0:
        measure("baseline", 1, warm=True)
    elif slm_probe is not None:
        log(f"baseline not timed: {left:.0f} s left before the deadline")
    report["rates"] = {a: r.to_json() for a, r in rates.items()}
    full = full_evidence_cost(rates, shapes, meta.get("failing_envs") or [env], target, evals)
    report["full_evidence"] = full.to_json()
    for row in full.rows:
        log(f"full evidence: {json.dumps(row)}")
    report["seconds"] = round(elapsed(), 1)
    write(final=True)
    return report


def plan_from_stated_rates(bundle: Path, stated: Mapping[str, tuple[float, float, float]], timing_seconds: float,
                           deadline_seconds: float = DEADLINE_SECONDS, evals: int = 10,
                           budget: int | None = None) -> tuple[Fit, FullEvidence, dict[str, Rate]]:
    """What ``run`` would plan at rates stated instead of measured: ``stated`` maps an arm to
    (env steps/s, seconds per checkpoint, seconds to start), ``timing_seconds`` is what the
    timing runs are taken to cost. Static (no torch, no jax): for a plan before a GPU is lent."""
    from . import build_plan
    from .inputs import load_extraction

    meta = json.loads((bundle / "bundle.json").read_text())
    env = meta["env"]
    brax = load_extraction(bundle / "brax.json", "brax")
    slm = load_extraction(bundle / "slm.json", "slm")
    fixed = load_extraction(bundle / "spec_fixes.json", "slm") if (bundle / "spec_fixes.json").exists() else None
    probe = build_plan({env: brax}, {env: slm}, envs=[env], seeds=1, budget=1, evals=1, arms=("gap", "stand_in"),
                       fixed={env: fixed} if fixed is not None else None)
    sizes = probe.update_steps[env]
    specs = {r.arm: r for r in probe.runs}
    rates = {}
    for arm, (per_s, eval_s, start_s) in stated.items():
        if arm not in specs:
            raise BraxDiffError(f"no arm {arm!r} in the plan (arms: {', '.join(sorted(specs))})")
        num_envs = (specs[arm].settings.get("train", {}).get("num_envs") if specs[arm].trainer == "brax-ppo"
                    else specs[arm].settings.get("num_envs"))
        rates[arm] = Rate(arm, specs[arm].trainer, env, int(num_envs or 0), sizes[arm], sizes[arm] / per_s, eval_s,
                          start_s, 0.0)
    target = budget or _target_budget(brax)
    window = deadline_seconds - timing_seconds - baseline_reserve(rates["stand_in"], sizes.get("baseline")) - MARGIN
    fit = fit_window(rates, ("reference", "stand_in"), target, evals, window)
    shapes = {r.arm: _shape(r.settings) for r in probe.runs if r.trainer != "brax-ppo"}
    return fit, full_evidence_cost(rates, shapes, meta.get("failing_envs") or [env], target, evals,
                                   how="stated"), rates


# -- the repositories' side -----------------------------------------------------------------------------


def prepare(bundle: Path, env: str, failing_envs: list[str], settings, variant: str | None = None,
            sets: dict[str, str] | None = None) -> None:
    """Save what ``run`` needs from the repositories: the two Extractions of ``env`` and the
    variant ``brax-diff fix`` writes for it (read back), with the refs they came from."""
    from ..facts.model import dumps
    from ..safety.io import write_atomic
    from .inputs import extractions_from_repos, written_variants

    brax, slm = extractions_from_repos(settings, [env], variant=variant, sets=sets)
    fixed = written_variants(settings, [env], variant=variant, sets=sets)
    bundle.mkdir(parents=True, exist_ok=True)
    write_atomic(bundle / "brax.json", dumps(brax[env].to_json()))
    write_atomic(bundle / "slm.json", dumps(slm[env].to_json()))
    write_atomic(bundle / "spec_fixes.json", dumps(fixed[env].to_json()))
    # The commits the facts came from (no ref names or paths: window.json is committed output).
    commits = {name: info.commit for e in (brax[env], slm[env]) for name, info in sorted(e.sources.items())}
    write_atomic(bundle / "bundle.json", dumps({"env": env, "failing_envs": failing_envs, "commits": commits}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m brax_diff.verify.window", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="save the Extractions a GPU run needs (here, with the repositories)")
    p.add_argument("--bundle", type=Path, required=True)
    p.add_argument("--env", required=True)
    p.add_argument("--failing-env", action="append", default=[], help="costed in the full-evidence estimate")
    p.add_argument("--variant")
    p.add_argument("--set", action="append", default=[], dest="sets", metavar="NAME=VALUE")
    for side in ("brax", "playground", "slm"):
        p.add_argument(f"--{side}-repo")
        p.add_argument(f"--{side}", dest=f"{side}_ref")
    r = sub.add_parser("run", help="measure, fit the window, train, cost the rest (on the GPU machine)")
    r.add_argument("--bundle", type=Path, required=True)
    r.add_argument("--output", type=Path, required=True)
    r.add_argument("--deadline", type=float, default=DEADLINE_SECONDS, help="seconds this call may take in all")
    r.add_argument("--window", type=float, help="at most this many seconds for the planned runs")
    r.add_argument("--budget", type=int, help="instead of Brax's own budget")
    r.add_argument("--evals", type=int, default=10)
    r.add_argument("--cache", type=Path)
    r.add_argument("--tiny", action="store_true", help="the CPU test's size: 4 envs, 10-step episodes, 1 seed")
    q = sub.add_parser("plan", help="what run would plan at stated rates (no GPU, no training)")
    q.add_argument("--bundle", type=Path, required=True)
    q.add_argument("--rate", action="append", default=[], metavar="ARM=STEPS_PER_S:EVAL_S:START_S",
                   help="reference, stand_in, baseline (repeatable)")
    q.add_argument("--timing-seconds", type=float, default=120.0, help="what the timing runs are taken to cost")
    q.add_argument("--deadline", type=float, default=DEADLINE_SECONDS)
    q.add_argument("--budget", type=int)
    q.add_argument("--evals", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            from ..config import load_settings
            from .settings import split_sets

            settings = load_settings(brax_repo=args.brax_repo, brax_ref=args.brax_ref,
                                     playground_repo=args.playground_repo, playground_ref=args.playground_ref,
                                     slm_repo=args.slm_repo, slm_ref=args.slm_ref)
            _, spec_sets = split_sets(args.sets)
            prepare(args.bundle, args.env, args.failing_env or [args.env], settings, args.variant, spec_sets)
            print(f"bundle: {args.bundle}")
        elif args.command == "plan":
            stated = {}
            for item in args.rate:
                arm, _, numbers = item.partition("=")
                try:
                    per_s, eval_s, start_s = (float(x) for x in numbers.split(":"))
                except ValueError:
                    raise BraxDiffError(f"--rate {item!r}: expected ARM=STEPS_PER_S:EVAL_S:START_S") from None
                stated[arm] = (per_s, eval_s, start_s)
            fit, full, _ = plan_from_stated_rates(args.bundle, stated, args.timing_seconds, args.deadline,
                                                  args.evals, args.budget)
            print(f"fit: {fit.seeds} seed(s) x {', '.join(fit.arms)} at {fit.budget:,} env steps, about "
                  f"{fit.seconds / 60:.1f} min of a {fit.window_seconds:.0f} s window ({fit.reason})")
            for row in full.rows:
                print(f"full evidence: {json.dumps(row)}")
        else:
            run(args.bundle, args.output, args.deadline, args.window, cache=args.cache, tiny=args.tiny,
                budget=args.budget, evals=args.evals)
    except BraxDiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
