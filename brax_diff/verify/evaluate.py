"""One scoring protocol for every arm: Brax's own evaluator at the same env-step checkpoints.

Every run, the PyTorch arms and Brax's trainer alike, is scored by
``brax.training.acting.Evaluator``, the class ``ppo.train`` scores itself with:
``eval_envs`` full episodes on evaluation envs of their own (Playground's Brax training
wrapper, the same episode limit), raw rewards summed until each episode ends, the policy
stochastic (Brax's default, ``deterministic_eval=False``) or deterministic (its mode).
The evaluation key comes from the seed exactly as ``ppo.train`` derives its ``eval_key``,
and each evaluation splits it as the Evaluator does, so evaluation k of seed i starts the
same episodes in every arm. The training envs' reset keys come from ``ppo.train``'s
``key_env`` the same way: seed i of every arm starts training from the same states.

A PyTorch policy is evaluated by a JAX function of its weights (:func:`policy_params`,
:func:`make_policy`) that computes what ``ppo_torch.Policy`` computes: normalized
observation, MLP, (loc, raw std), std transform, sampled or mode action, tanh or clip.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .keys import brax_keys
from .settings import TrainerSettings


def policy_params(agent) -> dict[str, Any]:
    """A ``ppo_torch.PPO``'s policy as plain float32 arrays: its linear layers and obs statistics."""
    import torch

    layers = [(layer.weight.detach().cpu().numpy().T.astype(np.float32),
               layer.bias.detach().cpu().numpy().astype(np.float32))
              for layer in agent.policy.net if isinstance(layer, torch.nn.Linear)]
    stats = agent.obs_stats
    return {"layers": layers, "obs_mean": stats.mean.detach().cpu().numpy().astype(np.float32),
            "obs_var": stats.var.detach().cpu().numpy().astype(np.float32)}


def make_policy(settings: TrainerSettings, deterministic: bool) -> Callable:
    """params -> Brax policy ``(obs, key) -> (action, extras)`` computing ``ppo_torch.Policy``'s action."""
    import jax
    import jax.numpy as jnp

    activation = {"silu": jax.nn.silu, "relu": jax.nn.relu, "tanh": jnp.tanh, "elu": jax.nn.elu}[settings.activation]
    log_min = float(np.log(settings.std_min))
    log_max = None if settings.std_max is None else float(np.log(settings.std_max))

    def std_from_raw(raw):
        if settings.std_transform == "softplus":
            std = jax.nn.softplus(raw) + settings.std_min
            return std if settings.std_max is None else jnp.minimum(std, settings.std_max)
        if settings.std_transform == "exp":
            return jnp.exp(raw)
        return jnp.exp(jnp.clip(raw, log_min, log_max))

    def factory(params):
        def policy(obs, key):
            x = obs["state"] if isinstance(obs, dict) else obs
            if settings.obs_normalization:
                x = (x - params["obs_mean"]) / jnp.sqrt(params["obs_var"] + settings.obs_norm_std_eps)
                if settings.obs_clip is not None:
                    x = jnp.clip(x, -settings.obs_clip, settings.obs_clip)
            *hidden, (w_out, b_out) = params["layers"]
            for w, b in hidden:
                x = activation(x @ w + b)
            loc, raw = jnp.split(x @ w_out + b_out, 2, axis=-1)
            raw_action = loc if deterministic else loc + std_from_raw(raw) * jax.random.normal(key, loc.shape)
            if settings.action_distribution == "tanh_normal":
                return jnp.tanh(raw_action), {}
            return jnp.clip(raw_action, -1.0, 1.0), {}

        return policy

    return factory


class TorchEvaluator:
    """Scores PyTorch PPO agents with Brax's Evaluator on evaluation envs of their own.

    ``seed`` may be a list: the seeds of a seed-batched run share one compiled Evaluator.
    Its only per-seed state is its key (the donated env state it keeps is a buffer the unroll
    overwrites from a fresh reset), so seed i's key is swapped in for seed i's evaluation:
    the same episodes as an Evaluator of its own, without tracing one per seed.
    """

    def __init__(self, env_name: str, settings: TrainerSettings, seed: int | list[int], eval_envs: int,
                 deterministic: bool, episode_length: int | None = None):
        from brax.training import acting
        from mujoco_playground import wrapper

        from .envs import load_playground

        seeds = [seed] if isinstance(seed, int) else list(seed)
        env, config = load_playground(env_name)
        self.episode_length = int(episode_length or config.episode_length)
        self.action_repeat = int(config.get("action_repeat", 1))
        eval_env = wrapper.wrap_for_brax_training(env, episode_length=self.episode_length,
                                                  action_repeat=self.action_repeat)
        self._keys = [brax_keys(s)["eval_key"] for s in seeds]
        self._evaluator = acting.Evaluator(eval_env, make_policy(settings, deterministic), num_eval_envs=eval_envs,
                                           episode_length=self.episode_length, action_repeat=self.action_repeat,
                                           key=self._keys[0])

    def reseed(self, seed: int | list[int]) -> "TorchEvaluator":
        """The same compiled evaluator for other seeds: their keys swapped in (the only per-seed
        state), so a process scores run after run without tracing the evaluation unroll again."""
        self._keys = [brax_keys(s)["eval_key"] for s in ([seed] if isinstance(seed, int) else seed)]
        return self

    def score(self, params: dict[str, Any], index: int = 0) -> float:
        """The mean evaluation return of seed ``index``'s policy ``params`` (:func:`policy_params`)."""
        self._evaluator._key = self._keys[index]
        metrics = self._evaluator.run_evaluation(params, training_metrics={})
        self._keys[index] = self._evaluator._key
        return float(metrics["eval/episode_reward"])

    def __call__(self, agent) -> float:
        return self.score(policy_params(agent))
