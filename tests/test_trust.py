"""A checkout brax-diff runs in is not trusted (issue 35, item 4): its settings file cannot
choose the fact cache nor name files outside it; upstream text printed as a GitHub workflow
command or into Markdown cannot become a command, a link or HTML."""

from __future__ import annotations

from pathlib import Path

import pytest

from brax_diff.cli import main
from brax_diff.config import load_settings
from brax_diff.errors import ConfigError
from test_hardening import one_error_line
from test_report_cli import run
from test_report_cli import workspace  # noqa: F401 (a fixture)


# -- settings files -------------------------------------------------------------------------

def test_a_checkouts_settings_file_cannot_choose_the_fact_cache(workspace, capsys):
    # The case: a checkout ships brax-diff.toml pointing at a planted cache beside it.
    work = workspace["work"]
    planted = work / "planted"
    planted.mkdir()
    (work / "brax-diff.toml").write_text('cache-dir = "planted"\n')
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "brax-diff.toml: cache-dir cannot be set in a settings file", "BRAX_DIFF_CACHE_DIR")
    assert list(planted.iterdir()) == [] and not (work / "reports").exists()  # nothing read there, nothing written
    (work / "brax-diff.toml").write_text('[tool.brax-diff]\ncache_dir = "/var/cache/x"\n')  # any spelling, any path
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "brax-diff.toml: cache_dir cannot be set")
    (work / "pyproject.toml").write_text('[tool.brax-diff]\ncache-dir = "planted"\n')
    (work / "brax-diff.toml").unlink()
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "pyproject.toml [tool.brax-diff]: cache-dir cannot be set")


def test_a_cache_dir_flag_wins_over_the_file(tmp_path):
    (tmp_path / "brax-diff.toml").write_text('cache-dir = "planted"\n')
    with pytest.raises(ConfigError):
        load_settings(tmp_path)
    assert load_settings(tmp_path, cache_dir="/mine").cache_dir == "/mine"  # the user's choice


@pytest.mark.parametrize("value", ["../../x", "/tmp/elsewhere", "~/reports", "in/../../out"])
def test_reports_dir_outside_the_checkout_is_refused_and_nothing_is_written(workspace, capsys, value):
    work = workspace["work"]
    (work / "brax-diff.toml").write_text(f'reports-dir = "{value}"\n')
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, f"brax-diff.toml: reports-dir '{value}' leads outside the checkout ({work})")
    assert not (work.parent.parent / "x").exists() and not (work.parent / "out").exists()


def test_reports_dir_through_a_symlink_leading_out_is_refused(workspace, capsys, tmp_path):
    work = workspace["work"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "reports").symlink_to(outside)
    (work / "brax-diff.toml").write_text('reports-dir = "reports"\n')
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "reports-dir 'reports' leads outside the checkout")
    assert list(outside.iterdir()) == []


def test_paths_inside_the_checkout_stay_allowed_from_below_its_root(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "tools" / "sub").mkdir(parents=True)
    (checkout / "tools" / "brax-diff.toml").write_text(
        'reports-dir = "../reports"\nrules = "r.yaml"\nmapping = "' + str(checkout / "m.yaml") + '"\n')
    settings = load_settings(checkout / "tools" / "sub")  # the file is in tools/; the checkout is its work tree
    assert (settings.reports_dir, settings.rules, settings.mapping) == (
        str(checkout / "reports"), str(checkout / "tools" / "r.yaml"), str(checkout / "m.yaml"))


@pytest.mark.parametrize("key", ["rules", "mapping"])
def test_rules_and_mapping_outside_the_checkout_are_refused_unless_given_as_flags(tmp_path, capsys, monkeypatch, key):
    secret = tmp_path / "secret.yaml"
    secret.write_text("rules: []\n")
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "brax-diff.toml").write_text(f'{key} = "../secret.yaml"\n')
    with pytest.raises(ConfigError, match=rf"brax-diff.toml: {key} '../secret.yaml' leads outside the checkout "
                                          rf"\({checkout}\): .* pass --{key} for one elsewhere"):
        load_settings(checkout)
    assert getattr(load_settings(checkout, **{key: str(secret)}), key) == str(secret)  # the user's own flag
    monkeypatch.chdir(checkout)
    assert main(["rules"]) == 2
    one_error_line(capsys, f"{key} '../secret.yaml' leads outside the checkout")
