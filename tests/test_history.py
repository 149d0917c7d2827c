"""History engine: commits that change a fact value, skip logic, on-disk cache, CLI wiring."""

from __future__ import annotations

import ast
import re
import types

import json
import os
import sys

import pytest

from brax_diff.cli import main
from brax_diff.errors import BraxDiffError, SourceError
from brax_diff.extract.factcache import FactCache, cache_root
from brax_diff.history.walk import (HistoryEngine, Recipe, render_json, render_markdown, History, parse_range,
                               same_value, fact_changes)
from brax_diff.facts.model import Extraction, Fact
from brax_diff.sources.repository import Repository
from gitfixture import _git, add_commit, make_repo

# -- A toy extractor shaped like the real ones ---------------------------------------------
# Brax side: ``train.py`` holds ``def train(key=value, ...)`` defaults, one per line; a
# ``# include: other.py`` line makes it read another file too (so the read set can move).
# Playground side: ``envs/`` lists registered environments (one ``<Name>.py`` each) and
# ``params.py`` holds ``if env_name == "X":`` blocks of ``p["key"] = value`` overrides.
DEFAULT = re.compile(r"^\s+(\w+)\s*=\s*(.+?),?\s*(#.*)?$")
INCLUDE = re.compile(r"^#\s*include:\s*(\S+)")
BRANCH = re.compile(r"""^\s*(?:el)?if env_name == ["'](\w+)["']:""")
OVERRIDE = re.compile(r"""^\s+p\[["'](\w+)["']\]\s*=\s*(.+?)\s*$""")


def _defaults(snapshot, path, extraction):
    text = snapshot.read(path)
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        include = INCLUDE.match(line)
        if include:
            _defaults(snapshot, include.group(1), extraction)
            continue
        if line.startswith("def train("):
            inside = True
            continue
        if inside and line.startswith(")"):
            inside = False
        match = DEFAULT.match(line) if inside else None
        if match:
            extraction.add(Fact(match.group(1), ast.literal_eval(match.group(2)),
                                (snapshot.where(path, number),)))


def _overrides(snapshot, env, extraction):
    if not snapshot.exists("params.py"):
        return
    current = None
    for number, line in enumerate(snapshot.read("params.py").splitlines(), 1):
        branch = BRANCH.match(line)
        if branch:
            current = branch.group(1)
            continue
        match = OVERRIDE.match(line)
        if match and current == env:
            extraction.add(Fact(match.group(1), ast.literal_eval(match.group(2)),
                                (snapshot.where("params.py", number),)))


def environments(playground):
    return [name[:-3] for name in playground.listdir("envs") if name.endswith(".py")]


def toy_extract(snaps, env=None):
    """Defaults from brax, then (for an env) the playground overrides."""
    brax, playground = snaps["brax"], snaps.get("playground")
    sources = {name: snap.info() for name, snap in snaps.items()}
    extraction = Extraction("brax", sources, {"family": None, "env": env})
    _defaults(brax, "train.py", extraction)
    if env is not None:
        if env not in environments(playground):
            raise BraxDiffError(f"environment {env!r} is not registered")
        _overrides(playground, env, extraction)
    return extraction


class ToyBraxExtractor:
    """The contract's BraxExtractor, with the toy parsers (for CLI wiring tests)."""

    def __init__(self, brax, playground):
        self.snaps = {"brax": brax, "playground": playground}

    def families(self):
        return ["toy"]

    def environments(self, family):
        return sorted(environments(self.snaps["playground"]))

    def family_of(self, env):
        return "toy"

    def defaults(self):
        return toy_extract({"brax": self.snaps["brax"]})

    def family(self, family):
        return toy_extract(self.snaps)

    def env(self, env):
        return toy_extract(self.snaps, env)


def toy_brax_module() -> types.ModuleType:
    module = types.ModuleType("brax_diff.extractors.brax.extractor")
    module.BraxExtractor = ToyBraxExtractor
    module.FAMILIES = ("toy",)
    return module


TRAIN_V0 = """
def train(
    learning_rate=3e-4,
    num_envs=256,
):
    pass
"""
# Same values, lines moved and reformatted: must not be listed.
TRAIN_MOVED = """
# Training entry point.

def train(
    num_envs = 256,   # envs
    learning_rate = 0.0003,
):
    pass
"""
TRAIN_LR = TRAIN_MOVED.replace("0.0003", "1e-3")
TRAIN_ENTROPY = TRAIN_LR.replace("):", "    entropy_coef=0.01,\n):")
TRAIN_NO_ENVS = TRAIN_ENTROPY.replace("    num_envs = 256,   # envs\n", "")

PARAMS = """
def params(env_name):
  p = {}
  if env_name == "Cartpole":
    p["num_envs"] = 1024
  return p
"""


def toy_recipe(env=None, version="1"):
    return Recipe("toy", version, {"env": env}, ("brax", "playground"),
                  lambda snaps: toy_extract(snaps, env))


@pytest.fixture()
def repos(tmp_path):
    brax = make_repo(tmp_path / "brax", [
        {"train.py": TRAIN_V0, "README.md": "brax\n"},
        {"README.md": "brax, better docs\n"},
        {"train.py": TRAIN_MOVED},
        {"train.py": TRAIN_LR},
        {"other.py": "x = 1\n"},
        {"train.py": TRAIN_ENTROPY},
        {"train.py": TRAIN_NO_ENVS},
    ], messages=["root", "docs", "reformat train", "raise lr", "unrelated", "add entropy", "drop num_envs"],
        origin="https://github.com/toy/brax.git")
    playground = make_repo(tmp_path / "playground", [
        {"params.py": PARAMS, "envs/Other.py": "\n"},
        {"envs/Cartpole.py": "\n"},
        {"params.py": PARAMS.replace("1024", "2048")},
    ], messages=["root", "register Cartpole", "more envs"], origin="https://github.com/toy/playground.git")
    return {"brax": (Repository(tmp_path / "brax", "brax"), brax),
            "playground": (Repository(tmp_path / "playground", "playground"), playground)}


def engine_for(repos, cache=None):
    return HistoryEngine({side: repo for side, (repo, _) in repos.items()}, cache)


def summary(walk):
    """(subject, [(key, kind, old value, new value)]) per listed commit."""
    return [(commit.subject, [(c.key, c.kind, c.old and c.old.value, c.new and c.new.value)
                              for e in entries for c in e.changes])
            for commit, entries in walk.grouped()]


def test_range_lists_value_changes_only(repos):
    engine = engine_for(repos)
    shas = repos["brax"][1]
    walk = engine.walk([toy_recipe()], "brax", f"{shas[0]}..main", {"playground": "main"})
    assert summary(walk) == [
        ("raise lr", [("learning_rate", "changed", 3e-4, 1e-3)]),
        ("add entropy", [("entropy_coef", "appeared", None, 0.01)]),
        ("drop num_envs", [("num_envs", "disappeared", 256, None)]),
    ]
    assert walk.commits == 6  # commits after the baseline
    assert walk.touching == 4  # reformat, lr, entropy, drop: docs/unrelated never considered
    assert walk.extractions == 4
    assert engine.parsed == 5  # baseline + the four touching commits


def test_links_point_at_the_changing_commit_and_line(repos):
    shas = repos["brax"][1]
    walk = engine_for(repos).walk([toy_recipe()], "brax", f"{shas[0]}..main", {"playground": "main"})
    change = walk.entries[0].changes[0]
    assert change.old.provenance[0].url == f"https://github.com/toy/brax/blob/{shas[2]}/train.py#L5"
    assert change.new.provenance[0].url == f"https://github.com/toy/brax/blob/{shas[3]}/train.py#L5"
    assert walk.entries[0].commit.url == f"https://github.com/toy/brax/commit/{shas[3]}"


def test_bare_ref_walks_whole_history_from_the_root(repos):
    walk = engine_for(repos).walk([toy_recipe()], "brax", "main", {"playground": "main"})
    assert walk.start is None and walk.commits == 7
    assert summary(walk)[0] == ("root", [("learning_rate", "appeared", None, 3e-4),
                                         ("num_envs", "appeared", None, 256)])
    assert [s for s, _ in summary(walk)] == ["root", "raise lr", "add entropy", "drop num_envs"]


def test_other_side_held_at_its_ref_and_env_registration_is_a_change(repos):
    brax_shas = repos["brax"][1]
    walk = engine_for(repos).walk([toy_recipe(env="Cartpole")], "playground", "main",
                                  {"brax": brax_shas[0]})
    assert walk.held["brax"].commit == brax_shas[0]
    assert summary(walk) == [
        ("register Cartpole", [("learning_rate", "appeared", None, 3e-4), ("num_envs", "appeared", None, 1024)]),
        ("more envs", [("num_envs", "changed", 1024, 2048)]),
    ]
    # The listing of envs/ is part of the read set, so adding envs/Cartpole.py was a candidate.
    assert walk.entries[0].note == "extraction succeeds from here (before: environment 'Cartpole' is not registered)"


def test_read_set_is_rederived_when_a_file_starts_being_read(tmp_path):
    shas = make_repo(tmp_path / "b", [
        {"train.py": TRAIN_V0, "extra.py": "def train(\n    clip_epsilon=0.2,\n):\n"},
        {"extra.py": "def train(\n    clip_epsilon=0.25,\n):\n"},  # not read yet: no change
        {"train.py": "# include: extra.py\n" + TRAIN_V0},
        {"extra.py": "def train(\n    clip_epsilon=0.3,\n):\n"},  # read now
    ], messages=["root", "extra before", "include extra", "extra after"])
    repo = Repository(tmp_path / "b", "brax")
    engine = HistoryEngine({"brax": repo})
    recipe = Recipe("toy", "1", {}, ("brax",), lambda snaps: toy_extract(snaps))
    walk = engine.walk([recipe], "brax", f"{shas[0]}..main", {})
    assert summary(walk) == [("include extra", [("clip_epsilon", "appeared", None, 0.25)]),
                             ("extra after", [("clip_epsilon", "changed", 0.25, 0.3)])]


def test_missing_file_that_appears_later_is_found(tmp_path):
    make_repo(tmp_path / "b", [{"README.md": "x\n"}, {"README.md": "y\n"}, {"train.py": TRAIN_V0}],
              messages=["root", "docs", "add trainer"])
    engine = HistoryEngine({"brax": Repository(tmp_path / "b", "brax")})
    recipe = Recipe("toy", "1", {}, ("brax",), lambda snaps: toy_extract(snaps))
    walk = engine.walk([recipe], "brax", "main", {})
    assert [s for s, _ in summary(walk)] == ["add trainer"]
    assert walk.entries[0].note.startswith("extraction succeeds from here (before: brax: train.py not found")
    assert engine.parsed == 2  # the root (fails) and "add trainer"; "docs" is never extracted


def test_merge_bringing_a_change_is_listed_on_the_first_parent_line(tmp_path):
    path = tmp_path / "b"
    make_repo(path, [{"train.py": TRAIN_V0}], messages=["root"])
    _git(path, "checkout", "-q", "-b", "side")
    add_commit(path, {"train.py": TRAIN_LR}, message="side: raise lr", index=1)
    _git(path, "checkout", "-q", "main")
    add_commit(path, {"README.md": "x\n"}, message="main: docs", index=2)
    _git(path, "merge", "-q", "--no-ff", "side", "-m", "Merge side")
    engine = HistoryEngine({"brax": Repository(path, "brax")})
    recipe = Recipe("toy", "1", {}, ("brax",), lambda snaps: toy_extract(snaps))
    walk = engine.walk([recipe], "brax", "main~1..main", {})
    assert summary(walk) == [("Merge side", [("learning_rate", "changed", 3e-4, 1e-3)])]


def test_cache_makes_rerun_parse_nothing_and_output_identical(repos, tmp_path):
    shas = repos["brax"][1]
    cold = engine_for(repos, FactCache(tmp_path / "cache"))
    first = History([cold.walk([toy_recipe()], "brax", "main", {"playground": "main"})])
    warm_cache = FactCache(tmp_path / "cache")
    warm = engine_for(repos, warm_cache)
    second = History([warm.walk([toy_recipe()], "brax", "main", {"playground": "main"})])
    assert cold.parsed == 5 and warm.parsed == 0
    assert warm_cache.hits == 5 and warm_cache.misses == 0
    assert render_markdown(first) == render_markdown(second)
    assert render_json(first) == render_json(second)
    assert f"/blob/{shas[3]}/train.py#L5" in render_markdown(second)
    # A new extractor version must not reuse old results.
    bumped = engine_for(repos, FactCache(tmp_path / "cache"))
    bumped.walk([toy_recipe(version="2")], "brax", "main", {"playground": "main"})
    assert bumped.parsed == 5


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_walk_split_over_two_processes_says_what_one_process_says(repos, tmp_path, monkeypatch):
    log = tmp_path / "extracted"

    def logged(snaps):
        with open(log, "a") as out:
            out.write(f"{os.getpid()} {snaps['brax'].sha}\n")
        return toy_extract(snaps)

    recipe = Recipe("toy", "1", {"env": None}, ("brax", "playground"), logged)
    walks = {}
    for processes in ("1", "2"):
        monkeypatch.setenv("BRAX_DIFF_PROCESSES", processes)
        cache = FactCache(tmp_path / f"cache-{processes}")
        engine = engine_for(repos, cache)
        walks[processes] = History([engine.walk([recipe], "brax", "main", {"playground": "main"})])
        assert engine.parsed == 5 and (cache.hits, cache.misses) == (0, 5)
    assert render_json(walks["1"]) == render_json(walks["2"])
    assert render_markdown(walks["1"]) == render_markdown(walks["2"])
    extracted = [line.split() for line in log.read_text().splitlines()]
    serial, split = extracted[:5], extracted[5:]
    assert len(split) == 5 and sorted(sha for _, sha in split) == sorted(sha for _, sha in serial)
    assert len({pid for pid, _ in split}) == 2  # the root here; of the four touching commits, two in a child
    warm = engine_for(repos, FactCache(tmp_path / "cache-2"))
    assert render_json(History([warm.walk([recipe], "brax", "main", {"playground": "main"})])) == render_json(walks["1"])
    assert warm.parsed == 0 and len(log.read_text().splitlines()) == 10


def test_cache_hit_from_another_commit_is_relinked_to_the_current_commit(tmp_path):
    shas = make_repo(tmp_path / "b", [{"train.py": TRAIN_V0}, {"train.py": TRAIN_LR}, {"train.py": TRAIN_V0}],
                     messages=["root", "raise lr", "revert"], origin="https://github.com/toy/brax")
    engine = HistoryEngine({"brax": Repository(tmp_path / "b", "brax")}, FactCache(tmp_path / "cache"))
    recipe = Recipe("toy", "1", {}, ("brax",), lambda snaps: toy_extract(snaps))
    walk = engine.walk([recipe], "brax", "main", {})
    assert engine.parsed == 2 and engine.cache.hits == 1  # "revert" reads root's blob: a cache hit
    revert = walk.entries[-1]
    assert revert.commit.subject == "revert"
    assert revert.changes[0].new.provenance[0].url == f"https://github.com/toy/brax/blob/{shas[2]}/train.py#L2"


def test_corrupt_cache_entries_are_misses(repos, tmp_path):
    engine_for(repos, FactCache(tmp_path / "cache")).walk([toy_recipe()], "brax", "main", {"playground": "main"})
    entries = [p for p in (tmp_path / "cache").rglob("*.json") if p.name != "pathsets.json"]
    assert len(entries) == 5
    for path in entries:
        path.write_text("{not json")
    again = engine_for(repos, FactCache(tmp_path / "cache"))
    walk = again.walk([toy_recipe()], "brax", "main", {"playground": "main"})
    assert again.parsed == 5 and len(walk.grouped()) == 4


def test_cache_location_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / "env"))
    assert cache_root("/explicit") == cache_root("/explicit").__class__("/explicit")
    assert cache_root(None) == tmp_path / "env"
    monkeypatch.delenv("BRAX_DIFF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root(None) == tmp_path / "xdg" / "brax-diff"


def test_output_is_deterministic_and_json_is_complete(repos):
    shas = repos["brax"][1]
    runs = [History([engine_for(repos).walk([toy_recipe()], "brax", f"{shas[0]}..main", {"playground": "main"})])
            for _ in range(2)]
    assert render_markdown(runs[0]) == render_markdown(runs[1])
    data = json.loads(render_json(runs[0]))
    walk = data["walks"][0]
    assert walk["stats"] == {"commits": 6, "touching_reads": 4, "extractions": 4}
    assert [c["subject"] for c in walk["commits"]] == ["raise lr", "add entropy", "drop num_envs"]
    assert walk["commits"][0]["scopes"][0]["changes"][0]["old"]["value"] == 3e-4
    assert walk["held"]["playground"]["commit"] == repos["playground"][1][-1]


def test_value_comparison():
    assert same_value(1, 1.0) and not same_value(True, 1) and not same_value([1, 2], [1])
    assert same_value(["a", 2], ["a", 2.0]) and not same_value("1", 1)
    old = {"a": Fact("a", 1), "b": Fact("b", True)}
    new = {"a": Fact("a", 1.0), "b": Fact("b", 1), "c": Fact("c", None)}
    assert [(c.key, c.kind) for c in fact_changes(old, new)] == [("b", "changed"), ("c", "appeared")]


def test_bad_ranges_and_refs(repos):
    assert parse_range("v1..main") == ("v1", "main") and parse_range("main") == (None, "main")
    for text in ("a...b", "..main", "v1..", ""):
        with pytest.raises(BraxDiffError):
            parse_range(text)
    with pytest.raises(SourceError, match="cannot resolve ref 'nope'"):
        engine_for(repos).walk([toy_recipe()], "brax", "nope..main", {"playground": "main"})


# -- CLI wiring (the contract's BraxExtractor replaced by the toy one) -------------------------


def run_cli(capsys, args):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_history_env_markdown_and_json(repos, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "brax_diff.extractors.brax.extractor", toy_brax_module())
    monkeypatch.chdir(tmp_path)
    flags = ["--brax-repo", str(tmp_path / "brax"), "--playground-repo", str(tmp_path / "playground"),
             "--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, ["history", "--playground", "main", "--env", "Cartpole", *flags])
    assert code == 0, err
    assert "### 2025-01-02 [`" in out and "register Cartpole" in out
    assert "- `num_envs`: `1024` → `2048`" in out
    assert "history: 3 extractions parsed; cache 0 hits, 3 misses" in err
    code, out_json, err = run_cli(capsys, ["history", "--playground", "main", "--env", "Cartpole",
                                           "--format", "json", *flags])
    assert code == 0 and "cache 3 hits, 0 misses" in err
    walk = json.loads(out_json)["walks"][0]
    assert walk["scopes"] == [{"env": "Cartpole", "family": None}]
    assert [c["subject"] for c in walk["commits"]] == ["register Cartpole", "more envs"]


def test_cli_errors_are_one_line(repos, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "brax_diff.extractors.brax.extractor", toy_brax_module())
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, ["history"])
    assert code == 2 and err.startswith("error: give a range to walk")
    code, out, err = run_cli(capsys, ["history", "--brax", "main", "--env", "A", "--family", "b"])
    assert code == 2 and err == "error: give at most one of --family, --env, --variant\n"
    code, out, err = run_cli(capsys, ["history", "--brax", "main", "--format", "xml"])
    assert code == 2 and "--format must be one of md, json" in err
    code, out, err = run_cli(capsys, ["history", "--brax", "x...y", "--brax-repo", str(tmp_path / "brax"),
                                      "--playground-repo", str(tmp_path / "playground"),
                                      "--cache-dir", str(tmp_path / "c")])
    assert code == 2 and "symmetric" in err and "Traceback" not in err


def test_cli_missing_extractor_is_a_clear_error(repos, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "brax_diff.extractors.slm.extractor", None)  # import fails as if not built
    monkeypatch.chdir(tmp_path)
    make_repo(tmp_path / "slm", [{"x.yaml": "a: 1\n"}])
    code, out, err = run_cli(capsys, ["history", "--slm", "main", "--variant", "v", "--slm-repo",
                                      str(tmp_path / "slm"), "--cache-dir", str(tmp_path / "c")])
    assert code == 2 and err == "error: brax_diff.extractors.slm.extractor.SlmExtractor is not available in this installation\n"


class ToySlmExtractor:
    """The contract's SlmExtractor over a flat YAML spec: {variant: {family: F, envs: [..], key: value}}."""

    def __init__(self, snapshot, spec="spec.yaml", sets=None, mapping=None):
        self.snapshot, self.spec = snapshot, spec

    def _data(self):
        import yaml

        return yaml.safe_load(self.snapshot.read(self.spec)) or {}

    def variants(self):
        return sorted(self._data())

    def family_of(self, variant):
        return self._data().get(variant, {}).get("family")

    def variant_for(self, family=None, env=None):
        for name, body in sorted(self._data().items()):
            if env in body.get("envs", []) or (family and body.get("family") == family):
                return name
        raise BraxDiffError(f"no variant for {env or family}")

    def variant(self, name):
        body = self._data().get(name)
        if body is None:
            raise BraxDiffError(f"no variant {name!r} in {self.spec}")
        lines = self.snapshot.read(self.spec).splitlines()
        out = Extraction("slm", {"slm": self.snapshot.info()}, {"variant": name, "family": body.get("family"),
                                                                 "envs": body.get("envs", [])})
        for key, value in body.items():
            if key not in ("family", "envs"):
                line = next(i for i, text in enumerate(lines, 1) if text.strip().startswith(f"{key}:"))
                out.add(Fact(key, value, (self.snapshot.where(self.spec, line),)))
        return out


def toy_slm_module() -> types.ModuleType:
    module = types.ModuleType("brax_diff.extractors.slm.extractor")
    module.SlmExtractor = ToySlmExtractor
    module.DEFAULT_SPEC = "spec.yaml"
    return module


SPEC = """
ppo_toy:
  family: toy
  envs: [Cartpole]
  clip_epsilon: 0.2
  learning_rate: 0.001
"""


def test_cli_slm_walk_maps_env_to_variant_and_variant_to_brax_family(repos, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "brax_diff.extractors.brax.extractor", toy_brax_module())
    monkeypatch.setitem(sys.modules, "brax_diff.extractors.slm.extractor", toy_slm_module())
    monkeypatch.chdir(tmp_path)
    make_repo(tmp_path / "slm", [{"spec.yaml": SPEC}, {"notes.md": "x\n"},
                                 {"spec.yaml": SPEC.replace("0.2", "0.3")}],
              messages=["spec", "notes", "wider clip"], origin="https://github.com/toy/SLM-Lab")
    flags = ["--slm-repo", str(tmp_path / "slm"), "--spec", "spec.yaml", "--cache-dir", str(tmp_path / "c"),
             "--brax-repo", str(tmp_path / "brax"), "--playground-repo", str(tmp_path / "playground")]
    code, out, err = run_cli(capsys, ["history", "--slm", "main~2..main", "--env", "Cartpole",
                                      "--format", "json", *flags])
    assert code == 0, err
    walk = json.loads(out)["walks"][0]
    assert walk["side"] == "slm" and walk["scopes"] == [{"variant": "ppo_toy"}]
    assert walk["stats"] == {"commits": 2, "touching_reads": 1, "extractions": 1}
    change = walk["commits"][0]["scopes"][0]["changes"][0]
    assert (walk["commits"][0]["subject"], change["key"], change["old"]["value"], change["new"]["value"]) == \
        ("wider clip", "clip_epsilon", 0.2, 0.3)
    # --variant with a Brax range: the variant's family (read from the spec at --slm's ref) is walked.
    code, out, err = run_cli(capsys, ["history", "--brax", "main", "--variant", "ppo_toy", "--format", "json",
                                      *flags])
    assert code == 0, err
    brax_walk = json.loads(out)["walks"][0]
    assert brax_walk["scopes"] == [{"env": None, "family": "toy"}]
    assert [c["subject"] for c in brax_walk["commits"]] == ["root", "raise lr", "add entropy", "drop num_envs"]


def test_object_ids_reading_trees_once_agree_with_gitpython(repos):
    from brax_diff.history.walk import ObjectIds, object_id

    repo, shas = repos["playground"]
    ids = ObjectIds(repo)
    paths = ["params.py", "envs/", "envs/Cartpole.py", "envs", "params.py/", "envs/Cartpole.py/x", "nope.py", "/"]
    for sha in shas:
        commit = repo.git.commit(sha)
        assert {p: ids(commit, p) for p in paths} == {p: object_id(commit, p) for p in paths}
    commit = repo.git.commit(shas[1])
    assert ids(commit, "envs/Cartpole.py") == commit.tree["envs/Cartpole.py"].hexsha
    assert ids(commit, "envs/") == commit.tree["envs"].hexsha and ids(commit, "envs") is None


def test_a_scope_that_never_extracts_is_an_error_not_an_empty_history(repos):
    with pytest.raises(BraxDiffError, match="env=Cartpoel: environment 'Cartpoel' is not registered"):
        engine_for(repos).walk([toy_recipe(env="Cartpoel")], "playground", "main", {"brax": "main"})


def test_cli_slm_mapping_is_read_at_the_range_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "brax_diff.extractors.slm.extractor", toy_slm_module())
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "slm"
    make_repo(path, [{"spec.yaml": SPEC.replace("envs: [Cartpole]", "envs: []")}], messages=["spec"])
    _git(path, "checkout", "-q", "-b", "next")
    add_commit(path, {"spec.yaml": SPEC.replace("0.2", "0.25")}, message="map Cartpole, wider clip", index=1)
    _git(path, "checkout", "-q", "main")  # HEAD (the default slm ref) does not map Cartpole
    code, out, err = run_cli(capsys, ["history", "--slm", "main..next", "--env", "Cartpole", "--slm-repo", str(path),
                                      "--spec", "spec.yaml", "--cache-dir", str(tmp_path / "c"), "--format", "json"])
    assert code == 0, err
    changes = json.loads(out)["walks"][0]["commits"][0]["scopes"][0]["changes"]
    assert [(c["key"], c["old"]["value"], c["new"]["value"]) for c in changes] == [("clip_epsilon", 0.2, 0.25)]


def test_a_reversed_range_is_an_error_that_suggests_the_swapped_one(repos, tmp_path, monkeypatch, capsys):
    shas = repos["brax"][1]
    engine = engine_for(repos)
    with pytest.raises(BraxDiffError) as caught:
        engine.walk([toy_recipe()], "brax", f"main..{shas[1]}", {"playground": "main"})
    assert str(caught.value) == (f"--brax main..{shas[1]}: the range is empty because {shas[1]} is an ancestor of "
                                 f"main; did you mean {shas[1]}..main?")
    same = engine.walk([toy_recipe()], "brax", "main..main", {"playground": "main"})  # empty, not reversed
    assert (same.commits, same.entries) == (0, [])
    monkeypatch.setitem(sys.modules, "brax_diff.extractors.brax.extractor", toy_brax_module())
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, ["history", "--brax", f"main..{shas[2]}", "--env", "Cartpole",
                                      "--brax-repo", str(tmp_path / "brax"), "--playground-repo",
                                      str(tmp_path / "playground"), "--cache-dir", str(tmp_path / "c")])
    assert (code, out) == (2, "")
    assert err == (f"error: --brax main..{shas[2]}: the range is empty because {shas[2]} is an ancestor of main; "
                   f"did you mean {shas[2]}..main?\n")


def test_a_shallow_clone_says_where_its_history_stops(repos, tmp_path):
    """In a shallow clone the first commit is where the clone stops, not where the facts began;
    a ref before it cannot resolve, and the error says why and what to run."""
    source, _ = repos["brax"]
    shallow_path = tmp_path / "shallow-brax"
    _git(tmp_path, "clone", "-q", "--depth", "3", f"file://{source.path}", str(shallow_path))
    shallow = Repository(shallow_path, "brax")
    assert len(shallow.shallow_boundary) == 1 and not source.shallow_boundary
    engine = HistoryEngine({"brax": shallow, "playground": repos["playground"][0]})
    walk = engine.walk([toy_recipe()], "brax", "HEAD", {"playground": "main"})
    first = walk.entries[0]
    assert first.commit.sha in shallow.shallow_boundary
    assert first.note == ("this clone is shallow and its history stops at this commit: these facts did not appear "
                          "here, the commits before it are missing (git fetch --unshallow)")
    assert all(entry.note is None for entry in walk.entries[1:])
    with pytest.raises(SourceError, match=r"cannot resolve ref 'HEAD~5'.*; this clone is shallow, so older commits "
                                          r"are not in it: git fetch --unshallow$"):
        shallow.resolve("HEAD~5")
