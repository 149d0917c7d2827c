"""MuJoCo Playground environments stepped from PyTorch.

The environment stays a jitted JAX function (Playground's Brax training wrapper: episode
limit, auto-reset, vmap over envs); only the arrays cross over: through NumPy on the CPU
(a copy-free view where possible), through DLPack on a GPU (no host round trip).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

CPU_IMPL = "jax"  # Playground's default `impl` is "warp", about 100x slower on a CPU


def jax_backend() -> str:
    import jax

    return jax.default_backend()


def enable_compilation_cache(directory: str | os.PathLike) -> None:
    """Keep compiled XLA programs on disk: a rerun with the same shapes skips most compilation."""
    import jax

    Path(directory).mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


def physics_impl() -> str | None:
    """The ``impl`` to ask Playground for: MJX's JAX implementation on a CPU (its default, warp,
    is about 100x slower there) and wherever warp is not installed (the GPU machine: warp's
    150 MB wheel does not fit what a call carries); None: Playground's default."""
    import importlib.util

    if jax_backend() == "cpu" or importlib.util.find_spec("warp") is None:
        return CPU_IMPL
    return None


def load_playground(name: str, config_overrides: dict | None = None):
    """``registry.load`` with the ``impl`` of :func:`physics_impl`."""
    from mujoco_playground import registry

    overrides = dict(config_overrides or {})
    if physics_impl() is not None:
        overrides.setdefault("impl", physics_impl())
    try:
        return registry.load(name, config_overrides=overrides), registry.get_default_config(name)
    except Exception as exc:  # unknown name, menagerie assets that cannot be fetched offline, ...
        from ..errors import BraxDiffError

        raise BraxDiffError(f"cannot load Playground environment {name!r}: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}") from None


class PlaygroundVecEnv:
    """``num_envs`` copies of a Playground env, auto-resetting, with torch tensors in and out.

    ``step`` returns (next obs, reward, terminated, truncated) as float tensors on
    ``device``; after a finished episode the next obs is the reset state's (auto-reset).
    """

    def __init__(self, name: str, num_envs: int, device: str = "cpu", episode_length: int | None = None):
        import jax

        from mujoco_playground import wrapper

        env, config = load_playground(name)
        self.name, self.num_envs, self.device = name, int(num_envs), torch.device(device)
        self.episode_length = int(episode_length or config.episode_length)
        self.action_repeat = int(config.get("action_repeat", 1))
        self.obs_size = int(env.observation_size if isinstance(env.observation_size, int)
                            else env.observation_size["state"][0])
        self.action_size = int(env.action_size)
        self._env = wrapper.wrap_for_brax_training(env, episode_length=self.episode_length,
                                                   action_repeat=self.action_repeat)
        self._reset = jax.jit(self._env.reset)
        self._step = jax.jit(self._env.step)
        self._state = None
        self._gpu = self.device.type == "cuda"

    def _to_torch(self, array) -> torch.Tensor:
        if self._gpu:
            return torch.from_dlpack(array).to(torch.float32)
        return torch.from_numpy(np.array(array, dtype=np.float32))  # a writable copy

    def _to_jax(self, tensor: torch.Tensor):
        import jax
        import jax.numpy as jnp

        if self._gpu:
            return jax.dlpack.from_dlpack(tensor.contiguous())
        return jnp.asarray(tensor.detach().numpy())

    def _obs(self) -> torch.Tensor:
        obs = self._state.obs
        return self._to_torch(obs["state"] if isinstance(obs, dict) else obs)

    def reset(self, seed: int | list[int]) -> torch.Tensor:
        """Reset every env with the keys Brax's ``ppo.train`` resets its envs with at this seed;
        a list of N seeds: the envs are N equal blocks, block i reset with seed i's keys (the
        seed-batched trainer, :mod:`.ppo_batched`)."""
        import jax.numpy as jnp

        from .keys import training_reset_keys

        seeds = [seed] if isinstance(seed, int) else list(seed)
        if not seeds or self.num_envs % len(seeds):
            raise ValueError(f"{self.num_envs} envs do not split into {len(seeds)} seeds")
        per_seed = self.num_envs // len(seeds)
        self._keys = [training_reset_keys(s, per_seed) for s in seeds]
        self._state = self._reset(jnp.concatenate(self._keys))
        return self._obs()

    def reset_all(self) -> torch.Tensor:
        """Reset every env at once to a fresh initial state, with the keys Brax's ``ppo.train``
        resets its envs with after a reset epoch: each seed's block of keys split anew from its
        first key (``key_envs = split(key_envs[0], num_envs)`` per device)."""
        import jax.numpy as jnp

        from .keys import next_reset_keys

        self._keys = [next_reset_keys(keys) for keys in self._keys]
        self._state = self._reset(jnp.concatenate(self._keys))
        return self._obs()

    def step(self, action: torch.Tensor):
        self._state = self._step(self._state, self._to_jax(action))
        truncated = self._to_torch(self._state.info["truncation"])
        done = self._to_torch(self._state.done)
        terminated = done * (1.0 - truncated)
        return self._obs(), self._to_torch(self._state.reward), terminated, truncated
