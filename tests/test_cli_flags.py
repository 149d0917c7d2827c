"""Flags that mean the same thing are spelt the same in every command; --version; help shows
plain flags as flags; files written with the user's umask; the offline error names the flag."""

from __future__ import annotations

import os
import stat

import pytest

from brax_diff import __version__
from brax_diff.cli import build_parser, main
from brax_diff.errors import SourceError
from brax_diff.safety.io import write_atomic
from brax_diff.sources.repository import Repository
from upstream_repos import make_upstreams


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_upstreams(tmp_path_factory.mktemp("upstreams"))


def options(*path: str) -> set[str]:
    command = build_parser()
    for name in path:
        command = command.commands[name]
    return set(command.option_names())


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"brax-diff {__version__}\n"
    assert main(["-V"]) == 0
    assert capsys.readouterr().out == f"brax-diff {__version__}\n"


@pytest.mark.parametrize("command", [["report"], ["history"], ["verify"], ["fix"], ["rules"], ["extract", "brax"],
                                     ["extract", "slm"], ["extract"], []])
def test_dash_h_is_help_everywhere(command, capsys):
    assert main([*command, "--help"]) == 0
    long = capsys.readouterr().out
    assert main([*command, "-h"]) == 0
    assert capsys.readouterr().out == long and "  -h, --help  " in long


@pytest.mark.parametrize("command", [["report"], ["history"], ["verify"], ["fix"], ["rules"], ["extract", "brax"],
                                     ["extract", "slm"]])
def test_help_names_what_each_value_is(command, capsys):
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "<" not in out.replace("<variant>", "")  # no <str>, <int>, <path>, <list[str]>


def test_help_metavars(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["report", "--help"]) == 0
    rows = {line.strip().split("  ")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  -")}
    assert {"--brax, --brax-ref REF", "--brax-repo PATH|URL", "--family FAMILY", "--env ENV", "--spec PATH",
            "--set KEY=VALUE", "--rules FILE", "--fail-on SEVERITY", "--output PATH", "-q, --quiet"} <= rows
    assert main(["history", "--help"]) == 0
    assert "  --brax A..B " in capsys.readouterr().out
    assert main(["verify", "--help"]) == 0
    out = capsys.readouterr().out
    assert "  --seeds N " in out and "  --set NAME=VALUE " in out and "  --address HOST:PORT " in out
    assert main(["fix", "--help"]) == 0
    assert "  --keys KEY,... " in capsys.readouterr().out


@pytest.mark.parametrize("command, sides", [
    (("report",), ("brax", "playground", "slm")),
    (("verify",), ("brax", "playground", "slm")),
    (("fix",), ("brax", "playground", "slm")),
    (("extract", "brax"), ("brax", "playground")),
    (("extract", "slm"), ("slm",)),
])
def test_repositories_and_refs_have_one_name_everywhere(command, sides):
    opts = options(*command)
    for side in sides:
        assert {f"--{side}-repo", f"--{side}", f"--{side}-ref"} <= opts, command
    assert options("history") >= {"--brax-repo", "--playground-repo", "--slm-repo", "--brax", "--slm", "--mapping"}
    assert {"--repo", "--ref"} <= options("extract", "slm") and {"--repo", "--ref", "--playground-ref"} <= \
        options("extract", "brax")  # the old spellings still work


def test_every_option_is_a_keyword_of_its_command_function_and_takes_its_default():
    commands = dict(build_parser().leaves())
    assert set(commands) == {("report",), ("rules",), ("fix",), ("verify",), ("history",), ("extract", "brax"),
                             ("extract", "slm"), ("extract", "rsl-rl")}
    for path, parser in commands.items():
        run = parser.get_default("_run")
        keywords = run.__kwdefaults__
        dests = {a.dest: a for a in parser._actions if a.option_strings and not a.dest.startswith("_")}
        assert set(dests) == set(keywords), path  # no flag without a parameter, no parameter without a flag
        assert run.__code__.co_argcount == 0, path  # keyword-only: main() passes every option by name
        for dest, action in dests.items():
            assert action.default == keywords[dest], (path, dest)


@pytest.mark.parametrize("command", [["report"], ["history"], ["verify"], ["fix"], ["rules"], ["extract", "brax"],
                                     ["extract", "slm"], ["extract", "rsl-rl"], []])
def test_help_shows_plain_flags_without_a_type(command, capsys):
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--help" in out and "<bool>" not in out


def test_new_and_old_extract_flags_give_the_same_facts(upstreams, capsys):
    new = ["extract", "brax", "--brax-repo", str(upstreams["brax"]), "--brax", "HEAD",
           "--playground-repo", str(upstreams["playground"]), "--playground", "HEAD", "--env", "BallInCup",
           "--format", "json"]
    old = ["extract", "brax", "--repo", str(upstreams["brax"]), "--ref", "HEAD",
           "--playground-repo", str(upstreams["playground"]), "--playground-ref", "HEAD", "--env", "BallInCup",
           "--format", "json"]
    assert main(new) == 0
    first = capsys.readouterr().out
    assert main(old) == 0
    assert capsys.readouterr().out == first and '"env": "BallInCup"' in first
    slm = ["extract", "slm", "--slm-repo", str(upstreams["slm"]), "--slm", "HEAD", "--format", "json"]
    assert main(slm) == 0
    assert main(["extract", "slm", "--repo", str(upstreams["slm"]), "--ref", "HEAD", "--format", "json"]) == 0
    second, third = capsys.readouterr().out.split("\n}\n", 1)
    assert '"variant": "ppo_fx"' in second and second + "\n}\n" == third


@pytest.fixture()
def umask():
    def set_mask(mask: int) -> None:
        os.umask(mask)

    before = os.umask(0o022)
    yield set_mask
    os.umask(before)


def test_written_files_follow_the_umask_and_keep_an_existing_mode(tmp_path, umask):
    umask(0o022)
    assert stat.S_IMODE(write_atomic(tmp_path / "a.md", "a").stat().st_mode) == 0o644
    umask(0o077)
    assert stat.S_IMODE(write_atomic(tmp_path / "b.md", "b").stat().st_mode) == 0o600
    (tmp_path / "a.md").chmod(0o640)
    umask(0o022)
    assert stat.S_IMODE(write_atomic(tmp_path / "a.md", "again").stat().st_mode) == 0o640
    assert (tmp_path / "a.md").read_text() == "again"


def test_report_files_are_readable_by_the_group(upstreams, tmp_path, monkeypatch, umask):
    umask(0o002)
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--brax-repo", str(upstreams["brax"]), "--playground-repo", str(upstreams["playground"]),
                 "--slm-repo", str(upstreams["slm"]), "--slm", "HEAD", "--mapping",
                 str(upstreams["slm"] / "brax-diff-mapping.yaml"), "--env", "BallInCup", "--quiet"]) == 0
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "reports").iterdir()}
    assert modes == {"BallInCup.md": 0o664, "BallInCup.json": 0o664}


def test_offline_error_names_the_flag_and_the_setting(tmp_path, capsys, monkeypatch):
    with pytest.raises(SourceError) as caught:
        Repository(f"file://{tmp_path}/nowhere", "playground", cache_root=tmp_path / "cache")
    message = str(caught.value)
    assert message.startswith(f"playground: cannot clone file://{tmp_path}/nowhere and no cached clone exists")
    assert message.endswith("to use a local clone, pass --playground-repo PATH or set playground-repo in "
                            "brax-diff.toml")
    monkeypatch.chdir(tmp_path)
    assert main(["extract", "brax", "--brax-repo", f"file://{tmp_path}/gone", "--defaults"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: brax: cannot clone") and "--brax-repo PATH" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", [["report", "--slm", "HEAD", "--slm-repo", "SLM"],
                                     ["extract", "brax", "--env", "BallInCup"],
                                     ["verify", "--plan", "--slm-repo", "SLM"],
                                     ["history", "--brax", "HEAD", "--env", "BallInCup", "--slm-repo", "SLM"]])
def test_offline_every_missing_clone_is_named_in_one_line(command, upstreams, tmp_path, capsys, monkeypatch):
    """Offline with no cached clones, one run names every repository to point at a local clone."""
    monkeypatch.chdir(tmp_path)
    brax, playground = f"file://{tmp_path}/no-brax", f"file://{tmp_path}/no-playground"
    command = [str(upstreams["slm"]) if word == "SLM" else word for word in command]
    assert main([*command, "--brax-repo", brax, "--playground-repo", playground]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: brax: cannot clone {brax} and no cached clone exists")
    assert f"; playground: cannot clone {playground} and no cached clone exists" in err
    assert err.endswith("; to use local clones, pass --brax-repo PATH and --playground-repo PATH or set "
                        "brax-repo and playground-repo in brax-diff.toml\n")
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("command", [["report", "--env", "BallInCup", "--slm", "HEAD"],
                                     ["extract", "slm", "--slm", "HEAD"],
                                     ["fix", "--env", "BallInCup", "--slm", "HEAD", "--diff"],
                                     ["verify", "--plan", "--slm", "HEAD"]])
def test_a_set_with_no_placeholder_in_the_spec_is_an_error(command, upstreams, tmp_path, capsys, monkeypatch):
    """--set foo=1 where the spec has no ${foo}: one error line naming the spec's placeholders."""
    monkeypatch.chdir(tmp_path)
    repos = {"extract": ["--slm-repo", str(upstreams["slm"])]}.get(command[0], [
        "--brax-repo", str(upstreams["brax"]), "--playground-repo", str(upstreams["playground"]),
        "--slm-repo", str(upstreams["slm"])])
    assert main([*command, *repos, "--set", "foo=1"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --set foo=1: the spec slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml has no ${foo} "
                   "placeholder; its placeholders: ${env}, ${max_frame}\n")
    assert not (tmp_path / "reports").exists()


def test_a_set_given_twice_with_two_values_is_one_error_line(capsys):
    from brax_diff.cli.common import parse_sets

    assert parse_sets(["max_frame=1e8", "max_frame=1e8", "env=x"]) == {"max_frame": "1e8", "env": "x"}
    # extract slm parses --set before it reads any repository: the error comes first and alone.
    code = main(["extract", "slm", "--slm-repo", "/nonexistent", "--set", "max_frame=1e8", "--set", "max_frame=2e8"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --set max_frame is given twice ('1e8' and '2e8'): give it once"]
