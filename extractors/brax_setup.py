"""The training setup on the Brax side: what decides whether a score can be compared at all.

Read from the scope ``train()`` is called with (signature defaults < Playground's family
config < the environment's branch, where ``episode_length=env_config.episode_length`` is the
environment's own config, :mod:`brax_diff.extractors.playground_env`) and from
``make_ppo_networks()``'s (``policy_obs_key`` / ``value_obs_key``); the physics backend from the
environment's config (``impl``). A value a scope does not decide is an explained unknown.
"""

from __future__ import annotations

from brax_diff.facts import Fact

from .brax_scope import Code, Scope, Setting
from .playground_env import EnvConfigs

# canonical key -> (scope, parameter)
FROM_TRAIN = {"training_env_steps": "num_timesteps", "episode_length": "episode_length",
              "action_repeat": "action_repeat"}
FROM_NETWORK = {"policy_obs_keys": "policy_obs_key", "value_obs_keys": "value_obs_key"}


def setup_facts(train: Scope, network: Scope, *, family: str | None, env: str | None,
                env_configs: EnvConfigs | None, reference: str = "params", impl: Setting | None = None) -> list[Fact]:
    """``impl``: the backend a training script forces on the environment (train-script)."""
    out = [_fact(key, train.get(name), f"train({name}=...)") for key, name in FROM_TRAIN.items()]
    out += [_fact(key, network.get(name), f"make_ppo_networks({name}=...)") for key, name in FROM_NETWORK.items()]
    if reference == "train-script" and env is not None:
        out.append(_fact("physics_backend", impl, "registry.load(config_overrides={'impl': ...})"))
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
    if found.unknown is not None:
        return Fact("physics_backend", None, found.provenance, unknown=f"physics_backend: {found.unknown}")
    return Fact("physics_backend", str(found.value), found.provenance,
                f"{env}'s default config (impl); Playground's learning/train_jax_ppo.py overrides it with --impl")
