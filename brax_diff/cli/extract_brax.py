"""`brax-diff extract brax`: Brax PPO's effective settings for the Playground families,
one env, or the signature defaults, as a table or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..config import load_settings
from ..errors import BraxDiffError
from ..sources import Repository
from .common import FORMATS, fail_strict, print_extractions


class StrictFailure(BraxDiffError):
    """--strict and a code pattern was not found: exit 1 after printing the facts."""

    exit_code = 1


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `extract` group."""
    app.command("brax")(extract_brax)


def extract_brax(
    repo: Optional[str] = typer.Option(None, "--repo", help="Brax repository: path or URL (default from config)."),
    ref: Optional[str] = typer.Option(None, "--ref", help="Brax git ref (branch, tag, sha, HEAD, main~3)."),
    playground_repo: Optional[str] = typer.Option(None, "--playground-repo", help="MuJoCo Playground repository."),
    playground_ref: Optional[str] = typer.Option(None, "--playground-ref", help="Playground git ref."),
    family: Optional[str] = typer.Option(None, "--family", help="dm_control | locomotion | manipulation."),
    env: Optional[str] = typer.Option(None, "--env", help="One registered Playground environment."),
    defaults: bool = typer.Option(False, "--defaults", help="train()/make_ppo_networks() signature defaults only."),
    fmt: str = typer.Option("table", "--format", help="table | json."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when a code pattern was not found at a ref "
                                "(a key is unknown)."),
) -> None:
    """Brax's effective PPO settings, read from the code at the given refs."""
    from extractors.brax import BraxExtractor  # library import kept out of CLI start-up

    if sum(bool(x) for x in (family, env, defaults)) > 1:
        raise BraxDiffError("choose one of --family, --env, --defaults")
    if fmt not in FORMATS:
        raise BraxDiffError(f"unknown --format {fmt!r} (choose {' or '.join(FORMATS)})")
    settings = load_settings(brax_repo=repo, brax_ref=ref, playground_repo=playground_repo,
                             playground_ref=playground_ref)
    cache_root = Path(settings.cache_dir) if settings.cache_dir else None
    brax = Repository(settings.brax_repo, "brax", cache_root=cache_root).resolve(settings.brax_ref)
    playground = None
    if not defaults:
        playground = Repository(settings.playground_repo, "playground",
                                cache_root=cache_root).resolve(settings.playground_ref)
    extractor = BraxExtractor(brax, playground)
    if defaults:
        extractions = [extractor.defaults()]
    elif env:
        extractions = [extractor.env(env)]
    elif family:
        extractions = [extractor.family(family)]
    else:
        extractions = [extractor.family(name) for name in extractor.families()]
    print_extractions(extractions, fmt)
    missing = sorted({f.message for e in extractions for f in e.findings if f.kind == "pattern_not_found"})
    if strict and missing:
        raise StrictFailure(f"--strict: {len(missing)} code pattern(s) not found; first: {missing[0]}")
    if strict:
        fail_strict(extractions)
