"""The training setup on the SLM-Lab side, per environment: what the env builder makes of it.

A variant's env is built by ``make_env(spec)`` for ``playground/<env>``, run by the data-flow
engine (:class:`brax_diff.extractors.slm.run.SlmRun`); the setup is read where the code acts:

- ``episode_length`` / ``action_repeat``: the arguments ``wrap_for_brax_training`` receives
  (SLM-Lab: ``PlaygroundVecEnv.__init__``'s ``episode_length`` default, its ``_ACTION_REPEAT``
  table);
- ``physics_backend``: the ``impl`` of the ``config_overrides`` ``registry.load`` receives;
- ``policy_obs_keys`` / ``value_obs_keys``: what ``_get_obs`` makes of the env's observation,
  which Playground's code decides (:func:`brax_diff.extractors.playground.env.observation_of`:
  a dict of groups, or one array): the one group it keeps of a dict, or ``state`` when it hands an
  array on unchanged; both networks see that one observation.

Anything of another shape is an explained unknown naming the file.
"""

from __future__ import annotations

from typing import Any

from brax_diff.facts.model import Extraction, Fact, Finding, Provenance

from ..engine import flow
from ..engine.flow import CallRecord, V
from ..playground import state as playground_state
from ..playground.env import EnvConfigs, observation_of
from .run import SlmRun

SETUP_KEYS = ("episode_length", "action_repeat", "physics_backend", "policy_obs_keys", "value_obs_keys")
PLAYGROUND_ENV = "slm_lab/env/playground.py"
# Calls that hand an array on as it is, in another container (jax -> torch / numpy, a dtype, a device).
CONVERSIONS = frozenset({"from_dlpack", "to_dlpack", "asarray", "array", "astype", "to", "as_tensor", "from_numpy"})


class SetupFacts:
    """The setup facts of one (variant, env), added to ``out``."""

    def __init__(self, snapshot, run: SlmRun, env: str, out: Extraction, playground: EnvConfigs | None = None) -> None:
        """``playground``: Playground's code at the commit the env builder calls into (None: not given)."""
        self.snapshot, self.run, self.env, self.out = snapshot, run, env, out
        self.playground = playground

    def build(self) -> None:
        _, failures, calls = self.run.env()
        if failures:
            why = f"make_env(spec) for playground/{self.env} stops: {failures[0].message}"
            for key in SETUP_KEYS:
                self.unknown(key, why, (failures[0].where,))
            return
        self._wrapper(_named(calls, "wrap_for_brax_training"))
        loads = [c for c in calls if c.name == "load" and c.args and flow.is_const(c.args[0])
                 and flow.plain(c.args[0]) == self.env]  # registry.load(env_name, ...), not another load
        self._backend(loads[0] if loads else None)
        self._observations(_named(calls, "PlaygroundVecEnv"), loads[0] if loads else None)

    def unknown(self, key: str, why: str, provenance=()) -> None:
        message = f"{key}: {why}"
        where = tuple(p for p in provenance if p is not None)
        self.out.unknown(key, message, Finding("pattern_not_found", "WARNING", message, where, key), where)

    def _wrapper(self, call: CallRecord | None) -> None:
        for key in ("episode_length", "action_repeat"):
            if call is None:
                self.unknown(key, f"the playground/{self.env} env is built without wrap_for_brax_training "
                                  f"(searched from make_env to {PLAYGROUND_ENV})")
                continue
            value = call.kwargs.get(key)
            at = self.run.where(call)
            if value is None or not flow.is_const(value):
                why = "not passed by keyword" if value is None else flow.why_not_constant(value)
                self.unknown(key, f"wrap_for_brax_training({key}=...) at {call.path}:{call.line}: {why}", (at,))
                continue
            self.out.add(Fact(key, flow.plain(value), (at, *flow.all_lines(value)),
                              f"wrap_for_brax_training({key}=...) for playground/{self.env}"))

    def _backend(self, call: CallRecord | None) -> None:
        if call is None:
            self.unknown("physics_backend", f"no registry.load call builds playground/{self.env}")
            return
        overrides = call.kwargs.get("config_overrides")
        options = overrides.data.options if overrides is not None and isinstance(overrides.data, flow.Phi) \
            else [overrides] if overrides is not None else []
        forced = {_plain_or_none(o.data.get("impl")) for o in options if isinstance(o.data, dict) and "impl" in o.data}
        at = (self.run.where(call), *(flow.all_lines(overrides) if overrides is not None else ()))
        unforced = any(isinstance(o.data, dict) and "impl" not in o.data for o in options)
        if len(forced) == 1 and None not in forced and not unforced:
            impl = forced.pop()
            self.out.add(Fact("physics_backend", impl, at, f"registry.load(config_overrides={{'impl': {impl!r}}})"))
            return
        if forced and unforced:
            self.unknown("physics_backend", f"registry.load at {call.path}:{call.line} forces impl "
                                            f"{sorted(map(str, forced))} only when the env's config has an impl "
                                            "field, and Playground's config is not read here", at)
            return
        if not forced and all(isinstance(o.data, dict) for o in options):
            self.unknown("physics_backend", f"registry.load at {call.path}:{call.line} forces no impl: the env's own "
                                            "config decides (Brax's column)", at)
            return
        self.unknown("physics_backend", f"registry.load(config_overrides=...) at {call.path}:{call.line}: "
                                        f"{flow.describe(overrides) if overrides is not None else 'no overrides'}", at)

    def _observations(self, call: CallRecord | None, load: CallRecord | None) -> None:
        keys = ("policy_obs_keys", "value_obs_keys")
        get_obs = self.run.engine.getattr(call.result, "_get_obs") if call is not None else None
        if get_obs is None or not isinstance(get_obs.data, flow.Bound):
            for key in keys:
                self.unknown(key, f"PlaygroundVecEnv._get_obs not found ({PLAYGROUND_ENV})")
            return
        function = get_obs.data.function
        at: tuple[Provenance, ...] = (self.run.engine.where(function.module, function.node),)
        if self.playground is None:
            for key in keys:
                self.unknown(key, f"what PlaygroundVecEnv._get_obs keeps depends on whether playground/{self.env}'s "
                                  "observation is a dict or an array, which Playground's code decides (its env's "
                                  "reset), and no Playground repository is given", at)
            return
        if load is None or "config" in load.kwargs or len(load.args) > 1:
            why = (f"no registry.load call builds playground/{self.env}" if load is None else
                   f"registry.load at {load.path}:{load.line} is given a config of its own, which is not read")
            for key in keys:
                self.unknown(key, f"what PlaygroundVecEnv._get_obs keeps depends on the env's observation: {why}", at)
            return
        observation = observation_of(self.playground, self.env, self._overrides(load))
        if observation.kind is None:
            for key in keys:
                self.unknown(key, f"what PlaygroundVecEnv._get_obs keeps depends on whether playground/{self.env}'s "
                                  f"observation is a dict or an array: {observation.unknown}",
                             at + observation.provenance)
            return
        engine = self.run.engine
        if observation.kind == "dict":
            groups = {name: flow.sym("ext", f"observation.{name}") for name in observation.keys}
            obs = V(dict(groups))
        else:
            groups = {}
            obs = playground_state.array(engine, "observation")
        state, _ = playground_state.state(engine, obs)
        seen = engine.call(get_obs, state)
        at = at + observation.provenance
        shown = f"{flow.describe(seen)} for playground/{self.env}'s {observation.kind} observation"
        if observation.kind == "array":
            if not _hands_on(seen, obs):
                for key in keys:
                    self.unknown(key, f"PlaygroundVecEnv._get_obs gives {shown}", at)
                return
            for key in keys:  # an observation that is not a dict is the vocabulary's `state`
                self.out.add(Fact(key, "state", at, f"PlaygroundVecEnv._get_obs hands playground/{self.env}'s array "
                                                    "observation on unchanged; both networks take it"))
            return
        used = [name for name, group in groups.items() if flow.mentions(seen, lambda v, g=group: v is g)]
        for key in keys:
            if len(used) != 1:
                self.unknown(key, f"PlaygroundVecEnv._get_obs gives {shown} (groups {', '.join(observation.keys)})",
                             at)
                continue
            self.out.add(Fact(key, used[0], at, f"PlaygroundVecEnv._get_obs keeps obs[{used[0]!r}] of "
                                                f"playground/{self.env}'s dict observation; both networks take it"))

    @staticmethod
    def _overrides(load: CallRecord | None) -> V | None:
        """The ``config_overrides`` SLM-Lab's ``registry.load`` passes, for Playground's engine: made
        of constants (some a choice of constants), as it is; anything else a value not known there."""
        value = load.kwargs.get("config_overrides") if load is not None else None
        if value is None:
            return None
        return value if _portable(value) else flow.sym("param", "config_overrides")


def _portable(value: V) -> bool:
    """Made of constants, containers and choices of them only: the same in another engine."""
    data = value.data
    if isinstance(data, flow.Phi):
        return all(_portable(o) for o in data.options)
    if isinstance(data, dict):
        return all(isinstance(k, str) and _portable(v) for k, v in data.items())
    if isinstance(data, (tuple, list)):
        return all(_portable(v) for v in data)
    return flow.is_const(value)


def _hands_on(seen: V, obs: V) -> bool:
    """Every option of ``seen`` is ``obs`` itself through conversions (dlpack, numpy, dtype, device)."""
    options = seen.data.options if isinstance(seen.data, flow.Phi) else (seen,)
    for option in options:
        while flow.call_name(option) in CONVERSIONS and flow.call_operand(option) is not None:
            option = flow.call_operand(option)
        if option.data is not obs.data:
            return False
    return True


def _named(calls: list[CallRecord], name: str) -> CallRecord | None:
    found = [c for c in calls if c.name == name]
    return found[0] if found else None


def _plain_or_none(value: Any) -> Any:
    return flow.plain(value) if isinstance(value, V) and flow.is_const(value) else None
