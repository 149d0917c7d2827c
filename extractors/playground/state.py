"""A model of what MuJoCo Playground's training env hands the code of another project that steps
it (SLM-Lab's ``PlaygroundVecEnv`` calls ``jax.jit(wrap_for_brax_training(env).step)``), for the
data-flow engine (:mod:`brax_diff.extractors.engine.flow`).

``mjx_env.State`` (``mujoco_playground/_src/mjx_env.py``) is a flax dataclass with exactly the
fields ``data, obs, reward, done, metrics, info`` (the same at every Playground commit): an
attribute it lacks is no attribute, so ``getattr(state, name, default)`` gives the default. Its
``info`` and ``metrics`` are dicts the env fills; under ``wrap_for_brax_training`` Brax's
``EpisodeWrapper`` writes ``info["truncation"]`` (1 where a step hits the time limit, at every
Playground commit), the one key the model knows; another key's value is not known (never a
default). Arrays are objects of a model class: not None and not a dict, whatever their values.
"""

from __future__ import annotations

from ..engine import flow
from ..engine.flow import Class, Engine, V, const

STATE_FIELDS = ("data", "obs", "reward", "done", "metrics", "info")
INFO_KEYS = ("truncation",)  # the info keys the model knows (EpisodeWrapper's time limit)
STATE = Class("State", [], {}, None)
ARRAY = Class("Array", [], {}, None)
MAPPING = Class("dict", [flow.sym("ext", "dict")], {}, None)  # an env's info/metrics dict: its keys are the env's


def array(engine: Engine, name: str) -> V:
    """One array of the state (``state.done``): an object whose values are not known."""
    return engine.instance(V(ARRAY), {"name": const(name)})


def _known(receiver: V) -> dict:
    known = receiver.data.attrs.get("known")
    return known.data if known is not None and isinstance(known.data, dict) else {}


def _get(engine, receiver, args, kwargs, frame, node):
    key = args[0] if args else kwargs.get("key")
    known = _known(receiver)
    if key is not None and flow.is_const(key) and key.data in known:  # with the line that reads it
        return known[key.data].with_lines(engine._at(frame, node) if frame is not None and node is not None else ())
    return flow.sym("item", "", (receiver, key if key is not None else const(None)))  # the env's own key


def _opaque(name):
    return lambda engine, receiver, args, kwargs, frame, node: flow.sym("call", "", (flow.sym("attr", name,
                                                                                            (receiver,)), *args))


MAPPING.namespace.update({
    "get": V(flow.NativeMethod("get", _get)),
    "__getitem__": V(flow.NativeMethod("__getitem__", _get)),
    **{name: V(flow.NativeMethod(name, _opaque(name))) for name in ("items", "keys", "values", "__len__")},
})


def mapping(engine: Engine, known: dict[str, V] | None = None) -> V:
    return engine.instance(V(MAPPING), {"known": V(dict(known or {}))})


def state(engine: Engine, obs: V) -> tuple[V, dict[str, V]]:
    """A State the jitted step returns, with ``obs`` as given: (state, its fields)."""
    fields = {"data": flow.sym("ext", "State.data"), "obs": obs, "reward": array(engine, "reward"),
              "done": array(engine, "done"), "metrics": mapping(engine),
              "info": mapping(engine, {key: array(engine, f"info[{key!r}]") for key in INFO_KEYS})}
    return engine.instance(V(STATE), fields), fields


def truncation(fields: dict[str, V]) -> V:
    """The ``info["truncation"]`` array of a State :func:`state` made."""
    return _known(fields["info"])["truncation"]
