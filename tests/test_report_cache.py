"""The report cache (brax_diff.report.cache, issue 14): a kept report is what a fresh run
writes; every input it is made from moves its key (code, rules, scope, variant, spec, the
extractions' blobs and commits, the report replaced, the verification shown); a damaged
entry is a miss; a report reading a work tree is never kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from brax_diff.report import cache as report_cache
from brax_diff.cli import main
from brax_diff.facts.scope import Scope
from brax_diff.sources.repository import Repository, Snapshot
from brax_diff.sources.worktree import resolve_ref
from upstream_repos import make_upstreams, repo_flags


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_upstreams(tmp_path_factory.mktemp("up"))


@pytest.fixture()
def run(upstreams, tmp_path, monkeypatch):
    """``brax-diff report --family dm_control ...`` into tmp_path/NAME: (exit code, files)."""
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BRAX_DIFF_PROCESSES", "1")
    monkeypatch.chdir(tmp_path)

    def report(name: str, *flags: str) -> dict[str, str]:
        out = tmp_path / name
        code = main(["report", *repo_flags(upstreams), "--slm", "HEAD", "-q", "--family", "dm_control",
                     "--output", f"{out}/", *flags])
        assert code == 0
        return {p.name: p.read_text() for p in sorted(out.iterdir())}
    return report


def kept(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "reports" / report_cache.LAYOUT_VERSION).rglob("*.json"))


def test_a_kept_report_is_what_a_fresh_run_writes(run, tmp_path, monkeypatch):
    first = run("first")
    assert len(kept(tmp_path)) == 1
    calls = []
    monkeypatch.setattr("brax_diff.report.render.generate", lambda *a, **k: calls.append(1) or {})
    assert run("second") == first and calls == []  # nothing classified or rendered
    monkeypatch.undo()
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / "cache"))
    assert run("fresh", "--no-cache") == first


def test_a_user_rules_file_and_the_replaced_report_move_the_key(run, tmp_path):
    base = run("base")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - code: BD001\n    severity:\n      - when: differs\n        then: CRITICAL\n")
    stricter = run("stricter", "--rules", str(rules))
    assert stricter != base and stricter == run("stricter-fresh", "--rules", str(rules), "--no-cache")
    rules.write_text("rules:\n  - code: BD001\n    severity:\n      - when: differs\n        then: MINOR\n")
    assert run("milder", "--rules", str(rules)) == run("milder-fresh", "--rules", str(rules), "--no-cache")
    # The report it replaces is an input (its "changes since" section): an edited one moves the key.
    previous = tmp_path / "base" / "dm_control.json"
    model = json.loads(previous.read_text())
    model["differences"] = model["differences"][1:]
    previous.write_text(json.dumps(model))
    replaced = run("replaced", "--previous", str(previous))
    assert replaced == run("replaced-fresh", "--previous", str(previous), "--no-cache")
    assert replaced["dm_control.md"] != base["dm_control.md"]


def test_a_damaged_entry_is_a_miss(run, tmp_path):
    first = run("first")
    for path in kept(tmp_path):
        path.write_text('{"key": "x", "md": 1}')
    assert run("again") == first
    (entry,) = kept(tmp_path)
    assert json.loads(entry.read_text())["data"]["md"] == first["dm_control.md"]  # rewritten whole


def test_a_work_tree_report_is_never_kept(upstreams, tmp_path, monkeypatch):
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BRAX_DIFF_PROCESSES", "1")
    monkeypatch.chdir(tmp_path)
    code = main(["report", *repo_flags(upstreams), "--slm", "WORKTREE", "-q", "--family", "dm_control",
                 "--output", f"{tmp_path / 'out'}/"])
    assert code == 0 and (tmp_path / "out" / "dm_control.md").exists()
    assert kept(tmp_path) == []


def test_every_input_moves_the_key(upstreams, tmp_path, monkeypatch):
    snapshots = {side: Repository(upstreams[side], side).resolve("HEAD") for side in ("brax", "playground", "slm")}

    class Answering:
        def __init__(self, identity):
            self.identity = identity

        def answer_identity(self, method, *arguments):
            return self.identity

    calls = [(Answering({"recipe": "r", "reads": "x"}), "family", ("dm_control",))]
    previous = tmp_path / "previous.json"
    previous.write_text("{}")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: []\n")
    base = dict(variant=None, spec="spec.yaml", rules=None, rules_origin="shipped", verdicts=None, previous_path=None)

    def key(scope=Scope(family="dm_control"), the_calls=calls, snaps=snapshots, **changes):
        return report_cache.scope_key(scope, the_calls, snaps, **{**base, **changes})

    keys = {
        "base": key(),
        "scope": key(scope=Scope(env="WalkerRun")),
        "answers": key(the_calls=[(Answering({"recipe": "r", "reads": "y"}), "family", ("dm_control",))]),
        "variant": key(variant="ppo_fx_rs"),
        "spec": key(spec="other.yaml"),
        "rules": key(rules=str(rules), rules_origin=str(rules)),
        "verdicts": key(verdicts={"runs": 1}),
        "previous": key(previous_path=previous),
        "ref": key(snaps={**snapshots, "slm": Repository(upstreams["slm"], "slm").resolve(snapshots["slm"].sha)}),
        "commit": key(snaps={**snapshots, "slm": Snapshot(snapshots["slm"].repository, "1" * 40, "HEAD",
                                                          known_date=snapshots["slm"].date)}),
    }
    assert len(set(keys.values())) == len(keys)
    rules.write_text("rules: [] # edited\n")
    assert key(rules=str(rules), rules_origin=str(rules)) != keys["rules"]
    monkeypatch.setattr(report_cache, "code_digest", lambda: "another brax-diff")
    assert key() != keys["base"]
    # Unknowable: an answer the fact cache lacks, a snapshot of a work tree.
    assert key(the_calls=[(Answering(None), "family", ("dm_control",))]) is None
    worktree = resolve_ref(Repository(upstreams["slm"], "slm"), "WORKTREE")
    assert key(snaps={**snapshots, "slm": worktree}) is None


def test_the_code_digest_covers_the_package_templates_and_extractors():
    package = Path(report_cache.__file__).resolve().parent.parent
    report_cache.code_digest.cache_clear()
    before = report_cache.code_digest()
    probes = (package / "data" / "rules.yaml", package / "compare" / "rules.py",
              package.parent / "templates" / "report.md.j2", package.parent / "extractors" / "engine" / "flow.py",
              package.parent / "extractors" / "slm" / "extractor.py")
    assert all(probe.is_file() for probe in probes), probes  # a moved file is a test to update, not to skip
    for probe in probes:
        original = probe.read_bytes()
        try:
            probe.write_bytes(original + b"\n")
            report_cache.code_digest.cache_clear()
            assert report_cache.code_digest() != before, probe
        finally:
            probe.write_bytes(original)
            os.utime(probe)
    report_cache.code_digest.cache_clear()
    assert report_cache.code_digest() == before


def test_check_and_summary_from_a_kept_report(upstreams, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BRAX_DIFF_PROCESSES", "1")
    monkeypatch.chdir(tmp_path)
    flags = ["report", *repo_flags(upstreams), "--slm", "HEAD", "--family", "dm_control"]
    assert main([*flags, "-q"]) == 0
    said = []
    for _ in range(2):  # the second run's texts come from the report cache
        capsys.readouterr()
        assert main([*flags, "--check", "--format", "github", "--summary", str(tmp_path / "moved.md")]) == 0
        said.append((capsys.readouterr(), (tmp_path / "moved.md").read_text()))
    assert len(kept(tmp_path)) == 2  # the first report (no previous), then the one replacing it
    assert said[0] == said[1] and "up to date: 2 file(s)" in said[0][0].err
