"""Playground's training script, ``learning/train_jax_ppo.py``, as a Brax reference: what its
``main`` hands Brax's ``train()`` for one environment with every absl flag at its default.

The data-flow engine (:mod:`brax_diff.extractors.engine.flow`) runs ``main`` over the Playground
repository with the models of absl's flags (:mod:`brax_diff.extractors.brax.learner`: a flag's
``value`` is its default, it is not ``present``) and of ``ConfigDict``
(:mod:`brax_diff.extractors.playground.env`), ``--env_name`` set to the environment. The script
takes ``get_rl_config(env_name)`` (the family's ``brax_ppo_config(env_name, impl)``), changes a
key only where its flag is present, and builds the environment with ``config_overrides={"impl":
--impl}``: the config it ends with (``ppo_params``) and those overrides are what it trains with.
"""

from __future__ import annotations

from brax_diff.facts.model import Provenance

from ..engine import flow
from ..brax.learner import MODEL as FLAGS
from ..brax.scope import Code, Scope, Setting
from ..engine.flow import Engine, Loader, V, const
from .env import CONFIG_DICT, MODEL as CONFIG_DICTS

SCRIPT = "learning/train_jax_ppo.py"
SCRIPT_MODULE = "learning.train_jax_ppo"
ROOTS = ("learning", "mujoco_playground")
ORIGIN = "train_jax_ppo.py with its flag defaults"
NETWORK_FACTORY = "network_factory"


class ScriptScopes:
    """Per environment: the train() and make_ppo_networks() scopes the script ends with, the
    physics backend it asks for, or why they cannot be read."""

    def __init__(self, snapshot) -> None:
        self.snapshot = snapshot
        self._done: dict[str, tuple[Scope, Scope, Setting | None, str | None]] = {}

    def scopes(self, env: str) -> tuple[Scope, Scope, Setting | None, str | None]:
        if env not in self._done:
            self._done[env] = self._run(env)
        return self._done[env]

    def _run(self, env: str) -> tuple[Scope, Scope, Setting | None, str | None]:
        if not self.snapshot.exists(SCRIPT):
            return {}, {}, None, f"{SCRIPT} not found"
        engine = Engine(Loader(self.snapshot, ROOTS), assume={**FLAGS, **CONFIG_DICTS})
        module = engine.module(SCRIPT_MODULE)
        env_flag = engine.lookup(module, "_ENV_NAME") if module is not None else None
        main = engine.lookup(module, "main") if module is not None else None
        if env_flag is None or not isinstance(env_flag.data, flow.Instance) or main is None:
            return {}, {}, None, f"{SCRIPT}: no _ENV_NAME flag or main() the engine follows"
        env_flag.data.attrs["value"] = const(env)  # --env_name ENV
        _, frame = engine.run(main, const([]))
        config = frame.locals.get("ppo_params") if frame is not None else None
        if config is None or not isinstance(config.data, flow.Instance) or config.data.cls is not CONFIG_DICT:
            why = flow.describe(config) if config is not None else "main() binds no ppo_params"
            return {}, {}, None, f"{SCRIPT}: the config main() trains with is not one the engine follows ({why})"
        attrs = dict(config.data.attrs)
        network = attrs.pop(NETWORK_FACTORY, None)
        train = {name: _setting(value) for name, value in attrs.items()}
        network_scope = ({name: _setting(value) for name, value in network.data.attrs.items()}
                         if network is not None and isinstance(network.data, flow.Instance) else {})
        overrides = frame.locals.get("env_cfg_overrides")
        impl = None
        if overrides is not None and isinstance(overrides.data, dict) and "impl" in overrides.data:
            impl = _setting(overrides.data["impl"])
        return train, network_scope, impl, None


def _setting(value: V) -> Setting:
    lines: tuple[Provenance, ...] = tuple(sorted(flow.all_lines(value)))
    if flow.is_const(value):
        return Setting(flow.plain(value), lines, ORIGIN)
    return Setting(Code(flow.describe(value)), lines, ORIGIN)
