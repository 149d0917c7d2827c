"""What `brax-diff report` prints: on a terminal (a pty here) the summary table and every ERROR
finding, then the files written; in a pipe, the same as plain lines, nothing cut; with --quiet,
nothing. Tables on stdout (`extract`, `rules`) are printed at full width in a pipe. `history` and
`fix` show their progress line on a terminal too, nothing of it elsewhere."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

import slm_fixtures
from upstream_repos import make_upstreams, repo_flags

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    # SLM-Lab's code lacks the scheduler the spec names: an ERROR finding (training fails).
    return make_upstreams(tmp_path_factory.mktemp("up"),
                          slm_extra={"slm_lab/agent/net/net_util.py": slm_fixtures.NET_UTIL_WITHOUT_MIN})


def command(upstreams, *extra: str) -> list[str]:
    return [sys.executable, "-m", "brax_diff", "report", *repo_flags(upstreams), "--slm", "HEAD",
            "--family", "dm_control", *extra]


def environment(tmp_path) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "COLUMNS": "120",
            "BRAX_DIFF_CACHE_DIR": str(tmp_path / "cache")}


def run_in_pty(argv: list[str], cwd: Path, env: dict) -> tuple[int, str]:
    """Run with stdin, stdout and stderr on a pseudo-terminal; the screen text, escapes removed."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    code = process.wait(timeout=120)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", errors="replace")).replace("\r", "")


def test_a_terminal_run_prints_the_summary_and_the_error_findings_then_the_files(upstreams, tmp_path):
    code, screen = run_in_pty(command(upstreams), tmp_path, environment(tmp_path))
    assert code == 0, screen
    lines = [line.rstrip() for line in screen.splitlines()]
    title = next(i for i, line in enumerate(lines) if line.startswith("dm_control: SLM-Lab variant ppo_fx; Brax main "))
    critical = next(i for i, line in enumerate(lines) if line.lstrip().startswith("CRITICAL"))
    assert re.match(r"^ ?CRITICAL\s+│\s+3 │ unrolls_per_update, transitions_per_update, discount$", lines[critical])
    summary = json.loads((tmp_path / "reports" / "dm_control.json").read_text())["summary"]
    assert any(re.match(rf"^ ?match\s+│\s+{summary['match']} │$", line) for line in lines)
    error = next(i for i, line in enumerate(lines) if line.startswith("ERROR "))
    assert lines[error].startswith("ERROR SLM-Lab spec_code_mismatch: agent.net.lr_scheduler_spec.name 'LinearToMin': "
                                   "get_lr_scheduler has no branch for it")
    assert lines[-2:] == ["wrote reports/dm_control.json", "wrote reports/dm_control.md"]
    assert title < critical < error < len(lines) - 2
    assert "extracting" in screen  # the progress line was drawn (and erased)


def test_in_a_pipe_the_summary_and_the_error_findings_are_plain_lines_and_stdout_is_untouched(upstreams, tmp_path):
    done = subprocess.run(command(upstreams), cwd=tmp_path, env=environment(tmp_path), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    model = json.loads((tmp_path / "reports" / "dm_control.json").read_text())
    lines = done.stderr.splitlines()
    assert lines[0].startswith("dm_control: SLM-Lab variant ppo_fx; Brax main ")
    assert lines[1] == "  CRITICAL 3: unrolls_per_update, transitions_per_update, discount"
    minor = [d["key"] for d in model["differences"] if d["severity"] == "MINOR"]
    assert lines[3] == "  MINOR " + str(len(minor)) + (": " + ", ".join(minor) if minor else "")
    assert lines[4] == f"  match {model['summary']['match']}"
    # The ERROR finding in full, however long: nothing cut at 80 columns, no escapes.
    error = next(line for line in lines if line.startswith("ERROR "))
    assert error.startswith("ERROR SLM-Lab spec_code_mismatch: agent.net.lr_scheduler_spec.name 'LinearToMin': "
                            "get_lr_scheduler has no branch for it")
    assert error.endswith(")") and len(error) > 80 and "…" not in done.stderr and "\x1b" not in done.stderr
    assert lines[-2:] == ["wrote reports/dm_control.json", "wrote reports/dm_control.md"]


def test_quiet_in_a_pipe_prints_nothing(upstreams, tmp_path):
    done = subprocess.run(command(upstreams, "--quiet"), cwd=tmp_path, env=environment(tmp_path),
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def test_tables_in_a_pipe_show_every_path_in_full(upstreams, tmp_path):
    """`extract` and `rules` tables on a pipe: at full width, every cell whole (rich would fit
    them to 80 columns and cut the paths with "…")."""
    extract = [sys.executable, "-m", "brax_diff", "extract", "slm", "--slm-repo", str(upstreams["slm"]),
               "--slm", "HEAD", "--variant", "ppo_fx"]
    env = environment(tmp_path)
    del env["COLUMNS"]
    table = subprocess.run(extract, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert table.returncode == 0, table.stderr
    facts = json.loads(subprocess.run([*extract, "--format", "json"], cwd=tmp_path, env=env,
                                      capture_output=True, text=True, check=True).stdout)["facts"]
    rows = {line.split("│")[1].strip(): line for line in table.stdout.splitlines() if line.startswith("│ ")}
    for key, fact in facts.items():
        where = ", ".join(f"{p['path']}:{p['line']}" for p in fact["provenance"][:3])
        assert where in rows[key], (key, rows[key])
    assert "…" not in table.stdout and max(len(line) for line in table.stdout.splitlines()) > 80

    rules = subprocess.run([sys.executable, "-m", "brax_diff", "rules"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert rules.returncode == 0, rules.stderr
    assert "…" not in rules.stdout and max(len(line) for line in rules.stdout.splitlines()) > 80


def test_quiet_prints_nothing_on_a_terminal(upstreams, tmp_path):
    code, screen = run_in_pty(command(upstreams, "--quiet"), tmp_path, environment(tmp_path))
    assert code == 0 and screen.strip() == ""
    assert (tmp_path / "reports" / "dm_control.md").exists()


# A progress line is drawn: its spinner and the elapsed time, whatever step it shows.
PROGRESS = re.compile(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] [^\n]*\d:\d\d:\d\d")


def history_command(upstreams, *extra: str) -> list[str]:
    return [sys.executable, "-m", "brax_diff", "history", *repo_flags(upstreams), "--slm", "master",
            "--variant", "ppo_fx", *extra]


def test_history_and_fix_show_progress_on_a_terminal(upstreams, tmp_path):
    """A cold `history` or `fix` works for seconds: on a terminal a progress line says what it
    does, as `report`'s does; the result is still printed."""
    fix = [sys.executable, "-m", "brax_diff", "fix", *repo_flags(upstreams), "--slm", "HEAD", "--family", "dm_control",
           "--diff"]
    for argv, result in ((history_command(upstreams), "# Fact history"), (fix, "+ppo_fx_brax:")):
        code, screen = run_in_pty(argv, tmp_path, environment(tmp_path))
        assert code == 0, screen
        assert PROGRESS.search(screen) and result in screen, screen[:2000]


def test_history_in_a_pipe_or_quiet_shows_no_progress(upstreams, tmp_path):
    done = subprocess.run(history_command(upstreams), cwd=tmp_path, env=environment(tmp_path), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Fact history\n") and not PROGRESS.search(done.stdout + done.stderr)
    assert re.fullmatch(r"history: \d+ extractions parsed; cache \d+ hits, \d+ misses\n", done.stderr)
    code, screen = run_in_pty(history_command(upstreams, "--quiet"), tmp_path, environment(tmp_path))
    assert code == 0 and screen.startswith("# Fact history") and not PROGRESS.search(screen)
    assert "extractions parsed" not in screen
