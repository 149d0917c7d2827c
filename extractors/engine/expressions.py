"""Expressions: names, operators, comparisons, subscripts, comprehensions, attributes, truth.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import libcst as cst

from brax_diff.safety.limits import format_spec_refused, int_literal_refused, result_refused

from .values import (
    Bound, Class, Function, Instance, MAX_OPTIONS, Method, Module, Native, NativeMethod, Partial, Phi, Super, Sym,
    Unknown, V, const, identical, is_const, merge, plain, sym, unknown)
from .runtime import Failure, Frame, MAX_ITERATIONS, Raised
from .builtins import BIN_OPS, COMPARE, CONST_METHODS, DUNDER, EXTERNAL_CONSTANTS, EXTERNAL_NAMESPACES, apply_op


class Expressions:
    """How expressions evaluate (a part of :class:`.core.Engine`)."""

    def _line(self, frame: Frame, node: cst.CSTNode) -> int:
        return frame.module.source.line(node)

    def _code(self, frame: Frame, node: cst.CSTNode) -> str:
        """The source text of a node (cached: conditions are printed into every Phi's why)."""
        key = id(node)
        text = self._codes.get(key)
        if text is None:
            text = self._codes[key] = frame.module.source.code(node)
        return text

    def _at(self, frame: Frame, node: cst.CSTNode) -> frozenset:
        key = (frame.module.path, id(node))
        found = self._ats.get(key)
        if found is None:
            found = self._ats[key] = frozenset((self.where(frame.module, node),))
        return found

    def _eval(self, node: cst.CSTNode, frame: Frame) -> V:
        self._tick()
        kind = type(node)
        if kind is cst.Name and node.value not in ("True", "False", "None"):
            return self._name(node.value, frame, node)
        if kind is cst.Attribute:
            return self._getattr(self._eval(node.value, frame), node.attr.value, frame, node)
        if kind is cst.Call:
            return self._eval_call(node, frame)
        if type(node) is cst.Integer:
            refused = int_literal_refused(node.value)
            if refused:
                return unknown(f"{self.where(frame.module, node).path}: {refused}")
            return V(int(node.value.replace("_", ""), 0), self._at(frame, node))
        if type(node) is cst.Float:
            return V(float(node.value.replace("_", "")), self._at(frame, node))
        if type(node) is cst.Imaginary:
            return V(complex(node.value.replace("_", "")), self._at(frame, node))
        if type(node) in (cst.SimpleString, cst.ConcatenatedString):
            value = frame.module.source.string(node)
            return V(value if isinstance(value, str) else None, self._at(frame, node))
        if type(node) is cst.FormattedString:
            parts = []
            for part in node.parts:
                if isinstance(part, cst.FormattedStringText):
                    parts.append(part.value)
                else:
                    inner = self._eval(part.expression, frame)
                    if not isinstance(inner.data, (str, int, float, bool)) and inner.data is not None:
                        return sym("ext", "str")
                    text = self._format_field(part, inner.data, frame)
                    if text is None:
                        return sym("ext", "str")
                    if isinstance(text, V):
                        return text
                    parts.append(text)
            joined = "".join(parts)
            refused = result_refused(joined)
            return unknown(f"an f-string: {refused}") if refused else V(joined, self._at(frame, node))
        if type(node) is cst.Name:
            if node.value in ("True", "False", "None"):
                return V({"True": True, "False": False, "None": None}[node.value], self._at(frame, node))
            return self._name(node.value, frame, node)
        if type(node) is cst.Attribute:
            return self._getattr(self._eval(node.value, frame), node.attr.value, frame, node)
        if type(node) is cst.Subscript:
            return self._subscript(node, frame)
        if type(node) is cst.Call:
            return self._eval_call(node, frame)
        if type(node) is cst.BinaryOperation:
            left = self._eval(node.left, frame)
            right = self._eval(node.right, frame)
            return self._binary(BIN_OPS.get(type(node.operator)), left, right, node, frame)
        if type(node) is cst.UnaryOperation:
            return self._unary(node, frame)
        if type(node) is cst.BooleanOperation:
            left = self._eval(node.left, frame)
            truth = self._truth(left)
            is_and = isinstance(node.operator, cst.And)
            if truth is not None:
                if truth is (not is_and):  # `a or b` with a true, `a and b` with a false
                    return left
                return self._eval(node.right, frame)
            right = self._either(lambda: self._eval(node.right, frame))
            return merge([left, right], f"depends on `{self._code(frame, node.left)}`")
        if type(node) is cst.Comparison:
            return self._compare(node, frame)
        if type(node) is cst.IfExp:
            truth = self._truth(self._eval(node.test, frame))
            if truth is True:
                return self._eval(node.body, frame)
            if truth is False:
                return self._eval(node.orelse, frame)
            why = f"depends on `{self._code(frame, node.test)}` ({frame.module.path}:{self._line(frame, node)})"
            return merge([self._either(lambda: self._eval(node.body, frame)),
                          self._either(lambda: self._eval(node.orelse, frame))], why)
        if type(node) is cst.Lambda:
            function = Function(node, frame.module, frame if frame.function else None)
            function.defaults = self._defaults(node.params, frame)
            return V(function)
        if type(node) in (cst.Tuple, cst.List, cst.Set):
            items: list[V] = []
            for element in node.elements:
                if isinstance(element, cst.StarredElement):
                    inner = self._items(self._eval(element.value, frame))
                    if inner is None:
                        return sym("ext", type(node).__name__.lower())
                    items.extend(inner)
                else:
                    items.append(self._eval(element.value, frame))
            if type(node) is cst.Tuple:
                return V(tuple(items))
            if type(node) is cst.List:
                return V(items)
            return sym("ext", "set", tuple(items))
        if type(node) is cst.Dict:
            out: dict = {}
            for element in node.elements:
                if isinstance(element, cst.StarredDictElement):
                    inner = self._eval(element.value, frame)
                    if not isinstance(inner.data, dict):
                        return sym("ext", "dict")
                    out.update(inner.data)
                    continue
                key = self._eval(element.key, frame)
                if not is_const(key):
                    return sym("ext", "dict")
                out[plain(key)] = self._eval(element.value, frame)
            return V(out)
        if type(node) in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
            return self._comprehension(node, frame)
        if type(node) is cst.NamedExpr:
            value = self._eval(node.value, frame)
            self._assign(node.target, value, frame)
            return value
        if type(node) is cst.Ellipsis:
            return const(Ellipsis)
        if type(node) in (cst.Await, cst.Yield):
            return sym("ext", type(node).__name__.lower())
        if type(node) is cst.StarredElement:
            return self._eval(node.value, frame)
        return unknown(f"`{type(node).__name__}` is not evaluated")

    def _either(self, evaluate: Callable[[], V]) -> V:
        """Evaluate on a path the run may not take: a raise there gives an Unknown."""
        self.fork_depth += 1
        try:
            return evaluate()
        except Raised as error:
            self.failures.append(Failure(error, False))
            return unknown(error.message)
        finally:
            self.fork_depth -= 1

    def _unary(self, node: cst.UnaryOperation, frame: Frame) -> V:
        value = self._eval(node.expression, frame)
        lines = value.lines | self._at(frame, node)
        if isinstance(node.operator, cst.Not):
            truth = self._truth(value)
            return V(not truth, lines) if truth is not None else sym("not", "", (value,), lines=lines)
        if isinstance(value.data, (int, float, complex, bool)):
            data = value.data
            if isinstance(node.operator, cst.Minus):
                return V(-data, lines)
            if isinstance(node.operator, cst.Plus):
                return V(+data, lines)
            if isinstance(node.operator, cst.BitInvert) and isinstance(data, int):
                return V(~data, lines)
        if isinstance(value.data, Phi) and all(is_const(o) for o in value.data.options):
            return merge([self._unary_const(node, o, frame) for o in value.data.options], value.data.why)
        if isinstance(value.data, Unknown):
            return value
        op = "neg" if isinstance(node.operator, cst.Minus) else ("pos" if isinstance(node.operator, cst.Plus)
                                                                 else "invert")
        return sym(op, "", (value,), lines=self._at(frame, node))

    def _format_field(self, part: cst.FormattedStringExpression, value: Any, frame: Frame) -> "str | V | None":
        """One ``{expr!conv:spec}`` of an f-string as Python formats it; None when the spec is
        not a literal the engine applies, an Unknown when a limit refuses it."""
        if part.equal is not None:
            return None
        if part.conversion:
            value = {"r": repr, "s": str, "a": ascii}[part.conversion](value)
        spec = ""
        for piece in part.format_spec or ():
            if not isinstance(piece, cst.FormattedStringText):
                return None
            spec += piece.value
        refused = format_spec_refused(spec)
        if refused:
            return unknown(f"an f-string field: {refused}")
        try:
            return format(value, spec)
        except (TypeError, ValueError) as exc:
            return unknown(f"an f-string field cannot be formatted ({exc})")

    def _unary_const(self, node: cst.UnaryOperation, value: V, frame: Frame) -> V:
        try:
            data = {cst.Minus: operator.neg, cst.Plus: operator.pos}[type(node.operator)](value.data)
            return V(data, value.lines)
        except (KeyError, TypeError):
            return unknown("unary operator")

    def _binary(self, op: str | None, left: V, right: V, node: cst.CSTNode, frame: Frame) -> V:
        lines = self._at(frame, node)
        if op is None:
            return unknown("operator")
        if isinstance(left.data, Unknown):
            return left
        if isinstance(right.data, Unknown):
            return right
        for a, b, flip in ((left, right, False), (right, left, True)):
            if isinstance(a.data, Phi) and len(a.data.options) <= MAX_OPTIONS and (is_const(b) or isinstance(
                    b.data, Phi)):
                results = [self._binary(op, o, b, node, frame) if not flip else self._binary(op, b, o, node, frame)
                           for o in a.data.options]
                return merge(results, a.data.why)
        if is_const(left) and is_const(right):
            try:
                data = apply_op(op, plain(left), plain(right))
            except (ZeroDivisionError, OverflowError) as exc:  # Python raises it too: a handler may catch it
                raise Raised(type(exc).__name__, f"`{frame.module.source.code(node)}` raises "
                             f"{type(exc).__name__} ({exc})", self.where(frame.module, node)) from None
            except (TypeError, ValueError) as exc:
                return unknown(f"`{frame.module.source.code(node)}` cannot be evaluated ({exc})")
            return const(data, left.lines | right.lines | lines)
        if isinstance(left.data, Instance):
            method = DUNDER.get(op)
            found = left.data.cls.lookup(method) if method else None
            if found is not None:
                return self._call(self._bind(found, left), [right], {}, frame, node)
        return sym(op, "", (left, right), lines=lines)

    def _compare(self, node: cst.Comparison, frame: Frame) -> V:
        left = self._eval(node.left, frame)
        lines = set(self._at(frame, node))
        result: bool | None = True
        for target in node.comparisons:
            right = self._eval(target.comparator, frame)
            outcome = self._compare_one(target.operator, left, right)
            lines |= left.lines | right.lines
            if outcome is False:
                return V(False, frozenset(lines))
            if outcome is None:
                result = None
            left = right
        if result is None:
            return sym("compare", frame.module.source.code(node), lines=lines)
        return V(True, frozenset(lines))

    def _compare_one(self, op: cst.BaseCompOp, left: V, right: V) -> bool | None:
        kind = type(op)  # exact types: libcst's nodes are ABCs, whose isinstance is slow
        if kind in (cst.Is, cst.IsNot):
            same = identical(left, right)
            return None if same is None else (same if kind is cst.Is else not same)
        if kind in (cst.In, cst.NotIn):
            if isinstance(right.data, str) and isinstance(left.data, str):
                found = left.data in right.data
                return found if isinstance(op, cst.In) else not found
            items = self._membership(right)
            if items is None or not is_const(left):
                return None
            found = plain(left) in items
            return found if isinstance(op, cst.In) else not found
        if isinstance(left.data, Phi):
            outcomes = {self._compare_one(op, o, right) for o in left.data.options}
            return outcomes.pop() if len(outcomes) == 1 else None
        if isinstance(right.data, Phi):
            outcomes = {self._compare_one(op, left, o) for o in right.data.options}
            return outcomes.pop() if len(outcomes) == 1 else None
        if not (is_const(left) and is_const(right)):
            if isinstance(op, (cst.Equal, cst.NotEqual)):
                same = identical(left, right)
                if same is True:
                    return isinstance(op, cst.Equal)
            return None
        compare = COMPARE.get(type(op))
        try:
            return bool(compare(plain(left), plain(right))) if compare else None
        except TypeError:
            return None

    def _membership(self, container: V) -> list | None:
        data = container.data
        if isinstance(data, dict):
            return list(data)
        if isinstance(data, (tuple, list)) and all(is_const(x) for x in data):
            return [plain(x) for x in data]
        if isinstance(data, Sym) and data.op == "ext" and data.name == "set" and all(is_const(x) for x in data.args):
            return [plain(x) for x in data.args]
        return None

    def _subscript(self, node: cst.Subscript, frame: Frame) -> V:
        container = self._eval(node.value, frame)
        element = node.slice[0].slice if len(node.slice) == 1 else None
        if isinstance(element, cst.Slice):
            parts = [self._eval(p, frame) if p is not None else const(None)
                     for p in (element.lower, element.upper, element.step)]
            data = container.data
            if isinstance(data, (tuple, list, str)) and all(isinstance(p.data, (int, type(None))) for p in parts):
                sliced = data[slice(*(p.data for p in parts))]
                return V(sliced, container.lines)
            return sym("item", "", (container, *parts))
        index = self._index(node, frame)
        if index is None:
            return sym("item", "", (container,))
        return self._item(container, index, frame, node)

    def _index(self, node: cst.Subscript, frame: Frame) -> V | None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            if all(isinstance(e.slice, cst.Index) for e in node.slice):
                return V(tuple(self._eval(e.slice.value, frame) for e in node.slice))
            return None
        return self._eval(node.slice[0].slice.value, frame)

    def _item(self, container: V, index: V, frame: Frame | None, node: cst.CSTNode | None) -> V:
        data = container.data
        where = self.where(frame.module, node) if frame is not None and node is not None else None
        if isinstance(data, dict) and is_const(index):
            key = plain(index)
            if key in data:
                return data[key]
            raise Raised("KeyError", f"KeyError {key!r}: the dict has keys {sorted(map(str, data))[:12]}", where)
        if isinstance(data, (tuple, list, str)) and isinstance(index.data, int) and not isinstance(index.data, bool):
            if -len(data) <= index.data < len(data):
                item = data[index.data]
                return item if isinstance(item, V) else V(item, container.lines)
            raise Raised("IndexError", f"index {index.data} out of range for {len(data)} items", where)
        if isinstance(data, Phi):
            return merge([self._item_or_unknown(o, index, frame, node) for o in data.options], data.why)
        if isinstance(data, Unknown):
            return container
        if isinstance(data, Instance):
            method = data.cls.lookup("__getitem__")
            if method is not None:
                return self._call(self._bind(method, container), [index], {}, frame, node)
        return sym("item", "", (container, index))

    def _item_or_unknown(self, container: V, index: V, frame, node) -> V:
        return self._either(lambda: self._item(container, index, frame, node))

    def _comprehension(self, node: cst.CSTNode, frame: Frame) -> V:
        inner = Frame(frame.module, frame, frame.function)
        inner.locals = {}
        results: list[V] = []
        result_dict: dict = {}
        is_dict = isinstance(node, cst.DictComp)

        def loop(comp: cst.CompFor) -> bool:
            items = self._items(self._eval(comp.iter, inner))
            if items is None or len(items) > MAX_ITERATIONS:
                return False
            for item in items:
                self._assign(comp.target, item, inner)
                keep = True
                for condition in comp.ifs:
                    truth = self._truth(self._eval(condition.test, inner))
                    if truth is None:
                        return False
                    keep = keep and truth
                if not keep:
                    continue
                if comp.inner_for_in is not None:
                    if not loop(comp.inner_for_in):
                        return False
                    continue
                if is_dict:
                    key = self._eval(node.key, inner)
                    if not is_const(key):
                        return False
                    result_dict[plain(key)] = self._eval(node.value, inner)
                else:
                    results.append(self._eval(node.elt, inner))
            return True

        if not loop(node.for_in):
            return sym("ext", "comprehension")
        if is_dict:
            return V(result_dict)
        if isinstance(node, cst.SetComp):
            return sym("ext", "set", tuple(results))
        return V(results) if isinstance(node, (cst.ListComp, cst.GeneratorExp)) else V(tuple(results))

    def _items(self, value: V) -> list[V] | None:
        """The elements a loop over ``value`` sees, or None when they are not known."""
        data = value.data
        if isinstance(data, (tuple, list)):
            return list(data)
        if isinstance(data, dict):
            return [const(k) for k in data]
        if isinstance(data, str):
            return [const(c) for c in data]
        if isinstance(data, Sym) and data.op == "ext" and data.name == "set":
            return list(data.args)
        if isinstance(data, Sym) and data.op == "range":
            return [const(i, value.lines) for i in range(*(a.data for a in data.args))]
        return None

    def _getattr(self, obj: V, name: str, frame: Frame | None, node: cst.CSTNode | None) -> V:
        data = obj.data
        if isinstance(data, Instance):
            if name in data.attrs:
                return data.attrs[name]
            found = data.cls.lookup(name)
            if found is not None:
                if isinstance(found.data, Function) and found.data.kind == "property":
                    return self._call(V(found.data), [obj], {}, frame, node)
                return self._bind(found, obj)
            if name == "__class__":
                return V(data.cls)
            return sym("attr", name, (obj,))
        if isinstance(data, Class):
            found = data.lookup(name)
            if found is not None:
                if isinstance(found.data, Function) and found.data.kind == "classmethod":
                    return V(Bound(obj, found.data))
                return found
            if name == "__name__":
                return const(data.name)
            return sym("attr", name, (obj,))
        if isinstance(data, Module):
            found = self._module_name(data, name)
            if found is not None:
                return found
            if data.source is None:
                return unknown(f"{data.path} cannot be parsed")
            if any(not isinstance(star.data, Module) for star in data.stars):
                return sym("ext", f"{data.dotted}.{name}")
            hook = self._module_name(data, "__getattr__") if name != "__getattr__" else None
            if hook is not None and isinstance(hook.data, Function):  # PEP 562: the module answers it
                return self._call(hook, [const(name)], {}, frame, node)
            where = self.where(frame.module, node) if frame is not None and node is not None else None
            raise Raised("AttributeError", f"module {data.dotted} ({data.path}) has no attribute {name!r}", where)
        if isinstance(data, Super):
            mro = data.receiver.data.cls.mro() if isinstance(data.receiver.data, Instance) else []
            after = mro[mro.index(data.cls) + 1:] if data.cls in mro else []
            for cls in after:
                if name in cls.namespace:
                    return self._bind(cls.namespace[name], data.receiver)
            return sym("attr", name, (sym("ext", "super"),))
        if isinstance(data, Sym) and data.op == "ext":
            qualified = f"{data.name}.{name}"
            if qualified in EXTERNAL_CONSTANTS:
                return const(EXTERNAL_CONSTANTS[qualified])
            if name == "__dict__" and data.name in EXTERNAL_NAMESPACES:
                return V({n: sym("ext", f"{data.name}.{n}") for n in EXTERNAL_NAMESPACES[data.name]})
            return sym("ext", qualified)
        if isinstance(data, Phi):
            return merge([self._getattr_or_unknown(o, name, frame, node) for o in data.options], data.why)
        if isinstance(data, Unknown):
            return obj
        if isinstance(data, Function) and name == "__name__":
            return const(data.name)
        if isinstance(data, (dict, list, str, tuple)) or data is None or isinstance(data, (int, float, bool)):
            if name in CONST_METHODS:
                return V(Method(obj, name, node.value if isinstance(node, cst.Attribute) else None))
        return sym("attr", name, (obj,))

    def _getattr_or_unknown(self, obj: V, name: str, frame, node) -> V:
        return self._either(lambda: self._getattr(obj, name, frame, node))

    def _bind(self, found: V, receiver: V) -> V:
        if isinstance(found.data, NativeMethod):
            method = found.data
            unfollowed = None if method.unfollowed is None else (
                lambda why, frame, node: method.unfollowed(self, receiver, why, frame, node))
            return V(Native(method.name, lambda args, kwargs, frame, node:
                            method.call(self, receiver, args, kwargs, frame, node), unfollowed))
        if isinstance(found.data, Function) and found.data.kind not in ("staticmethod",):
            if found.data.kind == "classmethod" and isinstance(receiver.data, Instance):
                return V(Bound(V(receiver.data.cls), found.data))
            return V(Bound(receiver, found.data))
        return found

    def _truth(self, value: V) -> bool | None:
        data = value.data
        if data is None or isinstance(data, (bool, int, float, str, complex)):
            return bool(data)
        if isinstance(data, (tuple, list, dict)):
            return bool(data)
        if isinstance(data, (Function, Class, Module, Bound, Partial, Native, Method)):
            return True
        if isinstance(data, Instance):
            if data.cls.lookup("__bool__") is None and data.cls.lookup("__len__") is None:
                return True
            return None
        if isinstance(data, Phi):
            truths = {self._truth(o) for o in data.options}
            return truths.pop() if len(truths) == 1 else None
        if isinstance(data, Sym) and data.op == "not":
            inner = self._truth(data.args[0])
            return None if inner is None else not inner
        return None
