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


def make_work_tree(path):
    (path / ".git").mkdir(parents=True)
    return path


def test_settings_are_read_at_the_project_root_and_its_relative_paths_start_there(tmp_path):
    project = make_work_tree(tmp_path / "project")
    (project / "slm_lab" / "spec").mkdir(parents=True)
    (project / "brax-diff.toml").write_text(
        'brax-repo = "../brax"\nplayground_repo = "https://github.com/x/playground"\nrules = "r.yaml"\n'
        'mapping = "conf/m.yaml"\nspec = "slm_lab/spec/p.yaml"\n')
    below = load_settings(project / "slm_lab" / "spec")
    assert (below.brax_repo, below.playground_repo, below.rules, below.mapping) == (
        str(tmp_path / "brax"), "https://github.com/x/playground", str(project / "r.yaml"),
        str(project / "conf" / "m.yaml"))
    assert below.spec == "slm_lab/spec/p.yaml"  # a path inside the SLM-Lab repository, not here
    assert (below.reports_dir, below.root) == (str(project / "reports"), str(project))
    assert (below.slm_repo, below.slm_ref) == (str(project), "HEAD")  # this SLM-Lab checkout, from below its top
    assert below.label(below.rules) == "r.yaml" and below.label("/elsewhere/r.yaml") == "/elsewhere/r.yaml"
    top = load_settings(project)  # in the root: as written
    assert (top.brax_repo, top.rules, top.reports_dir, top.slm_repo) == ("../brax", "r.yaml", "reports", ".")
    assert top.label(top.rules) == "r.yaml"
    (project / "brax-diff.toml").write_text('slm-repo = "."\nreports-dir = "out"\n')
    below = load_settings(project / "slm_lab")
    assert (below.slm_repo, below.reports_dir) == (str(project), str(project / "out"))
    assert load_settings(project / "slm_lab", brax_repo="b").brax_repo == "b"  # a flag: from the cwd


def test_the_search_stops_at_the_first_settings_file_and_at_the_work_tree_top(tmp_path):
    (tmp_path / "brax-diff.toml").write_text('brax-repo = "/outside"\n')
    project = make_work_tree(tmp_path / "project")
    (project / "pkg" / "sub").mkdir(parents=True)
    (project / "pkg" / "pyproject.toml").write_text('[project]\nname = "pkg"\n')  # not brax-diff's: look on
    settings = load_settings(project / "pkg" / "sub")
    assert (settings.brax_repo, settings.root) == ("https://github.com/google/brax", str(project))
    assert settings.reports_dir == str(project / "reports")  # no file: the work tree's top
    (project / "pkg" / "pyproject.toml").write_text('[project]\nname = "pkg"\n[tool.brax-diff]\nrules = "x.yaml"\n')
    settings = load_settings(project / "pkg" / "sub")
    assert (settings.root, settings.rules) == (str(project / "pkg"), str(project / "pkg" / "x.yaml"))
    outside = tmp_path / "plain" / "dir"  # not in a work tree: the current directory only
    outside.mkdir(parents=True)
    assert (load_settings(outside).brax_repo, load_settings(outside).reports_dir) == (
        "https://github.com/google/brax", "reports")


def test_an_unknown_key_is_named_as_written_with_the_closest_known_one(tmp_path):
    (tmp_path / "brax-diff.toml").write_text('brax-rep = "/b"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    message = str(caught.value)
    assert message.startswith("brax-diff.toml: unknown setting 'brax-rep'; did you mean 'brax-repo'? (known: "
                              "brax-ref, brax-repo, cache-dir, mapping,")
    assert "brax_repo" not in message and "root" not in message
    (tmp_path / "brax-diff.toml").write_text('reports_dri = "out"\n')
    with pytest.raises(ConfigError, match=r"unknown setting 'reports_dri'; did you mean 'reports_dir'\? "
                                          r"\(known: brax_ref, brax_repo,"):
        load_settings(tmp_path)
    (tmp_path / "brax-diff.toml").write_text('root = "/x"\n')  # internal, not a setting
    with pytest.raises(ConfigError, match="unknown setting 'root'"):
        load_settings(tmp_path)
    (tmp_path / "brax-diff.toml").write_text('zzz = "/x"\n')
    assert "did you mean" not in str(pytest.raises(ConfigError, load_settings, tmp_path).value)


def test_report_run_below_the_root_reads_its_settings_and_writes_its_reports_there(tmp_path, monkeypatch, capsys):
    from brax_diff.cli import main
    from upstream_repos import MAPPING_FILE, make_upstreams

    paths = make_upstreams(tmp_path / "up")
    slm = paths["slm"]
    (slm / "brax-diff.toml").write_text(
        f'brax-repo = "../brax"\nplayground-repo = "{paths["playground"]}"\nmapping = "{MAPPING_FILE}"\n'
        'rules = "brax-diff-rules.yaml"\n')
    (slm / "brax-diff-rules.yaml").write_text("rules: []\n")
    monkeypatch.chdir(slm / "slm_lab" / "spec")
    assert main(["report", "--env", "BallInCup", "--quiet"]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (slm / "reports").iterdir()) == ["BallInCup.json", "BallInCup.md"]
    assert not (slm / "slm_lab" / "spec" / "reports").exists()
    assert '"origin": "brax-diff-rules.yaml"' in (slm / "reports" / "BallInCup.json").read_text()
    monkeypatch.chdir(slm)  # the same report from the root
    assert main(["report", "--env", "BallInCup", "--check"]) == 0
    assert "up to date: 2 file(s)" in capsys.readouterr().err
