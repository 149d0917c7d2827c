"""The RSL-RL side at the env boundary: Playground's torch wrapper and training script, rsl-rl-lib.

- ``action_bounding``: what ``RSLRLBraxWrapper.step`` (``mujoco_playground/_src/wrapper_torch.py``)
  does with the actions before ``self.step_fn``;
- ``matmul_precision``: allow_tf32 / set_float32_matmul_precision in Playground's
  ``learning/train_rsl_rl.py`` and rsl-rl-lib's runners, algorithms and modules, else torch's default;
- ``final_observation``: the ``wrap_for_brax_training`` the wrapper builds; per environment the
  env's own action clip and reward floor.
"""

from __future__ import annotations

from brax_diff.facts.model import Fact

from ..playground.env_step import read_wrapper_action
from ..playground.interface import STEP_KEYS, env_facts, final_observation_through
from ..precision import import_line, torch_precision
from .script import SCRIPT, WRAPPER, WRAPPER_CLASS

LIBRARY_DIRS = ("rsl_rl/runners", "rsl_rl/runner", "rsl_rl/algorithms", "rsl_rl/modules", "rsl_rl/models")


def action_bounding(playground) -> Fact:
    found = read_wrapper_action(playground, WRAPPER, WRAPPER_CLASS, ("step_fn",))
    if found.unknown is not None:
        return Fact("action_bounding", None, found.provenance, unknown=f"action_bounding: {found.unknown}")
    return Fact("action_bounding", found.value, found.provenance, found.note)


def matmul_precision(rsl_rl, playground) -> Fact:
    files = [(playground, SCRIPT)]
    for folder in LIBRARY_DIRS:
        files += [(rsl_rl, f"{folder}/{name}") for name in rsl_rl.listdir(folder) if name.endswith(".py")]
    line = import_line(playground, SCRIPT)
    return torch_precision(files, "RSL-RL", cite=(playground, SCRIPT, line) if line else None)


def final_observation(playground) -> Fact:
    return final_observation_through(playground, WRAPPER, playground, WRAPPER_CLASS)


def interface_facts(rsl_rl, playground, family: str, env: str | None) -> list[Fact]:
    out = [action_bounding(playground), matmul_precision(rsl_rl, playground), final_observation(playground)]
    if env is not None:
        out += env_facts(playground, env, family)
    else:  # a family's scope leaves each environment's own step to the environments
        out += [Fact(key, None, (), unknown=f"{key}: set per environment by its step in Playground") for key in
                STEP_KEYS]
    return out
