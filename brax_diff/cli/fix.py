"""`brax-diff fix`: write the SLM-Lab spec variant that applies the report's fixes, read it
back, and print what still differs. Parses flags, calls :mod:`brax_diff.fix.solver`, writes, prints.

Exit codes: 0 done; 2 bad input (one ``error: ...`` line; the spec file untouched).
"""

from __future__ import annotations

import contextlib
import sys

from .parser import integer, path as path_type

TYPE_CHECKING = False  # typing is not imported for this
if TYPE_CHECKING:
    from pathlib import Path

FORMATS = ("md", "json")


def register(app) -> None:
    command = app.command("fix", fix_command)
    command.option("brax", "--brax", "--brax-ref", help="Brax ref, or WORKTREE (default: main).")
    command.option("playground", "--playground", "--playground-ref",
                   help="MuJoCo Playground ref or WORKTREE (default: main).")
    command.option("slm", "--slm", "--slm-ref", help="SLM-Lab ref or WORKTREE (default: HEAD; "
                   "WORKTREE with --in-place).")
    command.option("brax_repo", "--brax-repo", help="Brax repository: path or URL.")
    command.option("playground_repo", "--playground-repo", help="Playground repository: path or URL.")
    command.option("slm_repo", "--slm-repo", help="SLM-Lab repository: path or URL.")
    command.option("spec", "--spec", help="SLM-Lab spec file inside the SLM-Lab repository.")
    command.option("family", "--family", help="The family whose Brax config the variant follows.")
    command.option("env", "--env", help="One registered environment instead of a family.")
    command.option("variant", "--variant", help="The SLM-Lab variant to start from (default: the mapped one).")
    command.option("phase", "--phase", type=integer, help="Only phase N of the report's recommended order.")
    command.option("history_ref", "--history-ref", help="With --phase: the SLM-Lab ref whose spec history the "
                   "report read (its --history-ref), so that the phases are numbered alike.")
    command.option("keys", "--keys", help="Only the fixes of these canonical keys: K,K,...")
    command.option("alternative", "--alternative", repeat=True, help="A rule's other way to fix "
                   "(e.g. more-envs for BD001; repeatable).")
    command.option("name", "--name", help="The new variant's name (default: <variant>_brax).")
    command.option("output", "--output", type=path_type, help="Write a copy of the spec file, with the new "
                   "variant, here.")
    command.flag("in_place", "--in-place", help="Add the variant to the spec file in the SLM-Lab work tree.")
    command.flag("diff", "--diff", help="Dry run: print the unified diff (and the residual); write nothing.")
    command.option("explain", "--explain", help="KEY: each way its rule offers to fix it, with "
                   "the residuals side by side; writes nothing.")
    command.option("sets", "--set", repeat=True, help="KEY=VALUE for a ${KEY} placeholder in the spec "
                   "(repeatable).")
    command.option("rules", "--rules", help="Rules YAML merged over the shipped table.")
    command.option("mapping", "--mapping", help="Variant -> family/env mapping YAML.")
    command.option("fmt", "--format", help="The residual as md (Markdown) or json.")
    command.flag("quiet", "--quiet", "-q", help="Print only warnings and errors on stderr.")


def fix_command(*, brax: str | None = None, playground: str | None = None, slm: str | None = None,
                brax_repo: str | None = None, playground_repo: str | None = None, slm_repo: str | None = None,
                spec: str | None = None, family: str | None = None, env: str | None = None,
                variant: str | None = None, phase: int | None = None, keys: str | None = None,
                alternative: list[str] | None = None, name: str | None = None, output: Path | None = None,
                in_place: bool = False, diff: bool = False, explain: str | None = None,
                sets: list[str] | None = None, rules: str | None = None, mapping: str | None = None,
                fmt: str = "md", quiet: bool = False, history_ref: str | None = None) -> None:
    """Write the SLM-Lab spec variant that applies the fixes (all, one --phase, or --keys) and
    print the residual: what still differs, and why."""
    from ..config import load_settings
    from ..errors import FixError
    from ..safety.io import edit_lock, read_text, write_atomic
    from .story import Story
    from ..sources.worktree import WORKTREE, git_blob_id, resolve_ref
    from .common import parse_sets, user_mapping

    if fmt not in FORMATS:
        raise FixError(f"unknown --format {fmt!r} (choose from {', '.join(FORMATS)})")
    if family and env:
        raise FixError("--family and --env exclude each other")
    if not family and not env:
        raise FixError("fix writes one variant: name its scope with --family F or --env NAME")
    destinations = [flag for flag, given in (("--output", output is not None), ("--in-place", in_place),
                                             ("--diff", diff)) if given]
    if explain is not None and destinations:
        raise FixError(f"--explain writes nothing; drop {', '.join(destinations)}")
    if len(destinations) > 1:
        raise FixError(f"{' and '.join(destinations)} exclude each other")
    if explain is None and not destinations:
        raise FixError("say where the variant goes: --in-place (the work tree's spec), --output FILE (a copy), "
                       "or --diff (a dry run)")
    key_list = [k.strip() for k in keys.split(",") if k.strip()] if keys is not None else None
    # Imported here: ruamel.yaml and the renderer cost every other command's start-up otherwise.
    from ..fix.solver import (check_spec_path, choose_scope, explain as explain_key, prepare, render_explain, render_json,
                       render_residual, residual, unified_diff, why_it_cannot_train)
    from ..compare.rules import load_rules
    from ..session import head_warnings, open_snapshots
    if in_place and slm is None:
        slm = WORKTREE  # the file edited is the one on disk
    settings = load_settings(brax_ref=brax, playground_ref=playground, slm_ref=slm, brax_repo=brax_repo,
                             playground_repo=playground_repo, slm_repo=slm_repo, spec=spec, rules=rules,
                             mapping=mapping)
    check_spec_path(settings.spec)
    table = load_rules(settings.rules)
    from .report import load_extractors

    BraxExtractor, SlmExtractor = load_extractors()
    story = Story.on_stderr(quiet)
    with story.running(), contextlib.ExitStack() as held:
        snapshots = open_snapshots(settings, ("brax", "playground", "slm"), story.step)
        target = _in_place_target(snapshots["slm"], settings.spec) if in_place else None
        if target is not None:  # before the spec is read: a second --in-place run writes on top of this one
            held.enter_context(edit_lock(target))
        if output is not None:
            _check_output(output, snapshots["slm"], settings.spec)
        story.step("extracting Brax and SLM-Lab")
        # Brax's side through the fact cache, as `report` reads it: a family's scope is every one of
        # its environments' extractions, which a warm `fix` extracted again.
        from ..extract.cached import BRAX_METHODS, BRAX_VALUES, CachedExtractor
        from ..extract.factcache import FactCache, cache_root

        brax_side = CachedExtractor(None, "brax", {"brax": snapshots["brax"], "playground": snapshots["playground"]},
                                    FactCache(cache_root(settings.cache_dir)), BRAX_METHODS, values=BRAX_VALUES,
                                    factory=lambda: BraxExtractor(snapshots["brax"], snapshots["playground"]))
        inputs = prepare(brax_side, SlmExtractor, snapshots["slm"],
                         spec=settings.spec, sets=parse_sets(sets), mapping=user_mapping(settings.mapping),
                         family=family, env=env, variant=variant, name=name)
        for line in head_warnings(snapshots):  # what was read at HEAD is not what is on disk
            story.warn(line)
        if target is not None and git_blob_id(target.read_bytes()) != git_blob_id(inputs.document.text.encode()):
            raise FixError(f"{target} differs on disk from {settings.slm_ref}; --in-place edits the file as it is: "
                           "use --slm WORKTREE")
        tried = None
        if phase is not None:  # numbered as the report numbers it: tried-and-reverted edits go last
            from ..history.spec_keys import SpecHistory

            history_sha = resolve_ref(snapshots["slm"].repository, history_ref).sha if history_ref else \
                snapshots["slm"].sha
            history = SpecHistory(snapshots["slm"].repository, history_sha, settings.spec, parse_sets(sets))

            def tried(spec_key, value):
                return history.tried(inputs.variant, spec_key, value)
        scope = choose_scope(inputs.before(table), table, phase=phase, keys=key_list,
                             alternatives=alternative or [],
                             order=inputs.report_order(table) if phase is not None else None, tried=tried)
        if explain is not None:
            model = explain_key(inputs, table, scope, explain, story.step)
            sys.stdout.write(render_json(model) if fmt == "json" else render_explain(model))
            return
        story.step(f"writing and reading back {inputs.name}")
        solution = inputs.solve(table, scope)
        if solution.text is None:
            model = residual(solution)
            sys.stdout.write(render_json(model) if fmt == "json" else render_residual(model))
            story.warn("nothing written: no fix in scope can be expressed in the spec")
            return
        why_not = why_it_cannot_train(solution)
        if why_not:  # said before the file changes: training the variant would fail at once
            story.warn(f"{inputs.name} cannot train at {settings.slm_ref}: {why_not}")
        if diff:  # JSON carries the diff inside, so stdout stays one document
            patch = unified_diff(inputs.document.text, solution.text, settings.spec)
            model = residual(solution, read_from="memory (a dry run)")
            model = {**model, "diff": patch} if fmt == "json" else model
            if fmt != "json":
                sys.stdout.write(patch + "\n")
        else:
            path = target if target is not None else output
            write_atomic(path, solution.text)
            story.wrote(path)
            story.step(f"reading {inputs.name} back from {path}")
            if target is not None:  # the work tree as it is on disk now
                written = inputs.reextract(resolve_ref(snapshots["slm"].repository, WORKTREE), None)
            else:
                written = inputs.reextract(snapshots["slm"], read_text(path, "written spec"))
            model = residual(solution, written, inputs.brax, table, read_from=None if target is not None else str(path))
    sys.stdout.write(render_json(model) if fmt == "json" else render_residual(model))
    if target is not None:  # a plain `report --slm WORKTREE` still compares the mapped variant
        scope = f"--env {env}" if env else f"--family {family}"
        story.say(f"see it: brax-diff report --slm WORKTREE --spec {settings.spec} --variant {inputs.name} {scope}")
        story.say(f"train it: brax-diff verify --slm WORKTREE --spec {settings.spec} --slm-variant {inputs.name}")


def _in_place_target(snapshot, spec: str) -> Path:
    """The spec file in the SLM-Lab work tree; a FixError for a repository without one, or a
    spec that resolves outside it (a symlink out of the checkout)."""
    from ..errors import FixError
    from ..sources.worktree import work_tree_root

    root = work_tree_root(snapshot.repository)
    if root is None:
        raise FixError(f"--in-place edits a checkout's spec, and {snapshot.repository.location} has no work tree "
                       "(a bare repository or a URL); use --output FILE")
    target = root / spec
    if not target.is_file():
        raise FixError(f"--in-place: {target} is not a file in the work tree")
    if not target.resolve().is_relative_to(root.resolve()):
        raise FixError(f"--in-place: {spec} resolves to {target.resolve()}, outside the repository {root}")
    return target


def _check_output(output: Path, snapshot, spec: str) -> None:
    """``--output`` is a copy: a FixError when it is a directory or the checkout's spec itself."""
    from ..errors import FixError
    from ..safety.io import check_writable
    from ..sources.worktree import work_tree_root

    check_writable(output)
    root = work_tree_root(snapshot.repository)
    if root is not None and output.resolve() == (root / spec).resolve():
        raise FixError(f"--output {output} is the spec file itself; use --in-place to edit it")


__all__ = ["register"]
