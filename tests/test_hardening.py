"""Hostile and broken inputs (issue 12): each is one ``error:`` line and exit 2, or the right
result; nothing written or overwritten on failure. Report runs use test_report_cli's fake
extractors over fixture repositories."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from brax_diff.cli import main
from brax_diff.safety.limits import MAX_NESTING
from gitfixture import add_commit
from test_report_cli import run, snapshot_files
from test_report_cli import workspace  # noqa: F401 (a fixture)

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
    from brax_diff.extractors.slm.extractor import load_mapping
    mapping = tmp_path / "mapping.yaml"
    mapping.write_bytes(b"\xff\xfevariants: {}\n")
    with pytest.raises(ConfigError, match=r"mapping file .*mapping.yaml: line 1: not UTF-8 text \(byte 0xff"):
        load_mapping(str(mapping))


def test_rules_file_that_is_a_directory_or_a_fifo(tmp_path, capsys):
    assert main(["rules", "--rules", str(tmp_path)]) == 2
    one_error_line(capsys, f"rules file {tmp_path}: cannot read: it is a directory")
    fifo = tmp_path / "rules.fifo"
    os.mkfifo(fifo)
    assert main(["rules", "--rules", str(fifo)]) == 2  # used to wait for a writer for ever
    one_error_line(capsys, "cannot read: not a regular file")


def test_deeply_nested_rules_and_mapping_are_bounded(tmp_path, capsys):
    deep = tmp_path / "deep.yaml"
    deep.write_text("rules:\n  - code: BD001\n    severity: " + "[" * 5000 + "]" * 5000 + "\n")
    assert main(["rules", "--rules", str(deep)]) == 2
    one_error_line(capsys, f"rules file {deep}: line 3: nesting deeper than {MAX_NESTING} levels (limit)")
    from brax_diff.safety.limits import LimitExceeded
    from brax_diff.extractors.slm.extractor import load_mapping
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
    assert main(["rules", "--rules", str(bomb)]) == 2
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
    ({"verdicts": {"clip_epsilon": 5}, "runs": []}, "a verify.json of brax-diff < 0.2"),
    ({"verdicts": [{"verdict": "supported"}], "runs": []}, "a verdict without arm or verdict"),
    ({"verdicts": [], "runs": {"a": 1}}, "runs must be a list of objects"),
    ({"verdicts": "all good", "runs": []}, "verdicts must be a list of objects"),
    ({"verdicts": [], "runs": [], "gap": []}, "gap and plan must be objects"),
    ([], "not an object"),
])
def test_verification_file_of_the_wrong_structure(workspace, capsys, tmp_path, document, message):
    path = tmp_path / "verify.json"
    path.write_text(json.dumps(document))
    assert run(workspace, "--family", "dm_control", "--verification", str(path)) == 2
    one_error_line(capsys, f"--verification {path}: ", message)


def test_verification_fields_of_the_wrong_type_are_left_out(workspace, tmp_path):
    """A verify.json of the right shape whose fields have the wrong types renders what it can."""
    path = tmp_path / "verify.json"
    path.write_text(json.dumps({
        "runs": [{"arm": "baseline", "env": "CartpoleBalance", "seed": 0, "env_steps": 1000, "score": 1.5,
                  "score_kind": "eval_return/stochastic/32_episodes", "status": "ok"}],
        "verdicts": [{"family": "loo", "key": "clip_epsilon", "arm": "all_fixes", "vs": "loo:clip_epsilon",
                      "verdict": "supported", "seeds": 5, "ci": [40.0, 200.0], "delta": "not a number",
                      "min_detectable_effect": 3.0},
                     {"family": "variants", "key": "reward_scale", "arm": "variant:reward_scale", "vs": "baseline",
                      "verdict": "inconclusive", "seeds": "two", "ci": ["low", 1]}],
        "gap": {"score": 0.1}, "plan": {"seeds": "five"}}))
    assert run(workspace, "--family", "dm_control", "--verification", str(path)) == 0
    data = json.loads((workspace["work"] / "reports" / "dm_control.json").read_text())
    keys = data["verification"]["keys"]
    assert keys["clip_epsilon"]["verdict"] == "supported" and "delta" not in keys["clip_epsilon"]
    assert keys["reward_scale"]["verdict"] == "inconclusive" and "seeds" not in keys["reward_scale"]
    assert "ci" not in keys["reward_scale"]
    md = (workspace["work"] / "reports" / "dm_control.md").read_text()
    assert "| supported at 5 seeds |" in md


def test_fact_cache_entries_of_the_wrong_structure_are_misses(workspace, capsys):
    assert run(workspace, "--family", "dm_control") == 0
    reports = workspace["work"] / "reports"
    first = snapshot_files(reports)
    entries = [p for p in Path(os.environ["BRAX_DIFF_CACHE_DIR"]).rglob("*.json") if p.name != "pathsets.json"]
    assert entries
    from brax_diff.safety.io import sealed

    for index, entry in enumerate(entries):  # keep the reads (so the lookup hits), break the rest
        data = json.loads(entry.read_text())["data"]  # resealed below: the structure checks still run
        broken = [{**data, "extraction": {"facts": 5}}, {**data, "commits": [1]}, {**data, "extraction": []},
                  {**data, "extraction": {"side": "brax", "facts": {"k": {"provenance": [{"line": "x"}]}}}}]
        entry.write_text(sealed(broken[index % len(broken)]))
    entries[0].write_text("[" * 10000)
    assert run(workspace, "--family", "dm_control") == 0
    assert snapshot_files(reports) == first


# -- writing reports ------------------------------------------------------------------------

def listing(folder: Path) -> list[str]:
    """Every name under ``folder``, hidden ones (staging, temporary files) included."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_output_names_with_dots_keep_their_stem(workspace, capsys):
    # with_suffix made d/dm_control.v2.md overwrite d/dm_control.md and dm_control.json.
    out = workspace["work"] / "d"
    assert run(workspace, "--family", "dm_control", "--output", "d/dm_control.md") == 0
    before = snapshot_files(out)
    add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.2\n"})
    assert run(workspace, "--family", "dm_control", "--output", "d/dm_control.v2.md") == 0
    assert listing(out) == ["dm_control.json", "dm_control.md", "dm_control.v2.json", "dm_control.v2.md"]
    assert {name: snapshot_files(out)[name] for name in before} == before
    assert "wrote d/dm_control.v2.md" in capsys.readouterr().err
    assert run(workspace, "--family", "locomotion", "--format", "json", "--output", "d/report-2026.01.json") == 0
    assert "report-2026.01.json" in listing(out) and "report-2026.json" not in listing(out)
    # The default previous report is the JSON beside the named file, not dm_control.json.
    assert run(workspace, "--family", "dm_control", "--output", "d/dm_control.v2.md") == 0
    assert json.loads((out / "dm_control.v2.json").read_text())["changes"] is None


def test_output_target_that_is_a_directory(workspace, capsys):
    (workspace["work"] / "d" / "x.json").mkdir(parents=True)
    assert run(workspace, "--family", "dm_control", "--output", "d/x.md") == 2
    one_error_line(capsys, "cannot write d/x.json: it is a directory")
    assert listing(workspace["work"] / "d") == ["x.json"]  # x.md was not written either
    (workspace["work"] / "plain").write_text("a file\n")
    assert run(workspace, "--family", "dm_control", "--output", "plain") == 2
    one_error_line(capsys, "cannot write plain/dm_control.md: plain is not a directory")


def test_check_after_only_the_markdown_was_deleted(workspace, capsys):
    assert run(workspace, "--family", "dm_control") == 0
    (workspace["work"] / "reports" / "dm_control.md").unlink()
    capsys.readouterr()
    assert run(workspace, "--family", "dm_control", "--check") == 1
    err = capsys.readouterr().err
    assert "stale: reports/dm_control.md" in err and "stale: reports/dm_control.json" not in err
    assert listing(workspace["work"] / "reports") == ["dm_control.json"]  # --check writes nothing


def test_no_space_left_while_writing_keeps_the_old_report(workspace, capsys, monkeypatch):
    from brax_diff.safety import io

    assert run(workspace, "--family", "dm_control") == 0
    reports = workspace["work"] / "reports"
    before = snapshot_files(reports)
    add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.2\n"})
    staged = []
    write_file = io._write_file

    def disk_fills_up(path, data, *mode):
        if io.STAGING_PREFIX in str(path):
            staged.append(path)
            if len(staged) == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write_file(path, data, *mode)

    monkeypatch.setattr(io, "_write_file", disk_fills_up)
    capsys.readouterr()
    assert run(workspace, "--family", "dm_control") == 2
    err = capsys.readouterr().err  # the scope's summary (stderr is no terminal), then one error line
    assert [line for line in err.splitlines() if line.startswith("error: ")] == [err.splitlines()[-1]]
    assert err.endswith("error: cannot write the report files in reports: No space left on device\n"), err
    assert listing(reports) == ["dm_control.json", "dm_control.md"] and snapshot_files(reports) == before


def test_file_too_large_while_writing_keeps_the_old_report(workspace):
    assert run(workspace, "--family", "dm_control") == 0
    reports = workspace["work"] / "reports"
    before = snapshot_files(reports)
    add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.2\n"})
    done = subprocess.run(driver_argv(workspace, "fsize=4096", "--family", "dm_control"), cwd=workspace["work"],
                          capture_output=True, text=True, timeout=120)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and errors == ["error: cannot write the report files in reports: File too large"]
    assert "warning: fact cache not written" in done.stderr  # the cache write hit the limit first
    assert listing(reports) == ["dm_control.json", "dm_control.md"] and snapshot_files(reports) == before


def driver_argv(workspace, mode: str, *args: str) -> list[str]:
    repos = workspace["repos"]
    return [sys.executable, str(ROOT / "tests" / "report_driver.py"), mode, "--brax-repo", str(repos / "brax"),
            "--playground-repo", str(repos / "playground"), "--slm-repo", str(repos / "slm"), *args]


def start_paused(workspace, mode: str, pause: float, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(driver_argv(workspace, mode, *args), cwd=workspace["work"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PAUSE_SECONDS": str(pause)})
    line = proc.stdout.readline()
    if line != "paused\n":
        proc.kill()
        raise AssertionError(f"the driver did not pause: {line!r} {proc.communicate()[1]}")
    return proc


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_staging_leaves_the_old_report_and_no_temporary_files(workspace, signum):
    assert run(workspace) == 0
    reports = workspace["work"] / "reports"
    before = snapshot_files(reports)
    add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.2\n"})
    proc = start_paused(workspace, "staging", 30, "--family", "dm_control")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum
    assert [line for line in err.splitlines() if not line.startswith(("dm_control: ", "  "))] == [
        f"error: interrupted ({signal.Signals(signum).name})"]  # after the scope's summary: one error line
    assert listing(reports) == sorted(before) and snapshot_files(reports) == before


def test_a_signal_during_the_commit_waits_until_every_file_is_in_place(workspace, capsys):
    assert run(workspace, "--family", "dm_control") == 0
    reports = workspace["work"] / "reports"
    add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.2\n"})
    proc = start_paused(workspace, "commit", 1.5, "--family", "dm_control")
    proc.send_signal(signal.SIGTERM)  # held back until both files are renamed
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM and err.splitlines()[-1] == "error: interrupted (SIGTERM)"
    assert listing(reports) == ["dm_control.json", "dm_control.md"]
    assert json.loads((reports / "dm_control.json").read_text())["brax"]["facts"]["clip_epsilon"]["value"] == 0.2
    assert run(workspace, "--family", "dm_control", "--check") == 0  # both files are the new report
    assert "up to date: 2 file(s)" in capsys.readouterr().err


def test_a_crash_after_the_commit_is_named_by_check_and_finished_by_the_next_write(workspace, capsys):
    from brax_diff.safety.io import finish_interrupted_writes

    assert run(workspace, "--family", "dm_control") == 0
    reports = workspace["work"] / "reports"
    before = snapshot_files(reports)
    add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.2\n"})
    proc = start_paused(workspace, "commit", 30, "--family", "dm_control")
    proc.kill()  # SIGKILL cannot be held back: one file is new, the other old
    proc.wait(timeout=30)
    now = {name: (reports / name).read_bytes() for name in before}
    assert sorted(name for name in before if now[name] != before[name]) == ["dm_control.json"]
    capsys.readouterr()
    assert run(workspace, "--family", "dm_control", "--check") == 1
    err = capsys.readouterr().err  # the JSON is already the new one; the Markdown waits in staging
    assert "stale: reports/dm_control.md (its write was cut short; the next report run finishes it)" in err
    assert "stale: reports/dm_control.json" not in err
    finish_interrupted_writes(reports)  # what the next `report` run does first
    assert listing(reports) == ["dm_control.json", "dm_control.md"]
    assert run(workspace, "--family", "dm_control", "--check") == 0
    finished = snapshot_files(reports)
    assert run(workspace, "--family", "dm_control") == 0 and snapshot_files(reports) == finished


# -- code from the current directory ---------------------------------------------------------

def test_python_m_brax_diff_does_not_import_yaml_or_extractors_from_the_current_directory(tmp_path):
    # `python -m` puts the cwd first on sys.path: a yaml.py or extractors/ there was imported.
    import slm_fixtures as sfx
    from gitfixture import make_repo

    repo = tmp_path / "SLM-Lab"
    make_repo(repo, [sfx.repo_files()])
    hostile = tmp_path / "hostile"
    (hostile / "extractors").mkdir(parents=True)
    marker = tmp_path / "imported"
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\nraise SystemExit(99)\n"
    (hostile / "yaml.py").write_text(payload)
    (hostile / "extractors" / "__init__.py").write_text(payload)
    done = subprocess.run([sys.executable, "-m", "brax_diff", "extract", "slm", "--repo", str(repo),
                           "--set", "max_frame=1000", "--format", "json"], cwd=hostile, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scope"]["variant"] == "ppo_fx" and not marker.exists()


# The GPU scripts run the checkout they live in (they cd to it first: its root is then the only
# folder `-m` puts first on sys.path): the GPU machine has nothing installed and no index to install from.
RUN_THEIR_CHECKOUT = {"verify-gpu.sh", "verify-gpu-prepare.sh"}


def test_scripts_run_the_installed_command():
    for script in sorted((ROOT / "scripts").iterdir()) + sorted((ROOT / "benchmarks").glob("*.py")):
        text = script.read_text(encoding="utf-8")
        if script.name in RUN_THEIR_CHECKOUT:
            assert 'cd "$(dirname "$0")/.."' in text and "python3 -m brax_diff.verify.window" in text, script
            continue
        assert "python -m brax_diff" not in text and '"-m", "brax_diff"' not in text, script
    assert "  brax-diff report " in (ROOT / "scripts" / "regenerate-reports.sh").read_text(encoding="utf-8")


def test_concurrent_report_runs_on_one_cache_and_one_output_directory(workspace):
    # Each run stages its own set and takes the directory's lock to rename it into place.
    procs = [subprocess.Popen(driver_argv(workspace, "plain"), cwd=workspace["work"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(p.communicate(timeout=120), p.returncode) for p in procs]
    assert [code for _, code in results] == [0, 0, 0], results
    reports = workspace["work"] / "reports"
    together = snapshot_files(reports)
    assert sorted(together) == ["dm_control.json", "dm_control.md", "locomotion.json", "locomotion.md"]
    assert run(workspace) == 0 and snapshot_files(reports) == together  # what one run alone writes


def test_a_fact_cache_write_that_fails_is_a_warning_and_the_report_is_written(workspace, capsys, monkeypatch):
    from brax_diff.extract import factcache
    from brax_diff.errors import BraxDiffError

    def disk_full(path, data, durable=True):
        raise BraxDiffError(f"cannot write {path}: No space left on device")

    monkeypatch.setattr(factcache, "write_atomic", disk_full)
    assert run(workspace, "--family", "dm_control") == 0
    err = capsys.readouterr().err
    assert err.count("warning: fact cache not written (cannot write ") == 1 and "No space left on device" in err
    assert listing(workspace["work"] / "reports") == ["dm_control.json", "dm_control.md"]


def test_cache_writes_skip_fsync_and_a_torn_cache_file_is_a_miss(tmp_path, monkeypatch):
    import os

    from brax_diff.safety import io as bio
    from brax_diff.extract.factcache import FactCache

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    bio.write_atomic(tmp_path / "report.md", "kept\n")
    assert len(synced) == 1  # a report is flushed to disk before it replaces the old one
    bio.write_atomic(tmp_path / "cache.json", "{}\n", durable=False)
    assert len(synced) == 1 and (tmp_path / "cache.json").read_text() == "{}\n"
    cache = FactCache(tmp_path / "c")
    cache.remember_commit("ab" * 20, "2026-01-01T00:00:00+00:00", {"a.py": "cd" * 20})
    assert len(synced) == 1  # the fact cache never waits for the disk
    # what a power cut can leave behind the rename: an empty or partial file, read as nothing
    cache._commit_file("ab" * 20).write_text('{"date": "2026-01-01T00:00:00+00:00", "ids": {"a.py"')
    assert FactCache(tmp_path / "c").commit_answers("ab" * 20) == (None, {})
    cache._commit_file("ab" * 20).write_text("")
    assert FactCache(tmp_path / "c").commit_answers("ab" * 20) == (None, {})


# -- issue 26: the machine refuses, paths that leave the repository, refs -------------------

def test_previous_that_does_not_exist_is_an_error(workspace, capsys):
    """A mistyped --previous used to compare with nothing and exit 0."""
    assert run(workspace, "--family", "dm_control", "--output", "out/dm.md", "--previous", "nope.json") == 2
    one_error_line(capsys, "--previous nope.json: no such file")
    assert not (workspace["work"] / "out").exists()


def test_previous_that_is_a_fifo_is_refused_not_waited_on(workspace, capsys):
    fifo = workspace["work"] / "prev.json"
    os.mkfifo(fifo)
    assert run(workspace, "--family", "dm_control", "--output", "out/dm.md", "--previous", str(fifo)) == 2
    one_error_line(capsys, "cannot read: not a regular file")


@pytest.mark.parametrize("spec", ["../../etc/passwd", "/etc/passwd", "slm_lab/../../x.yaml"])
def test_spec_outside_the_repository_is_refused(workspace, capsys, spec):
    """WORKTREE read the file the path named, wherever it was (`--spec ../..`)."""
    assert run(workspace, "--slm", "WORKTREE", "--family", "dm_control", "--spec", spec) == 2
    one_error_line(capsys, "a path inside the SLM-Lab repository")


def test_work_tree_reads_stay_inside_and_under_the_size_cap(tmp_path):
    from brax_diff.safety import limits
    from brax_diff.sources.worktree import _disk_bytes, _disk_names

    root = tmp_path / "checkout"
    (root / "slm_lab").mkdir(parents=True)
    (tmp_path / "secret.yaml").write_text("a: 1\n")
    (root / "slm_lab" / "link.yaml").symlink_to(tmp_path / "secret.yaml")
    (root / "slm_lab" / "ok.yaml").write_text("b: 2\n")
    assert _disk_bytes(root, "slm_lab/ok.yaml") == b"b: 2\n"
    assert _disk_bytes(root, "../secret.yaml") is None
    assert _disk_bytes(root, "slm_lab/link.yaml") is None  # a symlink out of the checkout
    assert _disk_names(root, "..") is None
    big = root / "slm_lab" / "big.yaml"
    with big.open("wb") as handle:
        handle.truncate(limits.MAX_FILE_BYTES + 1)
    with pytest.raises(limits.LimitExceeded):
        _disk_bytes(root, "slm_lab/big.yaml")


def test_commit_message_refs_resolve(tmp_path):
    """`:/message` took the `^{commit}` suffix as part of the pattern and stopped resolving."""
    from brax_diff.errors import SourceError
    from brax_diff.sources.repository import Repository
    from gitfixture import make_repo

    shas = make_repo(tmp_path / "r", [{"a.txt": "1\n"}, {"a.txt": "2\n"}, {"a.txt": "3\n"}],
                     messages=["first", "tune clip", "last"])
    repo = Repository(str(tmp_path / "r"), "slm")
    assert repo.resolve(":/tune clip").sha == shas[1]
    assert repo.resolve(":/first").sha == shas[0]
    with pytest.raises(SourceError, match="cannot resolve ref ':/no such message'"):
        repo.resolve(":/no such message")


def test_closed_stdout_is_one_error_line():
    done = subprocess.run(f"{sys.executable} -m brax_diff rules >&-", shell=True, capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stderr == "error: standard output is closed\n", done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_full_stdout_is_one_error_line():
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "brax_diff", "rules"], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stderr == "error: No space left on device\n", done.stderr


def test_deleted_working_directory_is_one_error_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(f"cd {gone} && rmdir {gone} && {sys.executable} -m brax_diff rules", shell=True,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stderr == "error: the current directory no longer exists\n", done.stderr


@pytest.mark.parametrize("encoding", ["UTF-16", "ISO-8859-1"])
def test_a_repository_that_asks_for_its_log_in_another_encoding_is_read_as_utf8(tmp_path, encoding):
    from brax_diff.sources.permalinks import last_change
    from brax_diff.sources.repository import Repository
    from gitfixture import make_repo

    shas = make_repo(tmp_path / "r", [{"a.py": "x = 1\n"}, {"b.py": "y = 2\n"}], messages=["première", "zweite"])
    subprocess.run(["git", "-C", str(tmp_path / "r"), "config", "i18n.logOutputEncoding", encoding], check=True)
    snapshot = Repository(tmp_path / "r", "brax").resolve(shas[1])
    # UTF-16 output was a UnicodeDecodeError traceback from `report` (its history of spec keys).
    assert last_change(snapshot, "a.py") == shas[0]
    done = snapshot.repository.git_command("log", "--format=%H %s", shas[1])
    assert done.stdout.splitlines() == [f"{shas[1]} zweite", f"{shas[0]} première"]


def _damage(repo: Path, object_id: str) -> None:
    """Truncate a loose object to its first bytes, as a torn copy or a failing disk leaves it."""
    loose = repo / ".git" / "objects" / object_id[:2] / object_id[2:]
    loose.chmod(0o644)
    loose.write_bytes(loose.read_bytes()[:20])


def test_a_damaged_object_is_an_error_naming_it_not_an_empty_file_or_a_broken_pipe(tmp_path):
    from brax_diff.errors import SourceError
    from brax_diff.sources.repository import Repository
    from gitfixture import make_repo

    shas = make_repo(tmp_path / "r", [{"a.py": "x = 1\n" * 200, "b.py": "y = 2\n"}])
    blob = subprocess.run(["git", "-C", str(tmp_path / "r"), "rev-parse", "HEAD:a.py"], capture_output=True,
                          text=True, check=True).stdout.strip()
    _damage(tmp_path / "r", blob)  # its header still reads: git announces 1,200 bytes, then stops
    snapshot = Repository(tmp_path / "r", "brax").resolve(shas[0])
    # GitPython returned the bytes `git cat-file` gave before it stopped: the file read as "".
    with pytest.raises(SourceError, match=f"git object {blob} .* has 0 of its 1200 bytes: the repository is damaged"):
        snapshot.read("a.py")
    # cat-file has died: the next read was a BrokenPipeError (the CLI exited 1 with no message) or,
    # when the pipe still took the request, an empty header GitPython calls "dubious ownership".
    with pytest.raises(SourceError, match="cannot be read .*(Broken pipe|stopped answering).*the repository is damaged"):
        snapshot.read("b.py")


def test_a_dead_cat_file_that_answers_nothing_is_the_same_error(tmp_path, monkeypatch):
    """Which of the two a dead `git cat-file` gives is a race (CI saw the empty answer): pin the second."""
    from git.db import GitCmdObjectDB

    from brax_diff.errors import SourceError
    from brax_diff.sources.repository import Repository
    from gitfixture import make_repo

    shas = make_repo(tmp_path / "r", [{"b.py": "y = 2\n"}])
    snapshot = Repository(tmp_path / "r", "brax").resolve(shas[0])

    def empty_header(self, binsha):
        raise ValueError("SHA is empty, possible dubious ownership in the repository at r.")

    monkeypatch.setattr(GitCmdObjectDB, "stream", empty_header)
    with pytest.raises(SourceError, match="cannot be read \\(git cat-file stopped answering\\): the repository is damaged"):
        snapshot.read("b.py")


def test_a_damaged_spec_is_one_error_line(tmp_path, capsys):
    import slm_fixtures as fx
    from gitfixture import make_repo

    path = tmp_path / "SLM-Lab"
    make_repo(path, [fx.repo_files()])
    spec = subprocess.run(["git", "-C", str(path), "rev-parse", f"HEAD:{fx.SPEC_PATH}"], capture_output=True,
                          text=True, check=True).stdout.strip()
    _damage(path, spec)  # its header no longer reads: git answers "missing", in a clone that is not partial
    code = main(["extract", "slm", "--slm-repo", str(path), "--spec", fx.SPEC_PATH, "--variant", "ppo_fx",
                 "--set", "max_frame=1000"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: ") and f"git object {spec} is missing from" in err[0]
    assert err[0].endswith("the repository is damaged (try `git fsck`)")


def test_verify_plan_runs_without_the_verify_extra(tmp_path):
    # Issue 35 listed `verify --plan` without the extra as a traceback; it already plans (this
    # guards it without a fresh virtualenv): numpy, torch, jax, brax and mujoco made unimportable.
    from test_verify_plan import write_pair

    args = write_pair(tmp_path)
    code = ("import sys\n"
            "for name in ('numpy', 'torch', 'jax', 'jaxlib', 'flax', 'brax', 'mujoco', 'mujoco_playground', 'scipy',"
            " 'matplotlib', 'ml_collections'):\n"
            "    sys.modules[name] = None\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            "from brax_diff.cli import main\n"
            "sys.exit(main(['verify', '--plan', *sys.argv[1:]]))\n")
    done = subprocess.run([sys.executable, "-c", code, *args, "--seeds", "2"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("verify plan: 16 runs = 1 env(s) x 2 seed(s)")
    assert "power: not simulated (the simulation needs numpy" in done.stdout
