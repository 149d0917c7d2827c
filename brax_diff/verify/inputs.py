"""The two Extractions a verification compares, per environment.

From the repositories at their refs through the extractors (imported lazily: the verify
stage must not need them to plan from saved JSON), or from Extraction JSON files saved by
``brax-diff extract ... --format json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..config import Settings
from ..errors import BraxDiffError
from ..facts.model import Extraction


def load_extraction(path: str | Path, side: str) -> Extraction:
    """An Extraction saved as JSON; it must be the ``side`` it is given for."""
    from ..safety.io import read_json

    data = read_json(path, f"--{side}-json")  # a regular file within the limits, else one error line
    if isinstance(data, list):
        if len(data) != 1:
            raise BraxDiffError(f"{path}: holds {len(data)} extractions, expected one")
        data = data[0]
    try:
        extraction = Extraction.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise BraxDiffError(f"{path}: not an Extraction ({type(exc).__name__}: {exc})") from None
    if extraction.side != side:
        raise BraxDiffError(f"{path}: is the {extraction.side!r} side, expected {side!r}")
    return extraction


def extractions_from_repos(settings: Settings, envs: list[str], variant: str | None = None,
                           sets: dict[str, str] | None = None, warn: Callable[[str], None] | None = None,
                           ) -> tuple[dict[str, Extraction], dict[str, Extraction]]:
    """``({env: brax Extraction}, {env: slm Extraction})`` read from the configured repos and refs;
    each env is compared with ``variant``, else the SLM-Lab variant mapped to it or its family.
    ``sets`` are SLM-Lab spec variables (``${max_frame}``); one the spec never uses is an error.
    ``warn`` hears one line per side read at HEAD whose files read differ on disk."""
    try:
        from brax_diff.extractors.brax.extractor import BraxExtractor
        from brax_diff.extractors.slm.extractor import SlmExtractor
    except ImportError as exc:
        raise BraxDiffError(f"the extractors are not available in this install ({exc}); "
                            "pass --brax-json and --slm-json instead") from None
    from ..session import open_snapshots

    snapshots = open_snapshots(settings, ("brax", "playground", "slm"))
    brax_extractor = BraxExtractor(snapshots["brax"], snapshots["playground"])
    slm_extractor = SlmExtractor(snapshots["slm"], spec=settings.spec, sets=sets, playground=snapshots["playground"],
                                 mapping=settings_mapping(settings))
    brax: dict[str, Extraction] = {}
    slm: dict[str, Extraction] = {}
    for env in envs:
        brax[env] = brax_extractor.env(env)
        name = variant or slm_extractor.variant_for(family=brax_extractor.family_of(env), env=env)
        slm[env] = slm_extractor.variant(name).with_setup(slm_extractor.setup(name, env))
    if warn is not None:
        from ..session import head_warnings

        for line in head_warnings(snapshots):
            warn(line)
    return brax, slm


def written_variants(settings: Settings, envs: list[str], variant: str | None = None,
                     sets: dict[str, str] | None = None, keys: list[str] | None = None,
                     ) -> dict[str, Extraction]:
    """``{env: the variant `brax-diff fix` writes for env's variant and the fixes of ``keys``
    (None: every fix the spec can express), read back}``: what the spec_fixes arm trains, so
    that it is the same settings as ``verify --slm-variant`` on the variant ``fix`` wrote.
    Nothing is written: the variant is read from the spec text in memory."""
    from brax_diff.extractors.brax.extractor import BraxExtractor
    from brax_diff.extractors.slm.extractor import SlmExtractor

    from ..fix.solver import written_variant
    from ..compare.rules import load_rules
    from ..session import open_snapshots

    snapshots = open_snapshots(settings, ("brax", "playground", "slm"))
    brax_extractor = BraxExtractor(snapshots["brax"], snapshots["playground"])
    slm_snapshot = snapshots["slm"]
    table = load_rules(settings.rules)
    return {env: written_variant(brax_extractor, SlmExtractor, slm_snapshot, spec=settings.spec, sets=sets,
                                 mapping=settings_mapping(settings), env=env, variant=variant, keys=keys, table=table)
            for env in envs}


def settings_mapping(settings: Settings) -> dict | None:
    """The mapping the settings name (the `mapping` setting or a command's --mapping), as every
    other command reads it; None: the shipped one. verify read the shipped one whatever was set."""
    if not getattr(settings, "mapping", None):
        return None
    from brax_diff.extractors.mapping import load_mapping

    return load_mapping(settings.mapping)
