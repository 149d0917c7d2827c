"""Whether an environment clips its per-step reward from below, read from Playground's code.

Several locomotion environments end their ``step`` with ``reward = jp.clip(sum(rewards.values()) *
self.dt, 0.0, 10000.0)``: no step can earn less than 0, so an average return of exactly 0 means no
step of the scored episodes earned anything, which is a collapse, not a policy that is merely
weak. This reader takes the environment's ``step`` (:func:`.env_step.find_step`, through the family's
registry) and reads its assignments to ``reward``. Statically (stdlib ``ast`` over git blobs): nothing runs.

Its answer is a :class:`RewardFloor`: the floor and its line; no floor with the lines of the
reward's assignments, none of them a clip (which says only that ``step`` clips nothing: a reward
made of bounded terms may still never go below 0); or unknown, naming the file, the class's
``step`` and why.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from brax_diff.facts.model import Provenance

from .env_step import find_step

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


def _number(node: ast.expr) -> float | None:
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "zeros_like"):
        return 0.0  # jp.maximum(x, jp.zeros_like(x))
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    return None


def _reward_names(step: ast.FunctionDef) -> set[str]:
    """``reward`` and the name ``step`` passes as the State's reward (``mjx_env.State(data, obs, r, ...)``)."""
    names = set(REWARD_NAMES)
    for node in ast.walk(step):
        if (isinstance(node, ast.Call) and len(node.args) >= 3 and isinstance(node.args[2], ast.Name)
                and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "State"):
            names.add(node.args[2].id)
    return names


def read_floor(snapshot, family: str, env: str) -> RewardFloor:
    """The per-step reward floor ``env``'s ``step`` applies, at ``snapshot`` (Playground)."""
    found = find_step(snapshot, family, env)
    if found.node is None:
        return RewardFloor(env, None, found.provenance, f"reward floor: {found.unknown}")
    path, step = found.path, found.node
    names = _reward_names(step)
    assigned = [n for n in ast.walk(step) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in names for t in n.targets)]
    if not assigned:
        return RewardFloor(env, None, (snapshot.where(path, step.lineno),),
                           f"reward floor: {path}: {found.cls}.step assigns no {' or '.join(REWARD_NAMES)}")
    floors = []
    for node in assigned:
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in CLIPS:
            low = _number(call.args[1]) if len(call.args) > 1 else None
            if low is None:
                return RewardFloor(env, None, (snapshot.where(path, node.lineno),),
                                   f"reward floor: {path}: {found.cls}.step clips the reward with a lower bound "
                                   "that is not a number")
            floors.append((low, node.lineno))
    if not floors:
        return RewardFloor(env, None, tuple(snapshot.where(path, n.lineno) for n in assigned))
    low, line = max(floors, key=lambda f: f[1])  # the last clip in the text is the one the reward leaves with
    return RewardFloor(env, low, (snapshot.where(path, line),))
