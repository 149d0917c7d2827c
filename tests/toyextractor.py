"""A small hand-written extractor for history tests, shaped like the real ones.

Brax side: ``train.py`` holds ``def train(key=value, ...)`` defaults, one per line; a
``# include: other.py`` line makes it read another file too (so the read set can move).
Playground side: ``envs/`` lists registered environments (one ``<Name>.py`` each) and
``params.py`` holds ``if env_name == "X":`` blocks of ``p["key"] = value`` overrides.
"""

from __future__ import annotations

import ast
import re
import types

from brax_diff.errors import BraxDiffError
from brax_diff.facts import Extraction, Fact

DEFAULT = re.compile(r"^\s+(\w+)\s*=\s*(.+?),?\s*(#.*)?$")
INCLUDE = re.compile(r"^#\s*include:\s*(\S+)")
BRANCH = re.compile(r"""^\s*(?:el)?if env_name == ["'](\w+)["']:""")
OVERRIDE = re.compile(r"""^\s+p\[["'](\w+)["']\]\s*=\s*(.+?)\s*$""")


def _defaults(snapshot, path, extraction):
    text = snapshot.read(path)
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        include = INCLUDE.match(line)
        if include:
            _defaults(snapshot, include.group(1), extraction)
            continue
        if line.startswith("def train("):
            inside = True
            continue
        if inside and line.startswith(")"):
            inside = False
        match = DEFAULT.match(line) if inside else None
        if match:
            extraction.add(Fact(match.group(1), ast.literal_eval(match.group(2)),
                                (snapshot.where(path, number),)))


def _overrides(snapshot, env, extraction):
    if not snapshot.exists("params.py"):
        return
    current = None
    for number, line in enumerate(snapshot.read("params.py").splitlines(), 1):
        branch = BRANCH.match(line)
        if branch:
            current = branch.group(1)
            continue
        match = OVERRIDE.match(line)
        if match and current == env:
            extraction.add(Fact(match.group(1), ast.literal_eval(match.group(2)),
                                (snapshot.where("params.py", number),)))


def environments(playground):
    return [name[:-3] for name in playground.listdir("envs") if name.endswith(".py")]


def extract(snaps, env=None):
    """Defaults from brax, then (for an env) the playground overrides."""
    brax, playground = snaps["brax"], snaps.get("playground")
    sources = {name: snap.info() for name, snap in snaps.items()}
    extraction = Extraction("brax", sources, {"family": None, "env": env})
    _defaults(brax, "train.py", extraction)
    if env is not None:
        if env not in environments(playground):
            raise BraxDiffError(f"environment {env!r} is not registered")
        _overrides(playground, env, extraction)
    return extraction


class ToyBraxExtractor:
    """The contract's BraxExtractor, with the toy parsers (for CLI wiring tests)."""

    def __init__(self, brax, playground):
        self.snaps = {"brax": brax, "playground": playground}

    def families(self):
        return ["toy"]

    def environments(self, family):
        return sorted(environments(self.snaps["playground"]))

    def family_of(self, env):
        return "toy"

    def defaults(self):
        return extract({"brax": self.snaps["brax"]})

    def family(self, family):
        return extract(self.snaps)

    def env(self, env):
        return extract(self.snaps, env)


def brax_module() -> types.ModuleType:
    module = types.ModuleType("extractors.brax")
    module.BraxExtractor = ToyBraxExtractor
    module.FAMILIES = ("toy",)
    return module
