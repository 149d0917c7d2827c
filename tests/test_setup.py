"""The training setup, both sides, per environment: episode length, action repeat, budget,
critic inputs, physics backend; and the environments whose scores cannot be compared.

Fixture repositories in upstream's shape (hand-written): Playground's configs defer
``episode_length`` / ``action_repeat`` to each environment's ``default_config()`` (written in
three shapes), SLM-Lab's env builder wraps every environment with its own defaults."""

from __future__ import annotations

import json

import pytest

import brax_fixtures as bfx
import slm_fixtures as sfx
from brax_diff.cli import main
from brax_diff.extractors.brax import BraxExtractor
from brax_diff.extractors.slm import SlmExtractor
from brax_diff.sources import Repository
from gitfixture import make_repo
from upstream_repos import MAPPING, MAPPING_FILE, playground_files

# Brax's train() of today takes the setup as parameters.
TRAIN = bfx.TRAIN_OLD.replace("    num_envs: int = 4,\n", "    num_envs: int = 4,\n    episode_length: int = 1000,\n"
                                                        "    action_repeat: int = 1,\n")
assert TRAIN != bfx.TRAIN_OLD

# Environments' own configs: a literal create(), a config changed after it is made, one from a helper.
PICK = '''
"""Fixture arm task."""
from ml_collections import config_dict


def default_config() -> config_dict.ConfigDict:
  return config_dict.create(
      ctrl_dt=0.02,
      episode_length=150,
      action_repeat=1,
      impl="warp",
  )


class PandaPickCube:
  pass
'''
PICK_CARTESIAN = '''
"""Fixture arm task, configured after it is made."""
from ml_collections import config_dict


def default_config() -> config_dict.ConfigDict:
  config = config_dict.create(ctrl_dt=0.02, episode_length=1000, action_repeat=1)
  config.episode_length = 200
  config.action_repeat = 2
  return config


class PandaPickCubeCartesian:
  pass
'''
MANIP_REGISTRY = '''
"""Fixture registry of an arm family, with its configs."""
from ml_collections import config_dict

from mujoco_playground._src.manipulation import pick, pick_cartesian

_envs = {
    "PandaPickCube": pick.PandaPickCube,
    "PandaPickCubeCartesian": pick_cartesian.PandaPickCubeCartesian,
}

_cfgs = {
    "PandaPickCube": pick.default_config,
    "PandaPickCubeCartesian": pick_cartesian.default_config,
}


def get_default_config(env_name: str) -> config_dict.ConfigDict:
  if env_name not in _cfgs:
    raise ValueError(f"Env {env_name} not found")
  return _cfgs[env_name]()
'''
MANIP_PARAMS = '''
"""Fixture tuned configs for an arm family."""
from ml_collections import config_dict

from mujoco_playground._src import manipulation


def brax_ppo_config(env_name: str, impl=None) -> config_dict.ConfigDict:
  env_config = manipulation.get_default_config(env_name)
  rl_config = config_dict.create(
      num_timesteps=5_000_000,
      episode_length=env_config.episode_length,
      action_repeat=env_config.action_repeat,
      normalize_observations=True,
      network_factory=config_dict.create(
          policy_hidden_layer_sizes=(32, 32),
          policy_obs_key="state",
          value_obs_key="state",
      ),
  )
  if env_name == "PandaPickCubeCartesian":
    rl_config.num_timesteps = 20_000_000
  return rl_config
'''
GO1 = '''
"""Fixture legged task: its config comes from a helper, and reads a file for one field."""
import json

from ml_collections import config_dict


def _base() -> config_dict.ConfigDict:
  return config_dict.create(ctrl_dt=0.02, episode_length=1000, action_repeat=1)


def default_config() -> config_dict.ConfigDict:
  config = _base()
  config.impl = json.load(open("impl.json"))["impl"]
  return config


class Joystick:
  pass
'''
LOCO_REGISTRY = '''
"""Fixture registry of a legged family, with its configs."""
from mujoco_playground._src.locomotion.go1 import joystick

_envs = {"Go1JoystickFlatTerrain": joystick.Joystick}
_cfgs = {"Go1JoystickFlatTerrain": joystick.default_config}


def get_default_config(env_name):
  return _cfgs[env_name]()
'''
LOCO_PARAMS = '''
"""Fixture tuned configs for a legged family: a privileged critic."""
from ml_collections import config_dict

from mujoco_playground._src import locomotion


def brax_ppo_config(env_name: str, impl=None) -> config_dict.ConfigDict:
  env_config = locomotion.get_default_config(env_name)
  rl_config = config_dict.create(
      num_timesteps=100_000_000,
      episode_length=env_config.episode_length,
      network_factory=config_dict.create(policy_obs_key="state", value_obs_key="state"),
  )
  if env_name == "Go1JoystickFlatTerrain":
    rl_config.network_factory = config_dict.create(
        policy_obs_key="state",
        value_obs_key="privileged_state",
    )
  return rl_config
'''
PLAYGROUND = {
    bfx.MANIP_PARAMS: MANIP_PARAMS, bfx.MANIP_REGISTRY: MANIP_REGISTRY, bfx.LOCO_PARAMS: LOCO_PARAMS,
    bfx.LOCO_REGISTRY: LOCO_REGISTRY,
    "mujoco_playground/_src/manipulation/pick.py": PICK,
    "mujoco_playground/_src/manipulation/pick_cartesian.py": PICK_CARTESIAN,
    "mujoco_playground/_src/locomotion/go1/joystick.py": GO1,
}

# SLM-Lab's env builder (the fixture's, upstream's shape): one episode length for all, an
# action-repeat table, Warp forced where the env's config has an impl, the policy's observation
# group for both networks; here the table names an environment of this fixture.
SLM_PLAYGROUND = sfx.PLAYGROUND.replace('"PendulumSwingup": 4', '"PandaPickCubeCartesian": 4')
assert SLM_PLAYGROUND != sfx.PLAYGROUND
PLAYGROUND_ENV = "slm_lab/env/playground.py"


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("setup")
    make_repo(root / "brax", [{**bfx.BRAX_OLD, bfx.TRAIN: TRAIN}], origin="https://github.com/google/brax.git")
    make_repo(root / "playground", [{**playground_files(), **PLAYGROUND}],
              origin="https://github.com/google-deepmind/mujoco_playground.git")
    make_repo(root / "slm", [{**sfx.repo_files(), MAPPING_FILE: MAPPING, PLAYGROUND_ENV: SLM_PLAYGROUND}],
              origin="https://github.com/kengz/SLM-Lab.git", branch="master")
    return {name: root / name for name in ("brax", "playground", "slm")}


def snapshot(repos, side: str):
    return Repository(repos[side], side).resolve("HEAD")


def brax(repos) -> BraxExtractor:
    return BraxExtractor(snapshot(repos, "brax"), snapshot(repos, "playground"))


def where(fact) -> list[tuple[str, int]]:
    return sorted((p.path.rsplit("/", 1)[-1], p.line) for p in fact.provenance)


SETUP = ("episode_length", "action_repeat", "training_env_steps", "policy_obs_keys", "value_obs_keys",
         "physics_backend")


def values(extraction) -> dict:
    return {key: extraction.facts[key].value for key in SETUP}


def test_brax_reads_each_environments_own_config(repos):
    extractor = brax(repos)
    pick = extractor.env("PandaPickCube")
    assert values(pick) == {"episode_length": 150, "action_repeat": 1, "training_env_steps": 5_000_000,
                            "policy_obs_keys": "state", "value_obs_keys": "state", "physics_backend": "warp"}
    # The config's line and the environment's own line.
    assert where(pick.facts["episode_length"]) == [("manipulation_params.py", bfx.line_of(MANIP_PARAMS,
                                                                                          "episode_length=env")),
                                                   ("pick.py", bfx.line_of(PICK, "episode_length=150"))]
    assert where(pick.facts["physics_backend"]) == [("pick.py", bfx.line_of(PICK, 'impl="warp"'))]
    cartesian = extractor.env("PandaPickCubeCartesian")  # set after the config is made
    assert (cartesian.value("episode_length"), cartesian.value("action_repeat")) == (200, 2)
    assert ("pick_cartesian.py", bfx.line_of(PICK_CARTESIAN, "config.episode_length = 200")) in \
        where(cartesian.facts["episode_length"])
    assert cartesian.value("training_env_steps") == 20_000_000
    assert cartesian.facts["physics_backend"].is_unknown  # this config has no impl field: said so, no default
    assert "has no field 'impl'" in cartesian.facts["physics_backend"].unknown
    assert any(f.key == "physics_backend" for f in cartesian.findings)


def test_a_config_the_engine_cannot_read_is_an_explained_unknown(repos):
    go1 = brax(repos).env("Go1JoystickFlatTerrain")
    assert go1.value("episode_length") == 1000  # from the helper's config
    assert go1.value("value_obs_keys") == "privileged_state" and go1.value("policy_obs_keys") == "state"
    fact = go1.facts["physics_backend"]
    assert fact.value is None and "get_default_config('Go1JoystickFlatTerrain')" in fact.unknown
    assert "impl" in fact.unknown and "not a constant" in fact.unknown


def test_a_family_scope_leaves_per_environment_keys_to_the_environments(repos):
    family = brax(repos).family("manipulation")
    for key in ("episode_length", "action_repeat"):
        assert family.facts[key].unknown == f"{key}: set per environment from get_default_config(env_name).{key}"
    assert family.value("training_env_steps") == 5_000_000
    assert family.unknown_keys() == []  # nothing the code did not let us read
    assert not any(f.kind == "pattern_not_found" for f in family.findings)


def test_slm_setup_is_what_its_env_builder_passes(repos):
    extractor = SlmExtractor(snapshot(repos, "slm"), sfx.SPEC_PATH, mapping=None,
                             playground=snapshot(repos, "playground"))
    cartesian = extractor.setup("ppo_fx", "PandaPickCubeCartesian")
    assert {k: cartesian.facts[k].value for k in SETUP if k != "training_env_steps"} == {
        "episode_length": 1000, "action_repeat": 4, "policy_obs_keys": "state", "value_obs_keys": "state",
        "physics_backend": None}
    # What wrap_for_brax_training receives: the default in __init__'s signature, the table's entry.
    assert ("playground.py", bfx.line_of(SLM_PLAYGROUND, "episode_length=1000, device")) in \
        where(cartesian.facts["episode_length"])
    assert ("playground.py", bfx.line_of(SLM_PLAYGROUND, '"PandaPickCubeCartesian": 4')) in \
        where(cartesian.facts["action_repeat"])
    # No impl in this env's config: SLM-Lab forces none, and says the env's own config decides.
    assert "forces no impl" in cartesian.facts["physics_backend"].unknown
    pick = extractor.setup("ppo_fx", "PandaPickCube")
    assert pick.facts["action_repeat"].value == 1 and pick.facts["physics_backend"].value == "warp"
    assert pick.facts["physics_backend"].note == "registry.load(config_overrides={'impl': 'warp'})"


def test_without_playground_a_conditional_backend_is_unknown_not_guessed(repos):
    extractor = SlmExtractor(snapshot(repos, "slm"), sfx.SPEC_PATH)
    pick = extractor.setup("ppo_fx", "PandaPickCube")
    assert pick.facts["physics_backend"].value is None
    assert "only when the env's config has an impl field" in pick.facts["physics_backend"].unknown
    assert pick.facts["episode_length"].value == 1000


def test_slm_budget_is_max_frame_from_the_command_line(repos):
    slm = snapshot(repos, "slm")
    unset = SlmExtractor(slm, sfx.SPEC_PATH).variant("ppo_fx").facts["training_env_steps"]
    assert unset.value is None and "give it with --set max_frame=N" in unset.unknown
    given = SlmExtractor(slm, sfx.SPEC_PATH, sets={"max_frame": "3000000"}).variant("ppo_fx")
    assert given.value("training_env_steps") == 3_000_000


def report(repos, capsys, *args) -> dict:
    flags = ["--brax-repo", str(repos["brax"]), "--playground-repo", str(repos["playground"]),
             "--slm-repo", str(repos["slm"]), "--mapping", str(repos["slm"] / MAPPING_FILE)]
    assert main(["report", *flags, "--format", "json", "--output", "-", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_matrix_marks_scores_that_cannot_be_compared(repos, capsys):
    model = report(repos, capsys, "--family", "manipulation")
    matrix = model["matrix"]
    assert matrix["incomparable"] == [
        {"env": "PandaPickCube", "variant": "ppo_fx_small",
         "why": [{"key": "episode_length", "brax": 150, "slm": 1000, "rule": "BD035"}]},
        {"env": "PandaPickCubeCartesian", "variant": "ppo_fx_small",
         "why": [{"key": "episode_length", "brax": 200, "slm": 1000, "rule": "BD035"},
                 {"key": "action_repeat", "brax": 2, "slm": 4, "rule": "BD036"}]},
    ]
    cells = {row["env"]: row["cells"] for row in matrix["rows"]}
    assert cells["PandaPickCube"]["episode_length"] == {"brax": 150, "slm": 1000, "status": "differs",
                                                        "severity": "CRITICAL"}
    # The family's own comparison leaves what each environment decides to the matrix.
    keys = {d["key"] for d in model["differences"]}
    assert not keys & {"episode_length", "action_repeat", "physics_backend", "value_obs_keys"}
    assert "training_env_steps" in keys


def test_the_markdown_says_why_and_names_the_rule(repos, capsys, tmp_path):
    flags = ["--brax-repo", str(repos["brax"]), "--playground-repo", str(repos["playground"]),
             "--slm-repo", str(repos["slm"]), "--mapping", str(repos["slm"] / MAPPING_FILE)]
    assert main(["report", *flags, "--family", "manipulation", "--format", "md", "--output", "-"]) == 0
    text = capsys.readouterr().out
    section = text.split("### 🔴 Scores not comparable", 1)[1].split("\n| Environment | Variant | `", 1)[0]
    assert "2 of 2 environments run with another episode length or action repeat" in section
    assert ("| PandaPickCubeCartesian | ppo_fx_small | `episode_length` Brax 200 vs SLM-Lab 1000; "
            "`action_repeat` Brax 2 vs SLM-Lab 4 | BD035, BD036 |") in section


def test_an_environment_report_shows_the_privileged_critic(repos, capsys):
    model = report(repos, capsys, "--env", "Go1JoystickFlatTerrain")
    rows = {d["key"]: d for d in model["differences"]}
    critic = rows["value_obs_keys"]
    assert (critic["brax"]["value"], critic["slm"]["value"]) == ("privileged_state", "state")
    assert critic["severity"] == "IMPORTANT" and critic["rule"] == "BD037"
    assert "obs['privileged_state']" in critic["fix"]["text"]
    assert rows["policy_obs_keys"]["status"] == "match"
    assert rows["episode_length"]["status"] == "match"
    assert model["slm"]["scope"]["env"] == "Go1JoystickFlatTerrain"
