"""The YAML half of :mod:`brax_diff.safety.limits`: PyYAML's safe loader within the nesting,
alias-expansion and integer limits. Imported only by the readers of YAML (PyYAML takes 0.04 s to import)."""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from .limits import LimitExceeded, at_line, int_literal_refused
from . import limits as _limits


class BoundedConstructor(yaml.constructor.SafeConstructor):
    """PyYAML's safe constructor, refusing integers longer than MAX_INT_DIGITS."""

    origin = "<yaml>"

    def construct_yaml_int(self, node: ScalarNode) -> int:
        refused = int_literal_refused(str(node.value))
        if refused:
            raise LimitExceeded(f"{at_line(self.origin, node.start_mark.line + 1)}: {refused}")
        return super().construct_yaml_int(node)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        # PyYAML lets a tagged scalar it cannot convert (`!!int 16.0`, `!!float abc`, an invalid
        # `!!timestamp`, `!!bool maybe`: a KeyError) escape as a bare exception; it is
        # malformed YAML like any other.
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError, KeyError) as exc:
            raise yaml.constructor.ConstructorError(None, None, f"{node.tag} {node.value!r}: {exc}",
                                                    node.start_mark) from None


BoundedConstructor.add_constructor("tag:yaml.org,2002:int", BoundedConstructor.construct_yaml_int)


class _BoundedLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
                     BoundedConstructor, yaml.resolver.Resolver):
    """SafeLoader whose composer refuses nesting deeper than _limits.MAX_NESTING (it recurses per level)
    and more than _limits.MAX_VALUES nodes."""

    def __init__(self, stream: str, origin: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        BoundedConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self.origin = origin
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent, index):
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > _limits.MAX_NESTING:
                mark = self.peek_event().start_mark
                raise LimitExceeded(f"{at_line(self.origin, mark.line + 1)}: nesting deeper than "
                                    f"{_limits.MAX_NESTING} levels (limit)")
            if self._nodes > _limits.MAX_VALUES:
                # Each composed node costs PyYAML a few hundred bytes: a 52 MiB spec (under the
                # file cap) composed for 435 s to a MemoryError. The expansion limit counts at
                # least as many values, so no file it accepts is refused here.
                mark = self.peek_event().start_mark
                raise LimitExceeded(f"{at_line(self.origin, mark.line + 1)}: more than {_limits.MAX_VALUES} "
                                    "values (limit)")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def compose_yaml(text: str, origin: str) -> Node | None:
    """The YAML node graph of one document (aliases still shared), nesting bounded.

    yaml.YAMLError for malformed YAML; LimitExceeded for nesting.
    """
    loader = _BoundedLoader(text, origin)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def check_expansion(root: Node, origin: str) -> None:
    """Refuse a node graph whose aliases expand past _limits.MAX_VALUES values or _limits.MAX_NESTING levels.

    Each node's expanded size and depth is computed once (memoized by identity), so the
    check is linear in the file, however much the aliases would expand.
    """
    sizes: dict[int, tuple[int, int]] = {}
    active: set[int] = set()

    def measure(node: Node) -> tuple[int, int]:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise LimitExceeded(f"{at_line(origin, node.start_mark.line + 1)}: an alias refers to itself")
        if isinstance(node, ScalarNode):
            sizes[key] = (1, 1)
            return sizes[key]
        active.add(key)
        children = [n for pair in node.value for n in pair] if isinstance(node, MappingNode) else node.value
        size, depth = 1, 1
        for child in children:
            child_size, child_depth = measure(child)
            size, depth = size + child_size, max(depth, child_depth + 1)
        active.discard(key)
        line = node.start_mark.line + 1
        if size > _limits.MAX_VALUES:
            raise LimitExceeded(f"{at_line(origin, line)}: aliases expand past {_limits.MAX_VALUES} values (limit)")
        if depth > _limits.MAX_NESTING:
            raise LimitExceeded(f"{at_line(origin, line)}: aliases nest deeper than {_limits.MAX_NESTING} levels (limit)")
        sizes[key] = (size, depth)
        return sizes[key]

    # The recursion is only as deep as the composed nesting (at most _limits.MAX_NESTING): an alias's
    # anchor comes earlier in the document, so it is measured (memoized) before the alias.
    measure(root)


def load_yaml(text: str, origin: str) -> Any:
    """``yaml.safe_load`` within the limits (nesting, alias expansion, integer size).

    yaml.YAMLError for malformed YAML; LimitExceeded, naming ``origin`` and the line, for a limit.
    """
    return load_yaml_node(text, origin)[0]


def load_yaml_node(text: str, origin: str) -> tuple[Any, Node | None]:
    """:func:`load_yaml`'s data and the composed node it was built from (for lines)."""
    loader = _BoundedLoader(text, origin)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        check_expansion(node, origin)
        return loader.construct_document(node), node
    finally:
        loader.dispose()


def yaml_error_line(exc: yaml.YAMLError) -> int | None:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return mark.line + 1 if mark is not None else None


