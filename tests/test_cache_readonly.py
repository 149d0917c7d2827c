"""A cache that cannot be written or read (issue 35): the report runs uncached, with one
warning; it never fails because of the cache."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from gitfixture import add_commit
from test_report_cli import run, snapshot_files
from test_report_cli import workspace  # noqa: F401 (a fixture)


def read_only(monkeypatch, root: Path) -> None:
    """What a read-only mount answers under ``root`` (EROFS for every write, even unlinking a
    file that is not there), for root too: chmod does not stop root."""
    prefix = str(root)

    def refusing(name, real):
        def call(path, *args, **kwargs):
            target = os.fspath(path)
            flags = args[0] if name == "open" and args else kwargs.get("flags", 0)
            writes = name != "open" or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            if isinstance(target, str) and os.path.abspath(target).startswith(prefix) and writes:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), target)
            return real(path, *args, **kwargs)
        return call

    for name in ("open", "unlink", "mkdir", "replace", "rename", "rmdir"):
        monkeypatch.setattr(os, name, refusing(name, getattr(os, name)))


def test_a_read_only_cache_runs_another_scope_uncached(workspace, capsys, monkeypatch):
    cache = Path(os.environ["BRAX_DIFF_CACHE_DIR"])
    assert run(workspace, "--family", "dm_control") == 0  # fills the cache for one scope
    capsys.readouterr()
    expected = workspace["work"] / "expected"
    assert run(workspace, "--family", "locomotion", "--no-cache", "--output", str(expected)) == 0
    capsys.readouterr()
    with monkeypatch.context() as patch:
        read_only(patch, cache)
        code = run(workspace, "--family", "locomotion")
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.count("warning: ") == 1 and "cache" in err and "continuing without it" in err, err
    written = snapshot_files(workspace["work"] / "reports")
    assert {k: v for k, v in written.items() if k.startswith("locomotion")} == snapshot_files(expected)
    # Brax moved: dm_control's entries are new files in directories the first run made.
    add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.25\n"})
    with monkeypatch.context() as patch:
        read_only(patch, cache)
        code = run(workspace, "--family", "dm_control")
    err = capsys.readouterr().err
    assert code == 0 and "error:" not in err, err


def test_a_write_into_an_existing_read_only_directory_is_one_error_not_an_oserror(tmp_path, monkeypatch):
    # Unlinking the (absent) temporary file answers EROFS too: its second try in the error
    # path escaped write_atomic as an OSError, past the cache's "continuing without it".
    from brax_diff.errors import BraxDiffError
    from brax_diff.safety.io import write_atomic

    (tmp_path / "facts").mkdir()
    read_only(monkeypatch, tmp_path)
    with pytest.raises(BraxDiffError, match="cannot write .*entry.json: Read-only file system"):
        write_atomic(tmp_path / "facts" / "entry.json", "{}")


def test_a_fact_cache_in_a_read_only_directory_is_a_warning(tmp_path, monkeypatch, capsys):
    from brax_diff.extract.factcache import FactCache

    cache = FactCache(tmp_path)
    cache.remember_commit("a" * 40, "2026-01-01", {"x.py": "b" * 40})  # creates commits/
    assert (tmp_path / "facts" / "v3" / "commits").is_dir()
    read_only(monkeypatch, tmp_path)
    cache.remember_commit("c" * 40, "2026-01-01", {"x.py": "b" * 40})
    assert cache.disabled and "fact cache not written" in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(4))
def test_a_bit_flipped_cache_entry_is_a_miss_not_a_wrong_value(workspace, capsys, seed):
    # Before: a flipped bit in a cached commit sha (still valid JSON) printed a permalink to
    # another commit, and one in a value printed that value.
    import random

    assert run(workspace, "--env", "BallInCup") == 0
    first = snapshot_files(workspace["work"] / "reports")
    rng = random.Random(seed)
    for entry in sorted(Path(os.environ["BRAX_DIFF_CACHE_DIR"]).rglob("*.json")):
        data = bytearray(entry.read_bytes())
        for _ in range(3):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        entry.write_bytes(bytes(data))
    capsys.readouterr()
    assert run(workspace, "--env", "BallInCup") == 0, capsys.readouterr().err
    assert snapshot_files(workspace["work"] / "reports") == first
