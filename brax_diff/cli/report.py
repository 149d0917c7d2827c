"""`brax-diff report` (the comparison report) and `brax-diff rules` (the rule table).

Both only parse flags, call the library (``brax_diff.render``, ``brax_diff.rules``) and
print. Exit codes: 0 done; 1 ``--check`` found stale files or ``--fail-on`` found a
difference at or above the threshold; 2 bad input (one ``error: ...`` line).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from ..cached import CachedExtractor
from ..config import Settings, load_settings
from ..factcache import FactCache
from ..factcache import cache_root as fact_cache_root
from ..errors import BraxDiffError
from ..io import (check_writable, finish_interrupted_writes, interrupted_writes, read_json, read_text,
                  write_all)
from ..render import (FORMATS, Scope, generate, read_previous, render_json, render_markdown,
                      render_rules_markdown, same_findings, verification_entries, worst_at_or_above)
from ..rules import SEVERITIES, load_rules
from ..sources import Repository
from .common import parse_sets, print_json, stderr_console, stdout_console, user_mapping

RULE_FORMATS = ("table", "md", "json")


class CheckFailed(BraxDiffError):
    """A CI check failed (--check, --fail-on): exit code 1, one line."""

    exit_code = 1


def load_extractors():
    """The extractor classes, imported only when a report is made (tests replace this)."""
    try:
        from extractors.brax import BraxExtractor
        from extractors.slm import SlmExtractor
    except ImportError as exc:  # a broken install, not the user's input; still one line
        raise BraxDiffError(f"the extractors cannot be imported: {exc}") from None
    return BraxExtractor, SlmExtractor


def _scopes(brax_extractor, family: str | None, env: str | None) -> list[Scope]:
    if env:
        brax_extractor.family_of(env)  # an unknown env is a clear error before any work
        return [Scope(env=env)]
    families = brax_extractor.families()
    if family:
        if family not in families:
            raise BraxDiffError(f"unknown family {family!r} (families: {', '.join(families)})")
        return [Scope(family=family)]
    return [Scope(family=f) for f in families]


def _targets(scope: Scope, output: str | None, fmt: str, settings: Settings, several: bool) -> dict[str, Path | None]:
    """Where each format goes: {"md": path, "json": path}; None means stdout."""
    wanted = ("md", "json") if fmt == "both" else (fmt,)
    if output == "-":
        if several or fmt == "both":
            raise BraxDiffError("--output - needs one scope (--family or --env) and one --format (md or json)")
        return {fmt: None}
    if output and Path(output).suffix in (".md", ".json"):
        if several:
            raise BraxDiffError(f"--output {output} is a file; several families need a directory (or pick --family)")
        base = Path(output).with_suffix("")
    else:
        base = Path(output or settings.reports_dir) / scope.name
    return {f: report_file(base, f) for f in wanted}


def report_file(base: Path, kind: str) -> Path:
    """``base`` + ``.md`` or ``.json``. Not ``with_suffix``: ``dm_control.v2`` keeps its ``.v2``."""
    return base.with_name(f"{base.name}.{kind}")


def sibling(path: Path, kind: str) -> Path:
    """The report file of another kind beside ``path`` (``x.v2.md`` -> ``x.v2.json``)."""
    return report_file(path.with_suffix(""), kind)


def report_command(
    brax: Optional[str] = typer.Option(None, "--brax", help="Brax ref (default: main)."),
    playground: Optional[str] = typer.Option(None, "--playground", help="MuJoCo Playground ref (default: main)."),
    slm: Optional[str] = typer.Option(None, "--slm", help="SLM-Lab ref (default: HEAD)."),
    brax_repo: Optional[str] = typer.Option(None, "--brax-repo", help="Brax repository: path or URL."),
    playground_repo: Optional[str] = typer.Option(None, "--playground-repo", help="Playground repository."),
    slm_repo: Optional[str] = typer.Option(None, "--slm-repo", help="SLM-Lab repository (default: .)."),
    spec: Optional[str] = typer.Option(None, "--spec", help="SLM-Lab spec file inside the SLM-Lab repository."),
    family: Optional[str] = typer.Option(None, "--family", help="One family (default: every family)."),
    env: Optional[str] = typer.Option(None, "--env", help="One registered environment instead of a family."),
    variant: Optional[str] = typer.Option(None, "--variant", help="SLM-Lab spec variant (default: the mapped one)."),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="KEY=VALUE for a ${KEY} placeholder in the "
                                             "SLM-Lab spec, like SLM-Lab's -s (repeatable)."),
    rules: Optional[str] = typer.Option(None, "--rules", help="Rules YAML merged over the shipped table."),
    fmt: str = typer.Option("both", "--format", help="md, json or both."),
    output: Optional[str] = typer.Option(None, "--output",
                                         help="Directory (default reports/), a .md/.json file for one scope, or -."),
    previous: Optional[str] = typer.Option(None, "--previous",
                                           help="Previous report JSON (default: the JSON at the output path)."),
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when the files on disk are stale."),
    fail_on: Optional[str] = typer.Option(None, "--fail-on", help="Exit 1 when a difference at or above "
                                          "this severity exists (CRITICAL, IMPORTANT, MINOR)."),
    verification: Optional[str] = typer.Option(None, "--verification",
                                               help="A verify.json from `brax-diff verify`: its verdicts join "
                                               "the report."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Extract everything again; do not read or write "
                                  "the fact cache."),
    verify: bool = typer.Option(False, "--verify", help="Run `brax-diff verify` (its defaults) on each scope's "
                                "environment first and show the verdicts (needs the verify extra)."),
) -> None:
    """Compare Brax and SLM-Lab at the given refs and write the Markdown and JSON reports."""
    if family and env:
        raise BraxDiffError("--family and --env exclude each other")
    if fmt not in FORMATS:
        raise BraxDiffError(f"unknown --format {fmt!r} (choose from {', '.join(FORMATS)})")
    threshold = fail_on.upper() if fail_on else None
    if threshold is not None and threshold not in SEVERITIES:
        raise BraxDiffError(f"unknown --fail-on severity {fail_on!r} (choose from {', '.join(SEVERITIES)})")
    if check and output == "-":
        raise BraxDiffError("--check compares files on disk; it cannot be used with --output -")
    settings = load_settings(brax_ref=brax, playground_ref=playground, slm_ref=slm, brax_repo=brax_repo,
                             playground_repo=playground_repo, slm_repo=slm_repo, spec=spec, rules=rules)
    table = load_rules(settings.rules)
    BraxExtractor, SlmExtractor = load_extractors()
    cache_root = Path(settings.cache_dir) if settings.cache_dir else None
    brax_snap = Repository(settings.brax_repo, "brax", cache_root=cache_root).resolve(settings.brax_ref)
    playground_snap = Repository(settings.playground_repo, "playground",
                                 cache_root=cache_root).resolve(settings.playground_ref)
    slm_snap = Repository(settings.slm_repo, "slm", cache_root=cache_root).resolve(settings.slm_ref)
    set_values = parse_sets(sets)
    mapping = user_mapping(settings.mapping)
    brax_extractor = BraxExtractor(brax_snap, playground_snap)
    slm_extractor = SlmExtractor(slm_snap, spec=settings.spec, sets=set_values, mapping=mapping)
    if not no_cache:  # a rerun whose blobs have not moved parses nothing
        cache = FactCache(fact_cache_root(settings.cache_dir))
        brax_extractor = CachedExtractor(brax_extractor, "brax", {"brax": brax_snap, "playground": playground_snap},
                                         cache, ("defaults", "family", "env"))
        slm_extractor = CachedExtractor(slm_extractor, "slm", {"slm": slm_snap}, cache, ("variant",),
                                        identity={"spec": settings.spec, "sets": set_values, "mapping": mapping})
    scopes = _scopes(brax_extractor, family, env)
    if previous and len(scopes) > 1:
        raise BraxDiffError("--previous needs one scope (--family or --env)")
    if verification and verify:
        raise BraxDiffError("--verification and --verify exclude each other")
    loaded_verification = _read_verification(verification) if verification else None

    rendered: list[tuple[Path | None, str]] = []
    models: dict[Path | None, dict] = {}
    failing: list[str] = []
    for scope in scopes:
        targets = _targets(scope, output, fmt, settings, len(scopes) > 1)
        default_previous = next((p for f, p in sorted(targets.items()) if p is not None), None)
        previous_path = previous or (sibling(default_previous, "json") if default_previous else None)
        if default_previous is not None and not check:
            for path in targets.values():
                check_writable(path)  # before any work: a directory in the way is one line
            finish_interrupted_writes(default_previous.parent)  # a crash cut the last write short
        report_dir = (default_previous or Path(settings.reports_dir) / scope.name).parent
        verdicts = None
        if loaded_verification is not None:
            verdicts = verification_entries(loaded_verification, Path(verification).parent, report_dir)
        elif verify:
            verify_dir = Path(settings.reports_dir) / "verify" / scope.name
            result = _run_verify(brax_extractor, slm_extractor, scope, variant, settings, verify_dir)
            verdicts = verification_entries(result, verify_dir, report_dir)
        model = generate(brax_extractor, slm_extractor, table, scope, variant=variant, spec=settings.spec,
                         verification=verdicts,
                         previous=read_previous(previous_path) if previous_path else None,
                         rules_origin="shipped" if settings.rules is None else settings.rules)
        for kind, path in sorted(targets.items()):
            rendered.append((path, render_markdown(model) if kind == "md" else render_json(model)))
            models[path] = model
        if threshold:
            failing += [f"{scope.name}: {d['key']} ({d['severity']})" for d in worst_at_or_above(model, threshold)]

    err = stderr_console()
    if check:
        pending = {p for path, _ in rendered for p in interrupted_writes(path.parent)}
        stale, refreshable = _stale(rendered, models, pending)
        for path in stale:
            err.print(f"stale: {path}" + (" (its write was cut short; the next report run finishes it)"
                                          if path in pending else ""))
        if stale:
            raise CheckFailed(f"{len(stale)} of {len(rendered)} report file(s) say something else than a "
                              "regenerated report; run brax-diff report without --check to update them")
        if refreshable:
            err.print(f"up to date: {len(rendered)} file(s); {len(refreshable)} read older commits that say "
                      "the same (regenerate to refresh their links)")
        else:
            err.print(f"up to date: {len(rendered)} file(s)")
    else:
        for path, text in rendered:
            if path is None:
                sys.stdout.write(text)
        files = {path: text for path, text in rendered if path is not None}
        for path in write_all(files):  # every file of the run, or none
            err.print(f"wrote {path}")
    if failing:
        raise CheckFailed(f"{len(failing)} difference(s) at or above {threshold}: " + "; ".join(failing))


def _read_verification(path: str) -> dict:
    """A verify.json, checked loosely: an object whose ``verdicts`` is a mapping or a list of
    objects, each with a ``verdict`` (and, in a list, a ``key`` or ``arm``), and whose
    ``runs``, when present, is a list of objects."""
    data = read_json(path, "--verification")
    verdicts = data.get("verdicts") if isinstance(data, dict) else None
    if isinstance(verdicts, dict):
        entries = [(str(k), v) for k, v in verdicts.items()]
    elif isinstance(verdicts, list):
        entries = [(f"verdicts[{i}]", v) for i, v in enumerate(verdicts)]
    else:
        raise BraxDiffError(f"--verification {path}: not a verify.json (no verdicts)")
    for where, verdict in entries:
        if not isinstance(verdict, dict) or not isinstance(verdict.get("verdict"), str):
            raise BraxDiffError(f"--verification {path}: not a verify.json ({where} has no verdict)")
        if isinstance(verdicts, list) and not any(isinstance(verdict.get(k), str) for k in ("key", "arm")):
            raise BraxDiffError(f"--verification {path}: not a verify.json ({where} names no key or arm)")
    runs = data.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise BraxDiffError(f"--verification {path}: not a verify.json (runs must be a list of objects)")
    return data


# The environment `report --verify` trains on when the scope is a family.
VERIFY_ENV_FOR_FAMILY = {"dm_control": "CartpoleBalance"}


def _run_verify(brax_extractor, slm_extractor, scope: Scope, variant: str | None, settings: Settings,
                output_dir: Path) -> dict:
    """`brax-diff verify` with its defaults on the scope's environment; the result's JSON."""
    from ..verify import build_plan, run_plan, training_stack_missing

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
    plan = build_plan({env: brax_extractor.env(env)}, {env: slm}, envs=[env], seeds=5, budget=1_000_000)
    cache = Path(settings.cache_dir or ".brax-diff-cache") / "verify"
    return run_plan(plan, cache, output_dir=output_dir).to_json()


def _stale(rendered: list[tuple[Path | None, str]], models: dict,
           pending: set[Path]) -> tuple[list[Path], list[Path]]:
    """Files that say something else than the regenerated report (stale), and files that
    differ only in the commits and lines they were read from (refreshable).

    A Markdown file is refreshable when the JSON beside it is, and it is still the
    rendering of that JSON (not edited by hand). A missing file, or one in ``pending`` (an
    interrupted write), is stale."""
    stale, refreshable = [], []
    for path, text in rendered:
        current = _text_on_disk(path)
        if path in pending or current is None:  # a write cut short, or a deleted file
            stale.append(path)
            continue
        if current == text:
            continue
        json_path = sibling(path, "json")
        on_disk = read_previous(json_path) if json_path.is_file() else None
        says_the_same = on_disk is not None and same_findings(on_disk, models[path])
        if says_the_same and path.suffix == ".md":
            says_the_same = current == render_markdown(on_disk)
        (refreshable if says_the_same else stale).append(path)
    return stale, refreshable


def _text_on_disk(path: Path) -> str | None:
    """The report file's text; None when it is not there (``--check`` calls that stale)."""
    if not path.exists():
        return None
    try:
        return read_text(path, "report file")
    except BraxDiffError:
        return None


def rules_command(
    fmt: str = typer.Option("table", "--format", help="table, md (docs/rules.md) or json."),
    rules: Optional[str] = typer.Option(None, "--rules", help="Rules YAML merged over the shipped table."),
) -> None:
    """Print the rule table (shipped, merged with --rules or the configured rules file)."""
    if fmt not in RULE_FORMATS:
        raise BraxDiffError(f"unknown --format {fmt!r} (choose from {', '.join(RULE_FORMATS)})")
    table = load_rules(load_settings(rules=rules).rules)
    if fmt == "md":
        sys.stdout.write(render_rules_markdown(table))
        return
    if fmt == "json":
        print_json(table.to_json())
        return
    out = Table(title="brax-diff rules", title_justify="left")
    for column in ("code", "name", "topic", "keys", "severity cases", "risk"):
        out.add_column(column)
    for rule in table.rules:
        cases = "\n".join(f"{c.then}: {c.when.text}" for c in rule.cases)
        out.add_row(rule.code, rule.name, rule.topic, "\n".join(rule.keys), cases, rule.risk.level)
    stdout_console().print(out)


def register(app: typer.Typer) -> None:
    """Add `report` and `rules` to the app."""
    app.command("report")(report_command)
    app.command("rules")(rules_command)


__all__ = ["register", "load_extractors"]
