"""The Brax side at the env boundary: how its sampled actions are bounded, its matmul precision,
and (through Playground) the final observation and the env's own action clip and reward floor.

- ``action_bounding``: the action distribution ``make_ppo_networks`` builds (the
  ``action_distribution`` fact) and the postprocessor that class gives its base in
  ``brax/training/distribution.py``, read by its ``forward``: ``tanh(x)`` squashes, ``x`` does not.
  The policy hands the env ``postprocess(sample)`` (brax's ``make_inference_fn``).
- ``matmul_precision``: :func:`brax_diff.extractors.precision.jax_precision` over Brax's trainer
  and the script that runs the reference (Playground's ``learning/train_jax_ppo.py``, or
  ``brax/training/learner.py``).
- ``final_observation``: Playground's ``wrap_for_brax_training``, where the script passes it.
"""

from __future__ import annotations

import ast

from brax_diff.facts.model import Fact

from ..playground.env_step import parse
from ..playground.interface import STEP_KEYS, env_facts, final_observation_through
from ..precision import jax_precision

DISTRIBUTIONS = "brax/training/distribution.py"
CLASSES = {"tanh_normal": "NormalTanhDistribution", "normal": "NormalDistribution"}
TRAIN = "brax/training/agents/ppo/train.py"
SCRIPTS = {"params": ("playground", "learning/train_jax_ppo.py"),
           "train-script": ("playground", "learning/train_jax_ppo.py"),
           "learner": ("brax", "brax/training/learner.py")}


def _postprocessor(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> ast.Call | None:
    """The ``Postprocessor()`` a distribution class gives its base's ``__init__`` (by keyword, or at the
    position of the base's ``postprocessor`` parameter)."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    calls = [n for n in ast.walk(init) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "__init__"] \
        if init is not None else []
    base = classes.get(cls.bases[0].id) if len(cls.bases) == 1 and isinstance(cls.bases[0], ast.Name) else None
    base_init = next((n for n in base.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None) \
        if base is not None else None
    if len(calls) != 1 or base_init is None:
        return None
    names = [a.arg for a in base_init.args.args[1:]]
    given = [k.value for k in calls[0].keywords if k.arg == "postprocessor"]
    if not given and "postprocessor" in names and names.index("postprocessor") < len(calls[0].args):
        given = [calls[0].args[names.index("postprocessor")]]
    found = given[0] if len(given) == 1 else None
    return found if isinstance(found, ast.Call) and isinstance(found.func, ast.Name) else None


def _forward(cls: ast.ClassDef | None) -> str | None:
    """``tanh`` when the postprocessor's ``forward(self, x)`` returns ``tanh(x)``, ``none`` when it
    returns ``x`` itself; None for anything else."""
    forward = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None) \
        if cls is not None else None
    if forward is None or len(forward.args.args) != 2 or len(forward.body) < 1:
        return None
    last = forward.body[-1]
    arg = forward.args.args[1].arg
    if not isinstance(last, ast.Return) or last.value is None:
        return None
    value = last.value
    if isinstance(value, ast.Name) and value.id == arg:
        return "none"
    if (isinstance(value, ast.Call) and getattr(value.func, "attr", None) == "tanh" and len(value.args) == 1
            and isinstance(value.args[0], ast.Name) and value.args[0].id == arg):
        return "tanh"
    return None


def action_bounding(brax, distribution: Fact | None) -> Fact:
    key = "action_bounding"
    if distribution is None or distribution.is_unknown:
        return Fact(key, None, (), unknown=f"{key}: the action distribution is unknown, so is its postprocessor")
    cls_name = CLASSES.get(distribution.value)
    module = parse(brax, DISTRIBUTIONS)
    classes = {n.name: n for n in (module.body if module else []) if isinstance(n, ast.ClassDef)}
    cls = classes.get(cls_name)
    if cls is None:
        return Fact(key, None, distribution.provenance,
                    unknown=f"{key}: {DISTRIBUTIONS} defines no {cls_name or distribution.value} class to read")
    made = _postprocessor(cls, classes)
    post = classes.get(made.func.id) if made is not None else None
    value = _forward(post)
    if value is None:
        what = f"{made.func.id}.forward is neither tanh(x) nor x" if made is not None else \
            "no postprocessor passed to its base's __init__ was found"
        return Fact(key, None, (brax.where(DISTRIBUTIONS, cls.lineno),),
                    unknown=f"{key}: {DISTRIBUTIONS}: {cls_name}: {what}")
    return Fact(key, value, (brax.where(DISTRIBUTIONS, made.lineno), brax.where(DISTRIBUTIONS, post.lineno),
                             *distribution.provenance),
                f"{cls_name}'s postprocessor {made.func.id}.forward returns {'tanh(x)' if value == 'tanh' else 'x'}: "
                "the policy hands the env postprocess(sample)")


def _script(brax, playground, reference: str):
    repo, path = SCRIPTS.get(reference, SCRIPTS["params"])
    return (brax if repo == "brax" else playground), path


def matmul_precision(brax, playground, reference: str) -> Fact:
    snapshot, script = _script(brax, playground, reference)
    files = [(brax, TRAIN)] + ([(snapshot, script)] if snapshot is not None else [])
    if playground is None:
        return Fact("matmul_precision", None, (), unknown="matmul_precision: JAX's default is cited from "
                                                         "Playground's README, and no Playground repository is read")
    return jax_precision(files, (playground, "README.md"))


def final_observation(brax, playground, reference: str) -> Fact:
    snapshot, script = _script(brax, playground, reference)
    return final_observation_through(snapshot, script, playground, "Brax's trainer", needle="wrap_for_brax_training")


def interface_facts(brax, playground, distribution: Fact | None, reference: str, env: str | None,
                    family: str | None) -> list[Fact]:
    out = [action_bounding(brax, distribution), matmul_precision(brax, playground, reference),
           final_observation(brax, playground, reference)]
    if env is not None and playground is not None:
        out += env_facts(playground, env, family)
    elif env is None:  # a family's scope leaves each environment's own step to the environments
        out += [Fact(key, None, (), unknown=f"{key}: set per environment by its step in Playground (see the "
                                            "environment matrix)") for key in STEP_KEYS]
    return out
