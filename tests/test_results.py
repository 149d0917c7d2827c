"""Published results joined with the environment matrix (`report --results`): both shapes of
SLM-Lab's BENCHMARKS.md tables, CSV and YAML files, the status rule, the shared-differences
counts, and the command line over fixture repositories (hand-written tables in upstream's shape)."""

from __future__ import annotations

import json

import pytest

from brax_diff.cli import main
from brax_diff.errors import BraxDiffError
from brax_diff.compare.results import ResultsSource, join, parse_benchmarks, parse_table, status
from gitfixture import _git, add_commit
from test_setup import repos  # noqa: F401 (the fixture repositories)
from upstream_repos import MAPPING_FILE

# Up to mid-March 2026: algorithm, status, score, target.
WITH_TARGETS = """
# Benchmarks

#### Phase 5.3: Manipulation

| ENV | Algorithm | Status | MA | SPEC_NAME | HF Data | Target (ref) | FPS | Frames | Wall Clock |
|-----|-----------|--------|-----|-----------|---------|--------------|-----|--------|------------|
| playground/PandaPickCube | PPO | ✅ | 4586.13 | ppo_playground_loco | [run](https://example.org/a) | 4500 | 9K | 100M | 3h |
| playground/PandaPickCubeCartesian | PPO | ⚠️ | 10.58* | ppo_playground_manip | [run](https://example.org/b) | ~12 | 9K | 100M | 3h |
| playground/PandaOpenCabinet | PPO | ❌ | - | ppo_playground_loco | - | 1,250 | - | - | - |

Other table, not Playground's:

| ENV | MA |
|-----|-----|
| CartPole-v1 | 499 |
"""
# Later: the status and target columns dropped.
WITHOUT_TARGETS = """
| ENV | MA | SPEC_NAME | HF Data |
|-----|-----|-----------|---------|
| playground/PandaPickCube | 4400.0 | ppo_playground_loco | [run](https://example.org/c) |
| playground/PandaPickCubeCartesian | 11.0 | ppo_playground_manip | [run](https://example.org/d) |
"""


def test_both_table_shapes_are_read():
    old = parse_benchmarks(WITH_TARGETS)
    assert sorted(old) == ["PandaOpenCabinet", "PandaPickCube", "PandaPickCubeCartesian"]
    assert (old["PandaPickCube"].score, old["PandaPickCube"].target, old["PandaPickCube"].symbol) == (4586.13, 4500.0,
                                                                                                     "✅")
    assert (old["PandaPickCubeCartesian"].score, old["PandaPickCubeCartesian"].target) == (10.58, 12.0)  # * and ~
    assert (old["PandaOpenCabinet"].score, old["PandaOpenCabinet"].target) == (None, 1250.0)
    assert old["PandaPickCube"].line == WITH_TARGETS.splitlines().index(
        next(line for line in WITH_TARGETS.splitlines() if "playground/PandaPickCube |" in line)) + 1
    new = parse_benchmarks(WITHOUT_TARGETS)
    assert {env: (r.score, r.target, r.symbol) for env, r in new.items()} == {
        "PandaPickCube": (4400.0, None, None), "PandaPickCubeCartesian": (11.0, None, None)}


def test_csv_and_yaml_files():
    csv_rows = parse_table("env,score,target\nplayground/PandaPickCube,10,20\nPandaOpenCabinet,5,\n", "r.csv")
    assert {e: (r.score, r.target) for e, r in csv_rows.items()} == {"PandaPickCube": (10.0, 20.0),
                                                                      "PandaOpenCabinet": (5.0, None)}
    listed = parse_table("- {env: PandaPickCube, score: 3, target: 4}\n", "r.yaml")
    mapped = parse_table("PandaPickCube: {score: 3, target: 4}\n", "r.yml")
    assert listed == mapped and listed["PandaPickCube"].score == 3.0
    with pytest.raises(BraxDiffError, match="a CSV needs the columns env and score"):
        parse_table("name,value\nx,1\n", "r.csv")
    with pytest.raises(BraxDiffError, match="expected a list"):
        parse_table("just text\n", "r.yaml")


def test_status_is_the_ratio_to_the_target_or_the_tables_own_without_one():
    assert status(100.0, 100.0, None) == (1.0, "pass")
    assert status(85.0, 100.0, "✅") == (0.85, "near")  # the target decides, not the table's symbol
    assert status(79.9, 100.0, None) == (0.799, "fail")
    assert status(-1.0, -2.0, None) == (None, "pass")  # a non-positive target: no ratio
    assert status(5.0, None, "⚠️") == (None, "near")
    assert status(5.0, None, None) == (None, "unknown")
    assert status(None, 10.0, "✅") == (None, "unknown")


def test_the_shared_differences_count_below_and_at_target_and_apart():
    cell = {"status": "differs", "severity": "IMPORTANT", "brax": 1, "slm": 2}
    match = {"status": "match", "severity": None, "brax": 1, "slm": 1}
    matrix = {"columns": ["critic", "width"],
              "uniform": [{"key": "eps", "status": "differs", "severity": "MINOR", "brax": 1, "slm": 2}],
              "incomparable": [{"env": "D", "variant": "v", "why": []}],
              "rows": [{"env": "A", "cells": {"critic": cell, "width": match}},
                       {"env": "B", "cells": {"critic": cell, "width": cell}},
                       {"env": "C", "cells": {"critic": match, "width": cell}},
                       {"env": "D", "cells": {"critic": cell, "width": match}},
                       {"env": "E", "cells": {"critic": match, "width": match}}]}
    scores = ResultsSource("t", {e: r for e, r in parse_table(
        "env,score,target\nA,1,10\nB,9,10\nC,10,10\nD,1,10\n", "t.csv").items()})
    joined = join(matrix, scores)
    assert [(r["env"], r["status"], r["comparable"]) for r in joined["rows"]] == [
        ("A", "fail", True), ("B", "near", True), ("C", "pass", True), ("D", "fail", False), ("E", "unknown", True)]
    shared = {s["key"]: s for s in joined["shared"]}
    assert [s["key"] for s in joined["shared"]] == ["critic", "eps", "width"]  # most separating first
    assert (shared["critic"]["below"], shared["critic"]["below_of"], shared["critic"]["at"], shared["critic"]["at_of"],
            shared["critic"]["apart"], shared["critic"]["separation"]) == (2, 2, 0, 1, 1, 1.0)
    assert shared["width"]["below_envs"] == ["B"] and shared["width"]["separation"] == -0.5
    assert shared["eps"]["everywhere"] and shared["eps"]["separation"] == 0.0
    # No environment at target: nothing to separate, and no number that says otherwise.
    none_at = join(matrix, ResultsSource("t", parse_table("env,score,target\nA,1,10\nB,2,10\n", "t.csv")))
    assert {s["key"]: s["separation"] for s in none_at["shared"]} == {"critic": None, "eps": None, "width": None}


def flags(repos) -> list[str]:  # noqa: F811
    return ["--brax-repo", str(repos["brax"]), "--playground-repo", str(repos["playground"]),
            "--slm-repo", str(repos["slm"]), "--mapping", str(repos["slm"] / MAPPING_FILE)]


@pytest.fixture()
def published(repos):  # noqa: F811
    """BENCHMARKS.md with targets at one commit, without them at the next (on a copy of the SLM-Lab repo)."""
    slm = repos["slm"]
    old = add_commit(slm, {"docs/BENCHMARKS.md": WITH_TARGETS}, message="results with targets")
    add_commit(slm, {"docs/BENCHMARKS.md": WITHOUT_TARGETS}, message="targets dropped")
    yield old
    _git(slm, "reset", "-q", "--hard", "HEAD~2")


def test_report_joins_scores_with_targets_from_an_older_ref(repos, published, capsys):  # noqa: F811
    code = main(["report", *flags(repos), "--family", "manipulation", "--results", "slm", "--targets-ref", published,
                 "--format", "json", "--output", "-"])
    assert code == 0, capsys.readouterr().err
    model = json.loads(capsys.readouterr().out)
    results = model["results"]
    assert results["targets"]["label"] == f"SLM-Lab docs/BENCHMARKS.md at {published[:12]}"
    assert results["scores"]["environments"] == 2
    assert {r["env"]: (r["score"], r["target"], r["ratio"], r["status"], r["comparable"]) for r in results["rows"]} == {
        "PandaPickCube": (4400.0, 4500.0, 0.9778, "near", False),  # its episode length differs: counted apart
        "PandaPickCubeCartesian": (11.0, 12.0, 0.9167, "near", False)}
    shared = {s["key"]: s for s in results["shared"]}
    assert shared["episode_length"]["apart"] == 2 and shared["episode_length"]["below_of"] == 0
    assert shared["episode_length"]["separation"] is None  # both environments counted apart

    main(["report", *flags(repos), "--family", "manipulation", "--results", "slm", "--targets-ref", published,
          "--format", "md", "--output", "-"])
    text = capsys.readouterr().out
    assert "## What the environments below target share" in text and "**Association, not cause**" in text
    assert "| Environment | Variant | Score | Target | Ratio | Status |" in text
    assert "| PandaPickCube | ppo_fx_small | 4400.0 | 4500.0 | 0.9778 | near (not comparable) |" in text
    assert "With 0 comparable environment(s) below target and 0 at it, the counts say little (no separation" in text


def test_results_from_a_file_and_bad_input(repos, capsys, tmp_path):  # noqa: F811
    table = tmp_path / "scores.csv"
    table.write_text("env,score,target\nPandaPickCube,5000,4500\nPandaPickCubeCartesian,1,12\n")
    assert main(["report", *flags(repos), "--family", "manipulation", "--results", str(table), "--format", "json",
                 "--output", "-"]) == 0
    rows = {r["env"]: r["status"] for r in json.loads(capsys.readouterr().out)["results"]["rows"]}
    assert rows == {"PandaPickCube": "pass", "PandaPickCubeCartesian": "fail"}
    for args, message in (
            (["--targets-ref", "HEAD"], "error: --targets-ref gives the targets of --results; add --results\n"),
            (["--results", str(tmp_path / "missing.csv")], None),
            (["--results", "slm"], "error: --results: docs/BENCHMARKS.md not found in SLM-Lab at HEAD\n")):
        assert main(["report", *flags(repos), "--family", "manipulation", *args, "--output", "-",
                     "--format", "json"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1
        if message:
            assert err == message
