"""The severity scale rules classify differences on, apart from the rule table (whose module
loads YAML and Jinja), for what only ranks or filters severities: the summary line, --fail-on."""

from __future__ import annotations

from ..errors import BraxDiffError

SEVERITIES = ("CRITICAL", "IMPORTANT", "MINOR")


def severity_rank(severity: str | None) -> int:
    """0 for CRITICAL ... len(SEVERITIES) for no severity (a match)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def at_or_above(severity: str | None, threshold: str) -> bool:
    return severity is not None and severity_rank(severity) <= severity_rank(threshold)


def worst_at_or_above(model: dict, threshold: str) -> list[dict]:
    """A report model's differences at or above a severity (for ``--fail-on``)."""
    if threshold not in SEVERITIES:
        raise BraxDiffError(f"unknown severity {threshold!r} (choose from {', '.join(SEVERITIES)})")
    return [d for d in model["differences"] if at_or_above(d["severity"], threshold)]
