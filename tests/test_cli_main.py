from brax_diff import cli
from brax_diff.cli.parser import CommandParser
from brax_diff.errors import SourceError


def _parser_with(name, command):
    parser = CommandParser("brax-diff")
    parser.command(name, command)
    parser.command("other", lambda: None)
    return parser


def test_exit_codes_and_one_line_errors(monkeypatch, capsys):
    def fails_check():
        return 1  # a command's int is the exit code

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_with("fails-check", fails_check))
    assert cli.main(["fails-check"]) == 1

    def bad_ref():
        raise SourceError("brax: cannot resolve ref 'nope' in /x")

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_with("bad-ref", bad_ref))
    assert cli.main(["bad-ref"]) == 2
    assert capsys.readouterr().err == "error: brax: cannot resolve ref 'nope' in /x\n"
    assert cli.main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_usage_errors_are_one_error_line(capsys):
    assert cli.main(["report", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No such option: --no-such-flag") and err.count("\n") == 1
    assert err.rstrip().endswith("(see brax-diff report --help)")
