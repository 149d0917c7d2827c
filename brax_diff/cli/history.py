"""`brax-diff history`: every commit in a range that changes a canonical fact."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from ..config import load_settings
from ..errors import BraxDiffError
from .common import user_mapping

FORMATS = ("md", "json")


def history(
    brax: Optional[str] = typer.Option(None, "--brax", help="Walk Brax: A..B, or B for all history up to B."),
    playground: Optional[str] = typer.Option(None, "--playground", help="Walk MuJoCo Playground: A..B or B."),
    slm: Optional[str] = typer.Option(None, "--slm", help="Walk SLM-Lab: A..B or B."),
    family: Optional[str] = typer.Option(None, "--family", help="Brax family (dm_control, locomotion, manipulation)."),
    env: Optional[str] = typer.Option(None, "--env", help="One registered environment, e.g. CartpoleBalance."),
    variant: Optional[str] = typer.Option(None, "--variant", help="One SLM-Lab spec variant."),
    fmt: str = typer.Option("md", "--format", help="md or json."),
    brax_repo: Optional[str] = typer.Option(None, "--brax-repo", help="Path or URL of google/brax."),
    playground_repo: Optional[str] = typer.Option(None, "--playground-repo", help="Path or URL of mujoco_playground."),
    slm_repo: Optional[str] = typer.Option(None, "--slm-repo", help="Path or URL of SLM-Lab (default: .)."),
    spec: Optional[str] = typer.Option(None, "--spec", help="SLM-Lab spec file inside the SLM-Lab repo."),
    mapping: Optional[str] = typer.Option(None, "--mapping", help="Variant -> family/env mapping YAML "
                                          "replacing the shipped one."),
    cache_dir: Optional[str] = typer.Option(None, "--cache-dir", help="Where clones and cached facts live."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Extract every candidate commit again."),
) -> None:
    """List each commit that changes a fact's value (a key changing, appearing or disappearing).

    A side not walked stays at its configured ref (default main / HEAD); a walked side
    given as A..B stays at B while another side is walked.
    """
    if fmt not in FORMATS:
        raise BraxDiffError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    from ..factcache import FactCache, cache_root
    from ..history import HistoryRequest, render_json, render_markdown, run_history
    from ..sources import Repository

    settings = load_settings(brax_repo=brax_repo, playground_repo=playground_repo, slm_repo=slm_repo,
                             spec=spec, mapping=mapping, cache_dir=cache_dir)
    ranges = {side: text for side, text in (("brax", brax), ("playground", playground), ("slm", slm)) if text}
    request = HistoryRequest(
        ranges=ranges,
        held={"brax": settings.brax_ref, "playground": settings.playground_ref, "slm": settings.slm_ref},
        family=family, env=env, variant=variant, spec=settings.spec, mapping=user_mapping(settings.mapping),
    )
    locations = {"brax": settings.brax_repo, "playground": settings.playground_repo, "slm": settings.slm_repo}
    root = cache_root(settings.cache_dir)
    cache = None if no_cache else FactCache(root)
    result, engine = run_history(request, lambda side: Repository(locations[side], side, cache_root=root), cache)
    sys.stdout.write(render_json(result) if fmt == "json" else render_markdown(result))
    hits = f"; cache {cache.hits} hits, {cache.misses} misses" if cache else ""
    print(f"history: {engine.parsed} extractions parsed{hits}", file=sys.stderr)


def register(app: typer.Typer) -> None:
    """Add `history` to the app."""
    app.command("history")(history)
