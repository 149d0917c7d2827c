"""`brax-diff report` (the comparison report) and `brax-diff rules` (the rule table).

Both only parse flags, call the library (``brax_diff.report.render``, ``brax_diff.compare.rules``) and
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
    return (_imported_on_call("brax_diff.extractors.brax.extractor", "BraxExtractor"),
            _imported_on_call("brax_diff.extractors.slm.extractor", "SlmExtractor"))


def report_command(*, brax: str | None = None, playground: str | None = None, slm: str | None = None,
                   brax_repo: str | None = None, playground_repo: str | None = None, slm_repo: str | None = None,
                   spec: str | None = None, family: str | None = None, env: str | None = None,
                   variant: str | None = None, sets: list[str] | None = None, rules: str | None = None,
                   mapping: str | None = None, fmt: str = "both", output: str | None = None,
                   previous: str | None = None, check: bool = False, summary: str | None = None,
                   fail_on: str | None = None, strict: bool = False, verification: str | None = None,
                   no_cache: bool = False, verify: bool = False, quiet: bool = False,
                   results: str | None = None, targets_ref: str | None = None, results_code: str | None = None,
                   history_ref: str | None = None,
                   brax_reference: str | None = None, against: str | None = None, rsl_rl: str | None = None,
                   rsl_rl_repo: str | None = None) -> None:
    """Compare Brax and SLM-Lab (or RSL-RL: --against rsl-rl) at the given refs and write the Markdown and JSON reports."""
    from ..config import load_settings
    from ..safety.escape import json_for_a_log
    from ..safety.io import interrupted_writes, write_all, write_atomic
    from ..session import head_warnings, open_snapshots
    from ..facts.scope import FORMATS
    from ..report.generate import at_or_above, generate_all, rule_table, stale_files, unknown_keys
    from ..compare.severity import SEVERITIES
    from .story import Story
    from .common import parse_sets, user_mapping

    if family and env:
        raise BraxDiffError("--family and --env exclude each other")
    from ..facts.scope import AGAINST_CHOICES, BRAX_REFERENCES

    if against is not None and against not in AGAINST_CHOICES:
        raise BraxDiffError(f"unknown --against {against!r} (choose from {', '.join(AGAINST_CHOICES)})")
    other = (against or "slm").replace("-", "_")
    if other != "slm":
        for given, flag in ((variant, "--variant"), (results, "--results"), (verification, "--verification"),
                            (verify, "--verify"), (sets, "--set")):
            if given:
                raise BraxDiffError(f"{flag} is about SLM-Lab; it cannot be used with --against {against}")

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
                             mapping=mapping, rsl_rl_ref=rsl_rl, rsl_rl_repo=rsl_rl_repo)
    if not check and (output is None or verify):
        from ..config import outside_checkout

        # The default reports/ is the checkout's: a symbolic link it ships there must not
        # send the reports (and verify's runs) elsewhere; --output names a place on purpose.
        checkout = outside_checkout(settings.reports_dir, settings.root)
        if checkout is not None:
            raise BraxDiffError(f"{settings.reports_dir} leads outside the checkout ({checkout}) through a "
                                "symbolic link; pass --output DIR to write the reports there")
    table = rule_table(settings.rules)
    extractor_classes = load_extractors()
    set_values = parse_sets(sets)
    story = Story.on_stderr(quiet)
    with story.running():
        snapshots = open_snapshots(settings, ("brax", "playground", other), story.step)
        verify_scope = None
        if verify:
            from ..verify.for_report import verify_scope as train_scope

            def verify_scope(brax_x, slm_x, scope, directory):
                return train_scope(brax_x, slm_x, scope, variant, settings, directory, set_values)
        results = generate_all(snapshots, settings, table, extractor_classes, set_values,
                               user_mapping(settings.mapping), family=family, env=env, variant=variant, fmt=fmt,
                               output=output, previous=previous, verification=verification,
                               verify_scope=verify_scope, no_cache=no_cache, check=check, results=results,
                               targets_ref=targets_ref, results_code=results_code, history_ref=history_ref, brax_reference=brax_reference or "params", against=other,
                               step=story.step, line=story.line)
    for line in head_warnings(snapshots):
        story.warn(line)
    rendered = [file for result in results for file in result.files]
    models = {path: result.model for result in results for path, _ in result.files}
    for result in results:
        story.summary(result.model)
    failing = at_or_above(results, threshold) if threshold else []
    unknown = unknown_keys(results) if strict else []

    stale: list[Path] = []
    if check:
        pending = {p for path, _ in rendered if path is not None for p in interrupted_writes(path.parent)}
        stale, refreshable = stale_files(rendered, models, pending)
        for path in stale:
            story.line(f"stale: {path}" + (" (its write was cut short; the next report run finishes it)"
                                           if path in pending else ""))
    if annotate or summary:
        from ..report.review import github_annotations, markdown_summary, source_moves

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
            if path is None:  # --output -: one format, named by --format
                sys.stdout.write(json_for_a_log(text) if fmt == "json" else text)
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


def rules_command(*, fmt: str = "table", rules: str | None = None) -> None:
    """Print the rule table (shipped, merged with --rules or the configured rules file)."""
    from ..config import load_settings
    from ..report.render import render_rules_markdown
    from ..compare.rules import load_rules
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
    command.option("against", "--against", metavar="slm|rsl-rl", help="The side compared with Brax: SLM-Lab "
                   "(default) or RSL-RL as Playground's train_rsl_rl.py runs it (locomotion, manipulation).")
    command.option("rsl_rl", "--rsl-rl", "--rsl-rl-ref", help="rsl_rl (rsl-rl-lib) ref with --against rsl-rl "
                   "(default: the release Playground's uv.lock pins at --playground).")
    command.option("rsl_rl_repo", "--rsl-rl-repo", help="rsl_rl repository: path or URL (default: "
                   "leggedrobotics/rsl_rl).")
    command.option("family", "--family", help="One family (default: every family); all: the --results "
                   "report alone.")
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
    command.option("results", "--results", help="Published per-environment scores, each joined with the "
                   "variant its row names at the code the results came from, in one cross-family report "
                   "(results.md beside the family reports; --family all for it alone): slm (SLM-Lab's "
                   "docs/BENCHMARKS.md at --slm), slm@REF (at REF, and the code at REF), or a .md, .csv "
                   "(env,score,target[,variant,frames,status,algorithm]) or .yaml file.")
    command.option("results_code", "--results-code", help="The SLM-Lab ref the --results runs trained with "
                   "(default: the ref the results file is read at).")
    command.option("history_ref", "--history-ref", help="Search this SLM-Lab ref's history of the spec for "
                   "what each recommended edit was before (default: the compared commit's ancestry; a squash "
                   "merge hides the branch it came from).")
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
