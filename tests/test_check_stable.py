"""`report --check` gives the same answer on the same tree whatever the cache holds.

The scenario CI lives in: regenerate the reports inside an SLM-Lab checkout, commit them (a
commit that touches nothing brax-diff reads), then check, once with the cache the reports
were written with and once with an empty one. Text that goes into a report carries no ref
name or sha, so both checks say "up to date"."""

from __future__ import annotations

import json
import re

import pytest

import slm_fixtures
from brax_diff.cli import main
from gitfixture import _git, add_commit
from upstream_repos import MAPPING_FILE, make_upstreams, repo_flags

# A spec whose scheduler the code lacks (SLM-Lab master's shape): several keys unknown, each
# with a finding, so the report carries extractor messages on both sides.
SLM_EXTRA = {"slm_lab/agent/net/net_util.py": slm_fixtures.NET_UTIL_WITHOUT_MIN}


@pytest.fixture()
def checkout(tmp_path, monkeypatch):
    paths = make_upstreams(tmp_path / "up", slm_extra=SLM_EXTRA)
    monkeypatch.chdir(paths["slm"])
    return paths


def _messages(report: dict) -> list[str]:
    """Every sentence of a report JSON that an extractor or a rule wrote."""
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("message", "unknown", "reason", "note", "rationale") and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(report)
    return found


def test_check_after_committing_the_reports_is_up_to_date_with_any_cache(checkout, capsys, monkeypatch, tmp_path):
    flags = [*repo_flags(checkout), "--slm", "HEAD"]
    assert main(["report", *flags, "--quiet"]) == 0
    reports = checkout["slm"] / "reports"
    written = {p.name: p.read_bytes() for p in sorted(reports.iterdir())}
    assert sorted(written) == ["dm_control.json", "dm_control.md", "locomotion.json", "locomotion.md",
                               "manipulation.json", "manipulation.md"]
    data = json.loads(written["dm_control.json"])
    messages = _messages(data)
    assert any("lr_decay_steps" in m for m in messages)  # the fixture does reach the unknown-key paths
    shas = {_git(checkout[side], "rev-parse", "HEAD") for side in ("brax", "playground", "slm")}
    for message in messages:
        assert not any(sha[:7] in message for sha in shas), message
        assert not re.search(r"\b(HEAD|master)\b", message), message

    before = _git(checkout["slm"], "rev-parse", "HEAD")
    after = add_commit(checkout["slm"], {}, message="reports regenerated")  # `git add -A`: the reports only
    assert after != before
    assert _git(checkout["slm"], "status", "--porcelain") == ""
    capsys.readouterr()

    assert main(["report", *flags, "--check"]) == 0  # the cache the reports were written with
    assert "up to date: 6 file(s)" in capsys.readouterr().err
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / "fresh-cache"))
    assert main(["report", *flags, "--check"]) == 0  # an empty cache: everything extracted at the new commit
    assert "up to date: 6 file(s)" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in sorted(reports.iterdir())} == written  # --check writes nothing


def test_the_same_blobs_at_another_commit_give_the_same_text(checkout, capsys, monkeypatch, tmp_path):
    """An extraction at a commit that changed nothing read differs only in the commits."""
    def extracted(side: str, *args: str) -> dict:
        monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / f"cache-{len(list(tmp_path.iterdir()))}"))
        repos = (["--slm-repo", str(checkout["slm"]), "--mapping", str(checkout["slm"] / MAPPING_FILE)]
                 if side == "slm" else ["--brax-repo", str(checkout["brax"]),
                                        "--playground-repo", str(checkout["playground"])])
        assert main(["extract", side, *repos, *args, "--format", "json"]) == 0
        return json.loads(capsys.readouterr().out)

    def without_commits(data: dict | list) -> str:
        items = data if isinstance(data, list) else [data]
        assert items
        text = json.dumps([{k: v for k, v in item.items() if k != "sources"} for item in items], sort_keys=True)
        return re.sub(r'"commit": "[0-9a-f]{40}"', '"commit": "-"', text)

    def sources(data: dict | list) -> list:
        return [item["sources"] for item in (data if isinstance(data, list) else [data])]

    old_slm = extracted("slm", "--slm", "HEAD", "--all-variants")
    old_brax = extracted("brax", "--brax", "main", "--family", "dm_control")
    add_commit(checkout["slm"], {"NOTES.md": "nothing brax-diff reads\n"})
    add_commit(checkout["brax"], {"NOTES.md": "nothing brax-diff reads\n"})
    new_slm = extracted("slm", "--slm", "HEAD", "--all-variants")
    new_brax = extracted("brax", "--brax", "main", "--family", "dm_control")
    assert sources(old_slm) != sources(new_slm) and sources(old_brax) != sources(new_brax)
    assert without_commits(new_slm) == without_commits(old_slm)
    assert without_commits(new_brax) == without_commits(old_brax)
