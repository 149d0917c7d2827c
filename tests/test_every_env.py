"""`report --env` and `history --env` for every env of the fixture registries, with the real
extractors: each env is compared with the variant the mapping gives it or its family."""

from __future__ import annotations

import json

import pytest

from brax_diff.cli import main
from brax_diff.sources.repository import Repository
from brax_diff.extractors.brax.extractor import FAMILIES, BraxExtractor
from upstream_repos import EXPECTED_VARIANT, make_upstreams, repo_flags


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_upstreams(tmp_path_factory.mktemp("upstreams"))


def registered(paths) -> list[str]:
    playground = Repository(paths["playground"], "playground").resolve("HEAD")
    extractor = BraxExtractor(Repository(paths["brax"], "brax").resolve("HEAD"), playground)
    return sorted(env for family in FAMILIES for env in extractor.environments(family))


def test_the_expected_table_names_every_registered_env(upstreams):
    assert registered(upstreams) == sorted(EXPECTED_VARIANT)


@pytest.mark.parametrize("env", sorted(EXPECTED_VARIANT))
def test_report_env_uses_the_mapped_or_family_variant(upstreams, env, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["report", *repo_flags(upstreams), "--slm", "HEAD", "--env", env,
                 "--format", "json", "--output", "-"])
    out, err = capsys.readouterr()
    assert code == 0, err
    scope = json.loads(out)["scope"]
    assert (scope["env"], scope["variant"]) == (env, EXPECTED_VARIANT[env])


@pytest.mark.parametrize("env", ["CartpoleBalance", "FingerSpin", "SpotGetup", "Go1Getup", "PandaPickCube"])
def test_history_env_walks_the_same_variant(upstreams, env, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["history", *repo_flags(upstreams), "--slm", "HEAD", "--env", env, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["walks"][0]["scopes"] == [{"variant": EXPECTED_VARIANT[env]}]


def test_an_unregistered_env_is_one_line(upstreams, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["report", *repo_flags(upstreams), "--env", "CartpoleBalanse", "--output", "-",
                 "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 'CartpoleBalanse' is not a registered Playground environment")
    assert "did you mean 'CartpoleBalance'?" in err and err.count("\n") == 1
