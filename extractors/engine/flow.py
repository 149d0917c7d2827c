"""A small data-flow engine over libcst: follow a setting from where it is read to where it acts.

Both sides' readers ask this engine instead of matching one code shape each. It runs
the upstream code *abstractly*: a function is called with the values a scope gives it
(a ``train()`` parameter, a spec dict read from YAML) and its statements are executed
one by one, through assignments, augmented assignments, ``if``/``elif``, loops over known
sequences, calls into functions and classes of the files read (arguments bound to
parameters, ``self.attr`` written by constructors), attribute reads, ``functools.partial``
and the few builtins configs are written with. Constants fold as they go (``*``, ``+``,
``/``, tuple repetition, several statements). Nothing upstream is imported or run.
Library functions that call a function they are given (``jax.lax.scan``, ``jax.grad``,
``jax.value_and_grad``) call it, so a value bound with ``functools.partial``, passed as a
keyword or forwarded through ``**kwargs`` is followed to the function that receives it;
:meth:`Engine.observing` records what an observed function receives at each call.

What the engine does not compute stays symbolic: a :class:`Sym` stands for a runtime
value (a tensor, an environment, a call into a library outside the files read), so
``jnp.mean(v_loss) * 0.5 * vf_coefficient`` becomes a product of a symbol and two
numbers that :func:`linear` can take apart. A condition the engine cannot decide runs
both branches and merges them: a name that differs afterwards is a :class:`Phi`, which
says what it depends on. Anything the engine cannot follow is an :class:`Unknown` with
the reason, never a default.

A ``raise`` (or a failing ``assert``, a missing dict key, a missing module attribute, an
unexpected keyword argument) reached on a path every run takes is recorded as a
definite :class:`Failure` with its line (the run cannot get past it), and the engine goes
on after it so that readers still see what follows. A raise that only some paths reach
drops those paths.

Every value carries the lines that made it (the literal or spec line it was written
on, the lines of the operations applied to it, the line of an attribute assignment that
sets it on an object; not the lines that merely pass it on), so a fact cites where a
number is written, where it is transformed and where it is set.
"""

from __future__ import annotations

import math
import operator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

import libcst as cst

from brax_diff.errors import SourceError
from brax_diff.facts.model import Provenance
from brax_diff.safety.limits import (MAX_SEQUENCE, format_spec_refused, int_literal_refused, operation_refused,
                              result_refused, template_refused)

from .pyast import PyModule, child_nodes, dotted_name, parse_file, paused_gc

# Limits: a run that goes past them stops with an Unknown instead of taking forever.
STEP_BUDGET = 400_000  # expressions and statements evaluated per run
MAX_DEPTH = 40  # nested calls
MAX_ITERATIONS = 256  # iterations of one loop over a known sequence
# A loop over known items whose passes take more than WIDEN_STEPS steps (and that neither
# breaks nor continues) runs EXACT_PASSES passes exactly and widens the rest
# (Engine._for_known): SLM-Lab's `for _ in range(self.training_epoch)` is 16 passes of
# ~2,500 steps of the same code.
EXACT_PASSES = 3
WIDEN_STEPS = 500
MAX_OPTIONS = 8  # alternatives one Phi may hold


# --------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------


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


@dataclass(eq=False)
class NativeMethod:
    """A method of a modelled class (``ConfigDict.update``): ``call(engine, receiver, args,
    kwargs, frame, node)``; reading it from an instance binds the receiver."""

    name: str
    call: Callable[..., V]


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


def all_lines(v: V, seen: set | None = None) -> frozenset:
    """The lines of a value and of everything it was made from."""
    seen = set() if seen is None else seen
    if id(v) in seen:
        return frozenset()
    seen.add(id(v))
    out = set(v.lines)
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
    for child in children:
        if isinstance(child, V):
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


# --------------------------------------------------------------------------------------
# Control flow inside the interpreter
# --------------------------------------------------------------------------------------


class Raised(Exception):
    """An exception the upstream code raises on every path that reaches it."""

    def __init__(self, kind: str, message: str, where: Provenance | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.where = where


class OutOfBudget(Exception):
    """The run evaluated more than STEP_BUDGET nodes."""


class _Return(Exception):
    def __init__(self, value: V) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


@dataclass(frozen=True)
class Failure:
    """A raise the run reached: ``definite`` when every run that gets this far takes it
    (no undecided branch, no earlier return, around it)."""

    error: Raised
    definite: bool


@dataclass(frozen=True)
class CallRecord:
    """One call the engine evaluated: what was called, with what, where, and its result."""

    callee: V
    args: tuple
    kwargs: dict
    path: str
    line: int
    result: V
    node: cst.Call
    name: str = ""  # the name the call site uses (``net.train_step(...)``: train_step), or the callee's


@dataclass(frozen=True, eq=False)
class Invocation:
    """One call of an observed function (:meth:`Engine.observing`): the arguments it receives
    (a partial's bindings merged in) and the calls being evaluated when it came, outermost
    first, as (frame, call node) pairs, so that a reader can say which call passed a keyword."""

    function: "Function"
    args: tuple
    kwargs: dict
    sites: tuple


@dataclass(eq=False)
class Observation:
    """What :meth:`Engine.observing` saw: the observed function's invocations, the functions
    the code called (by node id, to tell an entry point that other code reaches from an outer
    one) and the calls not followed because a ``*``/``**`` argument could not be expanded."""

    node: cst.CSTNode
    invocations: list = field(default_factory=list)
    invoked: set = field(default_factory=set)
    unfollowed: list = field(default_factory=list)  # (frame, call node, why)


class Frame:
    """Local names of one function call (or of a module or class body)."""

    def __init__(self, module: Module, parent: "Frame | None" = None, function: Function | None = None,
                 is_class: bool = False) -> None:
        self.module = module
        self.parent = parent  # the enclosing function frame (closures); None at module level
        self.function = function
        self.locals: dict[str, V] = {}
        self.is_class = is_class
        self.globals_declared: set[str] = set()
        self.nonlocals_declared: set[str] = set()
        self.aliases: dict[str, set] = {}  # name -> the names holding the same container (`b = a`)
        self.mutated: set[str] = set()  # names whose container a statement changed in place
        self.pending: list[tuple[V, str]] = []  # returns taken on some paths: (value, why)
        self.class_functions: list[Function] = []  # defs of a class body, decorated or not
        self.defined: list[Function] = []  # defs a function body ran, even if the name is rebound later


# --------------------------------------------------------------------------------------
# Module loading
# --------------------------------------------------------------------------------------


class Loader:
    """Finds modules of the files read in a snapshot: ``slm_lab.agent.net`` ->
    ``slm_lab/agent/net/__init__.py``. Only packages in ``roots`` are read; any other
    import is an external name. Parsed files are shared by blob id (:func:`parse_file`)."""

    def __init__(self, snapshot, roots: tuple[str, ...], modules: dict | None = None) -> None:
        """``modules``: path -> parsed module a reader already holds: the run then evaluates the
        very nodes the reader asks about (a second parse of the same file has other nodes)."""
        self.snapshot = snapshot
        self.roots = roots
        self.modules = modules if modules is not None else {}

    # Module lookups per snapshot (id -> (snapshot, {dotted: path})): variants of one ref
    # ask the same questions, and each answer costs a walk of the git tree.
    _found: dict[int, tuple[Any, dict]] = {}

    def find(self, dotted: str) -> str | None:
        if dotted.split(".")[0] not in self.roots:
            return None
        entry = Loader._found.get(id(self.snapshot))
        if entry is None or entry[0] is not self.snapshot:
            if len(Loader._found) >= 8:
                Loader._found.pop(next(iter(Loader._found)))
            entry = Loader._found[id(self.snapshot)] = (self.snapshot, {})
        known = entry[1]
        if dotted not in known:
            known[dotted] = self._find(dotted)
        return known[dotted]

    def _find(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if self.snapshot.exists(path):
                return path
        if self.snapshot.listdir(base):  # a namespace package: a directory without __init__.py
            return f"{base}/__init__.py"
        return None

    def is_package(self, path: str) -> bool:
        return path.endswith("/__init__.py")

    def parse(self, path: str) -> PyModule | None:
        if path in self.modules:
            return self.modules[path]
        try:
            return parse_file(self.snapshot, path)
        except (SourceError, SyntaxError):
            return None

    def where(self, path: str, line: int) -> Provenance:
        return self.snapshot.where(path, line)


# --------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------


class Engine:
    """Abstract execution of the files read in one snapshot.

    ``assume`` fixes the results of external calls the tool has to take a side on
    (``{"torch.cuda.is_available": True}``: the run is on a GPU machine); readers say so
    in their notes. ``environ`` is what ``os.getenv(NAME)`` / ``os.environ.get(NAME)``
    give for the names it holds (the process environment the tool assumes; any other name
    stays symbolic). ``watch`` names callees (last name component) whose calls are
    recorded in :attr:`calls` for readers to inspect.
    """

    def __init__(self, loader: Loader, *, assume: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None, watch: Iterable[str] = ()) -> None:
        self.loader = loader
        self.assume = dict(assume or {})
        self.environ = dict(environ or {})
        self.watch = set(watch)
        self.modules: dict[str, Module] = {}
        self.instances: list[Instance] = []
        self.calls: list[CallRecord] = []
        self.failures: list[Failure] = []
        self.steps = 0
        self.depth = 0
        self.fork_depth = 0  # inside a branch the engine could not decide
        self.try_depth = 0  # inside a try body (a handler may catch a raise)
        self.stack: list[Frame] = []
        # Writes to objects on the path being explored: id -> (object, attributes before the
        # first write), so that the next path starts from the same state (None: no fork).
        self.journal: dict | None = None
        self.journal_floor = 0  # objects made from here on belong to the current path
        # Writes to a class's or a module's names while a loop pass is watched (see
        # _for_known): id(names) -> (names, {name: value before the first write}).
        self.namespace_journal: dict | None = None
        self._loop_jumps: dict[int, bool] = {}  # id(For node) -> its body breaks or continues
        self._codes: dict[int, str] = {}
        self.handling: list[Raised] = []  # exceptions whose handler is running
        self._wheres: dict[tuple, Provenance] = {}
        self._ats: dict[tuple, frozenset] = {}  # the same, as a value's lines
        self.builtins = _builtins(self)
        self.sites: list[tuple[Frame, cst.Call]] = []  # the calls being evaluated, outermost first
        self.observation: Observation | None = None
        # Reader hooks: ``decide(node, test, truth, frame)`` sees each ``if`` test (and each
        # ``match`` subject, truth None) and returns the truth to use (SKIP: the whole statement
        # is not run); ``on_setattr(obj, name, value,
        # frame, node)`` sees each attribute the code sets, with the value stored.
        self.decide: Callable | None = None
        self.on_setattr: Callable | None = None
        self.on_create: Callable | None = None
        self.changed_arguments: dict | None = None  # what the call just made changed in place (_pass_back)  # a model's objects as made: (object, keyword arguments)

    # -- entry points --------------------------------------------------------------------
    def module(self, dotted: str) -> Module | None:
        """The module ``dotted`` of the files read, or None when it is not read."""
        return self._module(dotted)

    def module_at(self, path: str) -> Module | None:
        dotted = path[:-3].replace("/", ".")
        if dotted.endswith(".__init__"):
            dotted = dotted[: -len(".__init__")]
        return self.module(dotted)

    def lookup(self, module: Module, name: str) -> V | None:
        """A top-level name of a module (None when it does not define it)."""
        self.steps = 0
        try:
            with paused_gc():
                return self._module_name(module, name)
        except OutOfBudget:
            return unknown(f"more than {STEP_BUDGET} steps evaluating {module.dotted}.{name}")

    def instance(self, cls: V, attrs: Mapping[str, V] | None = None) -> V:
        """An instance of ``cls`` whose constructor is NOT run: the reader sets attributes."""
        return V(self._new_instance(cls.data, dict(attrs or {})))

    def _new_instance(self, cls: Class, attrs: dict, args: tuple = ()) -> Instance:
        inst = Instance(cls, attrs, args, len(self.instances))
        self.instances.append(inst)
        return inst

    def _write(self, inst: Instance, name: str, value: V) -> None:
        if self.journal is not None and inst.serial < self.journal_floor and id(inst) not in self.journal:
            self.journal[id(inst)] = (inst, dict(inst.attrs))
        inst.attrs[name] = value

    def stub(self, kind: str, **attrs: V) -> V:
        """An object of code not read (``agent``, ``env``): the given attributes, others symbolic."""
        cls = Class(kind, [sym("ext", kind)], {}, None)
        return self.instance(V(cls), attrs)

    def call(self, fn: V, *args: V, **kwargs: V) -> V:
        """Call ``fn``. What it raises is in :attr:`failures`; an Unknown (budget, depth)
        or the failure's message comes back as the value."""
        return self.run(fn, *args, **kwargs)[0]

    def run(self, fn: V, *args: V, **kwargs: V) -> tuple[V, "Frame | None"]:
        """Call ``fn`` and return its result and, for a function of the files read, its
        frame (final locals; nested functions close over it)."""
        self.steps = 0
        frames: list[Frame] = []
        try:
            with paused_gc():
                result = self._call(fn, list(args), dict(kwargs), None, None, keep=frames)
        except OutOfBudget:
            return unknown(f"more than {STEP_BUDGET} steps evaluating {describe(fn)}"), None
        except Raised as error:
            self.failures.append(Failure(error, self.fork_depth == 0))
            return unknown(error.message), (frames[0] if frames else None)
        return result, (frames[0] if frames else None)

    def definite_failures(self) -> list[Raised]:
        """Raises every run reaches, in the order reached, one per line."""
        seen: set = set()
        out = []
        for failure in self.failures:
            if failure.definite and failure.error.where not in seen:
                seen.add(failure.error.where)
                out.append(failure.error)
        return out

    @contextmanager
    def observing(self, function: Function) -> Iterator[Observation]:
        """While the block runs, a call of ``function`` from the code is recorded as an
        :class:`Invocation` and answered with a symbolic result instead of being run: a
        reader learns what the function receives where the code really calls it."""
        outer = self.observation
        self.observation = Observation(function.node)
        try:
            yield self.observation
        finally:
            self.observation = outer

    def eval_in(self, frame: "Frame", node: cst.CSTNode) -> V:
        """Evaluate an expression of ``frame``'s module with its names (after a run)."""
        self.steps = 0
        try:
            return self._eval(node, frame)
        except Raised as error:
            return unknown(error.message)
        except OutOfBudget:
            return unknown(f"more than {STEP_BUDGET} steps")

    def getattr(self, obj: V, name: str) -> V:
        return self._getattr(obj, name, None, None)

    def where(self, module: Module, node: cst.CSTNode) -> Provenance:
        key = (module.path, id(node))
        found = self._wheres.get(key)
        if found is None:
            self._prepare(module)
            found = self._wheres[key] = self.loader.where(module.path, module.source.line(node))
        return found

    # -- modules -------------------------------------------------------------------------
    def _module(self, dotted: str) -> Module | None:
        if dotted in self.modules:
            return self.modules[dotted]
        path = self.loader.find(dotted)
        if path is None:
            return None
        module = Module(dotted, path)
        self.modules[dotted] = module
        return module

    def _prepare(self, module: Module) -> None:
        """Parse the module and index which top-level statements bind which names."""
        if module.parsed:
            return
        module.parsed = True
        module.source = self.loader.parse(module.path)
        module.globals.setdefault("__name__", const(module.dotted))
        if module.source is None:
            return
        module.statements = list(module.source.module.body)
        setters = {s.name.value: _declared_globals(s) for s in module.statements if isinstance(s, cst.FunctionDef)}
        for index, statement in enumerate(module.statements):
            # A statement that binds no name (a setter called at import, `Class.attr = ...` after the
            # class) runs when a name it changes is read.
            for name in _top_bindings(statement) or _changed_names(statement, setters):
                module.bindings.setdefault(name, []).append(index)
            if _has_star_import(statement):  # its names are unknown until it runs
                self._run_top(module, index)

    def _run_top(self, module: Module, index: int) -> None:
        module.running.add(index)
        frame = Frame(module)
        frame.locals = module.globals
        try:
            self._statement(module.statements[index], frame)
        except (Raised, _Return, _Break, _Continue):
            pass  # an import-time failure leaves the names bound so far
        finally:
            module.running.discard(index)
            module.done.add(index)

    def _module_name(self, module: Module, name: str) -> V | None:
        self._prepare(module)
        for index in module.bindings.get(name, ()):
            if index not in module.done and index not in module.running:
                self._run_top(module, index)
        if name in module.globals:
            value = module.globals[name]
            if isinstance(value.data, Lazy):
                value = module.globals[name] = value.data.resolve()
            return value
        for star in reversed(module.stars):
            found = self._star_name(star, name)
            if found is not None:
                return found
        if self.loader.is_package(module.path):
            sub = self.module(f"{module.dotted}.{name}")
            if sub is not None:
                return V(sub)
        return None

    def _star_name(self, star: V, name: str) -> V | None:
        data = star.data
        if isinstance(data, Module):
            if name.startswith("_"):
                return None
            return self._module_name(data, name)
        return None  # a star import of an external module: the name may come from it

    def _import(self, dotted: str) -> V:
        module = self.module(dotted)
        return V(module) if module is not None else sym("ext", dotted)

    def _from_import(self, base: str, name: str) -> V:
        module = self._module(base)
        if module is None:
            sub = self._module(f"{base}.{name}")
            return V(sub) if sub is not None else sym("ext", f"{base}.{name}")

        busy: list[bool] = []

        def resolve() -> V:
            if busy:  # the module imports the name from itself: the submodule, if any
                sub = self.module(f"{base}.{name}")
                return V(sub) if sub is not None else unknown(f"{base} imports {name} from itself")
            busy.append(True)
            try:
                found = self._module_name(module, name)
            finally:
                busy.clear()
            if found is None:
                return unknown(f"{base} defines no {name}")
            return found

        return V(Lazy(resolve))

    # -- statements ----------------------------------------------------------------------
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
        for name in _bound_names(node):
            self._set(name, reason, frame)
        for child in _walk(node):
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
        except (Raised, _Return, _Break, _Continue):
            pass

    def _poison_all(self, obj: V, reason: V) -> None:
        if isinstance(obj.data, Instance):
            for name in list(obj.data.attrs):
                self._write(obj.data, name, reason)

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
        except (Raised, _Return, _Break, _Continue):
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
            op = _AUG_OPS.get(type(node.operator))
            value = self._binary(op, current, right, node, frame) if op else unknown("operator")
            self._assign(node.target, value, frame)
        elif type(node) is cst.Return:
            raise _Return(self._eval(node.value, frame) if node.value is not None else const(None))
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
            for name in _target_names(node.target):
                frame.locals.pop(name, None)
            targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
            for target in targets:
                target = getattr(target, "value", target) if isinstance(target, cst.Element) else target
                if isinstance(target, (cst.Attribute, cst.Subscript)):
                    self._delete(target, frame)
        elif type(node) is cst.Break:
            raise _Break()
        elif type(node) is cst.Continue:
            raise _Continue()
        # Pass: nothing to do

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
            except _Return as ret:
                frame.pending.append((ret.value, why))
            except Raised as error:
                raised.append(error)
                self.failures.append(Failure(error, False))
            except (_Break, _Continue) as jump:
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
                raise _Return(merge([v for v, _ in values], why))
            raise raised[0] if raised else _Return(const(None))
        frame.locals = _merge_names([locals_ for locals_, _ in ends], why)
        for key, (inst, before) in touched.items():  # objects made on one path keep what it gave them
            inst.attrs = _merge_names([written.get(key, before) for _, written in ends], why)
        if loop_exit and len(loop_exit) == len(ends):
            raise loop_exit[0]()

    def _for(self, node: cst.For, frame: Frame) -> None:
        iterable = self._eval(node.iter, frame)
        items = self._items(iterable)
        if items is not None and len(items) <= MAX_ITERATIONS:
            if self._for_known(node, frame, items):
                return
            if node.orelse is not None:
                self._block(self._body(node.orelse), frame)
            return
        why = (f"set in the loop over `{self._code(frame, node.iter)}` "
               f"({frame.module.path}:{self._line(frame, node)})")
        element = sym("item", "", (iterable, sym("param", "<each>")))

        def once() -> None:
            self._assign(node.target, element, frame)
            try:
                self._block(self._body(node), frame)
            except (_Continue, _Break):
                pass

        self._branches([once, lambda: None], frame, why)

    def _for_known(self, node: cst.For, frame: Frame, items: list[V]) -> bool:
        """Run a loop over known items; True when a ``break`` ended it.

        Every pass runs exactly, except in a loop whose passes are long (WIDEN_STEPS, such
        as training epochs: the same code again on the state the last pass left): there the
        passes after EXACT_PASSES are widened (_widened_passes). A short loop costs little
        to follow exactly, and its state (a counter, a list it appends to) stays known. A
        loop with an ``else``, ``break`` or ``continue`` runs exactly too: a condition a
        widened pass cannot decide would send a path that jumps on through the rest of the
        body (how the engine merges such paths), giving values no pass gives."""
        widen = len(items) > EXACT_PASSES + 1 and node.orelse is None and not self._jumps(node)
        for index, item in enumerate(items):
            watched = widen and index == EXACT_PASSES - 1
            if watched:
                before_locals, journal, steps = dict(frame.locals), self._journaled(), self.steps
            self._assign(node.target, item, frame)
            try:
                try:
                    self._block(self._body(node), frame)
                finally:
                    if watched:
                        written = self._unjournaled(journal)
            except _Continue:
                pass
            except _Break:
                return True
            if watched and self.steps - steps >= WIDEN_STEPS:
                return self._widened_passes(node, frame, items[index + 1:], before_locals, written)
        return False

    def _widened_passes(self, node: cst.For, frame: Frame, rest: list[V], before_locals: dict,
                        written: dict) -> bool:
        """The passes after the exact ones; True when a ``break`` ended the loop.

        Each starts from the state the last pass left with every local, attribute and
        class or module name that some pass changed made an Unknown saying so, and the
        loop's target one of the items left, so that it stands for any later pass. Once a
        pass changes nothing more, every later one would change the same, and the state it
        leaves stands for the loop's end: what stays known is what no pass changes. Without a
        fixpoint it stops after as many passes as items remain, as the exact loop would."""
        why = (f"changes with each pass of the loop over `{self._code(frame, node.iter)}` "
               f"({frame.module.path}:{self._line(frame, node)}); {EXACT_PASSES} of "
               f"{EXACT_PASSES + len(rest)} passes followed exactly")
        widened = unknown(why)
        target = merge(rest, why)
        names: set[str] = set()
        slots: dict[tuple[int, str], Any] = {}  # (id of owner, name) -> instance or namespace
        for _ in rest:
            new = {n for n in set(before_locals) | set(frame.locals)
                   if frame.locals.get(n) is not before_locals.get(n)} - names
            new_slots = {(key, name): owner for key, (owner, before) in written.items()
                         for name in _written_names(owner, before)
                         if _slot(owner).get(name) is not before.get(name) and (key, name) not in slots}
            if not new and not new_slots:
                return False  # a fixpoint
            names |= new
            slots.update(new_slots)
            for name in names:
                frame.locals[name] = widened
            for (_, name), owner in slots.items():
                if isinstance(owner, Instance):
                    self._write(owner, name, widened)
                else:
                    self._write_name(owner, name, widened)
            before_locals, journal = dict(frame.locals), self._journaled()
            self._assign(node.target, target, frame)
            try:
                try:
                    self._block(self._body(node), frame)
                finally:
                    written = self._unjournaled(journal)
            except _Continue:
                pass
            except _Break:
                return True
        return False

    def _jumps(self, node: cst.For) -> bool:
        """Whether the loop's own body has a ``break`` or ``continue`` (not a nested loop's)."""
        found = self._loop_jumps.get(id(node))
        if found is None:
            stack, found = list(child_nodes(node.body)), False
            while stack and not found:
                child = stack.pop()
                if type(child) in (cst.Break, cst.Continue):
                    found = True
                elif type(child) not in (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda):
                    stack.extend(child_nodes(child))
            self._loop_jumps[id(node)] = found
        return found

    def _journaled(self) -> tuple:
        """Start recording the objects the code that runs next writes (see _unjournaled)."""
        outer = (self.journal, self.journal_floor, self.namespace_journal)
        self.journal, self.journal_floor, self.namespace_journal = {}, len(self.instances), {}
        return outer

    def _unjournaled(self, outer: tuple) -> dict:
        """Stop recording: id -> (object, its attributes before the first write), for the
        objects that existed when recording began; the enclosing fork learns of them too."""
        written, named = self.journal, self.namespace_journal
        self.journal, self.journal_floor, self.namespace_journal = outer
        if self.journal is not None:
            for key, (inst, before) in written.items():
                if inst.serial < self.journal_floor and key not in self.journal:
                    self.journal[key] = (inst, dict(before))
        if self.namespace_journal is not None:
            for key, (names, before) in named.items():
                outer_before = self.namespace_journal.setdefault(key, (names, {}))[1]
                for name, value in before.items():
                    outer_before.setdefault(name, value)
        return {**written, **{key: (names, before) for key, (names, before) in named.items()}}

    def _write_name(self, names: dict, name: str, value: V) -> None:
        if self.namespace_journal is not None:
            _, before = self.namespace_journal.setdefault(id(names), (names, {}))
            before.setdefault(name, names.get(name))
        names[name] = value

    def _while(self, node: cst.While, frame: Frame) -> None:
        for _ in range(MAX_ITERATIONS):
            truth = self._truth(self._eval(node.test, frame))
            if truth is False:
                return
            if truth is None:
                break
            try:
                self._block(self._body(node), frame)
            except _Continue:
                continue
            except _Break:
                return
        why = f"set in the loop `while {self._code(frame, node.test)}` ({frame.module.path})"

        def once() -> None:
            try:
                self._block(self._body(node), frame)
            except (_Continue, _Break):
                pass

        self._branches([once, lambda: None], frame, why)

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
        except (Raised, _Return):
            pass
        for function in body.class_functions + [v.data for v in cls.namespace.values()
                                                   if isinstance(v.data, Function)]:
            if function.owner is None:
                function.owner = cls
        value = V(cls)
        for decorator in reversed(node.decorators):
            value = self._decorate(decorator.decorator, value, frame)
        self._set(node.name.value, value, frame)

    # -- names and targets -----------------------------------------------------------------
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
            self._poison_all(container, reason)
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
        # setting an attribute of a symbolic value changes nothing the engine tracks

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

    # -- expressions -------------------------------------------------------------------------
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
            return self._binary(_BIN_OPS.get(type(node.operator)), left, right, node, frame)
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
                data = _apply(op, plain(left), plain(right))
            except (ZeroDivisionError, OverflowError) as exc:  # Python raises it too: a handler may catch it
                raise Raised(type(exc).__name__, f"`{frame.module.source.code(node)}` raises "
                             f"{type(exc).__name__} ({exc})", self.where(frame.module, node)) from None
            except (TypeError, ValueError) as exc:
                return unknown(f"`{frame.module.source.code(node)}` cannot be evaluated ({exc})")
            return const(data, left.lines | right.lines | lines)
        if isinstance(left.data, Instance):
            method = _DUNDER.get(op)
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
            same = _identical(left, right)
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
                same = _identical(left, right)
                if same is True:
                    return isinstance(op, cst.Equal)
            return None
        compare = _COMPARE.get(type(op))
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

    # -- attributes ----------------------------------------------------------------------------
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
            if name in _CONST_METHODS:
                return V(Method(obj, name, node.value if isinstance(node, cst.Attribute) else None))
        return sym("attr", name, (obj,))

    def _getattr_or_unknown(self, obj: V, name: str, frame, node) -> V:
        return self._either(lambda: self._getattr(obj, name, frame, node))

    def _bind(self, found: V, receiver: V) -> V:
        if isinstance(found.data, NativeMethod):
            method = found.data
            return V(Native(method.name, lambda args, kwargs, frame, node:
                            method.call(self, receiver, args, kwargs, frame, node)))
        if isinstance(found.data, Function) and found.data.kind not in ("staticmethod",):
            if found.data.kind == "classmethod" and isinstance(receiver.data, Instance):
                return V(Bound(V(receiver.data.cls), found.data))
            return V(Bound(receiver, found.data))
        return found

    # -- calls ------------------------------------------------------------------------------
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
        (a library's call passes nothing on to them)."""
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
            stub = _EXTERNAL_CALLS.get(data.name)
            if stub is not None:
                return stub(self, args, kwargs)
            through = _CALLS_THROUGH.get(data.name)
            if through is not None:
                result = sym("call", "", (callee, *args), tuple(sorted(kwargs.items())), lines)
                return through(self, result, args, kwargs, frame, node)
        return sym("call", "", (callee, *args), tuple(sorted(kwargs.items())), lines)

    def _construct(self, callee: V, args: list[V], kwargs: dict[str, V], frame, node) -> V:
        cls: Class = callee.data
        member = _enum_member(cls, args, kwargs)
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
            except _Return as ret:
                if frame.pending:
                    return merge([v for v, _ in frame.pending] + [ret.value], frame.pending[0][1])
                return ret.value
            except (_Break, _Continue):
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

    # -- known constants' methods --------------------------------------------------------------
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
        if isinstance(data, list):
            if name == "append" and args:
                return const(None), V(list(data) + [args[0]], receiver.lines)
            if name == "extend" and args and self._items(args[0]) is not None:
                return const(None), V(list(data) + self._items(args[0]), receiver.lines)
            if name == "copy":
                return V(list(data), receiver.lines), None
            if name == "index" and args and is_const(args[0]) and all(is_const(x) for x in data):
                values = [plain(x) for x in data]
                if plain(args[0]) in values:
                    return const(values.index(plain(args[0]))), None
        if isinstance(data, str) and all(is_const(a) for a in args) and all(is_const(v) for v in kwargs.values()):
            fn = getattr(str, name, None)
            if fn is not None and name in _STR_METHODS:
                refused = _str_method_refused(name, data, [plain(a) for a in args])
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

    # -- truth --------------------------------------------------------------------------------
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


UNBOUND_V = V(UNBOUND)


# --------------------------------------------------------------------------------------
# Merging paths
# --------------------------------------------------------------------------------------


def _identical(a: V, b: V) -> bool | None:
    """Whether two values are the same value (None: cannot tell)."""
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


def _enum_member(cls: Class, args: list[V], kwargs: dict[str, V]) -> V | None:
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
            if not any(_identical(option, seen) is True for seen in options):
                options.append(option)
    if len(options) == 1:
        return options[0]
    if len(options) > MAX_OPTIONS:
        return unknown(f"{why}: more than {MAX_OPTIONS} possible values")
    return V(Phi(tuple(options), why))


def _merge_names(scopes: list[dict], why: str) -> dict:
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


# --------------------------------------------------------------------------------------
# Operators, builtins, known library calls
# --------------------------------------------------------------------------------------

_BIN_OPS = {cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "div", cst.FloorDivide: "floordiv",
            cst.Modulo: "mod", cst.Power: "pow", cst.MatrixMultiply: "matmul", cst.BitAnd: "and", cst.BitOr: "or",
            cst.BitXor: "xor", cst.LeftShift: "lshift", cst.RightShift: "rshift"}
_AUG_OPS = {cst.AddAssign: "add", cst.SubtractAssign: "sub", cst.MultiplyAssign: "mul", cst.DivideAssign: "div",
            cst.FloorDivideAssign: "floordiv", cst.ModuloAssign: "mod", cst.PowerAssign: "pow",
            cst.BitOrAssign: "or", cst.BitAndAssign: "and"}
_PY_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
           "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "and": operator.and_,
           "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift}
_DUNDER = {"add": "__add__", "sub": "__sub__", "mul": "__mul__", "div": "__truediv__"}
_COMPARE = {cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
            cst.GreaterThan: operator.gt, cst.LessThanEqual: operator.le, cst.GreaterThanEqual: operator.ge}
_CONST_METHODS = {"get", "copy", "items", "keys", "values", "pop", "setdefault", "update", "append", "extend",
                  "index", "startswith", "endswith", "removeprefix", "removesuffix", "replace", "lower", "upper",
                  "strip", "split", "format", "join", "__copy__", "rstrip", "lstrip", "count", "find"}
_STR_METHODS = {"startswith", "endswith", "removeprefix", "removesuffix", "replace", "lower", "upper", "strip",
                "split", "format", "join", "rstrip", "lstrip", "count", "find"}


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "pow": "**", "mod": "%", "lshift": "<<"}


def _apply(op: str, a: Any, b: Any) -> Any:
    """``a op b`` on constants, refused (ValueError) before computing when the result would pass
    the documented limits (brax_diff.safety.limits): repeated squaring or shifting stops there."""
    if op == "mul" and (isinstance(a, (tuple, list, str)) or isinstance(b, (tuple, list, str))):
        if isinstance(a, (tuple, list, str)) and isinstance(b, int) and b > 10_000 or \
                isinstance(b, (tuple, list, str)) and isinstance(a, int) and a > 10_000:
            raise ValueError("repetition too long")
    if op == "pow" and isinstance(b, (int, float)) and abs(b) > 64:
        raise ValueError("power too large")
    if op == "mod" and isinstance(a, str):
        refused = template_refused(a, "%")
        if refused:
            raise ValueError(refused)
    elif op in _SYMBOLS:
        refused = operation_refused(_SYMBOLS[op], a, b)
        if refused:
            raise ValueError(refused)
    result = _PY_OPS[op](a, b)
    refused = result_refused(result)
    if refused:
        raise ValueError(refused)
    return result


def _str_method_refused(name: str, text: str, args: list) -> str | None:
    """Why ``text.name(*args)`` must not be computed: its result (bounded from the operands
    before computing) would pass MAX_SEQUENCE characters, or a format width would."""
    if name == "format":
        return template_refused(text, "{}")
    size = 0
    if name == "join" and args:
        try:
            items = list(args[0])
        except TypeError:
            return None
        if len(items) > MAX_SEQUENCE:
            return f"a join of more than {MAX_SEQUENCE} items (limit)"
        size = sum(len(x) for x in items if isinstance(x, str)) + len(text) * max(len(items) - 1, 0)
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = text.count(args[0]) if args[0] else len(text) + 1
        size = len(text) + count * len(args[1])
    if size > MAX_SEQUENCE:
        return f"a string longer than {MAX_SEQUENCE} characters (limit)"
    return None


def _numbers(args: list[V]) -> list | None:
    if not all(is_const(a) for a in args):
        return None
    return [plain(a) for a in args]


def _lines_of(args: Iterable[V]) -> frozenset:
    out: frozenset = frozenset()
    for a in args:
        out |= a.lines
    return out


def _pure(name: str, fn: Callable) -> Native:
    """A builtin that computes on constants and stays symbolic otherwise."""

    def call(args, kwargs, frame, node) -> V:
        values = _numbers(list(args))
        keywords = {k: plain(v) for k, v in kwargs.items()} if all(is_const(v) for v in kwargs.values()) else None
        if values is not None and keywords is not None:
            try:
                return const(fn(*values, **keywords), _lines_of(list(args) + list(kwargs.values())))
            except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError) as exc:
                return unknown(f"{name}(...) cannot be evaluated ({exc})")
        for a in args:
            if isinstance(a.data, Unknown):
                return a
        return sym("call", "", (sym("ext", name), *args), tuple(sorted(kwargs.items())))

    return Native(name, call)


def _builtins(engine: Engine) -> dict[str, V]:
    out: dict[str, V] = {}
    for name, fn in (("int", int), ("float", float), ("bool", bool), ("str", str), ("abs", abs), ("min", min),
                     ("max", max), ("round", round), ("len", len), ("sum", sum), ("sorted", sorted),
                     ("tuple", tuple), ("list", list), ("any", any), ("all", all), ("divmod", divmod),
                     ("repr", repr), ("pow", pow)):
        out[name] = V(_pure(name, fn))

    def to_list(args, kwargs, frame, node):
        if not args:
            return V([])
        items = engine._items(args[0])
        return V(list(items)) if items is not None else sym("call", "", (sym("ext", "list"), *args))

    def to_tuple(args, kwargs, frame, node):
        if not args:
            return V(())
        items = engine._items(args[0])
        return V(tuple(items)) if items is not None else sym("call", "", (sym("ext", "tuple"), *args))

    def to_dict(args, kwargs, frame, node):
        out_dict: dict = {}
        if args:
            source = args[0]
            if isinstance(source.data, dict):
                out_dict.update(source.data)
            else:
                items = engine._items(source)
                if items is None:
                    return sym("ext", "dict")
                for item in items:
                    pair = engine._items(item)
                    if pair is None or len(pair) != 2 or not is_const(pair[0]):
                        return sym("ext", "dict")
                    out_dict[plain(pair[0])] = pair[1]
        out_dict.update(kwargs)
        return V(out_dict)

    def length(args, kwargs, frame, node):
        items = engine._items(args[0]) if args else None
        if items is not None:
            return const(len(items), args[0].lines)
        return sym("call", "", (sym("ext", "len"), *args))

    def make_range(args, kwargs, frame, node):
        values = _numbers(args)
        if values is not None and all(isinstance(v, int) for v in values) and len(range(*values)) <= MAX_ITERATIONS:
            return V(Sym("range", "", tuple(args)), _lines_of(args))
        return sym("call", "", (sym("ext", "range"), *args))

    def enumerate_(args, kwargs, frame, node):
        items = engine._items(args[0]) if args else None
        if items is None:
            return sym("call", "", (sym("ext", "enumerate"), *args))
        return V([V((const(i), item)) for i, item in enumerate(items)])

    def zip_(args, kwargs, frame, node):
        lists = [engine._items(a) for a in args]
        if any(items is None for items in lists):
            return sym("call", "", (sym("ext", "zip"), *args))
        return V([V(tuple(group)) for group in zip(*lists)])

    def getattr_(args, kwargs, frame, node):
        if len(args) < 2 or not isinstance(args[1].data, str):
            return sym("call", "", (sym("ext", "getattr"), *args))
        try:
            found = engine._getattr(args[0], args[1].data, frame, node)
        except Raised:
            if len(args) > 2:
                return args[2]
            raise
        if len(args) > 2 and isinstance(found.data, Sym) and found.data.op == "attr" and isinstance(
                args[0].data, Instance) and not args[0].data.cls.has_external_base():
            return args[2]  # an attribute never set on an object of read classes: the default
        return found

    def setattr_(args, kwargs, frame, node):
        if len(args) == 3 and isinstance(args[1].data, str):
            engine._setattr(args[0], args[1].data, args[2], frame, node)
        return const(None)

    def hasattr_(args, kwargs, frame, node):
        if len(args) == 2 and isinstance(args[1].data, str):
            obj = args[0].data
            if isinstance(obj, Instance):
                if args[1].data in obj.attrs or obj.cls.lookup(args[1].data) is not None:
                    return const(True)
                return const(False) if not obj.cls.has_external_base() else sym("ext", "hasattr")
            if isinstance(obj, Module):
                return const(engine._module_name(obj, args[1].data) is not None)
        return sym("call", "", (sym("ext", "hasattr"), *args))

    def isinstance_(args, kwargs, frame, node):
        if len(args) != 2:
            return sym("ext", "isinstance")
        obj, kinds = args
        candidates = engine._items(kinds) if isinstance(kinds.data, tuple) else [kinds]
        python = {"int": int, "float": float, "str": str, "bool": bool, "dict": dict, "list": list,
                  "tuple": tuple, "type(None)": type(None)}
        if all(isinstance(c.data, Native) and c.data.name in python for c in candidates):
            if is_const(obj):
                return const(any(isinstance(plain(obj), python[c.data.name]) for c in candidates))
            if type(obj.data) in (dict, list, tuple):  # a container's kind is known whatever its items are
                return const(any(python[c.data.name] is type(obj.data) for c in candidates))
        if isinstance(obj.data, Instance) and all(isinstance(c.data, Class) for c in candidates):
            mro = obj.data.cls.mro()
            if any(c.data in mro for c in candidates):
                return const(True)
            return const(False) if not obj.data.cls.has_external_base() else sym("ext", "isinstance")
        return sym("call", "", (sym("ext", "isinstance"), *args))

    def super_(args, kwargs, frame, node):
        function = frame.function if frame is not None else None
        while function is not None and function.owner is None and function.closure is not None:
            function = function.closure.function
        if function is None or function.owner is None:
            return sym("ext", "super")
        params = function.node.params.params
        receiver = frame.locals.get(params[0].name.value) if params else None
        if receiver is None:
            return sym("ext", "super")
        return V(Super(function.owner, receiver))

    def print_(args, kwargs, frame, node):
        return const(None)

    for name, fn in (("list", to_list), ("tuple", to_tuple), ("dict", to_dict), ("len", length),
                     ("range", make_range), ("enumerate", enumerate_), ("zip", zip_), ("getattr", getattr_),
                     ("setattr", setattr_), ("hasattr", hasattr_), ("isinstance", isinstance_), ("super", super_),
                     ("print", print_)):
        out[name] = V(Native(name, fn))
    for name in ("ValueError", "TypeError", "KeyError", "AssertionError", "NotImplementedError", "RuntimeError",
                 "ImportError", "AttributeError", "IndexError", "Exception", "object", "type", "set", "frozenset",
                 "iter", "next", "map", "filter", "id", "hash", "vars", "open", "callable", "reversed"):
        out.setdefault(name, sym("ext", name))
    out["__name__"] = const("__main__")
    return out


def _partial(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
    if not args:
        return sym("ext", "functools.partial")
    return V(Partial(args[0], tuple(args[1:]), dict(kwargs)))


def _math(fn: Callable, name: str) -> Callable:
    def call(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
        values = _numbers(args)
        if values is not None and not kwargs:
            try:
                return const(fn(*values), _lines_of(args))
            except (TypeError, ValueError, OverflowError) as exc:
                return unknown(f"{name}: {exc}")
        return sym("call", "", (sym("ext", name), *args))
    return call


def _to_array(name: str) -> Callable:
    """``jnp.array(x)`` of a number: that number (a dtype changes its precision, not its meaning)."""
    def call(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
        if args and isinstance(args[0].data, (int, float)) and not isinstance(args[0].data, bool):
            return args[0]
        return sym("call", "", (sym("ext", name), *args), tuple(sorted(kwargs.items())))
    return call


def _argument(args: list[V], kwargs: dict[str, V], index: int, name: str) -> V | None:
    if name in kwargs:
        return kwargs[name]
    return args[index] if index < len(args) else None


def _scan_through(engine: Engine, result: V, args: list[V], kwargs: dict[str, V], frame, node) -> V:
    """``jax.lax.scan(f, init, xs)`` calls ``f(carry, x)`` for each step: run it once with the
    initial carry and one step's slice, so that what ``f`` calls is followed. The result stays
    symbolic; a raise inside counts for one path only."""
    body = _argument(args, kwargs, 0, "f")
    if body is not None:
        init = _argument(args, kwargs, 1, "init") or sym("param", "carry")
        xs = _argument(args, kwargs, 2, "xs")
        step = sym("item", "", (xs, sym("param", "t"))) if xs is not None else sym("param", "x")
        engine._either(lambda: engine._call(body, [init, step], {}, frame, node))
    return result


def _grad_through(engine: Engine, result: V, args: list[V], kwargs: dict[str, V], frame, node) -> V:
    """``jax.grad(fn)`` / ``jax.value_and_grad(fn)``: a function that calls ``fn`` with its own
    arguments (the loss gets exactly what the caller passes). Its result stays symbolic."""
    fn = _argument(args, kwargs, 0, "fun")
    if fn is None:
        return result

    def call(inner_args, inner_kwargs, inner_frame, inner_node) -> V:
        engine._either(lambda: engine._call(fn, list(inner_args), dict(inner_kwargs), inner_frame, inner_node))
        lines = engine._at(inner_frame, inner_node) if inner_frame is not None and inner_node is not None else ()
        return sym("call", "", (result, *inner_args), tuple(sorted(inner_kwargs.items())), lines)
    return V(Native(describe(result), call), result.lines)


def _identity(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
    """``functools.wraps(fn)``: a decorator that keeps the wrapped call's meaning."""
    return V(Native("identity", lambda a, k, f, n: a[0] if a else const(None)))


# Public names of library namespaces that upstream code looks names up in (a spec's loss,
# activation, optimizer or scheduler name): facts about torch 2.x, so that such a lookup
# runs exactly, and a name the library lacks fails where the code would.
TORCH_NN = (
    "Module", "Sequential", "ModuleList", "ModuleDict", "Parameter", "ParameterList", "ParameterDict", "Identity",
    "Linear", "LazyLinear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "Flatten", "Unflatten", "Embedding", "EmbeddingBag",
    "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "Transformer", "TransformerEncoder",
    "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer", "MultiheadAttention",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LayerNorm", "GroupNorm", "RMSNorm",
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "Dropout", "Dropout1d", "Dropout2d",
    "Dropout3d", "AlphaDropout", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "ZeroPad2d",
    "ReflectionPad2d", "ReplicationPad2d", "ConstantPad2d", "Upsample", "PixelShuffle",
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "SELU", "CELU", "GELU", "SiLU", "Mish", "ELU", "Hardshrink",
    "Hardsigmoid", "Hardtanh", "Hardswish", "LogSigmoid", "Sigmoid", "Softplus", "Softshrink", "Softsign", "Tanh",
    "Tanhshrink", "Threshold", "GLU", "Softmin", "Softmax", "Softmax2d", "LogSoftmax",
    "L1Loss", "MSELoss", "CrossEntropyLoss", "CTCLoss", "NLLLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "KLDivLoss", "BCELoss", "BCEWithLogitsLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
    "MultiLabelMarginLoss", "HuberLoss", "SmoothL1Loss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
    "CosineEmbeddingLoss", "MultiMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss",
    "init", "functional", "utils", "parameter", "modules",
)
EXTERNAL_NAMESPACES = {"torch.nn": TORCH_NN}

# Library constants configs are written with.
EXTERNAL_CONSTANTS = {"numpy.nan": math.nan, "numpy.inf": math.inf, "math.inf": math.inf, "math.pi": math.pi,
                      "math.e": math.e, "numpy.pi": math.pi, "numpy.float32": "float32"}

ENVIRONMENT_READS = frozenset({"os.getenv", "os.environ.get"})  # answered from Engine.environ

_EXTERNAL_CALLS: dict[str, Callable[[Engine, list[V], dict[str, V]], V]] = {
    "functools.partial": _partial,
    "functools.wraps": _identity,
    "math.ceil": _math(math.ceil, "math.ceil"),
    "math.floor": _math(math.floor, "math.floor"),
    "math.sqrt": _math(math.sqrt, "math.sqrt"),
    "math.exp": _math(math.exp, "math.exp"),
    "math.log": _math(math.log, "math.log"),
    "numpy.exp": _math(math.exp, "numpy.exp"),
    "numpy.log": _math(math.log, "numpy.log"),
    "numpy.sqrt": _math(math.sqrt, "numpy.sqrt"),
    "jax.numpy.array": _to_array("jax.numpy.array"),
    "jax.numpy.asarray": _to_array("jax.numpy.asarray"),
}

# Library functions that call a function they are given: followed, so that a value bound
# with functools.partial or passed as a keyword reaches the function that receives it.
_CALLS_THROUGH: dict[str, Callable[..., V]] = {
    "jax.lax.scan": _scan_through,
    "jax.grad": _grad_through,
    "jax.value_and_grad": _grad_through,
}


# --------------------------------------------------------------------------------------
# Helpers for readers
# --------------------------------------------------------------------------------------


def _has_star_import(statement: cst.CSTNode) -> bool:
    """A module-level statement that is, or holds (in if/try bodies), ``from x import *``."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return False
    if isinstance(statement, cst.SimpleStatementLine):
        return any(isinstance(s, cst.ImportFrom) and isinstance(s.names, cst.ImportStar) for s in statement.body)
    for child in _walk(statement):
        if isinstance(child, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(child, cst.ImportFrom) and isinstance(child.names, cst.ImportStar):
            return True
    return False


def _top_bindings(statement: cst.CSTNode) -> set[str]:
    """Names a module-level statement binds (into if/try/with/for bodies, not into defs)."""
    out: set[str] = set()
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    out.update(_target_names(target.target))
            elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                out.update(_target_names(small.target))
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
        out.update(_target_names(statement.target))
    if isinstance(statement, cst.With):
        for item in statement.items:
            if item.asname is not None:
                out.update(_target_names(item.asname.name))
    blocks = []
    for name in ("body", "orelse", "finalbody"):
        part = getattr(statement, name, None)
        if part is not None:
            blocks.append(part)
    for handler in getattr(statement, "handlers", ()):
        blocks.append(handler)
        if handler.name is not None:
            out.update(_target_names(handler.name.name))
    for block in blocks:
        if isinstance(block, cst.If):
            out |= _top_bindings(block)
            continue
        body = block.body if hasattr(block, "body") else block
        inner = body.body if hasattr(body, "body") else body
        for child in inner if isinstance(inner, (list, tuple)) else [inner]:
            if isinstance(child, cst.BaseSmallStatement):
                out |= _top_bindings(cst.SimpleStatementLine(body=[child]))
            else:
                out |= _top_bindings(child)
    return out


def _declared_globals(function: cst.FunctionDef) -> set[str]:
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


def _changed_names(statement: cst.CSTNode, setters: dict[str, set[str]]) -> set[str]:
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
                out |= setters.get(func.value, set())
            elif isinstance(func, cst.Attribute):
                targets = [func.value]
        for target in targets:
            while isinstance(target, (cst.Attribute, cst.Subscript)):
                target = target.value
            if isinstance(target, cst.Name):
                out.add(target.value)
    return out


def _bound_names(node: cst.CSTNode) -> list[str]:
    out = []
    for child in _walk(node):
        if isinstance(child, cst.AssignTarget) and isinstance(child.target, cst.Name):
            out.append(child.target.value)
    return out


def _target_names(node: cst.CSTNode) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _target_names(e.value)]
    return []


def _slot(owner: "Instance | dict") -> dict:
    """The names an engine journal entry's owner holds: an instance's attributes, or a
    class's or module's namespace."""
    return owner.attrs if isinstance(owner, Instance) else owner


def _written_names(owner: "Instance | dict", before: dict) -> set:
    # An instance's journal keeps all its attributes before the first write; a
    # namespace's keeps only the names written.
    return set(before) | set(owner.attrs) if isinstance(owner, Instance) else set(before)


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
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
    return any(isinstance(c, V) and mentions(c, predicate, seen) for c in children)


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


__all__ = ["Engine", "Loader", "V", "Sym", "Phi", "Unknown", "Raised", "Instance", "Function", "Class", "Module",
           "const", "sym", "unknown", "is_const", "plain", "why_not_constant", "describe", "linear", "Linear",
           "terms", "mentions", "call_name", "call_operand", "qualified_name", "short_name", "all_lines",
           "spec_value", "merge"]
