import subprocess
import sys
from pathlib import Path

import pytest

from brax_diff.errors import SourceError
from brax_diff.sources.repository import Repository, github_web_url, is_url
from gitfixture import add_commit, make_repo


@pytest.fixture()
def repo_dir(tmp_path):
    path = tmp_path / "up"
    shas = make_repo(path, [
        {"pkg/a.py": "x = 1\n", "pkg/b.py": "y = 2\n"},
        {"pkg/a.py": "x = 3\n"},
    ], origin="git@github.com:someorg/upstream.git")
    return path, shas


def test_resolves_branch_short_sha_head_and_ancestry(repo_dir):
    path, shas = repo_dir
    repo = Repository(path, "brax")
    assert repo.resolve("main").sha == shas[1]
    assert repo.resolve("HEAD").sha == shas[1]
    assert repo.resolve("main~1").sha == shas[0]
    assert repo.resolve(shas[0][:7]).sha == shas[0]
    snap = repo.resolve(shas[0])
    assert snap.read("pkg/a.py") == "x = 1\n"
    assert snap.date == "2025-01-01T12:00:00+00:00"
    assert repo.resolve("main").read("pkg/a.py") == "x = 3\n"


def test_reads_are_recorded_with_blob_ids(repo_dir):
    path, shas = repo_dir
    old, new = Repository(path, "brax").resolve(shas[0]), Repository(path, "brax").resolve(shas[1])
    old.read("pkg/a.py"), old.read("pkg/b.py"), new.read("pkg/b.py")
    assert old.reads["pkg/b.py"] == new.reads["pkg/b.py"]  # same bytes, same blob
    assert old.blob_id("pkg/a.py") != new.blob_id("pkg/a.py")
    assert not old.exists("pkg/missing.py")
    assert old.reads["pkg/missing.py"] is None
    assert old.listdir("pkg") == ["a.py", "b.py"]
    assert old.listdir("nope") == []
    assert old.reads["pkg/"] == old.object_id("pkg/") != new.object_id("pkg/")  # listings count as reads
    assert old.reads["nope/"] is None


def test_web_url_comes_from_github_origin_else_side_default(repo_dir, tmp_path):
    path, shas = repo_dir
    repo = Repository(path, "brax")
    assert repo.web_url == "https://github.com/someorg/upstream"
    assert repo.resolve("main").where("pkg/a.py", 1).url == (
        f"https://github.com/someorg/upstream/blob/{shas[1]}/pkg/a.py#L1")
    plain = tmp_path / "plain"
    make_repo(plain, [{"f": "1"}])
    assert Repository(plain, "playground").web_url == "https://github.com/google-deepmind/mujoco_playground"


def test_bad_ref_missing_file_and_bad_path_are_one_line_errors(repo_dir, tmp_path):
    path, _ = repo_dir
    repo = Repository(path, "brax")
    with pytest.raises(SourceError, match=r"^brax: cannot resolve ref 'nope' in "):
        repo.resolve("nope")
    with pytest.raises(SourceError, match=r"^brax: pkg/zzz.py not found at main \("):
        repo.resolve("main").read("pkg/zzz.py")
    with pytest.raises(SourceError, match="does not exist"):
        Repository(tmp_path / "missing", "slm")
    (tmp_path / "notgit").mkdir()
    with pytest.raises(SourceError, match="is not a git repository"):
        Repository(tmp_path / "notgit", "slm")


def test_bare_repository_reads_the_same(repo_dir, tmp_path):
    path, shas = repo_dir
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(path), str(bare)], check=True)
    assert Repository(bare, "brax").resolve("main").read("pkg/a.py") == "x = 3\n"


def test_url_is_cloned_once_fetched_later_and_used_offline(repo_dir, tmp_path, capfd):
    path, shas = repo_dir
    url = f"file://{path}"
    cache = tmp_path / "cache"
    assert is_url(url) and not is_url(str(path))
    first = Repository(url, "brax", cache_root=cache)
    assert first.resolve("main").sha == shas[1]
    new_sha = add_commit(path, {"pkg/a.py": "x = 4\n"}, index=5)
    assert Repository(url, "brax", cache_root=cache).resolve("main").sha == new_sha  # fetched
    subprocess.run(["rm", "-rf", str(path)], check=True)  # upstream unreachable: "offline"
    offline = Repository(url, "brax", cache_root=cache)
    assert offline.resolve("main").read("pkg/a.py") == "x = 4\n"
    assert "using the cached clone" in capfd.readouterr().err
    with pytest.raises(SourceError, match="cannot clone file://.*no cached clone exists"):
        Repository(f"file://{tmp_path}/never", "brax", cache_root=cache)


def test_github_web_url_forms():
    assert github_web_url("https://github.com/google/brax.git") == "https://github.com/google/brax"
    assert github_web_url("git@github.com:kengz/SLM-Lab.git") == "https://github.com/kengz/SLM-Lab"
    assert github_web_url("https://gitlab.com/a/b") is None


def test_bare_repository_with_worktree_config_is_read_as_bare(repo_dir, tmp_path):
    # `git worktree add` on a bare clone can leave core.bare only in config.worktree.
    path, shas = repo_dir
    bare = tmp_path / "wtc.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(path), str(bare)], check=True)
    for args in (["config", "extensions.worktreeConfig", "true"], ["config", "--unset", "core.bare"],
                 ["config", "--worktree", "core.bare", "true"]):
        subprocess.run(["git", "-C", str(bare), *args], check=True)
    assert Repository(bare, "brax").resolve("main").sha == shas[1]


# -- hardening (issue 12) -------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def test_clone_cache_keeps_urls_with_the_same_slug_apart(tmp_path):
    # Both URLs once mapped to repos/x+a+b.git: the second run reported the first one's commit.
    slash = make_repo(tmp_path / "x" / "a" / "b.git", [{"f": "slash\n"}])
    plus = make_repo(tmp_path / "x" / "a+b.git", [{"f": "plus\n"}, {"f": "plus 2\n"}])
    cache = tmp_path / "cache"
    first = Repository(f"file://{tmp_path}/x/a/b.git", "brax", cache_root=cache).resolve("main")
    second = Repository(f"file://{tmp_path}/x/a+b.git", "brax", cache_root=cache).resolve("main")
    assert (first.sha, first.read("f")) == (slash[0], "slash\n")
    assert (second.sha, second.read("f")) == (plus[1], "plus 2\n")
    clones = sorted(p.name for p in (cache / "repos").glob("*.git"))
    assert len(clones) == 2 and all("-x-a-b.git-" in name for name in clones)  # one slug, two hashes
    # One repository, one entry: a trailing slash or an upper-case scheme is the same URL.
    Repository(f"FILE://{tmp_path}/x/a+b.git/", "brax", cache_root=cache)
    assert len(list((cache / "repos").glob("*.git"))) == 2


def test_concurrent_cold_clones_of_one_url_all_succeed(repo_dir, tmp_path):
    # They used to share one .partial directory and delete each other's clone.
    path, shas = repo_dir
    cache = tmp_path / "cache"
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from brax_diff.sources.repository import Repository; "
              "print(Repository(sys.argv[2], 'brax', cache_root=sys.argv[3]).resolve('main').sha)")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(ROOT), f"file://{path}", str(cache)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=60) + (p.returncode,) for p in procs]
    assert [(out.strip(), code) for out, _, code in results] == [(shas[1], 0)] * 4, results
    entries = sorted(p.name for p in (cache / "repos").iterdir())
    assert len(entries) == 2 and entries[0].endswith(".git") and entries[1].endswith(".lock")  # no partials


def test_a_broken_cache_entry_is_cloned_again(repo_dir, tmp_path, capfd):
    path, shas = repo_dir
    cache = tmp_path / "cache"
    url = f"file://{path}"
    clone = Path(Repository(url, "brax", cache_root=cache).git.git_dir)
    subprocess.run(["rm", "-rf", str(clone)], check=True)
    clone.write_text("not a repository\n")
    assert Repository(url, "brax", cache_root=cache).resolve("main").sha == shas[1]
    assert "is not a git repository; cloning it again" in capfd.readouterr().err
    assert clone.is_dir()


def test_reflog_refs_resolve_the_way_git_does(repo_dir):
    # GitPython's parser raised IndexError / NotImplementedError on these.
    path, shas = repo_dir
    repo = Repository(path, "brax")
    assert repo.resolve("main@{1}").sha == shas[0]
    assert repo.resolve("main@{2025-01-01 13:00:00 +0000}").sha == shas[0]  # the fixture's reflog dates
    assert repo.resolve("main@{2020-01-01}").sha == shas[0]  # before the reflog: its oldest entry, as git says
    for ref in ("@{-1}", "main@{5}", "HEAD:pkg", "main^{tree}"):
        with pytest.raises(SourceError, match=r"^brax: cannot resolve ref .* in "):
            repo.resolve(ref)


def test_reflog_refs_in_a_mirror_clone_are_one_line_errors(repo_dir, tmp_path, capsys):
    from brax_diff.cli import main

    path, _ = repo_dir
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(path), str(bare)], check=True)
    for ref in ("main@{1}", "@{-1}", "main@{2020-01-01}"):
        assert main(["extract", "slm", "--repo", str(bare), "--ref", ref]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: slm: cannot resolve ref '{ref}' in {bare}") and err.count("\n") == 1


def test_refs_and_urls_never_reach_git_as_options(repo_dir, tmp_path):
    path, _ = repo_dir
    marker = tmp_path / "pwned"
    with pytest.raises(SourceError, match="not a git ref"):
        Repository(path, "brax").resolve("--output=" + str(marker))
    # Without `--`, git clone took this "URL" for --upload-pack and ran the command.
    url = f"--upload-pack=touch {marker};://x"
    assert is_url(url)
    with pytest.raises(SourceError, match="cannot clone"):
        Repository(url, "brax", cache_root=tmp_path / "cache")
    assert not marker.exists()


def test_a_blob_past_the_file_size_limit_is_one_line(repo_dir, monkeypatch):
    from brax_diff.safety import limits

    path, _ = repo_dir
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 4)  # pkg/a.py holds 6 bytes
    with pytest.raises(limits.LimitExceeded, match=r"^brax: pkg/a.py at main \(\w+\): 6 bytes; the limit is 4 bytes$"):
        Repository(path, "brax").resolve("main").read("pkg/a.py")


def test_opening_a_repository_asks_git_and_keeps_gitpython_for_reads(repo_dir, tmp_path):
    path, shas = repo_dir
    repo = Repository(path, "brax")
    assert repo._git is None  # opened, resolved and dated by git itself: nothing read yet
    assert repo.web_url == "https://github.com/someorg/upstream" and not repo.bare
    assert Path(repo.working_tree_dir) == path and Path(repo.git_dir) == path / ".git"
    snap = repo.resolve("main")
    assert snap.sha == shas[1] and repo._git is None
    assert snap.date == repo.git.commit(shas[1]).committed_datetime.isoformat()
    assert snap.read("pkg/b.py") == "y = 2\n" and repo._git is not None
    assert Repository(path / ".git", "brax").resolve("main").read("pkg/a.py") == "x = 3\n"
    (path / "pkg").mkdir(exist_ok=True)
    with pytest.raises(SourceError, match=r"^slm: .*pkg is not a git repository$"):
        Repository(path / "pkg", "slm")  # inside a work tree is not a repository (as GitPython said)
    with pytest.raises(SourceError, match="is not a git repository"):
        Repository(path / ".git" / "objects", "slm")


def test_object_ids_remembered_answer_without_reading_a_tree(repo_dir):
    path, shas = repo_dir
    repo = Repository(path, "brax")
    repo.object_ids.remember(shas[1], {"pkg/a.py": "ab" * 20, "gone.py": None})
    snap = repo.resolve("main")
    assert snap.object_id("pkg/a.py") == "ab" * 20 and snap.object_id("gone.py") is None
    assert repo._git is None  # answered from what was remembered
    assert snap.object_id("pkg/b.py") == repo.git.commit(shas[1]).tree["pkg/b.py"].hexsha
