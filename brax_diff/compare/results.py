"""Published per-environment results, joined with the environment matrix.

Sources: SLM-Lab's ``docs/BENCHMARKS.md`` (its Playground tables in either shape: ``| ENV |
Algorithm | Status | MA | SPEC_NAME | HF Data | Target (ref) | ... |`` up to mid-March 2026, then
``| ENV | MA | SPEC_NAME | HF Data |``), read at a ref; or a plain CSV / YAML file of ``env,
score, target``. Scores can come from one ref and targets from another (the later tables
dropped their targets).

The join answers the question the hand-written comparison was written for: which differences
do the environments below their target share, that the ones reaching it do not have? Each
difference is counted over the environments that have it, below target (failing or near) and
at target (passing); environments whose scores cannot be compared (another episode length or
action repeat, :func:`brax_diff.report.render.env_matrix`) are counted apart. An association, not a
cause: the counts say what the failing environments have in common, not what makes them fail.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import BraxDiffError

# A score at or above this fraction of its target is "near" (SLM-Lab's legend: "⚠️ Close (>80%)").
NEAR_FRACTION = 0.8
STATUS_SYMBOLS = {"✅": "pass", "⚠️": "near", "⚠": "near", "❌": "fail", "📊": "near"}
ENV_PREFIX = "playground/"


@dataclass(frozen=True)
class Result:
    """One environment's published score and target, with the lines they are read from."""

    env: str
    score: float | None
    target: float | None = None
    symbol: str | None = None  # the table's own status (✅ ⚠️ ❌), when it has a Status column
    line: int | None = None  # the row's line in the source


@dataclass(frozen=True)
class ResultsSource:
    """Where results come from: a label for the report (path and commit, or a file's name) and rows."""

    label: str
    rows: dict[str, Result]
    url: str | None = None  # the file at the commit it was read at, for a link

    def to_json(self) -> dict:
        return {"label": self.label, "url": self.url, "environments": len(self.rows)}

    def identity(self) -> list:
        """What a report made from these results depends on (the report cache's key)."""
        return [self.label, [[env, r.score, r.target, r.symbol] for env, r in sorted(self.rows.items())]]


def parse_benchmarks(text: str) -> dict[str, Result]:
    """Every ``playground/ENV`` row of the Markdown tables whose header names ``ENV`` and ``MA``."""
    out: dict[str, Result] = {}
    columns: dict[str, int] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("|"):
            columns = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = [c.strip("* ").lower() for c in cells]
        if "env" in names and "ma" in names:
            columns = {name: i for i, name in enumerate(names)}
            continue
        if columns is None or not cells or not cells[0].startswith(ENV_PREFIX):
            continue
        env = cells[0][len(ENV_PREFIX):].strip()
        target_column = next((i for name, i in columns.items() if name.startswith("target")), None)
        status_column = columns.get("status")
        out[env] = Result(env, _number(_cell(cells, columns["ma"])),
                          _number(_cell(cells, target_column)) if target_column is not None else None,
                          _cell(cells, status_column) if status_column is not None else None, number)
    return out


def parse_table(text: str, name: str) -> dict[str, Result]:
    """A CSV (header ``env,score,target``) or YAML file (a list of ``{env, score, target}``, or a
    mapping ``env: {score, target}``) of results."""
    if name.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise BraxDiffError(f"--results {name}: not YAML ({str(exc).splitlines()[0]})") from None
        if isinstance(data, dict):
            data = [{"env": env, **(value if isinstance(value, dict) else {"score": value})}
                    for env, value in data.items()]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise BraxDiffError(f"--results {name}: expected a list of {{env, score, target}} or a mapping env: {{...}}")
        rows = data
    else:
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or "env" not in reader.fieldnames or "score" not in reader.fieldnames:
            raise BraxDiffError(f"--results {name}: a CSV needs the columns env and score (and target)")
        rows = list(reader)
    out: dict[str, Result] = {}
    for index, row in enumerate(rows, start=2):
        env = str(row.get("env") or "").strip().removeprefix(ENV_PREFIX)
        if not env:
            raise BraxDiffError(f"--results {name}: row {index - 1} has no env")
        out[env] = Result(env, _number(row.get("score")), _number(row.get("target")), None, None)
    return out


def status(score: float | None, target: float | None, symbol: str | None) -> tuple[float | None, str]:
    """(score / target, "pass" | "near" | "fail" | "unknown"). A target decides; without one, the
    table's own symbol; a non-positive target compares by value alone (a ratio would mislead)."""
    if score is None:
        return None, "unknown"
    if target is not None:
        if target <= 0:
            return None, "pass" if score >= target else "fail"
        ratio = score / target
        return round(ratio, 4), "pass" if ratio >= 1 else "near" if ratio >= NEAR_FRACTION else "fail"
    return None, STATUS_SYMBOLS.get((symbol or "").replace("\ufe0f", "️").strip(), "unknown")


def join(matrix: dict, scores: ResultsSource, targets: ResultsSource | None = None) -> dict:
    """The matrix's environments with their score, target, ratio and status, and for every
    difference the counts of environments below and at target that have it, most separating first."""
    incomparable = {row["env"] for row in matrix.get("incomparable", [])}
    rows = []
    for row in matrix["rows"]:
        env = row["env"]
        got = scores.rows.get(env)
        target_row = (targets or scores).rows.get(env)
        score = got.score if got else None
        target = target_row.target if target_row else None
        symbol = got.symbol if got and (targets is None or target_row is got) else None
        ratio, verdict = status(score, target, symbol)
        rows.append({"env": env, "score": score, "target": target, "ratio": ratio, "status": verdict,
                     "comparable": env not in incomparable})
    return {"scores": scores.to_json(), "targets": targets.to_json() if targets else None,
            "near_fraction": NEAR_FRACTION, "rows": rows, "shared": _shared(matrix, rows)}


def _differs(cell: dict | None) -> bool:
    return cell is not None and cell.get("status") not in ("match", "unknown")


def _shared(matrix: dict, rows: list[dict]) -> list[dict]:
    """Per difference: how many environments below target (fail or near) and at target have it."""
    below = [r["env"] for r in rows if r["comparable"] and r["status"] in ("fail", "near")]
    at = [r["env"] for r in rows if r["comparable"] and r["status"] == "pass"]
    apart = [r["env"] for r in rows if not r["comparable"] and r["status"] != "unknown"]
    cells = {row["env"]: row["cells"] for row in matrix["rows"]}
    shared_by_all = {u["key"]: u for u in matrix.get("uniform", [])}
    keys = list(matrix.get("columns", [])) + [k for k in shared_by_all if k not in matrix.get("columns", [])]
    out = []
    for key in keys:
        def has(env: str) -> bool:
            return _differs(shared_by_all[key]) if key in shared_by_all else _differs(cells[env].get(key))
        below_with, at_with = [e for e in below if has(e)], [e for e in at if has(e)]
        apart_with = [e for e in apart if has(e)]
        if not below_with and not at_with and not apart_with:
            continue
        # With no environment below (or at) target there is nothing to separate: no number.
        separation = _fraction(below_with, below) - _fraction(at_with, at) if below and at else None
        out.append({"key": key, "below": len(below_with), "below_of": len(below), "at": len(at_with),
                    "at_of": len(at), "apart": len(apart_with), "apart_of": len(apart),
                    "separation": None if separation is None else round(separation, 4),
                    "below_envs": sorted(below_with),
                    "at_envs": sorted(at_with), "everywhere": key in shared_by_all})
    return sorted(out, key=lambda s: (s["separation"] is None, -(s["separation"] or 0), s["everywhere"], s["key"]))


def _fraction(part: Iterable, whole: list) -> float:
    return len(list(part)) / len(whole) if whole else 0.0


def _cell(cells: list[str], index: int | None) -> str | None:
    return cells[index] if index is not None and index < len(cells) else None


def _number(value: Any) -> float | None:
    """A table's number: ``253.24``, ``33.92*`` (a footnote), ``~70``, ``1,250``; ``-``/``—``/empty: none."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    text = str(value).strip().strip("*").lstrip("~≈").replace(",", "").strip()
    if text in ("", "-", "—", "–", "N/A", "n/a"):
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


BENCHMARKS = "docs/BENCHMARKS.md"  # SLM-Lab's published results


def load(source: str, slm_snapshot: Any, targets_ref: str | None = None) -> tuple[ResultsSource, ResultsSource | None]:
    """``--results SOURCE [--targets-ref REF]``: ``slm`` (SLM-Lab's BENCHMARKS.md at the ref
    compared), ``slm@REF`` (at another ref of that repository), or a file (``.md`` in
    BENCHMARKS.md's shape, ``.csv``, ``.yaml``). ``targets_ref``: the targets (and the table's
    own status) from BENCHMARKS.md at that ref, for tables that dropped them."""
    if source == "slm" or source.startswith("slm@"):
        scores = _at_ref(slm_snapshot, source.partition("@")[2] or None)
    else:
        from pathlib import Path

        from ..safety.io import read_text

        text = read_text(source, "--results")
        name = Path(source).name
        rows = parse_benchmarks(text) if name.endswith(".md") else parse_table(text, name)
        if not rows:
            raise BraxDiffError(f"--results {source}: no playground/ENV results found")
        scores = ResultsSource(name, rows)
    targets = _at_ref(slm_snapshot, targets_ref) if targets_ref else None
    if targets is not None and not any(r.target is not None for r in targets.rows.values()):
        raise BraxDiffError(f"--targets-ref {targets_ref}: {BENCHMARKS} there has no target column")
    return scores, targets


def _at_ref(slm_snapshot: Any, ref: str | None) -> ResultsSource:
    from ..sources.permalinks import last_change
    from ..sources.worktree import resolve_ref

    snapshot = slm_snapshot if ref is None else resolve_ref(slm_snapshot.repository, ref)
    if not snapshot.exists(BENCHMARKS):
        raise BraxDiffError(f"--results: {BENCHMARKS} not found in SLM-Lab at {ref or snapshot.ref}")
    rows = parse_benchmarks(snapshot.read(BENCHMARKS))
    if not rows:
        raise BraxDiffError(f"--results: {BENCHMARKS} at {ref or snapshot.ref} has no playground/ENV table")
    # The commit that last changed the file, not the ref asked for: the same table gives the same label.
    commit = last_change(snapshot, BENCHMARKS)
    return ResultsSource(f"SLM-Lab {BENCHMARKS} at {commit[:12]}", rows,
                         f"{snapshot.repository.web_url.rstrip('/')}/blob/{commit}/{BENCHMARKS}")
