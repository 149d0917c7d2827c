"""One SLM-Lab variant built and trained once by the data-flow engine, from its resolved spec.

:class:`SlmRun` does what an SLM-Lab session does with a spec, abstractly
(:mod:`brax_diff.extractors.engine.flow`): the spec (every value carrying its YAML line) is extended the way
``spec_util.extend_meta_spec`` extends it, the environment is built by ``make_env(spec)``,
the algorithm class the spec names is constructed with an agent whose env has the spec's
``num_envs`` (so ``init_algorithm_params`` and ``init_nets`` run: the batch guard,
``set_attr`` of spec keys, the asserts on the spec, the actor/critic spec split), and its
``train()`` runs once with symbolic data. Readers then look at what that left: the
algorithm's attributes, the nets it built and the specs they got, the losses handed to
``train_step``, the ``torch.clamp`` on the ratio, the env wrapper chain.

A raise every run reaches (an ``assert`` on a spec key the spec lacks, a ``KeyError``, a
class or scheduler the code lacks, an import that fails) is a failure with its line: the
variant cannot train at this ref.

Two assumptions are the tool's, and the docs say so: the run is on a CUDA machine
(``torch.cuda.is_available()`` is true), as SLM-Lab's Playground benchmarks run; and it is
launched without ``--profile`` (``PROFILE=false``, what SLM-Lab's CLI sets by default), so
the ``@lab_api`` / ``@profile`` decorators call each function once rather than on both sides
of an undecided ``if get_profiler():``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brax_diff.facts.model import Provenance

from ..engine import flow, semantics
from ..engine.flow import CallRecord, Engine, Instance, Loader, Raised, V, const, sym
from ..playground import state as playground_state
from .spec import ResolvedSpec

ROOTS = ("slm_lab",)
ASSUME = {"torch.cuda.is_available": True}  # the GPU path: SLM-Lab's Playground runs use CUDA
ENVIRON = {"PROFILE": "false"}  # `slm-lab run` without --profile: env_var.set_from_cli's default
WATCH = frozenset({"train_step", "clamp", "venv_pack", "calc_val_loss", "calc_policy_loss", "split_minibatch",
                   "calc_gaes", "clip_grad_norm_",
                   "PlaygroundVecEnv", "make", "make_vec", "wrap_for_brax_training", "load"})
ENV_MODULE = "slm_lab.env"
ALGORITHM_PACKAGE = "slm_lab.agent.algorithm"
SPEC_MODULE = "slm_lab.spec.spec_util"

# gymnasium wrappers (outside the files read) and what they do to rewards.
REWARD_NEUTRAL = {"RecordEpisodeStatistics", "RescaleAction", "NormalizeObservation", "ClipAction",
                  "FrameStackObservation", "AtariPreprocessing", "TimeLimit", "OrderEnforcing",
                  "PassiveEnvChecker", "FlattenObservation", "TransformObservation", "ClipObservation",
                  "RecordVideo", "VectorListInfo", "DtypeObservation"}
REWARD_TRANSFORMS = {"TransformReward"}  # TransformReward(env, func): rewards become func(rewards)
REWARD_NONLINEAR = {"NormalizeReward", "ClipReward"}


@dataclass(frozen=True)
class ObsStatistics:
    """When the wrapper that keeps running observation statistics updates them, and where."""

    update: str | None  # "per_env_step" | None (no wrapper of the files read keeps statistics)
    lines: tuple[Provenance, ...]
    wrapper: str = ""
    why: str | None = None


@dataclass(frozen=True)
class Terminations:
    """What the env chain's ``step`` hands the agent as ``terminated`` from Playground's state."""

    kind: str | None  # "done": the state's done flag (a time limit too) | "done_not_truncated" | None
    lines: tuple[Provenance, ...]
    why: str | None = None
    note: str = ""
    # Attributes step asked of Playground's State with getattr(state, name, default) that the
    # State lacks (the default is always taken), with where: (name, line).
    absent: tuple[tuple[str, Provenance], ...] = ()


@dataclass(frozen=True)
class RewardScale:
    """The constant the env multiplies rewards by, where, and why when it is unknown."""

    factor: float | None
    lines: tuple[Provenance, ...]
    site: str  # "env" | "none"
    why: str | None = None
    note: str = ""


class SlmRun:
    """One variant, run once. Each part runs on first use."""

    def __init__(self, snapshot, spec: ResolvedSpec, env_name: str | None = None,
                 libraries: dict | None = None) -> None:
        """``libraries``: external calls answered by a model (qualified name -> callable, as
        :class:`~brax_diff.extractors.engine.flow.Engine`'s ``assume``), e.g. Playground's registry."""
        self.snapshot = snapshot
        self.spec = spec
        self.engine = Engine(Loader(snapshot, ROOTS), assume={**ASSUME, **(libraries or {})}, environ=ENVIRON,
                             watch=WATCH)
        where = lambda line: snapshot.where(spec.path, line)  # noqa: E731
        data = dict(spec.data)
        data.setdefault("name", spec.name)
        if env_name is not None and isinstance(data.get("env"), dict):
            data["env"] = {**data["env"], "name": env_name}  # ${env} unset: the env it is run for
        self.spec_value = self._extend(flow.spec_value(data, spec.lines, where))
        self._env: tuple[V, list[Raised], list[CallRecord]] | None = None
        self._algorithm: tuple[V | None, list[Raised], str | None] | None = None
        self._constructed_attrs: dict[str, V] = {}
        self._train: tuple[list[CallRecord], list[Raised]] | None = None

    def _extend(self, spec: V) -> V:
        """The spec as ``spec_util.get`` hands it on: ``extend_meta_spec`` adds meta keys."""
        module = self.engine.module(SPEC_MODULE)
        extend = self.engine.lookup(module, "extend_meta_spec") if module is not None else None
        if extend is None or not isinstance(extend.data, flow.Function):
            return spec
        extended = self.engine.call(extend, spec)
        return extended if isinstance(extended.data, dict) else spec

    def _failures_since(self, start: int) -> list[Raised]:
        seen, out = set(), []
        for failure in self.engine.failures[start:]:
            if failure.definite and failure.error.where not in seen:
                seen.add(failure.error.where)
                out.append(failure.error)
        return out

    # -- the environment ------------------------------------------------------------------------
    def env(self) -> tuple[V, list[Raised], list[CallRecord]]:
        """``make_env(spec)``: the env it returns, the failures on the way, the calls made."""
        if self._env is None:
            module = self.engine.module(ENV_MODULE)
            make_env = self.engine.lookup(module, "make_env") if module is not None else None
            if make_env is None:
                self._env = (flow.unknown(f"make_env not found in {ENV_MODULE}"), [], [])
            else:
                start, calls = len(self.engine.failures), len(self.engine.calls)
                env = self.engine.call(make_env, self.spec_value)
                self._env = (env, self._failures_since(start), list(self.engine.calls[calls:]))
        return self._env

    # -- the algorithm ---------------------------------------------------------------------------
    def num_envs(self) -> V:
        env = self.spec_value.data.get("env")
        value = env.data.get("num_envs") if env is not None and isinstance(env.data, dict) else None
        return value if value is not None else const(1)

    def algorithm(self) -> tuple[V | None, list[Raised], str | None]:
        """The algorithm class the spec names, constructed: (instance, failures, why None)."""
        if self._algorithm is None:
            self._algorithm = self._construct()
        return self._algorithm

    def _construct(self) -> tuple[V | None, list[Raised], str | None]:
        agent_spec = self.spec_value.data.get("agent")
        if agent_spec is None or not isinstance(agent_spec.data, dict):
            return None, [], "the spec has no agent mapping"
        name = agent_spec.data.get("algorithm")
        name = name.data.get("name") if name is not None and isinstance(name.data, dict) else None
        if name is None or not isinstance(name.data, str):
            return None, [], "agent.algorithm.name is not a string"
        package = self.engine.module(ALGORITHM_PACKAGE)
        cls = self.engine.lookup(package, name.data) if package is not None else None
        if cls is None or not isinstance(cls.data, flow.Class):
            return None, [], f"no algorithm class {name.data!r} in {ALGORITHM_PACKAGE}"
        num_envs = self.num_envs()
        vector = flow.is_const(num_envs) and isinstance(num_envs.data, int) and num_envs.data > 1
        env = self.engine.stub("env", num_envs=num_envs, is_venv=const(vector or self.is_playground()),
                               is_discrete=const(False), max_frame=self._env_key("max_frame"))
        agent = self.engine.stub("agent", spec=self.spec_value, agent_spec=agent_spec, env=env,
                                 name=const("agent"))
        start = len(self.engine.failures)
        instance = self.engine.call(cls, agent, const(None))
        if not isinstance(instance.data, Instance):
            return None, self._failures_since(start), f"constructing {name.data} gave {flow.describe(instance)}"
        self._constructed_attrs = dict(instance.data.attrs)
        return instance, self._failures_since(start), None

    def _env_key(self, key: str) -> V:
        env = self.spec_value.data.get("env")
        if env is not None and isinstance(env.data, dict) and key in env.data:
            return env.data[key]
        return sym("param", f"env.{key}")

    def is_playground(self) -> bool:
        name = self.spec.get("env.name")
        return isinstance(name, str) and (name.startswith("playground/") or
                                          ("${" in name and "playground" in self.spec.path))

    def attr(self, name: str) -> V | None:
        """An attribute of the constructed algorithm (None when it was not constructed or never set)."""
        instance, _, _ = self.algorithm()
        if instance is None:
            return None
        return instance.data.attrs.get(name)

    def constructed_attr(self, name: str) -> V | None:
        """An attribute as construction left it, before ``train()`` ran (what the first update uses)."""
        self.algorithm()
        return self._constructed_attrs.get(name)

    def net_spec_of(self, attr: str) -> V | None:
        """The net spec the algorithm's ``net`` / ``critic_net`` was constructed with."""
        net = self.attr(attr)
        if net is None or not isinstance(net.data, Instance) or not net.data.args:
            return None
        args, _ = net.data.args
        return args[0] if args else None

    # -- one training step ------------------------------------------------------------------------
    def train(self) -> tuple[list[CallRecord], list[Raised]]:
        """``train()`` with ``to_train = 1`` and symbolic memory: the calls it made."""
        if self._train is None:
            instance, _, _ = self.algorithm()
            if instance is None:
                self._train = ([], [])
                return self._train
            instance.data.attrs["to_train"] = const(1)
            start, calls = len(self.engine.failures), len(self.engine.calls)
            self.engine.call(self.engine.getattr(instance, "train"))
            self._train = (list(self.engine.calls[calls:]), self._failures_since(start))
        return self._train

    def where(self, record: CallRecord) -> Provenance:
        return self.snapshot.where(record.path, record.line)

    @staticmethod
    def argument(record: CallRecord, name: str) -> V | None:
        """The argument a call passed for parameter ``name`` (by keyword, else by position)."""
        if name in record.kwargs:
            return record.kwargs[name]
        callee = record.callee.data
        function = callee.function if isinstance(callee, flow.Bound) else callee
        if not isinstance(function, flow.Function):
            return None
        params = function.node.params
        names = [p.name.value for p in (*params.posonly_params, *params.params)]
        if isinstance(callee, flow.Bound):
            names = names[1:]
        index = names.index(name) if name in names else len(record.args)
        return record.args[index] if index < len(record.args) else None

    # -- reading the env's reward multiplier ------------------------------------------------------
    def reward_scale(self, env: V) -> RewardScale:
        """The constant rewards are multiplied by between the simulator and the agent, read
        layer by layer down the wrapper chain ``make_env`` returned."""
        factors: list[tuple[float, frozenset, str]] = []
        current = env
        for _ in range(40):
            data = current.data
            if isinstance(data, flow.Phi):  # the rest of the chain depends on a condition
                rest = self._either(data)
                if rest.why is not None:
                    return rest
                factors.append((rest.factor, frozenset(rest.lines), rest.note if rest.site == "env" else ""))
                break
            if isinstance(data, Instance):
                inner = _inner_env(data)
                if inner is not None:
                    factor = self._wrapper_factor(current)
                    if factor.why:
                        return factor
                    if factor.factor != 1.0:
                        factors.append((factor.factor, frozenset(factor.lines), data.cls.name))
                    current = inner
                    continue
                base = self._base_factor(current)
                if base.why:
                    return base
                if base.factor != 1.0:
                    factors.append((base.factor, frozenset(base.lines), data.cls.name))
                break
            if isinstance(data, flow.Sym) and data.op == "call" and len(data.args) >= 2:
                name = flow.short_name(data.args[0]) or ""
                if name in REWARD_TRANSFORMS:
                    func = data.args[2] if len(data.args) > 2 else dict(data.kwargs).get("func")
                    if func is None:
                        return RewardScale(None, (), "env", f"{name} without a function")
                    out = self.engine.call(func, sym("param", "reward"))
                    parts = flow.linear(out)
                    if parts.coefficient is None or len(parts.atoms) != 1:
                        return RewardScale(None, tuple(sorted(parts.lines)), "env",
                                           f"{name} applies `{flow.describe(out)}`, not a constant multiplier")
                    factors.append((parts.coefficient, frozenset(parts.lines), name))
                    current = data.args[1]
                    continue
                if name in REWARD_NONLINEAR:
                    return RewardScale(None, (), "env", f"{name} wraps the env: rewards are not scaled by a constant")
                if name in REWARD_NEUTRAL or name.startswith("Vector") and name[6:] in REWARD_NEUTRAL:
                    current = data.args[1]
                    continue
                if name in ("make", "make_vec"):
                    break  # a gymnasium env: rewards as the env gives them
                return RewardScale(None, (), "env", f"the env is wrapped by `{name}`, which the extractor does not know")
            return RewardScale(None, (), "env", f"make_env returns `{flow.describe(current)}`: "
                                                f"{flow.why_not_constant(current)}")
        total, lines, sites = 1.0, frozenset(), []
        for factor, where, site in factors:
            total *= factor
            lines |= where
            if site:
                sites.append(site.removeprefix("multiplied in "))
        sites = [s for s in sites if s]
        note = f"multiplied in {', '.join(sites)}" if sites else "no layer of the env scales rewards"
        return RewardScale(float(f"{total:.12g}"), tuple(sorted(lines)), "env" if sites else "none", None, note)

    # -- reading the env's observation statistics ----------------------------------------------------
    def observation_statistics(self, env: V) -> ObsStatistics:
        """The layer of the wrapper chain ``make_env`` returned whose ``step`` writes running
        statistics of the observations it is handed (run by the engine over an inner env whose
        observations are a symbol): it updates them at every env step."""
        current = env
        for _ in range(40):
            data = current.data
            if isinstance(data, flow.Phi):
                found = [self.observation_statistics(option) for option in data.options]
                if any(f.why for f in found) or len({f.update for f in found}) != 1:
                    why = next((f.why for f in found if f.why), None) or \
                        f"{data.why}: the observation statistics are kept by different layers"
                    return ObsStatistics(None, (), "", why)
                lines = tuple(sorted({p for f in found for p in f.lines}))
                return ObsStatistics(found[0].update, lines, found[0].wrapper)
            if isinstance(data, Instance):
                inner = _inner_env(data)
                if inner is None:
                    return ObsStatistics(None, (), data.cls.name)  # the simulator's env: no statistics
                written = self._statistics_written(current)
                if written:
                    return ObsStatistics("per_env_step", written, data.cls.name)
                current = inner
                continue
            if isinstance(data, flow.Sym) and data.op == "call" and len(data.args) >= 2:
                name = flow.short_name(data.args[0]) or ""
                if "Normalize" in name and "Observation" in name:
                    return ObsStatistics(None, (), name, f"observations are normalized by {name}, outside the files "
                                                         "read")
                if name in REWARD_NEUTRAL | REWARD_TRANSFORMS | REWARD_NONLINEAR or \
                        name.startswith("Vector") and name[6:] in REWARD_NEUTRAL | REWARD_TRANSFORMS | REWARD_NONLINEAR:
                    current = data.args[1]
                    continue
                if name in ("make", "make_vec"):
                    return ObsStatistics(None, (), name)
                return ObsStatistics(None, (), name, f"the env is wrapped by `{name}`, which the extractor does not "
                                                     "know")
            return ObsStatistics(None, (), "", f"make_env returns `{flow.describe(current)}`: "
                                               f"{flow.why_not_constant(current)}")
        return ObsStatistics(None, (), "", "the env wrapper chain is deeper than 40 layers")

    def _statistics_written(self, wrapper: V) -> tuple[Provenance, ...]:
        """The lines of the attributes a wrapper's ``step`` writes from the observations the inner
        env returns and then normalizes with (empty when it keeps no such statistics)."""
        instance: Instance = wrapper.data
        if instance.cls.lookup("step") is None:
            return ()
        observations = sym("param", "inner_observations")
        inner = self.engine.stub("inner_env", step=V(flow.Native(
            "step", lambda a, k, f, n: V((observations, sym("param", "rewards"), sym("param", "terminated"),
                                          sym("param", "truncated"), sym("param", "info"))))))
        saved = dict(instance.attrs)
        instance.attrs["env"] = inner
        try:
            out = self.engine.call(self.engine.getattr(wrapper, "step"), sym("param", "actions"))
            written = [value for name, value in instance.attrs.items()
                       if name != "env" and saved.get(name) is not value and flow.mentions(value, lambda v:
                                                                                          v is observations)]
        finally:
            instance.attrs.clear()
            instance.attrs.update(saved)
        returned = out.data[0] if isinstance(out.data, (tuple, list)) and out.data else None
        if not written or returned is None or not any(flow.mentions(returned, lambda v, w=w: v is w)
                                                      for w in written):
            return ()
        return tuple(sorted({p for value in written for p in value.lines}))

    # -- reading what the env calls a termination -------------------------------------------------
    def terminations(self, env: V) -> Terminations:
        """``terminated`` as the wrapper chain ``make_env`` returned passes it on: each wrapper's
        ``step`` run over an inner env whose ``terminated`` is a symbol must return it unchanged;
        the innermost env's ``step`` is run over Playground's state (:mod:`..playground.state`)."""
        current = env
        for _ in range(40):
            data = current.data
            if isinstance(data, flow.Phi):
                found = [self.terminations(option) for option in data.options]
                kinds = {(f.kind, f.note) for f in found}
                if any(f.why for f in found) or len(kinds) != 1:
                    why = next((f.why for f in found if f.why), None) or \
                        f"{data.why}: the env layers hand on different terminations"
                    return Terminations(None, (), why)
                return Terminations(found[0].kind, tuple(sorted({p for f in found for p in f.lines})), None,
                                    found[0].note, tuple(dict.fromkeys(a for f in found for a in f.absent)))
            if isinstance(data, Instance):
                inner = _inner_env(data)
                if inner is None:
                    return self._base_terminations(current)
                why = self._changes_terminated(current)
                if why:
                    return Terminations(None, (), why)
                current = inner
                continue
            if isinstance(data, flow.Sym) and data.op == "call" and len(data.args) >= 2:
                name = flow.short_name(data.args[0]) or ""
                known = REWARD_NEUTRAL | REWARD_TRANSFORMS | REWARD_NONLINEAR
                if name in known or name.startswith("Vector") and name[6:] in known:
                    current = data.args[1]  # gymnasium's wrappers hand terminated on unchanged
                    continue
                return Terminations(None, (), f"the env is wrapped by `{name}`, which the extractor does not know")
            return Terminations(None, (), f"make_env returns `{flow.describe(current)}`: "
                                          f"{flow.why_not_constant(current)}")
        return Terminations(None, (), "the env wrapper chain is deeper than 40 layers")

    def _changes_terminated(self, wrapper: V) -> str | None:
        """Why a wrapper of the files read does not hand on its inner env's ``terminated`` (None: it does)."""
        instance: Instance = wrapper.data
        if instance.cls.lookup("step") is None:
            return None  # gymnasium's Wrapper.step hands the inner step's result on
        terminated = sym("param", "inner_terminated")
        inner = self.engine.stub("inner_env", step=V(flow.Native(
            "step", lambda a, k, f, n: V((sym("param", "obs"), sym("param", "rewards"), terminated,
                                          sym("param", "truncated"), sym("param", "info"))))))
        saved = dict(instance.attrs)
        instance.attrs["env"] = inner
        try:
            out = self.engine.call(self.engine.getattr(wrapper, "step"), sym("param", "actions"))
        finally:
            instance.attrs.clear()
            instance.attrs.update(saved)
        returned = _third(out)
        if returned is terminated:
            return None
        return f"{instance.cls.name}.step returns terminated `{flow.describe(returned or out)}`, not its inner env's"

    def _base_terminations(self, env: V) -> Terminations:
        """The innermost env's ``step`` with its jitted Playground step answered by a State
        (:func:`..playground.state.state`): ``terminated`` is the state's ``done`` as it is, or
        ``done`` with ``info["truncation"]`` taken out. The lines: what makes it, and each test
        ``step`` decides whose other outcome would hand on something else."""
        instance: Instance = env.data
        name = instance.cls.name
        jit_step = instance.attrs.get("_jit_step")
        if instance.cls.lookup("step") is None or jit_step is None or not _jit_of_playground_step(jit_step):
            shown = flow.describe(jit_step) if jit_step is not None else "not set"
            return Terminations(None, (), f"{name}.step: its state does not come from jax.jit of "
                                          f"wrap_for_brax_training(...).step (_jit_step is {shown})")
        step = self.engine.getattr(env, "step")
        function = step.data.function if isinstance(step.data, flow.Bound) else None

        def run(flip=None) -> tuple[str | None, V | None, list, list]:
            state, fields = playground_state.state(self.engine, sym("param", "observation"))
            decided: list = []
            absent: list = []
            getattr_ = self.engine.builtins["getattr"]

            def getattr_on_state(args, kwargs, frame, node):  # which defaults of the State's getattr are taken
                found = getattr_.data.call(args, kwargs, frame, node)
                if len(args) > 2 and args[0].data is state.data and found is args[2] and frame is not None:
                    absent.append((flow.plain(args[1]), self.engine.where(frame.module, node)))
                return found

            def decide(node, test, truth, frame):  # the tests step() itself decides
                if outer is not None:
                    truth = outer(node, test, truth, frame)
                if truth in (True, False) and function is not None and frame.function is function:
                    decided.append((node, test.lines))
                    if node is flip:
                        return not truth
                return truth

            saved, outer = dict(instance.attrs), self.engine.decide
            instance.attrs["_jit_step"] = V(flow.Native("_jit_step", lambda a, k, f, n: state))
            self.engine.decide = decide
            self.engine.builtins["getattr"] = V(flow.Native("getattr", getattr_on_state))
            try:
                out = self.engine.call(step, sym("param", "actions"))
            finally:
                self.engine.builtins["getattr"] = getattr_
                self.engine.decide = outer
                instance.attrs.clear()
                instance.attrs.update(saved)
            terminated = _third(out)
            return (_termination_kind(terminated, fields), terminated if terminated is not None else out, decided,
                    absent)

        kind, terminated, decided, absent = run()
        deciding = {p for node, lines in decided if run(flip=node)[0] != kind for p in lines}
        lines = tuple(sorted(deciding | set(flow.all_lines(terminated))))
        if kind == "done":
            return Terminations(kind, lines, None,
                                f"{name}.step hands on the state's done flag as terminated, truncation not taken out",
                                tuple(absent))
        if kind == "done_not_truncated":
            return Terminations(kind, lines, None, f"{name}.step hands on done & ~info['truncation'] as terminated")
        return Terminations(None, lines, f"{name}.step returns terminated `{flow.describe(terminated)}`: a shape "
                                         "the extractor does not read")

    def _either(self, phi: flow.Phi) -> RewardScale:
        results = [self.reward_scale(option) for option in phi.options]
        factors = {r.factor for r in results}
        if any(r.why for r in results) or len(factors) != 1:
            why = next((r.why for r in results if r.why), None) or \
                f"{phi.why}: the reward multiplier is one of {sorted(f for f in factors if f is not None)}"
            return RewardScale(None, (), "env", why)
        lines = tuple(sorted({p for r in results for p in r.lines}))
        return RewardScale(results[0].factor, lines, results[0].site, None, results[0].note)

    def _wrapper_factor(self, wrapper: V) -> RewardScale:
        """A wrapper class of the files read: its ``step`` run over an inner env whose
        rewards are a symbol, the multiplier is what it does to that symbol."""
        instance: Instance = wrapper.data
        if instance.cls.lookup("step") is None:
            return RewardScale(1.0, (), "none")  # gymnasium's Wrapper.step: rewards pass through
        inner_reward = sym("param", "inner_reward")
        inner = self.engine.stub("inner_env", step=V(flow.Native(
            "step", lambda a, k, f, n: V((sym("param", "obs"), inner_reward, sym("param", "terminated"),
                                          sym("param", "truncated"), sym("param", "info"))))))
        saved = instance.attrs.get("env")
        instance.attrs["env"] = inner
        try:
            out = self.engine.call(self.engine.getattr(wrapper, "step"), sym("param", "actions"))
        finally:
            if saved is None:
                instance.attrs.pop("env", None)
            else:
                instance.attrs["env"] = saved
        rewards = _second(out)
        if rewards is None:
            return RewardScale(None, (), "env", f"{instance.cls.name}.step returns `{flow.describe(out)}`")
        if rewards is inner_reward:
            return RewardScale(1.0, (), "none")
        parts = flow.linear(rewards)
        if parts.coefficient is None or not any(a is inner_reward for a in parts.atoms):
            return RewardScale(None, tuple(sorted(parts.lines)), "env",
                               f"{instance.cls.name}.step returns rewards `{flow.describe(rewards)}`")
        return RewardScale(parts.coefficient, tuple(sorted(parts.lines)), "env")

    def _base_factor(self, env: V) -> RewardScale:
        """The innermost env, a class of the files read: the multiplier on the simulator's
        reward in what its ``step`` returns."""
        instance: Instance = env.data
        if instance.cls.lookup("step") is None:
            return RewardScale(1.0, (), "none")
        out = self.engine.call(self.engine.getattr(env, "step"), sym("param", "actions"))
        rewards = _second(out)
        if rewards is None:
            return RewardScale(None, (), "env", f"{instance.cls.name}.step returns `{flow.describe(out)}`")
        reward_attr = lambda v: isinstance(v.data, flow.Sym) and v.data.op == "attr" and "reward" in v.data.name  # noqa
        if not flow.mentions(rewards, reward_attr):
            return RewardScale(None, (), "env", f"{instance.cls.name}.step returns rewards `{flow.describe(rewards)}`,"
                                                " not made from the simulator's reward")
        parts = flow.linear(rewards)
        if parts.coefficient is None:
            return RewardScale(None, tuple(sorted(parts.lines)), "env",
                               f"{instance.cls.name}.step scales rewards by something not constant: {parts.why}")
        return RewardScale(parts.coefficient, tuple(sorted(parts.lines)), "env")


def _inner_env(instance: Instance) -> V | None:
    """The env a wrapper wraps: its ``env`` attribute, or (a gymnasium base class sets that
    attribute, outside the files read) the env its constructor got first."""
    inner = instance.attrs.get("env")
    if inner is not None:
        return inner
    if instance.cls.has_external_base() and instance.args and instance.args[0]:
        first = instance.args[0][0]
        if isinstance(first.data, (Instance, flow.Phi)) or (isinstance(first.data, flow.Sym)
                                                             and first.data.op == "call"):
            return first
    return None


def _third(value: V) -> V | None:
    data = value.data
    if isinstance(data, (tuple, list)) and len(data) >= 3:
        return data[2]
    return None


def _termination_kind(terminated: V | None, fields: dict[str, V]) -> str | None:
    """``done``: the State's done flag itself (through conversions); ``done_not_truncated``:
    ``done & ~truncation`` with Playground's ``info["truncation"]``; None: another shape."""
    if terminated is None:
        return None
    done, truncation = fields["done"].data, playground_state.truncation(fields).data

    def made_of(v: V, array) -> bool:  # the model's array object itself (read with more lines, or converted)
        return semantics.unwrapped(v).data is array

    if made_of(terminated, done):
        return "done"
    data = terminated.data
    parts = data.args if isinstance(data, flow.Sym) and data.op == "and" and len(data.args) == 2 else ()
    inverted = [p for p in parts if isinstance(p.data, flow.Sym) and p.data.op == "invert" and p.data.args]
    if len(inverted) == 1 and made_of(inverted[0].data.args[0], truncation) and \
            any(made_of(p, done) for p in parts if p is not inverted[0]):
        return "done_not_truncated"
    return None


def _jit_of_playground_step(value: V) -> bool:
    """``jax.jit(<wrap_for_brax_training(...)>.step)``: the step whose State the model answers."""
    data = value.data
    if not (isinstance(data, flow.Sym) and data.op == "call" and len(data.args) == 2
            and flow.qualified_name(data.args[0]) == "jax.jit"):
        return False
    step = data.args[1].data
    return (isinstance(step, flow.Sym) and step.op == "attr" and step.name == "step" and bool(step.args)
            and flow.call_name(step.args[0]) == "wrap_for_brax_training")


def _second(value: V) -> V | None:
    data = value.data
    if isinstance(data, (tuple, list)) and len(data) >= 2:
        return data[1]
    return None


def _plain_or(value: V | None, default: Any = None) -> Any:
    if value is None or not flow.is_const(value):
        return default
    return flow.plain(value)


__all__ = ["SlmRun", "RewardScale", "ObsStatistics", "Terminations"]
