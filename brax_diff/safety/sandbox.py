"""The sandbox rule fix templates run in: bounded work, bounded output, bounded time.

A user's rules file may carry fix templates (``value: "{{ brax * 2 }}"``). Jinja's own
sandbox keeps them away from Python internals, but not from ``{{ "x" * 10**10 }}`` (24 GB)
or a loop that never ends. Here a template

* is an expression language only: output, ``{% if %}`` and expressions; no ``for``,
  ``macro``, ``set``, ``call`` or ``include`` (checked when the rules load), so its work
  grows with its length, not with its input;
* computes ``*``, ``**``, ``+`` ... only after :func:`brax_diff.safety.limits.operation_refused`
  judged the operands' sizes, calls only size-preserving methods and filters, and has no
  globals (``range``, ``lipsum``); the methods and filters whose output can outgrow their
  input (``str.join``, ``join``, ``sum``, ``tojson(indent=)``, ``int``) are judged from
  their operands before they run (:data:`MAX_OUTPUT` characters, :data:`MAX_INDENT`, the
  integer digit limit);
* stops after :data:`MAX_OPERATIONS` operations, :data:`MAX_SECONDS` seconds or
  :data:`MAX_OUTPUT` characters of output, with a :class:`TemplateLimit`.
"""

from __future__ import annotations

import contextvars
import time
from typing import Any, Callable

from jinja2 import StrictUndefined, Template, TemplateError, nodes
from jinja2.sandbox import SandboxedEnvironment

from .limits import LimitExceeded, check_nesting, int_literal_refused, operation_refused, result_refused

MAX_SOURCE = 4_000  # characters of one template
MAX_OUTPUT = 10_000  # characters one template renders
MAX_OPERATIONS = 10_000  # operators, calls, attribute and item lookups per render
MAX_SECONDS = 1.0
# Compiled templates one sandbox keeps: a report renders a few dozen distinct fix templates
# over a thousand times, and compiling one costs a millisecond or more.
MAX_COMPILED = 1024

# Statement nodes a template may use; every expression node is allowed.
_STATEMENTS = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.If)
# Methods that return something no larger than their object.
_SAFE_METHODS = {
    str: {"lower", "upper", "title", "capitalize", "strip", "lstrip", "rstrip", "startswith", "endswith",
          "split", "rsplit", "join", "count", "find", "index", "isdigit", "isalpha", "isupper", "islower"},
    dict: {"get", "items", "keys", "values"},
    list: {"count", "index"},
    tuple: {"count", "index"},
}
# Filters whose result is bounded by their input (no widths, counts or repeats to ask for).
_SAFE_FILTERS = {"abs", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first", "float", "int",
                 "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr",
                 "reverse", "round", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim",
                 "unique", "upper"}


class TemplateLimit(LimitExceeded):
    """A fix template asked for more work, output or time than the sandbox allows."""


class _Budget:
    def __init__(self) -> None:
        self.operations = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def spend(self) -> None:
        self.operations += 1
        if self.operations > MAX_OPERATIONS:
            raise TemplateLimit(f"more than {MAX_OPERATIONS} operations (limit)")
        if time.monotonic() > self.deadline:
            raise TemplateLimit(f"ran longer than {MAX_SECONDS:g} s (limit)")


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("template_budget", default=None)


def _spend() -> None:
    budget = _budget.get()
    if budget is not None:
        budget.spend()


def _replace(value: Any, old: Any, new: Any, count: int | None = None) -> str:
    """Jinja's ``replace`` filter, refused when its result would pass MAX_OUTPUT."""
    text, old, new = str(value), str(old), str(new)
    times = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        times = min(times, count)
    if len(text) + times * max(len(new) - len(old), 0) > MAX_OUTPUT:
        raise TemplateLimit(f"replace would give more than {MAX_OUTPUT} characters (limit)")
    return text.replace(old, new, -1 if count is None else count)


MAX_INDENT = 16  # tojson's indent: the output grows with indent x depth x items


def _refuse_long(size: int, what: str) -> None:
    if size > MAX_OUTPUT:
        raise TemplateLimit(f"{what} would give more than {MAX_OUTPUT} characters (limit)")


def _joined_size(separator: Any, items: list) -> int:
    return sum(len(str(item)) for item in items) + len(str(separator)) * max(len(items) - 1, 0)


def _json_size_at_least(value: Any, indent: int) -> int:
    """A lower bound of ``json.dumps(value, indent=indent)``'s length, counted until it passes
    MAX_OUTPUT: ``[[0] * 99999] * 100000`` is 10^10 values behind 100,000 references, which
    json.dumps would write out before the output check saw them. Every value adds at least one
    character, so the walk stops within MAX_OUTPUT values."""
    size = -1  # the top value has no separator before it
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack and size <= MAX_OUTPUT:
        item, depth = stack.pop()
        size += (1 + indent * depth) if indent else 1  # a newline and the indent, or a separator
        if isinstance(item, dict):
            size += 1
            for key, child in item.items():
                size += len(str(key)) + 3
                stack.append((child, depth + 1))
                if size > MAX_OUTPUT:
                    break
        elif isinstance(item, (list, tuple)):
            size += 1
            stack.extend((child, depth + 1) for child in item[:MAX_OUTPUT])
        else:
            size += len(str(item)) if isinstance(item, (str, int, float)) else 4
    return size


def _bounded_filters(filters: dict) -> dict:
    """``join``, ``sum``, ``tojson`` and ``int``, whose output is not bounded by their input
    (a separator repeated per item, lists summed, an indent, a 4,000-digit number): judged
    from their operands before they run (the output check comes after the work)."""
    join, total, tojson, to_int = filters["join"], filters["sum"], filters["tojson"], filters["int"]

    def bounded_join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
        items = list(value)
        if attribute is None:
            _refuse_long(_joined_size(d, items), "join")
        else:
            _refuse_long(len(str(d)) * max(len(items) - 1, 0), "join")
        result = join(eval_ctx, items, d, attribute)
        _refuse_long(len(result), "join")
        return result

    def bounded_sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
        items = list(iterable)
        sized = [x for x in [start, *items] if isinstance(x, (str, list, tuple))]
        if sized and attribute is None:
            _refuse_long(sum(len(x) for x in sized), "sum")
        result = total(environment, items, attribute, start)
        refused = result_refused(result)
        if refused:
            raise TemplateLimit(f"sum: {refused}")
        return result

    def bounded_tojson(eval_ctx: Any, value: Any, indent: Any = None) -> Any:
        if indent is not None and not (isinstance(indent, int) and 0 <= indent <= MAX_INDENT):
            raise TemplateLimit(f"tojson(indent=...) over {MAX_INDENT} (limit)")
        _refuse_long(_json_size_at_least(value, indent or 0), "tojson")
        return tojson(eval_ctx, value, indent)

    def bounded_int(value: Any, default: int = 0, base: int = 10) -> int:
        if isinstance(value, str) and int_literal_refused(value.strip()):
            raise TemplateLimit(f"int: {int_literal_refused(value.strip())}")
        return to_int(value, default, base)

    for wrapper, original in ((bounded_join, join), (bounded_sum, total), (bounded_tojson, tojson)):
        wrapper.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined] - eval context/environment
    return {"join": bounded_join, "sum": bounded_sum, "tojson": bounded_tojson, "int": bounded_int}


class BoundedSandbox(SandboxedEnvironment):
    """Jinja's sandbox with every operator, call and lookup counted and size-checked."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self, *, kept_by: tuple[str, ...] = (), **options: Any) -> None:
        super().__init__(**options)
        self.globals.clear()  # range, lipsum, cycler, joiner, namespace, dict
        self.filters = {name: self.filters[name] for name in _SAFE_FILTERS}
        self.filters["replace"] = _replace
        self.filters.update(_bounded_filters(self.filters))
        self._compiled: dict[str, Template] = {}
        self.compilations = 0  # how many templates this sandbox compiled (tests check "once")
        # Compiled code kept between runs, named by a digest of this module and of ``kept_by``
        # (the modules that choose the options: they shape the code); only for templates that
        # passed check_template before, since the cache holds only what compiled.
        self._kept_by = kept_by
        self._disk: Any = None

    def compiled(self, source: str, tree: nodes.Template | None = None) -> Template:
        """``source`` compiled once per sandbox (``tree``: its parse, when the caller has it).

        Jinja's ``from_string`` compiles on every call; the globals and filters a template
        binds are this sandbox's, fixed at construction, so a compiled one can be reused;
        with ``kept_by``, its compiled code is also kept on disk for the next process."""
        found = self._compiled.get(source)
        if found is None:
            if len(self._compiled) >= MAX_COMPILED:
                self._compiled.clear()
            found = self._compiled[source] = self._compile_kept(source, tree)
        return found

    def _compile_kept(self, source: str, tree: nodes.Template | None) -> Template:
        disk = self._disk_cache()
        bucket = disk.get_bucket(self, "fix:" + source, None, source) if disk is not None else None
        code = bucket.code if bucket is not None else None
        if code is None:
            code = self.compile(source if tree is None else tree)
            self.compilations += 1
            if bucket is not None:
                bucket.code = code
                disk.set_bucket(bucket)
        return self.template_class.from_code(self, code, self.make_globals(None), None)

    def _disk_cache(self) -> Any:
        if self._disk is None and self._kept_by:
            from .jinja_bytecode import private_bytecode_cache

            self._disk = private_bytecode_cache("fix", __file__, *self._kept_by) or False
        return self._disk or None

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _spend()
        refused = operation_refused(operator, left, right)
        if refused:
            raise TemplateLimit(refused)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's names)
        _spend()
        if getattr(__obj, "__name__", None) == "join" and isinstance(getattr(__obj, "__self__", None), str) and args:
            items = list(args[0])  # str.join: the separator is repeated per item
            _refuse_long(_joined_size(__obj.__self__, items), "str.join")
            args = (items, *args[1:])
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _spend()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _spend()
        return super().getitem(obj, argument)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if callable(value):
            allowed = next((names for kind, names in _SAFE_METHODS.items() if isinstance(obj, kind)), set())
            if attr not in allowed:
                return False
        return super().is_safe_attribute(obj, attr, value)


def check_template(env: BoundedSandbox, source: str) -> None:
    """Raise TemplateError when ``source`` does not parse or uses a statement the sandbox refuses."""
    if len(source) > MAX_SOURCE:
        raise TemplateError(f"longer than {MAX_SOURCE} characters (limit)")
    try:
        check_nesting(source, "template", "python")  # Jinja's parser and compiler recurse per level
    except LimitExceeded as exc:
        raise TemplateError(str(exc).removeprefix("template: ")) from None
    tree = env.parse(source)
    for node in tree.find_all(nodes.Stmt):
        if not isinstance(node, _STATEMENTS):
            raise TemplateError(f"{{% {type(node).__name__.lower()} %}} is not allowed (expressions and "
                                "{% if %} only)")
    env.compiled(source, tree)  # filters and tests are looked up when the template compiles


def render_bounded(env: BoundedSandbox, source: str, variables: dict, finalize: Callable[[str], str] = str.strip) -> str:
    """Render ``source`` with ``variables`` within the operation, time and output limits."""
    token = _budget.set(_Budget())
    try:
        out: list[str] = []
        size = 0
        for chunk in env.compiled(source).generate(**variables):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise TemplateLimit(f"renders more than {MAX_OUTPUT} characters (limit)")
            out.append(chunk)
        return finalize("".join(out))
    finally:
        _budget.reset(token)


def sandbox(finalize: Callable[[Any], Any], kept_by: tuple[str, ...] = ()) -> BoundedSandbox:
    """``kept_by``: keep compiled templates on disk, named by these modules' digest (see BoundedSandbox)."""
    return BoundedSandbox(undefined=StrictUndefined, autoescape=False, finalize=finalize, kept_by=kept_by)


__all__ = ["BoundedSandbox", "TemplateLimit", "check_template", "render_bounded", "sandbox",
           "MAX_OUTPUT", "MAX_OPERATIONS", "MAX_SECONDS", "MAX_SOURCE"]
