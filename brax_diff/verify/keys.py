"""The random keys Brax's ``ppo.train`` derives from a seed: every arm resets and evaluates its
environments with them, so the PyTorch trainer and Brax's own see the same episodes."""

from __future__ import annotations

from typing import Any


def brax_keys(seed: int) -> dict[str, Any]:
    """The keys ``brax.training.agents.ppo.train`` derives from ``seed`` on one process."""
    import jax

    key = jax.random.PRNGKey(seed)
    global_key, local_key = jax.random.split(key)
    local_key = jax.random.fold_in(local_key, 0)  # process_id 0
    local_key, key_env, eval_key = jax.random.split(local_key, 3)
    key_policy, key_value = jax.random.split(global_key)
    return {"key_env": key_env, "eval_key": eval_key, "key_policy": key_policy, "key_value": key_value}


def training_reset_keys(seed: int, num_envs: int):
    """The per-env reset keys of ``ppo.train``'s first reset (one device)."""
    import jax

    return jax.random.split(brax_keys(seed)["key_env"], num_envs)


def next_reset_keys(keys):
    """The reset keys of ``ppo.train``'s next reset of all training envs (``num_resets_per_eval``
    > 0): after every reset epoch it splits the first env's key into as many keys as envs."""
    import jax

    return jax.random.split(keys[0], keys.shape[0])
