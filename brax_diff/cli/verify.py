"""`brax-diff verify`: short PPO trainings measure whether each difference matters."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import BraxDiffError


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("verify")(verify)


def verify(
    plan_only: bool = typer.Option(False, "--plan", help="Print the plan and stop (needs no torch or jax)."),
    env: Optional[List[str]] = typer.Option(None, "--env", help="MuJoCo Playground environment (repeatable)."),
    seeds: int = typer.Option(5, "--seeds", help="Seeds per arm."),
    budget: int = typer.Option(1_000_000, "--budget", help="Env steps per run."),
    keys: Optional[str] = typer.Option(None, "--keys", help="Only these differing keys get variants: K,K,..."),
    overrides: Optional[List[str]] = typer.Option(None, "--set",
                                                  help="Trainer setting for every run, FIELD=VALUE (repeatable)."),
    no_reference: bool = typer.Option(False, "--no-reference", help="Skip the run of Brax's own trainer."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Rerun runs recorded as failed."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Run cache (default .brax-diff-cache/verify)."),
    output: Path = typer.Option(Path("reports/verify"), "--output", help="verify.json and plots/ go here."),
    fmt: str = typer.Option("text", "--format", help="text or json."),
    brax_json: Optional[Path] = typer.Option(None, "--brax-json", help="A saved brax Extraction instead of the repo."),
    slm_json: Optional[Path] = typer.Option(None, "--slm-json", help="A saved slm Extraction instead of the repo."),
    brax_repo: Optional[str] = typer.Option(None, "--brax-repo", help="Path or URL of google/brax."),
    brax_ref: Optional[str] = typer.Option(None, "--brax", "--brax-ref", help="Brax ref (default: main)."),
    playground_repo: Optional[str] = typer.Option(None, "--playground-repo",
                                                  help="Path or URL of google-deepmind/mujoco_playground."),
    playground_ref: Optional[str] = typer.Option(None, "--playground", "--playground-ref",
                                                 help="MuJoCo Playground ref (default: main)."),
    slm_repo: Optional[str] = typer.Option(None, "--slm-repo", help="Path or URL of SLM-Lab."),
    slm_ref: Optional[str] = typer.Option(None, "--slm", "--slm-ref", help="SLM-Lab ref (default: HEAD)."),
    spec: Optional[str] = typer.Option(None, "--spec", help="SLM-Lab spec file."),
    variant: Optional[str] = typer.Option(None, "--variant", help="SLM-Lab spec variant (default: the mapped one)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Plan and run baseline / variant / reference trainings; a verdict per difference."""
    from ..config import load_settings
    from ..verify import build_plan, run_plan, training_stack_missing
    from ..verify.inputs import extractions_from_repos, load_extraction
    from ..verify.settings import parse_overrides
    from .common import print_json

    if fmt not in ("text", "json"):
        raise BraxDiffError(f"--format must be text or json, got {fmt!r}")
    envs = list(env or ["CartpoleBalance"])
    if (brax_json is None) != (slm_json is None):
        raise BraxDiffError("--brax-json and --slm-json go together")
    if brax_json is not None:
        brax, slm = load_extraction(brax_json, "brax"), load_extraction(slm_json, "slm")
    else:
        settings = load_settings(brax_repo=brax_repo, brax_ref=brax_ref, playground_repo=playground_repo,
                                 playground_ref=playground_ref, slm_repo=slm_repo, slm_ref=slm_ref, spec=spec)
        brax, slm = extractions_from_repos(settings, envs, variant=variant)
    key_list = [k.strip() for k in keys.split(",") if k.strip()] if keys else None
    plan = build_plan(brax, slm, envs=envs, seeds=seeds, budget=budget, keys=key_list,
                      overrides=parse_overrides(overrides), reference=not no_reference)
    if plan_only:
        if fmt == "json":
            print_json(plan.to_json())
        else:
            typer.echo(plan.render(), nl=False)
        return
    missing = training_stack_missing()
    if missing:
        raise BraxDiffError(f"training needs the verify extra ({missing} is not installed): "
                            "pip install 'brax-diff[verify]'; --plan works without it")
    from ..verify.runner import render

    result = run_plan(plan, cache or Path(".brax-diff-cache/verify"), progress=not quiet, output_dir=output,
                      retry_failed=retry_failed)
    if fmt == "json":
        print_json(result.to_json())
    else:
        typer.echo(render(result), nl=False)
        typer.echo(f"results: {output / 'verify.json'}")
