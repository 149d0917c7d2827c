"""`brax-diff extract slm`: an SLM-Lab spec variant's effective PPO settings at a git ref."""

from __future__ import annotations

import sys

from ..errors import BraxDiffError
from ..safety.escape import one_line


def register(app) -> None:
    """Add this module's commands to the `extract` group."""
    command = app.command("slm", extract_slm)
    command.option("slm_repo", "--slm-repo", "--repo", help="SLM-Lab checkout, bare clone or URL "
                   "(default: setting slm-repo, else this checkout when it is SLM-Lab's, "
                   "else kengz/SLM-Lab on GitHub).")
    command.option("slm_ref", "--slm", "--slm-ref", "--ref",
                   help="Branch, tag, commit or WORKTREE (default: setting slm-ref, else HEAD "
                   "in an SLM-Lab checkout, master from GitHub).")
    command.option("spec", "--spec", help="Spec file in the repository, YAML or JSON (default: setting spec).")
    command.option("variant", "--variant", help="Spec variant (default: the file's first; with --env, the one the "
                   "mapping gives it).")
    command.option("env", "--env", help="A Playground environment: the variant with the training setup its env "
                   "builder makes for playground/NAME (episode length, action repeat, observation keys, backend, the env's "
                   "action clip and reward floor); --set env=playground/NAME does the same.")
    command.option("playground_repo", "--playground-repo", help="With --env: Playground repository: path or URL "
                   "(default: setting playground-repo, else google-deepmind/mujoco_playground).")
    command.option("playground_ref", "--playground", "--playground-ref", help="With --env: Playground ref "
                   "(default: main).")
    command.flag("all_variants", "--all-variants", help="Extract every variant in the file.")
    command.option("sets", "--set", repeat=True, help="KEY=VALUE for a ${KEY} placeholder, "
                   "like SLM-Lab's -s (repeatable).")
    command.option("mapping", "--mapping", help="Variant -> family/env mapping YAML replacing the shipped one.")
    command.option("fmt", "--format", help="table or json.")
    command.flag("strict", "--strict", help="Exit 1 when any ERROR finding is reported or any key is unknown.")


def extract_slm(*, slm_repo: str | None = None, slm_ref: str | None = None, spec: str | None = None,
                variant: str | None = None, all_variants: bool = False, sets: list[str] | None = None,
                mapping: str | None = None, fmt: str = "table", strict: bool = False, env: str | None = None,
                playground_repo: str | None = None, playground_ref: str | None = None) -> None:
    """Resolve a spec variant as SLM-Lab does and map it onto the canonical keys."""
    from brax_diff.extractors.slm.extractor import SlmExtractor, load_mapping, trains  # library import kept out of CLI start-up

    from ..config import load_settings
    from ..session import head_warnings, open_snapshots
    from .common import FORMATS, fail_strict, parse_sets, print_extractions, print_verdicts

    if fmt not in FORMATS:
        raise BraxDiffError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if variant and all_variants:
        raise BraxDiffError("give either --variant or --all-variants, not both")
    if env and all_variants:
        raise BraxDiffError("--env extracts one variant for one environment; drop --all-variants")
    placed = parse_sets(sets).get("env", "")
    if env is None and not all_variants and placed.startswith("playground/"):
        env = placed.removeprefix("playground/")  # SLM-Lab's `-s env=playground/NAME` builds that env: its setup too
    if (playground_repo or playground_ref) and not env:
        raise BraxDiffError("--playground and --playground-repo give the env builder's Playground; add --env")
    settings = load_settings(slm_repo=slm_repo, slm_ref=slm_ref, spec=spec, mapping=mapping,
                             playground_repo=playground_repo, playground_ref=playground_ref)
    snapshots = open_snapshots(settings, ("slm", "playground") if env else ("slm",))
    snapshot = snapshots["slm"]
    extractor = SlmExtractor(snapshot, settings.spec, parse_sets(sets), load_mapping(settings.mapping),
                             playground=snapshots.get("playground"))
    names = extractor.variants()
    if not names:
        raise BraxDiffError(f"{settings.spec} at {settings.slm_ref} defines no variants")
    if env:
        name = variant or extractor.variant_for(env=env)
        if name not in names:
            raise BraxDiffError(f"{settings.spec} at {settings.slm_ref} has no variant {name!r}")
        extractions = [extractor.variant(name).with_setup(extractor.setup(name, env))]
    else:
        chosen = names if all_variants else [variant or names[0]]
        extractions = [extractor.variant(name) for name in chosen]
    for extraction in extractions:  # name the work-tree files read, now that all were read
        extraction.sources = {"slm": snapshot.info(),
                              **({"playground": snapshots["playground"].info()} if env else {})}
    print_extractions(extractions, fmt)
    if fmt == "table":
        print_verdicts([(e.scope["variant"], *trains(e)) for e in extractions], snapshot.ref)
    for line in head_warnings(snapshots):
        print(f"warning: {one_line(line)}", file=sys.stderr)
    if strict:
        fail_strict(extractions, errors=True)

