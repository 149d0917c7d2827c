"""`brax-diff report` (the comparison report) and `brax-diff rules` (the rule table).

Both only parse flags, call the library (``brax_diff.render``, ``brax_diff.rules``) and
print. Exit codes: 0 done; 1 ``--check`` found stale files, ``--strict`` found an unknown key, or ``--fail-on`` found a
difference at or above the threshold; 2 bad input (one ``error: ...`` line).
"""

from __future__ import annotations

import sys

from ..errors import BraxDiffError

# Everything else (settings, git, rendering, rules, the cache: Jinja, GitPython, PyYAML and
# their own start-up work) is imported by the functions that use it, so `brax-diff --help`
# and the other commands start without them.
TYPE_CHECKING = False  # typing is not imported for this
if TYPE_CHECKING:
    from pathlib import Path

    from ..config import Settings
    from ..scope import Scope
    from ..review import Move
    from ..story import Story

RULE_FORMATS = ("table", "md", "json")


class CheckFailed(BraxDiffError):
    """A CI check failed (--check, --fail-on): exit code 1, one line."""

    exit_code = 1


def _imported_on_call(module: str, name: str):
    """A stand-in for the class ``module.name`` that imports it when first called; a module
    that cannot be found is the error now, before any work."""
    import importlib
    import importlib.util

    try:
        found = sys.modules[module] is not None if module in sys.modules else importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if not found:
        raise BraxDiffError(f"the extractors cannot be imported: no module named {module!r}")

    def construct(*args, **kwargs):
        try:
            cls = getattr(importlib.import_module(module), name)
        except ImportError as exc:  # a broken install, not the user's input; still one line
            raise BraxDiffError(f"the extractors cannot be imported: {exc}") from None
        return cls(*args, **kwargs)
    return construct


def load_extractors():
    """The extractor classes (tests replace this), imported only when one is built: a report
    answered from the fact cache builds none, and libcst alone takes a second to import."""
    return (_imported_on_call("brax_diff.extractors.brax", "BraxExtractor"),
            _imported_on_call("brax_diff.extractors.slm", "SlmExtractor"))


def _targets(scope: Scope, output: str | None, fmt: str, settings: Settings, several: bool,
             variant: str | None = None) -> dict[str, Path | None]:
    """Where each format goes: {"md": path, "json": path}; None means stdout. A directory gets
    the scope's file name (:meth:`Scope.file_name`: a ``--variant`` report has its own)."""
    from pathlib import Path

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
        base = Path(output or settings.reports_dir) / scope.file_name(variant)
    return {f: report_file(base, f) for f in wanted}


def report_file(base: Path, kind: str) -> Path:
    """``base`` + ``.md`` or ``.json``. Not ``with_suffix``: ``dm_control.v2`` keeps its ``.v2``."""
    return base.with_name(f"{base.name}.{kind}")


def sibling(path: Path, kind: str) -> Path:
    """The report file of another kind beside ``path`` (``x.v2.md`` -> ``x.v2.json``)."""
    return report_file(path.with_suffix(""), kind)


def report_command(*, brax: str | None = None, playground: str | None = None, slm: str | None = None,
                   brax_repo: str | None = None, playground_repo: str | None = None, slm_repo: str | None = None,
                   spec: str | None = None, family: str | None = None, env: str | None = None,
                   variant: str | None = None, sets: list[str] | None = None, rules: str | None = None,
                   mapping: str | None = None, fmt: str = "both", output: str | None = None,
                   previous: str | None = None, check: bool = False, summary: str | None = None,
                   fail_on: str | None = None, strict: bool = False, verification: str | None = None,
                   no_cache: bool = False, verify: bool = False, quiet: bool = False,
                   results: str | None = None, targets_ref: str | None = None,
                   brax_reference: str | None = None) -> None:
    """Compare Brax and SLM-Lab at the given refs and write the Markdown and JSON reports."""
    from ..config import load_settings
    from ..io import interrupted_writes, write_all, write_atomic
    from ..session import head_warnings, open_snapshots
    from ..scope import FORMATS
    from ..severity import SEVERITIES, worst_at_or_above
    from ..story import Story
    from .common import parse_sets

    if family and env:
        raise BraxDiffError("--family and --env exclude each other")
    from ..scope import BRAX_REFERENCES

    if brax_reference is not None and brax_reference not in BRAX_REFERENCES:
        raise BraxDiffError(f"unknown --brax-reference {brax_reference!r} (choose from {', '.join(BRAX_REFERENCES)})")
    if fmt not in FORMATS + ("github",):
        raise BraxDiffError(f"unknown --format {fmt!r} (choose from {', '.join(FORMATS)}, or github with --check)")
    annotate = fmt == "github"
    if annotate and not check:
        raise BraxDiffError("--format github annotates the changes --check finds; add --check")
    fmt = "both" if annotate else fmt  # github checks both files
    threshold = fail_on.upper() if fail_on else None
    if threshold is not None and threshold not in SEVERITIES:
        raise BraxDiffError(f"unknown --fail-on severity {fail_on!r} (choose from {', '.join(SEVERITIES)})")
    if check and output == "-":
        raise BraxDiffError("--check compares files on disk; it cannot be used with --output -")
    settings = load_settings(brax_ref=brax, playground_ref=playground, slm_ref=slm, brax_repo=brax_repo,
                             playground_repo=playground_repo, slm_repo=slm_repo, spec=spec, rules=rules,
                             mapping=mapping)
    table = _rule_table(settings.rules)
    extractor_classes = load_extractors()
    set_values = parse_sets(sets)
    story = Story.on_stderr(quiet)
    with story.running():
        snapshots = open_snapshots(settings, ("brax", "playground", "slm"), story.step)
        results = _generate_all(story, snapshots, settings, table, extractor_classes, set_values,
                                family=family, env=env, variant=variant, fmt=fmt, output=output, previous=previous,
                                verification=verification, verify=verify, no_cache=no_cache, check=check,
                                results=results, targets_ref=targets_ref, brax_reference=brax_reference or "params")
    for line in head_warnings(snapshots):
        story.warn(line)
    rendered = [file for result in results for file in result.files]
    models = {path: result.model for result in results for path, _ in result.files}
    failing, unknown = [], []
    for result in results:
        story.summary(result.model)
        if threshold:
            failing += [f"{result.name}: {d['key']} ({d['severity']})"
                        for d in worst_at_or_above(result.model, threshold)]
        if strict:
            unknown += [f"{result.name}: {d['key']}" for d in result.model["differences"] if d["status"] == "unknown"]

    stale: list[Path] = []
    if check:
        pending = {p for path, _ in rendered if path is not None for p in interrupted_writes(path.parent)}
        stale, refreshable = _stale(rendered, models, pending)
        for path in stale:
            story.line(f"stale: {path}" + (" (its write was cut short; the next report run finishes it)"
                                           if path in pending else ""))
    if annotate or summary:
        from ..review import github_annotations, markdown_summary, source_moves

        found = [move for result in results for move in result.moves()]
        if annotate:
            sys.stdout.write(github_annotations(found))
        if summary:
            sources = {s["title"]: s for result in results for s in source_moves(result.previous, result.model)}
            write_atomic(summary, markdown_summary(found, sources.values(), stale=len(stale)))
    if check:
        if stale:
            raise CheckFailed(f"{len(stale)} of {len(rendered)} report file(s) say something else than a "
                              "regenerated report; run brax-diff report without --check to update them")
        if refreshable:
            story.say(f"up to date: {len(rendered)} file(s); {len(refreshable)} read older commits that say "
                      "the same (regenerate to refresh their links)")
        else:
            story.say(f"up to date: {len(rendered)} file(s)")
    else:
        by_directory: dict[Path, dict[Path, str]] = {}
        for path, text in rendered:
            if path is None:
                sys.stdout.write(text)
            else:
                by_directory.setdefault(path.parent, {})[path] = text
        for files in by_directory.values():
            for path in write_all(files):  # every file of the run in that directory, or none
                story.wrote(path)
    if failing:
        raise CheckFailed(f"{len(failing)} difference(s) at or above {threshold}: " + "; ".join(failing))
    if unknown:
        raise CheckFailed(f"--strict: {len(unknown)} compared key(s) unknown: " + "; ".join(unknown[:8])
                          + ("; ..." if len(unknown) > 8 else ""))


class ScopeResult:
    """One scope's report: its model, the report it replaces (on disk), its files and texts."""

    def __init__(self, name: str, model: dict, previous: dict | Path | None,
                 files: list[tuple[Path | None, str]]) -> None:
        self.name, self.model, self.files = name, model, files
        self._previous = previous  # a model, or the path of one not read yet (a cached report)

    @property
    def previous(self) -> dict | None:
        from pathlib import Path

        if isinstance(self._previous, Path):
            from ..render import read_previous

            self._previous = read_previous(self._previous)
        return self._previous

    def moves(self) -> list[Move]:
        from ..render import render_markdown
        from ..review import annotated_text, locate, moves

        path, text = next(((path, text) for path, text in self.files if path is None or path.suffix == ".md"),
                          (None, render_markdown(self.model)))
        return locate(moves(self.previous, self.model, self.name), path, annotated_text(path, text))


def _generate_all(story: Story, snapshots: dict, settings: Settings, table, extractor_classes,
                  set_values: dict, *, family, env, variant, fmt, output, previous, verification, verify,
                  no_cache, check, results=None, targets_ref=None, brax_reference="params") -> list[ScopeResult]:
    """Every scope's report, with its files (the library's :class:`ReportRun` makes the texts)."""
    from .. import results as published

    if targets_ref and not results:
        raise BraxDiffError("--targets-ref gives the targets of --results; add --results")
    joined = published.load(results, snapshots["slm"], targets_ref) if results else None
    from pathlib import Path

    from ..io import check_writable, finish_interrupted_writes
    from ..report_run import ReportRun
    from ..verification import verification_entries
    from .common import user_mapping

    if verification and verify:
        raise BraxDiffError("--verification and --verify exclude each other")
    run = ReportRun(snapshots, settings, table, extractor_classes, set_values, user_mapping(settings.mapping),
                    variant=variant, no_cache=no_cache, step=story.step, brax_reference=brax_reference)
    scopes = run.scopes(family, env)
    if previous and len(scopes) > 1:
        raise BraxDiffError("--previous needs one scope (--family or --env)")
    loaded_verification = _read_verification(verification) if verification else None
    for line in run.extract_ahead(scopes):
        story.line(line)

    results = []
    linked_at: dict[str, str] = {}
    for scope in scopes:
        targets = _targets(scope, output, fmt, settings, len(scopes) > 1, variant)
        default_previous = next((p for f, p in sorted(targets.items()) if p is not None), None)
        previous_path = Path(previous) if previous else (sibling(default_previous, "json") if default_previous else None)
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
            result = _run_verify(run.brax, run.slm, scope, variant, settings, verify_dir, set_values)
            verdicts = verification_entries(result, verify_dir, report_dir)
        texts, model, replaced = run.report(scope, previous_path=previous_path, verdicts=verdicts,
                                            linked_at=linked_at, results=joined)
        files = [(path, texts[kind]) for kind, path in sorted(targets.items())]
        results.append(ScopeResult(scope.file_name(variant), model, replaced, files))
    return results


def _rule_table(user_file: str | None):
    """A function giving the rule table, loaded on the first call for the shipped one: a report the report cache answers
    never needs it (nor PyYAML and Jinja, which loading it imports). A user's file is loaded
    now, so that a bad one is one error line before any work."""
    import functools

    if user_file is not None:
        from ..rules import load_rules

        table = load_rules(user_file)
        return lambda: table

    @functools.lru_cache(maxsize=1)
    def shipped():
        from ..rules import load_rules

        return load_rules()
    return shipped


def _read_verification(path: str) -> dict:
    """A verify.json (read within limits) whose structure the report can show, else one error line."""
    from ..io import read_json
    from ..verification import check_result

    return check_result(read_json(path, "--verification"), f"--verification {path}")


# The environment `report --verify` trains on when the scope is a family.
VERIFY_ENV_FOR_FAMILY = {"dm_control": "CartpoleBalance"}


def _run_verify(brax_extractor, slm_extractor, scope: Scope, variant: str | None, settings: Settings,
                output_dir: Path, set_values: dict) -> dict:
    """`brax-diff verify` on the scope's environment with the preset this machine can run (gpu
    or cpu), spec_fixes being the variant `brax-diff fix` writes beside the trainer-level
    all_fixes (verify's default); the result's JSON."""
    from pathlib import Path

    from ..verify import build_plan, run_plan, training_stack_missing
    from ..verify.plan import resolve_options

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
    from ..verify.costs import estimate, load_throughput

    from ..verify.runner import pick_device

    options = resolve_options("gpu" if pick_device() == "cuda" else "cpu")  # the preset the machine can run
    jobs = options.pop("jobs")
    from brax_diff.extractors.slm import SlmExtractor

    from ..fix import written_variant
    from ..rules import load_rules

    fixed = written_variant(brax_extractor, SlmExtractor, slm_extractor.snapshot, spec=settings.spec,
                            sets=set_values, mapping=slm_extractor.mapping, env=env, variant=variant, keys=None,
                            table=load_rules(settings.rules))
    plan = build_plan({env: brax_extractor.env(env)}, {env: slm}, envs=[env], fixed={env: fixed}, **options)
    print(estimate(plan, load_throughput()).render(), file=sys.stderr)
    cache = Path(settings.cache_dir or ".brax-diff-cache") / "verify"
    return run_plan(plan, cache, output_dir=output_dir, jobs=jobs).to_json()


def _stale(rendered: list[tuple[Path | None, str]], models: dict,
           pending: set[Path]) -> tuple[list[Path], list[Path]]:
    """Files that say something else than the regenerated report (stale), and files that
    differ only in the commits and lines they were read from (refreshable).

    A Markdown file is refreshable when the JSON beside it is, and it is still the
    rendering of that JSON (not edited by hand). A missing file, or one in ``pending`` (an
    interrupted write), is stale."""
    from ..render import read_previous, render_markdown, same_findings

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
    from ..io import read_text

    if not path.exists():
        return None
    try:
        return read_text(path, "report file")
    except BraxDiffError:
        return None


def rules_command(*, fmt: str = "table", rules: str | None = None) -> None:
    """Print the rule table (shipped, merged with --rules or the configured rules file)."""
    from ..config import load_settings
    from ..render import render_rules_markdown
    from ..rules import load_rules
    from .common import print_json, stdout_console

    if fmt not in RULE_FORMATS:
        raise BraxDiffError(f"unknown --format {fmt!r} (choose from {', '.join(RULE_FORMATS)})")
    table = load_rules(load_settings(rules=rules).rules)
    if fmt == "md":
        sys.stdout.write(render_rules_markdown(table))
        return
    if fmt == "json":
        print_json(table.to_json())
        return
    from rich.table import Table

    out = Table(title="brax-diff rules", title_justify="left")
    for column in ("code", "name", "topic", "keys", "severity cases", "risk"):
        out.add_column(column)
    for rule in table.rules:
        cases = "\n".join(f"{c.then}: {c.when.text}" for c in rule.cases)
        out.add_row(rule.code, rule.name, rule.topic, "\n".join(rule.keys), cases, rule.risk.level)
    stdout_console().print(out)


def register(app) -> None:
    """Add `report` and `rules` to the app."""
    command = app.command("report", report_command)
    command.option("brax", "--brax", "--brax-ref", help="Brax ref, or WORKTREE for the files on disk (default: main).")
    command.option("playground", "--playground", "--playground-ref",
                   help="MuJoCo Playground ref or WORKTREE (default: main).")
    command.option("slm", "--slm", "--slm-ref", help="SLM-Lab ref or WORKTREE (default: HEAD in "
                   "an SLM-Lab checkout, else master).")
    command.option("brax_repo", "--brax-repo", help="Brax repository: path or URL (default: google/brax on GitHub).")
    command.option("playground_repo", "--playground-repo", help="Playground repository: path "
                   "or URL (default: google-deepmind/mujoco_playground).")
    command.option("slm_repo", "--slm-repo", help="SLM-Lab repository: path or URL (default: "
                   "this checkout when it is SLM-Lab's, else kengz/SLM-Lab).")
    command.option("spec", "--spec", help="SLM-Lab spec file inside the SLM-Lab repository.")
    command.option("family", "--family", help="One family (default: every family).")
    command.option("env", "--env", help="One registered environment instead of a family.")
    command.option("variant", "--variant", help="SLM-Lab spec variant (default: the mapped one).")
    command.option("sets", "--set", repeat=True, help="KEY=VALUE for a ${KEY} placeholder in the "
                   "SLM-Lab spec, like SLM-Lab's -s (repeatable).")
    command.option("rules", "--rules", help="Rules YAML merged over the shipped table.")
    command.option("mapping", "--mapping", help="Variant -> family/env mapping YAML replacing the shipped one.")
    command.option("fmt", "--format", help="md, json or both; with --check, github prints each "
                   "change as a GitHub Actions annotation on the report file.")
    command.option("output", "--output", help="Directory (default reports/), a .md/.json file for one scope, or -.")
    command.option("previous", "--previous", help="Previous report JSON (default: the JSON at the output path).")
    command.flag("check", "--check", help="Write nothing; exit 1 when the files on disk are stale.")
    command.option("summary", "--summary", help="Write a Markdown table of what moved since the "
                   "reports on disk (key, scope, was -> now, classification, both lines) "
                   "to this file, e.g. a pull request's body.")
    command.option("fail_on", "--fail-on", help="Exit 1 when a difference at or above "
                   "this severity exists (CRITICAL, IMPORTANT, MINOR).")
    command.flag("strict", "--strict", help="Exit 1 when a compared key is unknown on either side "
                 "(the code's shape at a ref is not read).")
    command.option("brax_reference", "--brax-reference", metavar="params|train-script|train-defaults|learner",
                   help="Where Brax's values come from: Playground's tuned *_params.py configs (default), what "
                   "Playground's learning/train_jax_ppo.py trains with at its flag defaults, train()'s signature "
                   "defaults, or Brax's own brax/training/learner.py flag defaults.")
    command.option("results", "--results", help="Published per-environment scores joined with the "
                   "environment matrix: slm (SLM-Lab's docs/BENCHMARKS.md at --slm), slm@REF, or a .md, .csv "
                   "(env,score,target) or .yaml file.")
    command.option("targets_ref", "--targets-ref", help="Take the targets of --results from SLM-Lab's "
                   "docs/BENCHMARKS.md at this ref (later versions dropped them).")
    command.option("verification", "--verification", help="A verify.json from `brax-diff verify`: its verdicts "
                   "join the report.")
    command.flag("no_cache", "--no-cache", help="Extract and render everything again; do not read or write "
                 "the fact or report cache.")
    command.flag("verify", "--verify", help="Run `brax-diff verify` (its defaults) on each scope's "
                 "environment first and show the verdicts (needs the verify extra).")
    command.flag("quiet", "--quiet", "-q", help="Print only warnings and errors (no progress, "
                 "summary or list of files written).")

    command = app.command("rules", rules_command)
    command.option("fmt", "--format", help="table, md (docs/rules.md) or json.")
    command.option("rules", "--rules", help="Rules YAML merged over the shipped table.")


__all__ = ["register", "load_extractors"]
