"""The ablation plan: which trainings answer "does this difference matter?".

Static (no torch, no jax): :func:`build_plan` compares a Brax and an SLM-Lab
:class:`~brax_diff.facts.Extraction` key by key and plans, per environment and seed,

* one **baseline** run of the PyTorch trainer with the SLM-Lab settings,
* one **variant** run per difference the trainer can express, that one key moved to the
  Brax value (everything else stays SLM-Lab's), and
* one **reference** run of Brax's own PPO trainer with the Brax settings.

Keys that differ but get no run are kept in the plan with the reason (derived from other
keys, not expressible by the trainer, a value missing on one side) so a reader sees them.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import BraxDiffError
from ..facts import Extraction, dumps
from ..vocabulary import KEYS, canonical_activation
from .settings import (DERIVED_KEYS, UNSUPPORTED_KEYS, TrainerSettings, apply_fact, expressible,
                       settings_from_facts)

DEFAULT_ENV = "CartpoleBalance"
DEFAULT_SEEDS = 5
DEFAULT_BUDGET = 1_000_000

TORCH = "torch-ppo"  # our PyTorch PPO with SLM-Lab semantics
BRAX = "brax-ppo"  # brax.training.agents.ppo.train


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
class RunSpec:
    """One training: trainer, settings, environment, seed and env-step budget.

    ``arm`` names what it is for: "baseline", "variant:<key>" or "reference".
    """

    trainer: str
    arm: str
    env: str
    seed: int
    budget: int
    settings: Mapping[str, Any]

    def identity(self, version: str) -> dict:
        return {"trainer": self.trainer, "settings": dict(self.settings), "env": self.env,
                "seed": self.seed, "budget": self.budget, "brax_diff": version}

    def run_id(self, version: str) -> str:
        """The cache key: a hash of everything that changes the run's outcome."""
        text = json.dumps(self.identity(version), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def to_json(self) -> dict:
        return {"trainer": self.trainer, "arm": self.arm, "env": self.env, "seed": self.seed,
                "budget": self.budget, "settings": dict(self.settings)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunSpec":
        return cls(data["trainer"], data["arm"], data["env"], int(data["seed"]), int(data["budget"]),
                   dict(data["settings"]))


@dataclass
class Plan:
    envs: list[str]
    seeds: int
    budget: int
    ablations: list[Ablation]
    runs: list[RunSpec]
    baseline: dict[str, TrainerSettings]
    defaults_used: dict[str, list[str]]
    overrides: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, Any] = field(default_factory=dict)
    with_reference: bool = True

    def variant_keys(self, env: str | None = None) -> list[str]:
        return [a.key for a in self.ablations if a.action == "variant" and (env is None or a.env == env)]

    def arms(self) -> list[str]:
        seen: list[str] = []
        for run in self.runs:
            if run.arm not in seen:
                seen.append(run.arm)
        return seen

    def to_json(self) -> dict:
        return {
            "envs": list(self.envs),
            "seeds": self.seeds,
            "budget": self.budget,
            "overrides": {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(self.overrides.items())},
            "sources": self.sources,
            "baseline": {env: s.to_json() for env, s in sorted(self.baseline.items())},
            "defaults_used": {env: list(v) for env, v in sorted(self.defaults_used.items())},
            "ablations": [a.to_json() for a in self.ablations],
            "runs": [r.to_json() for r in self.runs],
        }

    def render(self) -> str:
        """The plan as plain text: every compared key with its action, then the run count."""
        lines = [f"verify plan: {len(self.runs)} runs = {len(self.envs)} env(s) x {self.seeds} seed(s) x "
                 f"{len(self.arms())} arm(s), {self.budget:,} env steps each"]
        for name, info in sorted(self.sources.items()):
            lines.append(f"  {name}: {info.get('repo', '')} @ {str(info.get('commit', ''))[:12]}")
        if self.overrides:
            lines.append("  overrides on every run: " + ", ".join(f"{k}={v}" for k, v in sorted(self.overrides.items())))
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
        lines.append("\narms: " + ", ".join(self.arms()))
        return "\n".join(lines) + "\n"

    def dumps(self) -> str:
        return dumps(self.to_json())


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ",".join(_fmt(v) for v in value) + "]"
    return "null" if value is None else str(value)


def _classify(env: str, key: str, slm: Extraction, brax: Extraction) -> Ablation:
    slm_fact, brax_fact = slm.facts.get(key), brax.facts.get(key)
    slm_value = None if slm_fact is None else slm_fact.value
    brax_value = None if brax_fact is None else brax_fact.value
    if slm_fact is None or brax_fact is None:
        side = "SLM-Lab" if slm_fact is None else "Brax"
        return Ablation(env, key, slm_value, brax_value, "missing", f"no {side} value")
    if same_value(slm_value, brax_value):
        return Ablation(env, key, slm_value, brax_value, "match")
    if key in DERIVED_KEYS:
        return Ablation(env, key, slm_value, brax_value, "derived", f"follows from {DERIVED_KEYS[key]}")
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


def build_plan(brax: Extraction | Mapping[str, Extraction], slm: Extraction | Mapping[str, Extraction], *,
               envs: list[str] | tuple[str, ...] = (DEFAULT_ENV,), seeds: int = DEFAULT_SEEDS,
               budget: int = DEFAULT_BUDGET, keys: list[str] | None = None,
               overrides: Mapping[str, Any] | None = None, reference: bool = True) -> Plan:
    """Plan the baseline, variant and reference runs.

    ``brax``/``slm`` are one Extraction each, or ``{env: Extraction}`` when environments
    resolve differently. ``keys`` limits the variants to those keys (each must be a
    canonical key). ``overrides`` are trainer-setting values applied to every run (e.g. a
    smaller ``num_envs`` on a CPU) and, for canonical keys, to the Brax reference run too.
    """
    if seeds < 1:
        raise BraxDiffError(f"--seeds must be >= 1, got {seeds}")
    if budget < 1:
        raise BraxDiffError(f"--budget must be >= 1 env step, got {budget}")
    if not envs:
        raise BraxDiffError("no environment to verify on")
    for key in keys or []:
        if key not in KEYS:
            raise BraxDiffError(f"unknown canonical key {key!r} in --keys")
    overrides = dict(overrides or {})
    ablations: list[Ablation] = []
    runs: list[RunSpec] = []
    baselines: dict[str, TrainerSettings] = {}
    defaults_used: dict[str, list[str]] = {}
    sources: dict[str, Any] = {}
    for env in envs:
        b, s = _per_env(brax, env, "brax"), _per_env(slm, env, "slm")
        for extraction in (b, s):
            sources.update({name: info.to_json() for name, info in extraction.sources.items()})
        baseline, defaults = settings_from_facts({k: f.value for k, f in s.facts.items()})
        baseline = baseline.moved(**overrides) if overrides else baseline
        baselines[env] = baseline
        defaults_used[env] = [d for d in defaults if d not in overrides]
        env_ablations = [_classify(env, key, s, b) for key in sorted(set(s.facts) | set(b.facts)) if key in KEYS]
        if keys is not None:
            env_ablations = [a if a.key in keys or a.action != "variant" else
                             Ablation(a.env, a.key, a.slm, a.brax, "skipped", "not in --keys")
                             for a in env_ablations]
        env_ablations = [_checked_variant(a, baseline) for a in env_ablations]
        ablations.extend(env_ablations)
        arms: list[tuple[str, str, Mapping[str, Any]]] = [(TORCH, "baseline", baseline.to_json())]
        for a in env_ablations:
            if a.action == "variant":
                arms.append((TORCH, f"variant:{a.key}", apply_fact(baseline, a.key, a.brax).to_json()))
        if reference:
            from .settings import brax_train_settings

            brax_values = {k: f.value for k, f in b.facts.items()}
            brax_values.update({k: v for k, v in overrides.items() if k in KEYS})
            reference_settings = brax_train_settings(brax_values)
            if overrides.get("episode_length"):
                reference_settings["train"]["episode_length"] = int(overrides["episode_length"])
            arms.append((BRAX, "reference", reference_settings))
        for seed in range(seeds):
            for trainer, arm, settings in arms:
                runs.append(RunSpec(trainer, arm, env, seed, budget, settings))
    return Plan(list(envs), seeds, budget, ablations, runs, baselines, defaults_used, overrides, sources,
                reference)


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
