"""What keeps the static path fast (issue 14), checked as behaviour rather than timings:
each fix template compiled once per process; a fact-cache hit imports no extractor
(libcst), no rich and no training stack, and says byte for byte what a cold run says;
work shared across environments is shared (Brax facts per distinct config, tree walks,
path lookups) and gives the same answers; the faster bracket count gives the old verdicts.
The timings themselves are benchmarks/bench_static.py's."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

import brax_fixtures as fx
import report_fixtures as rfx
from brax_diff.safety import limits
from brax_diff.compare import rules
from brax_diff.extract.cached import CachedExtractor
from brax_diff.compare.pairing import compare
from brax_diff.errors import BraxDiffError
from brax_diff.extract.factcache import FactCache
from brax_diff.sources.repository import Repository
from gitfixture import add_commit
from upstream_repos import make_upstreams, repo_flags

ROOT = Path(__file__).resolve().parent.parent

# Modules a run answered from the fact cache has no use for.
# GitPython (git, gitdb) too: the cache knows each path's id and the date at the commits it stored.
# Jinja too: the report cache keeps the rendered report by everything it is made from (PyYAML
# is imported by these tests' runs for their --mapping file only).
HEAVY = ("libcst", "rich", "torch", "jax", "brax_diff.verify", "brax_diff.extractors.brax.extractor", "brax_diff.extractors.slm.extractor", "brax_diff.extractors.engine.flow",
         "brax_diff.extractors.engine.pyast", "git", "gitdb", "jinja2")


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_upstreams(tmp_path_factory.mktemp("up"))


def run_main(argv: list[str], cwd: Path, cache: Path) -> tuple[int, str, list[str]]:
    """``brax-diff ARGV`` in a fresh interpreter: exit code, stdout, the modules it imported."""
    probe = ("import json, sys\n"
             "from brax_diff.cli import main\n"
             f"code = main({argv!r})\n"
             "sys.stdout.flush()\n"
             "print('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n"
             "sys.exit(code)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_INTERACTIVE", "TTY_COMPATIBLE")}
    env.update(PYTHONPATH=str(ROOT), BRAX_DIFF_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    out, _, modules = done.stdout.rpartition("\nMODULES ")
    assert modules, done.stderr
    return done.returncode, out, json.loads(modules)


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def files_under(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# -- templates -------------------------------------------------------------------------------


def test_each_fix_template_compiles_once_per_process():
    table = rules.load_rules()
    differences = compare(rfx.brax_extraction(), rfx.slm_extraction())
    first = rules.classify(differences, table)
    compiled = rules._TEMPLATES.compilations
    fixes = [c for c in first if c.fix is not None]
    assert len(fixes) >= 10  # the fixtures differ in many keys: many fixes rendered
    for _ in range(5):
        again = rules.classify(differences, table)
        assert [c.to_json() for c in again] == [c.to_json() for c in first]
    assert rules._TEMPLATES.compilations == compiled  # 5 x the fixes rendered, nothing compiled
    rules.load_rules()  # the same table loaded again compiles no template it already has
    assert rules._TEMPLATES.compilations == compiled


def test_a_bad_template_is_still_refused_and_never_kept(tmp_path):
    override = tmp_path / "rules.yaml"
    override.write_text("rules:\n  - code: BD001\n    fix: {text: '{{ brax | nosuchfilter }}'}\n")
    with pytest.raises(BraxDiffError, match="bad template"):
        rules.load_rules(override)
    assert "{{ brax | nosuchfilter }}" not in rules._TEMPLATES._compiled


# -- a warm report -----------------------------------------------------------------------------


def test_a_warm_report_imports_no_extractor_and_writes_the_same_bytes(upstreams, tmp_path):
    cache = tmp_path / "cache"
    argv = ["report", *repo_flags(upstreams), "--slm", "HEAD", "-q"]
    code, _, cold_modules = run_main(argv + ["--output", str(tmp_path / "cold") + "/"], tmp_path, cache)
    assert code == 0
    assert "libcst" in cold_modules  # the cold run did parse
    code, _, warm_modules = run_main(argv + ["--output", str(tmp_path / "warm") + "/"], tmp_path, cache)
    assert code == 0
    assert heavy(warm_modules) == []
    cold, warm = files_under(tmp_path / "cold"), files_under(tmp_path / "warm")
    assert sorted(cold) == ["dm_control.json", "dm_control.md", "locomotion.json", "locomotion.md",
                            "manipulation.json", "manipulation.md"]
    assert warm == cold
    code, _, _ = run_main(argv + ["--output", str(tmp_path / "uncached") + "/", "--no-cache"], tmp_path, cache)
    assert code == 0 and files_under(tmp_path / "uncached") == cold


def test_extract_brax_answers_from_the_cache_the_same_json(upstreams, tmp_path):
    cache = tmp_path / "cache"
    argv = ["extract", "brax", "--brax-repo", str(upstreams["brax"]), "--playground-repo",
            str(upstreams["playground"]), "--env", "WalkerRun", "--format", "json"]
    code, uncached, _ = run_main(argv + ["--no-cache"], tmp_path, cache)
    assert code == 0 and not cache.exists()  # --no-cache writes nothing
    code, cold, _ = run_main(argv, tmp_path, cache)
    assert code == 0
    code, warm, warm_modules = run_main(argv, tmp_path, cache)
    assert code == 0
    assert heavy(warm_modules) == []
    assert warm == cold == uncached
    assert json.loads(warm)["scope"] == {"env": "WalkerRun", "family": "dm_control"}


# -- the cache's JSON answers -----------------------------------------------------------------


def cached_brax(upstreams, cache_root: Path, made: list):
    from brax_diff.extractors.brax.extractor import BraxExtractor

    brax = Repository(upstreams["brax"], "brax").resolve("HEAD")
    playground = Repository(upstreams["playground"], "playground").resolve("HEAD")

    def factory():
        made.append(1)
        return BraxExtractor(brax, playground)

    return CachedExtractor(None, "brax", {"brax": brax, "playground": playground}, FactCache(cache_root),
                           ("env", "family", "defaults"), values=("environments", "family_of"), factory=factory)


def test_environment_lists_are_cached_by_the_blobs_read_and_errors_are_not(tmp_path):
    upstreams = make_upstreams(tmp_path / "up")  # its own: this test commits to the Playground
    made: list = []
    cold = cached_brax(upstreams, tmp_path / "cache", made)
    envs = cold.environments("dm_control")
    assert "CartpoleBalance" in envs and envs == sorted(envs)
    assert cold.family_of("WalkerRun") == "dm_control"
    assert made == [1]

    made.clear()
    warm = cached_brax(upstreams, tmp_path / "cache", made)
    assert warm.environments("dm_control") == envs
    assert warm.family_of("WalkerRun") == "dm_control"
    assert made == []  # answered from the cache: no extractor built
    with pytest.raises(BraxDiffError, match="not a registered Playground environment"):
        warm.family_of("NoSuchEnv")
    assert made == [1]  # an error is asked of the extractor, never of the cache

    # A new registry blob at a new commit: the list read there, not the cached one.
    registry = (upstreams["playground"] / fx.DM_REGISTRY).read_text()
    changed = registry.replace('    "CheetahRun": cheetah.Run,\n',
                               '    "CheetahRun": cheetah.Run,\n    "CheetahSprint": cheetah.Run,\n')
    assert changed != registry
    add_commit(upstreams["playground"], {fx.DM_REGISTRY: changed}, index=20)
    made.clear()
    moved = cached_brax(upstreams, tmp_path / "cache", made)
    assert moved.environments("dm_control") == sorted(envs + ["CheetahSprint"])
    assert made == [1]


# -- shared work ----------------------------------------------------------------------------------


def test_brax_facts_are_derived_once_per_distinct_config_with_the_same_answers(upstreams):
    from brax_diff.extractors.brax.extractor import BraxExtractor

    def extractor():
        brax = Repository(upstreams["brax"], "brax").resolve("HEAD")
        return BraxExtractor(brax, Repository(upstreams["playground"], "playground").resolve("HEAD"))

    shared = extractor()
    envs = shared.environments("dm_control")
    together = {env: shared.env(env).to_json() for env in envs}
    assert 1 <= len(shared.code._derived) < len(envs)  # envs with their family's config share one
    for env in envs:
        assert extractor().env(env).to_json() == together[env]  # each alone, nothing shared


def test_tree_walks_are_remembered_bounded_and_the_same(monkeypatch):
    from brax_diff.extractors.engine import pyast

    module = pyast.IndexedModule(fx.TRAIN_OLD, fx.TRAIN)

    def walk(node):
        out, stack = [], [node]
        while stack:
            current = stack.pop()
            out.append(current)
            stack.extend(reversed(pyast.child_nodes(current)))
        return out

    fn = module.function("train")
    assert fn is not None
    first = list(pyast.descendants(fn))
    assert [id(n) for n in first] == [id(n) for n in walk(fn)]
    assert [id(n) for n in pyast.descendants(fn)] == [id(n) for n in first]  # remembered: same nodes
    monkeypatch.setattr(pyast, "MAX_REMEMBERED", len(first) + 1)
    pyast._WALKS.clear()
    pyast._REMEMBERED[0] = 0
    list(pyast.descendants(fn))
    list(pyast.descendants(module.module))  # past the bound: the walks so far are dropped
    assert list(pyast._WALKS) == [id(module.module)]
    assert [id(n) for n in pyast.descendants(fn)] == [id(n) for n in first]


def test_snapshot_reads_and_lookups_match_gitpython(upstreams):
    snapshot = Repository(upstreams["brax"], "brax").resolve("HEAD")
    tree = snapshot.commit.tree
    assert snapshot.read(fx.TRAIN) == (tree / fx.TRAIN).data_stream.read().decode()
    assert snapshot.object_id(fx.TRAIN) == (tree / fx.TRAIN).hexsha
    folder = fx.TRAIN.rsplit("/", 1)[0]
    assert snapshot.listdir(folder) == sorted(item.name for item in tree / folder)
    assert snapshot.object_id(folder + "/") == (tree / folder).hexsha
    assert snapshot.object_id(folder) is None  # a tree is not a blob
    assert snapshot.object_id(fx.TRAIN + "/x") is None
    assert snapshot.listdir("no/such/dir") == []
    with pytest.raises(BraxDiffError, match="not found"):
        snapshot.read("no/such/file.py")
    assert snapshot.reads["no/such/file.py"] is None


# -- the bracket count ----------------------------------------------------------------------------

# The scan check_nesting made before (issue 12), kept here as the reference.
_OLD_TOKENS = {
    "json": re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}\n]'),
    "python": re.compile(r'''"""(?:\\.|[\s\S])*?"""|\'\'\'(?:\\.|[\s\S])*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*|[\[\](){}\n]'''),
    "toml": re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}\n]'),
}


def old_verdict(text: str, syntax: str) -> str | None:
    depth, line = 0, 1
    for match in _OLD_TOKENS[syntax].finditer(text):
        token = match.group()
        if token in "[{(":
            depth += 1
            if depth > limits.MAX_NESTING:
                return f"o: line {line}: nesting deeper than {limits.MAX_NESTING} levels (limit)"
        elif token in "]})":
            depth -= 1
        else:
            line += token.count("\n")
    return None


def new_verdict(text: str, syntax: str) -> str | None:
    try:
        limits.check_nesting(text, "o", syntax)
    except limits.LimitExceeded as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("syntax", ["json", "python", "toml"])
def test_the_bracket_count_gives_the_old_verdicts(syntax):
    rng = random.Random(14)
    alphabet = ['[', ']', '{', '}', '(', ')', '"', "'", '#', '\\', '\n', 'a', ' ', '"""', "'''"]
    deep = 0
    for _ in range(3000):
        parts = [rng.choice(alphabet) for _ in range(rng.randint(0, 60))]
        if rng.random() < 0.3:  # deep enough to trip the limit
            at = rng.randint(0, len(parts))
            parts[at:at] = [rng.choice("[{(")] * (limits.MAX_NESTING + rng.randint(-1, 2))
        text = "".join(parts)
        verdict = old_verdict(text, syntax)
        deep += verdict is not None
        assert new_verdict(text, syntax) == verdict, repr(text)
    assert deep > 100  # both outcomes were tried


# -- compiled report templates between runs -------------------------------------------------------


def test_compiled_report_templates_kept_on_disk_render_the_same(tmp_path):
    script = ("import sys\n"
              "from brax_diff.report.render import render_rules_markdown\n"
              "from brax_diff.compare.rules import load_rules\n"
              "sys.stdout.write(render_rules_markdown(load_rules()))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}

    def render() -> str:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = render()
    assert first == (ROOT / "docs" / "rules.md").read_text()
    kept = list(tmp_path.glob("_jinja2-cache-*/__brax_diff_*.cache"))
    assert kept  # the compiled template was kept
    assert render() == first
    for path in kept:  # a cut-short or foreign file is only slower
        path.write_bytes(path.read_bytes()[:40])
    assert render() == first


def test_compiled_fix_templates_kept_on_disk_render_the_same_fixes(tmp_path):
    script = ("import json, sys\n"
              f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
              "import report_fixtures as rfx\n"
              "from brax_diff.compare import rules\n"
              "from brax_diff.compare.pairing import compare\n"
              "found = rules.classify(compare(rfx.brax_extraction(), rfx.slm_extraction()), rules.load_rules())\n"
              "print(json.dumps([c.to_json() for c in found], sort_keys=True))\n"
              "print(rules._TEMPLATES.compilations)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}

    def classify() -> tuple[str, int]:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        fixes, compilations = done.stdout.rsplit("\n", 2)[:2]
        return fixes, int(compilations)

    first, compiled = classify()
    assert compiled >= 10 and '"fix": {' in first
    kept = list(tmp_path.glob("_jinja2-cache-*/__brax_diff_fix_*.cache"))
    assert len(kept) == compiled
    assert classify() == (first, 0)  # every template's code read back, none compiled
    for path in kept:  # a cut-short file: that template is compiled again
        path.write_bytes(path.read_bytes()[:40])
    assert classify() == (first, compiled)


def test_the_commit_answers_a_warm_run_trusts_are_what_git_says(upstreams, tmp_path):
    cache = tmp_path / "cache"
    argv = ["report", *repo_flags(upstreams), "--slm", "HEAD", "-q", "--family", "dm_control"]
    code, _, _ = run_main(argv + ["--output", str(tmp_path / "cold") + "/"], tmp_path, cache)
    assert code == 0
    from brax_diff.extract.factcache import LAYOUT_VERSION
    from brax_diff.safety.io import unsealed

    stored = sorted((cache / "facts").glob(f"{LAYOUT_VERSION}/commits/*.json"))
    assert len(stored) == 3  # one commit per side
    repos = {side: Repository(upstreams[side], side) for side in ("brax", "playground", "slm")}
    for file in stored:
        answers = unsealed(json.loads(file.read_text()))  # the entry with its digest checked
        sha = file.stem
        repo = next(r for r in repos.values() if r.resolve("HEAD").sha == sha)
        commit = repo.git.commit(sha)
        assert answers["date"] == commit.committed_datetime.isoformat()
        assert len(answers["ids"]) >= 2
        for path, object_id in answers["ids"].items():
            fresh = Repository(upstreams[repo.side], repo.side).object_ids
            assert object_id == fresh(commit, path), path
    # A damaged answers file is no answer: the warm run reads the trees and says the same.
    stored[0].write_text('{"date": 3, "ids": [')
    code, _, modules = run_main(argv + ["--output", str(tmp_path / "warm") + "/"], tmp_path, cache)
    assert code == 0 and "git" in modules
    assert files_under(tmp_path / "warm") == files_under(tmp_path / "cold")
