"""`brax-diff extract rsl-rl`: what Playground's RSL-RL runs train with (its rsl_rl_config,
train_rsl_rl.py, the torch wrapper, rsl-rl-lib's code), per family or environment."""

from __future__ import annotations

import sys

from ..errors import BraxDiffError
from ..safety.escape import one_line


def register(app) -> None:
    """Add `extract rsl-rl` to the `extract` group."""
    command = app.command("rsl-rl", extract_rsl_rl)
    command.option("rsl_rl_repo", "--rsl-rl-repo", "--repo", help="rsl_rl repository: path or URL "
                   "(default from config, else leggedrobotics/rsl_rl on GitHub).")
    command.option("rsl_rl_ref", "--rsl-rl", "--rsl-rl-ref", "--ref",
                   help="rsl_rl git ref (default: the release Playground's uv.lock pins at --playground).")
    command.option("playground_repo", "--playground-repo", help="MuJoCo Playground repository.")
    command.option("playground_ref", "--playground", "--playground-ref", help="Playground git ref (default: main).")
    command.option("family", "--family", help="locomotion | manipulation.")
    command.option("env", "--env", help="One registered Playground environment of those families.")
    command.option("fmt", "--format", help="table | json.")
    command.flag("strict", "--strict", help="Exit 1 when a key is unknown at a ref.")


def extract_rsl_rl(*, rsl_rl_repo: str | None = None, rsl_rl_ref: str | None = None,
                   playground_repo: str | None = None, playground_ref: str | None = None, family: str | None = None,
                   env: str | None = None, fmt: str = "table", strict: bool = False) -> None:
    """RSL-RL PPO's effective settings in Playground's RSL-RL runs, read from the code at the given refs."""
    from ..config import load_settings
    from ..session import head_warnings, open_snapshots
    from .common import FORMATS, fail_strict, print_extractions

    if family and env:
        raise BraxDiffError("--family and --env exclude each other")
    if fmt not in FORMATS:
        raise BraxDiffError(f"unknown --format {fmt!r} (choose {' or '.join(FORMATS)})")
    settings = load_settings(rsl_rl_repo=rsl_rl_repo, rsl_rl_ref=rsl_rl_ref, playground_repo=playground_repo,
                             playground_ref=playground_ref)
    snapshots = open_snapshots(settings, ("rsl_rl", "playground"))
    from brax_diff.extractors.rsl_rl import RslRlExtractor

    extractor = RslRlExtractor(snapshots["rsl_rl"], snapshots["playground"])
    if env:
        extractions = [extractor.env(env)]
    elif family:
        extractions = [extractor.family(family)]
    else:
        extractions = [extractor.family(name) for name in extractor.families()]
    for extraction in extractions:
        extraction.sources = {side: snapshots[side].info() for side in extraction.sources}
    print_extractions(extractions, fmt)
    for line in head_warnings(snapshots):
        print(f"warning: {one_line(line)}", file=sys.stderr)
    if strict:
        fail_strict(extractions)
