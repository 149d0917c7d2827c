"""Verification: short PPO trainings measure whether each difference matters.

``build_plan`` is static (no torch, no jax) so ``brax-diff verify --plan`` works on the
plain install; ``run_plan`` imports the training stack only when it is called.
"""

from __future__ import annotations

from .plan import Ablation, Plan, RunSpec, build_plan

__all__ = ["Ablation", "Plan", "RunSpec", "build_plan", "run_plan", "training_stack_missing"]


def run_plan(plan, cache_dir, progress=True, **kwargs):
    """Run (or resume) every run of ``plan``; see :func:`brax_diff.verify.runner.run_plan`."""
    from .runner import run_plan as _run_plan

    return _run_plan(plan, cache_dir, progress=progress, **kwargs)


def training_stack_missing() -> str | None:
    """The first training package that cannot be imported, or None when all can."""
    import importlib.util

    for module in ("torch", "jax", "brax", "mujoco_playground", "matplotlib"):
        if importlib.util.find_spec(module) is None:
            return module
    return None
