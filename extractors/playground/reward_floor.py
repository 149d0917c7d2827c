"""Whether an environment clips its per-step reward from below, read from Playground's code.

Several locomotion environments end their ``step`` with ``reward = jp.clip(sum(rewards.values()) *
self.dt, 0.0, 10000.0)``: no step can earn less than 0, so an average return of exactly 0 means no
step of the scored episodes earned anything, which is a collapse, not a policy that is merely
weak. This reader follows the family's registry (``mujoco_playground/_src/<family>/__init__.py``:
``_envs = {"Go1JoystickFlatTerrain": functools.partial(go1_joystick.Joystick, ...)}`` and its
``from ... import module as alias`` lines) to the environment's class and reads the assignments
to ``reward`` in its ``step`` method. Statically (stdlib ``ast`` over git blobs): nothing runs.

Its answer is a :class:`RewardFloor`: the floor and its line; no floor with the lines of the
reward's assignments, none of them a clip (which says only that ``step`` clips nothing: a reward
made of bounded terms may still never go below 0); or unknown, naming the file, the class's
``step`` and why.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from brax_diff.facts.model import Provenance

REGISTRY_DIRS = {"dm_control": "dm_control_suite", "locomotion": "locomotion", "manipulation": "manipulation"}
REWARD_NAMES = ("reward", "total_reward")
CLIPS = ("clip", "maximum")  # jp.clip(x, low, high), jp.maximum(x, low)


@dataclass(frozen=True)
class RewardFloor:
    """``floor``: the lowest per-step reward (None: no floor); ``unknown``: why it cannot be read."""

    env: str
    floor: float | None
    provenance: tuple[Provenance, ...] = ()
    unknown: str | None = None

    def to_json(self) -> dict:
        out = {"floor": self.floor, "provenance": [p.to_json() for p in self.provenance]}
        if self.unknown is not None:
            out["unknown"] = self.unknown
        return out


def _parse(snapshot, path: str) -> ast.Module | None:
    if not snapshot.exists(path):
        return None
    try:
        return ast.parse(snapshot.read(path))
    except (SyntaxError, ValueError):
        return None


def _imports(module: ast.Module) -> dict[str, str]:
    """alias -> module path for ``from a.b import c as alias`` and ``from a.b import c``."""
    out = {}
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for name in node.names:
                out[name.asname or name.name] = f"{node.module}.{name.name}"
    return out


def _envs_entry(module: ast.Module, env: str) -> ast.expr | None:
    for node in module.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_envs" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            for key, value in zip(node.value.keys, node.value.values):
                if isinstance(key, ast.Constant) and key.value == env:
                    return value
    return None


def _class_of(value: ast.expr) -> tuple[str, str] | None:
    """(module alias, class name) of ``alias.Class`` or ``partial(alias.Class, ...)``."""
    if isinstance(value, ast.Call) and value.args:
        value = value.args[0]
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return value.value.id, value.attr
    return None


def _number(node: ast.expr) -> float | None:
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "zeros_like"):
        return 0.0  # jp.maximum(x, jp.zeros_like(x))
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    return None


def read_floor(snapshot, family: str, env: str) -> RewardFloor:
    """The per-step reward floor ``env``'s ``step`` applies, at ``snapshot`` (Playground)."""
    folder = REGISTRY_DIRS.get(family)
    if folder is None:
        return RewardFloor(env, None, (), f"reward floor: no registry folder for family {family!r}")
    registry_path = f"mujoco_playground/_src/{folder}/__init__.py"
    registry = _parse(snapshot, registry_path)
    if registry is None:
        return RewardFloor(env, None, (), f"reward floor: {registry_path} is missing or not Python")
    entry = _envs_entry(registry, env)
    named = _class_of(entry) if entry is not None else None
    module_path = _imports(registry).get(named[0]) if named else None
    if named is None or module_path is None:
        return RewardFloor(env, None, (snapshot.where(registry_path, entry.lineno),) if entry is not None else (),
                           f"reward floor: {registry_path}: _envs[{env!r}] is not a class of an imported module")
    path = module_path.replace(".", "/") + ".py"
    module = _parse(snapshot, path)
    classes = {n.name: n for n in (module.body if module else []) if isinstance(n, ast.ClassDef)}
    cls = classes.get(named[1])
    if cls is None:
        return RewardFloor(env, None, (), f"reward floor: {path} defines no class {named[1]}")
    step = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "step"), None)
    if step is None:
        return RewardFloor(env, None, (snapshot.where(path, cls.lineno),),
                           f"reward floor: {path}: {named[1]}.step is inherited (read only the class's own step)")
    assigned = [n for n in ast.walk(step) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in REWARD_NAMES for t in n.targets)]
    if not assigned:
        return RewardFloor(env, None, (snapshot.where(path, step.lineno),),
                           f"reward floor: {path}: {named[1]}.step assigns no {' or '.join(REWARD_NAMES)}")
    floors = []
    for node in assigned:
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in CLIPS:
            low = _number(call.args[1]) if len(call.args) > 1 else None
            if low is None:
                return RewardFloor(env, None, (snapshot.where(path, node.lineno),),
                                   f"reward floor: {path}: {named[1]}.step clips the reward with a lower bound "
                                   "that is not a number")
            floors.append((low, node.lineno))
    if not floors:
        return RewardFloor(env, None, tuple(snapshot.where(path, n.lineno) for n in assigned))
    low, line = max(floors, key=lambda f: f[1])  # the last clip in the text is the one the reward leaves with
    return RewardFloor(env, low, (snapshot.where(path, line),))
