"""`brax-diff verify`: short PPO trainings measure how far SLM-Lab's settings are behind
Brax's trainer, and how much of that gap the report's fixes close."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import BraxDiffError


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("verify")(verify)


def verify(
    plan_only: bool = typer.Option(False, "--plan", help="Print the plan, its env steps and estimated time, and stop "
                                   "(needs no torch or jax)."),
    preset: Optional[str] = typer.Option(None, "--preset", help="cpu (a 2-core machine, under 30 min) or gpu; "
                                         "explicit flags override its values."),
    env: Optional[List[str]] = typer.Option(None, "--env", help="MuJoCo Playground environment (repeatable)."),
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Seeds per arm (default 5)."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Env steps per run, rounded up to whole updates "
                                         "of every arm (default 1,000,000)."),
    arms: Optional[str] = typer.Option(None, "--arms", help="Arm groups: gap, loo, variants (default gap,loo)."),
    num_envs: Optional[int] = typer.Option(None, "--num-envs", help="Run every arm with this many envs, each side "
                                           "keeping its minibatch count, epochs and unroll shape."),
    evals: Optional[int] = typer.Option(None, "--evals", help="Evaluation checkpoints after step 0 (default 10)."),
    eval_envs: Optional[int] = typer.Option(None, "--eval-envs", help="Evaluation episodes per checkpoint "
                                            "(default 32)."),
    deterministic: bool = typer.Option(False, "--deterministic", help="Evaluate the policy's mode, not samples "
                                       "(Brax's default is stochastic)."),
    keys: Optional[str] = typer.Option(None, "--keys", help="Only these differing keys are moved: K,K,..."),
    overrides: Optional[List[str]] = typer.Option(None, "--set", help="NAME=VALUE (repeatable): a trainer setting "
                                                  "for every run, or an SLM-Lab spec variable such as max_frame."),
    no_reference: bool = typer.Option(False, "--no-reference", help="Skip the runs of Brax's own trainer."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Rerun runs recorded as failed."),
    jobs: Optional[int] = typer.Option(None, "--jobs", help="Runs at once, each in a process of its own "
                                       "(default 1; the cpu preset: 2, one per core)."),
    engine: str = typer.Option("single", "--engine", help="How the PyTorch runs train: single (one run per seed, "
                               "the default) or batched (an arm's seeds as one model: ~3x the CPU throughput for "
                               "5 seeds; its full-run scores are not yet shown to match single's, docs/verify.md)."),
    executor: str = typer.Option("local", "--executor", help="local (this machine, --jobs processes) or ray "
                                 "(every unit of work a Ray task; pip install 'brax-diff[distributed]')."),
    address: Optional[str] = typer.Option(None, "--address", help="With --executor ray: the cluster's HOST:PORT "
                                          "(what `ray start --head` prints), or auto; default: Ray on this machine."),
    throughput: Optional[Path] = typer.Option(None, "--throughput", help="Measured throughput (TOML from "
                                              "benchmarks/bench_trainers.py) for the time estimate."),
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
    variant: Optional[str] = typer.Option(None, "--variant", "--slm-variant",
                                          help="SLM-Lab spec variant, e.g. one `brax-diff fix` wrote (default: the "
                                          "mapped one)."),
    all_fixes: Optional[str] = typer.Option(None, "--all-fixes", help="What the all_fixes arm trains: spec (the "
                                            "variant `brax-diff fix` writes for the same --keys; the default with a "
                                            "repository) or settings (every difference the trainer can express "
                                            "moved to Brax's value; the only choice with --slm-json)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Plan and run baseline / all_fixes / leave-one-out / reference trainings: the gap to Brax's
    trainer, the fraction the fixes close, and a verdict per fix."""
    from ..config import load_settings
    from ..verify import build_plan, run_plan, training_stack_missing
    from ..verify.costs import estimate, load_throughput
    from ..verify.inputs import extractions_from_repos, load_extraction, written_variants
    from ..verify.plan import PRESETS, check_executor, resolve_options
    from ..verify.settings import split_sets
    from .common import print_json

    if fmt not in ("text", "json"):
        raise BraxDiffError(f"--format must be text or json, got {fmt!r}")
    check_executor(executor, address)
    trainer_overrides, spec_sets = split_sets(overrides)
    options = resolve_options(preset, seeds=seeds, budget=budget, arms=arms, num_envs=num_envs, evals=evals,
                              eval_envs=eval_envs, jobs=jobs, overrides=trainer_overrides)
    jobs = options.pop("jobs")
    envs = list(env or ["CartpoleBalance"])
    if (brax_json is None) != (slm_json is None):
        raise BraxDiffError("--brax-json and --slm-json go together")
    if all_fixes not in (None, "spec", "settings"):
        raise BraxDiffError(f"--all-fixes must be spec or settings, got {all_fixes!r}")
    if all_fixes == "spec" and brax_json is not None:
        raise BraxDiffError("--all-fixes spec writes the variant into the SLM-Lab spec: it needs the repository, "
                            "not --slm-json (use --all-fixes settings)")
    all_fixes = all_fixes or ("settings" if brax_json is not None else "spec")
    key_list = [k.strip() for k in keys.split(",") if k.strip()] if keys else None
    fixed = None
    if brax_json is not None:
        if spec_sets:
            raise BraxDiffError(f"--set {', '.join(spec_sets)}: spec variables need the SLM-Lab repository, "
                                "not --slm-json")
        brax, slm = load_extraction(brax_json, "brax"), load_extraction(slm_json, "slm")
    else:
        settings = load_settings(brax_repo=brax_repo, brax_ref=brax_ref, playground_repo=playground_repo,
                                 playground_ref=playground_ref, slm_repo=slm_repo, slm_ref=slm_ref, spec=spec)
        brax, slm = extractions_from_repos(settings, envs, variant=variant, sets=spec_sets)
        if all_fixes == "spec":
            fixed = written_variants(settings, envs, variant=variant, sets=spec_sets, keys=key_list)
    plan = build_plan(brax, slm, envs=envs, keys=None if fixed is not None else key_list, fixed=fixed,
                      reference=not no_reference, deterministic=deterministic, engine=engine, **options)
    plan.spec_sets = dict(spec_sets)
    cost = estimate(plan, load_throughput(throughput), jobs)
    if plan_only:
        if fmt == "json":
            print_json(dict(plan.to_json(), estimate=cost.to_json(), presets=PRESETS))
        else:
            typer.echo(plan.render(cost), nl=False)
        return
    missing = training_stack_missing()
    if missing:
        raise BraxDiffError(f"training needs the verify extra ({missing} is not installed): "
                            "pip install 'brax-diff[verify]'; --plan works without it")
    from ..verify.runner import render

    if not quiet:
        typer.echo(cost.render(), err=True)
        for warning in plan.warnings:
            typer.echo(f"warning: {warning}", err=True)
    result = run_plan(plan, cache or Path(".brax-diff-cache/verify"), progress=not quiet, output_dir=output,
                      retry_failed=retry_failed, jobs=jobs, executor=executor, address=address)
    if fmt == "json":
        print_json(result.to_json())
    else:
        typer.echo(render(result), nl=False)
        typer.echo(f"results: {output / 'verify.json'}")
