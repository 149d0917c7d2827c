"""Brax's ``train()`` and ``compute_ppo_loss()`` run by the data-flow engine for one scope.

:class:`TrainRun` calls ``train(**scope)`` abstractly (:mod:`brax_diff.extractors.engine.flow`): the scope's
settings go in as values carrying their lines, the body runs statement by statement, so
a parameter reassigned inside ``train()`` is seen with its new value, and a ``raise`` every
run reaches (``episode_length`` missing, a batch the devices cannot split) is a failure
with its line. The calls readers care about are recorded (the ``functools.partial`` that
binds the loss, the ``optax.adam`` call, the scans); :meth:`loss` then runs the bound
loss once with symbolic data, so the value loss, the reward scaling and the clip range
are read from the arithmetic that computes them.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from brax_diff.facts.model import Provenance

from .scope import Code, Scope, Setting
from ..engine.flow import (CallRecord, Engine, Frame, Function, Invocation, Loader, Partial, Raised, Sym, V, const, is_const,
                   mentions, plain, sym, unknown, why_not_constant)
from ..engine.pyast import call_kwargs

TRAIN_MODULE = "brax.training.agents.ppo.train"
# Calls the Brax readers look at (last name component).
WATCH = frozenset({"partial", "scan", "adam", "clip_by_global_norm", "compute_gae", "clip", "quantile_huber_loss",
                   "generate_unroll", "chain", "update", "init"})


def setting_value(setting: Setting) -> V:
    """A scope setting as an engine value with its lines (a non-literal stays symbolic)."""
    if isinstance(setting.value, Code):
        return sym("param", setting.value.text, lines=setting.provenance)
    return const(setting.value, setting.provenance)


def _parameters(function: Function) -> list[cst.Param]:
    params = function.node.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def open_arguments(function: Function, given: set[str], positional: int = 0) -> dict[str, V]:
    """Symbolic values for the parameters a run leaves open (no default, not given)."""
    out = {}
    for index, param in enumerate(_parameters(function)):
        name = param.name.value
        if index < positional or name in given or param.default is not None:
            continue
        out[name] = sym("param", name)
    return out


class TrainRun:
    """One abstract run of ``train()`` with a scope's parameters."""

    def __init__(self, snapshot, scope: Scope, modules: dict | None = None) -> None:
        """``modules``: the reader's parsed files (:class:`~brax_diff.extractors.engine.flow.Loader`)."""
        self.snapshot = snapshot
        self.engine = Engine(Loader(snapshot, ("brax",), modules), watch=WATCH)
        self.frame: Frame | None = None
        self.function: Function | None = None
        self.failures: list[Raised] = []
        self.calls: list[CallRecord] = []
        self._nested: dict[int, tuple[Frame | None, list[CallRecord]]] = {}
        self._loss: tuple[Frame | None, list[CallRecord], Function | None, CallRecord | None] | None = None
        self._calls: tuple[list[Invocation], list[tuple]] | None = None
        self._received: dict[str, tuple[V, tuple, str]] | None = None
        self.loss_result: V | None = None  # what the loss run returned (its total)
        module = self.engine.module(TRAIN_MODULE)
        found = self.engine.lookup(module, "train") if module is not None else None
        if found is None or not isinstance(found.data, Function):
            return
        self.module = module
        self.function = found.data
        accepted = {p.name.value for p in _parameters(self.function)}
        kwargs = {name: setting_value(s) for name, s in scope.items() if name in accepted}
        kwargs.update(open_arguments(self.function, set(kwargs)))
        _, self.frame = self.engine.run(found, **kwargs)
        self.failures = self.engine.definite_failures()
        self.calls = list(self.engine.calls)

    # -- what train() left behind ----------------------------------------------------------------
    def local(self, name: str) -> V | None:
        """A name's value when train() ends (after any reassignment)."""
        if self.frame is None:
            return None
        return self.frame.locals.get(name)

    def effective(self, scope: Scope) -> Scope:
        """The scope as train() leaves it: a parameter reassigned in the body takes its new
        value (with the lines of the reassignment); one that becomes something the engine
        cannot compute is no literal any more."""
        out = dict(scope)
        if self.frame is None:
            return out
        for name, setting in scope.items():
            local = self.frame.locals.get(name)
            if local is None or isinstance(setting.value, Code):
                continue
            if is_const(local):
                value = plain(local)
                if _same(value, setting.value):
                    continue
                out[name] = Setting(value, tuple(sorted(set(setting.provenance) | set(local.lines))),
                                    "reassigned in train()")
            else:
                from ..engine.flow import why_not_constant
                out[name] = Setting(Code(f"{name} in train(): {why_not_constant(local)}"),
                                    setting.provenance, "reassigned in train()")
        return out

    def nested_frame(self, node: cst.FunctionDef) -> Frame | None:
        """The frame of a function nested in train() (``training_step``), run once with
        symbolic arguments; None when train() does not bind it."""
        return self.nested_run(node)[0]

    def nested_run(self, node: cst.FunctionDef) -> tuple[Frame | None, list[CallRecord]]:
        """A function nested in train() run once with symbolic arguments: its frame (train()'s
        when train() does not bind it) and the watched calls it made, in order."""
        if self.frame is None:
            return None, []
        key = id(node)
        if key not in self._nested:
            found = next((v for v in self.frame.locals.values()
                          if isinstance(v.data, Function) and v.data.node is node), None)
            frame, calls = None, []
            if found is not None:
                before = len(self.engine.calls)
                _, frame = self.engine.run(found, **open_arguments(found.data, set()))
                calls = list(self.engine.calls[before:])
            self._nested[key] = (frame if frame is not None else self.frame, calls)
        return self._nested[key]

    def evaluate(self, node: cst.CSTNode, frame: Frame | None = None) -> V | None:
        frame = frame or self.frame
        return None if frame is None else self.engine.eval_in(frame, node)

    def records(self, name: str) -> list[CallRecord]:
        return [c for c in self.calls if c.name == name]

    def at(self, record: CallRecord) -> Provenance:
        return self.snapshot.where(record.path, record.line)

    # -- the loss ----------------------------------------------------------------------------------
    def loss_binding(self) -> CallRecord | None:
        """The ``functools.partial(compute_ppo_loss, ...)`` train() makes."""
        for record in self.records("partial"):
            if record.args and isinstance(record.args[0].data, Function) and \
                    record.args[0].data.name == "compute_ppo_loss":
                return record
        return None

    def loss(self) -> tuple[Frame | None, list[CallRecord], Function | None, CallRecord | None]:
        """compute_ppo_loss run once with the arguments it receives where the code calls it
        (:meth:`received`) and symbolic data: its final frame, the calls it made, the function
        and the binding record."""
        if self._loss is None:
            binding = self.loss_binding()
            if binding is None:
                self._loss = (None, [], None, None)
                return self._loss
            function: Function = binding.args[0].data
            positional = list(binding.args[1:])
            kwargs = dict(binding.kwargs)
            kwargs.update({name: value for name, (value, _, _) in self.received(function, binding).items()})
            kwargs.update(open_arguments(function, set(kwargs), len(positional)))
            before = len(self.engine.calls)
            self.loss_result, frame = self.engine.run(V(function), *positional, **kwargs)
            self._loss = (frame, list(self.engine.calls[before:]), function, binding)
        return self._loss

    def loss_scope(self) -> Scope | None:
        """compute_ppo_loss's parameters as it receives them: defaults < what train()'s
        functools.partial binds < what the call passes."""
        _, _, function, binding = self.loss()
        if function is None or binding is None:
            return None
        scope: Scope = {}
        for name, value in function.defaults.items():
            scope[name] = _as_setting(value, (), "compute_ppo_loss() default")
        arguments = call_kwargs(binding.node)
        for name, value in binding.kwargs.items():
            where = ()
            if name in arguments:
                where = (self.snapshot.where(binding.path, self.module.source.line(arguments[name])),)
            scope[name] = _as_setting(value, where, "bound by train()")
        for name, (value, where, origin) in self.received(function, binding).items():
            if origin != "bound by train()":
                scope[name] = _as_setting(value, where, origin)
        return scope

    # -- where the loss is called --------------------------------------------------------------------
    def loss_calls(self, function: Function) -> tuple[list[Invocation], list[tuple]]:
        """The calls of ``function`` the code makes, found by running each function train()
        defines (the step functions that the library scans, differentiates or maps) with
        open arguments, following partials, keywords and ``**kwargs`` down to the loss. An
        entry that another entry's run calls is an inner step (run alone, it would see its
        own defaults instead of what its caller passes): only the outermost entries count.
        Also the calls not followed (a ``**kwargs`` the engine cannot expand)."""
        if self._calls is None:
            if self.frame is None:
                self._calls = ([], [])
                return self._calls
            entries = {defined.name: defined for defined in self.frame.defined}  # the last def of a name runs
            found: dict[int, list[Invocation]] = {}
            with self.engine.observing(function) as seen:
                for entry in reversed(list(entries.values())):  # outer steps are defined last
                    key = id(entry.node)
                    if key in seen.invoked:
                        continue
                    start = len(seen.invocations)
                    arguments = {p.name.value: sym("param", p.name.value) for p in _parameters(entry)}
                    self.engine.run(V(entry), **arguments)
                    found[key] = seen.invocations[start:]
            calls = [call for key, invocations in found.items() if key not in seen.invoked for call in invocations]
            self._calls = (calls, list(seen.unfollowed))
        return self._calls

    def received(self, function: Function, binding: CallRecord) -> dict[str, tuple[V, tuple, str]]:
        """Each parameter with a default of the loss: the value it receives (with the line of the
        call that passes it), where from, and how it got there. A value that differs between
        calls, that is computed at run time, or that no followed call shows, is an Unknown
        saying why (never the signature's default)."""
        if self._received is None:
            calls, unfollowed = self.loss_calls(function)
            names = [p.name.value for p in _parameters(function)]
            out: dict[str, tuple[V, tuple, str]] = {}
            for name in function.defaults:
                if not calls:
                    if name not in binding.kwargs:
                        out[name] = (unknown(self._not_followed(function, binding, name, unfollowed)), (), "unknown")
                    continue
                readings = [self._argument_at(call, binding, names, name) for call in calls]
                value, where, origin = readings[0]
                if any(not is_const(v) for v, _, _ in readings):
                    bad = next(r for r in readings if not is_const(r[0]))
                    value = unknown(f"{name}: the value {function.name}() receives ({bad[2]}) is not decided: "
                                    f"{why_not_constant(bad[0])}")
                    origin = "unknown"
                elif len({repr(plain(v)) for v, _, _ in readings}) > 1:
                    shown = ", ".join(sorted({f"{plain(v)!r} {o}" for v, _, o in readings}))
                    value, origin = unknown(f"{name}: {function.name}() receives different values: {shown}"), "unknown"
                out[name] = (value.with_lines(where) if origin.startswith("passed") else value, where, origin)
            self._received = out
        return self._received

    def _argument_at(self, call: Invocation, binding: CallRecord, names: list[str], name: str
                     ) -> tuple[V, tuple, str]:
        """What one call gives parameter ``name``: (value, the line passing it, how it got there)."""
        index = names.index(name)
        if index < len(call.args):
            value = call.args[index]
        elif name in call.kwargs:
            value = call.kwargs[name]
            if value is binding.kwargs.get(name):
                return value, (), "bound by train()"
        else:
            return call.function.defaults[name], (), f"{call.function.name}() default"
        passing = [(frame, arg) for frame, node in reversed(call.sites) for arg in node.args
                   if arg.keyword is not None and arg.keyword.value == name]
        # The innermost call that writes the keyword; else (positional, or inside a **mapping)
        # the call that calls the loss.
        frame, node = passing[0] if passing else call.sites[-1]
        where = self.engine.where(frame.module, node)
        caller = frame.function.name if frame.function is not None else frame.module.dotted
        return value, (where,), f"passed by {caller}() at {where.path}:{where.line}"

    def _not_followed(self, function: Function, binding: CallRecord, name: str, unfollowed: list) -> str:
        partial = f"{binding.path}:{binding.line}"
        if unfollowed:
            frame, node, why = unfollowed[0]
            where = self.engine.where(frame.module, node)
            caller = frame.function.name if frame.function is not None else frame.module.dotted
            return (f"{name}: functools.partial({function.name}, ...) at {partial} does not bind it, and the call "
                    f"in {caller}() at {where.path}:{where.line} is not followed ({why}): the value the loss "
                    "receives is not known")
        return (f"{name}: functools.partial({function.name}, ...) at {partial} does not bind it, and no call of "
                "the loss in train() could be followed: the value it receives is not known")

    def optimizer_call(self, name: str) -> CallRecord | None:
        """The ``optax.<name>`` call whose result is part of the optimizer train() initializes
        (``optimizer.init(...)``): the one that runs, not an unused one written before it. None when
        no initialized optimizer shows one."""
        for record in self.records("init"):
            callee = record.callee.data
            if not (isinstance(callee, Sym) and callee.op == "attr" and callee.args):
                continue
            receiver = callee.args[0]
            used = [r for r in self.records(name) if mentions(receiver, lambda v, r=r: v is r.result)]
            if used:
                return used[-1]
        return None

    def argument(self, record: CallRecord, name: str, index: int) -> V | None:
        """The argument a call passed for parameter ``name`` (keyword, else position ``index``)."""
        if name in record.kwargs:
            return record.kwargs[name]
        callee = record.callee.data
        if isinstance(callee, Function):
            names = [p.name.value for p in _parameters(callee)]
            if name in names:
                index = names.index(name)
        return record.args[index] if 0 <= index < len(record.args) else None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _as_setting(value: V, where: tuple, origin: str) -> Setting:
    if is_const(value):
        data = plain(value)
        return Setting(data, tuple(sorted(set(value.lines) | set(where))), origin)
    from ..engine.flow import Unknown, describe
    text = value.data.reason if isinstance(value.data, Unknown) else describe(value)
    return Setting(Code(text), tuple(sorted(set(value.lines) | set(where))), origin)


__all__ = ["TrainRun", "setting_value", "open_arguments", "Partial"]
