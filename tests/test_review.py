"""`report --check --format github` and `--summary`: what moved since the reports on disk, as
GitHub annotations on the report file and as a short Markdown table for a reviewer."""

from __future__ import annotations

import difflib
import json

import pytest

import brax_fixtures
from brax_diff.cli import main
from gitfixture import add_commit
from upstream_repos import SPEC_PATH, make_upstreams, repo_flags

DM_PARAMS = brax_fixtures.DM_PARAMS


@pytest.fixture()
def moved(tmp_path, monkeypatch, capsys):
    """Reports written, then Playground's dm_control discount moves 0.99 -> 0.9."""
    paths = make_upstreams(tmp_path / "up")
    monkeypatch.chdir(tmp_path)
    flags = [*repo_flags(paths), "--slm", "HEAD", "--family", "dm_control"]
    assert main(["report", *flags]) == 0
    text = (paths["playground"] / DM_PARAMS).read_text()
    assert text.count("discounting=0.99,") == 1
    new_sha = add_commit(paths["playground"], {DM_PARAMS: text.replace("discounting=0.99,", "discounting=0.9,")},
                         message="discount")
    capsys.readouterr()
    return {"flags": flags, "paths": paths, "sha": new_sha, "work": tmp_path}


def test_check_format_github_annotates_each_move_on_the_report_line(moved, capsys):
    assert main(["report", *moved["flags"], "--check", "--format", "github"]) == 1
    out, err = capsys.readouterr()
    assert "stale: reports/dm_control.md" in err
    lines = out.splitlines()
    family = next(line for line in lines if "title=brax-diff%3A discount moved (dm_control)::discount (dm_control)" in line)
    assert family.startswith("::warning file=reports/dm_control.md,line=")
    assert family.endswith("::discount (dm_control): Brax 0.99 → 0.9")  # still the same classification
    matrix = next(line for line in lines if "::discount (dm_control / " in line)
    assert "AcrobotSwingup, CartpoleBalance, CheetahRun" in matrix and "BallInCup" not in matrix  # its own 0.95
    # The annotated lines are the key's row and the env's matrix row of the report the annotation
    # opens: the file on disk at the commit checked (--check wrote nothing).
    md = (moved["work"] / "reports" / "dm_control.md").read_text().split("\n")
    assert md[annotated_line(family) - 1].startswith("| `discount` | `0.99` · [L")
    assert md[annotated_line(matrix) - 1].startswith("| AcrobotSwingup | ppo_fx |")


def annotated_line(annotation: str) -> int:
    return int(annotation.split(",line=")[1].split(",")[0])


def test_annotations_point_into_the_committed_report_at_the_line_that_shows_each_move(moved, capsys):
    """A difference that resolves, a finding gone and one new: the regenerated report's lines
    shift (a summary row and a rule paragraph go), and each annotation still lands on the line
    of the committed report that shows its key or finding, never a table's header or separator."""
    brax, playground = moved["paths"]["brax"], moved["paths"]["playground"]
    add_commit(playground, {DM_PARAMS: brax_fixtures.PLAYGROUND[DM_PARAMS]
                            .replace('  elif env_name == "PendulumSwingUp":\n    rl_config.num_updates_per_batch = 2\n', "")
                            .replace("      batch_size=32,\n", "      batch_size=32,\n      not_a_train_argument=1,\n")
                            .replace("rl_config.num_envs = 128", "rl_config.num_envs = 256")},
               message="the dead branch goes; a new unknown parameter; Acrobot's envs double")
    train = (brax / brax_fixtures.TRAIN).read_text()
    add_commit(brax, {brax_fixtures.TRAIN: train.replace("clipping_epsilon: float = 0.2,",
                                                         "clipping_epsilon: float = 0.25,")}, message="clip")
    committed = (moved["work"] / "reports" / "dm_control.md").read_text()
    assert main(["report", *moved["flags"], "--check", "--format", "github"]) == 1
    annotations = capsys.readouterr().out.splitlines()
    lines = committed.split("\n")
    shown = {line.split("::")[2].split(":")[0]: lines[annotated_line(line) - 1] for line in annotations}
    # clip_epsilon_final (the constant schedule's final value) is listed in clip_epsilon's row
    assert shown["clip_epsilon (dm_control)"].startswith("| `clip_epsilon` (and `clip_epsilon_final`: Brax 0.2 vs "
                                                         "SLM-Lab 0.25 (SLM-Lab 1.25x larger)) | `0.2` · [L")
    assert not any(key.startswith("clip_epsilon_final") for key in shown)
    assert shown["clip_epsilon (dm_control / AcrobotSwingup, BallInCup, CartpoleBalance, CheetahRun, FingerSpin, "
                 "FingerTurnEasy, PendulumSwingup, WalkerRun)"] == "| `clip_epsilon` | `0.2` | `0.25` | MINOR |"
    assert shown["dead_branch (dm_control)"].startswith("| Brax | WARNING | dead_branch | brax_ppo_config: branch")
    assert shown["unknown_parameter (dm_control)"] == "## Findings"  # new: the committed report has no row yet
    assert shown["num_envs (dm_control / AcrobotSwingup)"].startswith("| AcrobotSwingup | ppo_fx | `128` / `8`")
    assert len(shown) >= 6  # clip_epsilon_final moves in clip_epsilon's row
    for where, text in shown.items():  # the key's or finding's row, an env's row, or the findings heading
        assert where.split(" (")[0] in text or text.startswith("| AcrobotSwingup |") or text == "## Findings"
        assert not text.startswith("| ---") and not text.startswith("| Key |")


def test_a_difference_that_resolves_names_both_values_before_and_after(moved, capsys):
    """Brax's clip range moves onto SLM-Lab's 0.25: a match, in the family and in every env."""
    train = (moved["paths"]["brax"] / brax_fixtures.TRAIN).read_text()
    add_commit(moved["paths"]["brax"], {brax_fixtures.TRAIN: train.replace("clipping_epsilon: float = 0.2,",
                                                                           "clipping_epsilon: float = 0.25,")})
    add_commit(moved["paths"]["playground"], {DM_PARAMS: brax_fixtures.PLAYGROUND[DM_PARAMS]}, message="revert")
    summary = moved["work"] / "moved.md"
    assert main(["report", *moved["flags"], "--check", "--format", "github", "--summary", str(summary)]) == 1
    out = capsys.readouterr().out
    envs = "AcrobotSwingup, BallInCup, CartpoleBalance, CheetahRun, FingerSpin, FingerTurnEasy, PendulumSwingup, WalkerRun"
    assert [line.split("::", 2)[2] for line in out.splitlines() if "::clip_epsilon (" in line] == [
        "clip_epsilon (dm_control): was Brax 0.2 vs SLM-Lab 0.25, now both 0.25: MINOR → match",
        f"clip_epsilon (dm_control / {envs}): was Brax 0.2 vs SLM-Lab 0.25, now both 0.25: MINOR → match"]
    assert "null" not in out
    text = summary.read_text()
    assert (f"| dm_control | `clip_epsilon` | dm_control / {envs} | was Brax `0.2` vs SLM-Lab `0.25`, now both `0.25` "
            "| MINOR → match | — |") in text
    assert "null" not in text
    # The report keeps the values of a key that matches in every env (its Markdown does not show them).
    assert main(["report", *moved["flags"], "--quiet"]) == 0
    data = json.loads((moved["work"] / "reports" / "dm_control.json").read_text())
    assert {"key": "clip_epsilon", "brax": 0.25, "slm": 0.25, "status": "match", "severity": None} in \
        data["matrix"]["matching"]
    # Against a report written before the matrix kept them, nothing moves but what moved.
    from brax_diff.report.review import moves

    older = json.loads(json.dumps(data))
    del older["matrix"]["matching"]
    assert moves(older, data, "dm_control") == [] and moves(data, older, "dm_control") == []


def test_head_then_worktree_at_the_same_commit_moves_nothing(tmp_path, monkeypatch, capsys):
    """The work tree read as on disk, at the commit HEAD names: where each line was read changes
    (the ref, and with an edit that says nothing new, each spec line's `uncommitted` mark), what
    the report says does not."""
    paths = make_upstreams(tmp_path / "up")
    monkeypatch.chdir(tmp_path)
    flags = [*repo_flags(paths), "--family", "dm_control"]
    assert main(["report", *flags, "--slm", "HEAD", "--quiet"]) == 0
    summary = tmp_path / "moved.md"
    spec = paths["slm"] / SPEC_PATH
    for edit in ("", "# a comment, at the end\n"):
        spec.write_text(spec.read_text() + edit)
        for side in ("slm", "brax", "playground"):
            worktree = ["--slm", "HEAD", f"--{side}", "WORKTREE"] if side != "slm" else ["--slm", "WORKTREE"]
            assert main(["report", *flags, *worktree, "--check", "--format", "github", "--summary", str(summary)]) == 0
            assert capsys.readouterr().out == ""
            assert summary.read_text().endswith("\nNo value, classification or finding moved.\n")
    # The last run read an edited spec: only the line the edit added is unlinked, so the findings'
    # spec lines, which it left alone, still link at HEAD.
    assert main(["report", *flags, "--slm", "WORKTREE", "--format", "json", "--output", "-", "--quiet"]) == 0
    model = json.loads(capsys.readouterr().out)
    assert next(s for s in model["sources"] if s["name"] == "slm")["uncommitted"] == [SPEC_PATH]
    spec_lines = [p for f in model["findings"] for p in f["provenance"] if p["path"] == SPEC_PATH]
    assert spec_lines and not any(p.get("uncommitted") for p in spec_lines)


def test_summary_is_a_short_table_with_both_lines(moved, capsys):
    summary = moved["work"] / "moved.md"
    assert main(["report", *moved["flags"], "--check", "--summary", str(summary)]) == 1
    text = summary.read_text()
    old = json.loads((moved["work"] / "reports" / "dm_control.json").read_text())
    old_line = next(d for d in old["differences"] if d["key"] == "discount")["brax"]["provenance"][0]
    assert text.startswith(f"## brax-diff: what moved\n\nCommits: MuJoCo Playground `main` {old_line['commit'][:12]} → "
                           f"{moved['sha'][:12]}.\n")
    rows = [line for line in text.splitlines() if line.startswith("| dm_control |")]
    assert len(rows) == 2
    assert rows[0].startswith("| dm_control | `discount` | dm_control | Brax `0.99` → `0.9` | CRITICAL | [Brax was](")
    assert f"[Brax was](https://github.com/google-deepmind/mujoco_playground/blob/{old_line['commit']}/" in rows[0]
    assert f"[Brax now](https://github.com/google-deepmind/mujoco_playground/blob/{moved['sha']}/" in rows[0]
    assert rows[1].startswith("| dm_control | `discount` | dm_control / AcrobotSwingup, CartpoleBalance,")
    assert len(text.splitlines()) <= 10


def test_nothing_moved_says_so(moved, capsys):
    add_commit(moved["paths"]["playground"], {DM_PARAMS: brax_fixtures.PLAYGROUND[DM_PARAMS]}, message="revert")
    summary = moved["work"] / "moved.md"
    assert main(["report", *moved["flags"], "--check", "--format", "github", "--summary", str(summary)]) == 0
    assert capsys.readouterr().out == ""
    assert summary.read_text().endswith("\nNo value, classification or finding moved.\n")


def test_github_format_needs_check(moved, capsys):
    assert main(["report", *moved["flags"], "--format", "github"]) == 2
    assert capsys.readouterr().err == "error: --format github annotates the changes --check finds; add --check\n"


def test_moves_name_classification_changes_and_findings():
    from brax_diff.facts.model import Finding, Provenance
    from brax_diff.report.render import build_report
    from brax_diff.report.review import markdown_summary, moves
    from brax_diff.compare.rules import load_rules
    from report_fixtures import SLM_REPO, SLM_SHA, SPEC, brax_extraction, slm_extraction

    scope = {"family": "dm_control", "env": None, "variant": "ppo_playground", "spec": SPEC}
    old = build_report(brax_extraction(), slm_extraction(), load_rules(), scope=scope)
    slm = slm_extraction({"clip_epsilon": 0.3})
    slm.find(Finding("spec_code_mismatch", "ERROR", "no such scheduler", (Provenance(SLM_REPO, SLM_SHA, SPEC, 7),)))
    new = build_report(brax_extraction(), slm, load_rules(), scope=scope)
    found = moves(old, new, "dm_control")
    assert [(m.kind, m.key, m.values, m.was, m.now) for m in found] == [
        ("value", "clip_epsilon", (("SLM-Lab", 0.2, 0.3),), "IMPORTANT", "match"),
        ("finding", "spec_code_mismatch", (), None, "ERROR")]
    assert found[0].sentence() == "clip_epsilon (dm_control): was Brax 0.3 vs SLM-Lab 0.2, now both 0.3: IMPORTANT → match"
    text = markdown_summary(found)
    assert ("| dm_control | `clip_epsilon` | dm_control | was Brax `0.3` vs SLM-Lab `0.2`, now both `0.3` | "
            "IMPORTANT → match | [SLM-Lab was](") in text
    assert "| `spec_code_mismatch` | dm_control | SLM-Lab ERROR finding new: no such scheduler | — → ERROR |" in text
    assert moves(old, old, "dm_control") == []
    broken = moves(new, old, "dm_control")[0]  # and back: a match broken
    assert broken.sentence() == "clip_epsilon (dm_control): was both 0.3, now Brax 0.3 vs SLM-Lab 0.2: match → IMPORTANT"


def without_changes_section(path) -> list[str]:
    """The report's lines but its "Changes since the previous report" section (its history)."""
    text = path.read_text()
    head, rest = text.split("## Changes since the previous report", 1)
    return (head + "## Rules and references" + rest.split("## Rules and references", 1)[1]).splitlines()


def test_an_upstream_commit_touching_no_file_read_changes_only_the_source_row(tmp_path, monkeypatch, capsys):
    paths = make_upstreams(tmp_path / "up")
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "reports" / "dm_control.md"
    flags = [*repo_flags(paths), "--slm", "HEAD", "--family", "dm_control", "--quiet"]
    assert main(["report", *flags]) == 0
    before = without_changes_section(report)
    add_commit(paths["brax"], {"README.md": "docs\n"}, message="docs")
    assert main(["report", *flags]) == 0
    after = without_changes_section(report)
    changed = [new for old, new in zip(before, after) if old != new]
    assert len(before) == len(after) and len(changed) == 1 and changed[0].startswith("| Brax | [google/brax]")
    # A commit that moves one Brax default (still MINOR against SLM-Lab's 0.25): the rows that show
    # it, and the links into that one file.
    train = (paths["brax"] / brax_fixtures.TRAIN).read_text()
    add_commit(paths["brax"], {brax_fixtures.TRAIN: train.replace("clipping_epsilon: float = 0.2,",
                                                                  "clipping_epsilon: float = 0.22,")})
    assert main(["report", *flags]) == 0
    moved = without_changes_section(report)
    changed = [line[2:] for line in difflib.ndiff(after, moved) if line.startswith("+ ")]
    definitions = [line for line in changed if line.startswith("[")]
    assert definitions and all(line.startswith(f"[google/brax/{brax_fixtures.TRAIN}#L") for line in definitions)
    body = [line for line in changed if line not in definitions]
    # the source row, then clip_epsilon's row (clip_epsilon_final, the constant schedule's final value,
    # listed in it) in the recommended order, its topic (its one detailed row) and the matrix
    assert body[0].startswith("| Brax | [google/brax]") and len(body) == 4, "\n".join(body)
    assert all("clip_epsilon" in line and "0.22" in line for line in body[1:]), "\n".join(body)


def test_a_matrix_move_lands_on_the_matrix_row_not_the_not_comparable_row():
    from brax_diff.report.review import MATRIX, MATRIX_TABLE, Move, locate

    text = "\n".join(["# r", MATRIX, "", "### 🔴 Scores not comparable", "",
                      "| Environment | Variant | Why | Rule |", "| --- | --- | --- | --- |",
                      "| PandaPickCube | v | `episode_length` Brax 150 vs SLM-Lab 1000 | BD035 |", "",
                      "| Environment | Variant | `num_envs` |", "| --- | --- | --- |", "| PandaPickCube | v | `1` |"])
    move = Move("matrix", "manipulation", "num_envs", "manipulation / PandaPickCube",
                rows=((MATRIX_TABLE, "| PandaPickCube |"), (None, "| `num_envs` |")))
    [located] = locate([move], None, text)
    assert text.split("\n")[located.line - 1] == "| PandaPickCube | v | `1` |"
