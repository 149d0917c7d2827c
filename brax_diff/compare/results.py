"""Published per-environment results: reading them, and what makes a score comparable.

Sources: SLM-Lab's ``docs/BENCHMARKS.md`` (its Playground tables in either shape: ``| ENV |
Algorithm | Status | MA | SPEC_NAME | HF Data | Target (ref) | ... | Frames | ... |`` up to mid-March
2026, then ``| ENV | MA | SPEC_NAME | HF Data |`` under a ``**Settings**: max_frame 100M`` line), read
at a ref; or a plain CSV / YAML file of ``env, score, target`` (and optionally ``variant``,
``frames``, ``status``, ``algorithm``). Scores can come from one ref and targets from another (the
later tables dropped their targets). Each row keeps what produced its score where the table says:
the variant, the budget and where it is written, the run's data folder. Rows not taken (another
algorithm, a second row for one environment) are kept with why.

The join itself, each row against the code that produced it, is :mod:`brax_diff.report.published`.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from typing import Any

from ..errors import BraxDiffError

# A score at or above this fraction of its target is "near" (SLM-Lab's legend: "⚠️ Close (>80%)").
NEAR_FRACTION = 0.8
STATUS_SYMBOLS = {"✅": "pass", "⚠️": "near", "⚠": "near", "❌": "fail", "📊": "near"}
ENV_PREFIX = "playground/"


@dataclass(frozen=True)
class Result:
    """One environment's published score and target, with the lines they are read from, and
    what produced the score where the table says: the spec variant (``SPEC_NAME``), the run's
    budget in SLM-Lab frames (one per agent step, all envs together) and where that budget is
    written, and the run's data folder (``HF Data``), which tells one run from another."""

    env: str
    score: float | None
    target: float | None = None
    symbol: str | None = None  # the table's own status (✅ ⚠️ ❌), when it has a Status column
    line: int | None = None  # the row's line in the source
    variant: str | None = None
    frames: int | None = None
    frames_from: str | None = None  # "Frames column", "Settings line", "-s max_frame", "frames column"
    frames_line: int | None = None
    run: str | None = None
    algorithm: str | None = None


@dataclass(frozen=True)
class Skipped:
    """A row of the results that is not joined, and why (never dropped silently)."""

    env: str
    line: int | None
    why: str

    def to_json(self) -> dict:
        return {"env": self.env, "line": self.line, "why": self.why}


@dataclass(frozen=True)
class ResultsSource:
    """Where results come from: a label for the report (path and commit, or a file's name) and rows."""

    label: str
    rows: dict[str, Result]
    url: str | None = None  # the file at the commit it was read at, for a link
    skipped: tuple[Skipped, ...] = ()
    commit: str | None = None  # the commit that last changed the file (SLM-Lab's BENCHMARKS.md)
    repo: str | None = None
    path: str | None = None

    def to_json(self) -> dict:
        return {"label": self.label, "url": self.url, "environments": len(self.rows)}

    def identity(self) -> list:
        """What a report made from these results depends on (the report cache's key)."""
        return [self.label, [[env, r.score, r.target, r.symbol, r.variant, r.frames, r.run]
                             for env, r in sorted(self.rows.items())],
                [s.to_json() for s in self.skipped]]


PPO = "ppo"
_SETTINGS = re.compile(r"\*\*Settings\*\*:?(.*)", re.IGNORECASE)
_SETTINGS_FRAMES = re.compile(r"max_frame\s+([0-9][0-9.,]*\s*[kKmMbB]?|[0-9.]+[eE][0-9]+)(?=\s*(?:\||$|—|-\s))")
_SET_FRAMES = re.compile(r"-s\s+max_frame=([0-9][0-9_.eE]*)\b")
_HEADING = re.compile(r"^(#{1,6})\s")
_RUN = re.compile(r"\[([^\]]+)\]\(")


def frames_number(text: Any) -> int | None:
    """A budget as written: ``100M``, ``65M``, ``1.5B``, ``2e5``, ``10e6``, ``100000000``; a range
    (``4e6-10e6``), ``-`` or anything else: None."""
    if text is None:
        return None
    value = str(text).strip().replace(",", "").replace("_", "")
    scale = {"k": 1e3, "m": 1e6, "b": 1e9}.get(value[-1:].lower(), 1)
    if scale != 1:
        value = value[:-1].strip()
    try:
        number = float(value) * scale
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number > 0 and number == int(number) else None


def read_benchmarks(text: str) -> tuple[dict[str, Result], tuple[Skipped, ...]]:
    """Every PPO ``playground/ENV`` row of the Markdown tables whose header names ``ENV`` and
    ``MA``, and the rows not taken with why. A row with an empty ENV cell continues the row
    above (another algorithm of the same environment). A run's budget: the row's Frames
    cell, else the nearest ``**Settings**: max_frame N`` line or ``-s max_frame=N`` command of the
    section the table is in (a heading of the same or a higher level ends a section)."""
    out: dict[str, Result] = {}
    skipped: list[Skipped] = []
    columns: dict[str, int] | None = None
    budgets: list[tuple[int, int, str, int]] = []  # (heading level, frames, where, line)
    level = 0
    env = None
    for number, line in enumerate(text.splitlines(), start=1):
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            budgets = [b for b in budgets if b[0] < level]
        settings = _SETTINGS.search(line)
        found = _SETTINGS_FRAMES.search(settings.group(1)) if settings else None
        if found and frames_number(found.group(1)) is not None:
            budgets.append((level, frames_number(found.group(1)), "Settings line", number))
        for command in _SET_FRAMES.finditer(line):
            if frames_number(command.group(1)) is not None and not settings:
                budgets.append((level, frames_number(command.group(1)), "-s max_frame", number))
        if not line.lstrip().startswith("|"):
            columns, env = None, None
            continue
        # An escaped "\|" is a pipe inside the cell (GFM), not a column: split around it, then unescape.
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        names = [c.strip("* ").lower() for c in cells]
        if "env" in names and "ma" in names:
            columns = {name: i for i, name in enumerate(names)}
            continue
        if columns is None or not cells:
            continue
        first = cells[columns["env"]] if columns["env"] < len(cells) else ""
        if first.lower().startswith(ENV_PREFIX):  # "Playground/..." too: a row is never dropped unnamed
            env = first[len(ENV_PREFIX):].strip()
        elif first or env is None:
            env = None
            continue
        algorithm = _cell(cells, columns.get("algorithm"))
        if algorithm and algorithm.strip().lower() != PPO:
            skipped.append(Skipped(env, number, f"algorithm {algorithm.strip()}: brax-diff compares PPO"))
            continue
        if env in out:
            skipped.append(Skipped(env, number, f"a second PPO row for {env}: the first, line {out[env].line}, "
                                                "is joined"))
            continue
        out[env] = _row(env, cells, columns, number, budgets[-1] if budgets else None, algorithm)
    return out, tuple(skipped)


def _row(env: str, cells: list[str], columns: dict[str, int], number: int, budget, algorithm) -> Result:
    target_column = next((i for name, i in columns.items() if name.startswith("target")), None)
    status_column = columns.get("status")
    frames = frames_number(_cell(cells, columns.get("frames")))
    frames_from, frames_line = ("Frames column", number) if frames is not None else (None, None)
    if frames is None and budget is not None:
        _, frames, frames_from, frames_line = budget
    run_cell = _cell(cells, columns.get("hf data")) or ""
    run = _RUN.search(run_cell)
    variant = (_cell(cells, columns.get("spec_name")) or "").strip("` ") or None
    return Result(env, _number(_cell(cells, columns["ma"])),
                  _number(_cell(cells, target_column)) if target_column is not None else None,
                  _cell(cells, status_column) if status_column is not None else None, number,
                  variant if variant and variant not in ("-", "—") else None, frames, frames_from, frames_line,
                  run.group(1).strip() if run else None, algorithm.strip() if algorithm else None)


def parse_benchmarks(text: str) -> dict[str, Result]:
    """The PPO ``playground/ENV`` rows of :func:`read_benchmarks`."""
    return read_benchmarks(text)[0]


def parse_table(text: str, name: str) -> dict[str, Result]:
    """The PPO rows of :func:`read_table`."""
    return read_table(text, name)[0]


def read_table(text: str, name: str) -> tuple[dict[str, Result], tuple[Skipped, ...]]:
    """A CSV (header ``env,score,target``) or YAML file (a list of ``{env, score, target}``, or a
    mapping ``env: {score, target}``) of results; optional columns ``variant`` (or ``spec_name``),
    ``frames`` (or ``max_frame``: the run's budget in SLM-Lab frames), ``status`` (the table's own
    symbol or pass/near/fail), ``algorithm`` (rows of another than PPO are skipped, with why)."""
    if name.endswith((".yaml", ".yml")):
        import yaml

        from ..safety.limits_yaml import load_yaml_node

        try:  # bounded: a results file is user input (nesting, alias expansion)
            data, node = load_yaml_node(text, f"--results {name}")
        except yaml.YAMLError as exc:
            raise BraxDiffError(f"--results {name}: not YAML ({str(exc).splitlines()[0]})") from None
        if isinstance(data, dict) and isinstance(node, yaml.MappingNode):
            # YAML keeps the last of two equal keys: a PPO and a SAC entry for one env would lose
            # one silently, so two entries are refused (a list of rows can say which is which).
            seen: dict[str, int] = {}
            for key_node, _ in node.value:
                key = str(key_node.value).strip().lower()
                if key in seen:
                    raise BraxDiffError(f"--results {name}: {key_node.value} is given twice (lines {seen[key]} and "
                                        f"{key_node.start_mark.line + 1}) and YAML keeps only the last; write a list "
                                        "of {env, score, algorithm} rows")
                seen[key] = key_node.start_mark.line + 1
        if isinstance(data, dict):
            data = [{"env": env, **(value if isinstance(value, dict) else {"score": value})}
                    for env, value in data.items()]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise BraxDiffError(f"--results {name}: expected a list of {{env, score, target}} or a mapping env: {{...}}")
        rows = data
    else:
        reader = csv.DictReader(io.StringIO(text))
        fields = [str(f).strip().lower() for f in reader.fieldnames or []]
        if "env" not in fields or "score" not in fields:
            raise BraxDiffError(f"--results {name}: a CSV needs the columns env and score (and target)")
        rows = list(reader)
    # Column names as a spreadsheet writes them ("Algorithm", " Score"): an unread Algorithm
    # column let a SAC row be joined as the environment's PPO score.
    rows = [{str(k).strip().lower(): v for k, v in row.items() if k is not None} for row in rows]
    out: dict[str, Result] = {}
    skipped: list[Skipped] = []
    for index, row in enumerate(rows, start=2):
        env = str(row.get("env") or "").strip().removeprefix(ENV_PREFIX)
        if not env:
            raise BraxDiffError(f"--results {name}: row {index - 1} has no env")
        algorithm = str(row.get("algorithm") or "").strip() or None
        if algorithm and algorithm.lower() != PPO:
            skipped.append(Skipped(env, None, f"row {index - 1}: algorithm {algorithm}: brax-diff compares PPO"))
            continue
        if env in out:
            skipped.append(Skipped(env, None, f"row {index - 1}: a second row for {env}: the first is joined"))
            continue
        variant = str(row.get("variant") or row.get("spec_name") or "").strip() or None
        frames = frames_number(row.get("frames") if row.get("frames") is not None else row.get("max_frame"))
        own = str(row.get("status") or "").strip() or None
        symbol = {"pass": "✅", "near": "⚠️", "fail": "❌"}.get(own.lower(), own) if own else None
        out[env] = Result(env, _number(row.get("score")), _number(row.get("target")), symbol, None, variant,
                          frames, "frames column" if frames is not None else None, None, None, algorithm)
    return out, tuple(skipped)


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


# What makes two returns different numbers: how many steps an episode sums. Not action repeat:
# Brax's EpisodeWrapper counts an episode in underlying steps (each agent step adds action_repeat)
# and sums every underlying reward, so the return sums as many rewards; the agent controls at
# another frequency (rule BD036), which changes the task, not the score's scale.
SCORE_SCALE_KEYS = ("episode_length",)


def incomparable_reasons(classified: dict) -> list[dict]:
    """Why an environment's SLM-Lab return cannot be compared with Brax's (empty when it can):
    each setup key that sets the return's scale and differs, with both values and its rule."""
    out = []
    for key in SCORE_SCALE_KEYS:
        c = classified.get(key)
        if c is not None and c.status not in ("match", "unknown"):
            out.append({"key": key, "brax": c.difference.brax_value, "slm": c.difference.slm_value,
                        "rule": c.rule})
    return out



BENCHMARKS = "docs/BENCHMARKS.md"  # SLM-Lab's published results


def load(source: str, slm_snapshot: Any, targets_ref: str | None = None
         ) -> tuple[ResultsSource, ResultsSource | None, Any]:
    """``--results SOURCE [--targets-ref REF]``: ``slm`` (SLM-Lab's BENCHMARKS.md at the ref
    compared), ``slm@REF`` (at another ref of that repository), or a file (``.md`` in
    BENCHMARKS.md's shape, ``.csv``, ``.yaml``). ``targets_ref``: the targets (and the table's
    own status) from BENCHMARKS.md at that ref, for tables that dropped them. Also gives the
    SLM-Lab snapshot that holds the results (the code they are joined with by default)."""
    if source == "slm" or source.startswith("slm@"):
        scores, holder = _at_ref(slm_snapshot, source.partition("@")[2] or None)
    else:
        from pathlib import Path

        from ..safety.io import read_text

        # A spreadsheet's export often starts with a byte-order mark; it is not part of the header.
        text = read_text(source, "--results").removeprefix("\ufeff")
        name = Path(source).name
        rows, skipped = read_benchmarks(text) if name.endswith(".md") else read_table(text, name)
        if not rows:
            raise BraxDiffError(f"--results {source}: no playground/ENV results found")
        scores, holder = ResultsSource(name, rows, skipped=skipped), slm_snapshot
    targets = _at_ref(slm_snapshot, targets_ref)[0] if targets_ref else None
    if targets is not None and not any(r.target is not None for r in targets.rows.values()):
        raise BraxDiffError(f"--targets-ref {targets_ref}: {BENCHMARKS} there has no target column")
    return scores, targets, holder


def _at_ref(slm_snapshot: Any, ref: str | None) -> tuple[ResultsSource, Any]:
    from ..sources.permalinks import last_change
    from ..sources.worktree import resolve_ref

    snapshot = slm_snapshot if ref is None else resolve_ref(slm_snapshot.repository, ref)
    if not snapshot.exists(BENCHMARKS):
        raise BraxDiffError(f"--results: {BENCHMARKS} not found in SLM-Lab at {ref or snapshot.ref}")
    rows, skipped = read_benchmarks(snapshot.read(BENCHMARKS))
    if not rows:
        raise BraxDiffError(f"--results: {BENCHMARKS} at {ref or snapshot.ref} has no playground/ENV table")
    # The commit that last changed the file, not the ref asked for: the same table gives the same label.
    commit = last_change(snapshot, BENCHMARKS)
    web = snapshot.repository.web_url.rstrip("/")
    return ResultsSource(f"SLM-Lab {BENCHMARKS} at {commit[:12]}", rows, f"{web}/blob/{commit}/{BENCHMARKS}",
                         skipped, commit, snapshot.repository.web_url, BENCHMARKS), snapshot
