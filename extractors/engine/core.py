"""The engine: entry points, module loading and the class that composes statements, loops,
expressions and calls.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from weakref import WeakKeyDictionary
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import libcst as cst

from brax_diff.facts.model import Provenance

from .pyast import paused_gc
from .values import Class, Instance, Lazy, Module, V, const, describe, sym, unknown
from .runtime import Break, Continue, Failure, Frame, Observation, OutOfBudget, Raised, Return, STEP_BUDGET
from .builtins import builtin_functions
from .reading import changed_names, declared_globals, has_star_import, top_bindings
from .expressions import Expressions
from .calls import Calls
from .loops import Loops
from .statements import Statements

if TYPE_CHECKING:
    from .runtime import CallRecord, Loader
    from .values import Function


class Engine(Statements, Loops, Expressions, Calls):
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
        self.builtins = builtin_functions(self)
        self.sites: list[tuple[Frame, cst.Call]] = []  # the calls being evaluated, outermost first
        self.observation: Observation | None = None
        # Reader hooks: ``decide(node, test, truth, frame)`` sees each ``if`` test (and each
        # ``match`` subject, truth None) and returns the truth to use (SKIP: the whole statement
        # is not run); ``on_setattr(obj, name, value,
        # frame, node)`` sees each attribute the code sets, with the value stored.
        self.decide: Callable | None = None
        self.on_setattr: Callable | None = None
        self.on_create: Callable | None = None
        # Objects a write of names not known may have given attributes they do not list
        # (``setattr(obj, name, v)``, ``cfg.update(unknown)``), with why: a reader does not take
        # an attribute they lack for absent (a default) - it may be there.
        self.opened: WeakKeyDictionary[Instance, str] = WeakKeyDictionary()
        self.changed_arguments: dict | None = None  # what the call just made changed in place (_pass_back)  # a model's objects as made: (object, keyword arguments)

    def open(self, inst: Instance, why: str) -> None:
        """Record that ``inst`` may hold attributes not listed (the first reason is kept; on a
        path the engine later undoes too: a reader then says unknown, never a default)."""
        self.opened.setdefault(inst, why)

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
        functions = {s.name.value: s for s in module.statements if isinstance(s, cst.FunctionDef)}

        @functools.cache
        def declared(name: str) -> set[str]:  # walked only for a function a top-level statement calls
            return declared_globals(functions[name]) if name in functions else set()

        for index, statement in enumerate(module.statements):
            # A statement that binds no name (a setter called at import, `Class.attr = ...` after the
            # class) runs when a name it changes is read.
            for name in top_bindings(statement) or changed_names(statement, declared):
                module.bindings.setdefault(name, []).append(index)
            if has_star_import(statement):  # its names are unknown until it runs
                self._run_top(module, index)

    def _run_top(self, module: Module, index: int) -> None:
        module.running.add(index)
        frame = Frame(module)
        frame.locals = module.globals
        try:
            self._statement(module.statements[index], frame)
        except (Raised, Return, Break, Continue):
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
