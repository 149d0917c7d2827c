"""Output helpers shared by the commands: JSON to stdout, rich tables for people."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Iterable

from ..errors import BraxDiffError
from ..facts.model import Extraction, dumps, format_value
from ..facts.vocabulary import KEYS, TOPICS
from ..safety.escape import json_for_a_log, one_line

FORMATS = ("table", "json")


if TYPE_CHECKING:
    from rich.console import Console


# Width of a table printed to a pipe: rich would fit it to 80 columns and cut cells with
# "…"; a script reading it must see every path in full.
PIPE_WIDTH = 100_000


def stdout_console() -> "Console":
    from rich.console import Console  # imported when a table is printed, not at start-up

    console = Console(soft_wrap=True, highlight=False)
    if not console.is_terminal:
        console.width = PIPE_WIDTH
    return console


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """``--set`` values, ``["max_frame=1e8", "env=playground/CartpoleBalance"]``, as a dict.

    A KEY given twice with two values is an error: SLM-Lab's ``-s`` substitutes the first, most
    tools let the last win, and a silent choice between them is a wrong value either way."""
    sets: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BraxDiffError(f"--set {item!r}: expected KEY=VALUE, e.g. --set max_frame=100000000")
        key = key.strip()
        if key in sets and sets[key] != value:
            raise BraxDiffError(f"--set {key} is given twice ({sets[key]!r} and {value!r}): give it once")
        sets[key] = value
    return sets


def user_mapping(path: str | None) -> dict | None:
    """The user's variant -> family/env mapping file, validated; None keeps the shipped one."""
    if not path:
        return None
    from brax_diff.extractors.mapping import load_mapping

    return load_mapping(path)


class StrictFailure(BraxDiffError):
    """--strict and something the tool could not read (or an ERROR): exit 1 after the output."""

    exit_code = 1


def fail_strict(extractions: Iterable[Extraction], errors: bool = False) -> None:
    """``--strict``: exit 1 on an unknown key (and, with ``errors``, on an ERROR finding)."""
    extractions = list(extractions)
    unknown = [(e, k) for e in extractions for k in e.unknown_keys()]
    if unknown:
        keys = sorted({k for _, k in unknown})
        first = unknown[0][0].facts[unknown[0][1]].unknown
        raise StrictFailure(f"--strict: {len(keys)} key(s) unknown ({', '.join(keys[:6])}"
                            f"{', ...' if len(keys) > 6 else ''}); first: {first}")
    failing = [f for e in extractions for f in e.findings if f.severity == "ERROR"] if errors else []
    if failing:
        raise StrictFailure(f"--strict: {len(failing)} ERROR finding(s); first: {failing[0].kind}: "
                            f"{failing[0].message}")


def print_verdicts(verdicts: list[tuple[str, bool, str | None]], ref: str) -> None:
    """One line per variant: whether it can train at the ref, and if not why."""
    console = stdout_console()
    console.print(one_line(f"Can each variant train at {ref}?"), markup=False)
    for name, ok, why in verdicts:  # upstream names and messages: one line each, no workflow command
        console.print(one_line(f"{name}: trains" if ok else f"{name}: fails: {why}"), markup=False)


def print_json(data) -> None:
    sys.stdout.write(json_for_a_log(dumps(data)))


def print_extractions(extractions: Iterable[Extraction], fmt: str) -> None:
    extractions = list(extractions)
    if fmt == "json":
        payload = [e.to_json() for e in extractions]
        print_json(payload[0] if len(payload) == 1 else payload)
        return
    from rich.markup import escape
    from rich.table import Table

    console = stdout_console()
    order = {name: i for i, (name, _) in enumerate(TOPICS)}
    for extraction in extractions:
        scope = ", ".join(f"{k}={v}" for k, v in sorted(extraction.scope.items()) if v is not None) or "defaults"
        sources = "; ".join(f"{name} {src.commit[:12]} ({src.date})" for name, src in sorted(extraction.sources.items()))
        table = Table(title=escape(one_line(f"{extraction.side}: {scope}")), caption=escape(one_line(sources)),
                      title_justify="left")
        table.add_column("key")
        table.add_column("value")
        table.add_column("from")
        keys = sorted(extraction.facts, key=lambda k: (order.get(KEYS[k].topic if k in KEYS else "", 99), k))
        for key in keys:
            fact = extraction.facts[key]
            where = ", ".join(f"{p.path}:{p.line}" for p in fact.provenance[:3])
            if len(fact.provenance) > 3:
                where += f" (+{len(fact.provenance) - 3})"
            value = "unknown" if fact.is_unknown else format_value(fact.value)
            if fact.declared is not None and fact.declared != fact.value:
                value += f" (declared {format_value(fact.declared)})"
            table.add_row(*(escape(one_line(cell)) for cell in (key, value, where)))
        console.print(table)
        for finding in sorted(extraction.findings, key=lambda f: f.sort_key()):
            where = ", ".join(f"{p.path}:{p.line}" for p in finding.provenance)
            text = f"{finding.kind}: {finding.message}" + (f" ({where})" if where else "")
            console.print(f"[bold]{finding.severity}[/bold] {escape(one_line(text))}")  # upstream text, not markup
