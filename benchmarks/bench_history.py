"""Benchmark: `history` (blob-id skipping + fact cache) against a naive checkout-every-commit walk.

    python benchmarks/bench_history.py [--brax /tmp/google+brax.git]
        [--playground /tmp/google-deepmind+mujoco_playground.git] [--slm /tmp/kengz+SLM-Lab.git]
        [--only NAME] [--skip-naive] [--skip-cli]

Three parts:

1. Engine vs naive, with a small *toy* extractor defined here (signature defaults of Brax's
   ``train()``/``make_ppo_networks()``, the Playground family config and one env's override
   branch, the leaves of an SLM-Lab spec file). The engine reads blobs, skips commits whose
   read blobs did not change and caches by blob id (cold: empty cache; warm: rerun). The
   naive walk checks out every first-parent commit into one ``git worktree`` (sparse: this
   snapshot lacks some large blobs, so a full checkout fails; sparse favours the naive
   walk) and parses the files from disk. Both must list the same commits: checked.
2. The real `brax-diff history` CLI, cold and warm, when the real extractors are present.
3. `brax-diff report` against the local clones, cold and warm, when the command exists.

With ``--before OLD_CHECKOUT`` (e.g. ``git archive OLD | tar -x -C DIR``) it runs only the real
`brax-diff history` scenarios, at OLD and at this checkout in alternating pairs (the order
swapped each pair, each run cold then warm on its own cache), and prints them side by side:
CPU (user + sys, children included) and wall, the pairs' ratios, CPU per commit of the range,
and whether both printed the same JSON. On a machine shared with other work the absolute times
drift; the ratio of a pair much less.

Only the repositories given are read; nothing upstream is imported or run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brax_diff.errors import BraxDiffError  # noqa: E402
from brax_diff.facts.model import Extraction, Fact, Provenance  # noqa: E402
from brax_diff.extract.factcache import FactCache  # noqa: E402
from brax_diff.history.walk import HistoryEngine, Recipe, first_parent_log, fact_changes, parse_range  # noqa: E402
from brax_diff.errors import SourceError  # noqa: E402
from brax_diff.sources.repository import Repository, Snapshot  # noqa: E402
from brax_diff.extractors.engine.pyast import Code, PyModule  # noqa: E402

TRAIN = "brax/training/agents/ppo/train.py"
NETWORKS = "brax/training/agents/ppo/networks.py"
FAMILY_FILES = {  # family -> (params module, registry module)
    "dm_control": ("mujoco_playground/config/dm_control_suite_params.py",
                   "mujoco_playground/_src/dm_control_suite/__init__.py"),
    "locomotion": ("mujoco_playground/config/locomotion_params.py", "mujoco_playground/_src/locomotion/__init__.py"),
    "manipulation": ("mujoco_playground/config/manipulation_params.py",
                     "mujoco_playground/_src/manipulation/__init__.py"),
}
SLM_SPEC = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"
# What the naive walk checks out (sparse) per side: the directories the toy reads.
SPARSE = {"brax": ["brax/training/*.py", "brax/training/agents/ppo/", "brax/training/acme/"], "playground": ["mujoco_playground/config/",
                                                                   "mujoco_playground/_src/*/__init__.py"],
          "slm": ["slm_lab/spec/benchmark_arc/ppo/"]}


# -- the toy extractor, over anything with .read/.exists/.where ----------------------------------


def _plain(value):
    return str(value) if isinstance(value, Code) else (list(value) if isinstance(value, tuple) else value)


def _signature(src, path, function, prefix, out):
    if not src.exists(path):
        raise BraxDiffError(f"{path} not found")
    module = PyModule(src.read(path), path)
    fn = module.function(function)
    if fn is None:
        raise BraxDiffError(f"{function}() not found in {path}")
    for name, found in module.signature_defaults(fn).items():
        try:
            out.add(Fact(f"{prefix}.{name}", _plain(found.value), (src.where(path, found.line),)))
        except TypeError:
            out.add(Fact(f"{prefix}.{name}", module.code(found.node), (src.where(path, found.line),)))


def _family_config(src, family, env, out):
    params, registry = FAMILY_FILES[family]
    if env is not None and f'"{env}"' not in (src.read(registry) if src.exists(registry) else ""):
        raise BraxDiffError(f"{env} is not registered in {registry}")
    if not src.exists(params):
        raise BraxDiffError(f"{params} not found")
    module = PyModule(src.read(params), params)
    fn = module.function("brax_ppo_config")
    if fn is None:
        raise BraxDiffError(f"brax_ppo_config() not found in {params}")
    import libcst as cst

    def add(key, node, value_node):
        value = module.literal_or_code(value_node)
        try:
            out.add(Fact(f"playground.{key}", _plain(value), (src.where(params, module.line(node)),)))
        except TypeError:
            out.add(Fact(f"playground.{key}", module.code(value_node), (src.where(params, module.line(node)),)))

    def statements(body, matches_env):
        for stmt in body:
            if isinstance(stmt, cst.If):
                branch = stmt
                while isinstance(branch, cst.If):
                    if env is not None and f'"{env}"' in module.code(branch.test):
                        statements(branch.body.body, True)
                        break
                    branch = branch.orelse.body if isinstance(branch.orelse, cst.Else) else \
                        branch.orelse
                continue
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) \
                        and module.code(small.value.func).endswith("create"):
                    for arg in small.value.args:
                        if arg.keyword is not None:
                            add(arg.keyword.value, arg, arg.value)
                elif isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Attribute):
                    target = module.code(small.targets[0].target)
                    if target.startswith("rl_config."):
                        add(target[len("rl_config."):], small, small.value)

    statements(fn.body.body, False)


def _flatten(prefix, value, out, where):
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            _flatten(f"{prefix}.{key}" if prefix else str(key), value[key], out, where)
    elif isinstance(value, (list, tuple)):
        out.add(Fact(prefix, str(value), (where,)))
    else:
        out.add(Fact(prefix, value if isinstance(value, (bool, int, float, str)) or value is None else str(value),
                     (where,)))


def toy_brax(src_brax, src_playground, family=None, env=None) -> Extraction:
    out = Extraction("brax", {}, {"family": family, "env": env})
    _signature(src_brax, TRAIN, "train", "train", out)
    _signature(src_brax, NETWORKS, "make_ppo_networks", "networks", out)
    if family:
        _family_config(src_playground, family, env, out)
    return out


def toy_slm(src) -> Extraction:
    out = Extraction("slm", {}, {"variant": None})
    if not src.exists(SLM_SPEC):
        raise BraxDiffError(f"{SLM_SPEC} not found")
    try:
        data = yaml.safe_load(src.read(SLM_SPEC))
    except yaml.YAMLError as exc:
        raise BraxDiffError(f"bad YAML: {exc}".splitlines()[0]) from None
    _flatten("", data, out, src.where(SLM_SPEC, 1))
    return out


class DirSource:
    """The naive walk's reader: files from a checked-out work tree."""

    def __init__(self, root: Path, repo: str, sha: str) -> None:
        self.root, self.repo, self.sha = root, repo, sha

    def exists(self, path):
        return (self.root / path).is_file()

    def read(self, path):
        return (self.root / path).read_text(encoding="utf-8", errors="replace")

    def where(self, path, line):
        return Provenance(self.repo, self.sha, path, line)


class DirSnapshot(Snapshot):
    """A Snapshot whose files come from a checked-out work tree (the naive walk, real extractors)."""

    root: Path = Path(".")

    def _path(self, path: str) -> Path:
        return self.root / path.strip("/")

    def blob_id(self, path):
        return "on-disk" if self._path(path).is_file() else None

    def read(self, path):
        target = self._path(path)
        if not target.is_file():
            raise SourceError(f"{self.side}: {path} not found at {self.sha[:12]}")
        return target.read_text(encoding="utf-8", errors="replace")

    def listdir(self, path):
        target = self._path(path)
        return sorted(os.listdir(target)) if target.is_dir() else []


def dir_snapshot(repo: Repository, sha: str, root: Path) -> DirSnapshot:
    snap = DirSnapshot(repo, repo.git.commit(sha), sha)
    snap.root = root
    return snap


# -- scenarios ----------------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    side: str  # the side walked
    range: str
    held: dict[str, str]
    sides: tuple[str, ...]
    extract: Callable  # (sources by side) -> Extraction
    cli: list[str] | None = None  # the equivalent real `brax-diff history` flags
    real: Callable | None = None  # the same with the real extractor: (snapshots by side) -> Extraction


def real_brax(family=None, env=None):
    def extract(snaps):
        from brax_diff.extractors.brax.extractor import BraxExtractor

        extractor = BraxExtractor(snaps["brax"], snaps.get("playground"))
        return extractor.env(env) if env else extractor.family(family)
    return extract


def scenarios() -> list[Scenario]:
    return [
        Scenario("brax-all-defaults", "brax", "main", {}, ("brax",),
                 lambda s: toy_brax(s["brax"], None)),
        Scenario("brax-v0.12.1..main-dm_control", "brax", "v0.12.1..main", {"playground": "main"},
                 ("brax", "playground"), lambda s: toy_brax(s["brax"], s["playground"], "dm_control"),
                 ["--brax", "v0.12.1..main", "--family", "dm_control"], real_brax(family="dm_control")),
        Scenario("brax-all-dm_control", "brax", "main", {"playground": "main"},
                 ("brax", "playground"), lambda s: toy_brax(s["brax"], s["playground"], "dm_control"),
                 ["--brax", "main", "--family", "dm_control"], real_brax(family="dm_control")),
        Scenario("playground-all-AlohaHandOver", "playground", "main", {"brax": "main"}, ("brax", "playground"),
                 lambda s: toy_brax(s["brax"], s["playground"], "manipulation", "AlohaHandOver"),
                 ["--playground", "main", "--env", "AlohaHandOver"], real_brax(env="AlohaHandOver")),
        Scenario("slm-all-ppo_playground", "slm", "master", {}, ("slm",), lambda s: toy_slm(s["slm"])),
    ]


def changed_commits(walk) -> list[str]:
    return [commit.sha for commit, _ in walk.grouped()]


def run_engine(scenario: Scenario, repos, cache_root: Path | None):
    recipe = Recipe(f"bench:{scenario.name}", "1", {"scenario": scenario.name}, scenario.sides, scenario.extract)
    engine = HistoryEngine(repos, FactCache(cache_root) if cache_root else None)
    began = time.perf_counter()
    walk = engine.walk([recipe], scenario.side, scenario.range, scenario.held)
    return walk, engine, time.perf_counter() - began


def run_naive(scenario: Scenario, repos, workdir: Path, real: bool = False) -> tuple[list[str], float, int]:
    """Check out every first-parent commit in one worktree; parse from disk; compare values."""
    repo = repos[scenario.side]
    began = time.perf_counter()
    clone = workdir / f"{scenario.side}.git"
    if not clone.exists():  # a --shared clone: the snapshot itself is never modified
        subprocess.run(["git", "clone", "-q", "--bare", "--shared", repo.git.git_dir, str(clone)], check=True)
    tree = workdir / f"wt-{scenario.name}{'-real' if real else ''}"
    git = ["git", "-C", str(clone)]
    start_ref, end_ref = parse_range(scenario.range)
    start = repo.resolve(start_ref).sha if start_ref else None
    log = first_parent_log(repo, start, repo.resolve(end_ref).sha)
    subprocess.run([*git, "worktree", "add", "-q", "--no-checkout", "--detach", str(tree), log[0].sha], check=True)
    subprocess.run(["git", "-C", str(tree), "sparse-checkout", "set", "--no-cone", *SPARSE[scenario.side]],
                   check=True, capture_output=True)
    held = {side: repos[side].resolve(ref) for side, ref in scenario.held.items()}
    previous: dict = {}
    if start:
        subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--detach", start], capture_output=True)
        previous = _naive_facts(scenario, tree, repo, start, held, real)
    changed = []
    for commit in log:
        subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--detach", commit.sha], capture_output=True)
        facts = _naive_facts(scenario, tree, repo, commit.sha, held, real)
        if fact_changes(previous, facts):
            changed.append(commit.sha)
        previous = facts
    subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=True)
    return changed, time.perf_counter() - began, len(log)


def _naive_facts(scenario, tree, repo, sha, held, real=False):
    if real:
        sources = {scenario.side: dir_snapshot(repo, sha, tree), **held}
    else:
        sources = {scenario.side: DirSource(tree, repo.web_url, sha), **held}
    try:
        return (scenario.real if real else scenario.extract)(sources).facts
    except BraxDiffError:
        return {}


# -- the real CLI ---------------------------------------------------------------------------------


def brax_diff_command() -> list[str]:
    """The installed `brax-diff` (pip install -e . for this checkout), not code from the cwd."""
    found = shutil.which("brax-diff") or shutil.which("brax-diff", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("brax-diff is not installed: pip install -e . in this checkout")
    return [found]


def cli_has(command: str) -> bool:
    done = subprocess.run([*brax_diff_command(), command, "--help"], cwd=ROOT, capture_output=True)
    return done.returncode == 0


def time_cli(args: list[str], env: dict, cwd: Path = ROOT) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    done = subprocess.run([*brax_diff_command(), *args], cwd=cwd, capture_output=True, text=True, env=env)
    return time.perf_counter() - began, done


def real_brax_extractor_missing() -> str | None:
    """None when the real Brax extractor (all the history scenarios need) is here, else what is missing."""
    return None if (ROOT / "extractors" / "brax.py").is_file() else "extractors/brax/extractor.py"


def timed_cli(args: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall, CPU) seconds of one `brax-diff` process; CPU: user + sys, its children included."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run([*brax_diff_command(), *args], cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): brax-diff {' '.join(args)}\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def compare_checkouts(args, before: Path, pairs: int) -> int:
    """The real `brax-diff history` scenarios at ``before`` and at this checkout, side by side."""
    import statistics

    codes = {"before": before.resolve(), "after": ROOT}
    for code in codes.values():  # bytecode compiled first, as an installed copy has it
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "brax_diff"), str(code / "extractors")],
                       capture_output=True)
    repo_flags = ["--brax-repo", args.brax, "--playground-repo", args.playground, "--slm-repo", args.slm]

    def ratio(old: list[float], new: list[float]) -> str:
        ratios = sorted(o / n for o, n in zip(old, new) if n > 0)
        return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})" if ratios else ""

    print(f"before: {codes['before']}; after: {ROOT}. {pairs} alternating pairs, medians; ratio: before / after, "
          f"the median of the pairs' ratios (their range); load average {os.getloadavg()[0]:.2f} at the start.\n")
    print("| `brax-diff history` | commits | cold CPU before | cold CPU after | ratio | CPU/commit after "
          "| warm wall before | warm wall after | ratio | same JSON |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for scenario in scenarios():
        if not scenario.cli or (args.only and scenario.name != args.only):
            continue
        flags = ["history", *scenario.cli, *repo_flags, "--format", "json"]
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        warm: dict[str, list[float]] = {"before": [], "after": []}
        outputs: set[str] = set()
        for number in range(pairs):
            for which in ("before", "after") if number % 2 == 0 else ("after", "before"):
                with tempfile.TemporaryDirectory(prefix="bench-history-") as cache:
                    env = {**os.environ, "PYTHONPATH": str(codes[which]), "BRAX_DIFF_CACHE_DIR": cache}
                    env.pop("PYTHONDONTWRITEBYTECODE", None)
                    _, cold_cpu, done = timed_cli(flags, env)
                    warm_wall, _, again = timed_cli(flags, env)
                cpu[which].append(cold_cpu)
                warm[which].append(warm_wall)
                outputs |= {done.stdout, again.stdout}
        commits = json.loads(next(iter(outputs)))["walks"][0]["stats"]["commits"]
        after_cpu = statistics.median(cpu["after"])
        print(f"| {' '.join(scenario.cli)} | {commits} | {statistics.median(cpu['before']):.2f} s | {after_cpu:.2f} s "
              f"| {ratio(cpu['before'], cpu['after'])} | {after_cpu / max(commits, 1):.3f} s "
              f"| {statistics.median(warm['before']):.2f} s | {statistics.median(warm['after']):.2f} s "
              f"| {ratio(warm['before'], warm['after'])} | {'yes' if len(outputs) == 1 else 'NO'} |", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brax", default="/tmp/google+brax.git")
    parser.add_argument("--playground", default="/tmp/google-deepmind+mujoco_playground.git")
    parser.add_argument("--slm", default="/tmp/kengz+SLM-Lab.git")
    parser.add_argument("--only", help="run one scenario by name")
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--before", help="an older checkout: the real history scenarios at it and at this one, "
                        "side by side (alternating pairs)")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs with --before")
    args = parser.parse_args()
    if args.before:
        return compare_checkouts(args, Path(args.before), args.pairs)
    paths = {"brax": args.brax, "playground": args.playground, "slm": args.slm}
    repos = {side: Repository(path, side) for side, path in paths.items()}
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, git "
          f"{subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.split()[-1]}")
    print("| scenario | commits | touch reads | extracted | changed | cold s | warm s | naive s | naive/cold | naive/warm |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        work = Path(tmp)
        for scenario in scenarios():
            if args.only and scenario.name != args.only:
                continue
            cache = work / f"cache-{scenario.name}"
            walk, engine, cold = run_engine(scenario, repos, cache)
            again, warm_engine, warm = run_engine(scenario, repos, cache)
            assert changed_commits(again) == changed_commits(walk), "warm run listed other commits"
            assert warm_engine.parsed == 0, f"warm run parsed {warm_engine.parsed} extractions"
            naive_s = ratio_cold = ratio_warm = "-"
            if not args.skip_naive:
                changed, naive, count = run_naive(scenario, repos, work)
                if changed != changed_commits(walk):
                    print(f"MISMATCH {scenario.name}: naive {len(changed)} vs engine {len(walk.grouped())}",
                          file=sys.stderr)
                    return 1
                naive_s, ratio_cold, ratio_warm = f"{naive:.2f}", f"{naive / cold:.1f}x", f"{naive / warm:.0f}x"
            print(f"| {scenario.name} | {walk.commits} | {walk.touching} | {walk.extractions} | "
                  f"{len(walk.grouped())} | {cold:.2f} | {warm:.2f} | {naive_s} | {ratio_cold} | {ratio_warm} |",
                  flush=True)
        if args.skip_cli:
            return 0
        env = {**os.environ, "BRAX_DIFF_CACHE_DIR": str(work / "cli-cache")}
        repo_flags = ["--brax-repo", args.brax, "--playground-repo", args.playground, "--slm-repo", args.slm]
        missing = real_brax_extractor_missing()
        if missing or not cli_has("history"):
            print(f"\nskipped real `brax-diff history`: {missing or 'the history command'} not in this checkout")
        else:
            print("\n| real `brax-diff history` | commits | touch reads | changed | cold s | warm s | naive s "
                  "| naive/cold | naive/warm |\n|---|---|---|---|---|---|---|---|---|")
            for scenario in scenarios():
                if not scenario.cli or (args.only and scenario.name != args.only):
                    continue
                flags = ["history", *scenario.cli, *repo_flags, "--format", "json"]
                own = {**env, "BRAX_DIFF_CACHE_DIR": str(work / f"cli-cache-{scenario.name}")}  # really cold
                cold, done = time_cli(flags, own)
                warm, again = time_cli(flags, own)
                if done.returncode != 0 or again.stdout != done.stdout:
                    print(f"| {' '.join(scenario.cli)} | failed: {done.stderr.strip()[-200:]} |")
                    continue
                walk = json.loads(done.stdout)["walks"][0]
                listed = [c["sha"] for c in walk["commits"]]
                naive_s = ratio_cold = ratio_warm = "-"
                if not args.skip_naive:
                    changed, naive, _ = run_naive(scenario, repos, work, real=True)
                    if changed != listed:
                        print(f"MISMATCH real {scenario.name}: naive {len(changed)} vs history {len(listed)}",
                              file=sys.stderr)
                        return 1
                    naive_s, ratio_cold, ratio_warm = f"{naive:.2f}", f"{naive / cold:.1f}x", f"{naive / warm:.0f}x"
                stats = walk["stats"]
                print(f"| {' '.join(scenario.cli)} | {stats['commits']} | {stats['touching_reads']} | {len(listed)} "
                      f"| {cold:.2f} | {warm:.2f} | {naive_s} | {ratio_cold} | {ratio_warm} |", flush=True)
        if not cli_has("report"):
            print("\nskipped `brax-diff report`: the report command is not in this checkout "
                  "(brax_diff/cli/report.py registers no command)")
        else:
            run_in = work / "report-run"  # the report is written under reports/ here
            run_in.mkdir()
            report = ["report", "--brax", "main", "--playground", "main", "--slm", "master", *repo_flags]
            shutil.rmtree(work / "cli-cache", ignore_errors=True)
            cold, done = time_cli(report, env, run_in)
            warm, _ = time_cli(report, env, run_in)
            status = "ok" if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()[-200:]}"
            print(f"\n`brax-diff report` against local clones: cold {cold:.2f} s, warm {warm:.2f} s ({status})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
