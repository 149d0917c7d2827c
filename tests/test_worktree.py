"""Work-tree mode (`--slm WORKTREE`): files read as they are on disk, lines from uncommitted
files not linked; and the one-line notice when `HEAD` is read while the files read differ."""

from __future__ import annotations

import json
import subprocess

import pytest

from brax_diff.cli import main
from brax_diff.errors import SourceError
from brax_diff.sources.repository import Repository
from brax_diff.sources.worktree import WorkTreeSnapshot, git_blob_id
from gitfixture import _git, add_commit
from slm_fixtures import SPEC, line_of
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
    edited = line_of(SPEC, "val_loss_coef")
    assert f"[kengz/SLM-Lab/{SPEC_PATH}#L{edited}]" not in md  # no link to a line HEAD does not have
    assert f"[kengz/SLM-Lab/{SPEC_PATH}#L{line_of(SPEC, 'clip_grad_val')}]" in md  # the spec's other lines: linked
    assert "\n[kengz/SLM-Lab/slm_lab/agent/algorithm/actor_critic.py#L" in md  # committed files stay linked


def spec_lines(fact: dict) -> list[dict]:
    return [p for p in fact["provenance"] if p["path"] == SPEC_PATH]


def test_an_edit_unlinks_only_the_lines_it_changed(upstreams, capsys, tmp_path, monkeypatch):
    """A line the edit left alone keeps its link, at HEAD's line number (a line inserted above
    moves it on disk); only the changed line is uncommitted, at its line on disk."""
    monkeypatch.chdir(tmp_path)
    head_sha = _git(upstreams["slm"], "rev-parse", "HEAD")
    edit_spec(upstreams)
    edit_spec(upstreams, "_algorithm: &algorithm\n", "# tuned below\n_algorithm: &algorithm\n")
    clip, edited = line_of(SPEC, "clip_grad_val"), line_of(SPEC, "val_loss_coef")
    assert (upstreams["slm"] / SPEC_PATH).read_text().splitlines()[clip].strip() == "clip_grad_val: 0.7"  # moved down

    for _ in range(2):  # cold, then answered from the caches: the same links
        data, _ = report_json(upstreams, capsys, "--slm", "WORKTREE")
        facts = data["slm"]["facts"]
        assert spec_lines(facts["max_grad_norm"]) == [
            {"repo": "https://github.com/kengz/SLM-Lab", "commit": head_sha, "path": SPEC_PATH, "line": clip}]
        assert facts["value_loss_coef"]["value"] == 0.25
        assert spec_lines(facts["value_loss_coef"]) == [
            {"repo": "https://github.com/kengz/SLM-Lab", "commit": head_sha, "path": SPEC_PATH, "line": edited + 1,
             "uncommitted": True}]
        marked = [p for fact in facts.values() for p in fact["provenance"] if p.get("uncommitted")]
        assert {(p["path"], p["line"]) for p in marked} == {(SPEC_PATH, edited + 1)}  # the edited line alone
        assert data["sources"][2]["uncommitted"] == [SPEC_PATH]

    # Committed: every line at the new commit's numbers (the file as on disk), none marked.
    new_sha = add_commit(upstreams["slm"], {}, message="val_loss_coef 0.25")
    data, _ = report_json(upstreams, capsys, "--slm", "WORKTREE")
    facts = data["slm"]["facts"]
    assert [p["line"] for p in spec_lines(facts["max_grad_norm"])] == [clip + 1]
    assert [p["line"] for p in spec_lines(facts["value_loss_coef"])] == [edited + 1]
    assert '"uncommitted"' not in json.dumps(data) and data["sources"][2]["commit"] == new_sha


def test_head_with_a_differing_work_tree_says_so_in_one_line(upstreams, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    edit_spec(upstreams)
    for _ in range(2):  # cold, then answered from the fact cache: the notice stays
        data, err = report_json(upstreams, capsys, "--slm", "HEAD")
        assert data["slm"]["facts"]["value_loss_coef"]["value"] == 0.4
        # (verify may also warn that the installed Brax trainer is not the ref's: another matter)
        warnings = [line for line in err.splitlines() if line.startswith("warning:") and "Brax trainer" not in line
                    and "trainer files" not in line]
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
        # (verify may also warn that the installed Brax trainer is not the ref's: another matter)
        warnings = [line for line in err.splitlines() if line.startswith("warning:") and "Brax trainer" not in line
                    and "trainer files" not in line]
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
    data, _ = report_json(upstreams, capsys, "--slm", "WORKTREE")  # the same bytes, now committed
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


@pytest.mark.parametrize("command, side", [
    (["report", "--env", "BallInCup"], "slm"),
    (["extract", "slm"], "slm"),
    (["fix", "--env", "BallInCup", "--diff"], "slm"),
    (["verify", "--plan"], "slm"),
    (["extract", "brax", "--env", "BallInCup"], "brax"),
    (["report", "--env", "BallInCup"], "playground"),
])
def test_worktree_with_a_url_repository_is_refused_before_any_clone(command, side, upstreams, tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(cache))
    url = f"file://{upstreams[side]}"  # clonable: refusing it is not a clone that failed
    flags = {s: str(upstreams[s]) for s in ("brax", "playground", "slm")}
    flags[side] = url
    names = {"extract slm": ("slm",), "extract brax": ("brax", "playground")}.get(" ".join(command[:2]),
                                                                                ("brax", "playground", "slm"))
    args = [*command, f"--{side}", "WORKTREE"] + [w for s in names for w in (f"--{s}-repo", flags[s])]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {side}: WORKTREE reads a local checkout's files; --{side}-repo is a URL ({url}); "
                   "give the checkout's path\n")
    assert not (cache / "repos").exists()  # refused at once: nothing cloned
