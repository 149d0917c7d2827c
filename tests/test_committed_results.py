"""The committed results report (reports/upstream/results.*, made by scripts/regenerate-reports.sh):
every published row joined with its own variant and a known budget on both sides, the answer
first. Regenerating it is the script's job; this checks what a reader gets."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "reports" / "upstream" / "results"


def test_every_published_row_is_joined_with_its_variant_and_known_budgets():
    model = json.loads(RESULTS.with_suffix(".json").read_text(encoding="utf-8"))
    assert model["kind"] == "results"
    assert len(model["rows"]) + len(model["unjoined"]) == model["scores"]["environments"] == 54
    for row in model["rows"]:
        assert row["variant_from"] == "the row's SPEC_NAME", row["env"]
        budget = row["budget"]
        assert isinstance(budget["slm"]["value"], int) and isinstance(budget["brax"]["value"], int), row["env"]
        assert budget["slm"]["value"] == budget["slm_frames"] * budget["slm_action_repeat"], row["env"]
    # The join reads the branch the runs came from, not master, and says where master differs.
    assert not model["code"]["same_as_compared"]
    assert sum(1 for row in model["rows"] if row["compared_variant"]) > 0


def test_the_first_screen_says_who_misses_what_they_share_and_what_is_not_comparable():
    text = RESULTS.with_suffix(".md").read_text(encoding="utf-8")
    first = "\n".join(text.splitlines()[:30])
    assert "## The answer" in first and "environments miss their target**:" in first
    assert "**Scores not comparable**" in first and "| 1 | " in first and "**Association, not cause**" in first
