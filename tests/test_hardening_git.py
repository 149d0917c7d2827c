"""Git that only reads (issue 26, item 4): brax-diff runs nothing a repository's own git
configuration names. Each fixture repository sets every such mechanism to a script that
leaves a marker file; a report, a history walk and an extraction over it leave none."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from brax_diff.cli import main
from brax_diff.sources.repository import Repository
from gitfixture import _git
import upstream_repos
from upstream_repos import make_upstreams, repo_flags

# A git setting (or hook) -> the marker its script leaves when git runs it.
MECHANISMS = ("gpg", "fsmonitor", "pager", "external-diff", "textconv", "uploadpack", "hook", "askpass",
              "credential", "ssh")
HOOKS = ("reference-transaction", "post-checkout", "pre-auto-gc", "post-index-change", "post-merge",
         "fsmonitor-watchman")


def _script(folder: Path, name: str, markers: Path) -> str:
    path = folder / name
    path.write_text(f"#!/bin/sh\ntouch '{markers}/{name}'\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def sign_head(repo: Path) -> str:
    """Rewrite HEAD as a signed commit (a gpgsig header: `git log` then asks gpg.program)."""
    body = _git(repo, "cat-file", "commit", "HEAD") + "\n"
    header, _, message = body.partition("\n\n")
    signed = (header + "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQ==\n -----END PGP SIGNATURE-----\n\n"
              + message)
    staging = repo.parent / f"{repo.name}.commit"
    staging.write_text(signed)
    sha = _git(repo, "hash-object", "-t", "commit", "-w", str(staging))
    _git(repo, "update-ref", "HEAD", sha)
    return sha


def make_hostile(repo: Path, markers: Path) -> None:
    """Sign HEAD, then point every git setting that runs a command at a marker script."""
    sign_head(repo)
    scripts = repo.parent / f"{repo.name}-scripts"
    scripts.mkdir()
    run = {name: _script(scripts, name, markers) for name in MECHANISMS}
    hooks = scripts / "hooks"
    hooks.mkdir()
    for hook in HOOKS:
        _script(hooks, hook, markers)
    git_dir = Path(_git(repo, "rev-parse", "--absolute-git-dir"))
    for key, value in {
        "log.showSignature": "true", "gpg.program": run["gpg"], "gpg.ssh.program": run["gpg"],
        "core.fsmonitor": run["fsmonitor"], "core.pager": run["pager"], "pager.log": run["pager"],
        "diff.external": run["external-diff"], "diff.hostile.textconv": run["textconv"],
        "core.hooksPath": str(hooks), "core.askPass": run["askpass"], "credential.helper": run["credential"],
        "core.sshCommand": run["ssh"],
        # A promisor remote: a missing object would be fetched from it by running its uploadpack.
        "remote.lazy.url": str(repo), "remote.lazy.promisor": "true", "remote.lazy.uploadpack": run["uploadpack"],
    }.items():
        _git(repo, "config", key, value)
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text("* diff=hostile\n")


@pytest.fixture()
def hostile(tmp_path, monkeypatch):
    markers = tmp_path / "markers"
    markers.mkdir()
    paths = make_upstreams(tmp_path / "up")
    for repo in paths.values():
        make_hostile(repo, markers)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / "cache"))
    return paths, markers


def fired(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


def test_the_fixture_does_run_its_scripts_under_plain_git(hostile):
    paths, markers = hostile
    _git(paths["brax"], "log", "-1", "--format=%H")
    assert fired(markers) == ["gpg"]


def test_report_runs_nothing_a_repository_configures(hostile, capsys):
    paths, markers = hostile
    assert main(["report", *repo_flags(paths), "--slm", "HEAD", "--output", "out", "--quiet"]) == 0, \
        capsys.readouterr().err
    assert fired(markers) == []


def test_history_runs_nothing_a_repository_configures(hostile, capsys):
    paths, markers = hostile
    assert main(["history", "--brax", "HEAD", "--family", "dm_control", *repo_flags(paths)]) == 0, \
        capsys.readouterr().err
    assert fired(markers) == []


def test_extract_runs_nothing_a_repository_configures(hostile, capsys):
    paths, markers = hostile
    assert main(["extract", "brax", "--brax-repo", str(paths["brax"]), "--playground-repo",
                 str(paths["playground"]), "--family", "dm_control"]) == 0, capsys.readouterr().err
    assert fired(markers) == []


def as_partial_clone(repo: Path) -> None:
    """Configure ``repo`` as `git clone --filter` leaves it (its lacking objects are then no damage)."""
    _git(repo, "config", "core.repositoryformatversion", "1")
    _git(repo, "config", "extensions.partialClone", "origin")


def drop_blob(repo: Path, path: str) -> str:
    """Delete the loose object of ``path``'s blob at HEAD: what a partial clone lacks."""
    blob = _git(repo, "rev-parse", f"HEAD:{path}")
    git_dir = Path(_git(repo, "rev-parse", "--absolute-git-dir"))
    as_partial_clone(repo)
    (git_dir / "objects" / blob[:2] / blob[2:]).unlink()
    return blob


def test_a_missing_object_is_one_error_line_and_no_lazy_fetch(hostile, capsys):
    paths, markers = hostile
    blob = drop_blob(paths["slm"], upstream_repos.SPEC_PATH)
    assert main(["extract", "slm", *repo_flags(paths)[4:], "--slm", "HEAD", "--all-variants"]) == 2
    err = capsys.readouterr().err
    head = _git(paths["slm"], "rev-parse", "HEAD")[:12]
    assert err == (f"error: slm: {upstream_repos.SPEC_PATH} at HEAD ({head}): git object {blob} is missing from "
                   f"{paths['slm']}; brax-diff does not fetch what a partial clone lacks\n"), err
    assert fired(markers) == []


def test_a_missing_tree_is_one_error_line(hostile, capsys):
    paths, markers = hostile
    tree = _git(paths["slm"], "rev-parse", "HEAD:slm_lab/spec")
    git_dir = Path(_git(paths["slm"], "rev-parse", "--absolute-git-dir"))
    as_partial_clone(paths["slm"])
    (git_dir / "objects" / tree[:2] / tree[2:]).unlink()
    assert main(["extract", "slm", *repo_flags(paths)[4:], "--slm", "HEAD", "--all-variants"]) == 2
    assert capsys.readouterr().err == (f"error: slm: git object {tree} is missing from {paths['slm']}; "
                                       f"brax-diff does not fetch what a partial clone lacks\n")
    assert fired(markers) == []


def test_urls_are_still_cloned_and_fetched_and_run_nothing(hostile, tmp_path):
    paths, markers = hostile
    for _ in range(2):  # a clone, then a fetch of the cached clone
        repo = Repository(f"file://{paths['slm']}", "slm", cache_root=tmp_path / "clones")
        assert repo.resolve("master").read(upstream_repos.MAPPING_FILE) == upstream_repos.MAPPING.lstrip("\n")
    assert repo.path.parent == tmp_path / "clones" / "repos"
    assert fired(markers) == []


def test_a_cache_entry_naming_a_missing_object_is_a_miss_or_one_error_line(hostile, capsys):
    """The fact cache answered from blob ids a repository no longer holds (issue 26: a traceback)."""
    paths, markers = hostile
    assert main(["report", *repo_flags(paths), "--slm", "HEAD", "--output", "out", "--quiet"]) == 0, \
        capsys.readouterr().err
    capsys.readouterr()
    blob = drop_blob(paths["slm"], upstream_repos.SPEC_PATH)
    code = main(["report", *repo_flags(paths), "--slm", "HEAD", "--output", "out2", "--quiet"])
    err = capsys.readouterr().err
    if code == 0:  # answered from the cache without reading the blob: the same report
        assert {p.name: p.read_bytes() for p in (Path.cwd() / "out2").iterdir()} == {
            p.name: p.read_bytes() for p in (Path.cwd() / "out").iterdir()}
    else:
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and blob in err, err
    assert fired(markers) == []
