"""`report --verify`: the scope's environment trained with the preset this machine can run, the
spec_fixes arm being the variant `brax-diff fix` writes."""

from __future__ import annotations

import sys
from pathlib import Path

from ..config import Settings
from ..errors import BraxDiffError
from ..facts.scope import Scope


# The environment `report --verify` trains on when the scope is a family.
VERIFY_ENV_FOR_FAMILY = {"dm_control": "CartpoleBalance"}


def verify_scope(brax_extractor, slm_extractor, scope: Scope, variant: str | None, settings: Settings,
                 output_dir: Path, set_values: dict) -> dict:
    """`brax-diff verify` on the scope's environment with the preset this machine can run (gpu
    or cpu), spec_fixes being the variant `brax-diff fix` writes beside the trainer-level
    all_fixes (verify's default); the result's JSON."""

    from . import build_plan, run_plan, training_stack_missing
    from .plan import resolve_options

    env = scope.env or VERIFY_ENV_FOR_FAMILY.get(scope.family or "")
    if env is None:
        raise BraxDiffError(f"--verify on family {scope.family} needs --env (only DM Control environments "
                            "load offline)")
    missing = training_stack_missing()
    if missing:
        raise BraxDiffError(f"--verify needs the verify extra ({missing} is not installed): "
                            "pip install 'brax-diff[verify]'")
    family = brax_extractor.family_of(env)
    slm = slm_extractor.variant(variant or slm_extractor.variant_for(family=family, env=env))
    from .costs import estimate, load_throughput

    from .worker import pick_device

    options = resolve_options("gpu" if pick_device() == "cuda" else "cpu")  # the preset the machine can run
    jobs = options.pop("jobs")
    from brax_diff.extractors.slm.extractor import SlmExtractor

    from ..fix.solver import written_variant
    from ..compare.rules import load_rules

    fixed = written_variant(brax_extractor, SlmExtractor, slm_extractor.snapshot, spec=settings.spec,
                            sets=set_values, mapping=slm_extractor.mapping, env=env, variant=variant, keys=None,
                            table=load_rules(settings.rules))
    plan = build_plan({env: brax_extractor.env(env)}, {env: slm}, envs=[env], fixed={env: fixed}, **options)
    print(estimate(plan, load_throughput()).render(), file=sys.stderr)
    from ..extract.factcache import cache_root

    # Beside the fact cache, never in the directory run in: a checkout could ship a run cache
    # of doctored results there.
    cache = cache_root(settings.cache_dir) / "verify"
    return run_plan(plan, cache, output_dir=output_dir, jobs=jobs).to_json()
