import pytest

from brax_diff.config import load_settings
from brax_diff.errors import ConfigError


def test_layering_defaults_pyproject_file_flags(tmp_path):
    assert load_settings(tmp_path).brax_repo == "https://github.com/google/brax"
    (tmp_path / "pyproject.toml").write_text('[tool.brax-diff]\nbrax-repo = "/a"\nslm_ref = "dev"\n')
    (tmp_path / "brax-diff.toml").write_text('brax_repo = "/b"\n')
    settings = load_settings(tmp_path, brax_ref="v1", playground_ref=None)
    assert (settings.brax_repo, settings.slm_ref, settings.brax_ref, settings.playground_ref) == ("/b", "dev", "v1", "main")


def test_unknown_setting_and_bad_toml_are_config_errors(tmp_path):
    (tmp_path / "brax-diff.toml").write_text('brax_rep = "/b"\n')
    with pytest.raises(ConfigError, match="unknown setting 'brax_rep'"):
        load_settings(tmp_path)
    (tmp_path / "brax-diff.toml").write_text('brax_repo = \n')
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(tmp_path)


def test_slm_lab_defaults_to_this_checkout_inside_one_else_github_master(tmp_path):
    elsewhere = tmp_path / "brax-diff"
    (elsewhere / ".git").mkdir(parents=True)
    (elsewhere / "brax_diff").mkdir()
    settings = load_settings(elsewhere)
    assert (settings.slm_repo, settings.slm_ref) == ("https://github.com/kengz/SLM-Lab", "master")

    checkout = tmp_path / "SLM-Lab"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "slm_lab" / "spec").mkdir(parents=True)
    settings = load_settings(checkout)
    assert (settings.slm_repo, settings.slm_ref) == (".", "HEAD")
    settings = load_settings(checkout / "slm_lab" / "spec")  # below its top
    assert (settings.slm_repo, settings.slm_ref) == (str(checkout.resolve()), "HEAD")
    assert load_settings(checkout, slm_ref="v5").slm_ref == "v5"


def test_configured_slm_repository_picks_its_default_ref(tmp_path):
    (tmp_path / "brax-diff.toml").write_text('slm-repo = "/src/SLM-Lab"\n')
    assert (load_settings(tmp_path).slm_repo, load_settings(tmp_path).slm_ref) == ("/src/SLM-Lab", "HEAD")
    (tmp_path / "brax-diff.toml").write_text('slm-repo = "file:///mirror/SLM-Lab.git"\n')
    assert load_settings(tmp_path).slm_ref == "master"
