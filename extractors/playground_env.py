"""A Playground environment's own config: ``get_default_config(env_name)`` of its family's
registry, run by the data-flow engine (:mod:`brax_diff.extractors.flow`).

Playground's ``brax_ppo_config`` defers the training setup to the environment
(``episode_length=env_config.episode_length``, ``action_repeat=env_config.action_repeat``), and
each environment's ``default_config()`` builds an ``ml_collections`` ``ConfigDict``. The engine
runs the registry's ``get_default_config`` for one name with a small model of ``ConfigDict``
(``config_dict.create(**fields)`` and ``ConfigDict(dict)``: an object whose attributes are its
fields; reading a field it lacks fails, as ``ConfigDict`` raises ``AttributeError``). A field the
engine cannot decide is an explained unknown, never a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brax_diff.facts import Provenance

from . import flow
from .flow import Class, Engine, Loader, V, const

ROOTS = ("mujoco_playground",)
REGISTRY_FUNCTION = "get_default_config"
FAMILY_REGISTRIES = {
    "dm_control": "mujoco_playground._src.dm_control_suite",
    "locomotion": "mujoco_playground._src.locomotion",
    "manipulation": "mujoco_playground._src.manipulation",
}
CONFIG_DICT = Class("ConfigDict", [], {}, None)


def _config_dict(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
    """``config_dict.create(**fields)`` / ``ConfigDict({...}, **fields)``: an object of those fields."""
    fields = dict(args[0].data) if args and isinstance(args[0].data, dict) else {}
    fields.update(kwargs)
    return engine.instance(V(CONFIG_DICT), {str(k): v for k, v in fields.items()})


MODEL = {"ml_collections.config_dict.create": _config_dict,
         "ml_collections.config_dict.ConfigDict": _config_dict,
         "ml_collections.ConfigDict": _config_dict}


@dataclass(frozen=True)
class EnvField:
    """One field of an environment's config: its value with the lines that set it, or why not."""

    value: Any
    provenance: tuple[Provenance, ...]
    unknown: str | None = None


class EnvConfigs:
    """The environments' configs of one Playground commit (each run once)."""

    def __init__(self, snapshot) -> None:
        self.snapshot = snapshot
        self.engine = Engine(Loader(snapshot, ROOTS), assume=MODEL)
        self._configs: dict[tuple[str, str], V] = {}

    def config(self, family: str, env: str) -> V:
        key = (family, env)
        if key not in self._configs:
            self._configs[key] = self._run(family, env)
        return self._configs[key]

    def _run(self, family: str, env: str) -> V:
        dotted = FAMILY_REGISTRIES[family]
        module = self.engine.module(dotted)
        function = self.engine.lookup(module, REGISTRY_FUNCTION) if module is not None else None
        if function is None or not isinstance(function.data, flow.Function):
            return flow.unknown(f"{REGISTRY_FUNCTION}() not found in {_path(dotted)}")
        return self.engine.call(function, const(env))

    def any_family(self, env: str) -> V:
        """``mujoco_playground.registry.get_default_config(env)``: the first family registry
        that knows ``env`` (the others raise), else an Unknown."""
        for family in FAMILY_REGISTRIES:
            config = self.config(family, env)
            if isinstance(config.data, flow.Instance) and config.data.cls is CONFIG_DICT:
                return config
        return flow.unknown(f"no Playground registry gives a config for {env!r}")

    def registry_model(self) -> dict:
        """Playground's ``registry.get_default_config`` answered from this commit's files, for
        an engine run of code that calls it (SLM-Lab's env builder)."""
        def get_default_config(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
            name = args[0] if args else kwargs.get("env_name")
            if name is None or not flow.is_const(name) or not isinstance(name.data, str):
                return flow.unknown("registry.get_default_config of an env name not known here")
            return self.any_family(name.data)
        return {"mujoco_playground.registry.get_default_config": get_default_config}

    def field(self, family: str, env: str, name: str) -> EnvField:
        """``get_default_config(env).<name>``: its value and lines, or why it is unknown."""
        where = f"{REGISTRY_FUNCTION}({env!r}) in {_path(FAMILY_REGISTRIES[family])}"
        config = self.config(family, env)
        if not isinstance(config.data, flow.Instance) or config.data.cls is not CONFIG_DICT:
            return EnvField(None, (), f"{where} does not give a config the extractor follows: "
                                      f"{flow.why_not_constant(config) if not flow.is_const(config) else config.data}")
        value = config.data.attrs.get(name)
        if value is None:
            return EnvField(None, (), f"{where}: the config has no field {name!r}")
        lines = tuple(sorted(flow.all_lines(value)))
        if not flow.is_const(value):
            return EnvField(None, lines, f"{where}.{name} is not a constant: {flow.why_not_constant(value)}")
        return EnvField(flow.plain(value), lines)


def _path(dotted: str) -> str:
    return dotted.replace(".", "/") + "/__init__.py"
