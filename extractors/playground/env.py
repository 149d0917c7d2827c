"""A Playground environment's own config: ``get_default_config(env_name)`` of its family's
registry, run by the data-flow engine (:mod:`brax_diff.extractors.engine.flow`).

Playground's ``brax_ppo_config`` defers the training setup to the environment
(``episode_length=env_config.episode_length``, ``action_repeat=env_config.action_repeat``), and
each environment's ``default_config()`` builds an ``ml_collections`` ``ConfigDict``. The engine
runs the registry's ``get_default_config`` for one name with a small model of ``ConfigDict``
(``config_dict.create(**fields)`` and ``ConfigDict(dict)``: an object whose attributes are its
fields; reading a field it lacks fails, as ``ConfigDict`` raises ``AttributeError``). A field the
engine cannot decide is an explained unknown, never a default.

:func:`observation_of` runs a family's ``load(env_name)`` (the env's constructor over that
config, ``MjxEnv.__init__`` applying ``config_overrides``) and then its ``reset``: the ``obs``
of the ``State`` it returns is a dict of groups or one array, as ``MjxEnv.observation_size``
tells them apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brax_diff.facts.model import Provenance

from ..engine import flow
from ..engine.flow import Class, Engine, Loader, Raised, V, const

ROOTS = ("mujoco_playground",)
REGISTRY_FUNCTION = "get_default_config"
FAMILY_REGISTRIES = {
    "dm_control": "mujoco_playground._src.dm_control_suite",
    "locomotion": "mujoco_playground._src.locomotion",
    "manipulation": "mujoco_playground._src.manipulation",
}
CONFIG_DICT = Class("ConfigDict", [], {}, None)


def _fields(value: V) -> dict | None:
    """The fields of a dict or a ConfigDict, else None."""
    if isinstance(value.data, dict):
        return {str(k): v for k, v in value.data.items()}
    if isinstance(value.data, flow.Instance) and value.data.cls is CONFIG_DICT:
        return dict(value.data.attrs)
    return None


def _config_dict(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
    """``config_dict.create(**fields)`` / ``ConfigDict({...}, **fields)``: an object of those fields
    (a ConfigDict copies a ConfigDict it is given)."""
    fields = (_fields(args[0]) or {}) if args else {}
    if args and _fields(args[0]) is None:
        return flow.unknown(f"ConfigDict of `{flow.describe(args[0])}`: its fields are not known")
    fields.update(kwargs)
    made = engine.instance(V(CONFIG_DICT), fields)
    _keep_open(engine, args[0] if args else None, made)
    if engine.on_create is not None:
        engine.on_create(made, kwargs)
    return made


def _copy(value: V, engine: Engine) -> V:
    """A deep copy of a ConfigDict (nested ConfigDicts copied too)."""
    fields = {name: (_copy(field, engine) if isinstance(field.data, flow.Instance) and field.data.cls is CONFIG_DICT
                     else field) for name, field in value.data.attrs.items()}
    made = engine.instance(V(CONFIG_DICT), fields)
    _keep_open(engine, value, made)
    return made


def _keep_open(engine: Engine, source: V | None, made: V) -> None:
    """A ConfigDict made from one that may hold fields not listed may hold them too."""
    if source is not None and isinstance(source.data, flow.Instance) and source.data in engine.opened:
        engine.open(made.data, engine.opened[source.data])


def _unknown_fields(engine: Engine, receiver: V, why: str, frame, node) -> None:
    """A write of fields not known: every field is unknown, and the config may hold others."""
    for name in list(receiver.data.attrs):
        engine._setattr(receiver, name, flow.unknown(why), frame, node)
    engine.open(receiver.data, why)


def _method(name: str, unfollowed=None):
    def decorate(fn):
        CONFIG_DICT.namespace[name] = V(flow.NativeMethod(name, fn, unfollowed))
        return fn
    return decorate


def _update_not_made(engine, receiver, why, frame, node):
    """``cfg.update(**fields)`` of fields not known: the engine does not make the call."""
    _unknown_fields(engine, receiver, f"ConfigDict.update: {why}", frame, node)


@_method("update", _update_not_made)
def _update(engine, receiver, args, kwargs, frame, node):
    """``cfg.update(other, k=v)``: each field set, as ``cfg.k = v`` would."""
    updates: dict = {}
    for arg in args:
        fields = _fields(arg)
        if fields is None:  # what it sets is not known: no field keeps its value
            _unknown_fields(engine, receiver, f"ConfigDict.update of `{flow.describe(arg)}` "
                                              f"({_where(engine, frame, node)})", frame, node)
            return const(None)
        _keep_open(engine, arg, receiver)
        updates.update(fields)
    updates.update(kwargs)
    for name, value in updates.items():
        engine._setattr(receiver, name, value.with_lines(_at(engine, frame, node)), frame, node)
    return const(None)


@_method("__setitem__")
def _setitem(engine, receiver, args, kwargs, frame, node):
    key, value = args[0], args[1]
    if not isinstance(key.data, str):
        _unknown_fields(engine, receiver, f"ConfigDict item `{flow.describe(key)}` set ({_where(engine, frame, node)})",
                        frame, node)
        return const(None)
    engine._setattr(receiver, key.data, value.with_lines(_at(engine, frame, node)), frame, node)
    return const(None)


@_method("__getitem__")
def _getitem(engine, receiver, args, kwargs, frame, node):
    key = args[0]
    if isinstance(key.data, str) and key.data in receiver.data.attrs:
        return receiver.data.attrs[key.data]
    return flow.unknown(f"ConfigDict item `{flow.describe(key)}` is not a known field")


@_method("get")
def _get(engine, receiver, args, kwargs, frame, node):
    key = args[0] if args else None
    if key is not None and isinstance(key.data, str):
        return receiver.data.attrs.get(key.data, args[1] if len(args) > 1 else const(None))
    return flow.unknown("ConfigDict.get of a key not known here")


for _name in ("copy", "copy_and_resolve_references", "__copy__", "__deepcopy__"):
    CONFIG_DICT.namespace[_name] = V(flow.NativeMethod(_name, lambda engine, receiver, args, kwargs, frame, node:
                                                       _copy(receiver, engine)))
for _name in ("lock", "unlock"):  # ConfigDict.lock() / unlock() return the config itself (fields unchanged)
    CONFIG_DICT.namespace[_name] = V(flow.NativeMethod(_name, lambda engine, receiver, args, kwargs, frame, node:
                                                       receiver))
for _name in ("unlocked", "ignore_type"):  # context managers: fields unchanged
    CONFIG_DICT.namespace[_name] = V(flow.NativeMethod(_name, lambda engine, receiver, args, kwargs, frame, node:
                                                       flow.sym("ext", "contextlib.nullcontext")))


def _flattened_not_made(engine, receiver, why, frame, node):
    _unknown_fields(engine, receiver, f"ConfigDict.update_from_flattened_dict: {why}", frame, node)


@_method("update_from_flattened_dict", _flattened_not_made)
def _update_flattened(engine, receiver, args, kwargs, frame, node):
    """``cfg.update_from_flattened_dict({"a.b": v})`` (how ``MjxEnv.__init__`` applies its
    ``config_overrides``): each dotted path set; ml_collections raises KeyError when a path's
    parent is missing or is not a ConfigDict."""
    updates = args[0] if args else kwargs.get("flattened_dict")
    if updates is None or not isinstance(updates.data, dict) or not all(isinstance(k, str) for k in updates.data):
        _unknown_fields(engine, receiver, f"ConfigDict.update_from_flattened_dict of `{flow.describe(updates)}` "
                                          f"({_where(engine, frame, node)})", frame, node)
        return const(None)
    for path, value in updates.data.items():
        target, parts = receiver, path.split(".")
        for part in parts[:-1]:
            child = target.data.attrs.get(part)
            if child is None or not isinstance(child.data, flow.Instance) or child.data.cls is not CONFIG_DICT:
                where = engine.where(frame.module, node) if frame is not None and node is not None else None
                raise Raised("KeyError", f"ConfigDict.update_from_flattened_dict: key {path!r} cannot be set, "
                                         f"{part!r} is not a ConfigDict field", where)
            target = child
        engine._setattr(target, parts[-1], value.with_lines(_at(engine, frame, node)), frame, node)
    return const(None)


def _at(engine: Engine, frame, node) -> frozenset:
    return engine._at(frame, node) if frame is not None and node is not None else frozenset()


def _where(engine: Engine, frame, node) -> str:
    if frame is None or node is None:
        return "?"
    return f"{frame.module.path}:{engine._line(frame, node)}"


def _copy_call(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
    """``copy.copy(cfg)`` / ``copy.deepcopy(cfg)`` of a ConfigDict or a dict."""
    if args and isinstance(args[0].data, flow.Instance) and args[0].data.cls is CONFIG_DICT:
        return _copy(args[0], engine)
    if args and isinstance(args[0].data, dict):
        return V(dict(args[0].data), args[0].lines)
    return flow.sym("call", "copy", tuple(args))


MODEL = {"ml_collections.config_dict.create": _config_dict,
         "ml_collections.config_dict.ConfigDict": _config_dict,
         "ml_collections.ConfigDict": _config_dict,
         "ml_collections.config_dict.config_dict.create": _config_dict,
         "ml_collections.config_dict.config_dict.ConfigDict": _config_dict,
         "copy.copy": _copy_call, "copy.deepcopy": _copy_call}


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


@dataclass(frozen=True)
class Observation:
    """What an environment's ``reset`` puts in ``State.obs``: a dict of named groups, or one array
    (MjxEnv.observation_size tells them apart the same way: a Mapping, or an array's last dim)."""

    kind: str | None  # "dict" | "array"; None: unknown
    keys: tuple[str, ...] = ()  # a dict's groups
    provenance: tuple[Provenance, ...] = ()
    unknown: str | None = None


# Calls of these modules make arrays (jp.concatenate, jp.hstack, np.array, ...).
ARRAY_MODULES = ("jax.numpy.", "numpy.", "jax.lax.")
ARRAY_ARITHMETIC = ("add", "sub", "mul", "div", "neg", "pow", "matmul")
AT_UPDATES = ("set", "add", "multiply", "divide", "power", "min", "max", "apply")


def _observation_kind(obs: V) -> tuple[str | None, tuple[str, ...], str | None]:
    """("dict", keys, None) / ("array", (), None) / (None, (), why)."""
    data = obs.data
    if isinstance(data, dict):
        if all(isinstance(k, str) for k in data):
            return "dict", tuple(sorted(data)), None
        return None, (), f"a dict with keys {sorted(map(str, data))}"
    if isinstance(data, flow.Phi):
        kinds = {_observation_kind(option) for option in data.options}
        if len(kinds) == 1:
            return kinds.pop()
        return None, (), f"it is one of {' or '.join(sorted(str(k[0] or k[2]) for k in kinds))}: {data.why}"
    if isinstance(data, flow.Sym) and data.op == "call" and data.args:
        name = flow.qualified_name(data.args[0]) or ""
        if name.startswith(ARRAY_MODULES) or _at_update(data.args[0]):
            return "array", (), None
    if isinstance(data, flow.Sym) and data.op in ARRAY_ARITHMETIC and any(
            _observation_kind(a)[0] == "array" for a in data.args if isinstance(a, V)):
        return "array", (), None
    return None, (), f"`{flow.describe(obs)}`, neither a dict nor an array the extractor recognizes"


def _at_update(callee: V) -> bool:
    """``x.at[i].set`` (``add``, ...): jax's indexed update, which only arrays have, returns an array."""
    data = callee.data
    if not (isinstance(data, flow.Sym) and data.op == "attr" and data.name in AT_UPDATES and data.args):
        return False
    item = data.args[0].data
    return (isinstance(item, flow.Sym) and item.op == "item" and bool(item.args)
            and isinstance(item.args[0].data, flow.Sym) and item.args[0].data.op == "attr"
            and item.args[0].data.name == "at")


def _reset_state(engine: Engine, made: V, where: str) -> tuple[V | None, str | None]:
    reset = engine.getattr(made, "reset")
    if not isinstance(reset.data, flow.Bound):
        return None, f"{where} builds `{flow.describe(made)}`, with no reset() of the files read"
    state = engine.call(reset, flow.sym("param", "rng"))
    if not isinstance(state.data, flow.Instance):
        return None, f"{where}: reset() returns `{flow.describe(state)}`: {flow.why_not_constant(state)}"
    return state, None


def observation_of(configs: "EnvConfigs", env: str, config_overrides: V | None = None) -> Observation:
    """The kind of observation ``registry.load(env, config_overrides=...)`` builds: its family's
    ``load`` run by the engine (the env's constructor over its default config), then ``reset``
    with a symbolic key; the ``obs`` of the ``State`` it returns."""
    family = next((f for f in FAMILY_REGISTRIES if isinstance(configs.config(f, env).data, flow.Instance)
                   and configs.config(f, env).data.cls is CONFIG_DICT), None)
    if family is None:
        return Observation(None, unknown=f"no Playground registry gives a config for {env!r}")
    engine, dotted = configs.engine, FAMILY_REGISTRIES[family]
    load = engine.lookup(engine.module(dotted), "load")
    where = f"load({env!r}) in {_path(dotted)}"
    if load is None or not isinstance(load.data, flow.Function):
        return Observation(None, unknown=f"load() not found in {_path(dotted)}")
    kwargs = {"config_overrides": config_overrides} if config_overrides is not None else {}
    start = len(engine.failures)
    made = engine.call(load, const(env), **kwargs)
    if not isinstance(made.data, flow.Instance):
        return Observation(None, unknown=f"{where} gives `{flow.describe(made)}`: {flow.why_not_constant(made)}")
    state, why = _reset_state(engine, made, where)
    # The engine runs on past a raise every path reaches (for readers of later lines): here it means no env.
    raised = [f.error for f in engine.failures[start:] if f.definite]
    if raised:
        at = (raised[0].where,) if raised[0].where is not None else ()
        return Observation(None, (), at, f"{where} or its reset() raises: {raised[0].message}")
    obs = state.data.attrs.get("obs") if state is not None else None
    if why is None and obs is None:
        why = f"{where}: reset() returns a {state.data.cls.name} with no obs field"
    if why is not None:
        return Observation(None, unknown=why)
    kind, keys, why = _observation_kind(obs)
    cls = made.data.cls
    # The lines that make the observation (a dict: each group's), else the env's class.
    made_at = obs.lines | {p for group in (obs.data.values() if isinstance(obs.data, dict) else ()) for p in group.lines}
    at = tuple(sorted(made_at)) or ((engine.where(cls.module, cls.node),) if cls.module and cls.node else ())
    if kind is None:
        return Observation(None, (), at, f"{where}: {cls.name}.reset() puts in State.obs {why}")
    return Observation(kind, keys, at)


def _path(dotted: str) -> str:
    return dotted.replace(".", "/") + "/__init__.py"
