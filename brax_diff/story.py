"""What a run tells the person at the terminal, on stderr (stdout carries only what was asked
for, e.g. ``--output -``).

On a terminal: a live line while repositories are opened and extractions run (which side,
which ref, which family or env), then each scope's summary table (severity, count, keys) and
every ERROR finding, then the files written. Not on a terminal: only the files written, as
before. ``quiet``: nothing but warnings and errors.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from .rules import SEVERITIES

SEVERITY_STYLES = {"CRITICAL": "bold red", "IMPORTANT": "bold yellow", "MINOR": "yellow"}
SIDE_TITLES = {"brax": "Brax", "playground": "Playground", "slm": "SLM-Lab"}


class Story:
    """``live``: tell the whole story (default: when ``console`` is a terminal)."""

    def __init__(self, console: Console, *, quiet: bool = False, live: bool | None = None) -> None:
        self.console = console
        self.quiet = quiet
        self.live = (console.is_terminal if live is None else live) and not quiet
        self._progress: Progress | None = None
        self._task = None

    @classmethod
    def on_stderr(cls, quiet: bool = False) -> "Story":
        return cls(Console(stderr=True, soft_wrap=True, highlight=False), quiet=quiet)

    @contextlib.contextmanager
    def running(self) -> Iterator["Story"]:
        """The live progress line, erased when the work is done."""
        if not self.live:
            yield self
            return
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
            self._progress.update(self._task, description=escape(text))

    def say(self, text: str) -> None:
        """A line that is part of the normal output (files written, up to date): not with quiet."""
        if not self.quiet:
            self.console.print(escape(text))

    def warn(self, text: str) -> None:
        """A warning: always shown, one line."""
        self.console.print(f"warning: {escape(text)}")

    def wrote(self, path: Path) -> None:
        self.say(f"wrote {path}")

    def summary(self, model: dict) -> None:
        """One scope's severity table and its ERROR findings (on a terminal only)."""
        if not self.live:
            return
        self.console.print(summary_table(model))
        for finding in error_findings(model):
            self.console.print(f"[bold red]ERROR[/] {escape(finding)}")


def scope_title(model: dict) -> str:
    scope = model["scope"]
    what = f"{scope['env']} ({scope['family']})" if scope.get("env") else scope["family"]
    refs = ", ".join(f"{SIDE_TITLES.get(s['name'], s['name'])} {s.get('ref') or ''} {s['commit'][:7]}".replace("  ", " ")
                     + (" + uncommitted" if s.get("uncommitted") else "") for s in model["sources"])
    return f"{what}: SLM-Lab variant {scope['variant']}; {refs}"


def summary_table(model: dict) -> Table:
    table = Table(title=escape(scope_title(model)), title_justify="left", show_edge=False)
    table.add_column("Severity")
    table.add_column("Differences", justify="right")
    table.add_column("Keys")
    for severity in SEVERITIES:
        keys = [d["key"] for d in model["differences"] if d["severity"] == severity]
        style = SEVERITY_STYLES.get(severity, "")
        table.add_row(f"[{style}]{severity}[/]" if style else severity, str(len(keys)), ", ".join(keys))
    table.add_row("match", str(model["summary"]["match"]), "")
    return table


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
