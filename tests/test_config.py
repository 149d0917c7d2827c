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
