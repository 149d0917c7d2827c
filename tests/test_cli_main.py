"""`brax-diff`'s entry point: exit codes, one-line errors for bad input and bad usage, the
parser's click-era manners (values that look like options, ``--``, integers), and a start-up
that imports none of the heavy libraries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brax_diff import cli
from brax_diff.cli import build_parser
from brax_diff.cli.parser import CommandParser
from brax_diff.errors import BraxDiffError, SourceError

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = dict(build_parser().leaves())


def _parser_with(name, command):
    parser = CommandParser("brax-diff")
    parser.command(name, command)
    parser.command("other", lambda: None)
    return parser


class Stale(BraxDiffError):
    exit_code = 1


def test_exit_codes_and_one_line_errors(monkeypatch, capsys):
    def fails_check():
        return 1  # a command's int is the exit code

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_with("fails-check", fails_check))
    assert cli.main(["fails-check"]) == 1

    def stale():
        raise Stale("2 report file(s) are stale")

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_with("stale", stale))
    assert cli.main(["stale"]) == 1
    assert capsys.readouterr().err == "error: 2 report file(s) are stale\n"

    def bad_ref():
        raise SourceError("brax: cannot resolve ref 'nope' in /x")

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_with("bad-ref", bad_ref))
    assert cli.main(["bad-ref"]) == 2
    assert capsys.readouterr().err == "error: brax: cannot resolve ref 'nope' in /x\n"
    assert cli.main(["no-such-command"]) == 2
    assert capsys.readouterr().err == "error: No such command 'no-such-command'. (see brax-diff --help)\n"

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_with("interrupted", interrupted))
    assert cli.main(["interrupted"]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_usage_errors_are_one_error_line(capsys):
    assert cli.main(["report", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No such option: --no-such-flag") and err.count("\n") == 1
    assert err.rstrip().endswith("(see brax-diff report --help)")


def _one_error_line(capsys, argv, starts, command="brax-diff"):
    assert cli.main(argv) == 2, argv
    captured = capsys.readouterr()
    assert not captured.out, argv
    lines = captured.err.splitlines()
    assert len(lines) == 1 and captured.err.endswith("\n"), (argv, captured.err)
    assert lines[0].startswith(f"error: {starts}") and lines[0].endswith(f" (see {command} --help)"), (argv, lines)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_bad_usage_of_each_command_is_one_error_line_and_exit_2(path, capsys):
    command = f"brax-diff {' '.join(path)}"
    takes_value = next(a.option_strings[0] for a in COMMANDS[path]._actions if a.option_strings and a.nargs != 0)
    _one_error_line(capsys, [*path, "--no-such-flag"], "No such option: --no-such-flag", command)
    _one_error_line(capsys, [*path, "-x"], "No such option: -x", command)
    _one_error_line(capsys, [*path, takes_value], f"Option '{takes_value}' requires an argument.", command)
    _one_error_line(capsys, [*path, "--format=json", "stray"], "Got unexpected extra argument(s) (stray)", command)
    _one_error_line(capsys, [*path, "--help=yes"], "Option '--help' does not take a value.", command)
    _one_error_line(capsys, [*path, "--help", "--no-such-flag"], "No such option: --no-such-flag", command)


def test_bad_commands_and_bad_values_are_one_error_line(capsys):
    _one_error_line(capsys, ["reprot"], "No such command 'reprot'. Did you mean 'report'?")
    _one_error_line(capsys, ["extract", "nope"], "No such command 'nope'.", "brax-diff extract")
    _one_error_line(capsys, ["--nope"], "No such option: --nope")
    _one_error_line(capsys, ["report", "--form", "json"], "No such option: --form (Possible options: --format)",
                    "brax-diff report")
    _one_error_line(capsys, ["fix", "--phase", "x"], "Invalid value for '--phase': Input should be a valid integer",
                    "brax-diff fix")
    _one_error_line(capsys, ["verify", "--seeds", "1.5"], "Invalid value for '--seeds'", "brax-diff verify")
    _one_error_line(capsys, ["report", "--quiet=1"], "Option '--quiet' does not take a value.", "brax-diff report")
    _one_error_line(capsys, ["report", "-qx"], "No such option: -x", "brax-diff report")


def test_a_bare_group_prints_its_help_on_stderr(capsys):
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert not captured.out and captured.err.startswith("Usage: brax-diff [OPTIONS] COMMAND [ARGS]...\n")
    assert "\n  report   " in captured.err and "\n  extract  " in captured.err
    assert cli.main(["extract"]) == 2
    assert capsys.readouterr().err.startswith("Usage: brax-diff extract [OPTIONS] COMMAND [ARGS]...\n")


def test_help_wins_over_a_bad_value_and_a_stray_word(capsys):
    assert cli.main(["fix", "--phase", "x", "stray", "--help"]) == 0
    assert capsys.readouterr().out.startswith("Usage: brax-diff fix [OPTIONS]\n")
    assert cli.main(["--version", "no-such-command"]) == 0
    assert capsys.readouterr().out.startswith("brax-diff ")


def parse(*argv: str) -> dict:
    namespace = build_parser().parse_args(list(argv))
    return {k: v for k, v in vars(namespace).items() if not k.startswith("_")}


def test_a_value_is_the_next_word_whatever_it_looks_like():
    # As with click: an option's value may start with "-" (a URL such as --upload-pack=...
    # reaches the library, which passes it to git after `--`), and may be "--" itself.
    assert parse("report", "--brax-repo", "--upload-pack=touch x;://x")["brax_repo"] == "--upload-pack=touch x;://x"
    assert parse("report", "--brax", "--")["brax"] == "--"
    assert parse("report", "--brax=--slm", "--slm", "-x")["brax"] == "--slm"
    assert parse("report", "--set", "a=1", "--set=b=-2")["sets"] == ["a=1", "b=-2"]
    assert parse("report", "--brax", "a", "--brax", "b")["brax"] == "b"  # the last one counts
    assert parse("report", "-qq")["quiet"] is True
    assert parse("extract", "slm", "--repo", "r", "--ref", "v1") == parse("extract", "slm", "--slm-repo", "r",
                                                                        "--slm", "v1")


def test_double_dash_ends_the_options(capsys):
    _one_error_line(capsys, ["report", "--", "--brax", "x"], "Got unexpected extra argument(s) (--brax x)",
                    "brax-diff report")
    assert parse("--", "report", "--check")["check"] is True  # before the command: the command still parses


def test_integers_are_read_as_typer_read_them(capsys):
    for text, value in [("7", 7), (" 7 ", 7), ("+7", 7), ("-3", -3), ("1_000", 1000), ("7.0", 7), ("007", 7)]:
        assert parse("fix", "--phase", text)["phase"] == value, text
    for text in ("1.5", "", "1e3", "0x10", "1__0", "seven"):
        _one_error_line(capsys, ["fix", "--phase", text], "Invalid value for '--phase'", "brax-diff fix")
    assert parse("verify", "--seeds", "x", "--seeds", "3")["seeds"] == 3  # only the value that counts is read
    assert str(parse("verify")["output"]) == "reports/verify" and type(parse("verify")["output"]).__name__ != "str"


HEAVY = ("typer", "click", "pydantic", "git", "jinja2", "yaml", "ruamel", "libcst", "rich", "torch", "jax",
         "extractors")


@pytest.mark.parametrize("argv", [["--version"], ["report", "--help"], ["--help"], ["extract", "brax", "--help"]],
                         ids=" ".join)
def test_version_and_help_import_no_heavy_library(argv, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "brax_diff", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "brax_diff.cli" in imported
    heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY)
    assert not heavy, heavy
    assert done.stdout.startswith("brax-diff " if argv == ["--version"] else "Usage: brax-diff")
