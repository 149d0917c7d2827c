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
