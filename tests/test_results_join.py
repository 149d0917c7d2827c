"""The results join (`report --results`, :mod:`brax_diff.report.published`): each published row
against the variant it names at the code the results came from, for its own budget, in Brax's
unit; rows that cannot be joined listed with why; and the ranking that reads each difference by
direction (:mod:`brax_diff.compare.ranking`). Fixture repositories: hand-written, upstream's shape."""

from __future__ import annotations

import json

import pytest

from brax_diff.cli import main
from brax_diff.compare.ranking import feature, features, rank
from gitfixture import _git, add_commit
from test_setup import SLM_SPEC, repos  # noqa: F401 (the fixture repositories)
import slm_fixtures as sfx
from upstream_repos import MAPPING_FILE


def cell(brax, other, severity="IMPORTANT", status="differs"):
    return {"brax": brax, "slm": other, "status": status, "severity": severity}


def test_a_difference_is_read_by_direction_or_by_its_values():
    assert feature("num_envs", cell(8192, 2048))["id"] == "num_envs:brax_larger"
    assert feature("num_envs", cell(1024, 2048))["id"] == "num_envs:other_larger"
    assert feature("truncation", cell("bootstrap", "terminal")) == {
        "id": 'truncation=["bootstrap", "terminal"]', "key": "truncation", "direction": "values",
        "brax": "bootstrap", "other": "terminal"}
    assert feature("num_envs", cell(1, 1, None, "match")) is None
    assert feature("num_envs", cell(None, 1, None, "unknown")) is None
    assert feature("num_envs", cell(1, 2, None)) is None  # no rule classifies it: no feature
    assert feature("flag", cell(True, False))["direction"] == "values"  # a bool is no number
    # A context key (the environment's own code) is a feature where both sides agree: its shared value.
    assert feature("reward_floor", cell(0.0, 0.0, None, "match")) == {
        "id": "reward_floor==0.0", "key": "reward_floor", "direction": "shared", "value": 0.0}
    assert feature("env_action_clip", cell("none", "clip"))["id"] == 'env_action_clip=["none", "clip"]'
    assert feature("reward_floor", cell(None, 0.0, None, "unknown")) is None
    # Keys that make an environment's score incomparable are not counted for it.
    assert set(features({"episode_length": cell(1000, 150), "num_envs": cell(2, 1)}, ["episode_length"])) == {
        "num_envs:brax_larger"}


def test_the_ranking_counts_missing_against_passing_and_keeps_direction_apart():
    def env(name, miss, **cells):
        return {"env": name, "miss": miss, "features": features(cells)}

    envs = [env("A", True, num_envs=cell(8, 2), lr=cell(1, 2, "MINOR")),
            env("B", True, num_envs=cell(8, 2), lr=cell(1, 2, "MINOR")),
            env("C", True, num_envs=cell(1, 2, "MINOR")),
            env("D", False, num_envs=cell(1, 2), lr=cell(1, 2, "MINOR")),
            env("E", False, lr=cell(1, 2, "CRITICAL")),
            env("F", None, num_envs=cell(8, 2))]  # no verdict: counted nowhere
    ranked = rank(envs)
    assert (ranked["missing"], ranked["passing"]) == (["A", "B", "C"], ["D", "E"])
    singles = {s["id"]: s for s in ranked["singles"]}
    more = singles["num_envs:brax_larger"]
    assert (more["missing"], more["passing"], more["separation"], more["missing_envs"]) == (2, 0, round(2 / 3, 4),
                                                                                           ["A", "B"])
    less = singles["num_envs:other_larger"]  # the other direction is another feature, not the same one
    assert (less["missing"], less["passing"], less["separation"], less["severity"]) == (1, 1, round(1 / 3 - 1 / 2, 4),
                                                                                       "IMPORTANT")
    lr = singles["lr:other_larger"]
    assert (lr["missing"], lr["passing"], lr["separation"], lr["severity"]) == (2, 2, round(2 / 3 - 1, 4), "CRITICAL")
    assert ranked["singles"][0]["id"] == "num_envs:brax_larger"  # most separating first
    # A pair is listed only when it separates better than both its parts (here none does).
    assert ranked["pairs"] == []
    pair_envs = [env("A", True, x=cell(2, 1), y=cell(2, 1)), env("B", True, x=cell(2, 1), y=cell(2, 1)),
                 env("C", False, x=cell(2, 1)), env("D", False, y=cell(2, 1)), env("E", False)]
    pairs = rank(pair_envs)["pairs"]
    assert [(p["parts"], p["missing"], p["passing"], p["separation"]) for p in pairs] == [
        (["x:brax_larger", "y:brax_larger"], 2, 0, 1.0)]


# The published table, in BENCHMARKS.md's later shape; targets from an earlier version.
SCORES = """
### Phase 5: Playground

**Settings**: max_frame 4M | num_envs 2048 | max_session 4

| ENV | MA | SPEC_NAME | HF Data |
|-----|-----|-----------|---------|
| playground/PandaPickCube | 80.0 | ppo_fx_small | [run_pick](https://example.org/p) |
| playground/PandaPickCubeCartesian | 9.0 | ppo_fx | [run_cartesian](https://example.org/c) |
| playground/CartpoleBalance | 500.0 | ppo_gone | [run_cartpole](https://example.org/x) |
| playground/Pandapickcubeorientation | 1.0 | ppo_fx | - |
| playground/BallInCup | - | ppo_fx | - |
"""
TARGETS = """
| ENV | Algorithm | Status | MA | SPEC_NAME | HF Data | Target (ref) | Frames |
|-----|-----------|--------|-----|-----------|---------|--------------|--------|
| playground/PandaPickCube | PPO | ❌ | 80.0 | ppo_fx_small | [run_pick](https://example.org/p) | 100 | 2M |
| playground/PandaPickCubeCartesian | PPO | ✅ | 8.0 | ppo_fx | [older_run](https://example.org/o) | 10 | 3M |
"""


def flags(repos) -> list[str]:  # noqa: F811
    return ["--brax-repo", str(repos["brax"]), "--playground-repo", str(repos["playground"]),
            "--slm-repo", str(repos["slm"]), "--mapping", str(repos["slm"] / MAPPING_FILE)]


@pytest.fixture()
def published(repos):  # noqa: F811
    """Targets at one commit, the scores at the next, then the spec changes (ppo_fx's gamma) after
    the runs: (targets commit, scores commit)."""
    slm = repos["slm"]
    targets = add_commit(slm, {"docs/BENCHMARKS.md": TARGETS}, message="targets")
    scores = add_commit(slm, {"docs/BENCHMARKS.md": SCORES}, message="scores")
    add_commit(slm, {sfx.SPEC_PATH: SLM_SPEC.replace("      gamma: 0.995\n", "      gamma: 0.5\n")},
               message="a later spec")
    yield targets, scores
    _git(slm, "reset", "-q", "--hard", "HEAD~3")


def results(repos, capsys, *args) -> dict:  # noqa: F811
    code = main(["report", *flags(repos), "--family", "all", *args, "--format", "json", "--output", "-"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_each_row_is_joined_with_its_variant_at_the_results_code_and_its_own_budget(repos, published, capsys):
    targets, scores = published
    model = results(repos, capsys, "--results", f"slm@{scores}", "--targets-ref", targets)
    assert model["kind"] == "results" and model["code"]["commit"] == scores
    rows = {r["env"]: r for r in model["rows"]}
    assert sorted(rows) == ["PandaPickCube", "PandaPickCubeCartesian"]
    pick, cartesian = rows["PandaPickCube"], rows["PandaPickCubeCartesian"]
    # The variant the row names, not the one the mapping gives (ppo_fx_small for manipulation).
    assert (pick["variant"], pick["compared_variant"]) == ("ppo_fx_small", None)
    assert (cartesian["variant"], cartesian["compared_variant"]) == ("ppo_fx", "ppo_fx_small")
    # Read at the results' code: ppo_fx's gamma before the later commit changed it.
    assert cartesian["cells"]["discount"]["slm"] == 0.995
    # The budget: the targets table's Frames cell where it names the same run, else the Settings line;
    # in Brax's unit (SLM-Lab's frames are agent steps: x its action repeat, 4 for Cartesian).
    assert (pick["budget"]["slm_frames"], pick["budget"]["slm_frames_from"]) == (2_000_000, "Frames column")
    assert pick["budget"]["slm"]["value"] == 2_000_000
    assert (cartesian["budget"]["slm_frames"], cartesian["budget"]["slm_frames_from"]) == (4_000_000, "Settings line")
    assert cartesian["budget"]["slm"]["value"] == 16_000_000 and cartesian["budget"]["slm_action_repeat"] == 4
    # Brax's: what train() runs, with the request beside it.
    assert (pick["budget"]["brax"]["value"], pick["budget"]["brax"]["declared"]) == (4 * 10 * 245 * 512, 5_000_000)
    # SLM-Lab's own status only for the run it names; the tool's reading from the target.
    assert (pick["own_status"], pick["status"], pick["ratio"], pick["miss"]) == ("fail", "near", 0.8, True)
    assert (cartesian["own_status"], cartesian["status"], cartesian["miss"]) == (None, "near", True)  # another run
    assert not pick["comparable"] and pick["incomparable"][0]["key"] == "episode_length"
    # Rows that cannot be joined: listed with why, never dropped.
    assert {u["env"]: u["why"] for u in model["unjoined"]} == {
        "CartpoleBalance": "variant ppo_gone is not defined in slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml "
                           "at the results' code",
        "Pandapickcubeorientation": "not a registered Playground environment",
        "BallInCup": "the row has no score"}
    assert "Go1JoystickFlatTerrain" in model["not_published"]
    # The code a user names instead (--results-code): the later spec's gamma.
    later = results(repos, capsys, "--results", f"slm@{scores}", "--targets-ref", targets, "--results-code", "HEAD")
    assert {r["env"]: r for r in later["rows"]}["PandaPickCubeCartesian"]["cells"]["discount"]["slm"] == 0.5


def test_the_markdown_answers_first(repos, published, capsys):
    targets, scores = published
    assert main(["report", *flags(repos), "--family", "all", "--results", f"slm@{scores}", "--targets-ref", targets,
                 "--format", "md", "--output", "-"]) == 0
    text = capsys.readouterr().out
    answer = text.split("## The answer", 1)[1].split("## Sources", 1)[0]
    assert "**2 of 2 environments miss their target**: PandaPickCube, PandaPickCubeCartesian." in answer
    assert "**Scores not comparable** (another episode length" in answer and "PandaPickCube" in answer
    assert text.index("## The answer") < text.index("## Every published row, joined") < text.index("## Rows not joined")
    assert "| CartpoleBalance |" in text.split("## Rows not joined", 1)[1]


def test_what_is_known_about_a_targets_origin_is_printed_with_its_source(repos, published, capsys, monkeypatch):
    from brax_diff.report import published as join_module

    shipped = join_module.target_notes()
    assert shipped["HumanoidRun"] == shipped["HumanoidWalk"] == shipped["HumanoidStand"]
    assert shipped["HumanoidRun"]["source"]["url"] == "https://github.com/google-deepmind/mujoco_playground/issues/171"
    assert "brax/training/learner.py" in shipped["HumanoidRun"]["text"]
    note = {"text": "Made by another script.", "source": {"title": "an issue", "url": "https://example.org/1"}}
    monkeypatch.setattr(join_module, "target_notes", lambda: {"PandaPickCube": note})
    targets, scores = published
    model = results(repos, capsys, "--results", f"slm@{scores}", "--targets-ref", targets)
    assert [r["target_note"] for r in model["rows"]] == [note, None]  # PandaPickCube, PandaPickCubeCartesian
    assert main(["report", *flags(repos), "--family", "all", "--results", f"slm@{scores}", "--targets-ref", targets,
                 "--format", "md", "--output", "-"]) == 0
    assert ("**Targets from other code**: PandaPickCube: Made by another script ([an issue](https://example.org/1))."
            in capsys.readouterr().out)


def test_results_options_are_checked_before_any_work(repos, published, capsys):  # noqa: F811
    targets, scores = published
    for args, message in (
            (["--family", "all"], "error: --family all is the cross-family join of published results: add --results\n"),
            (["--family", "manipulation", "--results", "slm"], "error: --results joins every family's environments "
             "in one report (results.md): drop --family, or give --family all for that report alone\n"),
            (["--results-code", "HEAD"], "error: --results-code names the code --results came from; add --results\n")):
        assert main(["report", *flags(repos), *args, "--output", "-", "--format", "json"]) == 2
        assert capsys.readouterr().err == message


def test_the_chance_of_a_split_is_fishers_exact_test_held_over_every_difference():
    from scipy.stats import fisher_exact

    from brax_diff.compare.ranking import adjusted, enrichment_p, tarone

    # 10 of 14 missing and 12 of 36 passing environments carry it: scipy's one-sided test agrees.
    expected = fisher_exact([[10, 4], [12, 24]], alternative="greater")[1]
    assert enrichment_p(10, 14, 22, 50) == pytest.approx(expected, rel=1e-12)
    assert enrichment_p(0, 14, 50, 50) == 1.0 and enrichment_p(14, 14, 50, 50) == 1.0  # carried by all: never
    # Tarone: tests that cannot reach the level (carried by every environment) do not dilute the others.
    assert tarone([1.0, 1.0, 1.0, 0.001]) == 1
    assert tarone([0.001] * 3 + [1.0]) == 3
    entries = [{"p": 0.004, "min_p": 0.0001}, {"p": 0.5, "min_p": 0.0001}, {"p": 1.0, "min_p": 1.0}]
    adjusted(entries)
    assert [(e["p_adjusted"], e["tests"]) for e in entries] == [(0.008, 2), (1.0, 2), (None, 2)]


def test_an_exact_zero_where_every_step_is_clipped_at_zero_is_a_collapse(repos, capsys):  # noqa: F811
    from test_setup import PICK

    pick_path = "mujoco_playground/_src/manipulation/pick.py"
    clipped = PICK.replace("  def _get_obs(self, data):\n", "  def step(self, state, action):\n"
                           "    reward = jp.clip(sum(state.values()), 0.0, 10000.0)\n    return reward\n\n"
                           "  def _get_obs(self, data):\n")
    assert clipped != PICK
    add_commit(repos["playground"], {pick_path: clipped}, message="floor the reward")
    table = ("| ENV | MA | SPEC_NAME | HF Data |\n|---|---|---|---|\n"
             "| playground/PandaPickCube | 0.0 | ppo_fx_small | - |\n"
             "| playground/PandaPickCubeCartesian | 0.0 | ppo_fx | - |\n")
    add_commit(repos["slm"], {"docs/BENCHMARKS.md": table}, message="zeros")
    try:
        model = results(repos, capsys, "--results", "slm")
        rows = {r["env"]: r for r in model["rows"]}
        pick, cartesian = rows["PandaPickCube"], rows["PandaPickCubeCartesian"]
        assert (pick["reward_floor"]["floor"], pick["collapse"]) == (0.0, True)
        assert pick["reward_floor"]["provenance"][0]["path"] == pick_path
        # No step of its own to read: unknown, and no collapse is claimed.
        assert cartesian["collapse"] is False and "is inherited" in cartesian["reward_floor"]["unknown"]
        assert main(["report", *flags(repos), "--family", "all", "--results", "slm", "--format", "md",
                     "--output", "-"]) == 0
        assert "**Collapsed, not under-tuned**: PandaPickCube ([manipulation/pick.py:" in capsys.readouterr().out
    finally:
        _git(repos["slm"], "reset", "-q", "--hard", "HEAD~1")
        _git(repos["playground"], "reset", "-q", "--hard", "HEAD~1")


def test_extract_slm_for_one_environment_gives_its_setup(repos, capsys):  # noqa: F811
    """`extract slm --env NAME`: the variant the mapping gives the env, with the setup its env
    builder makes (a variant alone leaves these to the environment)."""
    args = ["extract", "slm", "--repo", str(repos["slm"]), "--playground-repo", str(repos["playground"]),
            "--mapping", str(repos["slm"] / MAPPING_FILE), "--format", "json", "--set", "max_frame=1000"]
    assert main([*args, "--env", "PandaPickCubeCartesian"]) == 0
    extraction = json.loads(capsys.readouterr().out)  # one extraction: one object
    facts = extraction["facts"]
    assert extraction["scope"]["env"] == "PandaPickCubeCartesian" and extraction["scope"]["variant"] == "ppo_fx_small"
    assert (facts["episode_length"]["value"], facts["action_repeat"]["value"]) == (1000, 4)
    assert facts["training_env_steps"]["value"] == 4000  # 1,000 frames x the env's action repeat 4
    assert "playground" in extraction["sources"]
    # SLM-Lab's -s env=playground/NAME builds that environment: the same setup.
    assert main([*args, "--set", "env=playground/PandaPickCubeCartesian"]) == 0
    assert json.loads(capsys.readouterr().out)["facts"] == facts
    assert main([*args[:-2], "--playground-repo", str(repos["playground"])]) == 2  # --playground-repo needs --env
    assert capsys.readouterr().err == "error: --playground and --playground-repo give the env builder's Playground; add --env\n"
