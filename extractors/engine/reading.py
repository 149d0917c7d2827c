"""Helpers for readers: the bindings a module's statements make, linear forms of values, and
spec values with their lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import libcst as cst

from brax_diff.facts.model import Provenance

from .pyast import child_nodes, dotted_name
from .values import Instance, Phi, Sym, Unknown, V, all_lines, is_const, made_from, sym, unknown, why_not_constant


def has_star_import(statement: cst.CSTNode) -> bool:
    """A module-level statement that is, or holds (in if/try bodies), ``from x import *``."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return False
    if isinstance(statement, cst.SimpleStatementLine):
        return any(isinstance(s, cst.ImportFrom) and isinstance(s.names, cst.ImportStar) for s in statement.body)
    for child in walk(statement):
        if isinstance(child, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(child, cst.ImportFrom) and isinstance(child.names, cst.ImportStar):
            return True
    return False


def top_bindings(statement: cst.CSTNode) -> set[str]:
    """Names a module-level statement binds (into if/try/with/for bodies, not into defs)."""
    out: set[str] = set()
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    out.update(target_names(target.target))
            elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                out.update(target_names(small.target))
            elif isinstance(small, cst.Import):
                for alias in small.names:
                    out.add(alias.asname.name.value if alias.asname is not None
                            else (dotted_name(alias.name) or "").split(".")[0])
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    out.add(alias.asname.name.value if alias.asname is not None else dotted_name(alias.name) or "")
        return out
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return {statement.name.value}
    if isinstance(statement, cst.For):
        out.update(target_names(statement.target))
    if isinstance(statement, cst.With):
        for item in statement.items:
            if item.asname is not None:
                out.update(target_names(item.asname.name))
    blocks = []
    for name in ("body", "orelse", "finalbody"):
        part = getattr(statement, name, None)
        if part is not None:
            blocks.append(part)
    for handler in getattr(statement, "handlers", ()):
        blocks.append(handler)
        if handler.name is not None:
            out.update(target_names(handler.name.name))
    for block in blocks:
        if isinstance(block, cst.If):
            out |= top_bindings(block)
            continue
        body = block.body if hasattr(block, "body") else block
        inner = body.body if hasattr(body, "body") else body
        for child in inner if isinstance(inner, (list, tuple)) else [inner]:
            if isinstance(child, cst.BaseSmallStatement):
                out |= top_bindings(cst.SimpleStatementLine(body=[child]))
            else:
                out |= top_bindings(child)
    return out


def declared_globals(function: cst.FunctionDef) -> set[str]:
    """Names a function declares ``global`` (not inside nested defs)."""
    out: set[str] = set()
    stack = list(function.body.body) if hasattr(function.body, "body") else []
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, cst.Global):
            out |= {n.name.value for n in node.names}
        stack.extend(child_nodes(node))
    return out


def changed_names(statement: cst.CSTNode, declared: Callable[[str], set[str]]) -> set[str]:
    """Module names a top-level statement that binds none may change: the object an attribute or
    item is set on, the receiver of a method called, the globals a module function called declares."""
    out: set[str] = set()
    if not isinstance(statement, cst.SimpleStatementLine):
        return out
    for small in statement.body:
        targets = []
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
            targets = [small.target]
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Name):
                out |= declared(func.value)
            elif isinstance(func, cst.Attribute):
                targets = [func.value]
        for target in targets:
            while isinstance(target, (cst.Attribute, cst.Subscript)):
                target = target.value
            if isinstance(target, cst.Name):
                out.add(target.value)
    return out


def bound_names(node: cst.CSTNode) -> list[str]:
    out = []
    for child in walk(node):
        if isinstance(child, cst.AssignTarget) and isinstance(child.target, cst.Name):
            out.append(child.target.value)
    return out


def target_names(node: cst.CSTNode) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in target_names(e.value)]
    return []


def slot(owner: "Instance | dict") -> dict:
    """The names an engine journal entry's owner holds: an instance's attributes, or a
    class's or module's namespace."""
    return owner.attrs if isinstance(owner, Instance) else owner


def written_names(owner: "Instance | dict", before: dict) -> set:
    # An instance's journal keeps all its attributes before the first write; a
    # namespace's keeps only the names written.
    return set(before) | set(owner.attrs) if isinstance(owner, Instance) else set(before)


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    from .pyast import descendants
    return descendants(node)


# Calls that pass their first argument through as far as the arithmetic of a setting is
# concerned: conversions, reductions that are linear in it, stop-gradients.
LINEAR_CALLS = {"mean", "sum", "astype", "asarray", "array", "float32", "stop_gradient", "float", "detach",
                "squeeze", "reshape", "view", "flatten", "ravel", "nanmean", "to"}


@dataclass(frozen=True)
class Linear:
    """A value taken apart as ``coefficient x product of atoms`` (atoms: symbolic factors)."""

    coefficient: float | None  # None when a factor is not a number the engine knows
    atoms: tuple  # of V
    lines: frozenset  # lines of the constant factors and of the operations
    why: str | None = None  # why the coefficient is unknown


# Values are shared, not copied: `x = x * x` run 40 times is a chain of 40 nodes that a walk
# taking products apart would visit 2**40 times. Walks stop past this many visits.
MAX_WALK = 10_000


class _WalkTooLong(Exception):
    pass


def _visit(budget: list) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise _WalkTooLong


def linear(v: V) -> Linear:
    """``jnp.mean(e * e) * 0.5 * vf`` -> 0.5*vf x [mean(e * e)]; constant factors of
    nested products and of linear reductions (``mean(c * x)``) are pulled out. A product of
    more than MAX_WALK parts has an unknown coefficient (with why)."""
    try:
        return _linear(v, [MAX_WALK])
    except _WalkTooLong:
        return Linear(None, (v,), v.lines, f"a product of more than {MAX_WALK} parts (limit)")


def _linear(v: V, budget: list) -> Linear:
    _visit(budget)
    linear = lambda inner: _linear(inner, budget)  # noqa: E731 - the recursion shares the budget
    data = v.data
    if is_const(v) and isinstance(data, (int, float)) and not isinstance(data, bool):
        return Linear(float(data), (), all_lines(v))
    if isinstance(data, Sym) and data.op == "mul":
        left, right = linear(data.args[0]), linear(data.args[1])
        coef = None if left.coefficient is None or right.coefficient is None else left.coefficient * right.coefficient
        return Linear(coef, left.atoms + right.atoms, left.lines | right.lines | v.lines, left.why or right.why)
    if isinstance(data, Sym) and data.op == "div":
        left, right = linear(data.args[0]), linear(data.args[1])
        if not right.atoms and right.coefficient not in (None, 0.0) and left.coefficient is not None:
            return Linear(left.coefficient / right.coefficient, left.atoms, left.lines | right.lines | v.lines)
    if isinstance(data, Sym) and data.op == "neg":
        inner = linear(data.args[0])
        return Linear(None if inner.coefficient is None else -inner.coefficient, inner.atoms,
                      inner.lines | v.lines, inner.why)
    if isinstance(data, Sym) and data.op == "call" and data.args:
        name = call_name(v)
        operand = call_operand(v)
        if name in LINEAR_CALLS and operand is not None:
            inner = linear(operand)
            if inner.coefficient is None:
                return Linear(None, (v,), inner.lines | v.lines, inner.why)
            if inner.coefficient is not None and inner.coefficient != 1.0 or not inner.atoms:
                return Linear(inner.coefficient, tuple(_rewrap(v, a) for a in inner.atoms) or (v,),
                              inner.lines | v.lines, inner.why)
    if isinstance(data, (Phi, Unknown)):
        return Linear(None, (v,), all_lines(v), why_not_constant(v))
    return Linear(1.0, (v,), v.lines)


def _rewrap(call: V, atom: V) -> V:
    """The call applied to one atom (``mean(c * x)`` -> ``mean(x)``), for classifying it."""
    data = call.data
    if isinstance(data.args[0].data, Sym) and data.args[0].data.op == "attr":  # x.mean()
        return sym("call", "", (sym("attr", data.args[0].data.name, (atom,)),) + data.args[1:], data.kwargs)
    return sym("call", "", (data.args[0], atom) + data.args[2:], data.kwargs)


def call_name(v: V) -> str | None:
    """The last name of what a symbolic call calls: ``jnp.mean(x)`` and ``x.mean()`` -> mean."""
    data = v.data
    if not (isinstance(data, Sym) and data.op == "call" and data.args):
        return None
    callee = data.args[0].data
    if isinstance(callee, Sym) and callee.op in ("ext", "attr"):
        return callee.name.rsplit(".", 1)[-1]
    if isinstance(callee, Sym) and callee.op == "call":  # torch.nn.MSELoss()(a, b)
        return call_name(data.args[0])
    return None


def call_operand(v: V) -> V | None:
    """The value a call works on: the first argument, or the receiver of a method call."""
    data = v.data
    callee = data.args[0].data
    if isinstance(callee, Sym) and callee.op == "attr" and (len(data.args) == 1 or callee.name in ("astype", "to",
                                                                                                    "view")):
        return callee.args[0]
    return data.args[1] if len(data.args) > 1 else None


def terms(v: V) -> list[V]:
    """The summands of ``a + b - c`` (a subtraction's right side negated); a sum of more than
    MAX_WALK parts is one unknown term (with why)."""
    try:
        return _terms(v, [MAX_WALK])
    except _WalkTooLong:
        return [unknown(f"a sum of more than {MAX_WALK} terms (limit)")]


def _terms(v: V, budget: list) -> list[V]:
    _visit(budget)
    data = v.data
    if isinstance(data, Sym) and data.op == "add":
        return _terms(data.args[0], budget) + _terms(data.args[1], budget)
    if isinstance(data, Sym) and data.op == "sub":
        return _terms(data.args[0], budget) + [sym("neg", "", (t,)) for t in _terms(data.args[1], budget)]
    return [v]


def mentions(v: V, predicate: Callable[[V], bool], seen: set | None = None) -> bool:
    """Whether ``v`` or anything it was made from satisfies ``predicate``."""
    seen = set() if seen is None else seen
    if id(v) in seen:
        return False
    seen.add(id(v))
    if predicate(v):
        return True
    return any(mentions(c, predicate, seen) for c in made_from(v))


def spec_value(value: Any, lines: Mapping[tuple, int], where: Callable[[int], Provenance],
               path: tuple = ()) -> V:
    """A spec (plain YAML data) as engine values, each carrying the line it is written on."""
    line = lines.get(path)
    prov = frozenset((where(line),)) if line else frozenset()
    if isinstance(value, dict):
        return V({k: spec_value(v, lines, where, path + (str(k),)) for k, v in value.items()}, prov)
    if isinstance(value, list):
        return V([spec_value(v, lines, where, path + (str(i),)) for i, v in enumerate(value)], prov)
    return V(value, prov)

