"""`brax-diff history`: every commit in a range that changes a canonical fact."""

from __future__ import annotations

import sys

from ..errors import BraxDiffError

FORMATS = ("md", "json")


def register(app) -> None:
    """Add `history` to the app."""
    command = app.command("history", history)
    command.option("brax", "--brax", help="Walk Brax: A..B, or B for all history up to B.", metavar="A..B")
    command.option("playground", "--playground", help="Walk MuJoCo Playground: A..B or B.", metavar="A..B")
    command.option("slm", "--slm", help="Walk SLM-Lab: A..B or B.", metavar="A..B")
    command.option("rsl_rl", "--rsl-rl", help="Walk rsl_rl (rsl-rl-lib) with Playground's RSL-RL configs: A..B or B.",
                   metavar="A..B")
    command.option("family", "--family", help="Brax family (dm_control, locomotion, manipulation).")
    command.option("env", "--env", help="One registered environment, e.g. CartpoleBalance.")
    command.option("variant", "--variant", help="One SLM-Lab spec variant.")
    command.option("fmt", "--format", help="md or json.")
    command.option("brax_repo", "--brax-repo", help="Path or URL of google/brax.")
    command.option("playground_repo", "--playground-repo", help="Path or URL of mujoco_playground.")
    command.option("slm_repo", "--slm-repo", help="Path or URL of SLM-Lab (default: .).")
    command.option("rsl_rl_repo", "--rsl-rl-repo", help="Path or URL of leggedrobotics/rsl_rl.")
    command.option("spec", "--spec", help="SLM-Lab spec file inside the SLM-Lab repo.")
    command.option("mapping", "--mapping", help="Variant -> family/env mapping YAML replacing the shipped one.")
    command.option("cache_dir", "--cache-dir", help="Where clones and cached facts live.")
    command.flag("no_cache", "--no-cache", help="Extract every candidate commit again.")
    command.flag("quiet", "--quiet", "-q", help="Print only warnings and errors on stderr.")


def history(*, brax: str | None = None, playground: str | None = None, slm: str | None = None,
            rsl_rl: str | None = None, rsl_rl_repo: str | None = None,
            family: str | None = None, env: str | None = None, variant: str | None = None, fmt: str = "md",
            brax_repo: str | None = None, playground_repo: str | None = None, slm_repo: str | None = None,
            spec: str | None = None, mapping: str | None = None, cache_dir: str | None = None,
            no_cache: bool = False, quiet: bool = False) -> None:
    """List each commit that changes a fact's value (a key changing, appearing or disappearing).

    A side not walked stays at its configured ref (default main / HEAD); a walked side
    given as A..B stays at B while another side is walked.
    """
    if fmt not in FORMATS:
        raise BraxDiffError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    from ..config import load_settings
    from ..extract.factcache import FactCache, cache_root
    from ..history.walk import HistoryRequest, render_json, render_markdown, run_history
    from ..session import TITLES
    from ..sources.repository import Repository, is_url
    from .story import Story
    from .common import user_mapping

    settings = load_settings(brax_repo=brax_repo, playground_repo=playground_repo, slm_repo=slm_repo,
                             spec=spec, mapping=mapping, cache_dir=cache_dir, rsl_rl_repo=rsl_rl_repo)
    ranges = {side: text for side, text in (("brax", brax), ("playground", playground), ("slm", slm),
                                            ("rsl_rl", rsl_rl)) if text}
    request = HistoryRequest(
        ranges=ranges,
        held={"brax": settings.brax_ref, "playground": settings.playground_ref, "slm": settings.slm_ref,
              "rsl_rl": settings.rsl_rl_ref},
        family=family, env=env, variant=variant, spec=settings.spec, mapping=user_mapping(settings.mapping),
    )
    locations = {"brax": settings.brax_repo, "playground": settings.playground_repo, "slm": settings.slm_repo,
                 "rsl_rl": settings.rsl_rl_repo}
    root = cache_root(settings.cache_dir)
    cache = None if no_cache else FactCache(root)
    story = Story.on_stderr(quiet)

    def open_repo(side: str) -> Repository:
        story.step(f"{TITLES[side]}: {'cloning or fetching' if is_url(locations[side]) else 'opening'} "
                   f"{locations[side]}")
        return Repository(locations[side], side, cache_root=root)

    with story.running():
        result, engine = run_history(request, open_repo, cache, story.step)
    sys.stdout.write(render_json(result) if fmt == "json" else render_markdown(result))
    hits = f"; cache {cache.hits} hits, {cache.misses} misses" if cache else ""
    story.say(f"history: {engine.parsed} extractions parsed{hits}")

