"""Static reading of Python source with libcst: nothing upstream is imported or run.

:class:`PyModule` parses a file once and answers the questions extractors ask: where is
function ``f``, what are its signature defaults, what literal does this expression
denote, on which line is this node. :func:`literal` evaluates the small constant
language upstream configs are written in (numbers with underscores, ``1e-3``, tuples,
``(32,) * 4``, strings, True/False/None, arithmetic on those).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import libcst as cst
from libcst._nodes.internal import CodegenState

from brax_diff.safety.limits import LimitExceeded, check_code_depth, check_nesting, int_literal_refused, operation_refused


class NotLiteral(ValueError):
    """The expression is not a constant the static evaluator understands."""


class LiteralTooLarge(NotLiteral):
    """The constant would pass a size limit (brax_diff.safety.limits); it is not computed."""


@dataclass(frozen=True)
class Located:
    """A value and the 1-based line it was read from."""

    value: Any
    line: int
    node: cst.CSTNode | None = None


class _Syntactic:
    """``record_syntactic_position`` as a plain context manager (libcst's is a generator)."""

    __slots__ = ("state", "node", "start_node", "start")

    def __init__(self, state: "_LineState", node: cst.CSTNode, start_node: cst.CSTNode | None) -> None:
        self.state, self.node, self.start_node = state, node, start_node

    def __enter__(self) -> None:
        self.start = self.state.line

    def __exit__(self, *exc: object) -> bool:
        lines = self.state.lines
        lines[self.node] = lines[self.start_node] if self.start_node is not None else self.start
        return False


class _LineState(CodegenState):
    """libcst's ``PositionProvider`` reduced to what the extractors ask: each node's start
    line. The same codegen walk records the same nodes, in the same order, with the same
    rules (the syntactic position where a node declares one, else where its code begins),
    but keeps one int per node instead of two ``CodePosition`` and counts newlines instead
    of splitting every token with a regex: about five times faster, and parsing with
    positions was most of a cold run's parse cost."""

    __slots__ = ("line", "lines", "_stack")

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line = 1
        self.lines: dict[cst.CSTNode, int] = {}
        self._stack: list[int] = []

    def add_indent_tokens(self) -> None:
        pass  # indentation holds no newline

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\n" in value or "\r" in value:  # PositionProvider's newline: \r\n, \r or \n
            self.line += value.count("\n") + value.count("\r") - value.count("\r\n")

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append(self.line)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        if node not in self.lines:  # a syntactic position recorded inside wins
            self.lines[node] = start

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> _Syntactic:  # type: ignore[override]
        return _Syntactic(self, node, start_node)


def start_lines(module: cst.Module) -> dict[cst.CSTNode, int]:
    """Every node's 1-based start line as libcst's ``PositionProvider`` gives it
    (``positions[node].start.line``), in the provider's order."""
    state = _LineState(module)
    module._codegen(state)
    return state.lines


class PyModule:
    """One parsed Python file with line positions."""

    def __init__(self, source: str, path: str = "<string>") -> None:
        self.path = path
        self.module = parse_module(source, path)
        try:
            self.positions = start_lines(self.module)  # node -> line, in source order
        except RecursionError:  # a flat ast node libcst nests (a long `a and b and ...`)
            raise SyntaxError(f"{path}: cannot parse: nested deeper than the recursion limit") from None

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node]

    def walk(self, accepts: Callable[[cst.CSTNode], bool] | None = None) -> Iterator[cst.CSTNode]:
        """Every node (in source order) that ``accepts`` accepts. (A predicate, not
        libcst.matchers: importing those builds some 400 dataclasses, 0.2 s of a cold run.)"""
        for node in self.positions:  # PositionProvider visits in source order
            if accepts is None or accepts(node):
                yield node

    def functions(self, name: str) -> list[cst.FunctionDef]:
        return list(self.walk(lambda n: isinstance(n, cst.FunctionDef) and n.name.value == name))

    def function(self, name: str) -> cst.FunctionDef | None:
        """The module's ``def name(...)``: the last top-level one (Python binds the last
        ``def``), else the first nested one, or None."""
        top = [n for n in self.module.body if isinstance(n, cst.FunctionDef) and n.name.value == name]
        if top:
            return top[-1]
        found = self.functions(name)
        return found[0] if found else None

    def classes(self, name: str) -> list[cst.ClassDef]:
        return list(self.walk(lambda n: isinstance(n, cst.ClassDef) and n.name.value == name))

    def signature_defaults(self, fn: cst.FunctionDef) -> dict[str, Located]:
        """Parameter name -> its default (evaluated when literal, else the source text)."""
        out: dict[str, Located] = {}
        params = fn.params
        for param in (*params.params, *params.kwonly_params):
            if param.default is None:
                continue
            out[param.name.value] = Located(self.literal_or_code(param.default), self.line(param), param.default)
        return out

    def code(self, node: cst.CSTNode) -> str:
        """The node's source text, stripped (kept per node: the engine prints the same
        comparisons and conditions into values and reasons on every run)."""
        codes = self.__dict__.setdefault("_codes", {})
        text = codes.get(node)
        if text is None:
            text = codes[node] = self.module.code_for_node(node).strip()
        return text

    def string(self, node: cst.CSTNode) -> Any:
        """A string literal's ``evaluated_value`` (str or bytes; None when libcst cannot
        evaluate it), kept per node: libcst evaluates it with ``ast.literal_eval`` each
        time, and every run and variant reads the same literals."""
        values = self.__dict__.setdefault("_strings", {})
        if node in values:
            return values[node]
        value = values[node] = node.evaluated_value
        return value

    def of_kinds(self, kinds: tuple[type, ...]) -> tuple[cst.CSTNode, ...]:
        """The nodes of these types, in :meth:`walk` order (kept per tuple of types)."""
        found = self.__dict__.setdefault("_kinds", {})
        if kinds not in found:
            found[kinds] = tuple(node for node in self.positions if isinstance(node, kinds))
        return found[kinds]

    def literal_or_code(self, node: cst.CSTNode, names: Mapping[str, Any] | None = None) -> Any:
        """The literal value, or ``Code('...')`` wrapping the source text when not literal.

        A literal past a size limit (``10**10**10``) is a LimitExceeded naming the line."""
        try:
            return literal(node, names)
        except LiteralTooLarge as exc:
            raise LimitExceeded(f"{self.path}: line {self.line(node)}: {exc}") from None
        except NotLiteral:
            return Code(self.code(node))


class IndexedModule(PyModule):
    """A PyModule whose function/class lookups are answered from a one-pass index."""

    def _index(self) -> dict[tuple[type, str], list[cst.CSTNode]]:
        if not hasattr(self, "_by_name"):
            index: dict[tuple[type, str], list[cst.CSTNode]] = {}
            for node in descendants(self.module):
                if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                    index.setdefault((type(node), node.name.value), []).append(node)
            self._by_name = index
        return self._by_name

    def functions(self, name: str) -> list[cst.FunctionDef]:
        return list(self._index().get((cst.FunctionDef, name), []))

    def classes(self, name: str) -> list[cst.ClassDef]:
        return list(self._index().get((cst.ClassDef, name), []))


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the duration (re-entrant; restored after).

    Parsing and an engine run allocate millions of small objects that mostly survive
    (nodes, values), and every full collection re-scans all of them and every parsed
    module: about a sixth of a cold run. What the block leaves as cyclic garbage is
    collected by the next collection after it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# Parsed files shared by every reader and run, keyed by blob id: parsing (with line
# positions) is the slow part, and most files do not change from one commit to the next.
_PARSED: dict[str, IndexedModule] = {}
MAX_PARSED = 160


def parse_file(snapshot, path: str) -> IndexedModule:
    """The file at ``path`` in ``snapshot``, parsed once per blob. Raises the snapshot's
    SourceError for a missing file and SyntaxError for one that does not parse."""
    blob = snapshot.blob_id(path)
    cached = _PARSED.pop(blob, None) if blob is not None else None
    if cached is not None:
        _PARSED[blob] = cached  # the most recently used goes last: the least recently used is evicted
        return cached
    text = snapshot.read(path)
    with paused_gc():
        module = IndexedModule(text, path)
    if len(_PARSED) >= MAX_PARSED:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[blob] = module
    return module


def parse_module(source: str, path: str) -> cst.Module:
    """libcst's parse, after the nesting checks that keep it from recursing past the stack
    (LimitExceeded naming the line); SyntaxError when it cannot parse."""
    check_nesting(source, path, "python")
    check_code_depth(source, path)
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise SyntaxError(f"{path}: cannot parse: {exc.message} (line {exc.raw_line})") from None
    except RecursionError:
        raise SyntaxError(f"{path}: cannot parse: nested deeper than the recursion limit") from None


@dataclass(frozen=True)
class Code:
    """An expression that is not a literal, kept as its source text."""

    text: str

    def __str__(self) -> str:
        return self.text


_BINARY = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.Divide: operator.truediv,
    cst.FloorDivide: operator.floordiv,
    cst.Power: operator.pow,
    cst.Modulo: operator.mod,
}
# Python's symbol for each operator, as brax_diff.safety.limits.operation_refused takes it.
OPERATOR_SYMBOLS = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//",
                    cst.Power: "**", cst.Modulo: "%"}


def checked_operation(operator_node: cst.BaseBinaryOp, left: Any, right: Any) -> Any:
    """``left op right`` after the size check (LiteralTooLarge); NotLiteral when Python refuses it."""
    op = _BINARY.get(type(operator_node))
    if op is None:
        raise NotLiteral("binary operator")
    if isinstance(operator_node, cst.Modulo) and isinstance(left, (str, bytes)):
        raise NotLiteral("%-formatting")  # kept as code: its widths could ask for any size
    refused = operation_refused(OPERATOR_SYMBOLS[type(operator_node)], left, right)
    if refused:
        raise LiteralTooLarge(refused)
    try:
        return op(left, right)
    except (TypeError, ZeroDivisionError, OverflowError, ValueError) as exc:
        raise NotLiteral(str(exc)) from None


def literal(node: cst.CSTNode, names: Mapping[str, Any] | None = None) -> Any:
    """Evaluate a constant expression; ``names`` resolves bare names (module constants).

    Raises :class:`NotLiteral` for anything else (calls, attributes, comprehensions).
    """
    if isinstance(node, cst.Integer):
        refused = int_literal_refused(node.value.replace("_", ""))
        if refused:
            raise LiteralTooLarge(refused)
        return int(node.value.replace("_", ""), 0)
    if isinstance(node, cst.Float):
        return float(node.value.replace("_", ""))
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        if isinstance(value, bytes):
            raise NotLiteral("bytes")
        return value
    if isinstance(node, cst.Name):
        if node.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.value]
        if names is not None and node.value in names:
            return names[node.value]
        raise NotLiteral(node.value)
    if isinstance(node, cst.UnaryOperation):
        value = literal(node.expression, names)
        try:
            if isinstance(node.operator, cst.Minus):
                return -value
            if isinstance(node.operator, cst.Plus):
                return +value
        except TypeError as exc:  # -"text"
            raise NotLiteral(str(exc)) from None
        if isinstance(node.operator, cst.Not):
            return not value
        raise NotLiteral("unary operator")
    if isinstance(node, cst.BinaryOperation):
        if type(node.operator) not in _BINARY:
            raise NotLiteral("binary operator")
        return checked_operation(node.operator, literal(node.left, names), literal(node.right, names))
    if isinstance(node, (cst.Tuple, cst.List)):
        items = []
        for element in node.elements:
            if isinstance(element, cst.StarredElement):
                raise NotLiteral("starred")
            items.append(literal(element.value, names))
        return tuple(items) if isinstance(node, cst.Tuple) else items
    if isinstance(node, cst.Dict):
        out = {}
        for element in node.elements:
            if not isinstance(element, cst.DictElement):
                raise NotLiteral("dict unpacking")
            key = literal(element.key, names)
            try:
                out[key] = literal(element.value, names)
            except TypeError as exc:  # an unhashable key: {[1]: 2}
                raise NotLiteral(str(exc)) from None
        return out
    raise NotLiteral(type(node).__name__)


def dotted_name(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for Name/Attribute chains, else None."""
    kind = type(node)  # exact types: libcst's nodes are ABCs, whose isinstance is slow
    if kind is cst.Name:
        return node.value
    if kind is cst.Attribute:
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def call_kwargs(call: cst.Call) -> dict[str, cst.Arg]:
    """Keyword arguments of a call, by name."""
    return {arg.keyword.value: arg for arg in call.args if arg.keyword is not None}


_FIELDS: dict[type, tuple[str, ...]] = {}


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Direct children, read from the dataclass fields (libcst's ``.children`` runs a
    visitor per call, which made whole-file queries take seconds). Whitespace is skipped."""
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(
            f.name for f in dataclasses.fields(node)
            if not f.name.startswith(("whitespace", "leading_lines", "lines_after", "header", "footer")))
    out: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        if _is_node(value):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out.extend(item for item in value if _is_node(item))
    return out


# Walks already made: id(root) -> (root, its descendants). Nodes are immutable, so a walk
# of the same root gives the same nodes; the extractors query the same function bodies for
# every scope. The root is held, so its id is not reused while its entry lives; the whole
# is dropped past MAX_REMEMBERED nodes (a history walk parses a module per commit).
_WALKS: dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = {}
_REMEMBERED = [0]
MAX_REMEMBERED = 2_000_000


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` (itself included), depth first, children in field order
    (which follows the source for the statements and expressions queried here)."""
    found = _WALKS.get(id(node))
    if found is None or found[0] is not node:
        out = []
        stack = [node]
        while stack:
            current = stack.pop()
            out.append(current)
            stack.extend(reversed(child_nodes(current)))
        if _REMEMBERED[0] + len(out) > MAX_REMEMBERED:
            _WALKS.clear()
            _REMEMBERED[0] = 0
        found = _WALKS[id(node)] = (node, tuple(out))
        _REMEMBERED[0] += len(out)
    return iter(found[1])


_NODE_TYPES: dict[type, bool] = {}


def _is_node(value: Any) -> bool:
    """``isinstance(value, cst.CSTNode)``, answered per type once (CSTNode is an ABC: its
    isinstance takes the slow path for every value that is not one)."""
    kind = type(value)
    found = _NODE_TYPES.get(kind)
    if found is None:
        found = _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
    return found


def calls_named(node: cst.CSTNode, suffix: str) -> list[cst.Call]:
    """Calls under ``node`` whose callee's dotted name is ``suffix`` or ends with ``.suffix``."""
    found = []
    for child in descendants(node):
        if type(child) is cst.Call:
            name = dotted_name(child.func) or ""
            if name == suffix or name.endswith("." + suffix):
                found.append(child)
    return found


def plain(value: Any) -> Any:
    """A literal as a JSON-native fact value: tuples become lists."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
