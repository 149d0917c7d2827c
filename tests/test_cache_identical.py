"""Same inputs, same bytes, whatever the cache holds: a report made at a commit that touched no
file brax-diff reads, with the cache of the run before it and with an empty one, is the same
Markdown and JSON, and differs from the report before that commit only in its source table."""

from __future__ import annotations

import json

from brax_diff.cli import main
from gitfixture import add_commit
from upstream_repos import make_upstreams, repo_flags


def report(paths, out, cache, monkeypatch) -> dict[str, bytes]:
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(cache))
    assert main(["report", *repo_flags(paths), "--slm", "HEAD", "--family", "dm_control", "--output", str(out),
                 "--quiet"]) == 0
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def without_sources(files: dict[str, bytes]) -> dict:
    """The report with its source tables (the commits compared) taken out."""
    model = json.loads(files["dm_control.json"])
    model.pop("sources")
    for side in ("brax", "slm"):  # each side's extraction names the commits it read, as the table does
        model[side].pop("sources")
    markdown = files["dm_control.md"].decode()
    lines = [line for line in markdown.splitlines() if not line.startswith(("| Brax |", "| MuJoCo Playground |",
                                                                            "| SLM-Lab |"))]
    return {"json": model, "md": lines}


def test_a_commit_that_touches_nothing_read_changes_only_the_source_table(tmp_path, monkeypatch):
    paths = make_upstreams(tmp_path / "up")
    warm = tmp_path / "warm-cache"
    before = report(paths, tmp_path / "before", warm, monkeypatch)
    add_commit(paths["slm"], {"README.md": "a line nothing reads\n"}, message="unrelated")
    with_warm = report(paths, tmp_path / "warm", warm, monkeypatch)
    with_fresh = report(paths, tmp_path / "fresh", tmp_path / "fresh-cache", monkeypatch)
    assert with_warm == with_fresh  # byte for byte, Markdown and JSON
    assert without_sources(with_warm) == without_sources(before)


def test_an_output_file_for_several_families_is_refused_before_any_extraction(tmp_path, monkeypatch, capsys):
    from brax_diff.report.run import ReportRun

    paths = make_upstreams(tmp_path / "up")
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path / "cache"))

    def no_work(self, scopes):
        raise AssertionError("extracted before checking --output")

    monkeypatch.setattr(ReportRun, "extract_ahead", no_work)
    assert main(["report", *repo_flags(paths), "--output", str(tmp_path / "r.md")]) == 2
    assert capsys.readouterr().err == (f"error: --output {tmp_path / 'r.md'} is a file; several families need a "
                                       "directory (or pick --family)\n")
