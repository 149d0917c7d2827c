"""The reference run: Brax's own PPO trainer with the resolved Brax settings.

``brax.training.agents.ppo.train`` is called as Playground's training scripts call it: the
environment from ``registry.load`` (``impl=jax`` on a CPU), wrapped by
``mujoco_playground.wrapper.wrap_for_brax_training``, the network from
``make_ppo_networks`` with the extracted sizes, activation, distribution and init. Its own
evaluator scores it at the plan's checkpoints (``num_evals`` = checkpoints + 1, the first
before training; ``num_eval_envs`` and ``deterministic_eval`` from the plan's scoring), the
same evaluator and keys the PyTorch arms are scored with (:mod:`.evaluate`).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Mapping

from .envs import load_playground
from .plan import Scoring


def network_factory(network: Mapping[str, Any]):
    """``make_ppo_networks`` with the JSON network settings turned into callables."""
    import jax
    from brax.training.agents.ppo import networks as ppo_networks

    kwargs: dict[str, Any] = {}
    if "policy_hidden_layer_sizes" in network:
        kwargs["policy_hidden_layer_sizes"] = tuple(network["policy_hidden_layer_sizes"])
    if "value_hidden_layer_sizes" in network:
        kwargs["value_hidden_layer_sizes"] = tuple(network["value_hidden_layer_sizes"])
    if "activation" in network:
        kwargs["activation"] = getattr(jax.nn, network["activation"])
    if "distribution_type" in network:
        kwargs["distribution_type"] = network["distribution_type"]
    if "state_dependent_std" in network:
        kwargs["state_dependent_std"] = bool(network["state_dependent_std"])
    init = network.get("kernel_init")
    if init in ("lecun_uniform", "orthogonal", "xavier_uniform"):
        fn = {"lecun_uniform": jax.nn.initializers.lecun_uniform, "orthogonal": jax.nn.initializers.orthogonal,
              "xavier_uniform": jax.nn.initializers.glorot_uniform}[init]
        kwargs["policy_network_kernel_init_fn"] = fn
        kwargs["value_network_kernel_init_fn"] = fn
    return functools.partial(ppo_networks.make_ppo_networks, **kwargs)


def train_kwargs(settings: Mapping[str, Any], env_name: str, budget: int, seed: int, scoring: Scoring,
                 progress_fn: Callable | None = None) -> tuple[Any, dict]:
    """The environment and the keyword arguments for ``ppo.train`` (no training yet)."""
    from mujoco_playground import wrapper

    env, config = load_playground(env_name)
    kwargs = dict(settings.get("train", {}))
    kwargs.update(
        num_timesteps=int(budget),
        seed=int(seed),
        episode_length=int(kwargs.get("episode_length") or config.episode_length),
        action_repeat=int(config.get("action_repeat", 1)),
        wrap_env_fn=wrapper.wrap_for_brax_training,
        network_factory=network_factory(settings.get("network", {})),
        num_evals=scoring.evals + 1,
        num_eval_envs=scoring.eval_envs,
        deterministic_eval=scoring.deterministic,
    )
    if progress_fn is not None:
        kwargs["progress_fn"] = progress_fn
    return env, kwargs


def train(settings: Mapping[str, Any], env_name: str, budget: int, seed: int, scoring: Scoring,
          on_eval: Callable[[int, float], None] | None = None) -> tuple[list[int], list[float], float]:
    """Run Brax's trainer; returns (env steps, eval returns, seconds) of its evaluations.

    Raises ValueError when its checkpoints are not the plan's (the budget was not whole updates)."""
    from brax.training.agents.ppo import train as ppo

    from .jax_compat import apply

    apply()  # brax 0.14.2 on jax >= 0.10 (the GPU machine's jax 0.11)
    steps: list[int] = []
    scores: list[float] = []

    def progress(num_steps: int, metrics: Mapping[str, Any]) -> None:
        steps.append(int(num_steps))
        scores.append(float(metrics["eval/episode_reward"]))
        if on_eval:
            on_eval(int(num_steps), scores[-1])

    env, kwargs = train_kwargs(settings, env_name, budget, seed, scoring, progress)
    started = time.perf_counter()
    ppo.train(environment=env, **kwargs)
    seconds = time.perf_counter() - started
    if steps != scoring.checkpoints:
        raise ValueError(f"Brax's trainer evaluated at {steps}, not at the plan's checkpoints {scoring.checkpoints}")
    return steps, scores, seconds
