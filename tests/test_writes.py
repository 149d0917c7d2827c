"""Writes and the files options name (issue 26, item 5): a target that is not a regular file
is refused, never replaced; two `fix --in-place` runs on one spec keep both variants; an
option's file must be a regular file within the size limit; counts have a limit."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from brax_diff.cli import main
from brax_diff.safety.io import write_atomic, write_all
from brax_diff.errors import BraxDiffError
from brax_diff.safety.limits import MAX_FILE_BYTES
from brax_diff.verify.plan import COUNT_LIMITS
from test_hardening import one_error_line
from test_report_cli import run
from test_report_cli import workspace  # noqa: F401 (a fixture)
from test_verify_plan import write_pair
from upstream_repos import SPEC_PATH, make_upstreams, repo_flags

ROOT = Path(__file__).resolve().parent.parent


def special(kind: str, path: Path, pointee: Path) -> None:
    """A non-regular file at ``path``: a symbolic link to ``pointee``, or a FIFO."""
    if kind == "symlink":
        path.symlink_to(pointee)
    else:
        os.mkfifo(path)


# -- (a) a target that is not a regular file ---------------------------------------------

@pytest.mark.parametrize("kind, says", [("symlink", "a symbolic link"), ("fifo", "a FIFO")])
def test_a_report_target_that_is_not_a_regular_file_is_refused(workspace, capsys, kind, says):
    work = workspace["work"]
    pointee = work / "elsewhere.txt"
    pointee.write_text("not a report\n")
    special(kind, work / "out.md", pointee)
    assert run(workspace, "--family", "dm_control", "--output", "out.md") == 2
    one_error_line(capsys, f"cannot write out.md: it is {says}, not a regular file")
    assert (work / "out.md").is_symlink() if kind == "symlink" else stat.S_ISFIFO((work / "out.md").lstat().st_mode)
    assert pointee.read_text() == "not a report\n" and not (work / "out.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_refused_by_every_writer(tmp_path):
    device = tmp_path / "full"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers
    except PermissionError:
        pytest.skip("no CAP_MKNOD here")
    for write in (lambda: write_atomic(device, "x"), lambda: write_all({device: "x"})):
        with pytest.raises(BraxDiffError, match=f"^cannot write {device}: it is a device, not a regular file$"):
            write()
        assert stat.S_ISCHR(device.lstat().st_mode)


def test_fix_output_through_a_symlink_is_refused(tmp_path, capsys):
    paths = make_upstreams(tmp_path / "up")
    pointee = tmp_path / "elsewhere.yaml"
    pointee.write_text("kept: true\n")
    (tmp_path / "copy.yaml").symlink_to(pointee)
    assert main(["fix", *repo_flags(paths), "--family", "dm_control", "--output", str(tmp_path / "copy.yaml")]) == 2
    one_error_line(capsys, f"cannot write {tmp_path / 'copy.yaml'}: it is a symbolic link, not a regular file")
    assert (tmp_path / "copy.yaml").is_symlink() and pointee.read_text() == "kept: true\n"


# -- (b) two `fix --in-place` runs at once --------------------------------------------------

# `fix` in a process of its own that pauses just before it writes the spec: it has read it.
PAUSED_FIX = """
import os, sys, time
sys.path[:0] = [{root!r}, {tests!r}]
from brax_diff.safety import io
real = io.write_atomic
def paused(path, data, **kwargs):
    if str(path).endswith(".yaml"):  # the spec (the fact cache's entries are written as ever)
        print("paused", flush=True)
        time.sleep(float(os.environ["PAUSE_SECONDS"]))
    return real(path, data, **kwargs)
io.write_atomic = paused
from brax_diff.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_two_in_place_fixes_at_once_keep_both_variants(tmp_path):
    paths = make_upstreams(tmp_path / "up")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BRAX_DIFF_CACHE_DIR": str(tmp_path / "cache"), "PAUSE_SECONDS": "4"}

    def fix(name: str, *prefix: str) -> subprocess.Popen:
        return subprocess.Popen([*prefix, "fix", *repo_flags(paths), "--family", "dm_control", "--in-place",
                                 "--keys", "discount", "--name", name, "--quiet"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first = fix("ppo_first", sys.executable, "-c", PAUSED_FIX.format(root=str(ROOT), tests=str(ROOT / "tests")))
    assert first.stdout.readline() == "paused\n", first.communicate()[1]
    second = fix("ppo_second", sys.executable, "-m", "brax_diff")  # reads the spec while the first waits to write
    for proc in (first, second):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    text = (paths["slm"] / SPEC_PATH).read_text()
    assert "\nppo_first:\n" in text and "\nppo_second:\n" in text
    assert text.index("\nppo_first:\n") < text.index("\nppo_second:\n")  # the second wrote on top of the first
    assert sorted(p.name for p in (paths["slm"] / SPEC_PATH).parent.iterdir() if p.name.startswith(".")) == []


# -- (c) files named by options -------------------------------------------------------------

def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("source", ["fifo", "/dev/zero"])
def test_previous_must_be_a_regular_file(workspace, capsys, tmp_path, source):
    path = fifo(tmp_path) if source == "fifo" else Path(source)
    assert run(workspace, "--family", "dm_control", "--previous", str(path)) == 2
    one_error_line(capsys, f"previous report {path}: cannot read: not a regular file")
    assert not (workspace["work"] / "reports").exists()


@pytest.mark.parametrize("source", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("flag", ["--brax-json", "--slm-json", "--throughput"])
def test_verify_files_must_be_regular_files(tmp_path, capsys, flag, source):
    path = fifo(tmp_path) if source == "fifo" else Path(source)
    args = write_pair(tmp_path)
    if flag in args:
        args[args.index(flag) + 1] = str(path)
    else:
        args += [flag, str(path)]
    assert main(["verify", "--plan", *args]) == 2
    one_error_line(capsys, f"{flag} {path}: cannot read: not a regular file")


def test_verify_files_within_the_size_limit(tmp_path, capsys):
    big = tmp_path / "big.toml"
    with open(big, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written
    assert main(["verify", "--plan", *write_pair(tmp_path), "--throughput", str(big)]) == 2
    one_error_line(capsys, f"--throughput {big}: {MAX_FILE_BYTES + 1} bytes; the limit is {MAX_FILE_BYTES} bytes")


# -- (d) counts -----------------------------------------------------------------------------

def test_verify_plan_with_a_hundred_million_seeds_is_one_error_line(tmp_path, capsys):
    assert main(["verify", "--plan", *write_pair(tmp_path), "--seeds", "100000000"]) == 2
    one_error_line(capsys, f"error: --seeds must be <= {COUNT_LIMITS['seeds']:,}, got 100,000,000 "
                           "(docs/verify.md#limits)")


@pytest.mark.parametrize("name", sorted(COUNT_LIMITS))
def test_every_count_past_its_limit_is_one_error_line(tmp_path, capsys, name):
    flag, limit = "--" + name.replace("_", "-"), COUNT_LIMITS[name]
    assert main(["verify", "--plan", *write_pair(tmp_path), flag, str(limit + 1)]) == 2
    one_error_line(capsys, f"error: {flag} must be <= {limit:,}, got {limit + 1:,} (docs/verify.md#limits)")


def test_counts_at_their_limit_are_planned(tmp_path, capsys):
    assert main(["verify", "--plan", *write_pair(tmp_path), "--seeds", str(COUNT_LIMITS["seeds"]),
                 "--arms", "gap", "--jobs", str(COUNT_LIMITS["jobs"]), "--format", "json"]) == 0
    assert f'"seeds": {COUNT_LIMITS["seeds"]}' in capsys.readouterr().out


def test_power_is_not_simulated_past_64_seeds_so_a_plan_stays_quick(tmp_path, capsys):
    """At the seed limit (1,000) the power simulation took longer than CI's whole run."""

    assert main(["verify", "--plan", *write_pair(tmp_path), "--seeds", "65", "--arms", "gap"]) == 0
    assert "power: not simulated at 65 seeds (more than 64 seeds" in capsys.readouterr().out
