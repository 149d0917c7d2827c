"""Independent extractions run at once in forked processes, to fill the fact cache.

A cold `report` or `history` spends its time in the data-flow engine, one extraction after
the other, and most of those extractions do not depend on each other. :func:`run_shares`
runs the first share of such work in this process and every other share in a forked child
at the same time; :func:`run_queue` lets the processes take tasks from one queue, and
:func:`run_groups` gives each process whole groups (one extractor's tasks, which share
what the first of them parses). A child's results reach the parent only through the fact
cache (atomic files, named per process): the parent's ordinary, serial run that follows
finds them there.
So nothing a child does is needed for a correct answer: a share that fails, is killed or is
left unfinished is simply extracted again by the parent, which also gives its errors.

Forked, not spawned: a child starts with the parent's imports (libcst alone takes a second)
and with everything the parent parsed so far. It must not share the parent's GitPython
``git cat-file`` pipes (two processes on one pipe would read each other's answers), so it
sets them aside unused and opens its own; nor the parent's terminal (a progress thread may
hold its lock), so its output is captured and handed to the parent. The per-commit answers
the fact cache keeps (one file per commit, read-merge-written) are sent back and merged by
the parent alone, since several children may learn about the same commit.

``BRAX_DIFF_PROCESSES`` sets how many processes take part (default: the CPUs this process
may use); 1 runs nothing here, leaving all the work to the serial run.
"""

from __future__ import annotations

import functools
import io
import json
import os
import signal
import sys
from typing import Any, Callable, Iterable, Sequence

from .factcache import FactCache
from ..sources.repository import Repository

ENV_PROCESSES = "BRAX_DIFF_PROCESSES"
# The most task numbers (4 bytes each) a queue holds: one page, within every platform's pipe buffer.
QUEUE_BYTES = 4096

# A child keeps the parent's GitPython pipe objects alive, unused: dropping them would run
# their finalizers, which terminate the parent's `git cat-file` processes.
_SET_ASIDE: list = []


def processes() -> int:
    """How many processes a split may use: $BRAX_DIFF_PROCESSES, else the usable CPUs; 1
    where this platform cannot fork."""
    if not hasattr(os, "fork"):
        return 1
    configured = os.environ.get(ENV_PROCESSES, "").strip()
    if configured:
        try:
            return max(1, int(configured))
        except ValueError:
            return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def run_shares(shares: Sequence[Callable[[], Any]], cache: FactCache,
               repositories: Iterable[Repository]) -> tuple[list[Any], list[str]]:
    """Run ``shares[0]`` here and each other share in a forked child, all at once; returns
    what each child's share returned (JSON; None for a child that failed) and the lines the
    children printed (this process prints its own).

    With one process (see :func:`processes`) or one share, nothing is run: the caller's
    serial run does the work. A share here that raises stops the children and raises; a
    child that fails only loses its share. The children write ``cache``; the commit answers
    they learnt are merged into it here, once all are done.
    """
    if len(shares) < 2 or processes() < 2:
        return [], []
    repositories = list(repositories)
    children: list[tuple[int, int]] = []  # (pid, read end of its pipe)
    try:
        for share in shares[1:processes()]:
            children.append(_fork(share, cache, repositories))
        for share in shares[processes():]:  # more shares than processes: this one does them too
            share()
        shares[0]()
        return _collect(children, cache, repositories)
    except BaseException:
        _stop(children)
        raise


def run_queue(tasks: Sequence[Callable[[], Any]], cache: FactCache, repositories: Iterable[Repository]) -> list[str]:
    """Run ``tasks`` here and in forked children at once, each process taking the next task
    not yet taken until none is left (so a process that drew short tasks takes more); returns
    the lines the children printed. See :func:`run_shares` for failures and the cache.

    The queue is a pipe holding every task's number: a read of 4 bytes takes one, and no two
    processes read the same bytes.
    """
    workers = min(processes(), len(tasks))
    if workers < 2:
        return []
    numbers = b"".join(i.to_bytes(4, "little") for i in range(len(tasks)))
    if len(numbers) > QUEUE_BYTES:  # more than any pipe holds before it is read: fixed shares instead
        shares = [functools.partial(_run_each, tasks[i::workers]) for i in range(workers)]
        return run_shares(shares, cache, repositories)[1]
    read_end, write_end = os.pipe()
    try:
        written = os.write(write_end, numbers)
        os.close(write_end)
        if written != len(numbers):  # cannot happen within a pipe's buffer; never lose tasks
            return []

        def take_and_run() -> int:
            done = 0
            while len(number := os.read(read_end, 4)) == 4:
                tasks[int.from_bytes(number, "little")]()
                done += 1
            return done

        return run_shares([take_and_run] * workers, cache, repositories)[1]
    finally:
        os.close(read_end)


def run_groups(groups: Sequence[Sequence[Callable[[], Any]]], cache: FactCache,
               repositories: Iterable[Repository]) -> list[str]:
    """Run groups of tasks at once, each group whole in one process: a group's tasks share
    what its first one parses (one extractor's code), which another process would parse
    again. The groups are dealt out in order, one per process and round again; returns
    the lines the children printed. See :func:`run_shares` for failures and the cache."""
    workers = min(processes(), len(groups))
    if workers < 2:
        return []
    shares = [functools.partial(_run_each, [task for group in groups[i::workers] for task in group])
              for i in range(workers)]
    return run_shares(shares, cache, repositories)[1]


def _run_each(tasks: Sequence[Callable[[], Any]]) -> None:
    for task in tasks:
        task()


def _fork(share: Callable[[], Any], cache: FactCache, repositories: list[Repository]) -> tuple[int, int]:
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _child(share, cache, repositories, write_end)
    os.close(write_end)
    return pid, read_end


def _child(share: Callable[[], Any], cache: FactCache, repositories: list[Repository], write_end: int) -> None:
    captured = io.StringIO()
    payload: dict = {"commits": {}, "output": "", "value": None}
    try:
        sys.stdout = sys.stderr = captured
        for repository in repositories:
            _own_git_pipes(repository)
        cache.pending_commits = {}
        payload["value"] = share()
        payload["commits"] = cache.pending_commits
        payload["cache_disabled"] = cache.disabled
    except BaseException as exc:  # the parent redoes the share's work, and raises its errors
        payload["failed"] = f"{type(exc).__name__}: {exc}"
    finally:
        payload["output"] = captured.getvalue()
        try:
            with os.fdopen(write_end, "w", encoding="utf-8") as pipe:
                json.dump(payload, pipe)
        finally:
            os._exit(0)  # no finalizers, no atexit: they belong to the parent


def _own_git_pipes(repository: Repository) -> None:
    """Set the parent's persistent `git cat-file` processes aside; the next read starts ours."""
    opened = repository._git
    if opened is None:
        return
    for command in {id(c): c for c in (opened.git, getattr(opened.odb, "_git", None)) if c is not None}.values():
        for attribute in ("cat_file_all", "cat_file_header"):
            _SET_ASIDE.append(getattr(command, attribute, None))
            setattr(command, attribute, None)


def _collect(children: list[tuple[int, int]], cache: FactCache,
             repositories: list[Repository]) -> tuple[list[Any], list[str]]:
    """Wait for every child; merge the commit answers each sent; their values and printed lines."""
    values: list[Any] = []
    output: list[str] = []
    while children:
        pid, read_end = children[0]
        with os.fdopen(read_end, encoding="utf-8", closefd=False) as pipe:
            text = pipe.read()  # before waiting: a child blocks on a full pipe until it is read
        os.waitpid(pid, 0)
        os.close(read_end)
        children.pop(0)  # only now: an interrupt above still stops and reaps it
        try:
            payload = json.loads(text)
        except ValueError:  # killed before it wrote: its share is simply not in the cache
            values.append(None)
            continue
        values.append(None if "failed" in payload else payload.get("value"))
        lines = str(payload.get("output", "")).splitlines()
        if payload.get("cache_disabled"):  # its warning is this process's too: one line, and no more writes
            lines = [] if cache.disabled else lines
            cache.disabled = True
        output += [line for line in lines if line not in output]
        _merge_commits(payload.get("commits"), cache, repositories)
    cache.forget_pathsets()  # the children stored entries under path sets this process has not seen
    return values, output


def _merge_commits(commits, cache: FactCache, repositories: list[Repository]) -> None:
    if not isinstance(commits, dict):
        return
    for sha, known in sorted(commits.items()):
        if not (isinstance(known, dict) and isinstance(known.get("ids"), dict)):
            continue
        date, ids = known.get("date"), known["ids"]
        cache.remember_commit(sha, date, ids)
        for repository in repositories:  # the repository that has this commit learns its ids
            if repository._object_ids is not None:
                repository.object_ids.learn(sha, ids)


def _stop(children: list[tuple[int, int]]) -> None:
    """Terminate and reap the children (interrupted, or this process's share failed)."""
    for pid, read_end in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid, read_end in children:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        try:
            os.close(read_end)
        except OSError:
            pass
    children.clear()
