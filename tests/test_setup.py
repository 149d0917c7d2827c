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
from brax_diff.extractors.brax.extractor import BraxExtractor
from brax_diff.extractors.slm.extractor import SlmExtractor
from brax_diff.sources.repository import Repository
from gitfixture import make_repo
from upstream_repos import MAPPING, MAPPING_FILE, playground_files

# Brax's train() of today takes the setup as parameters.
TRAIN = bfx.TRAIN_OLD.replace("    num_envs: int = 4,\n", "    num_envs: int = 4,\n    episode_length: int = 1000,\n"
                                                        "    action_repeat: int = 1,\n    num_evals: int = 1,\n"
                                                        "    num_resets_per_eval: int = 0,\n"
                                                        "    deterministic_eval: bool = False,\n")
assert TRAIN != bfx.TRAIN_OLD

# Environments' own configs: a literal create(), a config changed after it is made, one from a helper.
PICK = '''
"""Fixture arm task."""
import jax.numpy as jp
from ml_collections import config_dict
from mujoco import mjx

from mujoco_playground._src import mjx_env


def default_config() -> config_dict.ConfigDict:
  return config_dict.create(
      ctrl_dt=0.02,
      episode_length=150,
      action_repeat=1,
      impl="warp",
  )


class PandaPickCube(mjx_env.MjxEnv):
  """An array observation."""

  def __init__(self, config=default_config(), config_overrides=None):
    super().__init__(config, config_overrides=config_overrides)
    self._mjx_model = mjx.put_model(self._mj_model, impl=self._config.impl)

  def reset(self, rng):
    data = mjx.forward(self._mjx_model, mjx.make_data(self._mjx_model))
    obs = self._get_obs(data)
    return mjx_env.State(data, obs, jp.zeros(()), jp.zeros(()), {}, {"rng": rng})

  def _get_obs(self, data):
    return jp.concatenate([data.qpos, data.qvel])
'''
PICK_CARTESIAN = '''
"""Fixture arm task, configured after it is made."""
import jax.numpy as jp
from ml_collections import config_dict

from mujoco_playground._src import mjx_env


def default_config() -> config_dict.ConfigDict:
  config = config_dict.create(ctrl_dt=0.02, episode_length=1000, action_repeat=1, vision=False)
  config.episode_length = 200
  config.action_repeat = 2
  return config


class PandaPickCubeCartesian(mjx_env.MjxEnv):
  """An array observation, pixels in a dict with vision on."""

  def reset(self, rng):
    data = jp.zeros(3)
    obs = jp.concatenate([data, data])
    if self._config.vision:
      obs = {"pixels/view_0": jp.zeros((64, 64, 3))}
    return mjx_env.State(data, obs, jp.zeros(()), jp.zeros(()), {}, {})
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


def load(env_name, config=None, config_overrides=None):
  if env_name not in _envs:
    raise ValueError(f"Env {env_name} not found")
  config = config or get_default_config(env_name)
  return _envs[env_name](config=config, config_overrides=config_overrides)
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
      num_evals=5,
      num_resets_per_eval=10,
      normalize_observations=True,
      network_factory=config_dict.create(
          policy_hidden_layer_sizes=(32, 32),
          policy_obs_key="state",
          value_obs_key="state",
      ),
  )
  if env_name == "PandaPickCubeCartesian":
    rl_config.num_timesteps = 20_000_000
    rl_config.num_evals = 3
    rl_config.deterministic_eval = True
  return rl_config
'''
GO1 = '''
"""Fixture legged task: its config comes from a helper, and reads a file for one field."""
import json

import jax.numpy as jp
from ml_collections import config_dict

from mujoco_playground._src import mjx_env


def _base() -> config_dict.ConfigDict:
  return config_dict.create(ctrl_dt=0.02, episode_length=1000, action_repeat=1)


def default_config() -> config_dict.ConfigDict:
  config = _base()
  config.impl = json.load(open("impl.json"))["impl"]
  return config


class Joystick(mjx_env.MjxEnv):
  """A dict observation: the policy's state and the critic's privileged state."""

  def reset(self, rng):
    data = jp.zeros(3)
    info = {"rng": rng, "command": jp.zeros(3)}
    obs = self._get_obs(data, info)
    return mjx_env.State(data, obs, jp.zeros(()), jp.zeros(()), {}, info)

  def _get_obs(self, data, info):
    state = jp.hstack([data, info["command"]])
    privileged_state = jp.hstack([state, data])
    return {
        "state": state,
        "privileged_state": privileged_state,
    }
'''
LOCO_REGISTRY = '''
"""Fixture registry of a legged family, with its configs."""
from mujoco_playground._src.locomotion.go1 import joystick

_envs = {"Go1JoystickFlatTerrain": joystick.Joystick}
_cfgs = {"Go1JoystickFlatTerrain": joystick.default_config}


def get_default_config(env_name):
  return _cfgs[env_name]()


def load(env_name, config=None, config_overrides=None):
  config = config or get_default_config(env_name)
  return _envs[env_name](config=config, config_overrides=config_overrides)
'''
LOCO_PARAMS = '''
"""Fixture tuned configs for a legged family: a privileged critic, evaluations counted at run time."""
import jax
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
    rl_config.num_evals = jax.device_count()
    rl_config.network_factory = config_dict.create(
        policy_obs_key="state",
        value_obs_key="privileged_state",
    )
  return rl_config
'''
# Playground's base environment (its shape): the State a step returns, the config an env keeps.
MJX_ENV_PATH = "mujoco_playground/_src/mjx_env.py"
MJX_ENV = '''
"""Fixture base environment."""
from typing import Any, Dict

import jax
from flax import struct


@struct.dataclass
class State:
  data: Any
  obs: Any
  reward: jax.Array
  done: jax.Array
  metrics: Dict[str, jax.Array]
  info: Dict[str, Any]


class MjxEnv:
  def __init__(self, config, config_overrides=None):
    self._config = config.lock()
    if config_overrides:
      self._config.update_from_flattened_dict(config_overrides)


def make_data(model, impl=None):  # a backend choice, as Playground has had since MuJoCo Warp
  return model
'''
PLAYGROUND = {
    MJX_ENV_PATH: MJX_ENV, bfx.MANIP_PARAMS: MANIP_PARAMS, bfx.MANIP_REGISTRY: MANIP_REGISTRY, bfx.LOCO_PARAMS: LOCO_PARAMS,
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

CONTROL_PATH, CONTROL = sfx.CONTROL_PATH, sfx.CONTROL
SET_ATTRIBUTES = '    util.set_attr(env, env_spec, ["name", "max_t", "max_frame"])\n'
SLM_ENV_INIT = sfx.ENV_INIT.replace(SET_ATTRIBUTES, SET_ATTRIBUTES + (
    "    defaults = dict(eval_frequency=20000, log_frequency=5000)\n"
    "    util.set_attr(env, defaults)\n"
    '    util.set_attr(env, spec["meta"], ["eval_frequency", "log_frequency"])\n'))
# ppo_fx_small (the manipulation family's variant) asks for a separate eval env every 40,000 frames.
SMALL_META = "  meta: {max_session: 1}\n"
_head, _tail = sfx.SPEC.split("ppo_fx_small:\n", 1)
SLM_SPEC = _head + "ppo_fx_small:\n" + _tail.replace(
    SMALL_META, "  meta: {max_session: 1, rigorous_eval: 1, eval_frequency: 40000}\n", 1)
assert SLM_ENV_INIT != sfx.ENV_INIT and SLM_SPEC != sfx.SPEC
# The agent's act samples its action (upstream's policy_util.sample_action).
SLM_POLICY_UTIL = sfx.POLICY_UTIL + '''

def sample_action(ActionPD, pdparam):
    action_pd = init_action_pd(ActionPD, pdparam)
    action = action_pd.sample()
    return action
'''
POLICY_UTIL_PATH = "slm_lab/agent/algorithm/policy_util.py"


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("setup")
    make_repo(root / "brax", [{**bfx.BRAX_OLD, bfx.TRAIN: TRAIN}], origin="https://github.com/google/brax.git")
    make_repo(root / "playground", [{**playground_files(), **PLAYGROUND}],
              origin="https://github.com/google-deepmind/mujoco_playground.git")
    make_repo(root / "slm", [{**sfx.repo_files(), MAPPING_FILE: MAPPING, PLAYGROUND_ENV: SLM_PLAYGROUND,
                              CONTROL_PATH: CONTROL, "slm_lab/env/__init__.py": SLM_ENV_INIT,
                              sfx.SPEC_PATH: SLM_SPEC, POLICY_UTIL_PATH: SLM_POLICY_UTIL}],
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
    # What train() runs: 5 M asked, 4 epochs x 10 reset epochs x ceil(5e6 / (4 * 10 * 512)) = 245 steps of 512.
    assert values(pick) == {"episode_length": 150, "action_repeat": 1, "training_env_steps": 4 * 10 * 245 * 512,
                            "policy_obs_keys": "state", "value_obs_keys": "state", "physics_backend": "warp"}
    assert pick.facts["training_env_steps"].declared == 5_000_000  # the request, kept beside it
    # The config's line and the environment's own line.
    assert where(pick.facts["episode_length"]) == [("manipulation_params.py", bfx.line_of(MANIP_PARAMS,
                                                                                          "episode_length=env")),
                                                   ("pick.py", bfx.line_of(PICK, "episode_length=150"))]
    assert where(pick.facts["physics_backend"]) == [("pick.py", bfx.line_of(PICK, 'impl="warp"'))]
    cartesian = extractor.env("PandaPickCubeCartesian")  # set after the config is made
    assert (cartesian.value("episode_length"), cartesian.value("action_repeat")) == (200, 2)
    assert ("pick_cartesian.py", bfx.line_of(PICK_CARTESIAN, "config.episode_length = 200")) in \
        where(cartesian.facts["episode_length"])
    assert cartesian.value("training_env_steps") == 2 * 10 * 977 * 1024  # 20 M asked, action repeat 2 counted
    assert cartesian.facts["physics_backend"].is_unknown  # this config has no impl field: said so, no default
    assert "has no field 'impl'" in cartesian.facts["physics_backend"].unknown
    assert any(f.key == "physics_backend" for f in cartesian.findings)


def test_no_impl_field_where_playground_offers_no_backend_choice_is_mjx_jax(tmp_path):
    """Before MuJoCo Warp, Playground's mjx_env.py named no impl: MJX's JAX implementation was the
    only one. With an impl anywhere in it, a config without the field stays unknown."""
    def cartesian(mjx_env: str):
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        make_repo(root / "brax", [{**bfx.BRAX_OLD, bfx.TRAIN: TRAIN}])
        make_repo(root / "pg", [{**playground_files(), **PLAYGROUND, "mujoco_playground/_src/mjx_env.py": mjx_env}])
        extractor = BraxExtractor(Repository(root / "brax", "brax").resolve("HEAD"),
                                  Repository(root / "pg", "pg").resolve("HEAD"))
        return extractor.env("PandaPickCubeCartesian").facts["physics_backend"]

    single = cartesian("def init(model, qpos=None):\n  return mjx.make_data(model)\n")
    assert single.value == "jax" and [(p.path, p.line) for p in single.provenance] == [
        ("mujoco_playground/_src/mjx_env.py", 1)]
    choice = cartesian("def init(model, impl=None):\n  return mjx.make_data(model, impl=impl)\n")
    assert choice.is_unknown and "has no field 'impl'" in choice.unknown


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
    # What train() runs depends on each environment's action repeat: the family config alone does not say.
    assert family.facts["training_env_steps"].unknown.startswith("training_env_steps: from train()'s action_repeat")
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


# -- what kind of observation an environment gives, and what SLM-Lab's _get_obs keeps of it ------------
def playground_configs(repos):
    from brax_diff.extractors.playground.env import EnvConfigs

    return EnvConfigs(snapshot(repos, "playground"))


def test_playground_observation_kind_is_what_each_envs_reset_returns(repos):
    from brax_diff.extractors.playground.env import observation_of
    from brax_diff.extractors.engine.flow import const, sym

    configs = playground_configs(repos)
    pick = observation_of(configs, "PandaPickCube")
    assert (pick.kind, pick.keys, pick.unknown) == ("array", (), None)
    assert where(pick) == [("pick.py", bfx.line_of(PICK, "return jp.concatenate([data.qpos, data.qvel])"))]
    go1 = observation_of(configs, "Go1JoystickFlatTerrain")
    assert (go1.kind, go1.keys) == ("dict", ("privileged_state", "state"))
    assert where(go1) == [("joystick.py", bfx.line_of(GO1, "state = jp.hstack(")),
                          ("joystick.py", bfx.line_of(GO1, "privileged_state = jp.hstack("))]
    # The config the env keeps decides (lock() is the config itself), and overrides change it as
    # update_from_flattened_dict does.
    assert observation_of(configs, "PandaPickCubeCartesian").kind == "array"
    vision = observation_of(configs, "PandaPickCubeCartesian", const({"vision": True}))
    assert (vision.kind, vision.keys) == ("dict", ("pixels/view_0",))
    undecided = observation_of(configs, "PandaPickCubeCartesian", sym("param", "config_overrides"))
    assert undecided.kind is None and "PandaPickCubeCartesian.reset() puts in State.obs it is one of array or " \
                                      "dict: depends on `self._config.vision`" in undecided.unknown
    missing = observation_of(configs, "PandaPickCubeCartesian", const({"render.width": 64}))
    assert missing.kind is None and "'render' is not a ConfigDict field" in missing.unknown
    assert observation_of(configs, "NoSuchEnv").unknown == "no Playground registry gives a config for 'NoSuchEnv'"


# SLM-Lab's _get_obs before c1d3ab9d: a dict observation's groups concatenated, in key order.
SLM_PLAYGROUND_CONCAT = SLM_PLAYGROUND.replace(
    'obs = obs.get("state", jnp.concatenate([obs[k] for k in sorted(obs)], axis=-1))',
    "arrays = [obs[k] for k in sorted(obs.keys())]\n            obs = jnp.concatenate(arrays, axis=-1)")
assert SLM_PLAYGROUND_CONCAT != SLM_PLAYGROUND


def test_slm_observation_keys_follow_whether_the_envs_observation_is_a_dict(repos, tmp_path):
    extractor = SlmExtractor(snapshot(repos, "slm"), sfx.SPEC_PATH, playground=snapshot(repos, "playground"))
    get_obs = ("playground.py", bfx.line_of(SLM_PLAYGROUND, "def _get_obs(self, state):"))
    pick = extractor.setup("ppo_fx", "PandaPickCube")  # an array: handed on unchanged, the vocabulary's state
    assert (pick.value("policy_obs_keys"), pick.value("value_obs_keys")) == ("state", "state")
    assert pick.facts["policy_obs_keys"].note == ("PlaygroundVecEnv._get_obs hands playground/PandaPickCube's array "
                                                  "observation on unchanged; both networks take it")
    assert where(pick.facts["policy_obs_keys"]) == sorted(
        [get_obs, ("pick.py", bfx.line_of(PICK, "return jp.concatenate([data.qpos, data.qvel])"))])
    go1 = extractor.setup("ppo_fx", "Go1JoystickFlatTerrain")  # a dict: obs.get("state", ...)
    assert (go1.value("policy_obs_keys"), go1.value("value_obs_keys")) == ("state", "state")
    assert "keeps obs['state'] of playground/Go1JoystickFlatTerrain's dict observation" in \
        go1.facts["value_obs_keys"].note
    # The older _get_obs concatenates a dict's groups: no one group; an array still passes unchanged.
    make_repo(tmp_path / "slm", [{**sfx.repo_files(), MAPPING_FILE: MAPPING, PLAYGROUND_ENV: SLM_PLAYGROUND_CONCAT}])
    older = SlmExtractor(Repository(tmp_path / "slm", "slm").resolve("HEAD"), sfx.SPEC_PATH,
                         playground=snapshot(repos, "playground"))
    assert older.setup("ppo_fx", "PandaPickCube").value("policy_obs_keys") == "state"
    fact = older.setup("ppo_fx", "Go1JoystickFlatTerrain").facts["policy_obs_keys"]
    assert fact.value is None
    assert "PlaygroundVecEnv._get_obs gives numpy.asarray(jax.numpy.concatenate([observation.privileged_state, " \
           "observation.state], axis=-1)) for playground/Go1JoystickFlatTerrain's dict observation (groups " \
           "privileged_state, state)" in fact.unknown


def test_slm_observation_keys_of_an_env_built_with_its_own_config_are_unknown(repos, tmp_path):
    built = SLM_PLAYGROUND.replace("pg_registry.load(env_name, config_overrides=",
                                   "pg_registry.load(env_name, config=_my_config(), config_overrides=")
    assert built != SLM_PLAYGROUND
    make_repo(tmp_path / "slm", [{**sfx.repo_files(), MAPPING_FILE: MAPPING, PLAYGROUND_ENV: built}])
    pick = SlmExtractor(Repository(tmp_path / "slm", "slm").resolve("HEAD"), sfx.SPEC_PATH,
                        playground=snapshot(repos, "playground")).setup("ppo_fx", "PandaPickCube")
    fact = pick.facts["policy_obs_keys"]
    assert fact.value is None and "is given a config of its own, which is not read" in fact.unknown


def test_slm_observation_keys_without_playground_are_unknown_not_a_dict_guessed(repos):
    pick = SlmExtractor(snapshot(repos, "slm"), sfx.SPEC_PATH).setup("ppo_fx", "PandaPickCube")
    for key in ("policy_obs_keys", "value_obs_keys"):
        assert pick.facts[key].is_unknown
        assert "depends on whether playground/PandaPickCube's observation is a dict or an array, which " \
               "Playground's code decides (its env's reset), and no Playground repository is given" in \
               pick.facts[key].unknown
    assert any(f.key == "policy_obs_keys" and f.kind == "pattern_not_found" for f in pick.findings)


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
        # Another action repeat alone keeps the return's scale (the episode wrapper sums every
        # underlying step's reward): only the episode length makes the score not comparable.
        {"env": "PandaPickCubeCartesian", "variant": "ppo_fx_small",
         "why": [{"key": "episode_length", "brax": 200, "slm": 1000, "rule": "BD035"}]},
    ]
    assert {row["env"]: row["cells"]["action_repeat"]["severity"] for row in matrix["rows"]
            if "action_repeat" in row["cells"]} == {"PandaPickCube": None, "PandaPickCubeCartesian": "CRITICAL"}
    cells = {row["env"]: row["cells"] for row in matrix["rows"]}
    assert cells["PandaPickCube"]["episode_length"] == {"brax": 150, "slm": 1000, "status": "differs",
                                                        "severity": "CRITICAL"}
    # The family's own comparison leaves what each environment decides to the matrix.
    keys = {d["key"] for d in model["differences"]}
    assert not keys & {"episode_length", "action_repeat", "physics_backend", "value_obs_keys", "training_env_steps"}


def test_the_markdown_says_why_and_names_the_rule(repos, capsys, tmp_path):
    flags = ["--brax-repo", str(repos["brax"]), "--playground-repo", str(repos["playground"]),
             "--slm-repo", str(repos["slm"]), "--mapping", str(repos["slm"] / MAPPING_FILE)]
    assert main(["report", *flags, "--family", "manipulation", "--format", "md", "--output", "-"]) == 0
    text = capsys.readouterr().out
    section = text.split("### 🔴 Scores not comparable", 1)[1].split("\n| Environment | Variant | `", 1)[0]
    assert "2 of 2 environments run with another episode length than" in section
    assert "Another action repeat alone keeps the scale" in section
    assert "| PandaPickCubeCartesian | ppo_fx_small | `episode_length` Brax 200 vs SLM-Lab 1000 | BD035 |" in section


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


# -- the evaluation protocol (issue 21 item 1) ---------------------------------------------------------
EVAL = ("num_resets_per_eval", "eval_interval_env_steps", "eval_policy", "env_steps_between_resets")


def test_brax_evaluation_protocol_per_environment(repos):
    extractor = brax(repos)
    pick = extractor.env("PandaPickCube")
    # 5,000,000 steps in max(5 - 1, 1) = 4 epochs of whole training steps of 16 x 8 x 4 x 1 = 512 env steps,
    # each run max(10, 1) times: ceil(5e6 / (4 x 512 x 10)) = 245 -> 245 x 512 x 10
    # each env runs 245 training steps of 16 x 4 / 4 = 16 unrolls of 8 steps between resets: 245 x 128
    assert {k: pick.value(k) for k in EVAL} == {"num_resets_per_eval": 10, "eval_interval_env_steps": 1_254_400,
                                                "eval_policy": "sampled", "env_steps_between_resets": 31_360}
    assert ("train.py", bfx.line_of(TRAIN, "num_envs: int = 4")) in where(pick.facts["env_steps_between_resets"])
    assert where(pick.facts["num_resets_per_eval"]) == [("manipulation_params.py",
                                                         bfx.line_of(MANIP_PARAMS, "num_resets_per_eval=10"))]
    assert ("train.py", bfx.line_of(TRAIN, "deterministic_eval: bool = False")) in where(pick.facts["eval_policy"])
    assert ("manipulation_params.py", bfx.line_of(MANIP_PARAMS, "num_evals=5")) in \
        where(pick.facts["eval_interval_env_steps"])
    cartesian = extractor.env("PandaPickCubeCartesian")  # 20M steps, 2 epochs, action repeat 2: 1,024 per step
    assert {k: cartesian.value(k) for k in EVAL} == {"num_resets_per_eval": 10,
                                                     "eval_interval_env_steps": 977 * 1024 * 10,
                                                     "eval_policy": "deterministic",
                                                     "env_steps_between_resets": 977 * 1024 // 4}


def test_brax_evaluation_count_set_at_run_time_is_an_explained_unknown(repos):
    go1 = brax(repos).env("Go1JoystickFlatTerrain")  # num_evals = jax.device_count()
    fact = go1.facts["eval_interval_env_steps"]
    assert fact.value is None and "num_evals" in fact.unknown and "jax.device_count()" in fact.unknown
    assert any(f.key == "eval_interval_env_steps" and f.kind == "pattern_not_found" for f in go1.findings)
    assert (go1.value("num_resets_per_eval"), go1.value("eval_policy")) == (0, "sampled")  # train()'s defaults
    # no resets: the schedule's unknown input does not matter to how far an env runs
    assert go1.value("env_steps_between_resets") == 0


def test_slm_evaluation_protocol_from_its_session_and_spec(repos):
    extractor = SlmExtractor(snapshot(repos, "slm"), sfx.SPEC_PATH)
    small = extractor.variant("ppo_fx_small")  # rigorous_eval: 1, eval_frequency: 40000
    assert {k: small.value(k) for k in EVAL} == {"num_resets_per_eval": 0, "eval_interval_env_steps": 40_000,
                                                 "eval_policy": "sampled", "env_steps_between_resets": 0}
    assert ("ppo_playground.yaml", bfx.line_of(SLM_SPEC, "eval_frequency: 40000")) in \
        where(small.facts["eval_interval_env_steps"])
    assert ("policy_util.py", sfx.line_of(SLM_POLICY_UTIL, "action_pd.sample()")) in \
        where(small.facts["eval_policy"])
    assert where(small.facts["num_resets_per_eval"]) == [
        ("control.py", bfx.line_of(CONTROL, "while self.env.get()")),
        ("control.py", sfx.line_of(CONTROL, "state, info = self.env.reset()", after="while"))]
    plain = extractor.variant("ppo_fx")  # no rigorous_eval: the training episodes, logged every log_frequency
    assert {k: plain.value(k) for k in EVAL} == {"num_resets_per_eval": 0, "eval_interval_env_steps": 5_000,
                                                 "eval_policy": "training_episodes", "env_steps_between_resets": 0}
    assert where(plain.facts["eval_policy"]) == [
        ("control.py", bfx.line_of(CONTROL, 'get("rigorous_eval", False)')),
        ("control.py", bfx.line_of(CONTROL, "self.eval_env = self.env"))]
    assert where(plain.facts["eval_interval_env_steps"]) == [
        ("__init__.py", bfx.line_of(SLM_ENV_INIT, "defaults = dict(eval_frequency")),
        ("control.py", bfx.line_of(CONTROL, 'get("rigorous_eval", False)'))]


CONTROL_OTHER = (CONTROL.replace("            self.eval_env = self.env\n", "            self.eval_env = None\n")
                 .replace("            if not is_venv and (terminated or truncated):\n",
                          "            if terminated.any():\n"))
assert CONTROL_OTHER.count("self.eval_env = None") == 1 and "terminated.any()" in CONTROL_OTHER


def test_slm_evaluation_of_another_shape_is_unknown_with_findings(tmp_path):
    make_repo(tmp_path / "slm", [{**sfx.repo_files(), CONTROL_PATH: CONTROL_OTHER}],
              origin="https://github.com/kengz/SLM-Lab.git", branch="master")
    plain = SlmExtractor(Repository(tmp_path / "slm", "slm").resolve("HEAD"), sfx.SPEC_PATH).variant("ppo_fx")
    for key, why in (("eval_policy", "no `self.eval_env = self.env`"),
                     ("eval_interval_env_steps", "_set_env_attributes sets no log_frequency default"),
                     ("num_resets_per_eval", "run_rl: the training loop resets the env in a shape"),
                     ("env_steps_between_resets", "run_rl: the training loop resets the env in a shape")):
        fact = plain.facts[key]
        assert fact.value is None and why in fact.unknown, (key, fact.unknown)
        assert [f.kind for f in plain.findings if f.key == key] == ["pattern_not_found"]


def test_the_matrix_compares_the_evaluation_protocol(repos, capsys):
    model = report(repos, capsys, "--family", "manipulation")
    cells = {row["env"]: row["cells"] for row in model["matrix"]["rows"]}
    assert cells["PandaPickCubeCartesian"]["eval_policy"] == {"brax": "deterministic", "slm": "sampled",
                                                              "status": "differs", "severity": "MINOR"}
    assert cells["PandaPickCube"]["eval_interval_env_steps"] == {"brax": 1_254_400, "slm": 40_000,
                                                                  "status": "differs", "severity": "MINOR"}
    keys = {d["key"] for d in model["differences"]}
    assert not keys & set(EVAL)  # each environment decides them: the matrix's
