"""The training setup on the Brax side: what decides whether a score can be compared at all.

Read from the scope ``train()`` is called with (signature defaults < Playground's family
config < the environment's branch, where ``episode_length=env_config.episode_length`` is the
environment's own config, :mod:`brax_diff.extractors.playground.env`) and from
``make_ppo_networks()``'s (``policy_obs_key`` / ``value_obs_key``); the physics backend from the
environment's config (``impl``). A value a scope does not decide is an explained unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from brax_diff.facts.model import Fact

from .scope import Code, Scope, Setting
from ..playground.env import EnvConfigs

# canonical key -> (scope, parameter)
FROM_TRAIN = {"episode_length": "episode_length", "action_repeat": "action_repeat"}
FROM_NETWORK = {"policy_obs_keys": "policy_obs_key", "value_obs_keys": "value_obs_key"}
# The evaluation protocol: train()'s parameters (brax/training/agents/ppo/train.py), as train() uses them.
EVAL_INTERVAL_INPUTS = ("num_timesteps", "num_evals", "num_resets_per_eval", "batch_size", "unroll_length",
                        "num_minibatches", "action_repeat")


def setup_facts(train: Scope, network: Scope, *, family: str | None, env: str | None,
                env_configs: EnvConfigs | None, reference: str = "params", impl: Setting | None = None,
                learner=None) -> list[Fact]:
    """``impl``: the backend a training script forces on the environment (train-script);
    ``learner``: Brax's snapshot, whose learner.py builds the environment (learner)."""
    out = [_fact(key, train.get(name), f"train({name}=...)") for key, name in FROM_TRAIN.items()]
    out += [_fact(key, network.get(name), f"make_ppo_networks({name}=...)") for key, name in FROM_NETWORK.items()]
    out += evaluation_facts(train)
    out.append(_training_env_steps(train))
    if reference == "train-script" and env is not None:
        out.append(_fact("physics_backend", impl, "registry.load(config_overrides={'impl': ...})"))
    elif reference == "learner" and env is not None:
        out.append(_learner_physics(family, env, env_configs, learner))
    elif reference != "params":  # the environment's own config is read for Playground's configs only
        out.append(Fact("physics_backend", None, (), unknown=f"physics_backend: the {reference} reference runs the "
                                                            "environment as its own config says, which it does not read"))
    else:
        out.append(_physics(family, env, env_configs))
    return out


def _fact(key: str, setting: Setting | None, what: str) -> Fact:
    if setting is None:
        return Fact(key, None, (), unknown=f"{key}: neither the config nor the signature sets {what}")
    if isinstance(setting.value, Code):
        return Fact(key, None, setting.provenance, unknown=f"{key}: {setting.value.text}")
    if setting.value is None and key == "episode_length":  # train() refuses to run without one
        return Fact(key, None, setting.provenance,
                    unknown=f"{key}: train() raises when episode_length is None and nothing sets it")
    return Fact(key, setting.value, setting.provenance, f"{what}: {setting.origin}")


def _physics(family: str | None, env: str | None, env_configs: EnvConfigs | None) -> Fact:
    if env is None or family is None or env_configs is None:
        return Fact("physics_backend", None, (), unknown="physics_backend: set per environment (its config's impl)")
    found = env_configs.field(family, env, "impl")
    if found.unknown is not None and found.unknown.endswith("has no field 'impl'"):
        single = _single_backend(env_configs.snapshot)
        if single is not None:
            return Fact("physics_backend", "jax", (*found.provenance, single),
                        f"{env}'s config has no impl, and Playground at this commit has no backend choice "
                        f"({MJX_ENV} passes no impl to MJX): MJX's JAX implementation, the only one it offers")
    if found.unknown is not None:
        return Fact("physics_backend", None, found.provenance, unknown=f"physics_backend: {found.unknown}")
    return Fact("physics_backend", str(found.value), found.provenance,
                f"{env}'s default config (impl); Playground's learning/train_jax_ppo.py overrides it with --impl")


LEARNER = "brax/training/learner.py"
_OVERRIDES_FLAG = re.compile(r"DEFINE_string\(\s*['\"]playground_config_overrides['\"],\s*None\s*,")


def _learner_physics(family: str | None, env: str, env_configs: EnvConfigs | None, brax) -> Fact:
    """learner.py loads a Playground env with ``config_overrides`` from ``--playground_config_overrides``;
    at its default (None) the env's own config decides, as for Playground's configs."""
    text = brax.read(LEARNER) if brax is not None and brax.exists(LEARNER) else ""
    found = _OVERRIDES_FLAG.search(text)
    if found is None:
        return Fact("physics_backend", None, (), unknown=f"physics_backend: {LEARNER}'s --playground_config_overrides "
                                                         "default is not None (or not found): the overrides it "
                                                         "passes are not read")
    line = text.count("\n", 0, found.start()) + 1
    fact = _physics(family, env, env_configs)
    at = (*fact.provenance, brax.where(LEARNER, line))
    if fact.is_unknown:
        return Fact("physics_backend", None, at, unknown=fact.unknown)
    return Fact("physics_backend", fact.value, at, f"{env}'s default config (impl): learner.py's "
                "--playground_config_overrides is None by default (Playground's maintainers pass "
                "'{\"impl\": \"jax\"}' for the Humanoid targets, mujoco_playground#171)")


MJX_ENV = "mujoco_playground/_src/mjx_env.py"


def _single_backend(snapshot):
    """Where Playground's ``mjx_env.py`` is, when it names no ``impl`` at all (before MuJoCo Warp came
    in, MJX's JAX implementation was the only one): its first line; else None."""
    if not snapshot.exists(MJX_ENV) or re.search(r"\bimpl\b", snapshot.read(MJX_ENV)):
        return None
    return snapshot.where(MJX_ENV, 1)


def evaluation_facts(train: Scope) -> list[Fact]:
    """How Brax scores a run: ``num_resets_per_eval`` (the training envs reset that many times per
    evaluation epoch), ``eval_policy`` (``Evaluator(..., make_policy(deterministic=deterministic_eval))``
    runs fresh episodes of the policy's mode or of samples) and ``eval_interval_env_steps``, the env
    steps between two evaluations: train() splits num_timesteps into max(num_evals - 1, 1) epochs of
    whole training steps, each ``batch_size * unroll_length * num_minibatches * action_repeat`` env
    steps, run ``max(num_resets_per_eval, 1)`` times (``num_training_steps_per_epoch``); and
    ``env_steps_between_resets``, how far each training env runs between those resets."""
    out = [_fact("num_resets_per_eval", train.get("num_resets_per_eval"), "train(num_resets_per_eval=...)")]
    deterministic = _fact("eval_policy", train.get("deterministic_eval"), "train(deterministic_eval=...)")
    if not deterministic.is_unknown and not isinstance(deterministic.value, bool):
        deterministic = Fact("eval_policy", None, deterministic.provenance,
                             unknown=f"eval_policy: deterministic_eval is {deterministic.value!r}, not a bool")
    elif not deterministic.is_unknown:
        deterministic = Fact("eval_policy", "deterministic" if deterministic.value else "sampled",
                             deterministic.provenance, f"train(deterministic_eval={deterministic.value}): the "
                             "evaluator runs fresh episodes of the policy's " +
                             ("mode" if deterministic.value else "samples") + f"; {deterministic.note}")
    out.append(deterministic)
    out.append(_eval_interval(train))
    out.append(_steps_between_resets(train))
    return out


def _ints(train: Scope, key: str, names: tuple[str, ...]) -> tuple[dict[str, int], list] | Fact:
    """train()'s integer parameters ``names`` with their lines, or the unknown ``key`` naming the
    first that is not an int."""
    values, provenance = {}, []
    for name in names:
        fact = _fact(key, train.get(name), f"train({name}=...)")
        if fact.is_unknown or not isinstance(fact.value, int) or isinstance(fact.value, bool):
            why = fact.unknown.split(": ", 1)[1] if fact.is_unknown else f"{name} is {fact.value!r}"
            return Fact(key, None, fact.provenance, unknown=f"{key}: from train()'s {name}: {why}")
        values[name] = fact.value
        provenance.extend(fact.provenance)
    return values, provenance


def _training_step(values: dict[str, int]) -> tuple[int, int]:
    """(env steps of one training step, training steps per reset epoch), as train() computes them."""
    per_step = values["batch_size"] * values["unroll_length"] * values["num_minibatches"] * values["action_repeat"]
    resets = max(values["num_resets_per_eval"], 1)
    epochs = max(values["num_evals"] - 1, 1)
    return per_step, -(-values["num_timesteps"] // (epochs * per_step * resets))  # ceil, as train() rounds up


@dataclass(frozen=True)
class _Schedule:
    """How train() splits its run: evaluation epochs of reset epochs of whole training steps."""

    values: dict[str, int]
    provenance: tuple
    per_step: int  # env steps of one training step
    steps_per_epoch: int  # training steps per reset epoch (ceil, as train() rounds up)
    resets: int  # max(num_resets_per_eval, 1)
    epochs: int  # max(num_evals - 1, 1)


def _schedule(train: Scope, key: str) -> _Schedule | Fact:
    read = _ints(train, key, EVAL_INTERVAL_INPUTS)
    if isinstance(read, Fact):
        return read
    values, provenance = read
    per_step, steps_per_epoch = _training_step(values)
    return _Schedule(values, tuple(sorted(set(provenance))), per_step, steps_per_epoch,
                     max(values["num_resets_per_eval"], 1), max(values["num_evals"] - 1, 1))


def _eval_interval(train: Scope) -> Fact:
    key = "eval_interval_env_steps"
    run = _schedule(train, key)
    if isinstance(run, Fact):
        return run
    return Fact(key, run.steps_per_epoch * run.per_step * run.resets, run.provenance,
                f"train(): {run.values['num_timesteps']:,} env steps in max(num_evals - 1, 1) = {run.epochs} epochs "
                f"of whole training steps ({run.per_step:,} env steps each, x max(num_resets_per_eval, 1) = "
                f"{run.resets})")


def _training_env_steps(train: Scope) -> Fact:
    """The env steps train() runs (action repeat counted, as Brax counts them): ``num_timesteps``
    rounded up to whole reset epochs of whole training steps, max(num_evals - 1, 1) times; the
    requested ``num_timesteps`` is kept as ``declared``. At Playground's DM Control config 60 M
    requested run 88,473,600 (9 evaluations of 9,830,400)."""
    key = "training_env_steps"
    run = _schedule(train, key)
    if isinstance(run, Fact):
        return run
    total = run.epochs * run.resets * run.steps_per_epoch * run.per_step
    requested = run.values["num_timesteps"]
    return Fact(key, total, run.provenance,
                f"train() runs max(num_evals - 1, 1) = {run.epochs} epochs x max(num_resets_per_eval, 1) = "
                f"{run.resets} x {run.steps_per_epoch:,} training step(s) of {run.per_step:,} env steps (batch_size "
                f"x unroll_length x num_minibatches x action_repeat): num_timesteps {requested:,} rounded up to "
                "whole training steps; env steps count every action_repeat step",
                requested if requested != total else None)


def _steps_between_resets(train: Scope) -> Fact:
    """How far each training env runs before train() resets them all: with num_resets_per_eval
    > 0, after every reset epoch of ``num_training_steps_per_epoch`` training steps, each
    ``batch_size * num_minibatches / num_envs`` unrolls of ``unroll_length`` per env; with 0, never."""
    key = "env_steps_between_resets"
    read = _ints(train, key, ("num_resets_per_eval",))
    if isinstance(read, Fact):
        return read
    if read[0]["num_resets_per_eval"] <= 0:
        return Fact(key, 0, tuple(sorted(set(read[1]))),
                    "train(num_resets_per_eval=0): the training envs are never reset together; an env restarts "
                    "only when its episode ends")
    read = _ints(train, key, (*EVAL_INTERVAL_INPUTS, "num_envs"))
    if isinstance(read, Fact):
        return read
    values, provenance = read
    per_step, steps_per_epoch = _training_step(values)
    if values["num_envs"] <= 0 or (values["batch_size"] * values["num_minibatches"]) % values["num_envs"]:
        return Fact(key, None, tuple(sorted(set(provenance))),
                    unknown=f"{key}: train() raises: batch_size x num_minibatches = "
                            f"{values['batch_size'] * values['num_minibatches']:,} is not a multiple of num_envs "
                            f"{values['num_envs']:,}")
    per_env = steps_per_epoch * per_step // values["num_envs"]
    return Fact(key, per_env, tuple(sorted(set(provenance))),
                f"train(): every env reset together after each epoch of {steps_per_epoch:,} training step(s) of "
                f"{per_step // values['num_envs']:,} env steps per env (batch_size x num_minibatches / num_envs = "
                f"{values['batch_size'] * values['num_minibatches'] // values['num_envs']} unrolls of "
                f"{values['unroll_length']} x action_repeat {values['action_repeat']})")
