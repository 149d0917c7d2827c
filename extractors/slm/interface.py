"""The SLM-Lab side at the env boundary, read from its code (not its spec).

- ``action_bounding``: what ``PlaygroundVecEnv.step`` (``slm_lab/env/playground.py``) does with the
  actions before ``self._jit_step``, and whether ``_make_playground_env`` wraps the env in an
  action clip (``...ClipAction``).
- ``matmul_precision``: ``slm_lab/lib/perf.py``'s ``torch.backends.cuda.matmul.allow_tf32``, set in
  its GPU optimizations on Ampere-or-newer GPUs (the key's own condition) when ``OPTIMIZE_PERF``
  is on; the default of that switch is read from ``slm_lab/lib/env_var.py``.
- ``final_observation``: Playground's ``wrap_for_brax_training``, which ``PlaygroundVecEnv``
  calls; per environment, the env's own action clip and reward floor (Playground's code).
"""

from __future__ import annotations

import ast
import re

from brax_diff.facts.model import Fact

from ..playground.env_step import parse, read_wrapper_action
from ..playground.interface import ENV_KEYS, env_facts, final_observation_through
from ..precision import torch_precision

PLAYGROUND_ENV = "slm_lab/env/playground.py"
ENV_BUILDERS = "slm_lab/env/__init__.py"
PERF = "slm_lab/lib/perf.py"
ENV_VAR = "slm_lab/lib/env_var.py"
CAPABILITY = re.compile(r"^\w+ >= [89]$|^\w+ >= 1\d$")  # compute capability 8+: the key's own condition


def action_bounding(snapshot) -> Fact:
    key = "action_bounding"
    found = read_wrapper_action(snapshot, PLAYGROUND_ENV, "PlaygroundVecEnv", ("_jit_step",))
    if found.unknown is not None:
        return Fact(key, None, found.provenance, unknown=f"{key}: {found.unknown}")
    module = parse(snapshot, ENV_BUILDERS)
    builder = next((n for n in (module.body if module else []) if isinstance(n, ast.FunctionDef)
                    and n.name == "_make_playground_env"), None)
    clips = [n for n in ast.walk(builder) if isinstance(n, ast.Call) and "ClipAction" in (
        getattr(n.func, "id", None) or getattr(n.func, "attr", None) or "")] if builder is not None else []
    if builder is None:
        return Fact(key, None, found.provenance,
                    unknown=f"{key}: {ENV_BUILDERS} defines no _make_playground_env: the wrappers around "
                            "PlaygroundVecEnv are not read")
    if clips:
        return Fact(key, None, (*found.provenance, *(snapshot.where(ENV_BUILDERS, c.lineno) for c in clips)),
                    unknown=f"{key}: _make_playground_env in {ENV_BUILDERS} wraps the env in an action clip "
                            "whose range and condition are not read")
    return Fact(key, found.value, found.provenance,
                f"{found.note}; _make_playground_env adds no action clip (only a rescale, for an action space "
                "other than [-1, 1]); the sample of the policy's distribution is the action")


def _optimize_default(snapshot) -> tuple[bool | None, tuple]:
    """``os.getenv("OPTIMIZE_PERF", "true")``'s default in env_var.py, with its line."""
    module = parse(snapshot, ENV_VAR)
    for node in ast.walk(module) if module else ():
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "getenv" and len(node.args) == 2
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == "OPTIMIZE_PERF"
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            return node.args[1].value.lower() == "true", (snapshot.where(ENV_VAR, node.lineno),)
    return None, ()


def matmul_precision(snapshot) -> Fact:
    key = "matmul_precision"
    fact = torch_precision([(snapshot, PERF)], "SLM-Lab",
                           accepted_guard=lambda guard: guard is None or bool(CAPABILITY.match(guard)))
    if fact.is_unknown or fact.value != "tf32":
        return fact
    on, at = _optimize_default(snapshot)
    if on is None:
        return Fact(key, None, fact.provenance, unknown=f"{key}: {PERF} sets allow_tf32 under OPTIMIZE_PERF, whose "
                                                        f"default is not read in {ENV_VAR}")
    if not on:
        return Fact(key, "float32", (*fact.provenance, *at), f"{PERF} sets allow_tf32 only with OPTIMIZE_PERF, off "
                                                             f"by default ({ENV_VAR})")
    return Fact(key, "tf32", (*fact.provenance, *at), f"{fact.note}; runs with OPTIMIZE_PERF, on by default "
                                                      f"({ENV_VAR}; slm-lab run --no-optimize-perf turns it off)")


def final_observation(snapshot, playground) -> Fact:
    return final_observation_through(snapshot, PLAYGROUND_ENV, playground, "PlaygroundVecEnv")


def variant_facts(snapshot) -> list[Fact]:
    """The keys every variant shares (the code, not the spec, decides them)."""
    return [action_bounding(snapshot), matmul_precision(snapshot)]


def setup_facts(snapshot, playground, env: str) -> list[Fact]:
    """Per environment, at the Playground commit read: the env's own action clip and reward floor,
    and what the training wrapper PlaygroundVecEnv steps leaves of the final observation."""
    if playground is None:
        return [Fact(key, None, (), unknown=f"{key}: read from Playground's code for {env}, and no Playground "
                                            "repository is read") for key in ENV_KEYS]
    return [*env_facts(playground, env), final_observation(snapshot, playground)]
