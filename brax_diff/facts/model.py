"""Canonical facts: values extracted from code, each with the lines they come from.

A :class:`Fact` is one canonical key's value on one side, in one scope, with its
provenance. An :class:`Extraction` is what an extractor returns for one scope; its JSON
form is the tool's machine contract::

    {"side": "brax",
     "sources": {"brax": {"repo": ..., "commit": ..., "date": ...}, ...},
     "scope": {"family": ..., "env": ...},
     "facts": {KEY: {"value": V, "provenance": [{"repo", "commit", "path", "line"}]}},
     "findings": [{"kind", "severity", "message", "provenance": [...]}]}

Every canonical key of the side's vocabulary is in ``facts``: a key the code's shape does
not let the extractor read is ``{"value": null, "unknown": "<why>"}``, and a finding
(``pattern_not_found`` or more precise) with that ``key`` names the file and function; the ref
is the extraction's ``sources`` (a message never carries a ref name or sha, so the same blobs
read at any commit give the same text).

Everything here is plain data: JSON-native values, sorted on output, no timestamps
other than the commit dates of the inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

JSONValue = Any  # None | bool | int | float | str | list[JSONValue]

# Finding severities. ERROR: the inputs contradict themselves (a spec naming code that
# does not exist); IMPORTANT: the inputs ask for one thing and the code runs another (a
# spec value the code overrides), which changes what trains; WARNING: something the tool
# could not read, or a dead override; INFO: worth knowing, changes nothing.
SEVERITIES = ("ERROR", "IMPORTANT", "WARNING", "INFO")


@dataclass(frozen=True, order=True)
class Provenance:
    """One line a value comes from: ``repo`` is the repository's web URL.

    ``uncommitted``: a line of a work-tree file (``--slm WORKTREE``) that ``commit``'s blob
    does not have (changed or added), so no link at ``commit`` shows it; ``line`` is then its
    line on disk. A line the edit left alone has ``commit``'s line number instead."""

    repo: str
    commit: str
    path: str
    line: int
    uncommitted: bool = False

    @property
    def url(self) -> str:
        """A link to the line, e.g. ``https://github.com/google/brax/blob/SHA/PATH#L12``."""
        from urllib.parse import quote

        # The path is the repository's: quoted, a space or ")" in it cannot end the link early.
        return f"{self.repo.rstrip('/')}/blob/{self.commit}/{quote(self.path, safe='/')}#L{self.line}"

    def to_json(self) -> dict:
        out = {"repo": self.repo, "commit": self.commit, "path": self.path, "line": self.line}
        if self.uncommitted:
            out["uncommitted"] = True
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Provenance":
        return cls(data["repo"], data["commit"], data["path"], int(data["line"]), bool(data.get("uncommitted")))


def _sorted_provenance(items: Iterable[Provenance]) -> tuple[Provenance, ...]:
    return tuple(sorted(set(items)))


@dataclass(frozen=True)
class Fact:
    """The effective value of one canonical key.

    ``declared`` is the value as written when the code adjusts it before use (SLM-Lab
    rounds ``minibatch_size``, say); ``note`` says briefly how the value was derived.
    A derived fact lists the provenance of all its inputs.
    """

    key: str
    value: JSONValue
    provenance: tuple[Provenance, ...] = ()
    note: str | None = None
    declared: JSONValue = None
    unknown: str | None = None  # why the value cannot be read; the value is then None

    def __post_init__(self) -> None:
        if self.unknown is not None:
            object.__setattr__(self, "value", None)
        object.__setattr__(self, "value", normalize_value(self.value))
        object.__setattr__(self, "provenance", _sorted_provenance(self.provenance))

    @property
    def is_unknown(self) -> bool:
        return self.unknown is not None

    def to_json(self) -> dict:
        out: dict = {"value": self.value, "provenance": [p.to_json() for p in self.provenance]}
        if self.note:
            out["note"] = self.note
        if self.declared is not None:
            out["declared"] = normalize_value(self.declared)
        if self.unknown is not None:
            out["unknown"] = self.unknown
        return out

    @classmethod
    def from_json(cls, key: str, data: dict) -> "Fact":
        return cls(
            key=key,
            value=data.get("value"),
            provenance=tuple(Provenance.from_json(p) for p in data.get("provenance", [])),
            note=data.get("note"),
            declared=data.get("declared"),
            unknown=data.get("unknown"),
        )


@dataclass(frozen=True)
class Finding:
    """Something about the inputs themselves: a dead override branch, a spec naming code
    that does not exist, a code pattern no longer found at a ref."""

    kind: str
    severity: str
    message: str
    provenance: tuple[Provenance, ...] = ()
    key: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown finding severity {self.severity!r}")
        object.__setattr__(self, "provenance", _sorted_provenance(self.provenance))

    def to_json(self) -> dict:
        out = {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "provenance": [p.to_json() for p in self.provenance],
        }
        if self.key:
            out["key"] = self.key
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Finding":
        return cls(
            kind=data["kind"],
            severity=data["severity"],
            message=data["message"],
            provenance=tuple(Provenance.from_json(p) for p in data.get("provenance", [])),
            key=data.get("key"),
        )

    def sort_key(self) -> tuple:
        return (SEVERITIES.index(self.severity), self.kind, self.message)


@dataclass(frozen=True)
class SourceInfo:
    """A repository resolved at a ref: web URL, full commit sha, commit date (ISO 8601).

    ``uncommitted``: for a work tree read as on disk (ref ``WORKTREE``), the files read that
    differ from ``commit``, sorted."""

    repo: str
    commit: str
    date: str
    ref: str | None = None
    uncommitted: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {"repo": self.repo, "commit": self.commit, "date": self.date}
        if self.ref is not None:
            out["ref"] = self.ref
        if self.uncommitted:
            out["uncommitted"] = list(self.uncommitted)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "SourceInfo":
        return cls(data["repo"], data["commit"], data["date"], data.get("ref"), tuple(data.get("uncommitted", ())))


@dataclass
class Extraction:
    """Everything one extractor found for one scope of one side."""

    side: str
    sources: dict[str, SourceInfo]
    scope: dict[str, JSONValue]
    facts: dict[str, Fact] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    # The findings as a set, so find() is not a scan of the list (8,000 unread spec keys
    # made it quadratic); rebuilt when the list's length shows it was changed elsewhere.
    _seen: set[Finding] = field(default_factory=set, init=False, repr=False, compare=False)
    _seen_of: int = field(default=0, init=False, repr=False, compare=False)

    def with_setup(self, setup: "Extraction") -> "Extraction":
        """This extraction for one environment: ``setup``'s facts (the training setup the
        environment is run with) in place of this one's, its findings added, its env in the scope."""
        merged = Extraction(self.side, dict(self.sources), {**self.scope, "env": setup.scope.get("env")},
                            {**self.facts, **setup.facts}, list(self.findings))
        for finding in setup.findings:
            merged.find(finding)
        return merged

    def add(self, fact: Fact) -> Fact:
        self.facts[fact.key] = fact
        return fact

    def put(self, fact: Fact) -> Fact:
        """``fact``, and for an unknown one the ``pattern_not_found`` finding that says why."""
        if fact.is_unknown:
            self.find(Finding("pattern_not_found", "WARNING", fact.unknown, fact.provenance, fact.key))
        return self.add(fact)

    def find(self, finding: Finding) -> None:
        if self._seen_of != len(self.findings):
            self._seen, self._seen_of = set(self.findings), len(self.findings)
        if finding not in self._seen:
            self._seen.add(finding)
            self.findings.append(finding)
            self._seen_of += 1

    def value(self, key: str, default: JSONValue = None) -> JSONValue:
        fact = self.facts.get(key)
        return default if fact is None else fact.value

    def unknown(self, key: str, why: str, finding: Finding, provenance: Iterable[Provenance] = ()) -> None:
        """Record that ``key`` cannot be read: a null fact saying why, and the finding."""
        self.facts[key] = Fact(key, None, tuple(provenance), unknown=why)
        self.find(finding)

    def unknown_keys(self) -> list[str]:
        """Keys the code did not let the extractor read. A family's or a variant's scope leaves
        what each environment decides to the environments (not a key it failed to read)."""
        from .vocabulary import PER_ENVIRONMENT

        deferred = PER_ENVIRONMENT if self.scope.get("env") is None else frozenset()
        return sorted(k for k, f in self.facts.items() if f.is_unknown and k not in deferred)

    def complete(self, keys: Iterable[str], where: str) -> None:
        """Every key in ``keys`` gets a fact: a key no reader gave a value stays explicit,
        ``value: null`` with why, and a ``pattern_not_found`` finding naming ``where``.

        A key a finding already explains (its ``key``) takes that finding's message."""
        for key in keys:
            if key in self.facts:
                continue
            explained = sorted((f for f in self.findings if f.key == key), key=Finding.sort_key)
            if explained:
                self.facts[key] = Fact(key, None, explained[0].provenance, unknown=explained[0].message)
                continue
            why = f"{key}: no reader gave a value ({where})"
            self.unknown(key, why, Finding("pattern_not_found", "WARNING", why, (), key))

    def to_json(self) -> dict:
        return {
            "side": self.side,
            "sources": {name: src.to_json() for name, src in sorted(self.sources.items())},
            "scope": dict(sorted(self.scope.items())),
            "facts": {key: self.facts[key].to_json() for key in sorted(self.facts)},
            "findings": [f.to_json() for f in sorted(self.findings, key=Finding.sort_key)],
        }

    @classmethod
    def from_json(cls, data: dict) -> "Extraction":
        return cls(
            side=data["side"],
            sources={k: SourceInfo.from_json(v) for k, v in data.get("sources", {}).items()},
            scope=dict(data.get("scope", {})),
            facts={k: Fact.from_json(k, v) for k, v in data.get("facts", {}).items()},
            findings=[Finding.from_json(f) for f in data.get("findings", [])],
        )


def normalize_value(value: Any) -> JSONValue:
    """Make a value JSON-native: tuples become lists, integral floats stay floats."""
    if isinstance(value, (list, tuple)):
        return [normalize_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"fact values must be JSON-native, got {type(value).__name__}")


def format_value(value: Any) -> str:
    """A value as people read it: JSON-like, lists in brackets, null for None; a long float
    prints to 4 significant digits (exp(0.5) as 1.649) while the JSON keeps every digit."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if len(repr(value)) <= 8 else f"{value:.4g}"
    return str(value)


def dumps(data: Any) -> str:
    """The one JSON encoding brax-diff writes: sorted keys, 2-space indent, final newline."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def md_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell, where upstream text (a key, a value) may sit in
    brax-diff's own words: one line, ``|`` escaped, no HTML or inline link."""
    from ..safety.escape import md_prose

    return md_prose(text)
