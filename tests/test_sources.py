import subprocess

import pytest

from brax_diff.errors import SourceError
from brax_diff.sources import Repository, github_web_url, is_url
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
