"""Statements: assignments, conditionals and their merge, try, def and class, imports.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import libcst as cst

from .pyast import dotted_name
from .values import (
    Class, Function, Instance, Lazy, Module, Partial, Phi, SKIP, UNBOUND_V, Unknown, V, const, is_const, merge,
    merge_names, plain, sym, unknown, why_not_constant)
from .runtime import Break, Continue, Failure, Frame, OutOfBudget, Raised, Return, STEP_BUDGET
from .builtins import AUG_OPS
from .reading import bound_names, target_names, walk


class Statements:
    """How each kind of statement runs (a part of :class:`.core.Engine`)."""

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > STEP_BUDGET:
            raise OutOfBudget()

    def _block(self, statements: Iterable[cst.CSTNode], frame: Frame) -> None:
        for statement in statements:
            self._statement(statement, frame)

    def _body(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        body = node.body
        return list(body.body) if hasattr(body, "body") else [body]

    def _statement(self, node: cst.CSTNode, frame: Frame) -> None:
        self._tick()
        try:
            self._dispatch(node, frame)
        except Raised as error:
            if self.fork_depth or self.try_depth:
                raise  # the branch (or a handler) decides what the raise means
            definite = not any(f.pending for f in self.stack)
            self.failures.append(Failure(error, definite))

    def _dispatch(self, node: cst.CSTNode, frame: Frame) -> None:
        if type(node) is cst.SimpleStatementLine:
            for small in node.body:
                self._small(small, frame)
        elif type(node) is cst.If:
            self._if(node, frame)
        elif type(node) is cst.FunctionDef:
            self._def(node, frame)
        elif type(node) is cst.ClassDef:
            self._class(node, frame)
        elif type(node) is cst.For:
            self._for(node, frame)
        elif type(node) is cst.While:
            self._while(node, frame)
        elif type(node) is cst.Try:
            self._try(node, frame)
        elif type(node) is cst.With:
            for item in node.items:
                value = self._eval(item.item, frame)
                if item.asname is not None:
                    self._assign(item.asname.name, sym("call", "__enter__", (value,)), frame)
            self._block(self._body(node), frame)
        elif isinstance(node, cst.BaseSmallStatement):  # last: an ABC's isinstance is slow
            self._small(node, frame)
        elif type(node) is cst.Match:
            self._match(node, frame)
        else:  # async constructs, ...: what they may set is unknown afterwards
            self._unmodelled(node, frame, f"a `{type(node).__name__}` statement")

    def _unmodelled(self, node: cst.CSTNode, frame: Frame, what: str) -> None:
        """A statement the engine does not run: every name, attribute, item or config key it
        may set becomes an Unknown naming the statement (file, line, function), never left as it was."""
        where = f"{frame.module.path}:{self._line(frame, node)}"
        if frame.function is not None:
            where += f", in {frame.function.name}()"
        reason = unknown(f"set by {what} the engine does not follow ({where})")
        for name in bound_names(node):
            self._set(name, reason, frame)
        for child in walk(node):
            targets: list = []
            if isinstance(child, cst.AssignTarget):
                targets = [child.target]
            elif isinstance(child, (cst.AugAssign, cst.AnnAssign)):
                targets = [child.target]
            elif isinstance(child, cst.Call):
                self._unmodelled_call(child, frame, reason)
            for target in targets:
                if isinstance(target, cst.Name):
                    self._set(target.value, reason, frame)
                elif isinstance(target, (cst.Attribute, cst.Subscript)):
                    self._poison(target, frame, reason)

    def _poison(self, target: cst.CSTNode, frame: Frame, reason: V) -> None:
        try:
            if isinstance(target, cst.Attribute):
                self._setattr(self._eval(target.value, frame), target.attr.value, reason)
                return
            container = self._eval(target.value, frame)
            index = self._index(target, frame)
            if isinstance(container.data, Instance):
                if index is not None and isinstance(index.data, str):
                    self._setattr(container, index.data, reason)
                else:
                    self._poison_all(container, reason)
            elif isinstance(container.data, dict):
                if index is not None and is_const(index):
                    self._rebind(target.value, V({**container.data, plain(index): reason}, container.lines), frame)
                else:
                    self._rebind(target.value, reason, frame)
        except (Raised, Return, Break, Continue):
            pass

    def _poison_all(self, obj: V, reason: V, adds: bool = True) -> None:
        """Every attribute of ``obj`` becomes ``reason``; ``adds``: the write may also have added
        attributes no one can list (the object is :meth:`opened <.core.Engine.open>`)."""
        if isinstance(obj.data, Instance):
            for name in list(obj.data.attrs):
                self._write(obj.data, name, reason)
            if adds:
                self.open(obj.data, why_not_constant(reason))

    def _unmodelled_call(self, call: cst.Call, frame: Frame, reason: V) -> None:
        """``x.update(...)`` / ``setattr(x, "k", ...)`` inside an unfollowed statement."""
        try:
            name = dotted_name(call.func) or ""
            if name == "setattr" and len(call.args) >= 2:
                key = self._eval(call.args[1].value, frame)
                obj = self._eval(call.args[0].value, frame)
                if isinstance(key.data, str):
                    self._setattr(obj, key.data, reason)
                else:
                    self._poison_all(obj, reason)
            elif isinstance(call.func, cst.Attribute) and call.func.attr.value in ("update", "setdefault", "pop"):
                obj = self._eval(call.func.value, frame)
                keywords = [a.keyword.value for a in call.args if a.keyword is not None]
                if keywords and len(keywords) == len(call.args):
                    for key in keywords:
                        self._setattr(obj, key, reason)
                elif isinstance(obj.data, Instance):
                    self._poison_all(obj, reason)
                elif isinstance(obj.data, dict):
                    self._rebind(call.func.value, reason, frame)
        except (Raised, Return, Break, Continue):
            pass

    def _match(self, node: cst.Match, frame: Frame) -> None:
        """``match`` on a constant with value, ``|``, capture and wildcard patterns; any other
        pattern (or an undecided one) is a statement the engine does not follow."""
        subject = self._eval(node.subject, frame)
        if self.decide is not None and self.decide(node, subject, None, frame) is SKIP:
            return
        for case in node.cases:
            fired = self._pattern(case.pattern, subject, frame)
            if fired is True and case.guard is not None:
                fired = self._truth(self._eval(case.guard, frame))
            if fired is None:
                self._unmodelled(node, frame, "a `match` whose case it cannot decide")
                return
            if fired:
                self._block(self._body(case), frame)
                return

    def _pattern(self, pattern: cst.CSTNode, subject: V, frame: Frame) -> bool | None:
        if isinstance(pattern, (cst.MatchValue, cst.MatchSingleton)):
            value = self._eval(pattern.value, frame)
            if not (is_const(value) and is_const(subject)):
                return None
            return plain(value) == plain(subject)
        if isinstance(pattern, cst.MatchOr):
            answers = [self._pattern(p.pattern, subject, frame) for p in pattern.patterns]
            return True if True in answers else (None if None in answers else False)
        if isinstance(pattern, cst.MatchAs):
            fired = True if pattern.pattern is None else self._pattern(pattern.pattern, subject, frame)
            if fired and pattern.name is not None:
                self._set(pattern.name.value, subject, frame)
            return fired
        return None

    def _small(self, node: cst.CSTNode, frame: Frame) -> None:
        if type(node) is cst.Expr:
            self._eval(node.value, frame)
        elif type(node) is cst.Assign:
            value = self._eval(node.value, frame)
            for target in node.targets:
                self._assign(target.target, value, frame)
                if frame.aliases and type(target.target) is cst.Name:
                    frame.aliases.pop(target.target.value, set()).discard(target.target.value)
            if type(node.value) is cst.Name and isinstance(value.data, (dict, list)):
                # Containers are values here: `b = a` keeps the names together, so that a change
                # through either is seen through both.
                group = frame.aliases.setdefault(node.value.value, {node.value.value})
                for target in node.targets:
                    if type(target.target) is cst.Name:
                        group.add(target.target.value)
                        frame.aliases[target.target.value] = group
        elif type(node) is cst.AnnAssign:
            if node.value is not None:
                self._assign(node.target, self._eval(node.value, frame), frame)
        elif type(node) is cst.AugAssign:
            current = self._eval(node.target, frame)
            right = self._eval(node.value, frame)
            op = AUG_OPS.get(type(node.operator))
            value = self._binary(op, current, right, node, frame) if op else unknown("operator")
            if (isinstance(current.data, list) and type(node.operator) is cst.AddAssign) or (
                    isinstance(current.data, dict) and type(node.operator) is cst.BitOrAssign):
                self._rebind(node.target, value, frame)  # in place: every name holding the container sees it
            else:
                self._assign(node.target, value, frame)
        elif type(node) is cst.Return:
            raise Return(self._eval(node.value, frame) if node.value is not None else const(None))
        elif type(node) is cst.Raise:
            self._raise(node, frame)
        elif type(node) is cst.Assert:
            test = self._eval(node.test, frame)
            truth = self._truth(test)
            if truth is False:
                message = self._message(node.msg, frame) if node.msg is not None else ""
                raise Raised("AssertionError", f"`assert {self._code(frame, node.test)}` fails"
                             + (f": {message}" if message else ""), self.where(frame.module, node))
        elif type(node) is cst.Import:
            for alias in node.names:
                dotted = dotted_name(alias.name) or ""
                if alias.asname is not None:
                    self._set(alias.asname.name.value, self._import(dotted), frame)
                else:
                    self._import(dotted)
                    top = dotted.split(".")[0]
                    self._set(top, self._import(top), frame)
        elif type(node) is cst.ImportFrom:
            self._import_from(node, frame)
        elif type(node) is cst.Global:
            frame.globals_declared |= {n.name.value for n in node.names}
        elif type(node) is cst.Nonlocal:
            frame.nonlocals_declared |= {n.name.value for n in node.names}
        elif type(node) is cst.Del:
            for name in target_names(node.target):
                frame.locals.pop(name, None)
            targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
            for target in targets:
                target = getattr(target, "value", target) if isinstance(target, cst.Element) else target
                if isinstance(target, (cst.Attribute, cst.Subscript)):
                    self._delete(target, frame)
        elif type(node) is cst.Break:
            raise Break()
        elif type(node) is cst.Continue:
            raise Continue()

    def _import_from(self, node: cst.ImportFrom, frame: Frame) -> None:
        base = dotted_name(node.module) if node.module is not None else ""
        if node.relative:
            package = frame.module.dotted if self.loader.is_package(frame.module.path) else \
                frame.module.dotted.rpartition(".")[0]
            for _ in range(len(node.relative) - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        if isinstance(node.names, cst.ImportStar):
            module = self.module(base)
            star = V(module) if module is not None else sym("ext", base)
            if not any(existing.data is star.data for existing in frame.module.stars if isinstance(star.data, Module)):
                frame.module.stars.append(star)
            return
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            bound = alias.asname.name.value if alias.asname is not None else name
            value = self._from_import(base, name)
            if frame.function is not None and isinstance(value.data, Lazy):
                value = value.data.resolve()  # an import in a function runs when the function does
                module = self._module(base)
                if isinstance(value.data, Unknown) and module is not None and module.source is not None and \
                        "__getattr__" not in module.bindings and \
                        not any(not isinstance(star.data, Module) for star in module.stars):
                    raise Raised("ImportError", f"cannot import name {name!r} from {base} ({module.path})",
                                 self.where(frame.module, node))
            self._set(bound, value, frame)

    def _raise(self, node: cst.Raise, frame: Frame) -> None:
        kind = "exception"
        message = ""
        if node.exc is not None:
            exc = node.exc
            callee = exc.func if isinstance(exc, cst.Call) else exc
            kind = (dotted_name(callee) or "exception").rsplit(".", 1)[-1]
            if isinstance(exc, cst.Call) and exc.args:
                message = self._message(exc.args[0].value, frame)
        if self.handling:  # raised while handling another: say what that was
            message = (message + "; " if message else "") + f"while handling: {self.handling[-1].message}"
        raise Raised(kind, f"raise {kind}" + (f": {message}" if message else ""), self.where(frame.module, node))

    def _message(self, node: cst.CSTNode, frame: Frame) -> str:
        try:
            value = self._eval(node, frame)
        except Raised:
            value = unknown("")
        if isinstance(value.data, str):
            return value.data
        return frame.module.source.code(node)[:160]

    def _if(self, node: cst.If, frame: Frame) -> None:
        test = self._eval(node.test, frame)
        truth = self._truth(test)
        if self.decide is not None:
            truth = self.decide(node, test, truth, frame)
            if truth is SKIP:
                return
        orelse = node.orelse
        if truth is True:
            self._block(self._body(node), frame)
            return
        if truth is False:
            if isinstance(orelse, cst.If):
                self._if(orelse, frame)
            elif isinstance(orelse, cst.Else):
                self._block(self._body(orelse), frame)
            return
        why = f"depends on `{self._code(frame, node.test)}` ({frame.module.path}:{self._line(frame, node)})"

        def taken() -> None:
            self._block(self._body(node), frame)

        def not_taken() -> None:
            if isinstance(orelse, cst.If):
                self._if(orelse, frame)
            elif isinstance(orelse, cst.Else):
                self._block(self._body(orelse), frame)

        self._branches([taken, not_taken], frame, why)

    def _branches(self, paths: list[Callable[[], None]], frame: Frame, why: str) -> None:
        """Run each path from the same state; merge the states of the paths that go on.

        A path that raises is dropped (the run may take another); a path that returns
        leaves its value pending on the frame (the function's result becomes a Phi)."""
        start_locals = dict(frame.locals)
        outer, outer_floor = self.journal, self.journal_floor
        floor = len(self.instances)
        touched: dict[int, tuple[Instance, dict]] = {}  # objects some path wrote: state at the fork
        ends: list[tuple[dict, dict]] = []
        raised: list[Raised] = []
        loop_exit: list[type] = []
        for path in paths:
            frame.locals = dict(start_locals)
            self.journal, self.journal_floor = {}, floor
            self.fork_depth += 1
            went_on = False
            try:
                path()
                went_on = True
            except Return as ret:
                frame.pending.append((ret.value, why))
            except Raised as error:
                raised.append(error)
                self.failures.append(Failure(error, False))
            except (Break, Continue) as jump:
                loop_exit.append(type(jump))
                went_on = True
            finally:
                self.fork_depth -= 1
                journal = self.journal
                self.journal, self.journal_floor = outer, outer_floor
            written = {key: dict(inst.attrs) for key, (inst, _) in journal.items()}
            for key, (inst, before) in journal.items():  # undo: the next path starts from the fork
                touched.setdefault(key, (inst, before))
                inst.attrs = before
            if went_on:
                ends.append((dict(frame.locals), written))
        for key, (inst, before) in touched.items():  # the outer path sees these writes too
            if outer is not None and inst.serial < outer_floor and key not in outer:
                outer[key] = (inst, dict(before))
        if not ends:
            if raised and len(raised) == len(paths):
                raise raised[0]
            if frame.pending:  # every path returned
                values = frame.pending
                frame.pending = []
                raise Return(merge([v for v, _ in values], why))
            raise raised[0] if raised else Return(const(None))
        frame.locals = merge_names([locals_ for locals_, _ in ends], why)
        for key, (inst, before) in touched.items():  # objects made on one path keep what it gave them
            inst.attrs = merge_names([written.get(key, before) for _, written in ends], why)
        if loop_exit and len(loop_exit) == len(ends):
            raise loop_exit[0]()

    def _try(self, node: cst.Try, frame: Frame) -> None:
        try:
            try:
                self.try_depth += 1
                try:
                    self._block(self._body(node), frame)
                finally:
                    self.try_depth -= 1
            except Raised as error:
                for handler in node.handlers:
                    if self._handles(handler, error, frame):
                        if handler.name is not None:
                            self._assign(handler.name.name, sym("ext", error.kind), frame)
                        self.handling.append(error)
                        try:
                            self._block(self._body(handler), frame)
                        finally:
                            self.handling.pop()
                        break
                else:
                    raise
            else:
                if node.orelse is not None:
                    self._block(self._body(node.orelse), frame)
        finally:
            if node.finalbody is not None:
                self._block(self._body(node.finalbody), frame)

    def _handles(self, handler: cst.ExceptHandler, error: Raised, frame: Frame) -> bool:
        if handler.type is None:
            return True
        names = [dotted_name(e.value) for e in handler.type.elements] if isinstance(handler.type, cst.Tuple) \
            else [dotted_name(handler.type)]
        short = {(n or "").rsplit(".", 1)[-1] for n in names}
        return bool(short & {error.kind, "Exception", "BaseException"}) or (
            error.kind in ("KeyError", "IndexError") and "LookupError" in short) or (
            error.kind in ("ZeroDivisionError", "OverflowError") and "ArithmeticError" in short)

    def _def(self, node: cst.FunctionDef, frame: Frame) -> None:
        closure = frame.parent if frame.is_class else (frame if frame.function else None)
        function = Function(node, frame.module, closure)
        function.defaults = self._defaults(node.params, frame)
        if frame.is_class:
            frame.class_functions.append(function)
        elif frame.function is not None:
            frame.defined.append(function)
        value = V(function)
        for decorator in reversed(node.decorators):
            value = self._decorate(decorator.decorator, value, frame)
        self._set(node.name.value, value, frame)

    def _decorate(self, expr: cst.CSTNode, value: V, frame: Frame) -> V:
        name = (dotted_name(expr.func if isinstance(expr, cst.Call) else expr) or "").rsplit(".", 1)[-1]
        if name in ("staticmethod", "classmethod", "property") and isinstance(value.data, Function):
            value.data.kind = name
            return value
        if name.endswith("setter") or name.endswith("deleter"):
            return value
        if name == "dataclass" and isinstance(value.data, Class):  # its __init__ is generated from the fields
            value.data.fields = self._dataclass_fields(value.data, frame)
            return value
        decorator = self._eval(expr, frame)
        if isinstance(decorator.data, (Function, Class, Partial)):
            result = self._call(decorator, [value], {}, frame, expr)
            return result
        return value  # a decorator outside the files read: taken to keep the call's meaning

    def _dataclass_fields(self, cls: Class, frame: Frame) -> list:
        fields = []
        for statement in self._body(cls.node) if cls.node is not None else ():
            for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
                if not (isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)):
                    continue
                if "ClassVar" in (frame.module.source.code(small.annotation.annotation) if frame.module.source
                                  else ""):
                    continue
                name = small.target.value
                default = factory = None
                if small.value is not None:
                    declared = cls.namespace.get(name)
                    is_field = isinstance(small.value, cst.Call) and \
                        (dotted_name(small.value.func) or "").rsplit(".", 1)[-1] == "field"
                    if is_field:
                        for arg in small.value.args:
                            if arg.keyword is not None and arg.keyword.value == "default":
                                default = self._eval(arg.value, frame)
                            elif arg.keyword is not None and arg.keyword.value == "default_factory":
                                factory = self._eval(arg.value, frame)
                        if default is None and factory is None:
                            default = None
                    else:
                        default = declared if declared is not None else self._eval(small.value, frame)
                fields.append((name, default, factory))
        return fields

    def _dataclass_init(self, cls: Class, value: V, args: list[V], kwargs: dict[str, V], frame, node) -> None:
        """The ``__init__`` a dataclass generates: fields of its bases first, in order."""
        fields: dict = {}
        for base in reversed(cls.mro()):
            for field_ in base.fields or ():
                fields[field_[0]] = field_
        where = self.where(frame.module, node) if frame is not None and node is not None else None
        remaining = list(args)
        if len(remaining) > len(fields):
            raise Raised("TypeError", f"{cls.name}() takes {len(fields)} positional arguments but "
                                      f"{len(args)} were given", where)
        for name, default, factory in fields.values():
            if remaining:
                given = remaining.pop(0)
                if name in kwargs:
                    raise Raised("TypeError", f"{cls.name}() got multiple values for argument {name!r}", where)
            elif name in kwargs:
                given = kwargs[name]
            elif factory is not None:
                given = self._call(factory, [], {}, frame, node)
            elif default is not None:
                given = default
            else:
                raise Raised("TypeError", f"{cls.name}() missing required argument {name!r}", where)
            self._write(value.data, name, given)
        extra = sorted(set(kwargs) - set(fields))
        if extra:
            raise Raised("TypeError", f"{cls.name}() got an unexpected keyword argument {extra[0]!r}", where)
        post = cls.lookup("__post_init__")
        if post is not None and isinstance(post.data, Function):
            self._invoke(post.data, [value], {}, frame, node)

    def _defaults(self, params: cst.Parameters, frame: Frame) -> dict[str, V]:
        out = {}
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None:
                out[param.name.value] = self._eval(param.default, frame)
        return out

    def _class(self, node: cst.ClassDef, frame: Frame) -> None:
        bases = [self._eval(arg.value, frame) for arg in node.bases if arg.keyword is None]
        body = Frame(frame.module, frame.parent, frame.function, is_class=True)
        body.parent = frame if frame.function else None
        cls = Class(node.name.value, bases, body.locals, frame.module, node)
        try:
            self._block(self._body(node), body)
        except (Raised, Return):
            pass
        for function in body.class_functions + [v.data for v in cls.namespace.values()
                                                   if isinstance(v.data, Function)]:
            if function.owner is None:
                function.owner = cls
        value = V(cls)
        for decorator in reversed(node.decorators):
            value = self._decorate(decorator.decorator, value, frame)
        self._set(node.name.value, value, frame)

    def _set(self, name: str, value: V, frame: Frame) -> None:
        if name in frame.globals_declared:
            self._write_name(frame.module.globals, name, value)
        elif name in frame.nonlocals_declared:  # the enclosing function's name
            scope = frame.parent
            while scope is not None and name not in scope.locals:
                scope = scope.parent
            (scope.locals if scope is not None else frame.locals)[name] = value
        else:
            frame.locals[name] = value

    def _assign(self, target: cst.CSTNode, value: V, frame: Frame) -> None:
        if isinstance(target, cst.Name):
            self._set(target.value, value, frame)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            items = self._items(value)
            starred = [i for i, e in enumerate(elements) if type(e) is cst.StarredElement]
            if items is not None and (len(items) == len(elements) or starred):
                if starred:
                    s = starred[0]
                    tail = len(elements) - s - 1
                    parts = list(items[:s]) + [V(list(items[s:len(items) - tail]))] + list(items[len(items) - tail:])
                else:
                    parts = list(items)
                for element, part in zip(elements, parts):
                    self._assign(element.value, part, frame)
            else:
                for index, element in enumerate(elements):
                    self._assign(element.value, sym("item", "", (value, const(index))), frame)
        elif isinstance(target, cst.Attribute):  # an object's setting is (re)defined here: cite it
            obj = self._eval(target.value, frame)
            self._setattr(obj, target.attr.value, value.with_lines(self._at(frame, target)), frame, target)
        elif isinstance(target, cst.Subscript):
            container = self._eval(target.value, frame)
            index = self._index(target, frame)
            if isinstance(container.data, dict) and index is not None and is_const(index):
                updated = dict(container.data)
                updated[plain(index)] = value
                self._rebind(target.value, V(updated, container.lines), frame)
            elif isinstance(container.data, list) and index is not None and isinstance(index.data, int):
                updated = list(container.data)
                if -len(updated) <= index.data < len(updated):
                    updated[index.data] = value
                    self._rebind(target.value, V(updated, container.lines), frame)
            elif isinstance(container.data, Instance):
                self._call_method(container, "__setitem__", [index or unknown("index"), value], frame, target)
        elif isinstance(target, cst.StarredElement):
            self._assign(target.value, value, frame)

    def _delete(self, target: cst.CSTNode, frame: Frame) -> None:
        """``del obj.attr`` / ``del d[key]``: the attribute or key is gone (an object's key a
        config no longer passes); one the engine cannot place makes the container unknown."""
        container = self._eval(target.value, frame)
        key: Any = target.attr.value if isinstance(target, cst.Attribute) else None
        if isinstance(target, cst.Subscript):
            index = self._index(target, frame)
            key = plain(index) if index is not None and is_const(index) else None
        if isinstance(container.data, Instance) and isinstance(key, str) and key in container.data.attrs:
            self._write(container.data, key, UNBOUND_V)  # journaled like any write, then removed
            del container.data.attrs[key]
        elif isinstance(container.data, dict) and key is not None and key in container.data:
            self._rebind(target.value, V({k: v for k, v in container.data.items() if k != key}, container.lines),
                         frame)
        elif isinstance(container.data, (dict, Instance)):
            self._unmodelled_delete(target, container, frame)

    def _unmodelled_delete(self, target: cst.CSTNode, container: V, frame: Frame) -> None:
        reason = unknown(f"`del {self._code(frame, target)}` of a key the engine cannot place "
                         f"({frame.module.path}:{self._line(frame, target)})")
        if isinstance(container.data, Instance):
            self._poison_all(container, reason, adds=False)
        else:
            self._rebind(target.value, reason, frame)

    def _rebind(self, target: cst.CSTNode, value: V, frame: Frame) -> None:
        """Containers are values here: a mutation rebinds the name or attribute holding it (and
        the names that alias it)."""
        if isinstance(target, (cst.Name, cst.Attribute, cst.Subscript)):
            self._assign(target, value, frame)
        if type(target) is cst.Name:
            frame.mutated.add(target.value)
            for other in frame.aliases.get(target.value, ()):
                if other != target.value:
                    self._set(other, value, frame)

    def _setattr(self, obj: V, name: str, value: V, frame: Frame | None = None,
                 node: cst.CSTNode | None = None) -> None:
        data = obj.data
        if self.on_setattr is not None and frame is not None:
            self.on_setattr(obj, name, value, frame, node)
        if isinstance(data, Instance):
            self._write(data, name, value)
        elif isinstance(data, Class):
            self._write_name(data.namespace, name, value)
        elif isinstance(data, Module):
            self._write_name(data.globals, name, value)
        elif isinstance(data, Phi):
            for option in data.options:
                if isinstance(option.data, Instance):
                    self._write(option.data, name, merge([option.data.attrs.get(name, UNBOUND_V), value], data.why))

    def _name(self, name: str, frame: Frame, node: cst.CSTNode | None) -> V:
        if name in frame.locals and name not in frame.globals_declared:
            return self._resolved(frame.locals, name)
        scope = frame.parent
        while scope is not None:
            if name in scope.locals:
                return self._resolved(scope.locals, name)
            scope = scope.parent
        found = self._module_name(frame.module, name)
        if found is not None:
            return found
        if name in self.builtins:
            return self.builtins[name]
        if any(not isinstance(star.data, Module) for star in frame.module.stars):
            return sym("ext", name)
        return unknown(f"name {name!r} not found in {frame.module.path}")

    def _resolved(self, names: dict, name: str) -> V:
        value = names[name]
        if isinstance(value.data, Lazy):
            value = names[name] = value.data.resolve()
        return value
