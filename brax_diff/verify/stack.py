"""Whether this machine can train: the training stack's packages, found without importing them."""

from __future__ import annotations


def training_stack_missing() -> str | None:
    """The first training package that cannot be imported, or None when all can."""
    import importlib.util

    for module in ("torch", "jax", "brax", "mujoco_playground", "matplotlib"):
        if importlib.util.find_spec(module) is None:
            return module
    return None
