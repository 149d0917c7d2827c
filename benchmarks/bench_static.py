"""The static path's speed: `report`, `extract brax` and `history`, cold and warm, beside griffe.

Each case runs as its own process of the installed ``brax-diff`` (interpreter start included,
as a user sees it, with the checkout's bytecode compiled first and PYTHONDONTWRITEBYTECODE
unset) with ``--code``'s checkout first on PYTHONPATH (default: this one), several
times; the figure is the median wall time and the median CPU time (user + sys of the
process and its children, e.g. git). Cold: a fresh fact cache (BRAX_DIFF_CACHE_DIR) and a
fresh TMPDIR (Jinja's compiled templates live there) for every run. Warm: one untimed run
fills the caches, then every timed run reuses them (a report run writes to a fresh directory,
so the report cache answers it); "warm fact cache" empties the report cache before each run,
so the report is classified and rendered from the cached extractions.

Beside them, in the same run, griffe loads the ``brax`` package at the two refs of the
history range and diffs them (``griffe.load`` + ``griffe.find_breaking_changes``; the
package's ``.py`` files are exported with ``git archive`` first, as griffe's own
``load_git`` checks out a work tree, which a partial clone cannot). griffe is installed
for this benchmark only (``pip install griffe``); without it that row says so.

    python benchmarks/bench_static.py [--code OLD_CHECKOUT] --brax-repo /tmp/brax.git --playground-repo /tmp/playground.git \\
        --slm-repo /tmp/slm.git

prints a Markdown table (the README's Speed section comes from it) with the date, the
machine and its load average before and after. With ``--before OLD_CHECKOUT`` every case runs
at both checkouts in alternating pairs (the order swapped each pair) and the table gives both
side by side, the ratio of each pair (median and range) and issue 38's targets: on a machine
shared with other work the absolute times move from minute to minute, the ratio of a pair much
less.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The targets (seconds of wall time on the project's 2-core machine).
TARGETS = {
    "report_family_warm": 0.5,
    "report_all_warm": 1.0,
    "report_all_cold": 5.0,
    "extract_env_warm": 0.3,
    "history_cold": 20.0,
    "history_warm": 1.0,
}

# Issue 38's targets, in CPU seconds (user + sys, children included) on the project's 2-core
# machine; the cold history's is per commit of the range, the warm report's a ratio to griffe.
CPU_TARGETS = {
    "report_all_cold": 5.0,
    "report_family_cold": 2.0,
    "report_env_cold": 1.0,
}
HISTORY_COLD_PER_COMMIT = 0.1
HISTORY_WARM = 0.5  # wall
WARM_VS_GRIFFE = 5.0

GRIFFE_JOB = r'''
import io, subprocess, sys, tarfile, tempfile
import griffe

repo, package, old_ref, new_ref = sys.argv[1:5]

def export(ref, dest):
    listed = subprocess.run(["git", "--git-dir", repo, "ls-tree", "-r", "--name-only", ref, "--", package],
                            capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in listed if f.endswith(".py")]
    data = subprocess.run(["git", "--git-dir", repo, "archive", "--format=tar", ref, "--", *files],
                          capture_output=True, check=True).stdout
    tarfile.open(fileobj=io.BytesIO(data)).extractall(dest)
    return len(files)

with tempfile.TemporaryDirectory() as old_dir, tempfile.TemporaryDirectory() as new_dir:
    count = export(new_ref, new_dir)
    export(old_ref, old_dir)
    old = griffe.load(package, search_paths=[old_dir], allow_inspection=False)
    new = griffe.load(package, search_paths=[new_dir], allow_inspection=False)
    breaking = list(griffe.find_breaking_changes(old, new))
print(count, len(breaking))
'''


@dataclass
class Case:
    name: str
    what: str
    argv: list[str]
    cold: bool
    runs: int
    # Warm fact cache, but the report cache emptied before each timed run: what classifying and
    # rendering cost when only the extractions are cached (a rule, template or report moved).
    facts_only: bool = False
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall, cpu) seconds of one process; cpu: user + sys of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-2000:]}")
    return wall, cpu, done


def user_environment(code: Path) -> dict:
    """This process's environment as a user's shell has it: ``--code`` first on the path, and
    bytecode written and read (a shell with PYTHONDONTWRITEBYTECODE=1 would compile every
    module from source on every run, 0.2 s of a warm report that no installed copy pays)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(code) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return env


def compile_bytecode(code: Path) -> None:
    """Write the checkout's bytecode before timing, as ``pip install`` does for an installed copy."""
    for package in ("brax_diff", "extractors"):
        if (code / package).is_dir():
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / package)], check=True,
                           env=user_environment(code), capture_output=True)


def run_case(case: Case, scratch: Path, code: Path) -> None:
    prime(case, scratch, code)
    for number in range(case.runs):
        run_once(case, scratch, code, number)


def prime(case: Case, scratch: Path, code: Path) -> None:
    """The case's warm cache and Jinja directory, filled by one untimed run when warm."""
    warm_cache, warm_tmp = scratch / f"{case.name}-cache", scratch / f"{case.name}-tmp"
    for directory in (warm_cache, warm_tmp):
        directory.mkdir()
    if not case.cold:  # fill the cache once, untimed
        timed(case.argv + _output(case, scratch / f"{case.name}-prime"),
              _env(user_environment(code), warm_cache, warm_tmp), code)


def run_once(case: Case, scratch: Path, code: Path, number: int) -> None:
    """One timed run of ``case`` (primed in ``scratch``), its wall and CPU times added to it."""
    if case.cold:
        cache, tmp = scratch / f"{case.name}-cache-{number}", scratch / f"{case.name}-tmp-{number}"
        cache.mkdir()
        tmp.mkdir()
    else:
        cache, tmp = scratch / f"{case.name}-cache", scratch / f"{case.name}-tmp"
        if case.facts_only:
            shutil.rmtree(cache / "reports", ignore_errors=True)
    wall, cpu, _ = timed(case.argv + _output(case, scratch / f"{case.name}-out-{number}"),
                         _env(user_environment(code), cache, tmp), code)
    case.walls.append(wall)
    case.cpus.append(cpu)
    if case.cold:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


def run_pairs(before: Case, after: Case, scratch: Path, codes: tuple[Path, Path]) -> None:
    """``before`` (at ``codes[0]``) and ``after`` (at ``codes[1]``) in alternating pairs, the
    order swapped every pair: on a shared, loaded machine each pair sees about the same load,
    so the ratio of a pair holds where the absolute times drift."""
    places = (scratch / "before", scratch / "after")
    for case, place, code in zip((before, after), places, codes):
        place.mkdir(parents=True, exist_ok=True)
        prime(case, place, code)
    for number in range(after.runs):
        order = (0, 1) if number % 2 == 0 else (1, 0)
        for which in order:
            run_once((before, after)[which], places[which], codes[which], number)


def _ratio(before: list[float], after: list[float]) -> str:
    """The median of the pairs' ratios (before / after) and their range."""
    ratios = sorted(b / a for b, a in zip(before, after) if a > 0)
    if not ratios:
        return ""
    return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def _env(base: dict, cache: Path, tmp: Path) -> dict:
    return {**base, "BRAX_DIFF_CACHE_DIR": str(cache), "TMPDIR": str(tmp)}


def _output(case: Case, directory: Path) -> list[str]:
    return ["--output", f"{directory}/", "-q"] if case.argv[1:2] == ["report"] else []


def brax_diff_command() -> list[str]:
    """The installed `brax-diff` (it imports the checkout PYTHONPATH names first)."""
    found = shutil.which("brax-diff") or shutil.which("brax-diff", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("brax-diff is not installed: pip install -e . in this checkout")
    return [found]


def griffe_case(args, old_ref: str, new_ref: str, runs: int) -> Case:
    case = Case("griffe", f"griffe: load `brax` at {old_ref} and {new_ref}, find_breaking_changes",
                [sys.executable, "-c", GRIFFE_JOB, args.brax_repo, "brax", old_ref, new_ref], cold=True, runs=runs)
    try:
        import griffe  # noqa: F401
    except ImportError:
        case.note = "griffe is not installed (pip install griffe): skipped"
        return case
    for _ in range(runs):
        wall, cpu, done = timed(case.argv, dict(os.environ), ROOT)
        case.walls.append(wall)
        case.cpus.append(cpu)
        modules, breaking = done.stdout.split()
        case.note = f"{modules} modules at {new_ref}, {breaking} breaking changes found"
    return case


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def _commit(code: Path) -> str:
    done = subprocess.run(["git", "-C", str(code), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    return done.stdout.strip()[:72] or "not a git checkout"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def _count_commits(repo: str, rev_range: str) -> int:
    done = subprocess.run(["git", "--git-dir", repo, "rev-list", "--first-parent", "--count", rev_range],
                          capture_output=True, text=True)
    return int(done.stdout.strip() or 0)


def _verdict(case: Case, griffe: "Case | None", commits: int) -> str:
    """Issue 38's target for the case, met or not, from the after figures."""
    met = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    if case.name in CPU_TARGETS:
        return f"≤ {CPU_TARGETS[case.name]:g} CPU-s: {met(case.cpu <= CPU_TARGETS[case.name])}"
    if case.name == "history_cold" and commits:
        per = case.cpu / commits
        return f"≤ {HISTORY_COLD_PER_COMMIT:g} CPU-s/commit: {per:.3f} ({commits} commits), {met(per <= HISTORY_COLD_PER_COMMIT)}"
    if case.name == "history_warm":
        return f"≤ {HISTORY_WARM:g} s: {met(case.wall <= HISTORY_WARM)}"
    if case.name.startswith("report_") and case.name.endswith("_warm") and griffe is not None and griffe.walls:
        faster = griffe.wall / case.wall
        return f"≥ {WARM_VS_GRIFFE:g}x faster than griffe: {faster:.1f}x, {met(faster >= WARM_VS_GRIFFE)}"
    return ""


def print_pairs(pairs: list[tuple[Case, Case]], griffe: "Case | None", before: Path, code: Path,
                started: datetime.datetime, load_before: str, commits: int) -> None:
    print(f"before: {before} ({_commit(before)}); after: {code} ({_commit(code)}). Measured {started:%Y-%m-%d %H:%M} "
          f"UTC on {machine()}; load average {load_before} before, {load()} after (1, 5, 15 min). Alternating "
          "pairs (the order swapped every pair); medians; CPU is user + sys, children included; ratio: before / "
          "after, the median of the pairs' ratios (their range).\n")
    print("| what | pairs | CPU before | CPU after | CPU ratio | wall before | wall after | wall ratio | target (after) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for old, new in pairs:
        print(f"| {new.what} | {new.runs} | {old.cpu:.2f} s | {new.cpu:.2f} s | {_ratio(old.cpus, new.cpus)} "
              f"| {old.wall:.2f} s | {new.wall:.2f} s | {_ratio(old.walls, new.walls)} | {_verdict(new, griffe, commits)} |")
    if griffe is not None:
        if griffe.walls:
            print(f"| {griffe.what} ({griffe.note}) | {griffe.runs} | | {griffe.cpu:.2f} s | | | {griffe.wall:.2f} s | | |")
        else:
            print(f"| {griffe.what} | 0 | {griffe.note} | | | | | | |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brax-repo", required=True)
    parser.add_argument("--playground-repo", required=True)
    parser.add_argument("--slm-repo", required=True)
    parser.add_argument("--brax", default="main")
    parser.add_argument("--playground", default="main")
    parser.add_argument("--slm", default="master")
    parser.add_argument("--family", default="dm_control")
    parser.add_argument("--env", default="PendulumSwingup")
    parser.add_argument("--history", default="v0.12.1..main", help="the Brax range `history` walks (griffe "
                        "loads its two ends)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each warm case (and griffe)")
    parser.add_argument("--cold-runs", type=int, default=3, help="timed runs of each cold case")
    parser.add_argument("--only", help="comma-separated case names (report_family_warm, ..., griffe)")
    parser.add_argument("--code", default=str(ROOT), help="the brax-diff checkout to time (default: this one; "
                        "another, e.g. a worktree of an older commit, gives the before figures)")
    parser.add_argument("--before", help="an older checkout (e.g. `git archive OLD | tar -x -C DIR`): every case "
                        "runs at it and at --code in alternating pairs, and the table gives both and their ratio")
    args = parser.parse_args()
    code = Path(args.code).resolve()
    before = Path(args.before).resolve() if args.before else None

    python = brax_diff_command()
    for checkout in (code, before) if before else (code,):
        imported = subprocess.run([sys.executable, "-c", "import brax_diff; print(brax_diff.__file__)"],
                                  env={**os.environ, "PYTHONPATH": str(checkout)}, cwd=checkout, capture_output=True,
                                  text=True)
        if not imported.stdout.strip().startswith(str(checkout)):  # the installed command must run its package
            raise SystemExit(f"PYTHONPATH={checkout} imports brax_diff from "
                             f"{imported.stdout.strip() or imported.stderr}")
    repos = ["--brax-repo", args.brax_repo, "--playground-repo", args.playground_repo, "--slm-repo", args.slm_repo]
    refs = ["--brax", args.brax, "--playground", args.playground, "--slm", args.slm]
    report = [*python, "report", *repos, *refs]
    extract = [*python, "extract", "brax", "--brax-repo", args.brax_repo, "--playground-repo", args.playground_repo,
               "--brax", args.brax, "--playground", args.playground, "--env", args.env]
    # The Playground is held at its default ref (main): --playground would be a range to walk.
    history = [*python, "history", *repos, "--brax", args.history, "--family", args.family]
    cases = [
        Case("report_family_warm", f"`report --family {args.family}`, warm", report + ["--family", args.family],
             False, args.runs),
        Case("report_all_warm", "`report`, all three families, warm", report, False, args.runs),
        Case("report_family_warm_facts", f"`report --family {args.family}`, warm fact cache, report cache emptied",
             report + ["--family", args.family], False, args.runs, facts_only=True),
        Case("report_all_warm_facts", "`report`, all three families, warm fact cache, report cache emptied", report,
             False, args.runs, facts_only=True),
        Case("report_family_cold", f"`report --family {args.family}`, cold", report + ["--family", args.family],
             True, args.cold_runs),
        Case("report_all_cold", "`report`, all three families, cold", report, True, args.cold_runs),
        Case("report_env_cold", f"`report --env {args.env}`, cold", report + ["--env", args.env], True,
             args.cold_runs),
        Case("extract_env_warm", f"`extract brax --env {args.env}`, warm", extract, False, args.runs),
        Case("extract_env_cold", f"`extract brax --env {args.env}`, cold", extract, True, args.cold_runs),
        Case("history_warm", f"`history --brax {args.history} --family {args.family}`, warm", history, False,
             args.runs),
        Case("history_cold", f"`history --brax {args.history} --family {args.family}`, cold", history, True,
             args.cold_runs),
    ]
    wanted = set(args.only.split(",")) if args.only else None
    old_ref, new_ref = args.history.split("..", 1)
    compile_bytecode(code)
    if before:
        compile_bytecode(before)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = load()
    done: list[Case] = []
    pairs: list[tuple[Case, Case]] = []
    with tempfile.TemporaryDirectory(prefix="bench-static-") as scratch:
        for case in cases:
            if wanted is None or case.name in wanted:
                print(f"running {case.name} ({case.runs} {'pairs' if before else 'runs'}) ...", file=sys.stderr,
                      flush=True)
                if before:
                    old = replace(case, walls=[], cpus=[])
                    run_pairs(old, case, Path(scratch) / case.name, (before, code))
                    pairs.append((old, case))
                else:
                    run_case(case, Path(scratch), code)
                done.append(case)
    griffe = None
    if wanted is None or "griffe" in wanted:
        print("running griffe ...", file=sys.stderr, flush=True)
        griffe = griffe_case(args, old_ref, new_ref, args.runs)
    if before:
        commits = _count_commits(args.brax_repo, args.history)
        print_pairs(pairs, griffe, before, code, started, load_before, commits)
        return 0

    print(f"brax-diff at {code} ({_commit(code)}). Measured {started:%Y-%m-%d %H:%M} UTC on {machine()}; "
          f"load average {load_before} before, {load()} after (1, 5, 15 min). Median of the runs; CPU is "
          "user + sys, children included.\n")
    print("| what | runs | wall (median) | CPU (median) | target | vs griffe (wall) |")
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    reference = griffe.wall if griffe is not None and griffe.walls else None
    for case in done:
        target = TARGETS.get(case.name)
        verdict = "" if target is None else f"≤ {target:g} s: {'met' if case.wall <= target else 'NOT met'}"
        ratio = f"{reference / case.wall:.1f}x faster" if reference and case.wall < reference else (
            f"{case.wall / reference:.1f}x slower" if reference else "")
        print(f"| {case.what} | {case.runs} | {case.wall:.2f} s | {case.cpu:.2f} s | {verdict} | {ratio} |")
    if griffe is not None:
        if griffe.walls:
            print(f"| {griffe.what} ({griffe.note}) | {griffe.runs} | {griffe.wall:.2f} s | {griffe.cpu:.2f} s | | 1x |")
        else:
            print(f"| {griffe.what} | 0 | {griffe.note} | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
