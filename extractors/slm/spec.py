"""SLM-Lab spec files resolved the way SLM-Lab resolves them, with the line of every value.

SLM-Lab (``slm_lab/spec/spec_util.py:get``) reads a spec file as text, replaces
``${var}`` placeholders with the ``-s var=value`` sets (a number replaces the quoted
placeholder too, so ``"${max_frame}"`` becomes an int), then parses it with
``yaml.safe_load`` (``.yaml``/``.yml``) or ``json.loads``, picks one top-level spec by
name and fails on any ``${var}`` left in it. We do the same, statically, but compose the
YAML ourselves (``yaml.compose``) so that every value keeps the line it is written on:
an alias resolves to the anchored node and a ``<<`` merge copies the merged node's
values, so the line of an inherited value is the line in the anchor where it is written.

Nothing from the spec is executed: only PyYAML's safe composer and constructor run.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from brax_diff.errors import SpecError
from brax_diff.safety.limits import MAX_NESTING, MAX_VALUES, LimitExceeded, load_json
from brax_diff.safety.limits_yaml import BoundedConstructor, compose_yaml

# ``${name}``, as SLM-Lab's spec_util.VAR_PATTERN matches it.
PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
# Most nodes one variant may expand to through aliases; the real specs need a few
# thousand. A small file whose aliases nest (a "billion laughs" bomb) stops here.
MAX_EXPANDED_NODES = MAX_VALUES
_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"
# The collection a collection tag needs; tags safe_load checks in its own way, built whole.
_COLLECTION_TAGS = {"tag:yaml.org,2002:map": "mapping", "tag:yaml.org,2002:seq": "sequence"}
_CHECKED_WHOLE = {"tag:yaml.org,2002:set", "tag:yaml.org,2002:omap", "tag:yaml.org,2002:pairs"}
# Placeholders that name the run's environment or its length: SLM-Lab requires them to run,
# but only `lr_decay_steps` depends on them (the LR schedule's horizon, which is then
# unknown), so an unset one is reported, not fatal. Any other unset placeholder is an error.
SCOPE_PLACEHOLDERS = {("env", "name"), ("env", "max_frame"), ("agent", "net", "lr_scheduler_spec", "frame")}

Path = tuple[str, ...]
# Numbers SLM-Lab converts with float() before use (the env builder's clip bound); any other
# number written as text (`lr: 1e-3`, which YAML 1.1 reads as a string) reaches torch or the
# algorithm's arithmetic as a string, and the run fails.
CONVERTED_BY_SLM = frozenset({"env.clip_obs"})
# Counts SLM-Lab loops over with range(): a float fails, less than 1 runs no pass.
INTEGER_COUNTS = {"agent.algorithm.training_epoch": "SLM-Lab's update loops range(training_epoch)"}
# Types SLM-Lab's spec_util.check asserts (its SPEC_FORMAT), for the keys brax-diff reads.
CHECKED_BY_SLM = {"env.max_frame": (int, float), "meta.max_session": (int,)}


@dataclass
class ResolvedSpec:
    """One variant after substitution, anchors and merges: plain values plus lines."""

    path: str  # the spec file's path in the repository
    name: str  # the variant (top-level key)
    data: dict[str, Any]
    lines: dict[Path, int] = field(default_factory=dict)  # key path -> 1-based line of its value
    unset: list[tuple[Path, str]] = field(default_factory=list)  # scope placeholders left as written

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def has(self, dotted: str) -> bool:
        marker = object()
        return self.get(dotted, marker) is not marker

    def require_mappings(self, required: tuple[str, ...], nullable: tuple[str, ...] = ()) -> None:
        """A SpecError naming the key and line when a value that must be a mapping is not."""
        for dotted in required + nullable:
            if not self.has(dotted):
                if dotted in required:
                    raise SpecError(f"{self.path}: variant {self.name}: {dotted} is missing")
                continue
            value = self.get(dotted)
            if not isinstance(value, dict) and not (value is None and dotted in nullable):
                raise SpecError(f"{self.path}: variant {self.name}: {dotted} must be a mapping, "
                                f"not {type(value).__name__} (line {self.line(dotted)})")

    def require_types(self, numbers: tuple[str, ...], names: tuple[str, ...]) -> None:
        """A SpecError naming the key and line when a value read as a number is not one (or
        text float() reads: YAML 1.1 loads ``1e-3`` as a string, SLM-Lab converts it), or a
        value read as a name is a mapping or a list. Absent and null values pass."""
        for dotted in numbers:
            value = self.get(dotted)
            if value is not None and not _is_number(value):
                raise SpecError(f"{self.path}: line {self.line(dotted)}: variant {self.name}: {dotted} must be "
                                f"a number, not {type(value).__name__} {_short(value)}")
            if isinstance(value, str) and dotted not in CONVERTED_BY_SLM:
                raise self._cannot_run(dotted, f"is the text {value!r}, which SLM-Lab passes on unconverted "
                                               "(YAML 1.1 reads an exponent without a '.' as text: write "
                                               f"{_dotted_float(value)})")
        for dotted, why in INTEGER_COUNTS.items():
            value = self.get(dotted)
            if isinstance(value, float) or isinstance(value, bool):
                raise self._cannot_run(dotted, f"is {value!r}, not an integer ({why})")
            if isinstance(value, int) and value < 1:
                raise self._cannot_run(dotted, f"is {value}: {why} runs no pass, so the variant never trains")
        for dotted, kinds in CHECKED_BY_SLM.items():
            value = self.get(dotted)
            if self.has(dotted) and not (isinstance(value, kinds) and not isinstance(value, bool)) and not (
                    isinstance(value, str) and PLACEHOLDER.search(value)):
                raise self._cannot_run(dotted, f"is {type(value).__name__} {_short(value)}; SLM-Lab's spec check "
                                               f"(spec_util.check) requires {' or '.join(k.__name__ for k in kinds)}")
        for dotted in names:
            value = self.get(dotted)
            if isinstance(value, (dict, list)):
                raise SpecError(f"{self.path}: line {self.line(dotted)}: variant {self.name}: {dotted} must be "
                                f"a name, not a {'mapping' if isinstance(value, dict) else 'list'}")

    def _cannot_run(self, dotted: str, why: str) -> SpecError:
        return SpecError(f"{self.path}: line {self.line(dotted)}: variant {self.name}: {dotted} {why}; "
                         "SLM-Lab cannot run this variant")

    def line(self, dotted: str) -> int | None:
        """The line of the value at ``dotted``, or of its nearest written parent."""
        parts = tuple(dotted.split("."))
        while parts:
            if parts in self.lines:
                return self.lines[parts]
            parts = parts[:-1]
        return None


def _is_number(value: Any) -> bool:
    if isinstance(value, (int, float)):
        return True
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, str)


def _dotted_float(text: str) -> str:
    """``1e-3`` as YAML 1.1 reads a float: ``1.0e-3``."""
    mantissa, _, exponent = text.lower().partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent and exponent[0] not in "+-":
        exponent = "+" + exponent
    return f"{mantissa}e{exponent}" if exponent else mantissa


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def substitute(text: str, sets: dict[str, str] | None) -> str:
    """Replace ``${k}`` with the set values, as SLM-Lab's ``set_variables`` does."""
    for key, value in (sets or {}).items():
        if not re.fullmatch(r"\w+", key):
            raise SpecError(f"--set {key}={value}: the name must be letters, digits or _")
        if "\n" in value or "\r" in value:
            raise SpecError(f"--set {key}: the value must be one line")
        try:
            number = float(value)
            canonical = str(int(number)) if number == int(number) else str(number)
        except (ValueError, OverflowError):
            text = text.replace(f"${{{key}}}", value)
            continue
        # A number replaces the quoted placeholder too, so it loads as a number.
        text = text.replace(f'"${{{key}}}"', canonical).replace(f"${{{key}}}", canonical)
    return text


def read_spec_file(text: str, path: str, sets: dict[str, str] | None = None) -> "SpecFile":
    """``SpecFile(text, path, sets)``, parsed once: the fix solver reads one edited text back
    as a check and again as an extraction, and composing a large spec is the slow part of both.
    A SpecFile is not changed after it is made (each ``resolve`` builds new data)."""
    return _parsed(text, path, tuple(sorted((sets or {}).items())))


@functools.lru_cache(maxsize=16)
def _parsed(text: str, path: str, sets: tuple[tuple[str, str], ...]) -> "SpecFile":
    return SpecFile(text, path, dict(sets))


class SpecFile:
    """A spec file's text parsed to a node graph; variants are built on demand."""

    def __init__(self, text: str, path: str, sets: dict[str, str] | None = None) -> None:
        self.path = path
        self.sets = dict(sets or {})
        self.raw_text = text  # as written, placeholders included
        self.text = substitute(text, self.sets)
        self._check_sets_are_used()
        self.is_json = path.endswith(".json")
        if self.is_json:
            try:  # SLM-Lab reads .json with json.loads: reject what it would reject
                load_json(self.text, path)
            except json.JSONDecodeError as exc:
                raise SpecError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
            except ValueError as exc:  # an integer past the digit limit
                raise SpecError(f"{path}: invalid JSON: {exc}") from None
        try:
            # JSON is (near enough) YAML: composing it the same way keeps its lines.
            self.root = compose_yaml(self.text, path)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f" at line {mark.line + 1}" if mark else ""
            raise SpecError(f"{path}: invalid YAML{where}: {exc.problem or exc}") from None
        except yaml.YAMLError as exc:
            raise SpecError(f"{path}: invalid YAML: {exc}") from None
        if self.root is None or not isinstance(self.root, MappingNode):
            raise SpecError(f"{path}: expected a mapping of spec names at the top level")
        self._loads: bool | None = None  # _load_whole, on the first resolve
        self._top: dict[str, Node] = {}
        self._not_names: dict[str, Any] = {}  # keys as written that YAML reads as no string (`on:` is True)
        constructor = BoundedConstructor()
        constructor.origin = path
        for key_node, value_node in self.root.value:
            if not isinstance(key_node, ScalarNode):
                raise SpecError(f"{path}: line {key_node.start_mark.line + 1}: spec names must be plain keys")
            # The name SLM-Lab looks up is the key yaml.safe_load builds: `on:` is True and
            # `null:` None, which no spec name given as text finds.
            try:
                key = str(key_node.value) if self.is_json else constructor.construct_object(key_node)
            except yaml.YAMLError:  # a key safe_load cannot build (`!!int abc:`): the file does not load
                self._load_whole()
                raise
            if isinstance(key, str):
                self._top[key] = value_node
            else:
                self._not_names[str(key_node.value)] = key

    def _load_whole(self) -> None:
        """SLM-Lab's ``yaml.safe_load`` of the whole file (spec_util.get): a file it cannot
        load runs no variant, whichever is asked for, so it is refused here even when what
        fails (an unknown tag, ``!!python/tuple``, ``!!int abc``, an invalid date, a complex
        key) is in another variant than the one resolved.

        What safe_load checks, on the composed graph, each node once: an alias is the node it
        names, so a file that expands to millions of values (which PyYAML loads by sharing,
        and a variant brax-diff does not read need not be built) costs its size, and the
        graph the variants are built from is not flattened as PyYAML's merge would."""
        if self.is_json or self._loads:
            return
        constructor = BoundedConstructor()
        constructor.origin = self.path
        seen: set[int] = set()

        def fail(node: Node, problem: Any) -> None:
            problem = " ".join(str(problem).split())
            raise SpecError(f"{self.path}: SLM-Lab cannot load this file (yaml.safe_load fails at line "
                            f"{node.start_mark.line + 1}: {problem}), so no variant of it runs")

        def build(node: Node, deep: bool = False) -> None:
            try:
                constructor.construct_object(node, deep=deep)
            except yaml.YAMLError as exc:
                fail(node, getattr(exc, "problem", None) or exc)

        def visit(node: Node) -> None:
            if id(node) in seen:
                return
            seen.add(id(node))
            if node.tag not in yaml.constructor.SafeConstructor.yaml_constructors:
                fail(node, f"could not determine a constructor for the tag {node.tag!r}")
            if isinstance(node, ScalarNode) or node.tag in _CHECKED_WHOLE:
                build(node, deep=True)  # PyYAML's own conversion (scalars; rare !!set/!!omap/!!pairs)
                return
            kind = "sequence" if isinstance(node, SequenceNode) else "mapping"
            expected = _COLLECTION_TAGS.get(node.tag)
            if expected != kind:
                fail(node, f"expected a {expected or 'scalar'} node, but found {kind}")
            if isinstance(node, SequenceNode):
                for item in node.value:
                    visit(item)
                return
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:
                    sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                    if not isinstance(value_node, (MappingNode, SequenceNode)):
                        fail(value_node, f"expected a mapping or list of mappings for merging, but found {value_node.id}")
                    for source in sources:
                        if not isinstance(source, MappingNode):
                            fail(source, f"expected a mapping for merging, but found {source.id}")
                        visit(source)
                    continue
                if not isinstance(key_node, ScalarNode):  # a list or a mapping is no dict key
                    visit(key_node)
                    fail(key_node, "found unhashable key")
                if key_node.tag != _VALUE_TAG:  # `=` is read as the text "="
                    visit(key_node)
                visit(value_node)

        visit(self.root)
        self._loads = True

    def placeholders(self) -> list[str]:
        """The ``${name}`` names the file as written uses, sorted."""
        return sorted(set(PLACEHOLDER.findall(self.raw_text)))

    def _check_sets_are_used(self) -> None:
        """A set with no ``${name}`` to replace is a mistake (a typo, another spec's name): SLM-Lab
        ignores it silently, and the run would read values the user meant to change."""
        unused = [key for key in self.sets if key not in self.placeholders()]
        if not unused:
            return
        given = ", ".join(f"{key}={self.sets[key]}" for key in unused)
        missing = " or ".join(f"${{{key}}}" for key in unused)
        has = self.placeholders()
        has_text = f"its placeholders: {', '.join(f'${{{name}}}' for name in has)}" if has else "it has no placeholders"
        raise SpecError(f"--set {given}: the spec {self.path} has no {missing} placeholder; {has_text}")

    def placeholder_lines(self, key: str) -> set[int]:
        """The lines of the file as written that hold ``${key}`` (a set does not change them)."""
        return {number for number, text in enumerate(self.raw_text.splitlines(), 1) if f"${{{key}}}" in text}

    def placeholder_paths(self, key: str) -> list[Path]:
        """The key paths where some variant takes ``${key}`` (through its anchors too)."""
        lines = self.placeholder_lines(key)
        paths: set[Path] = set()
        for name in self.variants():
            try:
                spec = self.resolve(name)
            except SpecError:  # a variant that does not resolve says nothing about this set
                continue
            paths |= {path for path, line in spec.lines.items() if line in lines}
        return sorted(paths)

    def variants(self) -> list[str]:
        """Spec names in file order; ``_name`` keys only hold anchors."""
        return [name for name, node in self._top.items()
                if not name.startswith("_") and isinstance(node, MappingNode)]

    def resolve(self, name: str) -> ResolvedSpec:
        if name not in self._top or name.startswith("_"):
            read_as = (f"; YAML reads the key {name}: as {self._not_names[name]!r}, which SLM-Lab's lookup by "
                       "name never finds" if name in self._not_names else "")
            raise SpecError(f"{self.path}: no variant {name!r}{read_as} (choose from: {', '.join(self.variants())})")
        node = self._top[name]
        if not isinstance(node, MappingNode):
            raise SpecError(f"{self.path}: line {node.start_mark.line + 1}: variant {name} must be a mapping")
        data, lines = _Builder(self.path, self.is_json).build(node)
        # After the variant (whose own faults keep their precise message), before its
        # placeholders: SLM-Lab loads the whole file first, then looks for ${var} left.
        self._load_whole()
        spec = ResolvedSpec(self.path, name, data, lines.flatten())
        self._check_placeholders(spec)
        return spec

    def _check_placeholders(self, spec: ResolvedSpec) -> None:
        for path, text in _strings(spec.data, ()):
            for match in PLACEHOLDER.finditer(text):
                if path in SCOPE_PLACEHOLDERS:
                    spec.unset.append((path, match.group(1)))
                    continue
                var = match.group(1)
                raise SpecError(f"{self.path}: variant {spec.name}: {'.'.join(path)} is ${{{var}}} "
                                f"(line {spec.lines.get(path)}); give it with --set {var}=VALUE")


def _strings(value: Any, path: Path):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, path + (str(key),))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, path + (str(index),))


class _Builder:
    """Builds plain values from composed nodes, recording lines; bounds alias expansion.

    Work is linear in the size of the resolved variant: each built value comes with its
    own tree of lines (``_Lines``), so a key that replaces a merged value drops that
    value's lines with it instead of searching every recorded path.
    """

    def __init__(self, path: str, is_json: bool = False) -> None:
        self.path = path
        self.is_json = is_json
        self.count = 0
        self.constructor = BoundedConstructor()
        self.constructor.origin = path
        self.active: set[int] = set()  # collection nodes being built (a cycle is an error)

    def build(self, node: Node, depth: int = 1) -> tuple[Any, "_Lines"]:
        line = node.start_mark.line + 1
        self.count += 1
        if self.count > MAX_EXPANDED_NODES:
            raise LimitExceeded(f"{self.path}: line {line}: aliases expand past {MAX_EXPANDED_NODES} values "
                                "(limit; an alias bomb?)")
        if depth > MAX_NESTING:
            raise LimitExceeded(f"{self.path}: line {line}: values nest deeper than {MAX_NESTING} levels (limit)")
        if isinstance(node, ScalarNode):
            if self.is_json and node.style is None:
                # SLM-Lab reads .json with json.loads: 1e-3 is a number there, text to YAML 1.1.
                try:
                    return load_json(node.value, self.path), _Lines(line)
                except ValueError:
                    pass
            try:
                return self.constructor.construct_object(node, deep=True), _Lines(line)
            except yaml.YAMLError as exc:
                raise SpecError(f"{self.path}: line {line}: {exc}") from None
        if id(node) in self.active:
            raise SpecError(f"{self.path}: line {line}: an alias refers to itself")
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                built = [self.build(item, depth + 1) for item in node.value]
                return [value for value, _ in built], _Lines(line, {str(i): lines for i, (_, lines) in enumerate(built)})
            return self._mapping(node, depth)
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: MappingNode, depth: int) -> tuple[dict, "_Lines"]:
        merged: list[MappingNode] = []  # in PyYAML's order: a later one wins over an earlier one
        explicit: list[tuple[str, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                # PyYAML (flatten_mapping): `<<: [a, b]` puts b before a (a wins), and of two
                # separate `<<` keys the later one's values come later (it wins).
                merged.extend(reversed(self._merge_sources(value_node)))
                continue
            if not isinstance(key_node, ScalarNode):
                raise SpecError(f"{self.path}: line {key_node.start_mark.line + 1}: keys must be plain scalars")
            explicit.append((str(self.constructor.construct_object(key_node)), value_node))
        out: dict[str, Any] = {}
        children: dict[str, _Lines] = {}
        # Shallow merge, as PyYAML's << does: a later merged value replaces an earlier
        # one, and the mapping's own keys win over all of them.
        for source in merged:
            values, lines = self.build(source, depth)
            for key, value in values.items():
                out.pop(key, None)
                out[key] = value
                children[key] = lines.children[key]
        for key, value_node in explicit:
            out.pop(key, None)
            out[key], children[key] = self.build(value_node, depth + 1)
        return out, _Lines(node.start_mark.line + 1, children)

    def _merge_sources(self, node: Node) -> list[MappingNode]:
        if isinstance(node, MappingNode):
            return [node]
        if isinstance(node, SequenceNode) and all(isinstance(n, MappingNode) for n in node.value):
            return list(node.value)
        raise SpecError(f"{self.path}: line {node.start_mark.line + 1}: '<<' must merge a mapping "
                        "or a list of mappings")


@dataclass
class _Lines:
    """The line a value is written on, and its items' lines (by key, or list index as text)."""

    line: int
    children: dict[str, "_Lines"] = field(default_factory=dict)

    def flatten(self) -> dict[Path, int]:
        out: dict[Path, int] = {}
        stack: list[tuple[Path, _Lines]] = [((), self)]
        while stack:
            path, lines = stack.pop()
            out[path] = lines.line
            stack.extend((path + (key,), child) for key, child in lines.children.items())
        return out
