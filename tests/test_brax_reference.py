"""`report --brax-reference`: where Brax's values come from. Playground's tuned configs
(`params`, the default), what Playground's `learning/train_jax_ppo.py` trains with at its flag
defaults (`train-script`), `train()`'s signature defaults (`train-defaults`), or Brax's own
`brax/training/learner.py` flag defaults (`learner`); the scripts are read by the data-flow engine
with models of absl's flags and of ConfigDict. Fixture repositories in upstream's shape, written by
hand."""

from __future__ import annotations

import json

import pytest

import brax_fixtures as bfx
from brax_diff.cli import main
from brax_diff.extractors.brax.extractor import BraxExtractor
from brax_diff.sources.repository import Repository
from gitfixture import make_repo
from test_setup import TRAIN
from upstream_repos import MAPPING, MAPPING_FILE, playground_files
import slm_fixtures as sfx

LEARNER = '''
"""Fixture training script: absl flags, one branch per learner."""
import functools

from absl import app
from absl import flags
from brax import envs
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.ppo import train as ppo
from brax.training.agents.sac import train as sac

_LEARNER = flags.DEFINE_enum("learner", "sac", ["ppo", "sac"], "Which algorithm to run.")
_ENV = flags.DEFINE_string("env", "ant", "Environment.")
_TOTAL_ENV_STEPS = flags.DEFINE_integer("total_env_steps", 50_000_000, "Env steps.")
_NUM_ENVS = flags.DEFINE_integer("num_envs", 256, "Envs.")
_EPISODE_LENGTH = flags.DEFINE_integer("episode_length", 500, "Episode length.")
_ACTION_REPEAT = flags.DEFINE_integer("action_repeat", 2, "Action repeat.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 5e-4, "Learning rate.")
_UNROLL_LENGTH = flags.DEFINE_integer("unroll_length", 10, "Unroll length.")
_POLICY_LAYERS = flags.DEFINE_string("policy_hidden_layer_sizes", None, "Policy layers.")
_VALUE_OBS_KEY = flags.DEFINE_string("value_obs_key", None, "Critic inputs.")
_PLAYGROUND_CONFIG_OVERRIDES = flags.DEFINE_string(
    "playground_config_overrides",
    None,
    "Overrides for the playground env config.",
)


def main(unused_argv):
  env = envs.get_environment(_ENV.value)
  if _LEARNER.value == "sac":
    sac.train(environment=env, num_timesteps=_TOTAL_ENV_STEPS.value)
  elif _LEARNER.value == "ppo":
    network_factory = ppo_networks.make_ppo_networks
    if _POLICY_LAYERS.value is not None:
      sizes = tuple(int(x) for x in _POLICY_LAYERS.value.split(","))
      network_factory = functools.partial(network_factory, policy_hidden_layer_sizes=sizes)
    if _VALUE_OBS_KEY.value is not None:
      network_factory = functools.partial(network_factory, value_obs_key=_VALUE_OBS_KEY.value)
    ppo.train(
        environment=env,
        num_timesteps=_TOTAL_ENV_STEPS.value,
        num_envs=_NUM_ENVS.value,
        episode_length=_EPISODE_LENGTH.value,
        action_repeat=_ACTION_REPEAT.value,
        learning_rate=_LEARNING_RATE.value,
        unroll_length=_UNROLL_LENGTH.value,
        network_factory=network_factory,
    )


if __name__ == "__main__":
  app.run(main)
'''
LEARNER_PATH = "brax/training/learner.py"


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    make_repo(root / "brax", [{**bfx.BRAX_OLD, bfx.TRAIN: TRAIN, LEARNER_PATH: LEARNER}],
              origin="https://github.com/google/brax.git")
    make_repo(root / "playground", [playground_files()], origin="https://github.com/google-deepmind/mujoco_playground.git")
    make_repo(root / "slm", [{**sfx.repo_files(), MAPPING_FILE: MAPPING}], origin="https://github.com/kengz/SLM-Lab.git",
              branch="master")
    return {name: root / name for name in ("brax", "playground", "slm")}


def extractor(repos, reference: str) -> BraxExtractor:
    return BraxExtractor(Repository(repos["brax"], "brax").resolve("HEAD"),
                         Repository(repos["playground"], "playground").resolve("HEAD"), reference=reference)


def test_learner_reads_the_flag_defaults_main_passes_to_ppo_train(repos):
    facts = extractor(repos, "learner").env("BallInCup")
    assert (facts.value("num_envs"), facts.value("unroll_length"), facts.value("learning_rate")) == (256, 10, 5e-4)
    assert (facts.value("episode_length"), facts.value("action_repeat")) == (500, 2)
    # 50 M asked; one epoch of ceil(5e7 / 1,280) = 39,063 training steps of 1,280 env steps runs.
    assert facts.value("training_env_steps") == 39_063 * 1_280
    assert facts.facts["training_env_steps"].declared == 50_000_000
    # Flags left at None add no partial: make_ppo_networks' own defaults stand.
    assert facts.value("value_obs_keys") == "state"
    lines = {(p.path, p.line) for p in facts.facts["num_envs"].provenance}
    assert (LEARNER_PATH, bfx.line_of(LEARNER, '"num_envs", 256')) in lines  # the flag's default
    assert (LEARNER_PATH, bfx.line_of(LEARNER, "ppo.train(")) in lines  # the call that passes it
    # The same for every environment: the script reads no Playground config (BallInCup's
    # discount override in Playground's config does not apply).
    other = extractor(repos, "learner").env("CheetahRun")
    assert other.value("discount") == facts.value("discount") == 0.99
    assert extractor(repos, "params").env("BallInCup").value("discount") == 0.95


def test_train_defaults_are_the_signature_alone(repos):
    facts = extractor(repos, "train-defaults").env("BallInCup")
    assert (facts.value("num_envs"), facts.value("unroll_length"), facts.value("episode_length")) == (4, 8, 1000)
    assert facts.value("discount") == 0.99 and facts.value("learning_rate") == 3e-4
    assert facts.facts["training_env_steps"].is_unknown  # num_timesteps has no default


def test_learner_runs_the_environment_as_its_own_config_says_at_the_overrides_default(repos):
    # --playground_config_overrides defaults to None: the environment's own config gives the backend.
    learner = extractor(repos, "learner").env("BallInCup").facts["physics_backend"]
    params = extractor(repos, "params").env("BallInCup").facts["physics_backend"]
    assert (learner.value, learner.unknown) == (params.value, params.unknown)
    assert "get_default_config('BallInCup')" in learner.unknown  # this fixture's registry gives no config to read
    assert (LEARNER_PATH, bfx.line_of(LEARNER, "_PLAYGROUND_CONFIG_OVERRIDES = ")) in {
        (p.path, p.line) for p in learner.provenance}


def test_report_names_the_reference_and_refuses_an_unknown_one(repos, capsys, tmp_path):
    flags = ["--brax-repo", str(repos["brax"]), "--playground-repo", str(repos["playground"]), "--slm-repo",
             str(repos["slm"]), "--mapping", str(repos["slm"] / MAPPING_FILE), "--env", "BallInCup"]
    assert main(["report", *flags, "--brax-reference", "learner", "--format", "md", "--output", "-"]) == 0
    text = capsys.readouterr().out
    assert ("Brax reference: the flag defaults of Brax's own `brax/training/learner.py` (`--learner ppo`), over "
            "`train()`'s defaults; it reads no Playground config. These are the script's defaults, not a tuned "
            "configuration: Playground's maintainers reproduce the DM Control Humanoid targets with `learner.py` "
            "and flags given on its command line, which no config records ([mujoco_playground issue 171]"
            "(https://github.com/google-deepmind/mujoco_playground/issues/171)), so a difference below is from "
            "defaults no published run used.") in text
    assert main(["report", *flags, "--format", "json", "--output", "-"]) == 0
    model = json.loads(capsys.readouterr().out)
    assert model["scope"]["brax_reference"] == "params"
    assert main(["report", *flags, "--brax-reference", "paper", "--output", "-", "--format", "md"]) == 2
    assert capsys.readouterr().err == ("error: unknown --brax-reference 'paper' (choose from params, train-script, "
                                       "train-defaults, learner)\n")


def test_a_learner_script_the_engine_cannot_follow_is_one_error_line(tmp_path, capsys):
    root = tmp_path
    make_repo(root / "brax", [{**bfx.BRAX_OLD, bfx.TRAIN: TRAIN,
                               LEARNER_PATH: LEARNER.replace("    ppo.train(\n", "    ppo.fit(\n")}])
    make_repo(root / "playground", [playground_files()])
    broken = BraxExtractor(Repository(root / "brax", "brax").resolve("HEAD"),
                           Repository(root / "playground", "playground").resolve("HEAD"), reference="learner")
    with pytest.raises(Exception, match="--brax-reference learner: main\\(\\) in brax/training/learner.py makes no "
                                        "ppo.train call"):
        broken.env("BallInCup")


# train()'s learning-rate schedule as Brax writes it today (hand-written in its shape): a
# learning_rate_schedule parameter turned into an LRSchedule member, and the running statistics
# updated before the SGD scan unless the schedule is the adaptive-KL one (then after it).
OPTIMIZER_PATH = "brax/training/agents/ppo/optimizer.py"
OPTIMIZER = '''
"""Fixture PPO optimizer helpers: the learning-rate schedules train() accepts."""
import enum


class LRSchedule(enum.Enum):
  NONE = "NONE"
  ADAPTIVE_KL = "ADAPTIVE_KL"
'''
UPDATE_BEFORE = """    normalizer_params = running_statistics.update(normalizer_params, data.observation)
    carry, metrics = jax.lax.scan(
        functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),
        carry, (), length=num_updates_per_batch)
"""
TRAIN_SCHEDULE = (TRAIN
                  .replace("    normalize_advantage: bool = True,\n",
                           "    normalize_advantage: bool = True,\n    learning_rate_schedule=None,\n")
                  .replace("from brax.training.agents.ppo import networks as ppo_networks\n",
                           "from brax.training.agents.ppo import networks as ppo_networks\n"
                           "from brax.training.agents.ppo import optimizer as ppo_optimizer\n")
                  .replace("  optimizer = optax.adam(learning_rate=learning_rate)\n",
                           "  optimizer = optax.adam(learning_rate=learning_rate)\n"
                           "  lr_schedule = learning_rate_schedule or ppo_optimizer.LRSchedule.NONE\n"
                           "  lr_schedule = ppo_optimizer.LRSchedule(lr_schedule)\n"
                           "  lr_is_adaptive_kl = lr_schedule == ppo_optimizer.LRSchedule.ADAPTIVE_KL\n")
                  .replace(UPDATE_BEFORE,
                           "    if not lr_is_adaptive_kl:\n"
                           "      normalizer_params = running_statistics.update(normalizer_params, data.observation)\n"
                           "    carry, metrics = jax.lax.scan(\n"
                           "        functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),\n"
                           "        carry, (), length=num_updates_per_batch)\n"
                           "    if lr_is_adaptive_kl:\n"
                           "      normalizer_params = running_statistics.update(normalizer_params, data.observation)\n"))
assert TRAIN_SCHEDULE.count("lr_is_adaptive_kl") == 3
# learner.py's schedule flag: an enum_class flag whose default is LRSchedule.NONE, with observation
# normalization on (its default upstream).
LEARNER_SCHEDULE = (LEARNER
                    .replace("from brax.training.agents.ppo import networks as ppo_networks\n",
                             "from brax.training.agents.ppo import networks as ppo_networks\n"
                             "from brax.training.agents.ppo import optimizer as ppo_optimizer\n")
                    .replace('_VALUE_OBS_KEY = flags.DEFINE_string("value_obs_key", None, "Critic inputs.")\n',
                             '_VALUE_OBS_KEY = flags.DEFINE_string("value_obs_key", None, "Critic inputs.")\n'
                             '_NORMALIZE_OBSERVATIONS = flags.DEFINE_boolean("normalize_observations", True, "Norm.")\n'
                             "_PPO_LEARNING_RATE_SCHEDULE = flags.DEFINE_enum_class(\n"
                             '    "ppo_learning_rate_schedule",\n'
                             "    ppo_optimizer.LRSchedule.NONE,\n"
                             "    ppo_optimizer.LRSchedule,\n"
                             '    "Learning rate schedule for PPO.",\n'
                             ")\n")
                    .replace("        network_factory=network_factory,\n",
                             "        network_factory=network_factory,\n"
                             "        normalize_observations=_NORMALIZE_OBSERVATIONS.value,\n"
                             "        learning_rate_schedule=_PPO_LEARNING_RATE_SCHEDULE.value,\n"))
assert LEARNER_SCHEDULE.count("_PPO_LEARNING_RATE_SCHEDULE") == 2


def schedule_extractor(root, reference: str, files: dict) -> BraxExtractor:
    make_repo(root / "brax", [{**bfx.BRAX_OLD, bfx.TRAIN: TRAIN_SCHEDULE, LEARNER_PATH: LEARNER_SCHEDULE, **files}])
    make_repo(root / "playground", [playground_files()])
    return extractor({"brax": root / "brax", "playground": root / "playground"}, reference)


def test_learner_schedule_none_is_a_constant_rate_and_statistics_update_before_sgd(tmp_path):
    facts = schedule_extractor(tmp_path, "learner", {OPTIMIZER_PATH: OPTIMIZER}).env("BallInCup")
    assert (facts.value("lr_schedule"), facts.value("lr_final_factor")) == ("constant", 1.0)
    assert not facts.facts["lr_decay_steps"].is_unknown and facts.value("lr_decay_steps") is None
    lines = {(p.path, p.line) for p in facts.facts["lr_schedule"].provenance}
    assert (OPTIMIZER_PATH, bfx.line_of(OPTIMIZER, 'NONE = "NONE"')) in lines  # the member the flag defaults to
    assert (LEARNER_PATH, bfx.line_of(LEARNER_SCHEDULE, '"ppo_learning_rate_schedule",')) in lines  # the flag
    assert (bfx.TRAIN, bfx.line_of(TRAIN_SCHEDULE, "lr_schedule = learning_rate_schedule or")) in lines
    # train() decides lr_is_adaptive_kl from the member: the update before the SGD scan runs, the one after not.
    assert facts.value("obs_normalization") is True
    assert facts.value("obs_norm_update") == "per_batch_before_sgd"
    update_lines = {p.line for p in facts.facts["obs_norm_update"].provenance if p.path == bfx.TRAIN}
    assert bfx.line_of(TRAIN_SCHEDULE, "running_statistics.update(", 1) in update_lines
    assert bfx.line_of(TRAIN_SCHEDULE, "running_statistics.update(", 2) not in update_lines


def test_learner_schedule_not_decided_is_unknown_not_other(tmp_path):
    # Without the optimizer module the flag's default is an opaque name: no schedule is read.
    facts = schedule_extractor(tmp_path, "learner", {}).env("BallInCup")
    for key in ("lr_schedule", "lr_final_factor", "lr_decay_steps"):
        assert facts.facts[key].is_unknown, key
    assert "learning_rate_schedule = brax.training.agents.ppo.optimizer.LRSchedule.NONE is not a value the " \
           "extractor decides" in facts.facts["lr_schedule"].unknown
    assert facts.facts["obs_norm_update"].is_unknown  # train()'s condition on the schedule is not decided either
    assert "depending on a condition not decided here" in facts.facts["obs_norm_update"].unknown


# Playground's training script: flags change the config only when given; the environment is
# built with the script's --impl. (Written by hand in the script's shape.)
SCRIPT = '''
"""Fixture training script."""
from absl import app
from absl import flags
from brax.training.agents.ppo import train as ppo
from ml_collections import config_dict

import mujoco_playground
from mujoco_playground import registry
from mujoco_playground.config import manipulation_params

_ENV_NAME = flags.DEFINE_string("env_name", "PandaPickCube", "Environment.")
_IMPL = flags.DEFINE_enum("impl", "jax", ["jax", "warp"], "MJX implementation")
_NUM_TIMESTEPS = flags.DEFINE_integer("num_timesteps", 1_000_000, "Env steps.")
_UNROLL_LENGTH = flags.DEFINE_integer("unroll_length", 10, "Unroll length.")


def get_rl_config(env_name: str) -> config_dict.ConfigDict:
  if env_name in mujoco_playground.manipulation._envs:
    return manipulation_params.brax_ppo_config(env_name, _IMPL.value)
  raise ValueError(f"Env {env_name} not found")


def main(argv):
  ppo_params = get_rl_config(_ENV_NAME.value)
  if _NUM_TIMESTEPS.present:
    ppo_params.num_timesteps = _NUM_TIMESTEPS.value
  if _UNROLL_LENGTH.present:
    ppo_params.unroll_length = _UNROLL_LENGTH.value
  ppo_params.num_evals = 3
  env_cfg_overrides = {"impl": _IMPL.value}
  env = registry.load(_ENV_NAME.value, config_overrides=env_cfg_overrides)
  training_params = dict(ppo_params)
  ppo.train(environment=env, **training_params)


if __name__ == "__main__":
  app.run(main)
'''
MANIP_INIT_PACKAGE = '''
"""Fixture package: the families are attributes of the package."""
from mujoco_playground._src import manipulation
'''


@pytest.fixture(scope="module")
def script_repos(tmp_path_factory):
    import test_setup

    root = tmp_path_factory.mktemp("script")
    make_repo(root / "brax", [{**bfx.BRAX_OLD, bfx.TRAIN: TRAIN}], origin="https://github.com/google/brax.git")
    make_repo(root / "playground", [{**playground_files(), **test_setup.PLAYGROUND, "learning/train_jax_ppo.py": SCRIPT,
                                     "mujoco_playground/__init__.py": MANIP_INIT_PACKAGE}],
              origin="https://github.com/google-deepmind/mujoco_playground.git")
    return {name: root / name for name in ("brax", "playground")}


def test_train_script_is_the_config_the_script_trains_with_and_its_impl(script_repos):
    import test_setup

    facts = extractor(script_repos, "train-script").env("PandaPickCube")
    params = extractor(script_repos, "params").env("PandaPickCube")
    # The flags that are not given change nothing: the params config, the environment's own length.
    for key in ("episode_length", "unroll_length", "num_envs"):
        assert facts.value(key) == params.value(key), key
    # The same 5 M asked for; the script's num_evals = 3 splits it into 2 epochs, not 4, so what train()
    # runs rounds up differently: 2 x 10 reset epochs x ceil(5e6 / (2 * 10 * 512)) = 489 steps of 512.
    assert facts.facts["training_env_steps"].declared == params.facts["training_env_steps"].declared == 5_000_000
    assert (facts.value("training_env_steps"), params.value("training_env_steps")) == (2 * 10 * 489 * 512,
                                                                                       4 * 10 * 245 * 512)
    assert facts.value("episode_length") == 150
    # The script builds the environment with --impl (default jax); the params reference reads its config's.
    assert (facts.value("physics_backend"), params.value("physics_backend")) == ("jax", "warp")
    impl_lines = {(p.path, p.line) for p in facts.facts["physics_backend"].provenance}
    assert ("learning/train_jax_ppo.py", bfx.line_of(SCRIPT, '"impl", "jax"')) in impl_lines
    assert ("mujoco_playground/config/manipulation_params.py",
            bfx.line_of(test_setup.MANIP_PARAMS, "num_timesteps=5_000_000")) in {
        (p.path, p.line) for p in facts.facts["training_env_steps"].provenance}


def test_train_script_that_binds_no_config_is_one_error_line(tmp_path):
    make_repo(tmp_path / "brax", [{**bfx.BRAX_OLD, bfx.TRAIN: TRAIN}])
    make_repo(tmp_path / "playground", [{**playground_files(), "learning/train_jax_ppo.py": SCRIPT.replace(
        "  ppo_params = get_rl_config(_ENV_NAME.value)\n", "  params = get_rl_config(_ENV_NAME.value)\n")}])
    with pytest.raises(Exception, match="--brax-reference train-script: learning/train_jax_ppo.py: the config main"):
        extractor({"brax": tmp_path / "brax", "playground": tmp_path / "playground"}, "train-script").env("PandaPickCube")
