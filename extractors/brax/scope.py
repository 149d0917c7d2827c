"""Shared pieces of the Brax extractor: values with provenance, and the small static
helpers the Brax code reader and the Playground config reader both use.

A :class:`Setting` is one parameter's effective value in a scope (``train()``'s
``num_envs``, ``make_ppo_networks()``'s ``activation``), with the lines it comes from.
Scopes are layered: signature defaults < family config < per-env overrides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import libcst as cst

from brax_diff.facts.model import Provenance

from ..engine.pyast import (plain, Code, IndexedModule, NotLiteral, PyModule, calls_named, descendants,  # noqa: F401 (re-exported)
                    dotted_name, literal)


@dataclass(frozen=True)
class Setting:
    """One parameter's value (a literal, or ``Code`` when not literal) and where it is set."""

    value: Any
    provenance: tuple[Provenance, ...]
    origin: str  # "train() default", "dm_control config", "override for WalkerRun", ...
    # The expression the config wrote when the value is the environment's own
    # (``env_config.episode_length``): the trainer's facts are derived from it, so a family's
    # environments share one derivation whatever their own values.
    written: str | None = None

    def as_written(self) -> "Setting":
        """The setting as the config wrote it (itself when it is no environment's own value)."""
        return self if self.written is None else Setting(Code(self.written), self.provenance[:1], self.origin)


Scope = dict[str, Setting]


class PatternNotFound(Exception):
    """A code shape the extractor relies on is absent at this ref (upstream refactored)."""

    def __init__(self, keys: tuple[str, ...] | list[str], path: str, what: str) -> None:
        super().__init__(what)
        self.keys = tuple(keys)
        self.path = path
        self.what = what


def names_in(node: cst.CSTNode) -> list[str]:
    """Bare names an expression reads (attribute names excluded), in order, unique."""
    out: list[str] = []
    skip: set[int] = set()
    for child in descendants(node):
        if isinstance(child, cst.Attribute):
            skip.add(id(child.attr))
        if isinstance(child, cst.Arg) and child.keyword is not None:
            skip.add(id(child.keyword))
        if isinstance(child, cst.Name) and id(child) not in skip and child.value not in out:
            out.append(child.value)
    return out


def evaluate(expr: cst.CSTNode, scope: Mapping[str, Setting]) -> tuple[Any, tuple[Provenance, ...]]:
    """Evaluate an expression of scope parameters (``batch_size * num_minibatches // num_envs``).

    Returns the value and the provenance of every parameter it read. Raises NotLiteral
    when a name is unknown or a value is not a literal.
    """
    names = {}
    provenance: list[Provenance] = []
    for name in names_in(expr):
        setting = scope.get(name)
        if setting is None or isinstance(setting.value, Code):
            continue
        names[name] = setting.value
        provenance.extend(setting.provenance)
    return literal(expr, names), tuple(provenance)


def first_positional(call: cst.Call, index: int = 0) -> cst.CSTNode | None:
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[index].value if len(positional) > index else None


def callee_name(expr: cst.CSTNode | None) -> str | None:
    """The function an argument names: ``f`` or ``functools.partial(f, ...)`` -> ``f``."""
    if expr is None:
        return None
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("partial"):
        expr = first_positional(expr)
        if expr is None:
            return None
    name = dotted_name(expr)
    return name.rsplit(".", 1)[-1] if name else None


def last_identifier(value: Any) -> str | None:
    """``jax.nn.initializers.lecun_uniform()`` or ``linen.swish`` -> the final name."""
    if isinstance(value, str):
        return value
    if isinstance(value, Code):
        text = value.text.split("(", 1)[0].strip()
        return text.rsplit(".", 1)[-1] or None
    return None


__all__ = ["IndexedModule", "Setting", "Scope", "PatternNotFound", "NotLiteral", "descendants", "calls_named", "names_in",
           "evaluate", "first_positional", "callee_name", "last_identifier", "plain"]
