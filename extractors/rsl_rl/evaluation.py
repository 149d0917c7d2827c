"""How an RSL-RL run is scored and reset, read from rsl-rl-lib's ``OnPolicyRunner.learn``.

Playground's ``learning/train_rsl_rl.py`` calls ``runner.learn(...)`` and nothing else scores the
run: ``learn`` loops over iterations, steps the env ``num_steps_per_env`` times per iteration, hands
each step's rewards and dones to the logger (``self.logger.process_env_step``, or its own
``rewbuffer`` before the logger existed), and logs once per iteration. So:

- ``eval_policy``: ``training_episodes``, the returns of the episodes training runs, where a
  ``rewbuffer.extend(...)`` collects them at each done;
- ``eval_interval_env_steps``: one iteration, ``num_steps_per_env x num_envs`` env steps;
- ``num_resets_per_eval`` and ``env_steps_between_resets``: 0 when ``learn`` never calls
  ``self.env.reset`` (the wrapper's auto-reset restarts each env alone).

Any other shape is an unknown naming the file and the function.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..playground.env_step import parse

RUNNER = "rsl_rl/runners/on_policy_runner.py"
LOGGER = "rsl_rl/utils/logger.py"


@dataclass(frozen=True)
class Learn:
    """What ``learn`` was found to do (None: its shape was not understood, ``why`` says how)."""

    step_line: int | None = None  # the self.env.step(...) of the rollout loop
    log_line: int | None = None  # the once-per-iteration log
    collect: tuple[str, int] | None = None  # (path, line) of rewbuffer.extend(...)
    resets: tuple[int, ...] = ()  # lines of self.env.reset(...) calls
    why: str | None = None


def _self_call(node: ast.AST, owner: str, name: str) -> bool:
    """``self.<owner>.<name>(...)``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == owner
            and isinstance(node.func.value.value, ast.Name) and node.func.value.value.id == "self")


def _collects(snapshot, path: str) -> int | None:
    module = parse(snapshot, path)
    for node in ast.walk(module) if module else ():
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "extend"
                and "rewbuffer" == getattr(node.func.value, "attr", getattr(node.func.value, "id", None))):
            return node.lineno
    return None


def read_learn(snapshot) -> Learn:
    module = parse(snapshot, RUNNER)
    cls = next((n for n in (module.body if module else []) if isinstance(n, ast.ClassDef)
                and n.name == "OnPolicyRunner"), None)
    learn = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "learn"), None) if cls else None
    if learn is None:
        return Learn(why=f"{RUNNER} defines no OnPolicyRunner.learn at this ref")
    loops = [n for n in ast.walk(learn) if isinstance(n, ast.For)]
    steps = [n for loop in loops for n in ast.walk(loop) if _self_call(n, "env", "step")]
    if not steps:
        return Learn(why=f"{RUNNER}: OnPolicyRunner.learn steps no self.env in a loop")
    resets = tuple(sorted({n.lineno for n in ast.walk(learn) if _self_call(n, "env", "reset")}))
    logs = [n for n in ast.walk(learn) if _self_call(n, "logger", "log")]
    own = [n for n in ast.walk(learn) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "log"
           and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"]  # self.log(locals()) before v3
    log_line = (logs or own)[0].lineno if (logs or own) else None
    collect = next(((path, line) for path in (LOGGER, RUNNER) if (line := _collects(snapshot, path)) is not None), None)
    return Learn(steps[0].lineno, log_line, collect, resets)
