"""`brax-diff extract brax|slm`: one side's canonical facts, as a table or JSON."""

from __future__ import annotations

import typer

from . import extract_brax, extract_slm
from .common import HELP_MARKUP

extract_app = typer.Typer(help="Extract one side's canonical facts at a git ref.", no_args_is_help=True,
                          rich_markup_mode=HELP_MARKUP)
extract_brax.register(extract_app)
extract_slm.register(extract_app)


def register(app: typer.Typer) -> None:
    app.add_typer(extract_app, name="extract")
