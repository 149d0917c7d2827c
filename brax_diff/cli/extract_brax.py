"""`brax-diff extract brax`: Brax PPO's effective settings for the Playground families,
one env, or the signature defaults, as a table or JSON."""

from __future__ import annotations

import sys

from ..errors import BraxDiffError
from ..safety.escape import one_line
from .common import StrictFailure


def register(app) -> None:
    """Add this module's commands to the `extract` group."""
    command = app.command("brax", extract_brax)
    command.option("brax_repo", "--brax-repo", "--repo", help="Brax repository: path or URL "
                   "(default from config, else google/brax on GitHub).")
    command.option("brax_ref", "--brax", "--brax-ref", "--ref",
                   help="Brax git ref: branch, tag, sha, HEAD, main~3 or WORKTREE (default: main).")
    command.option("playground_repo", "--playground-repo", help="MuJoCo Playground repository.")
    command.option("playground_ref", "--playground", "--playground-ref", help="Playground git ref (default: main).")
    command.option("family", "--family", help="dm_control | locomotion | manipulation.")
    command.option("env", "--env", help="One registered Playground environment.")
    command.flag("defaults", "--defaults", help="train()/make_ppo_networks() signature defaults only.")
    command.option("fmt", "--format", help="table | json.")
    command.flag("strict", "--strict", help="Exit 1 when a code pattern was not found at a ref (a key is unknown).")
    command.flag("no_cache", "--no-cache", help="Extract again; do not read or write the fact cache.")


def extract_brax(*, brax_repo: str | None = None, brax_ref: str | None = None, playground_repo: str | None = None,
                 playground_ref: str | None = None, family: str | None = None, env: str | None = None,
                 defaults: bool = False, fmt: str = "table", strict: bool = False, no_cache: bool = False) -> None:
    """Brax's effective PPO settings, read from the code at the given refs."""
    from ..extract.cached import brax_extractor
    from ..config import load_settings
    from ..extract.factcache import FactCache, cache_root
    from ..session import head_warnings, open_snapshots
    from .common import FORMATS, fail_strict, print_extractions

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
        print(f"warning: {one_line(line)}", file=sys.stderr)
    missing = sorted({f.message for e in extractions for f in e.findings if f.kind == "pattern_not_found"})
    if strict and missing:
        raise StrictFailure(f"--strict: {len(missing)} code pattern(s) not found; first: {missing[0]}")
    if strict:
        fail_strict(extractions)
