"""What one report covers (:class:`Scope`), and what its report asks the extractors
(:func:`extraction_calls`): apart from :mod:`brax_diff.report.render`, which loads Jinja, since a
report the caches answer whole renders nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import BraxDiffError


FORMATS = ("md", "json", "both")  # what `report --format` writes
# Where Brax's values come from (`report --brax-reference`): Playground's tuned configs (its
# *_params.py) over train()'s defaults; what Playground's learning/train_jax_ppo.py trains with at
# its flag defaults; train()'s signature defaults alone; Brax's own brax/training/learner.py flag
# defaults over them.
BRAX_REFERENCES = ("params", "train-script", "train-defaults", "learner")
# The side Brax is compared with (`report --against`): SLM-Lab, or RSL-RL as Playground runs it.
AGAINST_CHOICES = ("slm", "rsl-rl")
RSL_RL = "rsl_rl"
# Playground's families (one config module each: extractors/playground/params.py FAMILY_PATHS), here
# where a warm run can read them without importing the extractors.
PLAYGROUND_FAMILIES = ("dm_control", "locomotion", "manipulation")
RSL_RL_FAMILIES = ("locomotion", "manipulation")  # the Playground families with an rsl_rl_config
# What a report names the other side by, and what it reads of it (None: SLM-Lab, as before).
AGAINST = {RSL_RL: {"side": RSL_RL, "title": "RSL-RL",
                    "reads": "Playground's `rsl_rl_config(env_name)` (`mujoco_playground/config/*_params.py`), "
                             "`learning/train_rsl_rl.py` at its flag defaults and the torch wrapper "
                             "(`_src/wrapper_torch.py`), on rsl-rl-lib's own code"}}
_FILE_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a variant name that is safe in a file name


@dataclass(frozen=True)
class Scope:
    """What one report covers: a family (with its env matrix) or one environment."""

    family: str | None = None
    env: str | None = None

    @property
    def name(self) -> str:
        return self.env or self.family or "report"

    def file_name(self, variant: str | None = None) -> str:
        """The name of the scope's report files, without ``.md``/``.json``: the scope's name,
        then ``.VARIANT`` for a report compared with a variant asked for (``--variant``), so
        that it never replaces the report with the mapped variants (``dm_control.md`` stays the
        default run's, ``dm_control.ppo_fx.md`` is the variant's)."""
        if variant is None:
            return self.name
        if not _FILE_PART.fullmatch(variant):
            raise BraxDiffError(f"--variant {variant!r} cannot name a report file (letters, digits, _ . - only); "
                                "give --output FILE.md")
        return f"{self.name}.{variant}"


def extraction_calls(brax_extractor: Any, slm_extractor: Any, scopes: list[Scope],
                     variant: str | None = None) -> list[tuple[Any, str, tuple]]:
    """(extractor, method, arguments) of every extraction :func:`brax_diff.report.render.generate` will ask
    for ``scopes``, in its order (the fact cache can then answer or prefetch them all at once:
    :func:`brax_diff.extract.cached.prefetch`). Names are resolved here: environment lists, families,
    the variant each scope and environment maps to."""
    brax_calls: list[tuple[Any, str, tuple]] = []
    variants: list[str] = []
    setups: list[tuple] = []  # (variant, env): the setup SLM-Lab runs each environment with
    for scope in scopes:
        if scope.env is not None:
            brax_calls.append((brax_extractor, "env", (scope.env,)))
            family = brax_extractor.family_of(scope.env)
            variants.append(variant or slm_extractor.variant_for(family=family, env=scope.env))
            setups.append((variants[-1], scope.env))
            continue
        brax_calls.append((brax_extractor, "family", (scope.family,)))
        for env in brax_extractor.environments(scope.family):
            brax_calls.append((brax_extractor, "env", (env,)))
            variants.append(variant or slm_extractor.variant_for(family=scope.family, env=env))
            setups.append((variants[-1], env))
        variants.append(variant or slm_extractor.variant_for(family=scope.family))
    return (brax_calls + [(slm_extractor, "variant", (name,)) for name in dict.fromkeys(variants)]
            + [(slm_extractor, "setup", pair) for pair in dict.fromkeys(setups)])
