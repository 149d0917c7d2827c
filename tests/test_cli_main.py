import typer

from brax_diff import cli
from brax_diff.errors import SourceError


def _app_with(command):
    app = typer.Typer()
    app.command()(command)
    app.command("other")(lambda: None)
    return app


def test_exit_codes_and_one_line_errors(monkeypatch, capsys):
    def fails_check():
        raise typer.Exit(1)

    monkeypatch.setattr(cli, "app", _app_with(fails_check))
    assert cli.main(["fails-check"]) == 1

    def bad_ref():
        raise SourceError("brax: cannot resolve ref 'nope' in /x")

    monkeypatch.setattr(cli, "app", _app_with(bad_ref))
    assert cli.main(["bad-ref"]) == 2
    assert capsys.readouterr().err == "error: brax: cannot resolve ref 'nope' in /x\n"
    assert cli.main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_usage_errors_are_one_error_line(capsys):
    assert cli.main(["report", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No such option: --no-such-flag") and err.count("\n") == 1
    assert err.rstrip().endswith("(see brax-diff report --help)")
