"""Work-tree mode (`--slm WORKTREE`): files read as they are on disk, lines from uncommitted
files not linked; and the one-line notice when `HEAD` is read while the files read differ."""

from __future__ import annotations

import json
import subprocess

import pytest

from brax_diff.cli import main
from brax_diff.errors import SourceError
from brax_diff.sources import Repository
from brax_diff.worktree import WorkTreeSnapshot, git_blob_id
from gitfixture import _git, add_commit
from slm_fixtures import ACTOR_CRITIC, SPEC, line_of
from upstream_repos import SPEC_PATH, make_upstreams, repo_flags


@pytest.fixture()
def upstreams(tmp_path):
    return make_upstreams(tmp_path / "up")


def edit_spec(paths, old="val_loss_coef: 0.4", new="val_loss_coef: 0.25") -> None:
    spec = paths["slm"] / SPEC_PATH
    text = spec.read_text()
    assert text.count(old) == 1
    spec.write_text(text.replace(old, new))


def report_json(paths, capsys, *args) -> tuple[dict, str]:
    code = main(["report", *repo_flags(paths), "--env", "BallInCup", "--format", "json", "--output", "-", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


def test_a_work_tree_edit_changes_the_report(upstreams, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    head_sha = _git(upstreams["slm"], "rev-parse", "HEAD")
    before, _ = report_json(upstreams, capsys, "--slm", "WORKTREE")
    assert before["slm"]["facts"]["value_loss_coef"]["value"] == 0.4
    assert "uncommitted" not in before["sources"][2]  # nothing edited yet: the same as HEAD

    edit_spec(upstreams)
    after, _ = report_json(upstreams, capsys, "--slm", "WORKTREE")
    fact = after["slm"]["facts"]["value_loss_coef"]
    assert fact["value"] == 0.25
    spec_line = next(p for p in fact["provenance"] if p["path"] == SPEC_PATH)
    assert spec_line["uncommitted"] is True and spec_line["commit"] == head_sha
    assert all("uncommitted" not in p for p in fact["provenance"] if p["path"] != SPEC_PATH)
    slm = after["sources"][2]
    assert (slm["ref"], slm["commit"], slm["uncommitted"]) == ("WORKTREE", head_sha, [SPEC_PATH])
    row = next(d for d in after["differences"] if d["key"] == "value_loss_coef")
    assert row["slm"]["value"] == 0.25

    code = main(["report", *repo_flags(upstreams), "--slm", "WORKTREE", "--env", "BallInCup", "--format", "md",
                 "--output", "-"])
    md = capsys.readouterr().out
    assert code == 0
    assert f"/commit/{head_sha}) with uncommitted changes to `{SPEC_PATH}` |" in md
    row = next(line for line in md.splitlines() if line.startswith("| `value_loss_coef` |"))
    assert row.split(" | ")[2].startswith("`0.25` · [L")  # SLM-Lab's value, linked at the committed lines
    assert f"· L{line_of(SPEC, 'val_loss_coef')} (uncommitted) | match |" in row  # the edited spec line: unlinked
    assert f"[kengz/SLM-Lab/{SPEC_PATH}#" not in md  # no link to a line HEAD does not have
    assert "\n[kengz/SLM-Lab/slm_lab/agent/algorithm/actor_critic.py#L" in md  # committed files stay linked


def test_head_with_a_differing_work_tree_says_so_in_one_line(upstreams, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    edit_spec(upstreams)
    for _ in range(2):  # cold, then answered from the fact cache: the notice stays
        data, err = report_json(upstreams, capsys, "--slm", "HEAD")
        assert data["slm"]["facts"]["value_loss_coef"]["value"] == 0.4
        warnings = [line for line in err.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1 and warnings[0].startswith("warning: slm: read HEAD (")
        assert warnings[0].endswith(f"1 file(s) read differ in the work tree ({SPEC_PATH}); --slm WORKTREE "
                                    "reads them as on disk")
    subprocess.run(["git", "-C", str(upstreams["slm"]), "checkout", "-q", "--", SPEC_PATH], check=True)
    _, err = report_json(upstreams, capsys, "--slm", "HEAD")
    assert "warning" not in err


def test_fix_and_verify_say_so_too_when_they_read_head_under_an_edit(upstreams, capsys, tmp_path, monkeypatch):
    """`report` says in one line that HEAD is not what is on disk; `fix` and `verify` read HEAD
    the same way and say the same line."""
    monkeypatch.chdir(tmp_path)
    edit_spec(upstreams)
    notice = f"1 file(s) read differ in the work tree ({SPEC_PATH}); --slm WORKTREE reads them as on disk"
    commands = {"fix": ["fix", *repo_flags(upstreams), "--slm", "HEAD", "--family", "dm_control", "--diff"],
                "verify": ["verify", "--plan", *repo_flags(upstreams)[:6], "--slm", "HEAD", "--variant", "ppo_fx",
                           "--env", "CheetahRun", "--set", "max_frame=1000000"]}
    for name, argv in commands.items():
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 0, (name, err)
        warnings = [line for line in err.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1 and warnings[0].startswith("warning: slm: read HEAD ("), (name, err)
        assert warnings[0].endswith(notice) and "read HEAD" not in out, name
    subprocess.run(["git", "-C", str(upstreams["slm"]), "checkout", "-q", "--", SPEC_PATH], check=True)
    for name, argv in commands.items():
        assert main(argv) == 0
        assert "read HEAD" not in capsys.readouterr().err, name


def test_committing_the_edit_clears_the_marks_even_from_the_cache(upstreams, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    edit_spec(upstreams)
    report_json(upstreams, capsys, "--slm", "WORKTREE")
    new_sha = add_commit(upstreams["slm"], {}, message="val_loss_coef 0.25")
    data, _ = report_json(upstreams, capsys, "--slm", "WORKTREE")  # same bytes: a cache hit
    assert data["slm"]["facts"]["value_loss_coef"]["value"] == 0.25
    assert data["sources"][2]["commit"] == new_sha and "uncommitted" not in data["sources"][2]
    assert '"uncommitted"' not in json.dumps(data)
    head, _ = report_json(upstreams, capsys, "--slm", "HEAD")
    assert head["slm"] == data["slm"] | {"sources": head["slm"]["sources"]}


def test_extract_reads_the_work_tree_too(upstreams, capsys):
    edit_spec(upstreams)
    assert main(["extract", "slm", "--slm-repo", str(upstreams["slm"]), "--slm", "WORKTREE", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["facts"]["value_loss_coef"]["value"] == 0.25
    assert data["sources"]["slm"]["uncommitted"] == [SPEC_PATH]


def test_work_tree_snapshot_ids_and_listings(upstreams):
    repo = Repository(upstreams["slm"], "slm")
    snapshot = WorkTreeSnapshot.of(repo)
    committed = repo.resolve("HEAD")
    assert snapshot.sha == committed.sha and snapshot.ref == "WORKTREE"
    # An unchanged file has its committed blob id, so the fact cache treats both alike.
    assert snapshot.object_id(SPEC_PATH) == committed.object_id(SPEC_PATH) == git_blob_id(SPEC.lstrip("\n").encode())
    assert snapshot.object_id("slm_lab/agent/algorithm/") == committed.object_id("slm_lab/agent/algorithm/")
    (upstreams["slm"] / "slm_lab/agent/algorithm/sac.py").write_text("x = 1\n")  # untracked
    assert "sac.py" in snapshot.listdir("slm_lab/agent/algorithm")
    assert snapshot.reads["slm_lab/agent/algorithm/"].startswith("worktree:")
    assert snapshot.read("slm_lab/agent/algorithm/sac.py") == "x = 1\n"
    assert snapshot.uncommitted_reads() == ("slm_lab/agent/algorithm/sac.py",)
    with pytest.raises(SourceError, match="not found in the work tree"):
        snapshot.read("slm_lab/nope.py")


def test_worktree_needs_a_checkout(upstreams, tmp_path, capsys, monkeypatch):
    bare = tmp_path / "slm.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(upstreams["slm"]), str(bare)], check=True)
    monkeypatch.chdir(tmp_path)
    assert main(["extract", "slm", "--slm-repo", str(bare), "--slm", "WORKTREE"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: slm: WORKTREE reads a checkout's files, and {bare} has no work tree")
    assert err.count("\n") == 1
