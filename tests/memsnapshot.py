"""An in-memory snapshot for engine tests that need many small modules fast (no git repository)."""

from __future__ import annotations

from brax_diff.extractors.engine import flow
from brax_diff.facts.model import Provenance


class MemorySnapshot:
    """The few snapshot methods the engine's Loader uses, over a dict of path -> text."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def exists(self, path: str) -> bool:
        return path in self.files

    def listdir(self, path: str) -> list[str]:
        return sorted({p[len(path) + 1:].split("/")[0] for p in self.files if p.startswith(path + "/")})

    def blob_id(self, path: str) -> None:
        return None  # not cached by blob: every example is parsed afresh

    def read(self, path: str) -> str:
        return self.files[path]

    def where(self, path: str, line: int) -> Provenance:
        return Provenance("https://example.invalid/repo", "0" * 40, path, line)


def engine_call(source: str, function: str = "f", *args, assume: dict | None = None) -> flow.V:
    """Run ``function`` of a module ``pkg/gen.py`` holding ``source`` with constant ``args``."""
    snapshot = MemorySnapshot({"pkg/__init__.py": "", "pkg/gen.py": source})
    engine = flow.Engine(flow.Loader(snapshot, ("pkg",)), assume=assume)
    module = engine.module("pkg.gen")
    found = engine.lookup(module, function)
    return engine.call(found, *[a if isinstance(a, flow.V) else flow.const(a) for a in args])
