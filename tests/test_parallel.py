"""A cold report's extractions split over forked processes (brax_diff.extract.parallel, issue 14):
the same bytes as one process, each extraction done once and by the process it was given,
a failing child's share done by the parent, an interrupt reaping the children, and a
child never reading the parent's GitPython pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from brax_diff.extract import parallel
from brax_diff.extract.factcache import FactCache
from brax_diff.sources.repository import Repository
from gitfixture import make_repo
from upstream_repos import make_upstreams, repo_flags

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

# Runs `brax-diff ARGV` with every extraction logged as (in this process?, what, args) to LOG;
# with FAIL_IN_CHILD set, an SLM-Lab variant extracted outside the first process raises. The
# report's fix solver re-extracts edited copies of the spec (brax_diff.fix.solver): those are
# logged apart, as "edited", and are not the extractions this file counts.
PROBE = r"""
import hashlib, json, os, sys
from brax_diff.cli import main
from brax_diff.extractors.brax.extractor import BraxExtractor
from brax_diff.extractors.slm.extractor import SlmExtractor
log, parent, argv = sys.argv[1], os.getpid(), json.loads(sys.argv[2])

def logged(cls, method):
    original = getattr(cls, method)
    def wrapper(self, *args):
        edited = method == "variant" and self.snapshot.read(self.spec_path) != committed(self)
        if os.environ.get("FAIL_IN_CHILD") and os.getpid() != parent and method == "variant" and not edited:
            raise RuntimeError("a child that fails")
        with open(log, "a") as out:
            out.write(json.dumps([os.getpid() == parent, "edited" if edited else method, list(args)]) + "\n")
        return original(self, *args)
    setattr(cls, method, wrapper)

def committed(extractor):
    snapshot = getattr(extractor.snapshot, "base", extractor.snapshot)
    return snapshot.repository.resolve(snapshot.sha).read(extractor.spec_path)

for method in ("env", "family"):
    logged(BraxExtractor, method)
logged(SlmExtractor, "variant")
sys.exit(main(argv))
"""


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_upstreams(tmp_path_factory.mktemp("up"))


def report(upstreams, tmp_path: Path, name: str, processes: int, cache: Path | None = None,
           **env: str) -> tuple[dict[str, bytes], list[tuple[bool, str, list]], str]:
    """A report into tmp_path/name: its files, the extractions logged (in this process?,
    method, args), stderr."""
    log = tmp_path / f"{name}.log"
    out = tmp_path / name
    argv = ["report", *repo_flags(upstreams), "--slm", "HEAD", "-q", "--output", f"{out}/"]
    environ = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_INTERACTIVE")}
    environ.update(PYTHONPATH=str(ROOT), BRAX_DIFF_CACHE_DIR=str(cache or tmp_path / f"{name}-cache"),
                   BRAX_DIFF_PROCESSES=str(processes), **env)
    done = subprocess.run([sys.executable, "-c", PROBE, str(log), json.dumps(argv)], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    logged = [tuple(json.loads(line)) for line in log.read_text().splitlines()] if log.exists() else []
    calls = [call for call in logged if call[1] != "edited"]
    return files, calls, done.stderr


def test_two_processes_write_what_one_writes_each_extraction_once(upstreams, tmp_path):
    serial, serial_calls, _ = report(upstreams, tmp_path, "one", processes=1)
    split, split_calls, stderr = report(upstreams, tmp_path, "two", processes=2)
    assert stderr == ""
    assert len(serial) == 6 and split == serial
    assert all(here for here, _, _ in serial_calls)
    # Nothing is extracted twice, and each extractor's calls are made by one process (what
    # they share is parsed once): SLM-Lab's here (the fix solver then finds its code parsed),
    # Brax's in the child.
    assert sorted(c[1:] for c in split_calls) == sorted(c[1:] for c in serial_calls)
    assert len({json.dumps(c[1:]) for c in split_calls}) == len(split_calls)
    assert {here for here, method, _ in split_calls if method in ("family", "env")} == {False}
    assert {here for here, method, _ in split_calls if method == "variant"} == {True}
    assert len([c for c in split_calls if c[1] == "variant"]) == 5  # the five variants the mapping uses


def test_one_extractor_missing_runs_its_first_call_here_and_shares_the_rest(upstreams, tmp_path):
    cache = tmp_path / "cache"
    report(upstreams, tmp_path, "slm-cached", processes=1, cache=cache)
    for entry in (cache / "facts").rglob("*.json"):  # forget Brax's extractions only
        stored = json.loads(entry.read_text()).get("data")  # sealed: {"data", "sha256"}
        if isinstance(stored, dict) and (stored.get("extraction") or {}).get("side") == "brax":
            entry.unlink()
    serial, _, _ = report(upstreams, tmp_path, "one", processes=1)
    split, calls, stderr = report(upstreams, tmp_path, "two", processes=2, cache=cache)
    assert split == serial and stderr == "" and calls
    assert {method for _, method, _ in calls} <= {"family", "env"}  # SLM-Lab's came from the cache
    assert calls[0][:2] == (True, "family")  # parses train(); both processes then share the rest
    assert any(not here for here, _, _ in calls[1:]) and any(here for here, _, _ in calls[1:])


def test_after_a_split_a_warm_run_extracts_nothing_and_reads_no_tree(upstreams, tmp_path):
    cache = tmp_path / "cache"
    cold, _, _ = report(upstreams, tmp_path, "cold", processes=2, cache=cache)
    warm, warm_calls, _ = report(upstreams, tmp_path, "warm", processes=2, cache=cache)
    assert warm == cold and warm_calls == []
    # The child's commit answers were merged by the parent: the SLM-Lab commit's file knows
    # every path the variants read, so a warm run looks them up without reading a tree.
    commits = [json.loads(p.read_text())["data"] for p in (cache / "facts" / "v3" / "commits").glob("*.json")]
    slm_answers = [c["ids"] for c in commits if any(path.endswith(".yaml") for path in c["ids"])]
    assert slm_answers and all(len(ids) > 3 for ids in slm_answers)


def test_a_child_that_fails_leaves_its_share_to_the_parent(upstreams, tmp_path):
    serial, _, _ = report(upstreams, tmp_path, "one", processes=1)
    recovered, calls, stderr = report(upstreams, tmp_path, "two", processes=2, FAIL_IN_CHILD="1")
    assert recovered == serial and stderr == ""
    # A variant the child took fails there (unlogged); this process takes the rest of the
    # queue, then extracts what is still missing: every variant here, once.
    variants = [args for here, method, args in calls if method == "variant"]
    assert len(variants) == 5 and all(here for here, method, _ in calls if method == "variant")


def test_an_interrupt_here_stops_and_reaps_the_children(tmp_path, monkeypatch):
    monkeypatch.setenv(parallel.ENV_PROCESSES, "2")
    pid_file = tmp_path / "child.pid"

    def child_share():
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)

    def here():
        for _ in range(500):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.01)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        parallel.run_shares([here, child_share], FactCache(tmp_path / "cache"), [])
    child = int(pid_file.read_text())
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(child, os.WNOHANG)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_a_child_reads_blobs_on_its_own_git_pipes(tmp_path, monkeypatch):
    monkeypatch.setenv(parallel.ENV_PROCESSES, "2")
    files = {f"f{i}.txt": f"file {i}\n" * (i + 1) for i in range(60)}
    make_repo(tmp_path / "repo", [files])
    snapshot = Repository(tmp_path / "repo", "brax").resolve("HEAD")
    assert snapshot.read("f0.txt") == files["f0.txt"]  # this process's `git cat-file` is running now
    seen = tmp_path / "seen.json"

    def read_all(order):
        return {name: snapshot.read(name) for name in order}

    def child_share():
        seen.write_text(json.dumps(read_all(sorted(files, reverse=True) * 3)))

    got = {}
    parallel.run_shares([lambda: got.update(read_all(sorted(files) * 3)), child_share],
                        FactCache(tmp_path / "cache"), [snapshot.repository])
    assert got == files and json.loads(seen.read_text()) == files
    assert snapshot.read("f59.txt") == files["f59.txt"]  # and this process's pipes still work


def test_one_process_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(parallel.ENV_PROCESSES, "1")
    ran = []
    assert parallel.run_shares([lambda: ran.append(0), lambda: ran.append(1)], FactCache(tmp_path), []) == ([], [])
    assert ran == []
    monkeypatch.setenv(parallel.ENV_PROCESSES, "not a number")
    assert parallel.processes() == 1


def test_a_cache_the_child_cannot_write_is_one_warning(upstreams, tmp_path):
    cache = tmp_path / "cache"
    (cache / "facts").mkdir(parents=True)
    (cache / "facts" / "v3").write_text("a file where the cache's directory goes: nothing can be written under it")
    serial, _, _ = report(upstreams, tmp_path, "one", processes=1)
    files, _, stderr = report(upstreams, tmp_path, "two", processes=2, cache=cache)
    assert files == serial
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "fact cache not written" in warnings[0], stderr


@pytest.mark.parametrize("disabled_here", [False, True])
def test_a_child_whose_cache_write_failed_stops_this_process_writing_with_one_warning(tmp_path, monkeypatch,
                                                                                        disabled_here):
    monkeypatch.setenv(parallel.ENV_PROCESSES, "2")
    cache = FactCache(tmp_path / "cache")
    cache.disabled = disabled_here  # this process warned already, or not

    def child_share():
        cache.disabled = True
        print("warning: fact cache not written (a full disk); continuing without it", file=sys.stderr)

    _, lines = parallel.run_shares([lambda: None, child_share], cache, [])
    assert cache.disabled
    assert lines == ([] if disabled_here else ["warning: fact cache not written (a full disk); continuing without it"])


def test_the_queue_runs_each_task_once_and_a_failing_child_leaves_the_rest_here(tmp_path, monkeypatch):
    monkeypatch.setenv(parallel.ENV_PROCESSES, "2")
    parent = os.getpid()

    def task(number: int, fail_in_child: bool):
        def run():
            if fail_in_child and os.getpid() != parent and number >= 3:
                raise RuntimeError("a child that fails")
            (tmp_path / f"{number}.{os.getpid() == parent}").write_text("")
            time.sleep(0.05)
        return run

    for fail in (False, True):
        for old in tmp_path.glob("*.*"):
            old.unlink()
        parallel.run_queue([task(n, fail) for n in range(20)], FactCache(tmp_path / "cache"), [])
        ran = sorted((int(p.name.split(".")[0]), p.name.endswith("True")) for p in tmp_path.glob("*.*"))
        numbers = [n for n, _ in ran]
        here = [n for n, in_parent in ran if in_parent]
        if not fail:
            assert numbers == list(range(20)) and 0 < len(here) < 20  # each once, both processes took some
        else:  # the task the child failed on is lost (the serial run redoes it); the rest ran here
            assert len(numbers) == len(set(numbers)) >= 19 and all(n in here for n in numbers if n >= 4)


def test_a_queue_too_long_for_a_pipe_is_split_into_fixed_shares(tmp_path, monkeypatch):
    monkeypatch.setenv(parallel.ENV_PROCESSES, "2")
    count = parallel.QUEUE_BYTES // 4 + 10

    def task(number: int):
        return lambda: (tmp_path / str(number)).write_text("")

    parallel.run_queue([task(n) for n in range(count)], FactCache(tmp_path / "cache"), [])
    assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == list(range(count))
