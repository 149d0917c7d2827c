"""`brax-diff extract slm`: an SLM-Lab spec variant's effective PPO settings at a git ref."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ..config import load_settings
from ..errors import BraxDiffError
from ..session import head_warnings, open_snapshots
from .common import FORMATS, fail_strict, parse_sets, print_extractions, print_verdicts


def extract_slm(
    slm_repo: Optional[str] = typer.Option(None, "--slm-repo", "--repo", help="SLM-Lab checkout, bare clone or URL "
                                       "(default: setting slm-repo, else this checkout when it is SLM-Lab's, "
                                       "else kengz/SLM-Lab on GitHub)."),
    slm_ref: Optional[str] = typer.Option(None, "--slm", "--slm-ref", "--ref",
                                      help="Branch, tag, commit or WORKTREE (default: setting slm-ref, else HEAD "
                                      "in an SLM-Lab checkout, master from GitHub)."),
    spec: Optional[str] = typer.Option(None, "--spec", help="Spec file in the repository, YAML or JSON "
                                       "(default: setting spec)."),
    variant: Optional[str] = typer.Option(None, "--variant", help="Spec variant (default: the file's first)."),
    all_variants: bool = typer.Option(False, "--all-variants", help="Extract every variant in the file."),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="KEY=VALUE for a ${KEY} placeholder, "
                                             "like SLM-Lab's -s (repeatable)."),
    mapping: Optional[str] = typer.Option(None, "--mapping", help="Variant -> family/env mapping YAML "
                                          "replacing the shipped one."),
    fmt: str = typer.Option("table", "--format", help="table or json."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any ERROR finding is reported or any "
                                "key is unknown."),
) -> None:
    """Resolve a spec variant as SLM-Lab does and map it onto the canonical keys."""
    from extractors.slm import SlmExtractor, load_mapping, trains  # library import kept out of CLI start-up

    if fmt not in FORMATS:
        raise BraxDiffError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if variant and all_variants:
        raise BraxDiffError("give either --variant or --all-variants, not both")
    settings = load_settings(slm_repo=slm_repo, slm_ref=slm_ref, spec=spec, mapping=mapping)
    snapshots = open_snapshots(settings, ("slm",))
    snapshot = snapshots["slm"]
    extractor = SlmExtractor(snapshot, settings.spec, parse_sets(sets), load_mapping(settings.mapping))
    names = extractor.variants()
    if not names:
        raise BraxDiffError(f"{settings.spec} at {settings.slm_ref} defines no variants")
    chosen = names if all_variants else [variant or names[0]]
    extractions = [extractor.variant(name) for name in chosen]
    for extraction in extractions:  # name the work-tree files read, now that all were read
        extraction.sources = {"slm": snapshot.info()}
    print_extractions(extractions, fmt)
    if fmt == "table":
        print_verdicts([(e.scope["variant"], *trains(e)) for e in extractions], snapshot.ref)
    for line in head_warnings(snapshots):
        print(f"warning: {line}", file=sys.stderr)
    if strict:
        fail_strict(extractions, errors=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `extract` group."""
    app.command("slm")(extract_slm)
