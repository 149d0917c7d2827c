"""The library side of `brax-diff report` across scopes: where each scope's files go, every
scope's report (:func:`generate_all`), which files on disk a regenerated report makes stale
(:func:`stale_files`, for ``--check``), and the differences a CI gate stops on."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import BraxDiffError
from ..facts.scope import Scope

if TYPE_CHECKING:
    from ..config import Settings
    from .review import Move


def output_files(scope: Scope, output: str | None, fmt: str, settings: Settings, several: bool,
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
            from .render import read_previous

            self._previous = read_previous(self._previous)
        return self._previous

    def moves(self) -> list[Move]:
        from .render import render_markdown
        from .review import annotated_text, locate, moves

        path, text = next(((path, text) for path, text in self.files if path is None or path.suffix == ".md"),
                          (None, render_markdown(self.model)))
        return locate(moves(self.previous, self.model, self.name), path, annotated_text(path, text))


def generate_all(snapshots: dict, settings: Settings, table, extractor_classes, set_values: dict, mapping, *,
                 family, env, variant, fmt, output, previous, verification, verify_scope=None,
                 no_cache, check, results=None, targets_ref=None, results_code=None, history_ref=None,
                 brax_reference="params",
                 against="slm",
                 step: Callable[[str], None] = lambda text: None,
                 line: Callable[[str], None] = lambda text: None) -> list[ScopeResult]:
    """Every scope's report, with its files (:class:`ReportRun` makes the texts). ``verify_scope(brax,
    slm, scope, directory)`` trains a scope (`report --verify`) and gives its verify.json; ``step`` and
    ``line`` tell the terminal what is being done."""
    from ..compare import results as published

    if targets_ref and not results:
        raise BraxDiffError("--targets-ref gives the targets of --results; add --results")
    if results_code and not results:
        raise BraxDiffError("--results-code names the code --results came from; add --results")
    if family == ALL and not results:
        raise BraxDiffError("--family all is the cross-family join of published results: add --results")
    if results and (env or (family and family != ALL)):
        raise BraxDiffError("--results joins every family's environments in one report (results.md): drop "
                            f"{'--env' if env else '--family'}, or give --family all for that report alone")
    joined = published.load(results, snapshots["slm"], targets_ref) if results else None
    from pathlib import Path

    from ..safety.io import check_writable, finish_interrupted_writes
    from .run import ReportRun
    from .verification import verification_entries

    if verification and verify_scope:
        raise BraxDiffError("--verification and --verify exclude each other")
    if against != "slm" and output is None:  # beside SLM-Lab's reports, never over them
        output = str(Path(settings.reports_dir) / against.replace("_", "-"))
    if history_ref and against != "slm":
        raise BraxDiffError("--history-ref reads SLM-Lab's spec history; it cannot be used with --against")
    run = ReportRun(snapshots, settings, table, extractor_classes, set_values, mapping,
                    variant=variant, no_cache=no_cache, step=step, brax_reference=brax_reference,
                    against=against, history_ref=history_ref)
    scopes = [] if family == ALL else run.scopes(family, env)
    if previous and len(scopes) > 1:
        raise BraxDiffError("--previous needs one scope (--family or --env)")
    if previous and not Path(previous).exists():  # a mistyped path would compare with nothing, silently
        raise BraxDiffError(f"--previous {previous}: no such file")
    loaded_verification = read_verification(verification) if verification else None
    for scope in scopes:  # where every file goes, before any extraction: a wrong --output is one line now
        output_files(scope, output, fmt, settings, len(scopes) > 1, variant)
    results_files: dict = {}
    code = None
    if joined is not None:  # where it goes and what code it reads, before any extraction
        code = joined[2] if results_code is None else run.resolve_slm(results_code)
        # Beside the family reports (a directory), or where --family all --output says.
        results_files = output_files(RESULTS_SCOPE, output, fmt, settings, False)
        for path in results_files.values():
            if path is not None and not check:
                check_writable(path)
    for text in run.extract_ahead(scopes):
        line(text)

    results = []
    linked_at: dict[str, str] = {}
    for scope in scopes:
        targets = output_files(scope, output, fmt, settings, len(scopes) > 1, variant)
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
        elif verify_scope:
            verify_dir = Path(settings.reports_dir) / "verify" / scope.name
            result = verify_scope(run.brax, run.slm, scope, verify_dir)
            verdicts = verification_entries(result, verify_dir, report_dir)
        texts, model, replaced = run.report(scope, previous_path=previous_path, verdicts=verdicts,
                                            linked_at=linked_at)
        files = [(path, texts[kind]) for kind, path in sorted(targets.items())]
        results.append(ScopeResult(scope.file_name(variant), model, replaced, files))
    if joined is not None:
        scores, targets_source, holder = joined
        texts, model = run.results_report(scores, targets_source, code, linked_at)
        files = [(path, texts[kind]) for kind, path in sorted(results_files.items())]
        previous_results = next((sibling(p, "json") for _, p in sorted(results_files.items()) if p is not None), None)
        results.append(ResultsReport(RESULTS_SCOPE.name, model, previous_results, files))
    return results


ALL = "all"  # `--family all`: the cross-family results report alone


# The cross-family results report's files: results.md / results.json in the reports directory.
RESULTS_SCOPE = Scope(family="results")


class ResultsReport(ScopeResult):
    """The cross-family results report: a change is one move naming the report."""

    def __init__(self, name: str, model: dict, previous_path: Path | None, files: list) -> None:
        super().__init__(name, model, previous_path if previous_path is not None and previous_path.exists() else None,
                         files)

    @property
    def previous(self) -> dict | None:
        from ..safety.io import read_json

        if isinstance(self._previous, Path):
            self._previous = read_json(self._previous, "previous results report")
        return self._previous

    def moves(self) -> list[Move]:
        from .render import same_findings
        from .review import Move

        if self.previous is not None and same_findings(self.previous, self.model):
            return []
        note = "a new report" if self.previous is None else "the published results' join moved"
        return [Move("report", self.name, self.name, "all families", note=note)]


def rule_table(user_file: str | None):
    """A function giving the rule table, loaded on the first call for the shipped one: a report the report cache answers
    never needs it (nor PyYAML and Jinja, which loading it imports). A user's file is loaded
    now, so that a bad one is one error line before any work."""
    import functools

    if user_file is not None:
        from ..compare.rules import load_rules

        table = load_rules(user_file)
        return lambda: table

    @functools.lru_cache(maxsize=1)
    def shipped():
        from ..compare.rules import load_rules

        return load_rules()
    return shipped


def read_verification(path: str) -> dict:
    """A verify.json (read within limits) whose structure the report can show, else one error line."""
    from ..safety.io import read_json
    from .verification import check_result

    return check_result(read_json(path, "--verification"), f"--verification {path}")


def stale_files(rendered: list[tuple[Path | None, str]], models: dict,
           pending: set[Path]) -> tuple[list[Path], list[Path]]:
    """Files that say something else than the regenerated report (stale), and files that
    differ only in the commits and lines they were read from (refreshable).

    A Markdown file is refreshable when the JSON beside it is, and it is still the
    rendering of that JSON (not edited by hand). A missing file, or one in ``pending`` (an
    interrupted write), is stale."""
    from .render import read_previous, render_markdown, same_findings

    stale, refreshable = [], []
    for path, text in rendered:
        current = text_on_disk(path)
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


def text_on_disk(path: Path) -> str | None:
    """The report file's text; None when it is not there (``--check`` calls that stale)."""
    from ..safety.io import read_text

    if not path.exists():
        return None
    try:
        return read_text(path, "report file")
    except BraxDiffError:
        return None


def at_or_above(results: list[ScopeResult], threshold: str) -> list[str]:
    """``scope: key (severity)`` for every difference at or above ``threshold`` (``--fail-on``)."""
    from ..compare.severity import worst_at_or_above

    return [f"{result.name}: {d['key']} ({d['severity']})" for result in results
            if "differences" in result.model for d in worst_at_or_above(result.model, threshold)]


def unknown_keys(results: list[ScopeResult]) -> list[str]:
    """``scope: key`` for every compared key unknown on either side (``--strict``)."""
    return [f"{result.name}: {d['key']}" for result in results for d in result.model.get("differences", [])
            if d["status"] == "unknown"]
