"""Verification: short PPO trainings measure whether each difference matters.

``build_plan`` is static (no torch, no jax) so ``brax-diff verify --plan`` works on the
plain install; ``run_plan`` imports the training stack only when it is called.
"""

from __future__ import annotations

from .plan import Ablation, Plan, RunSpec, build_plan
from .stack import training_stack_missing

__all__ = ["Ablation", "Plan", "RunSpec", "build_plan", "run_plan", "training_stack_missing"]


def run_plan(plan, cache_dir, progress=True, **kwargs):
    """Run (or resume) every run of ``plan``; see :func:`brax_diff.verify.runner.run_plan`."""
    from .runner import run_plan as _run_plan

    return _run_plan(plan, cache_dir, progress=progress, **kwargs)
