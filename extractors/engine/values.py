"""The engine's values: constants with their lines, symbols, options (Phi), unknowns, and what
the engine models of functions, classes and instances; merging values of several paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable

import libcst as cst

from brax_diff.facts.model import Provenance

from .pyast import PyModule

if TYPE_CHECKING:
    from .runtime import Frame


MAX_OPTIONS = 8  # alternatives one Phi may hold


_NO_LINES: frozenset = frozenset()


class V:
    """A value and the lines that made it. ``data`` is a Python constant (int, float,
    str, bool, None), a tuple/list of V, a dict of constant keys to V, or one of the
    engine's own kinds (Sym, Phi, Unknown, functions, classes, instances, modules).

    Immutable by convention, compared by identity. A slotted class rather than a frozen
    dataclass: a run makes millions of them, and a frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field) was a tenth of a cold run."""

    __slots__ = ("data", "lines")

    def __init__(self, data: Any, lines: frozenset = _NO_LINES) -> None:
        self.data = data
        self.lines = lines

    def __repr__(self) -> str:
        return f"V({self.data!r})"

    def with_lines(self, *more: Iterable[Provenance]) -> "V":
        extra = frozenset(p for group in more for p in group)
        return self if extra <= self.lines else V(self.data, self.lines | extra)


class Sym:
    """A runtime value the engine does not compute: ``op`` says how it was made.

    ``ext``: a name outside the files read (``name`` is its qualified name, e.g.
    ``torch.nn.MSELoss``); ``param``: an argument the reader left open; ``attr``,
    ``item``, ``call``: an attribute, subscript or call of another value (in ``args``);
    an operator name (``mul``, ``add``, ``sub``, ``div``, ``neg``, ``pow``, ...) for
    arithmetic with at least one symbolic operand.
    """

    __slots__ = ("op", "name", "args", "kwargs")  # immutable by convention, like V

    def __init__(self, op: str, name: str = "", args: tuple = (), kwargs: tuple = ()) -> None:
        self.op = op
        self.name = name
        self.args = args
        self.kwargs = kwargs  # ((name, V), ...)

    def __repr__(self) -> str:
        return describe(V(self))


@dataclass(frozen=True, eq=False)
class Phi:
    """One of several values, depending on a condition the engine could not decide."""

    options: tuple  # of V
    why: str


@dataclass(frozen=True)
class Unknown:
    """The engine could not follow the value; ``reason`` says why (and where)."""

    reason: str


@dataclass(eq=False)
class Module:
    """A module of the files read. Its top-level statements run lazily: the statements
    that bind a name run when something first reads that name, so only the code on the
    path followed is parsed and evaluated."""

    dotted: str
    path: str
    source: PyModule | None = None
    parsed: bool = False
    globals: dict = field(default_factory=dict)
    stars: list = field(default_factory=list)  # modules `from x import *` pulled in
    statements: list = field(default_factory=list)
    bindings: dict = field(default_factory=dict)  # name -> indexes of the statements binding it
    done: set = field(default_factory=set)
    running: set = field(default_factory=set)


@dataclass(eq=False)
class Function:
    """A ``def`` or ``lambda`` of the files read, with the frame it closes over."""

    node: cst.CSTNode
    module: Module
    closure: "Frame | None"
    owner: "Class | None" = None  # the class whose body defines it (for super())
    defaults: dict = field(default_factory=dict)  # parameter name -> V
    kind: str = "function"  # "function" | "staticmethod" | "classmethod" | "property"

    @property
    def name(self) -> str:
        return self.node.name.value if isinstance(self.node, cst.FunctionDef) else "<lambda>"


@dataclass(eq=False)
class Class:
    name: str
    bases: list  # of V
    namespace: dict
    module: Module | None
    node: cst.ClassDef | None = None
    # A dataclass's fields in order: (name, default or None, default_factory or None); None: not one.
    fields: list | None = None

    def mro(self) -> list["Class"]:
        """Depth-first, left to right, each class once (C3 agrees for the hierarchies read)."""
        out: list[Class] = []
        stack = [self]
        while stack:
            cls = stack.pop(0)
            if cls in out:
                continue
            out.append(cls)
            stack = [b.data for b in cls.bases if isinstance(b.data, Class)] + stack
        return out

    def has_external_base(self) -> bool:
        return any(not isinstance(b.data, Class) or b.data.has_external_base() for b in self.bases)

    def lookup(self, name: str) -> "V | None":
        for cls in self.mro():
            if name in cls.namespace:
                return cls.namespace[name]
        return None


@dataclass(eq=False)
class Instance:
    cls: Class
    attrs: dict = field(default_factory=dict)
    args: tuple = ()  # the constructor's arguments (positional V, keyword dict), for readers
    serial: int = -1  # creation order: an object made on an undecided path is that path's own


@dataclass(eq=False)
class Bound:
    """A method bound to its receiver."""

    receiver: V
    function: Function


@dataclass(eq=False)
class Partial:
    function: V
    args: tuple
    kwargs: dict


@dataclass(eq=False)
class Native:
    """A Python callable standing in for a builtin or a known library function."""

    name: str
    call: Callable[..., V]
    # What a call the engine does not make (its ``*``/``**`` argument is not known) does, as
    # ``unfollowed(why, frame, node)``: a model's method that changes its receiver says so.
    unfollowed: Callable[..., None] | None = None


@dataclass(eq=False)
class NativeMethod:
    """A method of a modelled class (``ConfigDict.update``): ``call(engine, receiver, args,
    kwargs, frame, node)``; reading it from an instance binds the receiver. ``unfollowed(engine,
    receiver, why, frame, node)``: what a call of it the engine does not make does to the receiver."""

    name: str
    call: Callable[..., V]
    unfollowed: Callable[..., None] | None = None


@dataclass(eq=False)
class Method:
    """A method of a known constant (``d.get``, ``s.startswith``, ``lst.append``)."""

    receiver: V
    name: str
    target: cst.CSTNode | None = None  # where the receiver came from, to rebind after mutation


@dataclass(eq=False)
class Super:
    cls: Class
    receiver: V


@dataclass(eq=False)
class Lazy:
    """An imported name not resolved yet (resolving it may execute its module)."""

    resolve: Callable[[], V]


UNBOUND = Unknown("unbound")


SKIP = object()  # Engine.decide's answer: the `if` statement is not run at all


def const(value: Any, lines: Iterable[Provenance] = ()) -> V:
    """A V for a plain Python value (tuples, lists and dicts are wrapped element-wise)."""
    if isinstance(value, V):
        return value
    if isinstance(value, tuple):
        return V(tuple(const(v, lines) for v in value), frozenset(lines))
    if isinstance(value, list):
        return V([const(v, lines) for v in value], frozenset(lines))
    if isinstance(value, dict):
        return V({k: const(v, lines) for k, v in value.items()}, frozenset(lines))
    return V(value, frozenset(lines))


def sym(op: str, name: str = "", args: tuple = (), kwargs: tuple = (), lines: Iterable[Provenance] = ()) -> V:
    return V(Sym(op, name, args, kwargs), frozenset(lines))


def unknown(reason: str) -> V:
    return V(Unknown(reason))


def is_const(v: V) -> bool:
    """A plain constant, or a tuple/list/dict of them."""
    data = v.data
    if data is None or isinstance(data, (bool, int, float, str)):
        return True
    if isinstance(data, (tuple, list)):
        return all(is_const(x) for x in data)
    if isinstance(data, dict):
        return all(is_const(x) for x in data.values())
    return False


def plain(v: V) -> Any:
    """The Python value of a constant V (tuples stay tuples); raises ValueError otherwise."""
    data = v.data
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, tuple):
        return tuple(plain(x) for x in data)
    if isinstance(data, list):
        return [plain(x) for x in data]
    if isinstance(data, dict):
        return {k: plain(x) for k, x in data.items()}
    raise ValueError(why_not_constant(v))


def why_not_constant(v: V) -> str:
    """In words: why this value is not a number the engine can give."""
    data = v.data
    if isinstance(data, Unknown):
        return data.reason
    if isinstance(data, Phi):
        shown = ", ".join(describe(o) for o in data.options[:4])
        return f"{data.why}: one of {shown}"
    if isinstance(data, (tuple, list)):
        for item in data:
            if not is_const(item):
                return why_not_constant(item)
    if isinstance(data, dict):
        for item in data.values():
            if not is_const(item):
                return why_not_constant(item)
    return f"`{describe(v)}` is computed at run time"


def made_from(v: V) -> list[V]:
    """The values ``v`` was made from: a symbol's arguments, a phi's options, a container's items."""
    data = v.data
    children: Iterable = ()
    if isinstance(data, Sym):
        children = list(data.args) + [x for _, x in data.kwargs]
    elif isinstance(data, Phi):
        children = data.options
    elif isinstance(data, (tuple, list)):
        children = data
    elif isinstance(data, dict):
        children = data.values()
    return [c for c in children if isinstance(c, V)]


def all_lines(v: V, seen: set | None = None) -> frozenset:
    """The lines of a value and of everything it was made from."""
    seen = set() if seen is None else seen
    if id(v) in seen:
        return frozenset()
    seen.add(id(v))
    out = set(v.lines)
    for child in made_from(v):
        out |= all_lines(child, seen)
    return frozenset(out)


def describe(v: V, depth: int = 0) -> str:
    """A short source-like text for a value (for notes and reasons)."""
    data = v.data
    if depth > 4:
        return "..."
    if isinstance(data, Sym):
        inner = [describe(a, depth + 1) for a in data.args]
        if data.op in ("ext", "param"):
            return data.name
        if data.op == "attr":
            return f"{inner[0]}.{data.name}"
        if data.op == "item":
            return f"{inner[0]}[{', '.join(inner[1:])}]"
        if data.op == "call":
            kw = [f"{k}={describe(x, depth + 1)}" for k, x in data.kwargs]
            return f"{inner[0]}({', '.join(inner[1:] + kw)})"
        symbol = _OP_SYMBOLS.get(data.op)
        if symbol and len(inner) == 2:
            return f"({inner[0]} {symbol} {inner[1]})"
        if data.op == "neg":
            return f"-{inner[0]}"
        return f"{data.op}({', '.join(inner)})"
    if isinstance(data, Phi):
        return " | ".join(describe(o, depth + 1) for o in data.options)
    if isinstance(data, Unknown):
        return "<unknown>"
    if isinstance(data, Function):
        return data.name
    if isinstance(data, Class):
        return data.name
    if isinstance(data, Instance):
        return f"{data.cls.name}(...)"
    if isinstance(data, Module):
        return data.dotted
    if isinstance(data, Bound):
        return f"{describe(data.receiver, depth + 1)}.{data.function.name}"
    if isinstance(data, (tuple, list)):
        inner = ", ".join(describe(x, depth + 1) for x in data)
        return f"({inner})" if isinstance(data, tuple) else f"[{inner}]"
    if isinstance(data, dict):
        return "{" + ", ".join(f"{k!r}: {describe(x, depth + 1)}" for k, x in list(data.items())[:6]) + "}"
    if isinstance(data, (Native, Method, Partial, Super, Lazy)):
        return getattr(data, "name", type(data).__name__)
    return repr(data)


_OP_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**",
               "matmul": "@"}


def qualified_name(v: V) -> str | None:
    """``torch.nn.MSELoss`` for an external name, ``math_util.calc_gaes`` for a function read."""
    data = v.data
    if isinstance(data, Sym) and data.op == "ext":
        return data.name
    if isinstance(data, Function):
        return f"{data.module.dotted}.{data.name}"
    if isinstance(data, Class):
        return f"{data.module.dotted}.{data.name}" if data.module else data.name
    if isinstance(data, Bound):
        owner = data.function.owner.name if data.function.owner else ""
        return f"{owner}.{data.function.name}"
    return None


def short_name(v: V) -> str | None:
    name = qualified_name(v)
    if name is None and isinstance(v.data, Sym) and v.data.op == "attr":
        return v.data.name
    return name.rsplit(".", 1)[-1] if name else None


UNBOUND_V = V(UNBOUND)


def identical(a: V, b: V) -> bool | None:
    """Whether two values are the same value (None: cannot tell)."""
    if isinstance(a.data, Unknown) or isinstance(b.data, Unknown):
        return None  # one Unknown stands for any value (reading from it hands it back): never the same by identity
    if a is b or a.data is b.data and not isinstance(a.data, (int, float, str, bool)):
        return True
    if is_const(a) and is_const(b):
        return type(plain(a)) is type(plain(b)) and plain(a) == plain(b)
    if a.data is None or b.data is None:
        other = b if a.data is None else a
        if isinstance(other.data, (Instance, Function, Class, Module, Bound, Partial, Native)):
            return False
        if is_const(other):
            return False
        return None
    if isinstance(a.data, (Instance, Function, Class, Module)) and isinstance(b.data, (Instance, Function, Class,
                                                                                        Module)):
        return a.data is b.data
    return None


ENUM_BASES = frozenset({"enum.Enum", "enum.IntEnum", "enum.StrEnum"})


def enum_member(cls: Class, args: list[V], kwargs: dict[str, V]) -> V | None:
    """``Schedule(value)`` of an ``enum.Enum`` subclass whose members are constants: the member
    with that value. A member is modelled as its value (``Schedule.NONE`` reads as ``'NONE'``),
    so members compare with each other as Python compares them (``Schedule('NONE') ==
    Schedule.ADAPTIVE_KL`` is decided), which is what configs branch on."""
    if kwargs or len(args) != 1 or not is_const(args[0]):
        return None
    if not any(qualified_name(base) in ENUM_BASES for base in cls.bases):
        return None
    members = [v for name, v in cls.namespace.items()
               if not name.startswith("_") and not isinstance(v.data, (Function, Class))]
    if not members or not all(is_const(v) for v in members):
        return None
    for member in members:
        if type(member.data) is type(args[0].data) and member.data == args[0].data:
            return member.with_lines(args[0].lines)
    return None


def merge(values: list[V], why: str) -> V:
    """One value from several paths: itself when all agree, else a Phi (or an Unknown when
    the alternatives grow past MAX_OPTIONS)."""
    if values and all(v is values[0] or v.data is values[0].data for v in values):
        return values[0]  # the paths did not touch it
    options: list[V] = []
    for value in values:
        inner = value.data.options if isinstance(value.data, Phi) else (value,)
        for option in inner:
            if not any(identical(option, seen) is True for seen in options):
                options.append(option)
    if len(options) == 1:
        return options[0]
    if len(options) > MAX_OPTIONS:
        return unknown(f"{why}: more than {MAX_OPTIONS} possible values")
    return V(Phi(tuple(options), why))


def merge_names(scopes: list[dict], why: str) -> dict:
    out = dict(scopes[0])
    for scope in scopes[1:]:
        for name in scope:
            if name not in out:
                out[name] = UNBOUND_V
    for name in list(out):
        first = scopes[0].get(name, UNBOUND_V)
        values = [scope.get(name, UNBOUND_V) for scope in scopes]
        out[name] = first if all(v is first for v in values) else merge(values, why)
    return out
