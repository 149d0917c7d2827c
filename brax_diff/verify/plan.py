"""The ablation plan: which trainings answer "how far behind Brax are SLM-Lab's settings,
and how much of the gap do the fixes close?".

Static (no torch, no jax): :func:`build_plan` compares a Brax and an SLM-Lab
:class:`~brax_diff.facts.model.Extraction` key by key and plans, per environment and seed, arms of
the PyTorch trainer and of Brax's own trainer:

* ``baseline``: SLM-Lab's settings;
* ``all_fixes`` (trainer-level, code changes included): every difference the trainer can
  express moved to Brax's value at once, including those a spec cannot carry (they need
  code changes in SLM-Lab);
* ``spec_fixes``: given ``fixed`` (the SLM-Lab variant ``brax-diff fix`` writes, read back),
  that variant's own settings, trained as SLM-Lab would run it: what a maintainer would ship;
* ``loo:<key>``: ``all_fixes`` with that one key back at SLM-Lab's value (what that fix is
  worth given the others);
* ``variant:<key>``: ``baseline`` with only that key moved (the older one-at-a-time arms);
* ``reference``: Brax's own ``ppo.train`` with the Brax settings;
* ``stand_in``: the PyTorch trainer with every Brax setting *and* Brax's loss semantics
  (GAE per minibatch with current values, the vs-form advantage, the sampled tanh entropy, one
  Adam with a global clip, obs statistics once per batch before SGD, the truncation mask) and
  Brax's resets of every training env (``env_steps_between_resets``):
  the PyTorch trainer proven to be Brax (``tests/test_standin_lockstep.py`` update by update,
  :mod:`.equivalence` as score distributions; arm group ``stand_in``, with ``gap`` for its
  reference). Single engine only.

Every arm is scored the same way (:class:`Scoring`): Brax's evaluator at the same env-step
checkpoints, and every arm stops at the same env-step count, the budget rounded up to whole
updates of every arm. Keys that differ but get no run are kept in the plan with the reason
(derived from other keys, not expressible by the trainer, a value missing on one side).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import BraxDiffError
from ..safety.escape import one_line
from ..facts.model import Extraction, dumps
from ..facts.vocabulary import KEYS, canonical_activation
from .settings import (BRAX_SEMANTICS, DERIVED_KEYS, FIELDS, SCHEDULE_ENDS, TRAINER_FIXED, UNSUPPORTED_KEYS,
                       TrainerSettings, apply_fact, expressible, settings_from_facts)

if TYPE_CHECKING:  # costs imports plan: the estimate's type only
    from .costs import Estimate

DEFAULT_ENV = "CartpoleBalance"
DEFAULT_SEEDS = 5
DEFAULT_BUDGET = 1_000_000
DEFAULT_EVALS = 10  # checkpoints after the one before training
DEFAULT_EVAL_ENVS = 32  # full evaluation episodes per checkpoint
# A run "solves" its environment at or above this score: DM Control's returns are out of 1,000
# (1,000-step episodes, reward <= 1 a step), and its outcomes are solve-or-plateau (the
# committed CartpoleBalance baseline: 2 of 10 seeds at ~1,000, the rest 170-480). The
# probability of solving is measured beside the mean (stats.solving), with an exact test.
DEFAULT_SOLVE_THRESHOLD = 800.0

BASELINE, ALL_FIXES, SPEC_FIXES, REFERENCE, STAND_IN = "baseline", "all_fixes", "spec_fixes", "reference", "stand_in"
# What each fix arm is, in every text that names it (plan, runner, report, docs)
ARM_TITLES = {ALL_FIXES: "all_fixes (trainer-level, code changes included)",
              SPEC_FIXES: "spec_fixes (the spec variant `brax-diff fix` writes)"}
ARM_GROUPS = {
    "gap": "baseline, all_fixes (trainer-level, code changes included), spec_fixes (the variant `brax-diff fix` "
           "writes, when planned from the repositories) and reference: how far behind, and how much the fixes close",
    "loo": "loo:<key> for every moved key: all_fixes with that one fix undone",
    "variants": "variant:<key> for every moved key: baseline with only that key moved",
    "stand_in": "stand_in: the PyTorch trainer with Brax's settings and loss semantics, and the reference it is "
                "tested against",
}
DEFAULT_ARM_GROUPS = ("gap", "loo")

# (x, y) of the gap family: x - y, so a positive difference means x scores higher (runner.verdicts
# decides them; here so that a plan can count the tests its list of conclusions holds).
GAP_COMPARISONS = {
    "all_fixes_vs_baseline": (ALL_FIXES, BASELINE),
    "reference_vs_baseline": (REFERENCE, BASELINE),
    "reference_vs_all_fixes": (REFERENCE, ALL_FIXES),
    "spec_fixes_vs_baseline": (SPEC_FIXES, BASELINE),
    "reference_vs_spec_fixes": (REFERENCE, SPEC_FIXES),
}
# (x, y) of the stand_in family: the same gap measured against the stand-in
STAND_IN_COMPARISONS = {
    "stand_in_vs_baseline": (STAND_IN, BASELINE),
    "stand_in_vs_all_fixes": (STAND_IN, ALL_FIXES),
    "stand_in_vs_spec_fixes": (STAND_IN, SPEC_FIXES),
}

# Named plan sizes; explicit flags override their values ("overrides" merge under --set). `cpu`
# answers the gap question (baseline, all_fixes, reference) on a 2-core CPU in under 30
# minutes at the seed-era refs; its sizes were chosen by measuring what learns within that
# budget (docs/verify.md, "Presets"): 32 envs and 4 epochs on every arm, 16 of Brax's updates.
# The budget is rounded to whole updates of every arm, whose sizes are the refs': at SLM-Lab
# master (time_horizon 2048) it becomes 983,040 steps and about 75 minutes.
PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {"num_envs": 32, "seeds": 5, "budget": 245_760, "evals": 4, "eval_envs": 32, "arms": ["gap"],
            "jobs": 2, "overrides": {"epochs_per_update": 4}},
    "gpu": {"num_envs": None, "seeds": 5, "budget": 5_000_000, "evals": 10, "eval_envs": 128,
            "arms": ["gap", "loo"], "jobs": 1},
}
# The most each count flag may ask for (docs/verify.md#limits): far above any real run (the
# presets: 5 seeds, 5M steps, 128 eval envs), and low enough that planning one stays quick and
# small (a plan holds a run per arm, environment and seed: 10**8 seeds exhausted memory).
POWER_SIMULATED_UP_TO = 64  # seeds; `verify --plan` simulates power up to here (seconds), not above
COUNT_LIMITS: dict[str, int] = {"seeds": 1_000, "first_seed": 1_000_000, "budget": 10_000_000_000,
                                "num_envs": 65_536, "evals": 1_000, "eval_envs": 65_536, "jobs": 1_024}
_DEFAULT_OPTIONS: dict[str, Any] = {"num_envs": None, "seeds": DEFAULT_SEEDS, "first_seed": 0, "budget": DEFAULT_BUDGET,
                                    "evals": DEFAULT_EVALS, "eval_envs": DEFAULT_EVAL_ENVS,
                                    "arms": list(DEFAULT_ARM_GROUPS), "jobs": 1, "overrides": {}}


def resolve_options(preset: str | None, **given: Any) -> dict[str, Any]:
    """The flags given, else the preset's value, else the default: ``build_plan``'s keyword
    arguments plus ``jobs`` (runs at once). ``arms`` may be a comma-separated string; the
    ``overrides`` given (``--set``) are merged over the preset's."""
    if preset is not None and preset not in PRESETS:
        raise BraxDiffError(f"unknown --preset {preset!r}: choose from {', '.join(PRESETS)}")
    options = dict(_DEFAULT_OPTIONS)
    options.update(PRESETS.get(preset or "", {}))
    overrides = dict(options["overrides"])
    overrides.update(given.pop("overrides", None) or {})
    options.update({k: v for k, v in given.items() if v is not None})
    for name, limit in COUNT_LIMITS.items():
        if options[name] is not None and options[name] < 0:
            raise BraxDiffError(f"--{name.replace('_', '-')} must be >= 0, got {options[name]:,}")
        if options[name] is not None and options[name] > limit:
            raise BraxDiffError(f"--{name.replace('_', '-')} must be <= {limit:,}, got {options[name]:,} "
                                "(docs/verify.md#limits)")
    options["overrides"] = overrides
    arms = options["arms"]
    if isinstance(arms, str):
        arms = [a.strip() for a in arms.split(",") if a.strip()]
    options["arms"] = tuple(arms)
    return options

EXECUTORS = ("local", "ray")  # where units of work run: this machine's processes, or Ray tasks


def check_executor(executor: str, address: str | None) -> None:
    """--executor and --address, checked before any work (static: Ray is not imported)."""
    if executor not in EXECUTORS:
        raise BraxDiffError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "ray":
        raise BraxDiffError("--address names a Ray cluster: it needs --executor ray")


TORCH = "torch-ppo"  # our PyTorch PPO with SLM-Lab semantics
# How `verify` trains TORCH runs (--engine). SINGLE: one run per seed (ppo_torch.train, the
# trainer checked against SLM-Lab's own update), the default. BATCHED: an arm's seeds in one
# seed-batched model (ppo_batched.py), 2.96x the CPU throughput for 5 seeds; opt-in because
# over a whole cpu-preset run its scores were not yet shown to follow the single-seed
# trainer's distribution (docs/verify.md). A seed's batched result does not depend on the
# seeds batched beside it (tested bit for bit) but is not bit-identical to a single-seed run,
# so the engine is part of a batched run's cache identity (a single-seed run's identity is as
# it was before batching existed, so its cached results stay valid). /2: each seed samples
# its actions from the single-seed trainer's own stream (/1 drew them from another).
SINGLE, BATCHED = "single", "seed-batched/2"
ENGINES = {"single": SINGLE, "batched": BATCHED}  # --engine NAME -> engine
BRAX = "brax-ppo"  # brax.training.agents.ppo.train
# How a PyTorch run derives its random streams from its seed (ppo_torch.stream_seed): one numpy
# SeedSequence per seed, spawned per purpose. Part of the run identity: results drawn with the
# older seed * 1,000,003 + stream scheme (whose streams overlapped across seeds) are not reused.
SEED_STREAMS = "seedsequence/1"


def same_value(a: Any, b: Any) -> bool:
    """Equality of two canonical values: floats up to rounding, activations by canonical name."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str):
        return canonical_activation(a) == canonical_activation(b)
    return a == b


@dataclass(frozen=True)
class Ablation:
    """One canonical key in one environment: both values and what the plan does with it.

    ``action`` is "variant" (a run moves it), "match", "derived", "unsupported" or
    "missing" (no value on one side).
    """

    env: str
    key: str
    slm: Any
    brax: Any
    action: str
    reason: str = ""

    def to_json(self) -> dict:
        return {"env": self.env, "key": self.key, "slm": self.slm, "brax": self.brax,
                "action": self.action, "reason": self.reason}


@dataclass(frozen=True)
class Scoring:
    """How every run of a plan is scored: ``evals`` checkpoints after the one at step 0, every
    ``eval_every`` env steps, each the mean return of ``eval_envs`` full evaluation episodes
    under the stochastic (Brax's default) or deterministic policy. The run's score is the
    checkpoint at its last env step."""

    evals: int
    eval_every: int
    eval_envs: int
    deterministic: bool

    @property
    def kind(self) -> str:
        """Runs compare only when this is equal: what a score is."""
        mode = "deterministic" if self.deterministic else "stochastic"
        return f"eval_return/{mode}/{self.eval_envs}_episodes"

    @property
    def checkpoints(self) -> list[int]:
        return [k * self.eval_every for k in range(self.evals + 1)]

    def to_json(self) -> dict:
        return {"evals": self.evals, "eval_every": self.eval_every, "eval_envs": self.eval_envs,
                "deterministic": self.deterministic, "score_kind": self.kind}


@dataclass(frozen=True)
class RunSpec:
    """One training: trainer, settings, environment, seed, env-step budget and scoring.

    ``arm`` names what it is for: "baseline", "all_fixes", "loo:<key>", "variant:<key>"
    or "reference".
    """

    trainer: str
    arm: str
    env: str
    seed: int
    budget: int
    settings: Mapping[str, Any]
    scoring: Scoring
    engine: str = SINGLE  # how a TORCH run trains (ENGINES); Brax's trainer has one way

    def identity(self, version: str, platform: Mapping[str, Any] | None = None) -> dict:
        settings = dict(self.settings)
        if settings.get("initial_weights") == "torch_generators":  # added at the default the runs before it had
            del settings["initial_weights"]
        out = {"trainer": self.trainer, "settings": settings, "env": self.env,
               "seed": self.seed, "budget": self.budget, "scoring": self.scoring.to_json(), "brax_diff": version}
        if platform is not None:  # bit-identical only on the same CPU and builds (platform.py)
            out["platform"] = dict(platform)
        if self.trainer == TORCH:
            out["seed_streams"] = SEED_STREAMS
        if self.trainer == TORCH and self.engine != SINGLE:
            out["engine"] = self.engine
        return out

    def run_id(self, version: str, platform: Mapping[str, Any] | None = None) -> str:
        """The cache key: a hash of everything that changes the run's outcome (not its arm name)."""
        text = json.dumps(self.identity(version, platform), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def to_json(self) -> dict:
        out = {"trainer": self.trainer, "arm": self.arm, "env": self.env, "seed": self.seed,
               "budget": self.budget, "settings": dict(self.settings), "scoring": self.scoring.to_json()}
        if self.engine != SINGLE:
            out["engine"] = self.engine
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunSpec":
        scoring = data["scoring"]
        return cls(data["trainer"], data["arm"], data["env"], int(data["seed"]), int(data["budget"]),
                   dict(data["settings"]), Scoring(int(scoring["evals"]), int(scoring["eval_every"]),
                                                   int(scoring["eval_envs"]), bool(scoring["deterministic"])),
                   data.get("engine", SINGLE))


@dataclass
class Plan:
    envs: list[str]
    seeds: int
    budget: int  # env steps every run does: the requested budget rounded up to whole updates
    requested_budget: int
    scoring: Scoring
    ablations: list[Ablation]
    runs: list[RunSpec]
    baseline: dict[str, TrainerSettings]
    defaults_used: dict[str, list[str]]
    update_steps: dict[str, dict[str, int]]  # env -> arm -> env steps per update
    overrides: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, Any] = field(default_factory=dict)
    arm_groups: tuple[str, ...] = ("gap",)
    num_envs: int | None = None  # every arm scaled to this many envs
    warnings: list[str] = field(default_factory=list)
    spec_sets: dict[str, str] = field(default_factory=dict)  # SLM-Lab ${var}s the extraction used (max_frame)
    # env -> the variant `brax-diff fix` wrote that spec_fixes trains; empty: no spec_fixes arm
    fixed_variants: dict[str, str] = field(default_factory=dict)
    spec_ablations: list[Ablation] = field(default_factory=list)  # what spec_fixes moves, per key
    solve_threshold: float | None = DEFAULT_SOLVE_THRESHOLD  # score at or above which a run solved
    # the installed Brax trainer against the --brax ref's (trainer_files.compare); empty: not compared
    reference_trainer: dict[str, Any] = field(default_factory=dict)
    # stand_in vs reference: score difference within which they count as equivalent (.equivalence)
    equivalence_margin: float = 100.0
    first_seed: int = 0  # the seeds are first_seed .. first_seed + seeds - 1 (a replication on fresh seeds)

    @property
    def with_reference(self) -> bool:
        return any(r.arm == REFERENCE for r in self.runs)

    def variant_keys(self, env: str | None = None) -> list[str]:
        return [a.key for a in self.ablations if a.action == "variant" and (env is None or a.env == env)]

    def arms(self) -> list[str]:
        seen: list[str] = []
        for run in self.runs:
            if run.arm not in seen:
                seen.append(run.arm)
        return seen

    @property
    def total_env_steps(self) -> int:
        return sum(r.budget for r in self.runs)

    def to_json(self) -> dict:
        return {
            "envs": list(self.envs),
            "seeds": self.seeds,
            **({"first_seed": self.first_seed} if self.first_seed else {}),
            "budget": self.budget,
            "requested_budget": self.requested_budget,
            "scoring": self.scoring.to_json(),
            "arm_groups": list(self.arm_groups),
            "num_envs": self.num_envs,
            "total_env_steps": self.total_env_steps,
            "update_steps": self.update_steps,
            "warnings": list(self.warnings),
            "overrides": {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(self.overrides.items())},
            "spec_sets": dict(sorted(self.spec_sets.items())),
            "solve_threshold": self.solve_threshold,
            "reference_trainer": self.reference_trainer,
            "all_fixes": {"from": "settings", "title": ARM_TITLES[ALL_FIXES]},
            "spec_fixes": ({"from": "spec", "title": ARM_TITLES[SPEC_FIXES],
                            "variants": dict(sorted(self.fixed_variants.items())),
                            "ablations": [a.to_json() for a in self.spec_ablations]}
                           if self.fixed_variants else None),
            **({"equivalence_margin": self.equivalence_margin} if STAND_IN in self.arms() else {}),
            "sources": self.sources,
            "baseline": {env: s.to_json() for env, s in sorted(self.baseline.items())},
            "defaults_used": {env: list(v) for env, v in sorted(self.defaults_used.items())},
            "ablations": [a.to_json() for a in self.ablations],
            "runs": [r.to_json() for r in self.runs],
        }

    def tests_in_list(self) -> int:
        """How many tests the list of conclusions holds under one Holm: every gap and stand_in
        comparison this plan's arms allow, pooled and, with several environments, on each, and
        with the stand-in its equivalence and paired difference per environment (runner.judge)."""
        arms = set(self.arms())
        rows = sum(1 for table in (GAP_COMPARISONS, STAND_IN_COMPARISONS) for x, y in table.values() if {x, y} <= arms)
        tests = rows * (1 + len(self.envs)) if len(self.envs) > 1 else rows
        if {STAND_IN, REFERENCE} <= arms:  # the equivalence and the paired difference per environment
            tests += 1 + len(self.envs)
        return tests

    def power(self, sims: int = 400) -> dict[str, Any]:
        """What this seed count can detect, simulated on the verdict's own test (stats.power_table):
        per null shape, the smallest true difference found with 80 % probability at the first
        Holm level of the list of conclusions (:meth:`tests_in_list` tests), and on the
        solve-or-plateau shape the share of seeds that must newly solve."""
        import importlib.util

        if importlib.util.find_spec("numpy") is None:  # the static install: the plan, not its power
            return {"seeds": self.seeds, "detectable": None,
                    "not_simulated": "the simulation needs numpy, in the verify extra: pip install 'brax-diff[verify]'"}
        from . import stats

        tests = max(1, self.tests_in_list())
        level = stats.ALPHA / tests
        out = {"seeds": self.seeds, "level": level, "tests": tests, "power": stats.POWER, "test": stats.TEST_NAME,
               "seeds_needed": stats.seeds_needed(level)}
        if self.seeds > POWER_SIMULATED_UP_TO:  # the simulation's cost grows with the seeds: bounded time
            return {**out, "detectable": None, "not_simulated": f"more than {POWER_SIMULATED_UP_TO} seeds"}
        share = stats.detectable_solve_share(stats.null_pair(stats.NULL_SHAPES["bimodal"]), stats.BIMODAL_JUMP,
                                             self.seeds, level, sims=sims)
        return {**out, "detectable": stats.power_table(self.seeds, level, sims=sims), "solve_share": share}

    def render(self, estimate: "Estimate | None" = None, power: dict[str, Any] | None = None) -> str:
        """The plan as plain text: budget, scoring, arms, every compared key, the time it takes."""
        arms = self.arms()
        lines = [f"verify plan: {len(self.runs)} runs = {len(self.envs)} env(s) x {self.seeds} seed(s)"
                 f"{f' ({self.first_seed}-{self.first_seed + self.seeds - 1})' if self.first_seed else ''} x "
                 f"{len(arms)} arm(s); {self.budget:,} env steps per run, {self.total_env_steps:,} in all"]
        if self.budget != self.requested_budget:
            lines.append(f"  budget {self.requested_budget:,} rounded to {self.budget:,} = {self.scoring.evals} "
                         f"checkpoint(s) x {self.scoring.eval_every:,}: whole updates of every arm")
        lines.append(f"  scoring: Brax's evaluator, {self.scoring.eval_envs} full episodes per checkpoint, "
                     f"{'deterministic' if self.scoring.deterministic else 'stochastic'} policy, at "
                     f"{_steps_list(self.scoring.checkpoints)} env steps; a run's score is the last checkpoint")
        if self.solve_threshold is not None:
            lines.append(f"  solved: a run scoring >= {self.solve_threshold:g}; the probability of solving is its own "
                         "measure (exact interval, exact McNemar test on the paired seeds)")
        if self.num_envs:
            lines.append(f"  scaled: every arm runs {self.num_envs} envs; each side keeps its minibatches per "
                         "epoch, epochs, unroll length and unrolls per update")
        for name, info in sorted(self.sources.items()):
            lines.append(f"  {name}: {info.get('repo', '')} @ {str(info.get('commit', ''))[:12]}")
        if self.overrides:
            lines.append("  overrides on every run (canonical keys reach Brax's trainer too): "
                         + ", ".join(f"{k}={v}" for k, v in sorted(self.overrides.items())))
        if self.spec_sets:
            lines.append("  SLM-Lab spec variables: " + ", ".join(f"{k}={v}" for k, v in sorted(self.spec_sets.items())))
        if self.fixed_variants and SPEC_FIXES in arms:
            lines.append("  spec_fixes trains the spec variant `brax-diff fix` writes, as SLM-Lab runs it: " + ", ".join(
                f"{env} {name}" for env, name in sorted(self.fixed_variants.items())))
            lines.append("  all_fixes is trainer-level, code changes included: every difference the trainer can "
                         "express, also those a spec cannot carry")
            for env in self.envs:
                kept = [a.key for a in self.spec_ablations if a.env == env and a.action == "not_in_spec"]
                if kept:
                    lines.append(f"  {env}: the spec keeps SLM-Lab's {', '.join(kept)} (code changes): "
                                 "all_fixes moves them, spec_fixes cannot")
        for env in self.envs:
            lines.append(f"\n{env}")
            width = max((len(a.key) for a in self.ablations if a.env == env), default=10)
            for a in (a for a in self.ablations if a.env == env and a.action != "match"):
                note = f"  ({a.reason})" if a.reason else ""
                lines.append(f"  {a.key:<{width}}  slm={_fmt(a.slm):<14} brax={_fmt(a.brax):<14} {a.action}{note}")
            matched = [a.key for a in self.ablations if a.env == env and a.action == "match"]
            if matched:
                lines.append(f"  same on both sides: {', '.join(matched)}")
            if self.defaults_used.get(env):
                lines.append(f"  trainer defaults (no SLM-Lab fact): {', '.join(self.defaults_used[env])}")
            lines.append("  env steps per update: " + ", ".join(
                f"{arm} {steps:,} ({self.budget // steps} updates)" for arm, steps in self.update_steps[env].items()))
        lines.append("\narms: " + ", ".join(arms))
        if estimate is not None:
            lines.append(estimate.render())
        if power is not None:
            lines.append(_render_power(power))
        for warning in self.warnings:
            lines.append(f"warning: {one_line(warning)}")  # may quote upstream names
        return "\n".join(lines) + "\n"

    def dumps(self) -> str:
        return dumps(self.to_json())


def _render_power(power: Mapping[str, Any]) -> str:
    shapes = power["detectable"]
    if shapes is None and "numpy" in power["not_simulated"]:
        return f"power: not simulated ({power['not_simulated']})"
    if shapes is None:
        return (f"power: not simulated at {power['seeds']} seeds ({power['not_simulated']}; the simulation's "
                "time grows with the seeds)")
    if all(v is None for v in shapes.values()):
        return (f"power: at {power['seeds']} seeds the paired test cannot reject at {power['level']:.3g} "
                f"(the first Holm level of the {power.get('tests', 3)} tests the conclusions list); "
                f"{power['seeds_needed']} seeds are needed")
    found = ", ".join(f"{name} {value:,.0f}" for name, value in shapes.items() if value is not None)
    share = power.get("solve_share")
    solving = ("" if "solve_share" not in power else
               f"; an effect of more seeds solving (each gaining {stats_jump():,.0f}) when "
               + (f"{share:.0%} or more of the seeds newly solve" if share is not None else "not even every seed does"))
    return (f"power (simulated on the verdict's paired tests at {power['level']:.3g}, the first Holm level of the "
            f"{power.get('tests', 3)} tests the conclusions list, {power['seeds']} seeds): a true shift is found with "
            f"{power['power']:.0%} probability from about {found} score points (null shapes: normal sd 100; 2 in 10 "
            f"seeds solve at ~1,000, the rest 170-480; Student-t 2 df x 100){solving}")


def stats_jump() -> float:
    from . import stats

    return stats.BIMODAL_JUMP


def _steps_list(steps: list[int]) -> str:
    if len(steps) <= 4:
        return ", ".join(f"{s:,}" for s in steps)
    return f"{steps[0]:,}, {steps[1]:,}, ..., {steps[-1]:,}"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ",".join(_fmt(v) for v in value) + "]"
    return "null" if value is None else str(value)


def known_values(extraction: Extraction) -> dict[str, Any]:
    """The facts an extractor could read: an unknown key is left out (its null is not "none")."""
    return {k: f.value for k, f in extraction.facts.items() if not f.is_unknown}


def _classify(env: str, key: str, slm: Extraction, brax: Extraction) -> Ablation:
    slm_fact, brax_fact = slm.facts.get(key), brax.facts.get(key)
    slm_value = None if slm_fact is None else slm_fact.value
    brax_value = None if brax_fact is None else brax_fact.value
    for side, fact in (("SLM-Lab", slm_fact), ("Brax", brax_fact)):
        if fact is not None and fact.is_unknown:
            return Ablation(env, key, slm_value, brax_value, "unknown", f"{side} value unknown: {fact.unknown}")
    if slm_fact is None or brax_fact is None:
        side = "SLM-Lab" if slm_fact is None else "Brax"
        return Ablation(env, key, slm_value, brax_value, "missing", f"no {side} value")
    if same_value(slm_value, brax_value):
        return Ablation(env, key, slm_value, brax_value, "match")
    if key in DERIVED_KEYS:
        return Ablation(env, key, slm_value, brax_value, "derived", f"follows from {DERIVED_KEYS[key]}")
    if key in SCHEDULE_ENDS:
        schedule, start = SCHEDULE_ENDS[key]
        if all(getattr(side.facts.get(schedule), "value", None) == "constant" for side in (slm, brax)):
            return Ablation(env, key, slm_value, brax_value, "derived",
                            f"follows from {start} (a constant {schedule} ends where it starts)")
    if key in UNSUPPORTED_KEYS or not expressible(key):
        reason = UNSUPPORTED_KEYS.get(key, "the PyTorch trainer has no setting for it")
        return Ablation(env, key, slm_value, brax_value, "unsupported", reason)
    return Ablation(env, key, slm_value, brax_value, "variant")


def _per_env(extraction: Extraction | Mapping[str, Extraction], env: str, side: str) -> Extraction:
    if isinstance(extraction, Extraction):
        return extraction
    if env not in extraction:
        raise BraxDiffError(f"no {side} extraction for environment {env!r}")
    return extraction[env]


def _lcm(values) -> int:
    out = 1
    for value in values:
        out = out * value // math.gcd(out, value)
    return out


def _settings_for(values: Mapping[str, Any], num_envs: int | None, overrides: Mapping[str, Any],
                  semantics: bool = False) -> tuple[TrainerSettings, list[str]]:
    """Trainer settings from canonical values: the minibatch count rules the minibatch size
    (so a scaled or longer batch keeps each side's count), then the run-wide overrides.
    The one function both an SLM-Lab variant's baseline and the all_fixes arm of the variant
    ``brax-diff fix`` writes go through, so the two are the same settings."""
    values = dict(values)
    if num_envs:
        values["num_envs"] = num_envs
    if values.get("minibatches_per_epoch") is not None:
        values.pop("minibatch_transitions", None)
    settings, defaults = settings_from_facts(values, semantics=semantics)
    return (settings.moved(**overrides) if overrides else settings), [d for d in defaults if d not in overrides]


def _reference_settings(brax_values: Mapping[str, Any], num_envs: int | None, overrides: Mapping[str, Any],
                        env: str) -> dict:
    from .settings import brax_train_settings

    values = dict(brax_values)
    values.update({k: v for k, v in overrides.items() if k in KEYS})
    if num_envs:
        values["num_envs"] = num_envs
    minibatches, unrolls = values.get("minibatches_per_epoch"), values.get("unrolls_per_update")
    if num_envs and minibatches and unrolls and (num_envs * int(unrolls)) % int(minibatches):
        raise BraxDiffError(f"{env}: Brax's batch of {num_envs} envs x {unrolls} unrolls does not split into "
                            f"{minibatches} minibatches; choose --num-envs a multiple of {minibatches}")
    settings = brax_train_settings(values)
    if overrides.get("episode_length"):
        settings["train"]["episode_length"] = int(overrides["episode_length"])
    return settings


# What Brax's loss always does, for the stand_in where Brax's extraction has no fact: no
# return normalization (compute_ppo_loss regresses on the raw-scale vs).
BRAX_TRAINER_FIXED = {"value_target_normalization": False}


def _stand_in_settings(brax_values: Mapping[str, Any], num_envs: int | None, overrides: Mapping[str, Any],
                       env: str) -> dict:
    """The PyTorch trainer at every Brax value, the loss semantics included, from Brax's initial
    weights for the seed (``initial_weights="brax_keys"``): a semantic Brax's
    extraction reads is taken from it, one it has no value for (``grad_clip_scope`` when nothing
    is clipped) is Brax's (BRAX_SEMANTICS), and the advantage form, no canonical key, is Brax's."""
    values = {**BRAX_SEMANTICS, **BRAX_TRAINER_FIXED}
    values.update({k: v for k, v in brax_values.items() if v is not None or k not in BRAX_SEMANTICS})
    try:
        settings = _settings_for(values, num_envs, overrides, semantics=True)[0]
        if settings.action_distribution == "tanh_normal":  # Brax's policy MLP: its weights copy one to one
            settings = settings.moved(initial_weights="brax_keys")
        return settings.to_json()
    except BraxDiffError as exc:
        raise BraxDiffError(f"{env}: the stand_in arm cannot run Brax's settings: {exc}") from None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _reference_resets(env: str, planned: list[tuple[str, str, dict]], brax_values: Mapping[str, Any],
                      updates_per_checkpoint: int) -> str | None:
    """Brax's resets of every training env, scaled as every other size is: the reference resets
    after as many of its updates as the real run does (``env_steps_between_resets`` over one
    update's env steps per env), by passing ``ppo.train`` the ``num_resets_per_eval`` that splits
    the plan's checkpoint interval into epochs of that many updates. Where no such count exists,
    the reference and the stand_in (which stands for it) run without, and the warning says why."""
    every = brax_values.get("env_steps_between_resets")
    if not _is_count(every) or every <= 0:
        return None
    reference = next(settings for _, name, settings in planned if name == REFERENCE)
    train = reference["train"]
    repeat = brax_values.get("action_repeat")
    why = None
    if not _is_count(repeat) or repeat < 1 or not _is_count(train.get("num_envs")):
        why = "its action_repeat or num_envs is not known to the plan"
    else:
        per_env_update = _reference_update_steps(reference) // int(train["num_envs"]) * repeat
        if every % per_env_update:
            why = f"{every:,} is not whole updates of {per_env_update:,} env steps per env"
        elif updates_per_checkpoint % (every // per_env_update):
            why = (f"a reset every {every // per_env_update} update(s) does not divide the plan's "
                   f"{updates_per_checkpoint} updates between checkpoints")
        else:
            train["num_resets_per_eval"] = updates_per_checkpoint // (every // per_env_update)
            reference["train"] = dict(sorted(train.items()))
            return None
    for _, name, settings in planned:
        if name == STAND_IN:
            settings["env_steps_between_resets"] = 0
    return (f"{env}: Brax resets every training env after {every:,} env steps of each (num_resets_per_eval "
            f"{brax_values.get('num_resets_per_eval')}); the reference and the stand_in run without those resets: "
            f"{why}")


def _reference_update_steps(settings: Mapping[str, Any]) -> int:
    train = settings["train"]
    try:
        return int(train["batch_size"]) * int(train["num_minibatches"]) * int(train["unroll_length"])
    except KeyError as exc:
        raise BraxDiffError(f"the Brax reference run has no {exc.args[0]} (a Brax fact is missing)") from None


def build_plan(brax: Extraction | Mapping[str, Extraction], slm: Extraction | Mapping[str, Extraction], *,
               envs: list[str] | tuple[str, ...] = (DEFAULT_ENV,), seeds: int = DEFAULT_SEEDS,
               budget: int = DEFAULT_BUDGET, keys: list[str] | None = None,
               overrides: Mapping[str, Any] | None = None, reference: bool = True,
               arms: tuple[str, ...] | list[str] = DEFAULT_ARM_GROUPS, num_envs: int | None = None,
               evals: int = DEFAULT_EVALS, eval_envs: int = DEFAULT_EVAL_ENVS, deterministic: bool = False,
               fixed: Extraction | Mapping[str, Extraction] | None = None, engine: str = "single",
               solve_threshold: float | None = DEFAULT_SOLVE_THRESHOLD, first_seed: int = 0) -> Plan:
    """Plan the arms of ``arms`` (groups of ARM_GROUPS) for every environment and seed.

    ``brax``/``slm`` are one Extraction each, or ``{env: Extraction}`` when environments
    resolve differently. ``keys`` limits the moved differences to those keys (each must be a
    canonical key). ``num_envs`` scales every arm, the Brax reference included, to that many
    envs, each side keeping its minibatch count, epochs and unroll shape. ``overrides`` are
    trainer-setting values applied to every PyTorch run and, for canonical keys, to the
    reference run too. The budget is rounded up so that ``evals`` checkpoints fall on whole
    updates of every arm; the plan says so, and warns when one update exceeds the budget.
    ``fixed`` (one Extraction, or one per env): the variant ``brax-diff fix`` wrote for the
    same scope, read back. The spec_fixes arm then trains exactly its settings (the baseline
    of ``verify --slm-variant`` that variant), beside all_fixes (trainer-level, code changes
    included); ``keys`` must then be None (the variant's scope is it).
    ``engine`` (a name of ENGINES) is how the PyTorch runs train. The seeds are ``first_seed``
    .. ``first_seed + seeds - 1``: a finding made on seeds 0-9 is replicated on fresh ones with
    ``first_seed=10`` (a seed's runs are the same whichever plan trains it, so the cache shares them).
    """
    if engine not in ENGINES:
        raise BraxDiffError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if seeds < 1:
        raise BraxDiffError(f"--seeds must be >= 1, got {seeds}")
    if first_seed < 0:
        raise BraxDiffError(f"--first-seed must be >= 0, got {first_seed}")
    if budget < 1:
        raise BraxDiffError(f"--budget must be >= 1 env step, got {budget}")
    if evals < 1 or eval_envs < 1:
        raise BraxDiffError(f"--evals and --eval-envs must be >= 1, got {evals} and {eval_envs}")
    if num_envs is not None and num_envs < 1:
        raise BraxDiffError(f"--num-envs must be >= 1, got {num_envs}")
    if not envs:
        raise BraxDiffError("no environment to verify on")
    unknown_groups = [a for a in arms if a not in ARM_GROUPS]
    if unknown_groups or not arms:
        raise BraxDiffError(f"unknown arm group(s) {', '.join(map(repr, unknown_groups)) or '(none)'}: "
                            f"choose from {', '.join(ARM_GROUPS)}")
    for key in keys or []:
        if key not in KEYS:
            raise BraxDiffError(f"unknown canonical key {key!r} in --keys")
    if fixed is not None and keys is not None:
        raise BraxDiffError("the written variant's scope decides what spec_fixes moves: give --keys to fix, not here")
    fixed_variants: dict[str, str] = {}
    spec_ablations: list[Ablation] = []
    overrides = dict(overrides or {})
    ablations: list[Ablation] = []
    arms_by_env: dict[str, list[tuple[str, str, dict]]] = {}
    baselines: dict[str, TrainerSettings] = {}
    defaults_used: dict[str, list[str]] = {}
    update_steps: dict[str, dict[str, int]] = {}
    sources: dict[str, Any] = {}
    warnings: list[str] = []
    brax_by_env: dict[str, dict[str, Any]] = {}
    missing: list[tuple[str, Extraction, list[tuple[str, str, str]]]] = []  # all of them, for one error
    for env in envs:
        b, s = _per_env(brax, env, "brax"), _per_env(slm, env, "slm")
        for extraction in (b, s):
            sources.update({name: info.to_json() for name, info in extraction.sources.items()})
        slm_values, brax_values = known_values(s), known_values(b)
        brax_by_env[env] = brax_values
        baseline, defaults = _settings_for(slm_values, num_envs, overrides)
        needs = _missing_settings(s, baseline, overrides)
        if needs:
            missing.append((env, s, needs))
        elif (why_not := _why_not_trained(s)):
            warnings.append(f"{env}: SLM-Lab's {s.scope.get('variant')} cannot train at this ref, so the baseline "
                            f"trains settings SLM-Lab itself cannot run: {why_not}")
        warnings.extend(f"{env}: SLM-Lab's {key} is {slm_values[key]!r}, the PyTorch trainer runs {fixed!r}: "
                        "the baseline is not SLM-Lab's settings there"
                        for key, fixed in sorted(TRAINER_FIXED.items())
                        if slm_values.get(key) is not None and not same_value(slm_values[key], fixed))
        baselines[env] = baseline
        defaults_used[env] = defaults
        env_ablations = [_classify(env, key, s, b) for key in sorted(set(s.facts) | set(b.facts)) if key in KEYS]
        if keys is not None:
            env_ablations = [a if a.key in keys or a.action != "variant" else
                             Ablation(a.env, a.key, a.slm, a.brax, "skipped", "not in --keys")
                             for a in env_ablations]
        if num_envs:
            env_ablations = [a if a.key != "num_envs" or a.action != "variant" else
                             Ablation(a.env, a.key, a.slm, a.brax, "scaled", f"every arm runs {num_envs} envs")
                             for a in env_ablations]
        env_ablations = [_checked_variant(a, baseline) for a in env_ablations]
        spec_fixes = None
        if fixed is not None:
            written = _per_env(fixed, env, "written variant")
            fixed_variants[env] = str(written.scope.get("variant"))
            spec_ablations.extend(_spec_ablations(env_ablations, env, s, written))
            fixed_settings = _settings_for(known_values(written), num_envs, overrides)[0]
            said = set(needs)  # what the baseline lacks for the same reason is said once
            written_needs = [need for need in _missing_settings(written, fixed_settings, overrides) if need not in said]
            if written_needs:
                missing.append((f"{env} ({fixed_variants[env]})", written, written_needs))
            spec_fixes = fixed_settings.to_json()
        ablations.extend(env_ablations)
        moved = [a.key for a in env_ablations if a.action == "variant"]

        def arm(keys_moved) -> dict:
            values = dict(slm_values)
            values.update({k: brax_values[k] for k in keys_moved})
            return _settings_for(values, num_envs, overrides)[0].to_json()

        def undone(key) -> dict:  # all_fixes with one of its moves back at SLM-Lab's value
            return arm([m for m in moved if m != key])

        all_fixes = arm(moved)
        if missing:
            continue  # the plan stops after every env said what it lacks
        planned: list[tuple[str, str, dict]] = []
        if "gap" in arms:
            planned += [(TORCH, BASELINE, baseline.to_json()), (TORCH, ALL_FIXES, all_fixes)]
            if spec_fixes is not None:
                planned.append((TORCH, SPEC_FIXES, spec_fixes))
        if "loo" in arms:
            planned += [(TORCH, f"loo:{k}", undone(k)) for k in moved]
        if "variants" in arms:
            if "gap" not in arms:
                planned.insert(0, (TORCH, BASELINE, baseline.to_json()))
            planned += [(TORCH, f"variant:{k}", arm([k])) for k in moved]
        if "loo" in arms and "gap" not in arms:
            planned.insert(0, (TORCH, ALL_FIXES, all_fixes))
        if reference and ("gap" in arms or "stand_in" in arms):  # the stand-in is tested against it
            planned.append((BRAX, REFERENCE, _reference_settings(brax_values, num_envs, overrides, env)))
        if "stand_in" in arms:
            planned.append((TORCH, STAND_IN, _stand_in_settings(brax_values, num_envs, overrides, env)))
            if planned[-1][2]["initial_weights"] != "brax_keys":
                warnings.append(f"{env}: the stand_in draws its own initial weights: Brax's "
                                f"{planned[-1][2]['action_distribution']} policy is not the tanh_normal MLP whose "
                                "weights it copies")
        arms_by_env[env] = planned
        update_steps[env] = {name: (_reference_update_steps(settings) if trainer == BRAX
                                    else TrainerSettings.from_json(settings).transitions_per_update)
                             for trainer, name, settings in planned}
    if missing:
        raise BraxDiffError(_missing_message(missing))
    unit = _lcm(steps for per_env in update_steps.values() for steps in per_env.values())
    checkpoints, interval = _checkpoints(budget, unit, evals)
    total = checkpoints * interval
    for env, per_env in update_steps.items():
        for name, steps in per_env.items():
            if steps > budget:
                warnings.append(f"{env} {name}: one update is {steps:,} env steps, more than the budget of "
                                f"{budget:,}; every run does {total:,} steps")
    # Why the rounding grew: the arms' update sizes come from the refs' settings, not from the
    # preset (SLM-Lab master's time_horizon 2048 makes 65,536 env steps an update at 32 envs).
    sizes = _update_sizes(update_steps)
    if checkpoints < evals:
        warnings.append(f"{checkpoints} checkpoint(s), not {evals}: {total // unit} whole updates of {unit:,} env "
                        "steps (every arm's update divides it) split no further without overshooting the budget"
                        f" ({sizes})")
    if total > budget * 1.1 and not any("more than the budget" in w for w in warnings):
        warnings.append(f"the budget of {budget:,} env steps became {total:,} to end on whole updates of every arm "
                        f"({sizes}; every {unit:,} steps all end one)")
    for env, per_env in update_steps.items():
        if REFERENCE in per_env:
            # a --set of a canonical key reaches Brax's trainer too, its resets included
            brax_values = {**brax_by_env[env], **{k: v for k, v in overrides.items() if k in KEYS}}
            warning = _reference_resets(env, arms_by_env[env], brax_values, interval // per_env[REFERENCE])
            if warning:
                warnings.append(warning)
    scoring = Scoring(checkpoints, interval, eval_envs, deterministic)
    # stand_in runs on the single engine: the seed-batched one has SLM-Lab's semantics only
    runs = [RunSpec(trainer, name, env, seed, total, settings, scoring,
                    ENGINES[engine] if trainer == TORCH and name != STAND_IN else SINGLE)
            for env in envs for seed in range(first_seed, first_seed + seeds)
            for trainer, name, settings in arms_by_env[env]]
    return Plan(list(envs), seeds, total, budget, scoring, ablations, runs, baselines, defaults_used, update_steps,
                overrides, sources, tuple(arms), num_envs, warnings, fixed_variants=fixed_variants,
                spec_ablations=spec_ablations, solve_threshold=solve_threshold, first_seed=first_seed)


def _update_sizes(update_steps: Mapping[str, Mapping[str, int]]) -> str:
    """"env steps per update: baseline, all_fixes 65,536; reference 15,360" over every env."""
    by_size: dict[int, list[str]] = {}
    for env, per_env in update_steps.items():
        for arm, steps in per_env.items():
            by_size.setdefault(steps, []).append(arm if len(update_steps) == 1 else f"{env} {arm}")
    def named(arms: list[str]) -> str:
        return ", ".join(arms) if len(arms) <= 3 else f"{', '.join(arms[:2])} and {len(arms) - 2} more"

    return "env steps per update: " + "; ".join(f"{named(arms)} {steps:,}"
                                                for steps, arms in sorted(by_size.items(), reverse=True))


def _spec_ablations(ablations: list[Ablation], env: str, slm: Extraction, written: Extraction) -> list[Ablation]:
    """What spec_fixes (the written variant) moves: a key it moves is a variant (to the
    value it sets, which may not be Brax's: time_horizon 480 for Brax's 16 x 30); a difference it
    leaves is moved by no arm but the reference."""
    out = []
    for a in ablations:
        moves = _classify(env, a.key, slm, written)
        if moves.action == "variant":
            reason = "" if same_value(moves.brax, a.brax) else f"the written variant sets {_fmt(moves.brax)}"
            out.append(Ablation(env, a.key, a.slm, a.brax, "variant", reason))
        elif a.action == "variant":
            out.append(Ablation(env, a.key, a.slm, a.brax, "not_in_spec",
                                "the written variant keeps SLM-Lab's value (its fix is a code change)"))
        else:
            out.append(a)
    return out


def units(plan: Plan, indices: list[int], jobs: int = 1) -> list[list[int]]:
    """The runs ``indices`` of ``plan`` as units of work: with the batched engine, the seeds of
    one PyTorch arm on one environment train together (one seed-batched run); every other run
    is a unit of its own. A unit is split in halves while there are fewer units than ``jobs``
    (a seed's result does not depend on the seeds it trains beside: tested)."""
    groups: dict[tuple, list[int]] = {}
    for index in indices:
        spec = plan.runs[index]
        if spec.trainer == TORCH and spec.engine == BATCHED:
            key = (spec.trainer, spec.env, spec.budget, dumps(dict(spec.settings)), dumps(spec.scoring.to_json()))
        else:
            key = ("unit", index)
        groups.setdefault(key, []).append(index)
    out = list(groups.values())
    while len(out) < jobs and any(len(u) > 1 for u in out):
        largest = max(out, key=len)
        out.remove(largest)
        half = (len(largest) + 1) // 2
        out += [largest[:half], largest[half:]]
    return sorted(out)


def _checkpoints(budget: int, unit: int, evals: int) -> tuple[int, int]:
    """(checkpoints, env steps between them): at most ``evals`` checkpoints on whole ``unit``s,
    ending at the smallest total at or above ``budget`` (more checkpoints on a tie)."""
    units = max(1, math.ceil(budget / unit))
    best = min(((c * math.ceil(units / c), -c) for c in range(1, min(evals, units) + 1)))
    checkpoints = -best[1]
    return checkpoints, unit * (best[0] // checkpoints)


def _missing_settings(slm: Extraction, settings: TrainerSettings, overrides: Mapping[str, Any]
                      ) -> list[tuple[str, str, str]]:
    """``(key, why, the --set that gives it)`` for every trainer setting an SLM-Lab variant's run
    needs and its extraction could not read (and no --set gave). A decaying LR needs the real
    run's horizon: compressing it into a short budget is another schedule (at 153,600 steps
    LinearToMin reaches 8% of its start); that horizon is ${max_frame} only when the spec
    leaves it to the command line, not when the schedule itself is unknown."""
    needs = [(key, slm.facts[key].unknown.removeprefix(f"{key}: "), f"--set {key}=VALUE")
             for key in slm.unknown_keys() if key in FIELDS and key not in overrides and key != "lr_decay_steps"]
    if settings.lr_schedule != "constant" and not settings.lr_decay_steps:
        fact = slm.facts.get("lr_decay_steps")
        if any(f.kind == "unset_placeholder" and f.key == "lr_decay_steps" for f in slm.findings):
            needs.append(("lr_decay_steps", "SLM-Lab's learning rate decays over lr_scheduler_spec.frame, which the "
                          "spec leaves to the command line as ${max_frame}", "--set max_frame=N"))
        elif fact is not None and fact.is_unknown:
            needs.append(("lr_decay_steps", fact.unknown.removeprefix("lr_decay_steps: "), "--set lr_decay_steps=N"))
        else:
            needs.append(("lr_decay_steps", "the learning rate decays and SLM-Lab's spec gives no horizon for it",
                          "--set lr_decay_steps=N"))
    return needs


def _missing_message(missing: list[tuple[str, Extraction, list[tuple[str, str, str]]]]) -> str:
    """One line for every value the plan lacks, in every scope: what each is, why it is unknown
    (the variant cannot train, when that is why) and every --set that gives them."""
    parts: dict[str, list[str]] = {}  # the same reason in several envs is said once
    flags: dict[str, None] = {}
    cannot_train = False
    for scope, extraction, needs in missing:
        keys = ", ".join(key for key, _, _ in needs)
        why_not = _why_not_trained(extraction)
        if why_not:
            cannot_train = True
            text = (f"{keys} are unknown because SLM-Lab's {extraction.scope.get('variant')} cannot train at this "
                    f"ref: {why_not}")
        else:
            whys = list(dict.fromkeys(why for _, why, _ in needs))
            text = f"the baseline needs SLM-Lab's {keys}, unknown at this ref ({'; '.join(whys)})"
        parts.setdefault(text, []).append(scope)
        flags.update(dict.fromkeys(flag for _, _, flag in needs))
    advice = ("make the variant train at that ref (or --variant one that does), or plan with values of your "
              "choosing, which are not what SLM-Lab trains: " if cannot_train else "give the values to train with: ")
    return ("; ".join(f"{', '.join(scopes)}: {text}" for text, scopes in parts.items())
            + "; " + advice + " ".join(flags))


def _why_not_trained(slm: Extraction) -> str | None:
    """The extractors' verdict: why the SLM-Lab variant cannot train at its ref, None if it can
    (asked only when an ERROR finding is there: planning from JSON needs no extractors)."""
    if not any(f.severity == "ERROR" for f in slm.findings):
        return None
    from brax_diff.extractors.slm.extractor import trains

    return trains(slm)[1]


def _checked_variant(ablation: Ablation, baseline: TrainerSettings) -> Ablation:
    """A variant whose Brax value the trainer cannot take (an unknown schedule, say) is unsupported."""
    if ablation.action != "variant":
        return ablation
    try:
        apply_fact(baseline, ablation.key, ablation.brax)
    except BraxDiffError as exc:
        return Ablation(ablation.env, ablation.key, ablation.slm, ablation.brax, "unsupported",
                        str(exc).removeprefix("trainer settings: "))
    except (TypeError, ValueError) as exc:
        return Ablation(ablation.env, ablation.key, ablation.slm, ablation.brax, "unsupported", str(exc))
    return ablation
