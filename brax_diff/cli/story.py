"""What a run tells the person at the terminal, on stderr (stdout carries only what was asked
for, e.g. ``--output -``).

On a terminal: a live line while repositories are opened and extractions run (which side,
which ref, which family or env), then each scope's summary table (severity, count, keys) and
every ERROR finding, then the files written. Not on a terminal: no live line; the same summary
and ERROR findings as plain lines (no table, no colour, nothing cut), then the files written.
``quiet``: nothing but warnings and errors.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ..compare.severity import SEVERITIES
from ..safety.escape import one_line

if TYPE_CHECKING:
    from rich.table import Table

# What makes rich treat a stream that is not a tty as a terminal.
_TERMINAL_ENV = ("FORCE_COLOR", "TTY_INTERACTIVE", "TTY_COMPATIBLE")

SEVERITY_STYLES = {"CRITICAL": "bold red", "IMPORTANT": "bold yellow", "MINOR": "yellow"}
SIDE_TITLES = {"brax": "Brax", "playground": "Playground", "slm": "SLM-Lab", "rsl_rl": "RSL-RL"}


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


class PlainConsole:
    """Lines to stderr as they are: what rich prints when stderr is no terminal, without
    importing rich (a tenth of a second) for a run that shows nothing live."""

    is_terminal = False

    def print(self, text: str) -> None:
        print(text, file=sys.stderr)


class Story:
    """``live``: tell the whole story (default: when ``console`` is a terminal)."""

    def __init__(self, console: Any, *, quiet: bool = False, live: bool | None = None) -> None:
        self.console = console
        self.quiet = quiet
        self.live = (console.is_terminal if live is None else live) and not quiet
        self._plain = isinstance(console, PlainConsole)
        self._progress = None
        self._task = None

    @classmethod
    def on_stderr(cls, quiet: bool = False) -> "Story":
        if not sys.stderr.isatty() and not any(os.environ.get(name) for name in _TERMINAL_ENV):
            return cls(PlainConsole(), quiet=quiet)
        from rich.console import Console

        return cls(Console(stderr=True, soft_wrap=True, highlight=False), quiet=quiet)

    def _escaped(self, text: str) -> str:
        # Upstream text (keys, names, messages) is in these lines: one_line keeps each one line
        # that a CI runner does not read as a workflow command.
        text = one_line(text)
        return text if self._plain else escape(text)

    def line(self, text: str) -> None:
        """A line shown even with quiet (what --check found stale)."""
        self.console.print(self._escaped(text))

    @contextlib.contextmanager
    def running(self) -> Iterator["Story"]:
        """The live progress line, erased when the work is done."""
        if not self.live:
            yield self
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=True) as progress:
            self._progress, self._task = progress, progress.add_task("starting", total=None)
            try:
                yield self
            finally:
                self._progress = self._task = None

    def step(self, text: str) -> None:
        """What the run is doing now (shown only on a terminal)."""
        if self._progress is not None:
            self._progress.update(self._task, description=escape(one_line(text)))

    def say(self, text: str) -> None:
        """A line that is part of the normal output (files written, up to date): not with quiet."""
        if not self.quiet:
            self.console.print(self._escaped(text))

    def warn(self, text: str) -> None:
        """A warning: always shown, one line."""
        self.console.print(f"warning: {self._escaped(text)}")

    def wrote(self, path: Path) -> None:
        self.say(f"wrote {path}")

    def summary(self, model: dict) -> None:
        """One scope's severity summary and its ERROR findings: a table on a terminal, plain
        lines elsewhere; not with quiet."""
        if self.quiet:
            return
        if model.get("kind") == "results":
            for line in results_lines(model):
                self.console.print(self._escaped(line))
            return
        if self._plain:
            for line in [*summary_lines(model), *(f"ERROR {f}" for f in error_findings(model))]:
                self.console.print(one_line(line))
            return
        self.console.print(summary_table(model))
        for finding in error_findings(model):
            self.console.print(f"[bold red]ERROR[/] {escape(one_line(finding))}")


def scope_title(model: dict) -> str:
    scope = model["scope"]
    what = f"{scope['env']} ({scope['family']})" if scope.get("env") else scope["family"]
    refs = ", ".join(f"{SIDE_TITLES.get(s['name'], s['name'])} {s.get('ref') or ''} {s['commit'][:7]}".replace("  ", " ")
                     + (" + uncommitted" if s.get("uncommitted") else "") for s in model["sources"])
    if "against" in model:  # another side than SLM-Lab: it has no variants
        return f"{what}: against {model['against']['title']}; {refs}"
    return f"{what}: SLM-Lab variant {scope['variant']}; {refs}"


def keys_by_severity(model: dict) -> list[tuple[str, list[str]]]:
    return [(severity, [d["key"] for d in model["differences"] if d["severity"] == severity])
            for severity in SEVERITIES]


def summary_table(model: dict) -> "Table":
    from rich.table import Table

    table = Table(title=escape(one_line(scope_title(model))), title_justify="left", show_edge=False)
    table.add_column("Severity")
    table.add_column("Differences", justify="right")
    table.add_column("Keys")
    for severity, keys in keys_by_severity(model):
        style = SEVERITY_STYLES.get(severity, "")
        table.add_row(f"[{style}]{severity}[/]" if style else severity, str(len(keys)),
                      escape(one_line(", ".join(keys))))
    table.add_row("match", str(model["summary"]["match"]), "")
    return table


def summary_lines(model: dict) -> list[str]:
    """The summary table as plain lines, for a pipe: the title, then ``  SEVERITY COUNT: keys``
    per severity and ``  match COUNT``."""
    lines = [scope_title(model)]
    for severity, keys in keys_by_severity(model):
        lines.append(f"  {severity} {len(keys)}" + (f": {', '.join(keys)}" if keys else ""))
    lines.append(f"  match {model['summary']['match']}")
    return lines


def results_lines(model: dict) -> list[str]:
    """The results report in a few lines: who misses, and the three most separating differences."""
    ranking = model["ranking"]
    judged = len(ranking["missing"]) + len(ranking["passing"])
    unranked = [r["env"] for r in model["rows"] if r["miss"] and not r["trains"]]
    lines = [f"results: {len(ranking['missing']) + len(unranked)} of {judged + len(unranked)} environments miss "
             f"their target ({len(unranked)} not ranked: their variant cannot train at the results' code); "
             f"{len(model['unjoined'])} row(s) not joined"]
    for single in [s for s in ranking["singles"] if s["separation"] is not None][:3]:
        lines.append(f"  {single['id']}: {single['missing']} of {single['missing_of']} missing, "
                     f"{single['passing']} of {single['passing_of']} passing ({single['separation']:+.2f})")
    return lines


def error_findings(model: dict) -> list[str]:
    """Each ERROR finding as one line: side, kind, message, where."""
    out = []
    for finding in model["findings"]:
        if finding["severity"] != "ERROR":
            continue
        where = ", ".join(f"{p['path']}:{p['line']}" for p in finding.get("provenance", []))
        side = SIDE_TITLES.get(finding.get("side", ""), finding.get("side", ""))
        out.append(f"{side} {finding['kind']}: {finding['message']}" + (f" ({where})" if where else ""))
    return out
