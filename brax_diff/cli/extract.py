"""`brax-diff extract brax|slm|rsl-rl`: one side's canonical facts, as a table or JSON."""

from __future__ import annotations

from . import extract_brax, extract_rsl_rl, extract_slm


def register(app) -> None:
    """Add the `extract` group and its commands to the app."""
    group = app.group("extract", help="Extract one side's canonical facts at a git ref.")
    extract_brax.register(group)
    extract_slm.register(group)
    extract_rsl_rl.register(group)
