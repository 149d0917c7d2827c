"""Calls: binding arguments, invoking functions and classes of the files read, recording what
observed functions receive, and the methods of known constants.
"""

from __future__ import annotations

import libcst as cst

from brax_diff.facts.model import Provenance

from .pyast import dotted_name
from .values import (
    Bound, Class, Function, Instance, Method, Native, Partial, Phi, Sym, Unknown, V, const, enum_member, is_const,
    merge, plain, short_name, sym, unknown)
from .runtime import Break, CallRecord, Continue, Frame, Invocation, MAX_DEPTH, Raised, Return
from .builtins import CALLS_THROUGH, ENVIRONMENT_READS, EXTERNAL_CALLS, STR_METHODS, str_method_refused

# Methods that change their receiver in place: one the engine does not follow makes it unknown
# (leaving the old value was a silent wrong one: `a.insert(0, 5)` read as `a` unchanged).
LIST_MUTATORS = {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"}
DICT_MUTATORS = {"update", "pop", "popitem", "setdefault", "clear"}


class Calls:
    """How calls run (a part of :class:`.core.Engine`)."""

    def _eval_call(self, node: cst.Call, frame: Frame) -> V:
        callee = self._eval(node.func, frame)
        args: list[V] = []
        kwargs: dict[str, V] = {}
        for arg in node.args:
            if arg.star == "*":
                items = self._items(self._eval(arg.value, frame))
                if items is None:
                    return self._unfollowed(callee, frame, node, arg)
                args.extend(items)
            elif arg.star == "**":
                mapping = self._eval(arg.value, frame)
                if not isinstance(mapping.data, dict):
                    return self._unfollowed(callee, frame, node, arg)
                kwargs.update({str(k): v for k, v in mapping.data.items()})
            elif arg.keyword is not None:
                kwargs[arg.keyword.value] = self._eval(arg.value, frame)
            else:
                args.append(self._eval(arg.value, frame))
        if isinstance(callee.data, Method) and callee.data.target is not None:
            target = callee.data.target
            result, updated = self._const_method(callee.data, args, kwargs, frame, node)
            if updated is not None:
                self._rebind(target, updated, frame)
            return self._record(callee, args, kwargs, frame, node, result)
        self.sites.append((frame, node))
        self.changed_arguments = None
        try:
            result = self._call(callee, args, kwargs, frame, node)
        finally:
            self.sites.pop()
        changed, self.changed_arguments = self.changed_arguments, None
        if changed and isinstance(callee.data, (Function, Bound)):
            self._pass_back(callee, changed, node, frame)
        return self._record(callee, args, kwargs, frame, node, result)

    def _pass_back(self, callee: V, changed: dict, node: cst.Call, frame: Frame) -> None:
        """A dict or list the called function changed in place: the caller's name holding it
        sees the change (``tweak(cfg)`` where tweak sets ``cfg["k"]``)."""
        shift = 1 if isinstance(callee.data, Bound) else 0
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if any(arg.star for arg in node.args):
            return
        for index, arg in enumerate(positional):
            if index + shift in changed:
                self._rebind(arg.value, changed[index + shift], frame)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in changed:
                self._rebind(arg.value, changed[arg.keyword.value], frame)

    def _unfollowed(self, callee: V, frame: Frame, node: cst.Call, arg: cst.Arg) -> V:
        """A call whose ``*``/``**`` argument is not a known sequence or dict: not made (what
        it passes is not known), and noted while observing when it calls code of the files read
        (a library's call passes nothing on to them). A model's method says what the call it
        does not make does to its receiver (``cfg.update(**unknown)``: any field may change)."""
        if isinstance(callee.data, Native) and callee.data.unfollowed is not None:
            callee.data.unfollowed(f"`{arg.star}{self._code(frame, arg.value)}` is not a known "
                                   f"{'sequence' if arg.star == '*' else 'dict'} "
                                   f"({frame.module.path}:{self._line(frame, node)})", frame, node)
        if self.observation is not None and isinstance(callee.data, (Function, Bound, Partial, Native, Class,
                                                                     Instance)):
            self.observation.unfollowed.append(
                (frame, node, f"`{arg.star}{self._code(frame, arg.value)}` is not a known "
                              f"{'sequence' if arg.star == '*' else 'dict'}"))
        return sym("call", "", (callee,), lines=self._at(frame, node))

    def _record(self, callee, args, kwargs, frame, node, result: V) -> V:
        if self.watch:
            written = (dotted_name(node.func) or "").rsplit(".", 1)[-1]
            name = written if written in self.watch else short_name(callee)
            if name in self.watch:  # a decorated method is still called by the name it is written with
                self.calls.append(CallRecord(callee, tuple(args), dict(kwargs), frame.module.path,
                                             self._line(frame, node), result, node, name))
        return result

    def _call_method(self, obj: V, name: str, args: list[V], frame, node) -> V:
        return self._call(self._getattr(obj, name, frame, node), args, {}, frame, node)

    def _call(self, callee: V, args: list[V], kwargs: dict[str, V], frame: Frame | None,
              node: cst.CSTNode | None, keep: list | None = None) -> V:
        data = callee.data
        lines = self._at(frame, node) if frame is not None and node is not None else frozenset()
        if isinstance(data, Function):
            return self._invoke(data, args, kwargs, frame, node, keep)
        if isinstance(data, Bound):
            return self._invoke(data.function, [data.receiver] + args, kwargs, frame, node, keep)
        if isinstance(data, Class):
            return self._construct(callee, args, kwargs, frame, node)
        if isinstance(data, Partial):
            return self._call(data.function, list(data.args) + args, {**data.kwargs, **kwargs}, frame, node, keep)
        if isinstance(data, Native):
            return data.call(args, kwargs, frame, node)
        if isinstance(data, Method):
            result, _ = self._const_method(data, args, kwargs, frame, node)
            return result
        if isinstance(data, Instance):
            method = data.cls.lookup("__call__")
            if method is not None:
                return self._call(self._bind(method, callee), args, kwargs, frame, node)
            return sym("call", "", (callee, *args), tuple(sorted(kwargs.items())), lines)
        if isinstance(data, Phi):
            results = [self._either(lambda o=option: self._call(o, args, kwargs, frame, node))
                       for option in data.options]
            return merge(results, data.why)
        if isinstance(data, Unknown):
            return callee
        if isinstance(data, Sym) and data.op == "ext":
            variable = args[0].data if args and data.name in ENVIRONMENT_READS else None
            if isinstance(variable, str) and variable in self.environ:
                return const(self.environ[variable])
            if data.name in self.assume:
                value = self.assume[data.name]
                return value(self, args, kwargs) if callable(value) else const(value)
            stub = EXTERNAL_CALLS.get(data.name)
            if stub is not None:
                return stub(self, args, kwargs)
            through = CALLS_THROUGH.get(data.name)
            if through is not None:
                result = sym("call", "", (callee, *args), tuple(sorted(kwargs.items())), lines)
                return through(self, result, args, kwargs, frame, node)
        return sym("call", "", (callee, *args), tuple(sorted(kwargs.items())), lines)

    def _construct(self, callee: V, args: list[V], kwargs: dict[str, V], frame, node) -> V:
        cls: Class = callee.data
        member = enum_member(cls, args, kwargs)
        if member is not None:
            return member
        instance = self._new_instance(cls, {}, (tuple(args), dict(kwargs)))
        value = V(instance)
        init = cls.lookup("__init__")
        if init is not None and isinstance(init.data, Function):
            self._invoke(init.data, [value] + args, kwargs, frame, node)
        elif any(base.fields is not None for base in cls.mro()):
            self._dataclass_init(cls, value, args, kwargs, frame, node)
        return value

    def _invoke(self, function: Function, args: list[V], kwargs: dict[str, V], caller: Frame | None,
                node: cst.CSTNode | None, keep: list | None = None) -> V:
        if self.depth >= MAX_DEPTH:
            return unknown(f"calls nested deeper than {MAX_DEPTH} at {function.name}()")
        observation = self.observation
        if observation is not None and caller is not None:
            observation.invoked.add(id(function.node))
            if function.node is observation.node:
                observation.invocations.append(Invocation(function, tuple(args), dict(kwargs), tuple(self.sites)))
                return sym("call", function.name, tuple(args), tuple(sorted(kwargs.items())))
        frame = Frame(function.module, function.closure, function)
        where = self.where(caller.module, node) if caller is not None and node is not None else None
        self._bind_arguments(function, args, kwargs, frame, where)
        if keep is not None:
            keep.append(frame)
        self.depth += 1
        self.stack.append(frame)
        try:
            if isinstance(function.node, cst.Lambda):
                return self._eval(function.node.body, frame)
            try:
                self._block(self._body(function.node), frame)
            except Raised:
                if frame.pending:  # the paths that returned earlier get past it
                    return merge([v for v, _ in frame.pending], frame.pending[0][1])
                raise
            except Return as ret:
                if frame.pending:
                    return merge([v for v, _ in frame.pending] + [ret.value], frame.pending[0][1])
                return ret.value
            except (Break, Continue):
                pass
            if frame.pending:
                return merge([v for v, _ in frame.pending] + [const(None)], frame.pending[0][1])
            return const(None)
        finally:
            self.depth -= 1
            self.stack.pop()
            self.changed_arguments = self._changed_parameters(function, frame, len(args)) if frame.mutated else None

    def _changed_parameters(self, function: Function, frame: Frame, given: int) -> dict | None:
        """Parameters whose container the function changed in place: position (for those passed
        by position) and name -> the container after the call."""
        if isinstance(function.node, cst.Lambda):
            return None
        params = function.node.params
        names = [p.name.value for p in (*params.posonly_params, *params.params)]
        out: dict = {}
        for name in frame.mutated:
            value = frame.locals.get(name)
            if value is None or not isinstance(value.data, (dict, list)):
                continue
            if name in names and names.index(name) < given:
                out[names.index(name)] = value
            elif name in names or name in {p.name.value for p in params.kwonly_params}:
                out[name] = value
        return out or None

    def _bind_arguments(self, function: Function, args: list[V], kwargs: dict[str, V], frame: Frame,
                        where: Provenance | None) -> None:
        params = function.node.params
        positional = [*params.posonly_params, *params.params]
        names = [p.name.value for p in positional]
        remaining = list(args)
        for name in names:
            if remaining:
                frame.locals[name] = remaining.pop(0)
        star = params.star_arg
        if isinstance(star, cst.Param):
            frame.locals[star.name.value] = V(tuple(remaining))
            remaining = []
        elif remaining:
            raise Raised("TypeError", f"{function.name}() takes {len(names)} positional arguments but "
                         f"{len(args)} were given", where)
        extra: dict[str, V] = {}
        kwonly = [p.name.value for p in params.kwonly_params]
        for key, value in kwargs.items():
            if key in names or key in kwonly:
                if key in frame.locals:
                    raise Raised("TypeError", f"{function.name}() got multiple values for argument {key!r}", where)
                frame.locals[key] = value
            else:
                extra[key] = value
        if params.star_kwarg is not None:
            frame.locals[params.star_kwarg.name.value] = V(extra)
        elif extra:
            raise Raised("TypeError", f"{function.name}() got an unexpected keyword argument "
                         f"{sorted(extra)[0]!r}", where)
        for name in names + kwonly:
            if name not in frame.locals:
                if name in function.defaults:
                    frame.locals[name] = function.defaults[name]
                else:
                    raise Raised("TypeError", f"{function.name}() missing required argument {name!r}", where)

    def _const_method(self, method: Method, args: list[V], kwargs: dict[str, V], frame, node) -> tuple[V, V | None]:
        """(result, the receiver after the call when the call mutates it)."""
        receiver = method.receiver
        data = receiver.data
        name = method.name
        if isinstance(data, dict):
            if name == "get":
                if args and is_const(args[0]):
                    key = plain(args[0])
                    if key in data:
                        return data[key], None
                    return (args[1] if len(args) > 1 else kwargs.get("default", const(None))), None
                return sym("call", "get", (receiver, *args)), None
            if name in ("copy", "__copy__"):
                return V(dict(data), receiver.lines), None
            if name == "items":
                return V([V((const(k), v)) for k, v in data.items()]), None
            if name == "keys":
                return V([const(k) for k in data]), None
            if name == "values":
                return V(list(data.values())), None
            if name == "pop":
                if args and is_const(args[0]):
                    key = plain(args[0])
                    updated = dict(data)
                    if key in updated:
                        return updated.pop(key), V(updated, receiver.lines)
                    if len(args) > 1:
                        return args[1], None
                    where = self.where(frame.module, node) if frame is not None and node is not None else None
                    raise Raised("KeyError", f"KeyError {key!r}", where)
            if name == "setdefault" and args and is_const(args[0]):
                key = plain(args[0])
                if key in data:
                    return data[key], None
                default = args[1] if len(args) > 1 else const(None)
                return default, V({**data, key: default}, receiver.lines)
            if name == "update" and (not args or isinstance(args[0].data, dict)) and len(args) <= 1:
                return const(None), V({**data, **(args[0].data if args else {}), **kwargs}, receiver.lines)
            if name == "clear" and not args:
                return const(None), V({}, receiver.lines)
            if name in DICT_MUTATORS:  # changes the dict in a way not followed: what it holds is unknown
                return sym("call", name, (receiver, *args)), unknown(f"dict.{name} with these arguments is not "
                                                                     "followed")
        if isinstance(data, list):
            if name == "append" and args:
                return const(None), V(list(data) + [args[0]], receiver.lines)
            if name == "extend" and args and self._items(args[0]) is not None:
                return const(None), V(list(data) + self._items(args[0]), receiver.lines)
            if name == "insert" and len(args) == 2 and is_const(args[0]) and isinstance(plain(args[0]), int):
                updated = list(data)
                updated.insert(plain(args[0]), args[1])
                return const(None), V(updated, receiver.lines)
            if name == "pop" and len(args) <= 1 and data and (not args or (
                    is_const(args[0]) and isinstance(plain(args[0]), int) and -len(data) <= plain(args[0]) < len(data))):
                updated = list(data)
                return updated.pop(plain(args[0]) if args else -1), V(updated, receiver.lines)
            if name == "reverse" and not args:
                return const(None), V(list(reversed(data)), receiver.lines)
            if name == "clear" and not args:
                return const(None), V([], receiver.lines)
            if name == "copy":
                return V(list(data), receiver.lines), None
            if name == "index" and args and is_const(args[0]) and all(is_const(x) for x in data):
                values = [plain(x) for x in data]
                if plain(args[0]) in values:
                    return const(values.index(plain(args[0]))), None
            if name in LIST_MUTATORS:  # changes the list in a way not followed: what it holds is unknown
                return sym("call", name, (receiver, *args)), unknown(f"list.{name} with these arguments is not "
                                                                     "followed")
        if isinstance(data, str) and all(is_const(a) for a in args) and all(is_const(v) for v in kwargs.values()):
            fn = getattr(str, name, None)
            if fn is not None and name in STR_METHODS:
                refused = str_method_refused(name, data, [plain(a) for a in args])
                if refused:
                    return unknown(f"str.{name}: {refused}"), None
                try:
                    result = fn(data, *[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})
                except (TypeError, ValueError) as exc:
                    return unknown(f"str.{name}: {exc}"), None
                return const(result, receiver.lines), None
        if data is None:
            where = self.where(frame.module, node) if frame is not None and node is not None else None
            raise Raised("AttributeError", f"'NoneType' object has no attribute {name!r}", where)
        return sym("call", name, (receiver, *args)), None
