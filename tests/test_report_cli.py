"""`brax-diff report` and `brax-diff rules` end to end, over fixture repositories, with
small fake extractors standing in for extractors/brax/extractor.py and extractors/slm/extractor.py (same
constructor and methods as theirs). The fakes read one settings file from the
fixture Brax repository, so an upstream commit really moves a fact."""

import json
from pathlib import Path

import pytest

from brax_diff.cli import main
from brax_diff.cli import report as report_cli
from brax_diff.errors import BraxDiffError, SpecError
from brax_diff.facts.model import Extraction, Finding
from brax_diff.report.render import render_rules_markdown
from brax_diff.compare.rules import load_rules
from gitfixture import add_commit, make_repo
from report_fixtures import brax_extraction, slm_extraction

ROOT = Path(__file__).resolve().parent.parent
FAMILY_ENVS = {"dm_control": ["BallInCup", "CartpoleBalance"], "locomotion": ["Go1Getup"]}


def _overrides(snapshot, path):
    out = {}
    for line in snapshot.read(path).splitlines():
        key, _, value = line.partition("=")
        out[key.strip()] = json.loads(value)
    return out


class FakeBrax:
    def __init__(self, brax, playground):
        self.brax, self.playground = brax, playground

    def families(self):
        return sorted(FAMILY_ENVS)

    def environments(self, family):
        return FAMILY_ENVS[family]

    def family_of(self, env):
        for family, envs in FAMILY_ENVS.items():
            if env in envs:
                return family
        raise BraxDiffError(f"unknown environment {env!r}")

    def _extraction(self, family, env, extra):
        overrides = {**_overrides(self.brax, "params.txt"), **extra}
        unknown = overrides.pop("unknown", [])  # keys the fake cannot read at this commit
        x = brax_extraction(overrides, family=family, env=env, sha=self.brax.sha)
        for key in unknown:
            x.unknown(key, f"{key}: shape not found", Finding("pattern_not_found", "WARNING",
                                                              f"{key}: shape not found", (), key))
        x.sources = {"brax": self.brax.info(), "playground": self.playground.info()}
        return x

    def defaults(self):
        return self._extraction(None, None, {})

    def family(self, family):
        return self._extraction(family, None, {})

    def env(self, env):
        return self._extraction(self.family_of(env), env, {"discount": 0.95} if env == "BallInCup" else {})


class FakeSlm:
    VARIANTS = {
        "ppo_playground": {},
        "ppo_playground_loco": {"transitions_per_update": 983040, "unrolls_per_update": 16},
    }

    def __init__(self, snapshot, spec="spec.yaml", sets=None, mapping=None, playground=None):
        self.snapshot, self.spec = snapshot, spec
        self.mapping = mapping or {"dm_control": "ppo_playground", "locomotion": "ppo_playground_loco"}

    def variants(self):
        return sorted(self.VARIANTS)

    def variant(self, name):
        if name not in self.VARIANTS:
            raise SpecError(f"variant {name!r} not in {self.spec}")
        x = slm_extraction(self.VARIANTS[name], variant=name, sha=self.snapshot.sha)
        x.sources = {"slm": self.snapshot.info()}
        return x

    def setup(self, variant, env):
        """The fake's environments all run with one setup: no setup facts of their own."""
        return Extraction("slm", {"slm": self.snapshot.info()}, {"variant": variant, "env": env})

    def family_of(self, variant):
        return next((f for f, v in self.mapping.items() if v == variant), None)

    def variant_for(self, family=None, env=None):
        if env is not None:
            family = next(f for f, envs in FAMILY_ENVS.items() if env in envs)
        return self.mapping[family]


@pytest.fixture()
def workspace(tmp_path, monkeypatch):
    repos = tmp_path / "repos"
    shas = {
        "brax": make_repo(repos / "brax", [{"params.txt": "clip_epsilon = 0.3\n"}],
                          origin="https://github.com/google/brax.git"),
        "playground": make_repo(repos / "playground", [{"README.md": "playground\n"}],
                                origin="https://github.com/google-deepmind/mujoco_playground.git"),
        "slm": make_repo(repos / "slm", [{"spec.yaml": "ppo_playground: {}\n"}],
                         origin="git@github.com:kengz/SLM-Lab.git"),
    }
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(report_cli, "load_extractors", lambda: (FakeBrax, FakeSlm))
    return {"repos": repos, "shas": shas, "work": work}


def run(workspace, *args):
    repos = workspace["repos"]
    return main(["report", "--brax-repo", str(repos / "brax"), "--playground-repo", str(repos / "playground"),
                 "--slm-repo", str(repos / "slm"), *args])


def snapshot_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_default_renders_every_family_deterministically(workspace, capsys):
    assert run(workspace) == 0
    reports = workspace["work"] / "reports"
    assert sorted(p.name for p in reports.iterdir()) == ["dm_control.json", "dm_control.md",
                                                         "locomotion.json", "locomotion.md"]
    first = snapshot_files(reports)
    md = first["dm_control.md"].decode()
    assert f"[`{workspace['shas']['brax'][0]}`](https://github.com/google/brax/commit/" in md
    assert "| `BallInCup` |" not in md and "| BallInCup | ppo_playground |" in md  # the env matrix
    data = json.loads(first["dm_control.json"])
    assert data["scope"] == {"env": None, "family": "dm_control", "spec": "slm_lab/spec/benchmark_arc/ppo/"
                             "ppo_playground.yaml", "variant": "ppo_playground", "brax_reference": "params"}
    assert data["sources"][2]["repo"] == "https://github.com/kengz/SLM-Lab"
    assert "wrote reports/dm_control.md" in capsys.readouterr().err

    assert run(workspace) == 0  # byte-identical on a second run, no temporary files left
    assert snapshot_files(reports) == first


def test_check_exits_1_on_stale_files_and_writes_nothing(workspace, capsys):
    assert run(workspace, "--family", "dm_control") == 0
    assert run(workspace, "--family", "dm_control", "--check") == 0
    assert "up to date: 2 file(s)" in capsys.readouterr().err

    md = workspace["work"] / "reports" / "dm_control.md"
    md.write_text("edited by hand\n", encoding="utf-8")
    assert run(workspace, "--family", "dm_control", "--check") == 1
    assert "stale: reports/dm_control.md" in capsys.readouterr().err
    assert md.read_text(encoding="utf-8") == "edited by hand\n"

    assert run(workspace, "--family", "locomotion", "--check") == 1  # never written
    assert not (workspace["work"] / "reports" / "locomotion.md").exists()


def test_check_passes_when_only_commits_move(workspace, capsys):
    assert run(workspace, "--family", "dm_control") == 0
    add_commit(workspace["repos"] / "brax", {"README.md": "docs only\n"})
    capsys.readouterr()
    assert run(workspace, "--family", "dm_control", "--check") == 0
    assert "2 read older commits that say the same" in capsys.readouterr().err


def test_upstream_move_is_stale_then_reported_as_a_change(workspace, capsys):
    assert run(workspace, "--family", "dm_control") == 0
    new_sha = add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.2\n"})
    assert run(workspace, "--family", "dm_control", "--check") == 1
    assert run(workspace, "--family", "dm_control") == 0
    data = json.loads((workspace["work"] / "reports" / "dm_control.json").read_text())
    assert data["changes"]["sources"][0]["to"] == new_sha
    assert data["changes"]["facts"]["brax"] == [{"key": "clip_epsilon", "change": "changed", "from": 0.3, "to": 0.2}]
    assert data["changes"]["classifications"] == [{"key": "clip_epsilon",
                                                   "from": {"status": "differs", "severity": "IMPORTANT"},
                                                   "to": {"status": "match", "severity": None}}]
    md = (workspace["work"] / "reports" / "dm_control.md").read_text()
    assert "  - `clip_epsilon`: differs (IMPORTANT) → match" in md
    assert run(workspace, "--family", "dm_control", "--check") == 0  # regenerated: idempotent


def test_explicit_previous_report(workspace, tmp_path):
    assert run(workspace, "--family", "dm_control", "--output", str(tmp_path / "old")) == 0
    add_commit(workspace["repos"] / "brax", {"params.txt": "clip_epsilon = 0.25\n"})
    assert run(workspace, "--family", "dm_control", "--previous", str(tmp_path / "old" / "dm_control.json")) == 0
    data = json.loads((workspace["work"] / "reports" / "dm_control.json").read_text())
    assert data["changes"]["facts"]["brax"][0]["to"] == 0.25


def test_fail_on_severity(workspace, capsys):
    assert run(workspace, "--family", "dm_control", "--fail-on", "CRITICAL") == 1
    err = capsys.readouterr().err
    assert ("2 difference(s) at or above CRITICAL: dm_control: unrolls_per_update (CRITICAL); "
            "dm_control: transitions_per_update (CRITICAL)") in err
    assert (workspace["work"] / "reports" / "dm_control.md").exists()  # the report is still written
    assert run(workspace, "--family", "locomotion", "--fail-on", "critical") == 0
    assert run(workspace, "--family", "locomotion", "--fail-on", "important") == 1
    assert run(workspace, "--family", "locomotion", "--fail-on", "FATAL") == 2
    assert "error: unknown --fail-on severity 'FATAL'" in capsys.readouterr().err


def test_bad_rules_file_is_one_line_and_exit_2(workspace, capsys, tmp_path):
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules:\n  - code: BD001\n    severity: [{when: bigger, then: CRITICAL}]\n", encoding="utf-8")
    assert run(workspace, "--rules", str(bad)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: rules file {bad}: rule BD001: severity[0]: unknown predicate 'bigger'")
    assert err.count("\n") == 1
    assert not (workspace["work"] / "reports").exists()
    assert main(["rules", "--rules", str(bad)]) == 2


def test_rules_from_the_settings_file(workspace, tmp_path):
    override = workspace["work"] / "mine.yaml"  # inside the checkout: a settings file names nothing outside it
    override.write_text("rules:\n  - code: BD001\n    disabled: true\n", encoding="utf-8")
    (workspace["work"] / "brax-diff.toml").write_text(f'rules = "{override}"\n', encoding="utf-8")
    assert run(workspace, "--family", "dm_control", "--fail-on", "CRITICAL") == 0
    data = json.loads((workspace["work"] / "reports" / "dm_control.json").read_text())
    batch = next(d for d in data["differences"] if d["key"] == "transitions_per_update")
    assert batch["rule"] is None and batch["severity"] == "MINOR"
    assert data["rules"]["origin"] == "mine.yaml"  # relative to the root: no local path in the report


def test_env_scope_and_stdout(workspace, capsys):
    assert run(workspace, "--env", "BallInCup") == 0
    md = (workspace["work"] / "reports" / "BallInCup.md").read_text()
    assert md.startswith("# Brax PPO vs SLM-Lab PPO: BallInCup\n")
    assert "environment `BallInCup` (family `dm_control`)" in md
    assert "## Per-environment matrix" not in md
    capsys.readouterr()
    assert run(workspace, "--family", "dm_control", "--format", "json", "--output", "-") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["matrix"]["columns"] == ["discount"]  # only BallInCup's discount varies
    assert [u["key"] for u in data["matrix"]["uniform"]][:2] == ["unrolls_per_update", "transitions_per_update"]
    ball = next(r for r in data["matrix"]["rows"] if r["env"] == "BallInCup")
    assert ball["cells"]["discount"]["severity"] == "CRITICAL"


def test_single_file_output_and_format(workspace):
    assert run(workspace, "--family", "locomotion", "--format", "md", "--output", "out/loco.md") == 0
    assert sorted(p.name for p in (workspace["work"] / "out").iterdir()) == ["loco.md"]


def test_a_variant_report_has_its_own_files_and_leaves_the_family_report_alone(workspace, capsys):
    assert run(workspace, "--family", "dm_control") == 0
    reports = workspace["work"] / "reports"
    family = snapshot_files(reports)
    assert run(workspace, "--family", "dm_control", "--variant", "ppo_playground_loco") == 0
    assert "wrote reports/dm_control.ppo_playground_loco.md" in capsys.readouterr().err
    files = snapshot_files(reports)
    assert sorted(files) == ["dm_control.json", "dm_control.md", "dm_control.ppo_playground_loco.json",
                             "dm_control.ppo_playground_loco.md"]
    assert {name: files[name] for name in family} == family  # the default run's report, byte for byte
    data = json.loads(files["dm_control.ppo_playground_loco.json"])
    assert data["scope"]["variant"] == "ppo_playground_loco" and data["changes"] is None  # its own history
    assert "SLM-Lab variant `ppo_playground_loco`" in files["dm_control.ppo_playground_loco.md"].decode()
    # --check compares each with its own file; a default run still writes only dm_control.md/.json.
    assert run(workspace, "--family", "dm_control", "--variant", "ppo_playground_loco", "--check") == 0
    assert run(workspace, "--family", "dm_control", "--check") == 0
    assert run(workspace, "--env", "BallInCup", "--variant", "ppo_playground_loco", "--format", "md") == 0
    assert (reports / "BallInCup.ppo_playground_loco.md").is_file() and not (reports / "BallInCup.md").exists()


@pytest.mark.parametrize("args, message", [
    (["--family", "dm_control", "--variant", "../x"], "--variant '../x' cannot name a report file"),
    (["--family", "dm_control", "--env", "BallInCup"], "--family and --env exclude each other"),
    (["--family", "atari"], "unknown family 'atari' (families: dm_control, locomotion)"),
    (["--env", "Pong"], "unknown environment 'Pong'"),
    (["--output", "one.md"], "several families need a directory"),
    (["--format", "html"], "unknown --format 'html'"),
    (["--brax", "no-such-ref"], "brax: cannot resolve ref 'no-such-ref'"),
    (["--family", "dm_control", "--variant", "nope"], "variant 'nope' not in"),
    (["--previous", "x.json"], "--previous needs one scope"),
    (["--set", "max_frame"], "--set 'max_frame': expected KEY=VALUE"),
])
def test_bad_input_exits_2_with_one_line(workspace, capsys, args, message):
    assert run(workspace, *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (workspace["work"] / "reports").exists()


def test_rules_command_formats(capsys):
    assert main(["rules", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["code"] for r in data["rules"]][:2] == ["BD001", "BD002"]
    assert data["rules"][0]["keys"] == ["transitions_per_update", "unrolls_per_update"]
    assert main(["rules", "--format", "md"]) == 0
    assert capsys.readouterr().out == render_rules_markdown(load_rules())
    assert main(["rules"]) == 0
    assert "BD032" in capsys.readouterr().out
    assert main(["rules", "--format", "yaml"]) == 2


def test_missing_extractors_are_a_clear_error(workspace, monkeypatch, capsys):
    monkeypatch.undo()
    monkeypatch.chdir(workspace["work"])
    monkeypatch.setitem(__import__("sys").modules, "brax_diff.extractors.brax.extractor", None)
    assert run(workspace) == 2
    assert "error: the extractors cannot be imported" in capsys.readouterr().err


def test_verification_verdicts_join_the_report_with_plot_links(workspace, capsys):
    pytest.importorskip("scipy", reason="the verdicts need the verify extra's statistics")
    from verify_fixtures import write_synthetic

    verify_dir = workspace["work"] / "runs"
    path = write_synthetic(verify_dir)
    assert run(workspace, "--family", "dm_control", "--verification", str(path)) == 0
    text = (workspace["work"] / "reports" / "dm_control.md").read_text(encoding="utf-8")
    assert "## Verification" in text and "| Fix | Verification |" in text
    section = text[text.index("## Verification"):text.index("## Recommended order")]
    # it leads with what may be concluded and what not, before the protocol and the tables
    assert section.index("**What these runs may conclude.**") < section.index("**What they may not.**") \
        < section.index("Short PPO trainings")
    assert "\n- No stand-in ran (`--arms gap,stand_in` runs it)" in section
    assert "| Environment | baseline | all_fixes | reference |\n| --- | ---: | ---: | ---: |\n" \
           "| CartpoleBalance | 220 (0/10) | 658 (0/10) | 770 (2/10) |\n" in section
    assert "([verify.json](../runs/verify.json))" in text
    assert "[inconclusive](../runs/plots/CartpoleBalance-loo-clip_epsilon.png) at 10 seeds, loo Δ" in text
    data = json.loads((workspace["work"] / "reports" / "dm_control.json").read_text())
    assert data["verification"]["keys"]["clip_epsilon"]["verdict"] == "inconclusive"
    assert data["verification"]["gap"]["closed_fraction"] == pytest.approx(438.0 / 550.0)

    for bad, why in (("[]", "not an object"), ('{"verdicts": {"k": {}}}', "brax-diff < 0.2"),
                     ('{"verdicts": [], "runs": {}}', "runs must be a list of objects"),
                     ('{"verdicts": [{"arm": 1}], "runs": []}', "a verdict without arm or verdict")):
        (verify_dir / "bad.json").write_text(bad, encoding="utf-8")
        capsys.readouterr()
        assert run(workspace, "--family", "dm_control", "--verification", str(verify_dir / "bad.json")) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --verification") and why in err and err.count("\n") == 1


def test_strict_fails_on_an_unknown_key_and_the_report_shows_it_as_unknown(workspace, capsys):
    assert run(workspace, "--family", "dm_control", "--strict") == 0
    add_commit(workspace["repos"] / "brax", {"params.txt": 'clip_epsilon = 0.3\nunknown = ["value_loss_coef"]\n'})
    capsys.readouterr()
    assert run(workspace, "--family", "dm_control") == 0  # without --strict an unknown is reported, not fatal
    data = json.loads((workspace["work"] / "reports" / "dm_control.json").read_text())
    cell = next(d for d in data["differences"] if d["key"] == "value_loss_coef")
    assert (cell["status"], cell["severity"], cell["fix"]) == ("unknown", None, None)
    assert data["summary"]["unknown"] == 1
    md = (workspace["work"] / "reports" / "dm_control.md").read_text()
    assert "| unknown | 1 | [`value_loss_coef`]" in md and "**unknown**" in md
    assert run(workspace, "--family", "dm_control", "--strict") == 1
    assert "--strict: 1 compared key(s) unknown: dm_control: value_loss_coef" in capsys.readouterr().err
