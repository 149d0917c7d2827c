"""What Brax's PPO code does with its parameters, read statically at one commit.

Given the effective ``train()`` and ``make_ppo_networks()`` parameters of a scope, this
module turns them into canonical facts by reading the code that uses them, not by
trusting parameter names:

- the unroll scan in ``training_step`` (its ``length=`` expression is evaluated with
  the scope's values) gives the sequential unrolls per update;
- the scans in ``training_step`` / ``sgd_step`` give epochs and minibatches;
- ``compute_ppo_loss`` (with the keyword arguments ``train()`` binds into it) gives
  reward scaling, advantage normalization, the value-loss multiplier, GAE;
- ``make_ppo_networks`` / ``make_policy_network`` / the distribution classes give
  the std parametrisation, layers, activation and initializer;
- ``running_statistics`` gives observation normalization details;
- ``training_step`` run by the engine says when the observation statistics move and whether
  rewards bootstrap at a time-out; ``compute_gae`` as the loss calls it (its scan body run on
  the scan's own inputs) what a truncation does to GAE; the optimizer ``train()`` initializes
  what one gradient clip covers; the distribution's ``entropy`` how the entropy is estimated.

``train()`` itself and the loss it binds are run by the data-flow engine
(:mod:`brax_diff.extractors.brax.run`): the scan lengths, the value-loss coefficient, the reward
multiplier and the clip range are what the arithmetic on the path computes, after any
reassignment inside ``train()``.

When a shape relied on is absent, the affected keys are ``value: null`` with ``unknown``
saying why, and a ``pattern_not_found`` finding names the key, file, function and ref.
"""

from __future__ import annotations

from typing import Any, Callable

import libcst as cst

from brax_diff.errors import BraxDiffError
from brax_diff.facts.model import Fact, Finding, Provenance
from brax_diff.sources.repository import Snapshot
from brax_diff.facts.vocabulary import KEYS
from brax_diff.facts.vocabulary import canonical_activation

from ..engine import flow, semantics
from .run import TrainRun
from .scope import (PatternNotFound, Scope, Setting, callee_name, calls_named, descendants, evaluate,
                         first_positional, last_identifier, plain)
from ..engine.pyast import Code, PyModule, call_kwargs, dotted_name, parse_file
from ..engine.value_loss import value_loss_form

# The Brax files read, relative to the repository root.
TRAIN = "brax/training/agents/ppo/train.py"
LOSSES = "brax/training/agents/ppo/losses.py"
PPO_NETWORKS = "brax/training/agents/ppo/networks.py"
NETWORKS = "brax/training/networks.py"
DISTRIBUTION = "brax/training/distribution.py"
RUNNING_STATISTICS = "brax/training/acme/running_statistics.py"

# optax.adam's own default (optax is not part of the snapshot); used when the call
# passes no eps. Provenance is the call line in train.py.
OPTAX_ADAM_DEFAULT_EPS = 1e-8

# Initializer names as the vocabulary spells them (glorot = xavier, he = kaiming).
_KERNEL_INIT = {
    "lecun_uniform": "lecun_uniform",
    "orthogonal": "orthogonal",
    "xavier_uniform": "xavier_uniform",
    "glorot_uniform": "xavier_uniform",
    "kaiming_uniform": "kaiming_uniform",
    "he_uniform": "kaiming_uniform",
}


class BraxCode:
    """Brax's PPO code at one commit, parsed once and asked many scopes."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._modules: dict[str, PyModule] = {}
        self._runs: dict[tuple, TrainRun] = {}
        self._derived: dict[tuple, tuple[tuple[Fact, ...], tuple[Finding, ...]]] = {}

    @staticmethod
    def _scope_key(scope: Scope) -> tuple:
        """What a derivation reads of a scope: each parameter's value and lines (not its origin label)."""
        return tuple(sorted((name, repr(s.value), s.provenance) for name, s in scope.items()))

    def train_run(self, train: Scope) -> TrainRun:
        """train() run by the engine with these parameters (envs sharing a config share it)."""
        key = self._scope_key(train)
        if key not in self._runs:
            self._runs[key] = TrainRun(self.snapshot, train, self._modules)
        return self._runs[key]

    # -- reading --------------------------------------------------------------------
    def module(self, path: str) -> PyModule:
        if path not in self._modules:
            try:
                self._modules[path] = parse_file(self.snapshot, path)
            except SyntaxError as exc:
                raise BraxDiffError(f"brax: {exc} at {self.snapshot.ref} ({self.snapshot.sha[:12]})") from None
        return self._modules[path]

    def at(self, path: str, node: cst.CSTNode) -> Provenance:
        return self.snapshot.where(path, self.module(path).line(node))

    def function(self, path: str, name: str, keys: tuple[str, ...]) -> cst.FunctionDef:
        found = self.module(path).function(name)
        if found is None:
            raise PatternNotFound(keys, path, f"function {name}() not found")
        return found

    def _defaults(self, path: str, name: str, origin: str) -> Scope:
        fn = self.module(path).function(name)
        if fn is None:
            return {}
        return {param: Setting(located.value, (self.snapshot.where(path, located.line),), origin)
                for param, located in self.module(path).signature_defaults(fn).items()}

    def train_defaults(self) -> Scope:
        """``train()``'s signature defaults."""
        return self._defaults(TRAIN, "train", "train() default")

    def network_defaults(self) -> Scope:
        """``make_ppo_networks()``'s signature defaults."""
        return self._defaults(PPO_NETWORKS, "make_ppo_networks", "make_ppo_networks() default")

    def parameters(self, path: str, name: str) -> set[str] | None:
        """Every parameter name of a function (None when the function is absent)."""
        fn = self.module(path).function(name)
        if fn is None:
            return None
        params = fn.params
        return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}

    def missing_entry_points(self) -> list[Finding]:
        """pattern_not_found findings for the two functions every scope starts from."""
        out = []
        for path, name in ((TRAIN, "train"), (PPO_NETWORKS, "make_ppo_networks")):
            if self.module(path).function(name) is None:
                out.append(_not_found(PatternNotFound(("*",), path, f"function {name}() not found")))
        return out

    # -- facts ----------------------------------------------------------------------
    def facts(self, train: Scope, network: Scope, scope: str = "config") -> tuple[list[Fact], list[Finding]]:
        """Every canonical key this code decides, for one scope's parameters (a key it
        cannot read is an unknown fact with a finding).

        Most of a family's environments share their family's config: the facts (frozen) are
        derived once per distinct set of parameters, not once per environment."""
        key = (scope, self._scope_key(train), self._scope_key(network))
        if key not in self._derived:
            derivation = _Derivation(self, train, network, scope)
            derivation.run()
            self._derived[key] = (tuple(derivation.facts.values()), tuple(derivation.findings))
        facts, findings = self._derived[key]
        return list(facts), list(findings)


def _not_found(error: PatternNotFound, key: str | None = None) -> Finding:
    keys = key or ", ".join(error.keys)
    return Finding(
        kind="pattern_not_found",
        severity="WARNING",
        message=f"{keys}: {error.what} in {error.path}",
        provenance=(),
        key=key if key is not None else (error.keys[0] if len(error.keys) == 1 and error.keys[0] != "*" else None),
    )


class _Derivation:
    """One scope's facts. Each ``_topic`` method adds facts or raises PatternNotFound."""

    def __init__(self, code: BraxCode, train: Scope, network: Scope, scope: str = "config") -> None:
        self.code = code
        self.snapshot = code.snapshot
        self.run_ = code.train_run(train)
        self.train = self.run_.effective(train)
        self.network = network
        self.scope = scope
        self.facts: dict[str, Fact] = {}
        self.findings: list[Finding] = []
        self._loss: Scope | None = None

    # The keys each step gives, so that a step stopped by a shape it does not find leaves every
    # key it would have given unknown, with that reason (never silently absent).
    STEP_KEYS = {
        "_collection": ("num_envs", "unrolls_per_update", "unroll_length"),
        "_epochs_and_minibatches": ("minibatches_per_epoch", "epochs_per_update"),
        "_derived_batch": ("transitions_per_update", "minibatch_transitions", "gradient_steps_per_update"),
        "_gae": ("gae_horizon",),
        "_reward": ("reward_scale", "reward_scale_site"),
        "_observations": ("obs_normalization", "obs_norm_method", "obs_norm_std_eps", "obs_clip"),
        "_obs_norm_update": ("obs_norm_update",),
        "_value": ("value_loss", "value_loss_coef", "value_clipping", "value_target_normalization"),
        "_advantages": ("gae_lambda", "discount", "advantage_normalization", "advantage_normalization_scope"),
        "_truncation": ("truncation",),
        "_gae_recompute": ("gae_recompute",),
        "_advantage_form": ("advantage_form",),
        "_optimizer": ("learning_rate", "adam_eps", "lr_schedule", "lr_final_factor", "max_grad_norm"),
        "_grad_clip_scope": ("grad_clip_scope",),
        "_entropy": ("entropy_coef", "entropy_schedule", "entropy_coef_final"),
        "_policy_distribution": ("action_distribution", "std_state_dependent", "std_transform", "std_min",
                                 "std_max"),
        "_entropy_estimator": ("entropy_estimator",),
        "_architecture": ("policy_hidden_layers", "value_hidden_layers", "activation", "shared_network",
                          "kernel_init"),
        "_clip": ("clip_epsilon", "clip_epsilon_schedule", "clip_epsilon_final"),
    }

    def run(self) -> None:
        for name, keys in self.STEP_KEYS.items():
            try:
                getattr(self, name)()
            except PatternNotFound as error:
                self.unknown(error)
                rest = tuple(k for k in keys if k not in self.facts)
                if rest:
                    self.unknown(PatternNotFound(rest, error.path, f"not read: {error.what}"))
            except (TypeError, ValueError, ArithmeticError) as error:  # a value of an unexpected kind
                rest = tuple(k for k in keys if k not in self.facts)
                self.unknown(PatternNotFound(rest or keys, TRAIN, f"{name.strip('_')}: cannot use the values read "
                                                                 f"({type(error).__name__}: {error})"))
        self._train_failures()

    def unknown(self, error: PatternNotFound) -> None:
        """The keys of a shape not found: null facts saying why, one finding per key."""
        keys = [k for k in KEYS] if "*" in error.keys else list(error.keys)
        for key in keys:
            if key in self.facts:
                continue
            finding = _not_found(error, key)
            self.facts[key] = Fact(key, None, (), unknown=finding.message)
            self.findings.append(finding)

    def known(self, key: str) -> bool:
        return key in self.facts and not self.facts[key].is_unknown

    def _train_failures(self) -> None:
        """A raise every run of train() reaches with these parameters: it cannot train."""
        for error in self.run_.failures[:1]:
            where = (error.where,) if error.where is not None else ()
            if self.scope == "defaults":
                self.findings.append(Finding(
                    "defaults_do_not_run", "INFO",
                    f"train() with its signature defaults alone stops: {error.message}", where))
            else:
                self.findings.append(Finding(
                    "cannot_train", "ERROR", f"train() with this config stops: {error.message}", where))

    # -- helpers ----------------------------------------------------------------------
    def add(self, key: str, value: Any, provenance, note: str | None = None, declared: Any = None) -> None:
        self.facts[key] = Fact(key, plain(value), tuple(provenance), note=note, declared=plain(declared))

    def setting(self, scope: Scope, name: str, keys: tuple[str, ...], path: str) -> Setting:
        found = scope.get(name)
        if found is None:
            raise PatternNotFound(keys, path, f"parameter {name!r} not found")
        if isinstance(found.value, Code):
            raise PatternNotFound(keys, path, f"{name} = {found.value.text} is not a literal")
        return found

    def from_setting(self, key: str, scope: Scope, name: str, path: str, *, extra=(), note=None,
                     convert: Callable[[Any], Any] = lambda v: v) -> Setting:
        found = self.setting(scope, name, (key,), path)
        self.add(key, convert(found.value), found.provenance + tuple(extra), note=note)
        return found

    def received_or_setting(self, key: str, record: "flow.CallRecord | None", name: str, index: int, scope: Scope,
                            setting: str, path: str, what: str, *, extra=()) -> None:
        """``key`` from what the call that acts receives (``optax.adam(learning_rate=...)``); the
        scope's setting when the call receives exactly it (or no call that acts is found)."""
        received = self.run_.argument(record, name, index) if record is not None else None
        if received is None:
            self.from_setting(key, scope, setting, path, extra=extra)
            return
        found = scope.get(setting)
        if not flow.is_const(received):
            raise PatternNotFound((key,), path, f"the {name} {what} receives is not known: "
                                                f"{flow.why_not_constant(received)}")
        value = flow.plain(received)
        lines = flow.all_lines(received)
        if found is not None and not isinstance(found.value, Code) and _same_value(found.value, value) and \
                lines <= set(found.provenance) | set(extra):
            self.from_setting(key, scope, setting, path, extra=extra)  # the setting, passed on unchanged
            return
        where = tuple(sorted(lines, key=lambda p: (p.path, p.line))) + (self.run_.at(record),)
        self.add(key, value, where, note=f"the value {what} receives ({setting} transformed on the way)")

    def value_in(self, expr: cst.CSTNode, fn: cst.FunctionDef | None, keys: tuple[str, ...], path: str,
                 what: str) -> tuple[Any, tuple[Provenance, ...]]:
        """An expression of train() (or of a function nested in it) evaluated where it runs."""
        frame = self.run_.nested_frame(fn) if fn is not None else self.run_.frame
        value = self.run_.evaluate(expr, frame)
        code = self.code.module(path).code(expr)
        if value is None:
            raise PatternNotFound(keys, path, f"train() could not be run to evaluate {what} `{code}`")
        if not flow.is_const(value):
            raise PatternNotFound(keys, path, f"cannot evaluate {what} `{code}`: {flow.why_not_constant(value)}")
        return flow.plain(value), tuple(sorted(flow.all_lines(value)))

    def scan_length(self, fn: cst.FunctionDef, path: str, keys: tuple[str, ...],
                    accept: Callable[[cst.Call], bool], what: str) -> tuple[Any, tuple[Provenance, ...], cst.Call]:
        """The evaluated ``length=`` of the ``jax.lax.scan`` in ``fn`` that ``accept`` picks."""
        for call in calls_named(fn, "scan"):
            if not accept(call):
                continue
            length = call_kwargs(call).get("length")
            if length is None:
                raise PatternNotFound(keys, path, f"{what} has no length= argument")
            value, provenance = self.value_in(length.value, fn, keys, path, f"{what} length")
            return value, provenance + (self.code.at(path, length),), call
        raise PatternNotFound(keys, path, f"{what} not found in {fn.name.value}()")

    LOSS_KEYS = ("reward_scale", "reward_scale_site", "advantage_normalization", "value_loss", "value_loss_coef",
                 "value_clipping", "gae_lambda", "discount", "entropy_coef", "entropy_schedule", "entropy_coef_final",
                 "clip_epsilon", "clip_epsilon_schedule", "clip_epsilon_final")

    def loss_scope(self) -> Scope:
        """compute_ppo_loss's parameters as train() binds them with functools.partial
        (evaluated where train() makes the partial)."""
        if self._loss is not None:
            return self._loss
        self.code.function(LOSSES, "compute_ppo_loss", self.LOSS_KEYS)
        scope = self.run_.loss_scope()
        if scope is None:
            raise PatternNotFound(self.LOSS_KEYS, TRAIN, "functools.partial(compute_ppo_loss, ...) not found in train()")
        self._loss = scope
        return scope

    def loss_run(self, keys: tuple[str, ...]):
        """The loss run once: its frame (final locals) and the calls it made."""
        self.loss_scope()
        frame, calls, _, _ = self.run_.loss()
        if frame is None:
            raise PatternNotFound(keys, LOSSES, "compute_ppo_loss() could not be run")
        return frame, calls

    def loss_local(self, name: str, keys: tuple[str, ...]) -> flow.V:
        frame, _ = self.loss_run(keys)
        value = frame.locals.get(name)
        if value is None:
            raise PatternNotFound(keys, LOSSES, f"`{name}` is not computed in compute_ppo_loss()")
        return value

    def coefficient(self, value: flow.V, keys: tuple[str, ...], what: str) -> flow.Linear:
        if isinstance(value.data, flow.Unknown):  # e.g. a loss argument not decided where the loss is called
            raise PatternNotFound(keys, LOSSES, f"{what} is not known: {value.data.reason}")
        parts = flow.linear(value)
        if parts.coefficient is None:
            raise PatternNotFound(keys, LOSSES, f"cannot evaluate the constant factors of {what} "
                                                f"`{flow.describe(value)}`: {parts.why}")
        return parts

    def code_lines(self, path: str, lines) -> list[str]:
        """The statements of ``path`` on these provenance lines (for notes)."""
        module = self.code.module(path)
        wanted = sorted({p.line for p in lines if p.path == path})
        out = []
        for node in descendants(module.module):
            if type(node) in (cst.Assign, cst.AugAssign) and module.line(node) in wanted:
                text = module.code(node)
                if text not in out:
                    out.append(text)
        return out

    # -- batch collection -------------------------------------------------------------
    def _collection(self) -> None:
        keys = ("unrolls_per_update", "unroll_length", "transitions_per_update")
        train_fn = self.code.function(TRAIN, "train", keys)
        self.from_setting("num_envs", self.train, "num_envs", TRAIN)
        step = _nested(train_fn, "training_step")
        if step is None:
            raise PatternNotFound(keys, TRAIN, "training_step() not found in train()")

        def collects_unrolls(call: cst.Call) -> bool:
            body = _nested(step, callee_name(first_positional(call)) or "")
            return body is not None and bool(calls_named(body, "generate_unroll"))

        value, provenance, scan = self.scan_length(step, TRAIN, ("unrolls_per_update",), collects_unrolls,
                                                   "the scan over generate_unroll")
        self.add("unrolls_per_update", value, provenance,
                 note="length of the jax.lax.scan over generate_unroll in training_step")
        body = _nested(step, callee_name(first_positional(scan)) or "")
        unroll = calls_named(body, "generate_unroll")[0]
        length = call_kwargs(unroll).get("unroll_length")
        length_expr = length.value if length is not None else first_positional(unroll, 4)
        if length_expr is None:
            raise PatternNotFound(("unroll_length",), TRAIN, "generate_unroll() call has no unroll length")
        steps, steps_provenance = self.value_in(length_expr, step, ("unroll_length",), TRAIN,
                                                "generate_unroll's length")
        self.add("unroll_length", steps, steps_provenance + (self.code.at(TRAIN, unroll),),
                 note="env steps per generate_unroll call")

    def _epochs_and_minibatches(self) -> None:
        train_fn = self.code.function(TRAIN, "train", ("epochs_per_update", "minibatches_per_epoch"))
        step = _nested(train_fn, "training_step")
        sgd = _nested(train_fn, "sgd_step")
        if sgd is None:
            raise PatternNotFound(("epochs_per_update", "minibatches_per_epoch"), TRAIN,
                                  "sgd_step() not found in train()")
        value, provenance, _ = self.scan_length(
            sgd, TRAIN, ("minibatches_per_epoch",), lambda c: callee_name(first_positional(c)) == "minibatch_step",
            "the scan over minibatch_step")
        self.add("minibatches_per_epoch", value, provenance,
                 note="length of the jax.lax.scan over minibatch_step (one optimizer step each)")
        if step is None:
            raise PatternNotFound(("epochs_per_update",), TRAIN, "training_step() not found in train()")
        value, provenance, _ = self.scan_length(
            step, TRAIN, ("epochs_per_update",), lambda c: callee_name(first_positional(c)) == "sgd_step",
            "the scan over sgd_step")
        self.add("epochs_per_update", value, provenance, note="length of the jax.lax.scan over sgd_step")

    def _derived_batch(self) -> None:
        need = ("num_envs", "unroll_length", "unrolls_per_update", "epochs_per_update", "minibatches_per_epoch")
        missing = [k for k in need if not self.known(k)]
        derived = ("transitions_per_update", "minibatch_transitions", "gradient_steps_per_update")
        if missing:
            raise PatternNotFound(derived, TRAIN, f"inputs not found ({', '.join(missing)})")
        f = self.facts
        transitions = f["num_envs"].value * f["unroll_length"].value * f["unrolls_per_update"].value
        self.add("transitions_per_update", transitions,
                 f["num_envs"].provenance + f["unroll_length"].provenance + f["unrolls_per_update"].provenance,
                 note="num_envs x unroll_length x unrolls_per_update")
        minibatches = f["minibatches_per_epoch"].value
        self.add("minibatch_transitions", transitions // minibatches if minibatches else None,
                 self.facts["transitions_per_update"].provenance + f["minibatches_per_epoch"].provenance,
                 note="transitions_per_update / minibatches_per_epoch (sgd_step reshapes to (num_minibatches, -1))")
        self.add("gradient_steps_per_update", f["epochs_per_update"].value * minibatches,
                 f["epochs_per_update"].provenance + f["minibatches_per_epoch"].provenance,
                 note="epochs_per_update x minibatches_per_epoch")

    def _gae(self) -> None:
        loss_fn = self.code.function(LOSSES, "compute_ppo_loss", ("gae_horizon",))
        gae_calls = calls_named(loss_fn, "compute_gae")
        if not gae_calls:
            raise PatternNotFound(("gae_horizon",), LOSSES, "compute_gae() call not found in compute_ppo_loss()")
        if not self.known("unroll_length"):
            raise PatternNotFound(("gae_horizon",), TRAIN, "unroll length not found")
        self.add("gae_horizon", self.facts["unroll_length"].value,
                 self.facts["unroll_length"].provenance + (self.code.at(LOSSES, gae_calls[0]),),
                 note="compute_gae runs over the time axis of each [unroll_length] segment, per minibatch")

    # -- reward -----------------------------------------------------------------------
    def _reward(self) -> None:
        """The multiplier on data.reward in the rewards compute_ppo_loss passes to compute_gae."""
        keys = ("reward_scale", "reward_scale_site")
        _, calls = self.loss_run(keys)
        gae = [c for c in calls if c.name == "compute_gae"]
        if not gae:
            raise PatternNotFound(keys, LOSSES, "compute_gae() is not called in compute_ppo_loss()")
        rewards = self.run_.argument(gae[0], "rewards", 2)
        if rewards is None:
            raise PatternNotFound(keys, LOSSES, "compute_gae() gets no rewards")
        if not flow.mentions(rewards, lambda v: isinstance(v.data, flow.Sym) and v.data.op == "attr"
                             and v.data.name == "reward"):
            raise PatternNotFound(keys, LOSSES, f"the rewards given to compute_gae, `{flow.describe(rewards)}`, "
                                                "are not made from data.reward")
        parts = self.coefficient(rewards, keys, "the rewards given to compute_gae")
        where = tuple(sorted(parts.lines)) + (self.run_.at(gae[0]),)
        statements = self.code_lines(LOSSES, parts.lines)
        self.add("reward_scale", parts.coefficient, where,
                 note=f"multiplier on data.reward in `{'; '.join(statements)}`" if statements else None)
        self.add("reward_scale_site", "loss" if parts.coefficient != 1.0 or statements else "none", where,
                 note="rewards are multiplied inside compute_ppo_loss, before GAE")

    # -- observations -----------------------------------------------------------------
    def _observations(self) -> None:
        train_fn = self.code.function(TRAIN, "train", ("obs_normalization",))
        enabled = self.from_setting("obs_normalization", self.train, "normalize_observations", TRAIN)
        normalize = _assignment_to(train_fn, "normalize", "normalize")
        where_normalize = (self.code.at(TRAIN, normalize),) if normalize is not None else ()
        if normalize is not None:
            self.facts["obs_normalization"] = Fact(
                "obs_normalization", enabled.value, enabled.provenance + where_normalize,
                note="preprocess_observations_fn = running_statistics.normalize when enabled")
        stats = self.code.module(RUNNING_STATISTICS)
        mode = self.train.get("normalize_observations_mode")
        if mode is not None and not isinstance(mode.value, Code):
            method, method_provenance = str(mode.value), mode.provenance
        else:
            update = stats.function("update")
            if update is None:
                raise PatternNotFound(("obs_norm_method",), RUNNING_STATISTICS, "update() not found")
            method, method_provenance = "welford", (self.code.at(RUNNING_STATISTICS, update),)
        self.add("obs_norm_method", method if enabled.value else "none", method_provenance + enabled.provenance,
                 declared=method if not enabled.value else None,
                 note=None if enabled.value else "normalization disabled; the statistics kept are unused")
        eps = self.train.get("normalize_observations_std_eps")
        compute_std = _nested(stats.module, "compute_std")
        where_std = (self.code.at(RUNNING_STATISTICS, compute_std),) if compute_std is not None else ()
        update = stats.function("update")
        floor = stats.signature_defaults(update).get("std_min_value") if update is not None else None
        floor_note = f"; the std is then clipped to >= {floor.value}" if floor is not None else ""
        if eps is not None and not isinstance(eps.value, Code):
            inside_sqrt = compute_std is not None and any(
                "std_eps" in stats.code(call) for call in calls_named(compute_std, "sqrt"))
            site = "added to the variance inside the sqrt" if inside_sqrt else "added to the std"
            self.add("obs_norm_std_eps", eps.value, eps.provenance + where_std,
                     note=f"{site} (running_statistics)" + floor_note)
        else:
            if compute_std is None:
                raise PatternNotFound(("obs_norm_std_eps",), RUNNING_STATISTICS, "compute_std() not found")
            self.add("obs_norm_std_eps", 0.0, where_std, note="no epsilon term" + floor_note)
        normalize_fn = stats.function("normalize")
        if normalize_fn is None:
            raise PatternNotFound(("obs_clip",), RUNNING_STATISTICS, "normalize() not found")
        bound = stats.signature_defaults(normalize_fn).get("max_abs_value")
        if bound is None:
            raise PatternNotFound(("obs_clip",), RUNNING_STATISTICS, "normalize(max_abs_value=...) not found")
        if normalize is None:  # not the bare function: a partial may bind max_abs_value
            bound_here = [arg for call in calls_named(train_fn, "partial") if callee_name(call) == "normalize"
                          for key, arg in call_kwargs(call).items() if key == "max_abs_value"]
            if not bound_here:
                raise PatternNotFound(("obs_clip",), TRAIN, "`normalize = running_statistics.normalize` not found")
            value, used = evaluate(bound_here[0].value, self.train)
            self.add("obs_clip", value, used + (self.code.at(TRAIN, bound_here[0]),))
            return
        self.add("obs_clip", bound.value, (self.snapshot.where(RUNNING_STATISTICS, bound.line),) + where_normalize,
                 note="train() passes running_statistics.normalize without max_abs_value")

    def _obs_norm_update(self) -> None:
        """Where training_step updates the running statistics: running_statistics.update called
        on the batch it collected, before or after the scan over sgd_step."""
        keys = ("obs_norm_update",)
        if not self.known("obs_normalization"):
            raise PatternNotFound(keys, TRAIN, "obs_normalization not read")
        enabled = self.facts["obs_normalization"]
        if not enabled.value:
            self.add("obs_norm_update", None, enabled.provenance,
                     note="observations are not normalized: the statistics kept are unused")
            return
        frame, calls = self._training_step_run(keys)
        updates = [i for i, c in enumerate(calls) if isinstance(c.callee.data, flow.Function)
                   and c.callee.data.name == "update" and c.callee.data.module.path == RUNNING_STATISTICS]
        sgd = [i for i, c in enumerate(calls) if c.name == "scan" and c.args and _partial_of(c.args[0], "sgd_step")]
        if not updates:
            raise PatternNotFound(keys, TRAIN, "training_step() calls no running_statistics.update()")
        if not sgd:
            raise PatternNotFound(keys, TRAIN, "the scan over sgd_step not found in training_step()")
        batch = frame.locals.get("data")
        for i in updates:
            observed = calls[i].args[1] if len(calls[i].args) > 1 else calls[i].kwargs.get("batch")
            if batch is None or observed is None or not semantics.depends_on(observed, batch):
                raise PatternNotFound(keys, TRAIN, f"running_statistics.update() at line {calls[i].line} is not "
                                                   "given the batch training_step collected")
        if max(updates) < min(sgd):
            value, when = "per_batch_before_sgd", "before"
        elif min(updates) > max(sgd):
            value, when = "per_batch_after_sgd", "after"
        else:
            raise PatternNotFound(keys, TRAIN, "training_step() updates the observation statistics before or after "
                                               "the scan over sgd_step depending on a condition not decided here")
        where = tuple(self.run_.at(calls[i]) for i in updates) + (self.run_.at(calls[sgd[0]]),)
        self.add("obs_norm_update", value, where,
                 note=f"training_step updates the statistics from the whole collected batch, once per update, {when} "
                      "the scan over sgd_step")

    def _training_step_run(self, keys: tuple[str, ...]):
        """training_step (nested in train()) run once: its frame and the calls it made."""
        train_fn = self.code.function(TRAIN, "train", keys)
        step = _nested(train_fn, "training_step")
        if step is None:
            raise PatternNotFound(keys, TRAIN, "training_step() not found in train()")
        frame, calls = self.run_.nested_run(step)
        if frame is None or frame is self.run_.frame:
            raise PatternNotFound(keys, TRAIN, "training_step() could not be run")
        return frame, calls

    # -- value function ---------------------------------------------------------------
    def _value(self) -> None:
        """v_loss as compute_ppo_loss computes it on the branch the scope takes: its
        constant factors are the coefficient, what is left says the form."""
        keys = ("value_loss", "value_loss_coef")
        loss = self.loss_scope()
        frame, calls = self.loss_run(keys)
        v_loss = self.loss_local("v_loss", keys)
        quantile = [c.result for c in calls if c.name == "quantile_huber_loss"]
        parts = flow.linear(v_loss)
        form, why = value_loss_form(parts.atoms, quantile)
        where = tuple(sorted(parts.lines))
        statements = self.code_lines(LOSSES, parts.lines)
        if form is None:
            raise PatternNotFound(keys, LOSSES, f"compute_ppo_loss(): {why}")
        self.add("value_loss", form, where, note=why)
        if parts.coefficient is None:
            raise PatternNotFound(("value_loss_coef",), LOSSES, f"cannot evaluate the constant factors of v_loss "
                                                               f"`{flow.describe(v_loss)}`: {parts.why}")
        shown = "; then ".join(statements) if statements else flow.describe(v_loss)
        coefficient, note = parts.coefficient, f"product of the constants in `{shown}`"
        weight = _weight_in(self.run_.loss_result, v_loss) if self.run_.loss_result is not None else None
        if weight is not None and weight[0] != 1:
            coefficient = coefficient * weight[0]
            where = tuple(sorted(set(where) | weight[1], key=lambda p: (p.path, p.line)))
            note += f"; the loss adds it weighted by {weight[0]:g}"
        self.add("value_loss_coef", coefficient, where, note=note)
        clip = loss.get("clipping_epsilon_value")
        if clip is not None and form != "distributional":
            self.add("value_clipping", clip.value if not isinstance(clip.value, Code) else None, clip.provenance)
        else:
            self.add("value_clipping", None, where,
                     note="kappa of the quantile loss, not a clip" if form == "distributional" else "no value clipping")
        loss_fn = self.code.function(LOSSES, "compute_ppo_loss", ("value_target_normalization",))
        gae = calls_named(loss_fn, "compute_gae")
        self.add("value_target_normalization", False, tuple(self.code.at(LOSSES, n) for n in gae[:1]) + where,
                 note="targets are compute_gae's returns, unnormalized")

    # -- advantages -------------------------------------------------------------------
    def _advantages(self) -> None:
        loss = self.loss_scope()
        _, calls = self.loss_run(("gae_lambda", "discount"))
        gae = [c for c in calls if c.name == "compute_gae"]
        self.received_or_setting("gae_lambda", gae[-1] if gae else None, "lambda_", 5, loss, "gae_lambda", LOSSES,
                                 "compute_gae")
        self.received_or_setting("discount", gae[-1] if gae else None, "discount", 6, loss, "discounting", LOSSES,
                                 "compute_gae")
        loss_fn = self.code.function(LOSSES, "compute_ppo_loss", ("advantage_normalization",))
        normalized = [call for call in calls_named(loss_fn, "mean")
                      if dotted_name(call.func) == "advantages.mean"]
        if not normalized:
            raise PatternNotFound(("advantage_normalization", "advantage_normalization_scope"), LOSSES,
                                  "`advantages.mean()` not found in compute_ppo_loss()")
        where = (self.code.at(LOSSES, normalized[0]),)
        self.from_setting("advantage_normalization", loss, "normalize_advantage", LOSSES, extra=where)
        train_fn = self.code.function(TRAIN, "train", ("advantage_normalization_scope",))
        sgd = _nested(train_fn, "sgd_step")
        scan = [c for c in calls_named(sgd, "scan") if callee_name(first_positional(c)) == "minibatch_step"] \
            if sgd is not None else []
        if not scan:
            raise PatternNotFound(("advantage_normalization_scope",), TRAIN,
                                  "the scan over minibatch_step not found in sgd_step()")
        self.add("advantage_normalization_scope", "minibatch", where + (self.code.at(TRAIN, scan[0]),),
                 note="normalized inside compute_ppo_loss, which minibatch_step runs once per minibatch")

    def _truncation(self) -> None:
        """What a time-limit truncation does to GAE: a training_step that adds discount x V(s) x
        time_out to the rewards bootstraps from the current state; otherwise compute_gae's masks
        by 1 - truncation on the advantages and on the GAE trace (run by the engine) drop the
        truncated step, so the step before it bootstraps from the episode's last state."""
        keys = ("truncation",)
        timeout = self._timeout_bootstrap(keys)
        if timeout is not None:
            self.add("truncation", "bootstrap_current_state", timeout,
                     note="training_step adds discounting x the value of the step's own state x time_out to the "
                          "reward of a time-out step (bootstrap_on_timeout)")
            return
        _, calls = self.loss_run(keys)
        gae = [c for c in calls if c.name == "compute_gae" and isinstance(c.callee.data, flow.Function)]
        if not gae:
            raise PatternNotFound(keys, LOSSES, "compute_gae() is not called in compute_ppo_loss()")
        record, function = gae[0], gae[0].callee.data
        signal = self.run_.argument(record, "truncation", 0)
        if signal is None or "truncation" not in semantics.names_read(signal):
            raise PatternNotFound(keys, LOSSES, "compute_gae() is not given the data's truncation signal")
        is_mask = lambda v: semantics.one_minus(v) is signal  # noqa: E731
        result = semantics.elements(record.result)
        advantages = result[1] if len(result) == 2 else None
        masked = [a for a in (semantics.factors(advantages) if advantages is not None else ()) if is_mask(a)]
        trace = self._masked_trace(calls, function.node, is_mask)
        if not masked or trace is None:
            raise PatternNotFound(keys, LOSSES, "compute_gae() does not multiply both the advantages and the GAE "
                                                "trace by 1 - truncation: a shape the extractor does not read")
        lines = set(masked[0].lines) | set(trace.lines) | semantics.product_lines(advantages) | set(signal.lines)
        where = tuple(sorted(p for p in lines if p.path in (LOSSES, TRAIN))) + (self.run_.at(record),)
        self.add("truncation", "mask_bootstrap_last_state", where,
                 note="compute_gae multiplies the truncated step's advantage and the GAE trace by 1 - truncation: "
                      "the step is dropped and the step before it bootstraps from the value of the truncated step's "
                      "observation, the episode's last state")

    def _masked_trace(self, calls, gae_node: cst.FunctionDef, is_mask) -> flow.V | None:
        """The recursive term of the scan in compute_gae (its body run by the engine on the scan's
        own carry and inputs) when it is multiplied by the mask ``is_mask`` accepts."""
        inside = {id(n) for n in descendants(gae_node)}
        for record in calls:
            if record.name != "scan" or id(record.node) not in inside or len(record.args) < 3:
                continue
            body, carry, inputs = record.args[0], record.args[1], record.args[2]
            if not isinstance(body.data, flow.Function):
                continue
            out = self.run_.engine.call(body, carry, inputs)
            before = semantics.elements(carry)
            after = semantics.elements(out)[:len(before)]
            for value in after:
                for term in flow.terms(value):
                    if any(semantics.depends_on(term, old) for old in before) and \
                            any(is_mask(a) for a in semantics.factors(term)):
                        return term
        return None

    def _timeout_bootstrap(self, keys: tuple[str, ...]) -> tuple[Provenance, ...] | None:
        """The lines of a reward term that adds the value at a time-out step (Brax's
        ``bootstrap_on_timeout``) in the batch training_step trains on; None when there is none."""
        frame, _ = self._training_step_run(keys)
        data = frame.locals.get("data")
        options = data.data.options if data is not None and isinstance(data.data, flow.Phi) else (data,)
        found = []
        for option in options:
            reward = semantics.constructor_field(option, "reward") if option is not None else None
            terms = [t for t in (flow.terms(reward) if reward is not None else [])
                     if {"time_out", "value"} <= semantics.names_read(t)]
            found.append(terms[0] if terms else None)
        if all(t is None for t in found):
            return None
        if any(t is None for t in found):
            raise PatternNotFound(keys, TRAIN, f"training_step() bootstraps at time-outs on some paths only "
                                               f"({data.data.why})")
        setting = self.train.get("bootstrap_on_timeout")
        lines = {p for t in found for p in t.lines} | set(setting.provenance if setting is not None else ())
        return tuple(sorted(lines))

    def _gae_recompute(self) -> None:
        """compute_gae called inside compute_ppo_loss, which minibatch_step runs for every minibatch."""
        keys = ("gae_recompute",)
        frame, calls = self.loss_run(keys)
        gae = [c for c in calls if c.name == "compute_gae"]
        if not gae:
            raise PatternNotFound(keys, LOSSES, "compute_gae() is not called in compute_ppo_loss()")
        train_fn = self.code.function(TRAIN, "train", keys)
        sgd = _nested(train_fn, "sgd_step")
        scan = [c for c in calls_named(sgd, "scan") if callee_name(first_positional(c)) == "minibatch_step"] \
            if sgd is not None else []
        if not scan:
            raise PatternNotFound(keys, TRAIN, "the scan over minibatch_step not found in sgd_step()")
        values = self.run_.argument(gae[0], "values", 3)
        params = frame.locals.get("params")
        current = values is not None and params is not None and semantics.depends_on(values, params)
        self.add("gae_recompute", "per_minibatch", (self.run_.at(gae[0]), self.code.at(TRAIN, scan[0])),
                 note="compute_ppo_loss runs compute_gae, and minibatch_step runs the loss once per minibatch"
                      + (", with the value network's current params" if current else ""))

    def _advantage_form(self) -> None:
        """The advantages compute_gae returns to the loss (run by the engine): made from the scan's
        backward recursion alone (GAE), or one reward plus the next step's lambda-return."""
        keys = ("advantage_form",)
        _, calls = self.loss_run(keys)
        gae = [c for c in calls if c.name == "compute_gae" and isinstance(c.callee.data, flow.Function)]
        if not gae:
            raise PatternNotFound(keys, LOSSES, "compute_gae() is not called in compute_ppo_loss()")
        record = gae[0]
        rewards = self.run_.argument(record, "rewards", 2)
        result = semantics.elements(record.result)
        if rewards is None or len(result) != 2:
            raise PatternNotFound(keys, LOSSES, "compute_gae() does not take rewards and return (vs, advantages)")
        advantages = result[1]
        form = semantics.advantage_form(advantages, rewards, lambda v: bool(semantics.calls_of(v, "scan")))
        if form is None:
            raise PatternNotFound(keys, LOSSES, f"compute_gae() returns advantages `{flow.describe(advantages)}`: "
                                                "neither the GAE recursion nor a reward plus the next lambda-return")
        lines = {p for p in semantics.product_lines(advantages) | set(advantages.lines) if p.path == LOSSES}
        note = ("compute_gae's advantages are r_t + discount * vs_{t+1} - V(s_t), vs the lambda-returns of its scan"
                if form == "vtrace_pg" else "compute_gae's advantages are the scan's backward sum of TD errors")
        self.add("advantage_form", form, tuple(sorted(lines)) + (self.run_.at(record),), note=note)

    # -- optimizer --------------------------------------------------------------------
    def _optimizer(self) -> None:
        train_fn = self.code.function(TRAIN, "train", ("adam_eps",))
        adams = calls_named(train_fn, "adam")
        self.received_or_setting("learning_rate", self.run_.optimizer_call("adam"), "learning_rate", 0,
                                 self.train, "learning_rate", TRAIN, "optax.adam",
                                 extra=[self.code.at(TRAIN, n) for n in adams[:1]])
        if not adams:
            raise PatternNotFound(("adam_eps", "lr_schedule"), TRAIN, "optax.adam(...) not found in train()")
        eps = call_kwargs(adams[0]).get("eps")
        if eps is not None:
            value, used = evaluate(eps.value, self.train)
            self.add("adam_eps", value, used + (self.code.at(TRAIN, adams[0]),))
        else:
            self.add("adam_eps", OPTAX_ADAM_DEFAULT_EPS, (self.code.at(TRAIN, adams[0]),),
                     note="optax.adam called without eps: optax's default 1e-8")
        schedule = self.train.get("learning_rate_schedule")
        if schedule is not None and isinstance(schedule.value, Code):
            # A schedule the scope does not decide is no schedule of ours: "other" would be a guess.
            self.unknown(PatternNotFound(("lr_schedule", "lr_final_factor", "lr_decay_steps"), TRAIN,
                                         f"learning_rate_schedule = {schedule.value.text} is not a value "
                                         "the extractor decides"))
        elif schedule is not None:
            raw = schedule.value
            name = "constant" if raw is None or (isinstance(raw, str) and raw.upper() == "NONE") else (
                "adaptive_kl" if isinstance(raw, str) and raw.upper() == "ADAPTIVE_KL" else "other")
            uses = [n for n in _assignments(train_fn, "lr_schedule")]
            self.add("lr_schedule", name, schedule.provenance + tuple(self.code.at(TRAIN, n) for n in uses[:1]),
                     declared=raw if name == "other" and not isinstance(raw, Code) else None)
        else:
            self.add("lr_schedule", "constant", (self.code.at(TRAIN, adams[0]),),
                     note="optax.adam gets the constant learning_rate")
        if self.known("lr_schedule"):
            final = 1.0 if self.facts["lr_schedule"].value == "constant" else None
            self.add("lr_final_factor", final, self.facts["lr_schedule"].provenance,
                     note=None if final is not None else "moves with the KL, no fixed final value")
            if final is not None:  # a constant rate: nothing decays
                self.add("lr_decay_steps", None, self.facts["lr_schedule"].provenance, note="constant learning rate")
        clips = calls_named(train_fn, "clip_by_global_norm")
        if "max_grad_norm" not in self.train and not clips:  # older Brax: plain Adam, nothing clips
            self.add("max_grad_norm", None, (self.code.at(TRAIN, adams[0]),), note="no gradient clipping in train()")
            return
        self.received_or_setting("max_grad_norm", self.run_.optimizer_call("clip_by_global_norm"), "max_norm", 0,
                                 self.train, "max_grad_norm", TRAIN, "optax.clip_by_global_norm",
                                 extra=[self.code.at(TRAIN, n) for n in clips[:1]])

    def _grad_clip_scope(self) -> None:
        """optax.clip_by_global_norm in the optimizer train() initializes over one params tree
        holding the policy's and the value's params: one clip over both networks."""
        keys = ("grad_clip_scope",)
        clips = self.run_.records("clip_by_global_norm")
        if not clips:
            if self.known("max_grad_norm") and self.facts["max_grad_norm"].value is None:
                self.add("grad_clip_scope", None, self.facts["max_grad_norm"].provenance, note="no gradient clipping")
                return
            raise PatternNotFound(keys, TRAIN, "train() with these parameters calls no optax.clip_by_global_norm()")
        clip = clips[0]
        for record in self.run_.records("init"):
            callee = record.callee.data
            if not (isinstance(callee, flow.Sym) and callee.op == "attr" and callee.args and record.args):
                continue
            if not semantics.depends_on(callee.args[0], clip.result):
                continue
            trained = record.args[0]
            fields = [name for name in ("policy", "value") if semantics.constructor_field(trained, name) is not None]
            if len(fields) == 2:
                self.add("grad_clip_scope", "global", (self.run_.at(clip), self.run_.at(record)),
                         note=f"one optimizer, initialized over {trained.data.cls.name}(policy=..., value=...), "
                              "clips the global norm of both networks' gradients together")
                return
        raise PatternNotFound(keys, TRAIN, "the optimizer holding clip_by_global_norm() is not initialized over the "
                                           "policy's and the value's params together in train()")

    # -- entropy ----------------------------------------------------------------------
    def _entropy(self) -> None:
        """entropy_loss = -coefficient x the mean entropy, as compute_ppo_loss computes it."""
        keys = ("entropy_coef", "entropy_schedule", "entropy_coef_final")
        entropy_loss = self.loss_local("entropy_loss", keys)
        parts = self.coefficient(entropy_loss, keys, "entropy_loss")
        if not parts.atoms:
            raise PatternNotFound(keys, LOSSES, "entropy_loss is a constant")
        where = tuple(sorted(parts.lines))
        coef = -parts.coefficient if parts.coefficient else 0.0
        self.add("entropy_coef", coef, where)
        self.add("entropy_schedule", "constant", where, note="a constant float multiplies the entropy in the loss")
        self.add("entropy_coef_final", coef, where, note="constant: the same coefficient to the end")

    # -- policy -----------------------------------------------------------------------
    def _distribution_class(self, keys: tuple[str, ...]) -> tuple[str, tuple[Provenance, ...]]:
        dist_type = self.network.get("distribution_type")
        if dist_type is not None and isinstance(dist_type.value, str):
            return dist_type.value, dist_type.provenance
        make = self.code.function(PPO_NETWORKS, "make_ppo_networks", keys)
        for name, kind in (("NormalTanhDistribution", "tanh_normal"), ("NormalDistribution", "normal")):
            calls = calls_named(make, name)
            if calls:
                return kind, (self.code.at(PPO_NETWORKS, calls[0]),)
        raise PatternNotFound(keys, PPO_NETWORKS, "no distribution constructed in make_ppo_networks()")

    def _policy_distribution(self) -> None:
        keys = ("action_distribution", "std_state_dependent", "std_transform", "std_min", "std_max")
        kind, kind_provenance = self._distribution_class(keys)
        self.add("action_distribution", kind, kind_provenance)
        dist = self.code.module(DISTRIBUTION)
        if kind == "tanh_normal":
            cls = _class(dist, "NormalTanhDistribution")
            create = _nested(cls, "create_dist") if cls is not None else None
            init = _nested(cls, "__init__") if cls is not None else None
            if create is None or init is None:
                raise PatternNotFound(keys[1:], DISTRIBUTION, "NormalTanhDistribution.create_dist() not found")
            split = calls_named(create, "split")
            if not split:
                raise PatternNotFound(("std_state_dependent",), DISTRIBUTION,
                                      "create_dist does not split the network output into loc and scale")
            self.add("std_state_dependent", True, (self.code.at(DISTRIBUTION, split[0]),) + kind_provenance,
                     note="tanh_normal: the policy MLP outputs loc and scale (param_size = 2 x actions); "
                          "state_dependent_std is ignored")
            transforms = [name for name in ("softplus", "exp") if calls_named(create, name)]
            transform_nodes = calls_named(create, transforms[0]) if transforms else []
            if not transforms:
                raise PatternNotFound(("std_transform",), DISTRIBUTION, "no softplus/exp on the scale in create_dist")
            where = (self.code.at(DISTRIBUTION, transform_nodes[0]),)
            self.add("std_transform", transforms[0], where)
            floor = dist.signature_defaults(init).get("min_std")
            if floor is None:
                raise PatternNotFound(("std_min",), DISTRIBUTION, "NormalTanhDistribution(min_std=...) not found")
            floor_value, floor_provenance = floor.value, (self.snapshot.where(DISTRIBUTION, floor.line),)
            make = self.code.module(PPO_NETWORKS).function("make_ppo_networks")
            for call in calls_named(make, "NormalTanhDistribution") if make is not None else []:
                passed = call_kwargs(call).get("min_std")
                if passed is not None:
                    floor_value, used = evaluate(passed.value, self.network)
                    floor_provenance = used + (self.code.at(PPO_NETWORKS, passed),)
            self.add("std_min", floor_value, floor_provenance + where,
                     note="scale = (softplus(raw) + min_std) * var_scale")
            bounded = [c for c in descendants(create) if isinstance(c, cst.Call)
                       and (dotted_name(c.func) or "").rsplit(".", 1)[-1] in ("clip", "minimum")]
            if bounded:
                raise PatternNotFound(("std_max",), DISTRIBUTION, "create_dist bounds the scale in an unknown way")
            self.add("std_max", None, where, note="no upper bound on the scale in create_dist")
            return
        # normal: a separate std head or parameter, chosen by make_ppo_networks' arguments.
        dependent = self.setting(self.network, "state_dependent_std", ("std_state_dependent",), PPO_NETWORKS)
        self.add("std_state_dependent", bool(dependent.value), dependent.provenance + kind_provenance)
        noise = self.setting(self.network, "noise_std_type", ("std_transform",), PPO_NETWORKS)
        transform = "exp" if noise.value == "log" else "other"
        self.add("std_transform", transform, noise.provenance,
                 note=None if transform == "exp" else f"noise_std_type={noise.value!r}: the raw parameter is the std")
        self.add("std_min", None, noise.provenance, note="no floor on the std")
        self.add("std_max", None, noise.provenance, note="no upper bound on the std")

    def _entropy_estimator(self) -> None:
        """The entropy compute_ppo_loss takes: the action distribution's ``entropy(params, rng)``,
        run by the engine on its class. One that depends on the sampled key (not only its shape)
        is a one-sample estimate; squashed when the distribution's postprocess is tanh."""
        keys = ("entropy_estimator",)
        frame, _ = self.loss_run(keys)
        entropy = frame.locals.get("entropy")
        if entropy is None:
            raise PatternNotFound(keys, LOSSES, "`entropy` is not computed in compute_ppo_loss()")
        if not self.known("action_distribution"):
            raise PatternNotFound(keys, DISTRIBUTION, "the action distribution is not read")
        kind = self.facts["action_distribution"].value
        class_name = {"tanh_normal": "NormalTanhDistribution", "normal": "NormalDistribution"}.get(kind)
        engine = self.run_.engine
        module = engine.module("brax.training.distribution")
        cls = engine.lookup(module, class_name) if module is not None and class_name else None
        if cls is None or not isinstance(cls.data, flow.Class):
            raise PatternNotFound(keys, DISTRIBUTION, f"class {class_name or kind} not found")
        method = cls.data.lookup("entropy")
        if method is None or not isinstance(method.data, flow.Function):
            raise PatternNotFound(keys, DISTRIBUTION, f"{class_name}.entropy() not found")
        instance = engine.call(cls, flow.sym("param", "event_size"))
        seed = flow.sym("param", "seed")
        out = engine.call(engine.getattr(instance, "entropy"), flow.sym("param", "parameters"), seed)
        rng = frame.locals.get("rng")
        where = tuple(sorted(p for p in entropy.lines if p.path == LOSSES)) + (
            engine.where(method.data.module, method.data.node),)
        if not semantics.depends_on(out, seed):
            self.add("entropy_estimator", "analytic", where,
                     note=f"{class_name}.entropy() is a closed form of the distribution's parameters")
            return
        if rng is None or not semantics.depends_on(entropy, rng):
            raise PatternNotFound(keys, LOSSES, f"{class_name}.entropy() samples, but compute_ppo_loss gives it no key")
        squashed = engine.call(engine.getattr(instance, "postprocess"), flow.sym("param", "action"))
        if flow.call_name(squashed) != "tanh":
            raise PatternNotFound(keys, DISTRIBUTION, f"{class_name}.entropy() samples an unsquashed distribution: "
                                                      "no value of the vocabulary says so")
        summed = out
        while flow.call_name(summed) in flow.LINEAR_CALLS and flow.call_operand(summed) is not None:
            summed = flow.call_operand(summed)  # the entropy summed over the action dimensions
        terms = [term for term in flow.terms(summed) if semantics.depends_on(term, seed)]
        sampled = sorted({p for value in [summed, *terms] for p in value.lines if p.path == DISTRIBUTION})
        self.add("entropy_estimator", "sampled_squashed", where + tuple(sampled),
                 note=f"{class_name}.entropy(): the Gaussian's closed form plus tanh's log-det-Jacobian at one action "
                      "sampled with the loss's key")

    def _architecture(self) -> None:
        self.from_setting("policy_hidden_layers", self.network, "policy_hidden_layer_sizes", PPO_NETWORKS)
        self.from_setting("value_hidden_layers", self.network, "value_hidden_layer_sizes", PPO_NETWORKS)
        activation = self.network.get("activation")
        if activation is None:
            raise PatternNotFound(("activation",), PPO_NETWORKS, "parameter 'activation' not found")
        name = last_identifier(activation.value)
        if name is None:
            raise PatternNotFound(("activation",), PPO_NETWORKS, "activation is not a named function")
        canonical = canonical_activation(name)
        self.add("activation", canonical if canonical in ("silu", "relu", "tanh", "elu") else "other",
                 activation.provenance, note=f"{name}" if canonical != name else None)
        make = self.code.function(PPO_NETWORKS, "make_ppo_networks", ("kernel_init", "shared_network"))
        policy_calls = calls_named(make, "make_policy_network")
        value_calls = calls_named(make, "make_value_network")
        if not policy_calls or not value_calls:
            raise PatternNotFound(("kernel_init", "shared_network"), PPO_NETWORKS,
                                  "make_policy_network()/make_value_network() calls not found")
        self.add("shared_network", False,
                 (self.code.at(PPO_NETWORKS, policy_calls[0]), self.code.at(PPO_NETWORKS, value_calls[0])),
                 note="separate policy and value networks")
        self._kernel_init(policy_calls[0])

    def _kernel_init(self, policy_call: cst.Call) -> None:
        passed = call_kwargs(policy_call).get("kernel_init")
        if passed is not None:
            expr = passed.value.func if isinstance(passed.value, cst.Call) else passed.value
            param = dotted_name(expr)
            found = self.network.get(param or "")
            if found is not None:
                name, provenance = last_identifier(found.value), found.provenance
            else:
                name = last_identifier(Code(self.code.module(PPO_NETWORKS).code(passed.value)))
                provenance = ()
            provenance = provenance + (self.code.at(PPO_NETWORKS, passed),)
        else:
            fn = self.code.function(NETWORKS, "make_policy_network", ("kernel_init",))
            default = self.code.module(NETWORKS).signature_defaults(fn).get("kernel_init")
            if default is not None:
                name, provenance = last_identifier(default.value), (self.snapshot.where(NETWORKS, default.line),)
            else:  # older Brax: the initializer is written into the MLP(...) call
                inner = [arg for call in calls_named(fn, "MLP")
                         for key, arg in call_kwargs(call).items() if key == "kernel_init"]
                if not inner:
                    raise PatternNotFound(("kernel_init",), NETWORKS, "make_policy_network's kernel_init not found")
                name = last_identifier(Code(self.code.module(NETWORKS).code(inner[0].value)))
                provenance = (self.code.at(NETWORKS, inner[0]),)
        canonical = _KERNEL_INIT.get(name or "", "other")
        self.add("kernel_init", canonical, provenance, note=name if canonical != name else None)

    def _clip(self) -> None:
        """The bounds of the clip on the probability ratio: [1 - eps, 1 + eps]."""
        keys = ("clip_epsilon", "clip_epsilon_schedule", "clip_epsilon_final")
        _, calls = self.loss_run(keys)
        found = []
        for record in calls:
            if record.name != "clip" or len(record.args) < 3:
                continue
            low, high = record.args[1], record.args[2]
            if flow.is_const(low) and flow.is_const(high):
                lo, hi = flow.plain(low), flow.plain(high)
                if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and abs(lo + hi - 2.0) < 1e-9:
                    found.append((record, hi - 1.0, low, high))
            elif flow.mentions(record.args[0], lambda v: flow.call_name(v) == "exp"):
                raise PatternNotFound(keys, LOSSES, f"cannot evaluate the ratio clip bounds "
                                                    f"`{flow.describe(low)}`, `{flow.describe(high)}`: "
                                                    f"{flow.why_not_constant(low if not flow.is_const(low) else high)}")
        if not found:
            raise PatternNotFound(keys, LOSSES, "no clip of the ratio to [1 - eps, 1 + eps] in compute_ppo_loss()")
        total = self.run_.loss_result
        acting = [f for f in found if total is not None and flow.mentions(total, lambda v, r=f[0]: v is r.result)]
        record, eps, low, high = (acting or found)[0]
        eps = float(f"{eps:.12g}")
        where = tuple(sorted(flow.all_lines(low) | flow.all_lines(high))) + (self.run_.at(record),)
        bound = self.loss_scope().get("clipping_epsilon")
        note = None
        if bound is not None and not isinstance(bound.value, Code) and abs(eps - bound.value) > 1e-12:
            note = f"the ratio is clipped to [{flow.plain(low):.6g}, {flow.plain(high):.6g}], not 1 ± clipping_epsilon"
        self.add("clip_epsilon", eps, where, note=note)
        self.add("clip_epsilon_schedule", "constant", where, note="constant bounds in compute_ppo_loss")
        self.add("clip_epsilon_final", eps, where, note="constant: the same clip range to the end")


def _same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _weight_in(total: flow.V, term: flow.V, depth: int = 0) -> tuple[float, frozenset] | None:
    """The constant factor ``total`` (a sum, or a tuple whose first item is one) applies to
    ``term``, with the lines of those factors; None when term is not a weighted term of it."""
    if total is term:
        return 1.0, frozenset()
    data = total.data
    if depth > 32:
        return None
    if isinstance(data, tuple) and data:
        return _weight_in(data[0], term, depth + 1)
    if not isinstance(data, flow.Sym):
        return None
    if data.op in ("add", "sub") and len(data.args) == 2:
        for position, arg in enumerate(data.args):
            found = _weight_in(arg, term, depth + 1)
            if found is not None:
                sign = -1.0 if data.op == "sub" and position == 1 else 1.0
                return sign * found[0], found[1] | (total.lines if sign < 0 else frozenset())
    if data.op in ("mul", "div") and len(data.args) == 2:
        sides = ((data.args[0], data.args[1]), (data.args[1], data.args[0])) if data.op == "mul" else \
            ((data.args[1], data.args[0]),)
        for factor, other in sides:
            if isinstance(factor.data, (int, float)) and not isinstance(factor.data, bool) and factor.data != 0:
                found = _weight_in(other, term, depth + 1)
                if found is not None:
                    scale = factor.data if data.op == "mul" else 1.0 / factor.data
                    return scale * found[0], found[1] | total.lines | factor.lines
    if data.op == "neg" and data.args:
        found = _weight_in(data.args[0], term, depth + 1)
        if found is not None:
            return -found[0], found[1] | total.lines
    return None


# -- small structural queries ---------------------------------------------------------
def _nested(node: cst.CSTNode | None, name: str) -> cst.FunctionDef | None:
    """``def name`` inside ``node`` (or node itself): the last one directly in its body (the
    binding Python keeps), else the first one nested deeper."""
    if node is None:
        return None
    if isinstance(node, cst.FunctionDef) and node.name.value == name:
        return node
    direct = [s for s in getattr(getattr(node, "body", None), "body", ())
              if isinstance(s, cst.FunctionDef) and s.name.value == name]
    if direct:
        return direct[-1]
    for child in descendants(node):
        if type(child) is cst.FunctionDef and child.name.value == name:
            return child
    return None


def _partial_of(value: flow.V, name: str) -> bool:
    """``functools.partial(name, ...)`` (or ``name`` itself) as the engine holds it."""
    data = value.data
    if isinstance(data, flow.Partial):
        data = data.function.data
    return isinstance(data, flow.Function) and data.name == name


def _class(module: PyModule, name: str) -> cst.ClassDef | None:
    found = module.classes(name)
    return found[0] if found else None


def _assignments(node: cst.CSTNode, target: str) -> list[cst.Assign]:
    """``target = ...`` statements under node, in source order."""
    out = []
    for child in descendants(node):
        if type(child) is cst.Assign and any(
                type(t.target) is cst.Name and t.target.value == target for t in child.targets):
            out.append(child)
    return out


def _assignment_to(node: cst.CSTNode, target: str, value_suffix: str) -> cst.Assign | None:
    """``target = something.value_suffix`` under node."""
    for assign in _assignments(node, target):
        name = dotted_name(assign.value) or ""
        if name.endswith("." + value_suffix):
            return assign
    return None


def _products_with(node: cst.CSTNode, name: str) -> list[cst.BinaryOperation]:
    """Multiplications with the bare name ``name`` as an operand."""
    out = []
    for child in descendants(node):
        if isinstance(child, cst.BinaryOperation) and isinstance(child.operator, cst.Multiply):
            for side in (child.left, child.right):
                if isinstance(side, cst.Name) and side.value == name:
                    out.append(child)
    return out
