"""Hostile and broken inputs (issue 12): each is one ``error:`` line and exit 2, or the right
result; nothing written or overwritten on failure. Report runs use test_report_cli's fake
extractors over fixture repositories."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from brax_diff.cli import main
from brax_diff.limits import MAX_NESTING
from test_report_cli import run, snapshot_files, workspace  # noqa: F401 (workspace is a fixture)

ROOT = Path(__file__).resolve().parent.parent


def one_error_line(capsys, *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def unreadable(path: Path) -> None:
    """A file that exists and cannot be read, for root too: /proc/self/mem reads as EIO."""
    if os.geteuid() == 0:
        path.symlink_to("/proc/self/mem")
    else:
        path.write_text("[tool.brax-diff]\n")
        path.chmod(0)


# -- settings files -------------------------------------------------------------------------

def test_pyproject_whose_tool_is_not_a_table(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('tool = "x"\n')
    assert main(["rules"]) == 2
    one_error_line(capsys, "pyproject.toml: [tool] must be a table, not str")
    (tmp_path / "pyproject.toml").write_text('[tool]\nbrax-diff = 3\n')
    assert main(["rules"]) == 2
    one_error_line(capsys, "pyproject.toml [tool.brax-diff]: expected a table of settings")


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")
def test_unreadable_pyproject(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    unreadable(tmp_path / "pyproject.toml")
    assert main(["rules"]) == 2
    one_error_line(capsys, "settings file", "pyproject.toml: cannot read: ")


def test_deeply_nested_or_huge_toml(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "brax-diff.toml").write_text('# [[[[ in a comment\nx = "[[["\nrules = ' + "[" * 3000 + "]" * 3000 + "\n")
    assert main(["rules"]) == 2
    one_error_line(capsys, "brax-diff.toml: line 3: nesting deeper than 64 levels (limit)")
    (tmp_path / "brax-diff.toml").write_text("rules = " + "9" * 5001 + "\n")
    assert main(["rules"]) == 2
    one_error_line(capsys, "brax-diff.toml: invalid TOML: ")


# -- rules and mapping files ----------------------------------------------------------------

def test_non_utf8_rules_and_mapping_files(tmp_path, capsys):
    bad = tmp_path / "rules.yaml"
    bad.write_bytes(b"rules:\n  - code: BD001\n    name: caf\xe9\n")
    assert main(["rules", "--rules", str(bad)]) == 2
    one_error_line(capsys, f"rules file {bad}: line 3: not UTF-8 text (byte 0xe9 at offset 36)")
    from brax_diff.errors import ConfigError
    from extractors.slm import load_mapping
    mapping = tmp_path / "mapping.yaml"
    mapping.write_bytes(b"\xff\xfevariants: {}\n")
    with pytest.raises(ConfigError, match=r"mapping file .*mapping.yaml: line 1: not UTF-8 text \(byte 0xff"):
        load_mapping(str(mapping))


def test_rules_file_that_is_a_directory_or_a_fifo(tmp_path, capsys):
    assert main(["rules", "--rules", str(tmp_path)]) == 2
    one_error_line(capsys, f"rules file {tmp_path}: cannot read: it is a directory")
    fifo = tmp_path / "rules.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert main(["rules", "--rules", str(fifo)]) == 2  # used to wait for a writer for ever
    one_error_line(capsys, "not a regular file")
    assert time.monotonic() - started < 5


def test_deeply_nested_rules_and_mapping_are_bounded(tmp_path, capsys):
    deep = tmp_path / "deep.yaml"
    deep.write_text("rules:\n  - code: BD001\n    severity: " + "[" * 5000 + "]" * 5000 + "\n")
    assert main(["rules", "--rules", str(deep)]) == 2
    one_error_line(capsys, f"rules file {deep}: line 3: nesting deeper than {MAX_NESTING} levels (limit)")
    from brax_diff.limits import LimitExceeded
    from extractors.slm import load_mapping
    deep.write_text("variants:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(200)))
    with pytest.raises(LimitExceeded, match=r"deep.yaml: line 6\d: nesting deeper than 64 levels"):
        load_mapping(str(deep))


def test_alias_bomb_in_a_rules_file_is_refused_fast(tmp_path, capsys):
    # Compiling nested any_of aliases was 9**9 predicate compilations.
    lines = ["a0: &a0 equal"] + [f"a{i}: &a{i} {{any_of: [{', '.join([f'*a{i - 1}'] * 9)}]}}" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("references:\n  x: {citation: c, url: u}\n  bomb:\n"
                    + "".join(f"    {line}\n" for line in lines)
                    + "rules:\n  - code: BD001\n    severity: [{when: *a9, then: CRITICAL}]\n")
    started = time.monotonic()
    assert main(["rules", "--rules", str(bomb)]) == 2
    assert time.monotonic() - started < 5
    one_error_line(capsys, f"rules file {bomb}: line ", "aliases expand past 200000 values (limit)")


# -- report inputs: --previous, --verification, cache entries --------------------------------

REPORT = {"schema": 1, "differences": [], "sources": [], "brax": {"facts": {}}, "slm": {"facts": {}}}


@pytest.mark.parametrize("document, message", [
    ({"schema": 1, "differences": [1, 2]}, "differences must be a list of objects with a key"),
    ({**REPORT, "sources": "x"}, "sources must be a list of objects"),
    ({**REPORT, "brax": {"facts": {"k": 1}}}, "brax.facts must map keys to objects with a value"),
    ({**REPORT, "changes": 5}, "changes is not a changes section"),
    ({**REPORT, "slm": {"facts": {"k": {"value": 1, "provenance": [{"line": 1}]}}}}, "provenance entry"),
    ([REPORT], "not an object"),
])
def test_previous_report_of_the_wrong_structure(workspace, capsys, tmp_path, document, message):
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps(document))
    assert run(workspace, "--family", "dm_control", "--previous", str(previous)) == 2
    one_error_line(capsys, f"previous report {previous}: not a brax-diff report JSON", message)
    assert not (workspace["work"] / "reports").exists()


@pytest.mark.parametrize("text, message", [
    ("[" * 100 + "]" * 100, f"line 1: nesting deeper than {MAX_NESTING} levels (limit)"),
    ('{"schema": ' + "9" * 5001 + "}", "invalid JSON: an integer of 5001 digits; the limit is 100"),
    ("\xff", "invalid JSON at line 1"),
])
def test_previous_report_that_is_not_json_within_the_limits(workspace, capsys, tmp_path, text, message):
    previous = tmp_path / "previous.json"
    previous.write_text(text)
    assert run(workspace, "--family", "dm_control", "--previous", str(previous)) == 2
    one_error_line(capsys, f"previous report {previous}", message)


@pytest.mark.parametrize("document, message", [
    ({"verdicts": {"clip_epsilon": 5}}, "clip_epsilon has no verdict"),
    ({"verdicts": [{"verdict": "supported"}]}, "verdicts[0] names no key or arm"),
    ({"verdicts": [], "runs": {"a": 1}}, "runs must be a list of objects"),
    ({"verdicts": "all good"}, "no verdicts"),
    ([], "no verdicts"),
])
def test_verification_file_of_the_wrong_structure(workspace, capsys, tmp_path, document, message):
    path = tmp_path / "verify.json"
    path.write_text(json.dumps(document))
    assert run(workspace, "--family", "dm_control", "--verification", str(path)) == 2
    one_error_line(capsys, f"--verification {path}: not a verify.json", message)


def test_verification_file_in_the_list_form(workspace, tmp_path):
    # The verify.json contract moves to lists of runs and verdicts; both forms are read.
    path = tmp_path / "verify.json"
    path.write_text(json.dumps({
        "runs": [{"arm": "clip_epsilon", "env": "CartpoleBalance", "seed": 0, "env_steps": 1000, "score": 1.5,
                  "score_kind": "episode_return", "status": "ok"}],
        "verdicts": [{"key": "clip_epsilon", "verdict": "supported", "seeds": 5, "ci": [40.0, 200.0],
                      "iqm_delta": "not a number", "min_detectable_effect": 3.0},
                     {"arm": "reward_scale", "verdict": "inconclusive", "seeds": "two"}],
        "gap": {"score": 0.1}}))
    assert run(workspace, "--family", "dm_control", "--verification", str(path)) == 0
    data = json.loads((workspace["work"] / "reports" / "dm_control.json").read_text())
    assert data["verification"] == {"clip_epsilon": {"verdict": "supported", "seeds": 5},
                                    "reward_scale": {"verdict": "inconclusive"}}
    md = (workspace["work"] / "reports" / "dm_control.md").read_text()
    assert "| supported at 5 seeds |" in md


def test_fact_cache_entries_of_the_wrong_structure_are_misses(workspace, capsys):
    assert run(workspace, "--family", "dm_control") == 0
    reports = workspace["work"] / "reports"
    first = snapshot_files(reports)
    entries = [p for p in Path(os.environ["BRAX_DIFF_CACHE_DIR"]).rglob("*.json") if p.name != "pathsets.json"]
    assert entries
    for index, entry in enumerate(entries):  # keep the reads (so the lookup hits), break the rest
        data = json.loads(entry.read_text())
        broken = [{**data, "extraction": {"facts": 5}}, {**data, "commits": [1]}, {**data, "extraction": []},
                  {**data, "extraction": {"side": "brax", "facts": {"k": {"provenance": [{"line": "x"}]}}}}]
        entry.write_text(json.dumps(broken[index % len(broken)]))
    entries[0].write_text("[" * 10000)
    assert run(workspace, "--family", "dm_control") == 0
    assert snapshot_files(reports) == first
