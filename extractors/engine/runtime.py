"""What the interpreter carries while it runs: frames, records of calls and failures, the
exceptions that model return/break/continue, and the loader of the modules read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst

from brax_diff.errors import SourceError
from brax_diff.facts.model import Provenance

from .pyast import PyModule, parse_file

if TYPE_CHECKING:
    from .values import Function, Module, V


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


class Raised(Exception):
    """An exception the upstream code raises on every path that reaches it."""

    def __init__(self, kind: str, message: str, where: Provenance | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.where = where


class OutOfBudget(Exception):
    """The run evaluated more than STEP_BUDGET nodes."""


class Return(Exception):
    def __init__(self, value: V) -> None:
        self.value = value


class Break(Exception):
    pass


class Continue(Exception):
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
