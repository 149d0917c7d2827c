"""`brax-diff verify`: short PPO trainings measure how far SLM-Lab's settings are behind
Brax's trainer, and how much of that gap the report's fixes close."""

from __future__ import annotations

import sys

from ..errors import BraxDiffError
from ..safety.escape import one_line
from .parser import integer, path as path_type

TYPE_CHECKING = False  # typing is not imported for this
if TYPE_CHECKING:
    from pathlib import Path


def register(app) -> None:
    """Add this module's commands to the app."""
    command = app.command("verify", verify)
    command.flag("plan_only", "--plan", help="Print the plan, its env steps and estimated time, and stop "
                 "(needs no torch or jax).")
    command.option("preset", "--preset", help="cpu (a 2-core machine: ~9 min at the seed-era refs, "
                   "--plan says what at yours) or gpu; "
                   "explicit flags override its values.")
    command.option("env", "--env", repeat=True, help="MuJoCo Playground environment (repeatable).")
    command.option("seeds", "--seeds", type=integer, help="Seeds per arm (default 5).")
    command.option("first_seed", "--first-seed", type=integer, help="The first seed (default 0): --first-seed 10 "
                   "--seeds 10 replicates a finding of seeds 0-9 on fresh seeds.")
    command.option("budget", "--budget", type=integer, help="Env steps per run, rounded up to whole updates "
                   "of every arm (default 1,000,000).")
    command.option("arms", "--arms", help="Arm groups: gap, loo, variants, stand_in (default gap,loo).")
    command.option("num_envs", "--num-envs", type=integer, help="Run every arm with this many envs, each side "
                   "keeping its minibatch count, epochs and unroll shape.")
    command.option("evals", "--evals", type=integer, help="Evaluation checkpoints after step 0 (default 10).")
    command.option("eval_envs", "--eval-envs", type=integer, help="Evaluation episodes per checkpoint "
                   "(default 32).")
    command.flag("deterministic", "--deterministic", help="Evaluate the policy's mode, not samples "
                 "(Brax's default is stochastic).")
    command.option("keys", "--keys", help="Only these differing keys are moved: K,K,...")
    command.option("overrides", "--set", repeat=True, metavar="NAME=VALUE", help="NAME=VALUE (repeatable): a trainer setting "
                   "for every run, or an SLM-Lab spec variable such as max_frame.")
    command.flag("no_reference", "--no-reference", help="Skip the runs of Brax's own trainer.")
    command.flag("retry_failed", "--retry-failed", help="Rerun runs recorded as failed.")
    command.option("jobs", "--jobs", type=integer, help="Runs at once, each in a process of its own "
                   "(default 1; the cpu preset: 2, one per core).")
    command.option("engine", "--engine", help="How the PyTorch runs train: single (one run per seed, "
                   "the default) or batched (an arm's seeds as one model: ~3x the CPU throughput for "
                   "5 seeds; its full-run scores are not yet shown to match single's, docs/verify.md).")
    command.option("executor", "--executor", help="local (this machine, --jobs processes) or ray "
                   "(every unit of work a Ray task; pip install 'brax-diff[distributed]').")
    command.option("address", "--address", help="With --executor ray: the cluster's HOST:PORT "
                   "(what `ray start --head` prints), or auto; default: Ray on this machine.")
    command.option("throughput", "--throughput", type=path_type, help="Measured throughput (TOML from "
                   "benchmarks/bench_trainers.py) for the time estimate.")
    command.option("cache", "--cache", type=path_type,
                   help="Run cache (default verify/ in $BRAX_DIFF_CACHE_DIR, else ~/.cache/brax-diff).")
    command.option("output", "--output", type=path_type, metavar="DIR", help="verify.json and plots/ go here.")
    command.option("fmt", "--format", help="text or json.")
    command.option("brax_json", "--brax-json", type=path_type, help="A saved brax Extraction instead of the repo.")
    command.option("slm_json", "--slm-json", type=path_type, help="A saved slm Extraction instead of the repo.")
    command.option("brax_repo", "--brax-repo", help="Path or URL of google/brax.")
    command.option("brax_ref", "--brax", "--brax-ref", help="Brax ref (default: main).")
    command.option("playground_repo", "--playground-repo", help="Path or URL of google-deepmind/mujoco_playground.")
    command.option("playground_ref", "--playground", "--playground-ref", help="MuJoCo Playground ref (default: main).")
    command.option("slm_repo", "--slm-repo", help="Path or URL of SLM-Lab.")
    command.option("slm_ref", "--slm", "--slm-ref", help="SLM-Lab ref (default: HEAD).")
    command.option("spec", "--spec", help="SLM-Lab spec file.")
    command.option("variant", "--variant", "--slm-variant", help="SLM-Lab spec variant, e.g. one `brax-diff fix` "
                   "wrote (default: the mapped one).")
    command.option("all_fixes", "--all-fixes", help="Which fix arms to plan beside all_fixes (trainer-level, "
                   "code changes included: every difference the trainer can express moved to Brax's "
                   "value): spec (also spec_fixes, the variant `brax-diff fix` writes for the same --keys, "
                   "trained as SLM-Lab runs it; the default with a repository) or settings (all_fixes "
                   "only; the only choice with --slm-json).")
    command.flag("quiet", "--quiet", help="No progress bar.")


def verify(*, plan_only: bool = False, preset: str | None = None, env: list[str] | None = None,
           seeds: int | None = None, first_seed: int | None = None, budget: int | None = None,
           arms: str | None = None,
           num_envs: int | None = None, evals: int | None = None, eval_envs: int | None = None,
           deterministic: bool = False, keys: str | None = None, overrides: list[str] | None = None,
           no_reference: bool = False, retry_failed: bool = False, jobs: int | None = None,
           engine: str = "single", executor: str = "local", address: str | None = None,
           throughput: Path | None = None, cache: Path | None = None, output: Path | str = "reports/verify",
           fmt: str = "text", brax_json: Path | None = None, slm_json: Path | None = None,
           brax_repo: str | None = None, brax_ref: str | None = None, playground_repo: str | None = None,
           playground_ref: str | None = None, slm_repo: str | None = None, slm_ref: str | None = None,
           spec: str | None = None, variant: str | None = None, all_fixes: str | None = None,
           quiet: bool = False) -> None:
    """Plan and run baseline / all_fixes / spec_fixes / leave-one-out / reference trainings: the gap to Brax's
    trainer, the fraction the fixes close, and a verdict per fix."""
    from pathlib import Path

    from ..config import load_settings
    from ..verify import build_plan, run_plan, training_stack_missing
    from ..verify.costs import estimate, load_throughput
    from ..verify.inputs import extractions_from_repos, load_extraction, written_variants
    from ..verify.plan import PRESETS, check_executor, resolve_options
    from ..verify.settings import split_sets
    from .common import print_json

    output = Path(output)
    if fmt not in ("text", "json"):
        raise BraxDiffError(f"--format must be text or json, got {fmt!r}")
    check_executor(executor, address)
    trainer_overrides, spec_sets = split_sets(overrides)
    options = resolve_options(preset, seeds=seeds, first_seed=first_seed, budget=budget, arms=arms, num_envs=num_envs, evals=evals,
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
        brax, slm = extractions_from_repos(settings, envs, variant=variant, sets=spec_sets,
                                           warn=lambda line: _echo(f"warning: {one_line(line)}", err=True))
        if all_fixes == "spec":
            fixed = written_variants(settings, envs, variant=variant, sets=spec_sets, keys=key_list)
    plan = build_plan(brax, slm, envs=envs, keys=None if fixed is not None else key_list, fixed=fixed,
                      reference=not no_reference, deterministic=deterministic, engine=engine, **options)
    plan.spec_sets = dict(spec_sets)
    measured = load_throughput(throughput)  # a bad file is one error line before any warning
    if plan.with_reference:
        from ..verify.trainer_files import compare, installed_trainer, notice, ref_trainer

        ref = None
        if brax_json is None:
            from ..session import open_snapshots

            ref = ref_trainer(open_snapshots(settings, ("brax",))["brax"])
        plan.reference_trainer = compare(installed_trainer(), ref)
        line = notice(plan.reference_trainer)
        if line:
            _echo(f"warning: {one_line(line)}", err=True)
    cost = estimate(plan, measured, jobs, device="gpu" if preset == "gpu" else None)
    if plan_only:
        if fmt == "json":
            print_json(dict(plan.to_json(), estimate=cost.to_json(), presets=PRESETS, power=plan.power()))
        else:
            _echo(plan.render(cost, plan.power()), nl=False)
        return
    missing = training_stack_missing()
    if missing:
        raise BraxDiffError(f"training needs the verify extra ({missing} is not installed): "
                            "pip install 'brax-diff[verify]'; --plan works without it")
    from ..verify.runner import render

    if not quiet:
        _echo(cost.render(), err=True)
        for warning in plan.warnings:
            _echo(f"warning: {one_line(warning)}", err=True)
    result = run_plan(plan, cache or default_run_cache(), progress=not quiet, output_dir=output,
                      retry_failed=retry_failed, jobs=jobs, executor=executor, address=address)
    if fmt == "json":
        print_json(result.to_json())
    else:
        _echo(render(result), nl=False)
        _echo(f"results: {output / 'verify.json'}")


def default_run_cache() -> Path:
    """The run cache without --cache: beside the fact cache. Not ``.brax-diff-cache/`` in the
    directory run in: a checkout that ships one would have its doctored results read back as
    trainings."""
    from ..extract.factcache import cache_root

    return cache_root() / "verify"


def _echo(text: str, err: bool = False, nl: bool = True) -> None:
    """One piece of output, flushed at once (as click.echo did), so stdout and stderr keep their order."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + ("\n" if nl else ""))
    stream.flush()
