"""Reading one upstream file for the RSL-RL side: a value with the lines it comes from, or
why the file's shape at that ref does not give it (:class:`Missing`, which becomes an
explained unknown)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import libcst as cst

from brax_diff.errors import SourceError
from brax_diff.facts.model import Provenance

from ..engine.pyast import Code, IndexedModule, LimitExceeded, descendants, parse_file, plain  # noqa: F401


@dataclass(frozen=True)
class Read:
    """A value read from code, the lines it comes from, and how (a note for the fact)."""

    value: Any
    lines: tuple[Provenance, ...]
    note: str | None = None


@dataclass(frozen=True)
class Missing:
    """Why a value cannot be read: the file, the function, what was looked for."""

    why: str
    lines: tuple[Provenance, ...] = ()


class File:
    """One file of a snapshot, parsed once; None-safe lookups that say what they missed."""

    def __init__(self, snapshot, path: str) -> None:
        self.snapshot, self.path = snapshot, path
        self.module: IndexedModule | None = None
        self.problem: str | None = None
        if not snapshot.exists(path):
            self.problem = f"{path} not found"
            return
        try:
            self.module = parse_file(snapshot, path)
        except (SyntaxError, SourceError, LimitExceeded) as exc:
            self.problem = f"{path}: {exc}"

    def at(self, node: cst.CSTNode) -> Provenance:
        return self.snapshot.where(self.path, self.module.line(node))

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code(node)

    def missing(self, what: str, where: str | None = None) -> Missing:
        """``path: where: what``; the file's own problem when it could not be read."""
        if self.problem is not None:
            return Missing(f"{self.problem} ({what})")
        return Missing(f"{self.path}{': ' + where if where else ''}: {what}")

    def method(self, cls: str, name: str) -> cst.FunctionDef | None:
        """``class cls: def name`` (the first class of that name that defines it)."""
        if self.module is None:
            return None
        for node in self.module.classes(cls):
            for statement in node.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                    return statement
        return None

    def function(self, name: str) -> cst.FunctionDef | None:
        return None if self.module is None else self.module.function(name)

    def default(self, fn: cst.FunctionDef | None, param: str) -> Read | None:
        """The signature default of ``param`` (a literal, else ``Code``), or None."""
        if fn is None:
            return None
        found = self.module.signature_defaults(fn).get(param)
        if found is None:
            return None
        return Read(found.value, (self.snapshot.where(self.path, found.line),))

    def nodes(self, root: cst.CSTNode | None, accepts: Callable[[cst.CSTNode], bool]) -> Iterator[cst.CSTNode]:
        if root is None:
            return iter(())
        return (node for node in descendants(root) if accepts(node))

    def find(self, root: cst.CSTNode | None, kinds: tuple[type, ...], *texts: str) -> cst.CSTNode | None:
        """The first node of ``kinds`` under ``root`` whose source holds every text of ``texts``
        (spaces ignored)."""
        wanted = [t.replace(" ", "") for t in texts]
        for node in self.nodes(root, lambda n: isinstance(n, kinds)):
            text = self.code(node).replace(" ", "").replace("\n", "")
            if all(w in text for w in wanted):
                return node
        return None


def is_code(value: Any) -> bool:
    return isinstance(value, Code)
