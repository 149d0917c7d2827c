"""Whether a learner can see the observation an episode ends on, read from Playground's training wrapper.

Brax's trainer (Playground's ``train_jax_ppo.py`` passes ``wrap_env_fn=wrapper.wrap_for_brax_training``),
SLM-Lab's ``PlaygroundVecEnv`` and Playground's RSL-RL wrapper all step an env wrapped by
``mujoco_playground/_src/wrapper.py``'s ``wrap_for_brax_training``, whose outermost wrapper resets a
finished episode inside ``step``: the step returns ``state.replace(obs=where(done, first_obs,
state.obs))``. Unless the wrapper keeps the step's own observation somewhere (``info[...] =
state.obs``), the final observation of an episode, at a time limit too, is gone before any learner
sees it, so no learner can bootstrap from it (mujoco_playground#305; brax PR #641).

:func:`read_final_observation` answers ``discarded``, ``kept`` or unknown, naming the file and the
function. Statically (stdlib ``ast`` over git blobs).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from brax_diff.facts.model import Provenance

from .env_step import parse

WRAPPER = "mujoco_playground/_src/wrapper.py"
BUILDER = "wrap_for_brax_training"


@dataclass(frozen=True)
class FinalObservation:
    value: str | None  # "discarded" | "kept"
    provenance: tuple[Provenance, ...] = ()
    note: str = ""
    unknown: str | None = None


def _outermost(builder: ast.FunctionDef, classes: dict[str, ast.ClassDef]) -> ast.ClassDef | None:
    """The class of the builder's last ``env = Class(env, ...)`` (the wrapper ``step`` is called on)."""
    last = None
    for node in ast.walk(builder):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id in classes):
            if last is None or node.lineno > last.lineno:
                last = node
    return classes[last.value.func.id] if last is not None else None


def _is_step_obs(node: ast.AST) -> bool:
    """``state.obs`` (the observation the wrapped env's step returned)."""
    return isinstance(node, ast.Attribute) and node.attr == "obs" and isinstance(node.value, ast.Name)


def read_final_observation(snapshot) -> FinalObservation:
    module = parse(snapshot, WRAPPER)
    if module is None:
        return FinalObservation(None, (), unknown=f"final observation: {WRAPPER} is missing or not Python")
    functions = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    builder = functions.get(BUILDER)
    if builder is None:
        return FinalObservation(None, (), unknown=f"final observation: {WRAPPER} defines no {BUILDER}")
    cls = _outermost(builder, classes)
    step = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "step"), None) if cls else None
    if step is None:
        return FinalObservation(None, (snapshot.where(WRAPPER, builder.lineno),),
                                unknown=f"final observation: {WRAPPER}: {BUILDER}'s outermost wrapper (a class "
                                        "of this module with its own step) not found")
    where = f"{WRAPPER}: {cls.name}.step"
    returned = [n for n in ast.walk(step) if isinstance(n, ast.Return) and isinstance(n.value, ast.Call)
                and getattr(n.value.func, "attr", None) == "replace"]
    obs = [k.value for r in returned for k in r.value.keywords if k.arg == "obs"]
    if len(returned) != 1 or len(obs) != 1 or not isinstance(obs[0], ast.Name):
        return FinalObservation(None, (snapshot.where(WRAPPER, step.lineno),),
                                unknown=f"final observation: {where} does not return one state.replace(obs=NAME)")
    made = [n for n in ast.walk(step) if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id == obs[0].id]
    replaced = (len(made) == 1 and isinstance(made[0].value, ast.Call)
                and any(_is_step_obs(a) for a in made[0].value.args))
    if not replaced:
        return FinalObservation(None, (snapshot.where(WRAPPER, returned[0].lineno),),
                                unknown=f"final observation: {where}: the returned obs is not a choice between a "
                                        "reset observation and state.obs")
    kept = [n for n in ast.walk(step) if isinstance(n, (ast.Assign, ast.Call)) and n is not made[0]
            and any(_is_step_obs(v) for v in _stored(n))]
    if kept:
        return FinalObservation("kept", tuple(snapshot.where(WRAPPER, n.lineno) for n in kept),
                                f"{cls.name}.step stores the step's own observation before the reset replaces it")
    return FinalObservation("discarded", (snapshot.where(WRAPPER, made[0].lineno),),
                            f"{cls.name}.step returns the reset observation where an episode is done and keeps no "
                            "copy of the one it ended on (wrap_for_brax_training's outermost wrapper)")


def _stored(node: ast.AST) -> list[ast.AST]:
    """Values ``node`` stores into a mapping: ``info[k] = v`` and ``info.update(k=v)``."""
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets):
        return [node.value]
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "update":
        return [k.value for k in node.keywords] + list(node.args)
    return []
