"""What one report covers (:class:`Scope`), and what its report asks the extractors
(:func:`extraction_calls`): apart from :mod:`brax_diff.render`, which loads Jinja, since a
report the caches answer whole renders nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


FORMATS = ("md", "json", "both")  # what `report --format` writes


@dataclass(frozen=True)
class Scope:
    """What one report covers: a family (with its env matrix) or one environment."""

    family: str | None = None
    env: str | None = None

    @property
    def name(self) -> str:
        return self.env or self.family or "report"


def extraction_calls(brax_extractor: Any, slm_extractor: Any, scopes: list[Scope],
                     variant: str | None = None) -> list[tuple[Any, str, tuple]]:
    """(extractor, method, arguments) of every extraction :func:`brax_diff.render.generate` will ask
    for ``scopes``, in its order (the fact cache can then answer or prefetch them all at once:
    :func:`brax_diff.cached.prefetch`). Names are resolved here: environment lists, families,
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
