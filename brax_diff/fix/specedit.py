"""Adding a variant to an SLM-Lab spec file with ruamel.yaml, keeping the rest byte for byte.

:class:`SpecDocument` loads the file in ruamel.yaml's round-trip mode (comments, anchors,
merge keys, order) and builds the new variant from the original's own nodes: an anchored
mapping the original uses is an alias (``*net``) or a merge (``<<: *net``) in the variant, so
the variant sets only the keys it changes; an unanchored mapping on the way to a changed key
is copied, because a YAML merge is shallow. The file's text is never re-emitted: the variant's
lines, cut from ruamel's dump, are appended to the text as it was, so every original line
keeps its bytes and its number.

:meth:`SpecDocument.with_variant` then reads the result back the way SLM-Lab does
(:class:`brax_diff.extractors.slm.spec.SpecFile`): the original variants must resolve exactly as
before and the new one to the original with the writes applied; anything else is a
:class:`~brax_diff.errors.SpecError` saying the file cannot be round-tripped.
"""

from __future__ import annotations

import copy
import io
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.mergevalue import MergeValue, merge_attrib

from ..errors import SpecError

Path = tuple[str, ...]
VARIANT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_MISSING = object()


class ExplicitNull:
    """A null the variant sets (``clip_grad_val: null``), written as ``null``; ruamel writes
    other nulls as an empty value, as the files do (``- SiLU:``)."""


def _represent_null(representer, _data):
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _represent_float(representer, value: float):
    """A float YAML 1.1 (PyYAML, so SLM-Lab) reads back as a float: ``1.0e-08``, not ``1e-08``."""
    if value != value:
        text = ".nan"
    elif value in (float("inf"), float("-inf")):
        text = ".inf" if value > 0 else "-.inf"
    else:
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        if e and "." not in mantissa:
            text = f"{mantissa}.0e{exponent}"
    return representer.represent_scalar("tag:yaml.org,2002:float", text)


def _yaml() -> YAML:
    yaml = YAML()  # round trip
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never fold a long line
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.representer.add_representer(ExplicitNull, _represent_null)
    yaml.representer.add_representer(float, _represent_float)
    return yaml


@dataclass(frozen=True)
class Write:
    """One value the variant sets: ``path`` inside the variant, plain data, and its comment."""

    path: Path
    value: Any
    comment: str


def _anchored(node: Any) -> bool:
    anchor = getattr(node, "anchor", None)
    return getattr(anchor, "value", None) is not None


def _own_items(node: CommentedMap):
    return node.non_merged_items() if getattr(node, merge_attrib, None) else node.items()


def _merge_into(target: CommentedMap, sources: list) -> None:
    merge = MergeValue()
    merge.merge_pos = 0  # `<<:` first, as the files write it
    for source in sources:
        merge.append(source)
    target.add_yaml_merge(merge)


def _shared(node: Any) -> Any:
    """``node`` for the new variant: an anchored node itself (ruamel writes an alias), any
    other container a copy (the same object twice would get a new anchor in the original)."""
    if _anchored(node) or not isinstance(node, (CommentedMap, CommentedSeq)):
        return node
    if isinstance(node, CommentedSeq):
        out = CommentedSeq(_shared(item) for item in node)
    else:
        out = CommentedMap()
        for key, value in _own_items(node):
            out[key] = _shared(value)
        merged = getattr(node, merge_attrib, None)
        if merged:
            _merge_into(out, [_shared(m) for m in merged])
    if node.fa.flow_style():
        out.fa.set_flow_style()
    return out


def _styled(value: Any, like: Any, top: bool = True) -> Any:
    """Plain data as ruamel nodes written like ``like`` (the value it replaces): flow
    mappings stay flow, list items take the style of the item with the same first key."""
    if value is None:
        return ExplicitNull() if top else None
    if isinstance(value, dict):
        out = CommentedMap()
        for key, item in value.items():
            out[key] = _styled(item, like.get(key) if isinstance(like, dict) else None, False)
        if isinstance(like, CommentedMap) and like.fa.flow_style():
            out.fa.set_flow_style()
        return out
    if isinstance(value, list):
        out = CommentedSeq()
        for index, item in enumerate(value):
            out.append(_styled(item, _item_like(item, like, index), False))
        if isinstance(like, CommentedSeq) and like.fa.flow_style():
            out.fa.set_flow_style()
        return out
    return value


def _item_like(item: Any, like: Any, index: int) -> Any:
    if not isinstance(like, list) or not like:
        return None
    if isinstance(item, dict) and item:
        first = next(iter(item))
        for candidate in like:
            if isinstance(candidate, dict) and candidate and next(iter(candidate)) == first:
                return candidate
    return like[index] if index < len(like) else None


def _override(original: CommentedMap, changes: dict) -> CommentedMap:
    """A mapping that reads as ``original`` with ``changes`` (key -> Write, or a nested dict
    of changes below that key): an anchored original is merged (``<<: *anchor``) and only the
    changes are written; any other keeps its own keys and merges, in order."""
    out = CommentedMap()
    order = {key: i for i, key in enumerate(original)}  # a key the original has keeps its place
    changes = dict(sorted(changes.items(), key=lambda item: order.get(item[0], len(order))))
    sources = [original] if _anchored(original) else list(getattr(original, merge_attrib, None) or [])
    if not _anchored(original):
        for key, value in _own_items(original):
            out[key] = _changed(original, key, changes[key]) if key in changes else _shared(value)
    for key, change in changes.items():
        if key not in out:
            out[key] = _changed(original, key, change)
    for key, change in changes.items():
        if isinstance(change, Write):
            out.yaml_add_eol_comment(change.comment, key)
    if sources:
        _merge_into(out, [s if _anchored(s) else _shared(s) for s in sources])
    return out


def _changed(original: CommentedMap, key: str, change: Any) -> Any:
    current = original.get(key) if isinstance(original, dict) else None
    if isinstance(change, Write):
        return _styled(change.value, current)
    if not isinstance(current, CommentedMap):
        raise SpecError(f"{key} is not a mapping the variant can override")
    return _override(current, change)


def _nest(writes: list[Write]) -> dict:
    tree: dict = {}
    for write in writes:
        node = tree
        for part in write.path[:-1]:
            node = node.setdefault(part, {})
            if isinstance(node, Write):
                raise SpecError(f"{'.'.join(write.path)}: a write inside another write")
        node[write.path[-1]] = write
    return tree


def get_path(data: Any, path: Path, default: Any = _MISSING) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return default
        data = data[part]
    return data


def set_path(data: dict, path: Path, value: Any) -> dict:
    """A deep copy of ``data`` with ``value`` at ``path`` (every parent must be a mapping)."""
    out = copy.deepcopy(data)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = copy.deepcopy(value)
    return out


class SpecDocument:
    """One spec file's text, read by ruamel.yaml (to write) and by SLM-Lab's reading (to check)."""

    def __init__(self, text: str, path: str, sets: dict[str, str] | None = None) -> None:
        from brax_diff.extractors.slm.spec import read_spec_file

        if path.endswith(".json"):
            raise SpecError(f"{path}: brax-diff fix writes YAML spec files; this one is JSON")
        self.text = text
        self.path = path
        self.sets = dict(sets or {})
        self.spec_file = read_spec_file(text, path, sets)
        self._root = self._parse()  # a file ruamel.yaml cannot read is refused before any work
        self._before: dict[str, Any] = {}

    def _parse(self) -> CommentedMap:
        try:
            root = _yaml().load(self.text)
        except YAMLError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SpecError(f"{self.path}: cannot be round-tripped (ruamel.yaml: {first})") from None
        if not isinstance(root, CommentedMap):
            raise SpecError(f"{self.path}: cannot be round-tripped: the top level is not a mapping")
        return root


    def variants(self) -> list[str]:
        return self.spec_file.variants()

    def top_level(self) -> list[str]:
        """Every top-level key (variants and ``_`` anchor holders), as ruamel.yaml reads them."""
        return [str(key) for key in self._root]

    def resolved(self, variant: str) -> dict:
        """The variant as SLM-Lab reads it (placeholders set, anchors and merges resolved)."""
        return self.spec_file.resolve(variant).data

    def with_variant(self, base: str, name: str, writes: list[Write], header: list[str]) -> str:
        """The file's text with variant ``name``: ``base`` with ``writes`` applied, after
        ``header`` (comment lines). Checked: see the module docstring."""
        from brax_diff.extractors.slm.spec import read_spec_file

        if not VARIANT_NAME.match(name):
            raise SpecError(f"variant name {name!r}: use letters, digits and _ (starting with a letter)")
        root = self._root  # parsed once: the fix solver writes a variant every round
        if name in root:
            raise SpecError(f"{self.path} already has a top-level key {name!r}; choose another --name")
        if not isinstance(root.get(base), CommentedMap):
            raise SpecError(f"{self.path}: variant {base} is not a mapping ruamel.yaml can read")
        # The new variant is built of new nodes (an anchored original is only referred to), so
        # taking it out again after the dump leaves the parsed file as it was read.
        root[name] = _override(root[base], _nest(writes)) if writes else _shared(root[base])
        try:
            out = io.StringIO()
            _yaml().dump(_needed_for(root, name), out)
        finally:
            del root[name]
        dumped = out.getvalue()
        start = dumped.rfind(f"\n{name}:")
        if start < 0:
            raise SpecError(f"{self.path}: cannot be round-tripped: ruamel.yaml did not write variant {name}")
        # Two spaces before a write's comment, as the files write them (ruamel leaves one after a
        # copied key); a string this touched would fail the read-back check below.
        block = re.sub(r"(?m)(?<=\S) (# [A-Z]{2,4}\d{3}\b.*)$", r"  \1", dumped[start + 1:])
        text = self.text if self.text.endswith("\n") or not self.text else self.text + "\n"
        text += "\n" + "".join(f"# {line}\n" if line else "#\n" for line in header) + block
        self._check(read_spec_file, text, base, name, writes)
        return text

    def _check(self, read, text: str, base: str, name: str, writes: list[Write]) -> None:
        try:
            after = read(text, self.path, self.sets)
            got = after.resolve(name).data
        except SpecError as exc:
            raise SpecError(f"{self.path}: cannot be round-tripped: the written variant does not read back ({exc})") \
                from None
        expected = self.resolved(base)
        for write in writes:
            expected = set_path(expected, write.path, write.value)
        if got != expected:
            where = _first_difference(expected, got)
            raise SpecError(f"{self.path}: cannot be round-tripped: variant {name} reads back with "
                            f"{'.'.join(where) or 'its top level'} {_short(get_path(got, where, None))}, "
                            f"not {_short(get_path(expected, where, None))}")
        if after.variants() != self.variants() + [name]:
            raise SpecError(f"{self.path}: cannot be round-tripped: the variants read back as "
                            f"{', '.join(after.variants())}")
        for variant in self.variants():
            if variant not in self._before:  # the file as read: resolved once, compared every round
                self._before[variant] = _resolution(self.spec_file, variant)
            if self._before[variant] != _resolution(after, variant):
                raise SpecError(f"{self.path}: cannot be round-tripped: variant {variant} would read differently")


def _needed_for(root: CommentedMap, name: str) -> CommentedMap:
    """The top level to dump for variant ``name``: the entries before it that hold an anchored
    node it refers to, and itself. The variant's block is what is kept of the dump, and it is
    written as in the whole file (an alias where the anchor came earlier), at a fraction of the
    cost: the fix solver writes one every round."""
    referred: set[int] = set()
    stack = [root[name]]
    while stack:  # the anchored nodes the new variant refers to (its own nodes are new)
        node = stack.pop()
        if _anchored(node):
            referred.add(id(node))
        else:
            stack.extend(_parts(node))
    return CommentedMap((key, value) for key, value in root.items() if key == name or _holds(value, referred))


def _parts(node: Any) -> list:
    """A node's values, items and merged mappings (nothing for a scalar)."""
    if not isinstance(node, (CommentedMap, CommentedSeq)):
        return []
    return [*(node.values() if isinstance(node, CommentedMap) else node), *(getattr(node, merge_attrib, None) or ())]


def _holds(node: Any, wanted: set[int]) -> bool:
    seen: set[int] = set()
    stack = [node]
    while stack:
        node = stack.pop()
        if id(node) in wanted:
            return True
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(_parts(node))
    return False


def _resolution(spec_file, variant: str):
    """What a variant resolves to (values and lines), or the error it resolves with."""
    try:
        resolved = spec_file.resolve(variant)
    except SpecError as exc:
        return ("error", str(exc))
    return resolved.data, resolved.lines


def _first_difference(a: Any, b: Any, path: Path = ()) -> Path:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if a.get(key, _MISSING) != b.get(key, _MISSING):
                return _first_difference(a.get(key), b.get(key), path + (key,))
    return path


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["SpecDocument", "Write", "ExplicitNull", "VARIANT_NAME", "get_path", "set_path"]
