"""Questions both sides ask of data-flow values when they read what the PPO code does.

The engine (:mod:`brax_diff.extractors.engine.flow`) leaves a runtime value as a symbol that says how it
was made (``data.extras['state_extras']['truncation']``, ``1 - terminateds``, ``x.entropy()``);
these helpers take such symbols apart: which names of the data a value is made from, whether it
is a mask ``1 - x``, whether it depends on a value other than through its shape, which calls of
a name it contains.
"""

from __future__ import annotations

from typing import Callable, Iterator

from . import flow
from .flow import V

# Calls whose result depends on their argument's shape only, not on its values.
SHAPE_ONLY = frozenset({"zeros_like", "ones_like", "empty_like", "shape", "size", "dim", "len"})


def children(v: V) -> list[V]:
    """The values ``v`` is made of (its operands, options or elements)."""
    data = v.data
    if isinstance(data, flow.Sym):
        out = list(data.args) + [x for _, x in data.kwargs]
    elif isinstance(data, flow.Phi):
        out = list(data.options)
    elif isinstance(data, (tuple, list)):
        out = list(data)
    elif isinstance(data, dict):
        out = list(data.values())
    else:
        out = []
    return [c for c in out if isinstance(c, V)]


def walk(v: V, skip: Callable[[V], bool] = lambda v: False) -> Iterator[V]:
    """``v`` and everything it is made of, each once (not below a value ``skip`` accepts)."""
    seen: set[int] = set()
    stack = [v]
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        yield value
        if not skip(value):
            stack.extend(children(value))


def shape_only(v: V) -> bool:
    """A call that reads only its argument's shape (``jnp.zeros_like(x)``)."""
    return flow.call_name(v) in SHAPE_ONLY or (isinstance(v.data, flow.Sym) and v.data.op == "attr"
                                               and v.data.name in SHAPE_ONLY)


def depends_on(v: V, target: V) -> bool:
    """Whether ``v``'s values are computed from ``target`` (not only from its shape)."""
    return any(x is target for x in walk(v, shape_only))


def names_read(v: V) -> set[str]:
    """The string keys and attribute names ``v`` is read through: ``data.extras['state_extras']
    ['truncation']`` -> {extras, state_extras, truncation}."""
    out = set()
    for x in walk(v):
        data = x.data
        if isinstance(data, flow.Sym) and data.op == "attr":
            out.add(data.name)
        elif isinstance(data, flow.Sym) and data.op == "item" and len(data.args) > 1:
            index = data.args[1]
            if flow.is_const(index) and isinstance(index.data, str):
                out.add(index.data)
    return out


def last_name(v: V) -> str | None:
    """The key or attribute a value is read by last: ``batch['terminateds']`` -> terminateds."""
    data = v.data
    if flow.call_name(v) in ELEMENTWISE and flow.call_operand(v) is not None:
        return last_name(flow.call_operand(v))
    if isinstance(data, flow.Sym) and data.op == "attr":
        return data.name
    if isinstance(data, flow.Sym) and data.op == "item" and len(data.args) == 2:
        index = data.args[1]
        return index.data if flow.is_const(index) and isinstance(index.data, str) else None
    return None


def one_minus(v: V) -> V | None:
    """``x`` when ``v`` is ``1 - x`` (a mask made from a 0/1 signal), else None."""
    data = v.data
    if isinstance(data, flow.Sym) and data.op == "sub" and len(data.args) == 2:
        left = data.args[0]
        if flow.is_const(left) and not isinstance(left.data, bool) and left.data == 1:
            return data.args[1]
    return None


# Calls that keep their operand's elements where they are (a factor of the operand is one of the result).
ELEMENTWISE = frozenset({"stop_gradient", "detach", "astype", "float32", "asarray", "array", "float", "to", "view",
                         "reshape", "squeeze", "flatten", "ravel"})


def factors(v: V) -> list[V]:
    """The symbolic factors of a product, through calls that keep elements in place
    (``stop_gradient(x * (1 - t))`` -> x, 1 - t)."""
    out = []
    for atom in flow.linear(v).atoms:
        operand = flow.call_operand(atom) if flow.call_name(atom) in ELEMENTWISE else None
        out.extend(factors(operand) if operand is not None else [atom])
    return out


def product_lines(v: V, seen: set | None = None) -> frozenset:
    """The lines of a product's operations, through the calls :func:`factors` looks into
    (each shared operand once: `x = x * x` in a loop shares it)."""
    seen = set() if seen is None else seen
    if id(v) in seen:
        return frozenset()
    seen.add(id(v))
    lines = set(v.lines)
    data = v.data
    if isinstance(data, flow.Sym) and data.op in ("mul", "div", "neg"):
        for operand in data.args:
            lines |= product_lines(operand, seen)
    elif flow.call_name(v) in ELEMENTWISE and flow.call_operand(v) is not None:
        lines |= product_lines(flow.call_operand(v), seen)
    return frozenset(lines)


def masks(v: V) -> list[V]:
    """The signals ``x`` of the factors ``1 - x`` of a product."""
    return [x for x in (one_minus(a) for a in factors(v)) if x is not None]


def calls_of(v: V, name: str) -> list[V]:
    """The symbolic calls of ``name`` (last name component) ``v`` contains."""
    return [x for x in walk(v) if flow.call_name(x) == name]


def elements(v: V) -> list[V]:
    """A tuple or list's elements (``v`` itself otherwise), flattened."""
    if isinstance(v.data, (tuple, list)):
        return [e for item in v.data if isinstance(item, V) for e in elements(item)]
    return [v]


def constructor_field(instance: V, name: str) -> V | None:
    """A field of an object the engine built: an attribute it set, else the keyword its constructor got
    (a NamedTuple or dataclass sets its fields outside the files read)."""
    data = instance.data
    if not isinstance(data, flow.Instance):
        return None
    if name in data.attrs:
        return data.attrs[name]
    if data.args:
        _, kwargs = data.args
        return kwargs.get(name)
    return None


def unwrapped(v: V) -> V:
    """``v`` through calls that keep elements in place (``stop_gradient(x)`` -> x)."""
    while flow.call_name(v) in ELEMENTWISE and flow.call_operand(v) is not None:
        v = flow.call_operand(v)
    return v


def summands(v: V) -> list[V]:
    """The terms of a sum, each through calls that keep elements in place, a negated term as its operand."""
    out = []
    for term in flow.terms(unwrapped(v)):
        data = term.data
        if isinstance(data, flow.Sym) and data.op == "neg" and data.args:
            term = data.args[0]
        out.append(unwrapped(term))
    return out


def unmasked(v: V) -> V | None:
    """The one factor of a product that is not a mask ``1 - x`` (``(r + ...) * (1 - t)`` -> r + ...)."""
    rest = [a for a in factors(v) if one_minus(a) is None]
    return rest[0] if len(rest) == 1 else None


def advantage_form(advantages: V, rewards: V, recursion: Callable[[V], bool]) -> str | None:
    """What an advantage estimate is made of, masks set aside: ``vtrace_pg`` when it is
    ``r_t + gamma * G_{t+1} - V(s_t)`` with ``G`` the lambda-returns the recursion makes (a reward
    summand beside a term of the recursion); ``gae`` when it is the recursion itself, with no
    reward summand of its own (the sum of discounted TD errors). None for another shape.
    ``recursion(v)``: whether ``v`` is made from the backward recursion over the TD errors."""
    body = unmasked(advantages)
    if body is None:
        return None
    parts = summands(body)
    direct_reward = any(p is rewards for p in parts)
    if direct_reward and any(recursion(p) for p in parts if p is not rewards):
        return "vtrace_pg"
    if not direct_reward and recursion(body):
        return "gae"
    return None
