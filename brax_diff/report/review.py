"""What moved between a report on disk and the regenerated one, for a reviewer.

:func:`moves` lists each change a reader would care about: a value that moved on either
side, a classification that changed, a per-environment matrix cell, a finding that appeared
or went away; never a commit or a line that moved alone. :func:`github_annotations` prints
them as GitHub Actions annotations on the report file (``report --check --format github``);
:func:`markdown_summary` is the short table a workflow puts in its job summary and in the
body of its pull request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from ..compare.pairing import values_equal
from ..facts.model import Provenance, format_value, md_cell
from ..safety.escape import md_code, md_text  # rows are found as the report escapes them

SIDES = (("brax", "Brax"), ("slm", "SLM-Lab"))
FINDINGS, MATRIX = "## Findings", "## Per-environment matrix"  # the report's section headings
# The matrix table's own header line begins so (the "Scores not comparable" table above it, under the
# same heading, has the same first two columns: an environment's row there is not its matrix row).
MATRIX_TABLE = "| Environment | Variant | `"


@dataclass(frozen=True)
class Move:
    """One change in one report. ``values``: (side title, old, new) for each side whose value
    moved; ``sides``: the same for every side, where both reports show both values;
    ``links``: (label, url) of the lines before and after; ``rows``: (section heading or
    None for anywhere, text) of the report lines that show the move, the first found wins."""

    kind: str  # "value" (a difference row), "matrix" (an env's cell), "finding", "report" (new)
    report: str  # the report's scope name: dm_control, BallInCup
    key: str  # a canonical key, or the finding's kind
    where: str  # the family/env scope, e.g. "dm_control" or "dm_control / BallInCup"
    values: tuple[tuple[str, Any, Any], ...] = ()
    sides: tuple[tuple[str, Any, Any], ...] = ()
    was: str | None = None  # classification before: "IMPORTANT", "match", "absent"
    now: str | None = None
    links: tuple[tuple[str, str], ...] = ()
    note: str | None = None  # a finding's message
    rows: tuple[tuple[str | None, str], ...] = ()
    path: Path | None = None  # the Markdown report, for annotations
    line: int = 1

    @property
    def severity_text(self) -> str:
        return f"{self.was or '—'} → {self.now or '—'}" if self.was != self.now else (self.now or "")

    @property
    def turns_on_match(self) -> bool:
        """A difference resolved (or a match broken), with both sides' values known."""
        return bool(self.sides) and self.was != self.now and "match" in (self.was, self.now)

    def change(self, show: Callable[[Any], str] = format_value) -> str:
        """What moved: each side's value, or, where a key became or stopped being a match,
        both sides before and after ("was Brax 0.3 vs SLM-Lab 0.2, now both 0.2")."""
        if self.turns_on_match:
            return f"was {_both(self.sides, 1, show)}, now {_both(self.sides, 2, show)}"
        return "; ".join(f"{title} {show(old)} → {show(new)}" for title, old, new in self.values)

    def sentence(self) -> str:
        change = self.change()
        if self.turns_on_match:
            parts = [f"{change}: {self.severity_text}"]
        else:
            parts = [change] if change else []
            if self.was != self.now:
                parts.append(f"classification {self.severity_text}")
        if self.note:
            parts.append(self.note)
        return f"{self.key} ({self.where}): " + "; ".join(parts)


def _both(sides: tuple[tuple[str, Any, Any], ...], at: int, show: Callable[[Any], str]) -> str:
    """The sides' values at ``at`` (1 before, 2 after): "both 0.2", else "Brax 0.3 vs SLM-Lab 0.2"."""
    first = sides[0][at]
    if all(values_equal(side[at], first) for side in sides):
        return f"both {show(first)}"
    return " vs ".join(f"{side[0]} {show(side[at])}" for side in sides)


def _state(difference: dict | None) -> str:
    if difference is None:
        return "absent"
    return difference.get("severity") or difference.get("status") or "match"


def _value(fact: dict | None) -> Any:
    return None if fact is None else fact.get("value")


def _first_url(fact: dict | None) -> str | None:
    for p in (fact or {}).get("provenance", []):
        line = Provenance.from_json(p)
        if not line.uncommitted:
            return line.url
    return None


def _scope_name(model: dict) -> str:
    scope = model["scope"]
    return f"{scope['family']} / {scope['env']}" if scope.get("env") else str(scope.get("family"))


def _difference_moves(old: dict, new: dict, report: str) -> list[Move]:
    before = {d["key"]: d for d in old.get("differences", [])}
    after = {d["key"]: d for d in new.get("differences", [])}
    order = [d["key"] for d in new.get("differences", [])] + [k for k in before if k not in after]
    # A key folded into its parent's row (one difference, one row) moves with that row.
    folded = {f["key"] for model in (old, new) for d in model.get("differences", []) for f in d.get("folded", [])}
    out = []
    for key in order:
        if key in folded:
            continue
        was, now = before.get(key), after.get(key)
        values, links = [], []
        for side, title in SIDES:
            old_fact, new_fact = (was or {}).get(side), (now or {}).get(side)
            if not values_equal(_value(old_fact), _value(new_fact)) or (old_fact is None) != (new_fact is None):
                values.append((title, _value(old_fact), _value(new_fact)))
                links += [(f"{title} was", url) for url in [_first_url(old_fact)] if url]
                links += [(f"{title} now", url) for url in [_first_url(new_fact)] if url]
        if values or _state(was) != _state(now):
            known = all((d or {}).get(side) is not None for d in (was, now) for side, _ in SIDES)
            sides = tuple((title, _value(was[side]), _value(now[side])) for side, title in SIDES) if known else ()
            out.append(Move("value", report, key, _scope_name(new), tuple(values), sides, _state(was), _state(now),
                            tuple(links), rows=((None, f"| {md_code(key)} "),)))  # "|" or the keys folded in it
    return out


def _matrix_cells(matrix: dict | None) -> dict[tuple[str, str], dict]:
    """(env, key) -> cell for every key the matrix keeps: a column, a difference shared by
    every env (``uniform``) or a match in every env (``matching``; a report written before
    it was kept lacks those)."""
    if not matrix:
        return {}
    cells = {}
    for row in matrix.get("rows", []):
        for key, cell in (row.get("cells") or {}).items():
            if cell is not None:
                cells[(row["env"], key)] = cell
        for shared in matrix.get("uniform", []) + matrix.get("matching", []):
            cells[(row["env"], shared["key"])] = shared
    return cells


def _matrix_moves(old: dict, new: dict, report: str) -> list[Move]:
    if not new.get("matrix") and not old.get("matrix"):
        return []
    before, after = _matrix_cells(old.get("matrix")), _matrix_cells(new.get("matrix"))
    family = new["scope"].get("family")
    groups: dict[tuple, list[str]] = {}  # one move per key and change, listing its envs
    for env, key in sorted(set(before) | set(after), key=lambda item: (item[1], item[0])):
        was, now = before.get((env, key)), after.get((env, key))
        states = (_state(was) if was else "match", _state(now) if now else "match")
        values, sides = (), ()
        if was and now:  # a cell a report does not keep is a match of values it does not say
            sides = tuple((title, was.get(side), now.get(side)) for side, title in SIDES)
            values = tuple(side for side in sides if not values_equal(side[1], side[2]))
            if states[0] == states[1] or "match" not in states:
                sides = ()  # only a match turned on or off names both sides (and splits the envs by them)
        if values or states[0] != states[1]:
            groups.setdefault((key, _as_key(values), _as_key(sides), states), []).append(env)
    shown = old.get("matrix") or {}
    out = []
    for (key, values, sides, (was, now)), envs in groups.items():
        rows = [(None, f"| {md_code(key)} |")]  # the key's own row, when the matrix of the report on disk lacks it
        if key in shown.get("columns", []):
            rows.insert(0, (MATRIX_TABLE, f"| {md_text(envs[0])} |"))
        elif key in {u["key"] for u in shown.get("uniform", [])}:
            rows.insert(0, (MATRIX, f"| {md_code(key)} |"))
        out.append(Move("matrix", report, key, f"{family} / {', '.join(envs)}", _from_key(values), _from_key(sides),
                        was, now, rows=tuple(rows)))
    return out


def _as_key(values: tuple) -> str:
    """Values (lists among them) as a dict key."""
    return json.dumps(values, sort_keys=True)


def _from_key(text: str) -> tuple:
    return tuple(tuple(item) for item in json.loads(text))


def _finding_id(finding: dict) -> tuple:
    return (finding.get("side"), finding.get("severity"), finding.get("kind"), finding.get("message"))


def _finding_moves(old: dict, new: dict, report: str) -> list[Move]:
    before = {_finding_id(f): f for f in old.get("findings", [])}
    after = {_finding_id(f): f for f in new.get("findings", [])}
    out = []
    for ident in [i for i in after if i not in before] + [i for i in before if i not in after]:
        finding = after.get(ident) or before[ident]
        side = dict(SIDES).get(finding.get("side"), finding.get("side"))
        added = ident in after
        links = tuple((f"{side} {'now' if added else 'was'}", Provenance.from_json(p).url)
                      for p in finding.get("provenance", [])[:1] if not p.get("uncommitted"))
        out.append(Move("finding", report, finding["kind"], _scope_name(new), (), (),
                        None if added else finding["severity"], finding["severity"] if added else None, links,
                        note=f"{side} {finding['severity']} finding {'new' if added else 'gone'}: {finding['message']}",
                        rows=((FINDINGS, f"| {finding['kind']} | {_cell(finding['message'])} |"), (None, FINDINGS))))
    return out


def moves(old: dict | None, new: dict, report: str) -> list[Move]:
    """Every change from report model ``old`` (the JSON on disk) to ``new``; a report that did
    not exist yet is one move."""
    if old is None:
        return [Move("report", report, report, _scope_name(new), note="a new report")]
    return _difference_moves(old, new, report) + _matrix_moves(old, new, report) + _finding_moves(old, new, report)


def locate(found: Iterable[Move], path: Path | None, markdown: str) -> list[Move]:
    """The moves placed on the first line of ``markdown`` that shows them (a key's row, an
    env's matrix row, a finding's row; a new finding: the findings heading; else line 1).

    ``markdown`` is the report the annotation's ``path`` names as its reader opens it: the
    file on disk at the commit checked (:func:`annotated_text`). Lines are counted at "\n"
    alone, as GitHub counts them (``splitlines`` also breaks at form feeds and U+2028)."""
    lines = markdown.split("\n")

    def line_of(move: Move) -> int:
        for section, row in move.rows:
            start = 0 if section is None else next((n for n, text in enumerate(lines) if text == section or (
                section.startswith("| ") and text.startswith(section))), None)
            if start is None:
                continue
            found_at = next((n for n in range(start, len(lines)) if row in lines[n]), None)
            if found_at is not None:
                return found_at + 1
        return 1

    return [replace(m, path=path, line=line_of(m)) for m in found]


def annotated_text(path: Path | None, regenerated: str) -> str:
    """The text an annotation on the report ``path`` points into: the file as it is on disk
    (``--check`` writes nothing, and an annotation opens the file at the commit checked,
    whose lines the regenerated report has shifted), else ``regenerated`` (no file yet)."""
    from ..errors import BraxDiffError
    from ..safety.io import read_text

    if path is not None and path.is_file():
        try:
            return read_text(path, "report file")
        except BraxDiffError:
            pass
    return regenerated


from ..safety.escape import command_data as _escape_data, command_property as _escape_property


def github_annotations(found: Iterable[Move]) -> str:
    """One ``::warning file=...,line=...::`` line per move (``::error`` for a new CRITICAL)."""
    out = []
    for move in found:
        level = "error" if move.now == "CRITICAL" and move.was != "CRITICAL" else "warning"
        where = f"file={_escape_property(str(move.path))},line={move.line}," if move.path else ""
        title = _escape_property(f"brax-diff: {move.key} moved ({move.report})")
        out.append(f"::{level} {where}title={title}::{_escape_data(move.sentence())}")
    return "".join(line + "\n" for line in out)


def _cell(text: str) -> str:
    # The report's own cell escaping: a finding's row is found in the Markdown by this text.
    return md_cell(text)


def markdown_summary(found: list[Move], sources: Iterable[dict] = (), *, stale: int = 0) -> str:
    """The reviewer's table: what moved, where, before → after, classification, both lines."""
    lines = ["## brax-diff: what moved", ""]
    moved = [f"{s['title']} `{s['ref']}` {s['from'][:12]} → {s['to'][:12]}" for s in sources]
    if moved:
        lines += ["Commits: " + "; ".join(moved) + ".", ""]
    if not found:
        lines.append("No value, classification or finding moved" + (f" ({stale} report file(s) stale)." if stale
                                                                    else "."))
        return "\n".join(lines) + "\n"
    lines += ["| Report | Key | Scope | Was → now | Classification | Lines |", "| --- | --- | --- | --- | --- | --- |"]
    for move in found:
        # Upstream keys and values: code spans no backtick ends; the rest as table-cell prose.
        change = move.change(lambda value: md_code(format_value(value))) or _cell(move.note or "")
        links = " · ".join(f"[{label}]({url})" for label, url in move.links) or "—"
        lines.append(f"| {_cell(move.report)} | {md_code(move.key)} | {_cell(move.where)} | {change} | "
                     f"{_cell(move.severity_text)} | {links} |")
    return "\n".join(lines) + "\n"


def source_moves(old: dict | None, new: dict) -> list[dict]:
    """Sources whose commit moved: title, ref, from, to."""
    before = {s["name"]: s for s in (old or {}).get("sources", [])}
    return [{"title": s["title"], "ref": s.get("ref") or "", "from": before[s["name"]]["commit"], "to": s["commit"]}
            for s in new.get("sources", []) if s["name"] in before and before[s["name"]]["commit"] != s["commit"]]
