"""`brax-diff extract brax`: Brax PPO's effective settings for the Playground families,
one env, or the signature defaults, as a table or JSON."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from ..config import load_settings
from ..cached import brax_extractor
from ..errors import BraxDiffError
from ..factcache import FactCache, cache_root
from ..session import head_warnings, open_snapshots
from .common import FORMATS, fail_strict, print_extractions


class StrictFailure(BraxDiffError):
    """--strict and a code pattern was not found: exit 1 after printing the facts."""

    exit_code = 1


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `extract` group."""
    app.command("brax")(extract_brax)


def extract_brax(
    brax_repo: Optional[str] = typer.Option(None, "--brax-repo", "--repo", help="Brax repository: path or URL "
                                       "(default from config, else google/brax on GitHub)."),
    brax_ref: Optional[str] = typer.Option(None, "--brax", "--brax-ref", "--ref",
                                      help="Brax git ref: branch, tag, sha, HEAD, main~3 or WORKTREE (default: main)."),
    playground_repo: Optional[str] = typer.Option(None, "--playground-repo", help="MuJoCo Playground repository."),
    playground_ref: Optional[str] = typer.Option(None, "--playground", "--playground-ref",
                                                 help="Playground git ref (default: main)."),
    family: Optional[str] = typer.Option(None, "--family", help="dm_control | locomotion | manipulation."),
    env: Optional[str] = typer.Option(None, "--env", help="One registered Playground environment."),
    defaults: bool = typer.Option(False, "--defaults", help="train()/make_ppo_networks() signature defaults only."),
    fmt: str = typer.Option("table", "--format", help="table | json."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when a code pattern was not found at a ref "
                                "(a key is unknown)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Extract again; do not read or write the fact cache."),
) -> None:
    """Brax's effective PPO settings, read from the code at the given refs."""
    if sum(bool(x) for x in (family, env, defaults)) > 1:
        raise BraxDiffError("choose one of --family, --env, --defaults")
    if fmt not in FORMATS:
        raise BraxDiffError(f"unknown --format {fmt!r} (choose {' or '.join(FORMATS)})")
    settings = load_settings(brax_repo=brax_repo, brax_ref=brax_ref, playground_repo=playground_repo,
                             playground_ref=playground_ref)
    snapshots = open_snapshots(settings, ("brax",) if defaults else ("brax", "playground"))
    extractor = brax_extractor(snapshots, None if no_cache else FactCache(cache_root(settings.cache_dir)))
    if defaults:
        extractions = [extractor.defaults()]
    elif env:
        extractions = [extractor.env(env)]
    elif family:
        extractions = [extractor.family(family)]
    else:
        extractions = [extractor.family(name) for name in extractor.families()]
    for extraction in extractions:  # name the work-tree files read, now that all were read
        extraction.sources = {side: snapshots[side].info() for side in extraction.sources}
    print_extractions(extractions, fmt)
    for line in head_warnings(snapshots):
        print(f"warning: {line}", file=sys.stderr)
    missing = sorted({f.message for e in extractions for f in e.findings if f.kind == "pattern_not_found"})
    if strict and missing:
        raise StrictFailure(f"--strict: {len(missing)} code pattern(s) not found; first: {missing[0]}")
    if strict:
        fail_strict(extractions)
