"""How long a plan takes: a small cost model with constants measured on a machine.

Static (no torch, no jax). A PyTorch run's seconds are

    per run      run_s (a new evaluator: tracing, cached programs loaded)
    collection   (steps / num_envs) x collect_step_s + steps x collect_env_step_s
    SGD          gradient steps x gradient_step_s + steps x epochs x parameters x sample_param_s
    evaluation   checkpoints x (eval_run_s + eval_envs x episode_length x eval_env_step_s)

for one seed. The seeds of one PyTorch arm train as one unit (:func:`.plan.units`, the
seed-batched trainer), which pays the per-call terms once for all of its N seeds: run_s,
collect_step_s and gradient_step_s once per unit, the per-env-step, per-sample and per-episode
terms N times. A run of Brax's trainer is a unit of its own, the same with its own constants (one jitted program, so its
collection and SGD terms are cheaper, but every call traces and loads it again: run_s), plus a
compile time per distinct shape. The shipped
constants (``brax_diff/data/throughput.toml``) were measured on this project's machine by
``python benchmarks/bench_trainers.py --calibrate``, which writes the same file for yours
(``verify --throughput FILE``). The estimate says which machine it assumes.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import BraxDiffError
from ..safety.io import read_text
from .plan import BRAX, Plan, RunSpec
from .settings import TrainerSettings

DEFAULT_EPISODE_LENGTH = 1000  # DM Control
_REQUIRED = {
    "torch": ("run_s", "collect_step_s", "collect_env_step_s", "gradient_step_s", "sample_param_s", "compile_s"),
    "brax": ("run_s", "collect_env_step_s", "gradient_step_s", "sample_param_s", "compile_s"),
    "eval": ("run_s", "env_step_s"),
}


@dataclass(frozen=True)
class Throughput:
    machine: str
    date: str
    constants: dict[str, dict[str, float]]
    device: str = "cpu"  # what the constants were measured on ("gpu" when a GPU calibrated them)

    def get(self, part: str, name: str) -> float:
        return float(self.constants[part][name])


def load_throughput(path: str | Path | None = None) -> Throughput:
    """The measured constants: ``path``, else the shipped ones."""
    try:
        if path is None:
            text = resources.files("brax_diff").joinpath("data/throughput.toml").read_text(encoding="utf-8")
            origin = "brax_diff/data/throughput.toml"
        else:
            text, origin = read_text(path, "--throughput"), str(path)  # a regular file within the limits
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise BraxDiffError(f"cannot read throughput file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BraxDiffError(f"{origin}: not TOML: {exc}") from None
    constants: dict[str, dict[str, float]] = {}
    for part, names in _REQUIRED.items():
        table = data.get(part)
        if not isinstance(table, dict):
            raise BraxDiffError(f"{origin}: no [{part}] table")
        for name in names:
            if not isinstance(table.get(name), (int, float)) or isinstance(table.get(name), bool):
                raise BraxDiffError(f"{origin}: [{part}] {name} must be a number")
        constants[part] = {name: float(table[name]) for name in names}
    return Throughput(str(data.get("machine", "unknown machine")), str(data.get("date", "unknown date")), constants,
                      str(data.get("device", "cpu")))


def _mlp_parameters(inputs: int, hidden: tuple[int, ...], outputs: int) -> int:
    total, width = 0, inputs
    for size in (*hidden, outputs):
        total += width * size + size
        width = size
    return total


# Observation and action sizes only scale the first and last layers; DM Control's are small,
# so the estimate takes CartpoleBalance's (5 and 1) when it cannot know them statically.
OBS_SIZE, ACTION_SIZE = 5, 1


def run_seconds(spec: RunSpec, throughput: Throughput, seeds: int = 1) -> float:
    """Estimated seconds of one run, compilation excluded; ``seeds`` > 1: of a PyTorch unit of
    that many seeds of ``spec``'s arm trained batched."""
    steps, scoring = spec.budget, spec.scoring
    episode = DEFAULT_EPISODE_LENGTH
    evaluation = seeds * (scoring.evals + 1) * (throughput.get("eval", "run_s")
                                                + scoring.eval_envs * episode * throughput.get("eval", "env_step_s"))
    if spec.trainer == BRAX:
        train = spec.settings.get("train", {})
        network = spec.settings.get("network", {})
        epochs = int(train.get("num_updates_per_batch", 4))
        minibatches = int(train.get("num_minibatches", 32))
        update = int(train.get("batch_size", 1)) * minibatches * int(train.get("unroll_length", 1))
        parameters = (_mlp_parameters(OBS_SIZE, tuple(network.get("policy_hidden_layer_sizes", (32,) * 4)),
                                      2 * ACTION_SIZE)
                      + _mlp_parameters(OBS_SIZE, tuple(network.get("value_hidden_layer_sizes", (256,) * 5)), 1))
        gradient_steps = (steps // max(1, update)) * epochs * minibatches
        return (throughput.get("brax", "run_s") + steps * throughput.get("brax", "collect_env_step_s")
                + gradient_steps * throughput.get("brax", "gradient_step_s")
                + steps * epochs * parameters * throughput.get("brax", "sample_param_s") + evaluation)
    settings = TrainerSettings.from_json(spec.settings)
    parameters = (_mlp_parameters(OBS_SIZE, settings.policy_hidden_layers, 2 * ACTION_SIZE)
                  + _mlp_parameters(OBS_SIZE, settings.value_hidden_layers, 1))
    updates = steps // settings.transitions_per_update
    gradient_steps = updates * settings.epochs_per_update * settings.minibatches_per_epoch
    return (throughput.get("torch", "run_s") + (steps / settings.num_envs) * throughput.get("torch", "collect_step_s")
            + seeds * steps * throughput.get("torch", "collect_env_step_s")
            + gradient_steps * throughput.get("torch", "gradient_step_s")
            + seeds * steps * settings.epochs_per_update * parameters * throughput.get("torch", "sample_param_s")
            + evaluation)


@dataclass
class Estimate:
    seconds: float
    per_arm: dict[str, float] = field(default_factory=dict)  # seconds of one run of each arm (first env)
    compile_seconds: float = 0.0
    machine: str = ""
    date: str = ""
    jobs: int = 1
    # the device the plan trains on differs from the one the constants were measured on (a GPU
    # plan costed from CPU constants): a guess until a run there calibrates them
    extrapolated_to: str | None = None

    def render(self) -> str:
        arms = ", ".join(f"{arm} {seconds:,.0f} s" for arm, seconds in self.per_arm.items())
        text = (f"estimated wall time: {_duration(self.seconds)} with {self.jobs} job(s) (one run each: {arms}; "
                f"compilation {self.compile_seconds:,.0f} s) on {self.machine}, measured {self.date}")
        if self.extrapolated_to:
            text += (f"; for a {self.extrapolated_to.upper()} these are extrapolated until a "
                     f"{self.extrapolated_to.upper()} run calibrates them (benchmarks/bench_trainers.py --calibrate "
                     "there, then verify --throughput FILE)")
        return text

    def to_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds), "per_run": {k: round(v, 1) for k, v in self.per_arm.items()},
                "compile_seconds": round(self.compile_seconds), "machine": self.machine, "date": self.date,
                "jobs": self.jobs, "extrapolated_to": self.extrapolated_to}


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate(plan: Plan, throughput: Throughput, jobs: int = 1, device: str | None = None) -> Estimate:
    """Seconds for every run of the plan, plus one compilation per distinct program shape (per
    worker), spread over ``jobs`` processes that each get a core."""
    from .plan import units

    total, per_arm = 0.0, {}
    shapes: set[tuple] = set()
    compile_seconds = 0.0
    first: dict[str, int] = {}  # arms with equal settings are one run (the runner trains it once)
    for index, spec in enumerate(plan.runs):
        first.setdefault(spec.run_id(""), index)
    work = units(plan, sorted(first.values()), jobs)
    for unit in work:
        spec = plan.runs[unit[0]]
        seconds = run_seconds(spec, throughput, len(unit))
        total += seconds
        per_arm.setdefault(spec.arm, seconds / len(unit))
        shape = (spec.trainer, spec.env, _shape(spec), len(unit))
        if shape not in shapes:
            shapes.add(shape)
            compile_seconds += throughput.get("brax" if spec.trainer == BRAX else "torch", "compile_s")
    jobs = max(1, min(jobs, len(work)))
    extrapolated = device if device is not None and device != throughput.device else None
    return Estimate(total / jobs + compile_seconds, per_arm, compile_seconds, throughput.machine, throughput.date,
                    jobs, extrapolated)


def _shape(spec: RunSpec) -> str:
    if spec.trainer == BRAX:
        return repr(sorted(spec.settings.get("train", {}).items())) + repr(sorted(spec.settings.get("network", {}).items()))
    settings = spec.settings
    return repr((settings.get("num_envs"), settings.get("policy_hidden_layers"), settings.get("episode_length")))
