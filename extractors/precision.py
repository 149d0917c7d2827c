"""Numeric precision of the learner's float32 matrix multiplications, read from each side's code.

On an NVIDIA GPU of compute capability 8 or more (Ampere and newer), a float32 matmul may run in
TF32 (10-bit mantissa inputs) or in full float32. The two frameworks default differently:

- JAX (Brax): its default precision lets XLA use TF32 for float32 dots on these GPUs, unless a
  ``jax.config.update("jax_default_matmul_precision", ...)`` (or the environment variable) asks
  for more. Playground's README says so and tells users to export
  ``JAX_DEFAULT_MATMUL_PRECISION=highest`` (mujoco_playground#86: training degrades on Ampere).
- PyTorch: float32 matmuls run in float32 (``torch.backends.cuda.matmul.allow_tf32`` is False by
  default since torch 1.12) unless the code sets ``allow_tf32 = True`` or
  ``torch.set_float32_matmul_precision("high")``.

:func:`jax_precision` and :func:`torch_precision` look for those settings in the files a side's
training runs through and answer ``tf32`` or ``float32`` with the line that decides it, or an
explained unknown where a setting is made under a condition they do not decide. Statically
(stdlib ``ast`` over git blobs): an environment variable set outside the code is not seen, and
the note says so.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

from brax_diff.facts.model import Fact

from .syntax import parse_ast

KEY = "matmul_precision"
JAX_FLAG = "jax_default_matmul_precision"
JAX_FULL = frozenset({"highest", "float32"})
JAX_TF32 = frozenset({"tensorfloat32", "high", "default", "bfloat16_3x", "fastest"})
TORCH_FULL = frozenset({"highest"})
TORCH_TF32 = frozenset({"high", "medium"})
README_CLAIM = re.compile(r"TF32", re.IGNORECASE)
NOT_SEEN = "an environment variable set outside the code (JAX_DEFAULT_MATMUL_PRECISION, NVIDIA_TF32_OVERRIDE) is not seen"


@dataclass(frozen=True)
class Setting:
    """One precision setting in the code: where, what it asks for, and the conditions around it."""

    path: str
    line: int
    value: str  # "tf32" | "float32" | "unknown"
    guards: tuple[str, ...]  # the source of enclosing ``if`` tests, innermost last
    function: str | None  # the enclosing function; None at module level
    snapshot: object


def _constant(node: ast.expr | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


# The settings a walk found, by (blob, path, visit): every environment asks about the same files.
_FOUND: dict[tuple, tuple[Setting, ...]] = {}


def _walk(snapshot, path: str, found: list[Setting], visit) -> None:
    blob = snapshot.blob_id(path)
    if blob is None:
        return
    key = (blob, path, visit)
    if key not in _FOUND:
        if len(_FOUND) >= 1024:
            _FOUND.clear()
        _FOUND[key] = tuple(_walk_tree(parse_ast(snapshot, path), path, visit))
    found += [dataclasses.replace(setting, snapshot=snapshot) for setting in _FOUND[key]]


def _walk_tree(module: ast.Module | None, path: str, visit) -> list[Setting]:
    found: list[Setting] = []
    if module is None:
        return found

    def walk(node: ast.AST, guards: tuple[str, ...], function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, (), child.name)
                continue
            if isinstance(child, ast.If):
                inner = (*guards, ast.unparse(child.test))
                for stmt in child.body:
                    visit_one(stmt, inner, function)
                    walk(stmt, inner, function)
                for stmt in child.orelse:
                    visit_one(stmt, (*guards, f"not ({ast.unparse(child.test)})"), function)
                    walk(stmt, (*guards, f"not ({ast.unparse(child.test)})"), function)
                continue
            visit_one(child, guards, function)
            walk(child, guards, function)

    def visit_one(node: ast.AST, guards: tuple[str, ...], function: str | None) -> None:
        value = visit(node)
        if value is not None:
            found.append(Setting(path, node.lineno, value, guards, function, None))

    walk(module, (), None)
    return found


def _jax_setting(node: ast.AST) -> str | None:
    """``jax.config.update("jax_default_matmul_precision", V)`` or ``jax.default_matmul_precision(V)``."""
    if not isinstance(node, ast.Call):
        return None
    name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
    if name == "update" and len(node.args) == 2 and _constant(node.args[0]) == JAX_FLAG:
        value = _constant(node.args[1])
    elif name == "default_matmul_precision" and node.args:
        value = _constant(node.args[0])
    else:
        return None
    return "float32" if value in JAX_FULL else "tf32" if value in JAX_TF32 else "unknown"


def _torch_setting(node: ast.AST) -> str | None:
    """``torch.backends.cuda.matmul.allow_tf32 = B`` or ``torch.set_float32_matmul_precision(V)``."""
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "allow_tf32"
                                            and isinstance(t.value, ast.Attribute) and t.value.attr == "matmul"
                                            for t in node.targets):
        value = _constant(node.value)
        return "tf32" if value is True else "float32" if value is False else "unknown"
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "set_float32_matmul_precision":
        value = _constant(node.args[0]) if node.args else None
        return "float32" if value in TORCH_FULL else "tf32" if value in TORCH_TF32 else "unknown"
    return None


def _settings(files, visit) -> list[Setting]:
    found: list[Setting] = []
    for snapshot, path in files:
        _walk(snapshot, path, found, visit)
    return found


def _decided(settings: list[Setting], accepted_guard, who: str) -> Fact | None:
    """The fact the settings decide, or None when there are none. A setting inside a function or
    under a condition ``accepted_guard`` does not accept leaves the key unknown, naming it."""
    if not settings:
        return None
    values = {s.value for s in settings}
    at = tuple(s.snapshot.where(s.path, s.line) for s in settings)
    odd = [s for s in settings if s.value == "unknown"
           or not all(accepted_guard(g) for g in s.guards) or (s.function is not None and not accepted_guard(None))]
    if odd or len(values) != 1:
        s = odd[0] if odd else settings[0]
        where = f"{s.path}:{s.line}" + (f" in {s.function}()" if s.function else "")
        guard = f" under `{' and '.join(s.guards)}`" if s.guards else ""
        return Fact(KEY, None, at, unknown=f"{KEY}: {who} sets the matmul precision at {where}{guard}, which is "
                                          "not decided here" if s.value != "unknown" else
                                          f"{KEY}: {who} sets the matmul precision to a value not read at {where}")
    setting = settings[-1]
    guards = f" when {' and '.join(setting.guards)}" if setting.guards else ""
    return Fact(KEY, values.pop(), at, f"{setting.path}:{setting.line} sets it"
                + (f" in {setting.function}()" if setting.function else "") + guards + f"; {NOT_SEEN}")


def jax_precision(files, readme) -> Fact:
    """The JAX side (Brax's trainer, Playground's training script): ``files`` are (snapshot, path)
    pairs its training runs through; ``readme`` the (snapshot, path) that states JAX's default."""
    decided = _decided(_settings(files, _jax_setting), lambda guard: False, "the JAX side")
    if decided is not None:
        return decided
    snapshot, path = readme
    lines = snapshot.read(path).splitlines() if snapshot.exists(path) else []
    claim = next((i + 1 for i, text in enumerate(lines) if README_CLAIM.search(text)), None)
    if claim is None:
        return Fact(KEY, None, (), unknown=f"{KEY}: nothing in {', '.join(p for _, p in files)} sets "
                                           f"{JAX_FLAG}, and {path} states no default to cite")
    return Fact(KEY, "tf32", (snapshot.where(path, claim),),
                f"JAX's default: nothing in {', '.join(p for _, p in files)} sets {JAX_FLAG}, so XLA may run "
                f"float32 matmuls in TF32 on Ampere-or-newer GPUs ({path}:{claim} says so and advises "
                f"JAX_DEFAULT_MATMUL_PRECISION=highest); {NOT_SEEN}")


def torch_precision(files, who: str, accepted_guard=lambda guard: False, cite=None) -> Fact:
    """The PyTorch side: ``files`` its training runs through; ``accepted_guard(text)`` says whether
    a condition around a setting is part of this key's definition (a GPU capability test; None:
    whether a setting inside a function counts); ``cite`` a (snapshot, path, line) for torch's
    default when nothing sets it."""
    decided = _decided(_settings(files, _torch_setting), accepted_guard, who)
    if decided is not None:
        return decided
    if cite is None:
        return Fact(KEY, None, (), unknown=f"{KEY}: nothing in {', '.join(p for _, p in files)} sets it, and "
                                           "no line to cite for torch's default")
    snapshot, path, line = cite
    return Fact(KEY, "float32", (snapshot.where(path, line),),
                f"torch's default (allow_tf32 False since torch 1.12): nothing in "
                f"{', '.join(p for _, p in files)} sets allow_tf32 or set_float32_matmul_precision; {NOT_SEEN}")


def import_line(snapshot, path: str, module: str = "torch") -> int | None:
    """The line of ``import torch`` in ``path`` (what a torch default is cited at)."""
    if not snapshot.exists(path):
        return None
    for i, text in enumerate(snapshot.read(path).splitlines()):
        if re.match(rf"\s*import {module}\b|\s*from {module}\b", text):
            return i + 1
    return None
