"""Playground's ``rsl_rl_config`` run by the data-flow engine that runs ``brax_ppo_config``
(issue 26: one engine for every source). Each shape below is one the RSL-RL side's former
pattern walker skipped or got wrong (a statement it did not read kept the base value, a
condition it could not decide dropped the branch): now each gives what the function returns
for the environment, or an unknown naming the file, the function and the ref - never the
base value or rsl-rl-lib's default in its place.

Fixture code in upstream's shape (hand-written, not upstream's)."""

from __future__ import annotations

import pytest

import brax_fixtures as bfx
import rsl_rl_fixtures as fx
from brax_fixtures import line_of
from gitfixture import make_repo

from brax_diff.extractors.rsl_rl import RslRlExtractor
from brax_diff.sources.repository import Repository

BASE = '''

def rsl_rl_config(env_name: str, unused_impl=None) -> config_dict.ConfigDict:
  rl_config = config_dict.create(
      seed=1,
      policy=config_dict.create(actor_hidden_dims=[64, 32], critic_hidden_dims=[128, 64], activation="elu"),
      algorithm=config_dict.create(
          clip_param=0.25,
          entropy_coef=0.005,
          num_learning_epochs=3,
          num_mini_batches=2,
          learning_rate=5e-4,
          schedule="fixed",
          gamma=0.98,
          lam=0.9,
      ),
      num_steps_per_env=16,
      max_iterations=50,
      empirical_normalization=True,
  )
{body}
  return rl_config
'''

# One env per shape (the fixture registry's Go1Getup, SpotGetup, H1Walk, Go1JoystickFlatTerrain).
SHAPES = '''
  if env_name == "Go1Getup":
    rl_config.algorithm.update(gamma=0.97)
    rl_config["num_steps_per_env"] = 48
  if env_name == "SpotGetup":
    with rl_config.unlocked():
      rl_config.algorithm.lam = 0.85
    rl_config.algorithm.num_learning_epochs *= 2
  if env_name.lower() == "h1walk":
    rl_config.algorithm.clip_param = 0.1
  if _is_biped(env_name):
    rl_config.algorithm.entropy_coef = 0.02
  if env_name == "Go1JoystickFlatTerrain":
    rl_config.algorithm = make_algorithm(env_name)
'''
HELPER = '''

def _is_biped(name):
  return name in unknown_registry.BIPEDS
'''
# Writes of fields the engine cannot name: a key the base config leaves out (value_loss_coef,
# max_grad_norm: rsl-rl-lib's defaults otherwise) may be set by them.
OPEN = '''
  if env_name == "Go1Getup":
    rl_config.algorithm.update(TUNED[env_name])
  if env_name == "SpotGetup":
    setattr(rl_config.algorithm, KEY, 0.5)
  if env_name == "H1Walk":
    rl_config.algorithm[KEY] = 0.5
  if env_name == "Go1JoystickFlatTerrain":
    rl_config.algorithm.update(**TUNED)
'''
SHAPES_TEXT = bfx.LOCO_PARAMS_TEXT + HELPER + BASE.format(body=SHAPES)
OPEN_TEXT = bfx.LOCO_PARAMS_TEXT + BASE.format(body=OPEN)


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("rsl_params")
    playground = make_repo(root / "playground", [
        {**fx.PLAYGROUND_RSL, bfx.LOCO_PARAMS: SHAPES_TEXT},
        {**fx.PLAYGROUND_RSL, bfx.LOCO_PARAMS: OPEN_TEXT},
        {**fx.PLAYGROUND_RSL, bfx.MANIP_PARAMS: bfx.MANIP_PARAMS_TEXT},  # no rsl_rl_config in manipulation
    ])
    rsl = make_repo(root / "rsl_rl", [fx.RSL_RL])
    return {"root": root, "playground": dict(zip(("shapes", "open", "no_function"), playground)), "rsl": rsl[0]}


def extractor(repos, commit: str) -> RslRlExtractor:
    return RslRlExtractor(Repository(repos["root"] / "rsl_rl", "rsl_rl").resolve(repos["rsl"]),
                          Repository(repos["root"] / "playground", "playground").resolve(repos["playground"][commit]))


def lines(fact) -> set[int]:
    return {p.line for p in fact.provenance if p.path == bfx.LOCO_PARAMS}


def test_update_of_a_nested_section_under_an_env_branch(repos):
    rsl = extractor(repos, "shapes")
    fact = rsl.env("Go1Getup").facts["discount"]
    assert fact.value == 0.97
    assert lines(fact) == {line_of(SHAPES_TEXT, "rl_config.algorithm.update(gamma=0.97)")}
    assert fact.note == "rsl_rl_config (locomotion), an env branch"
    assert rsl.family("locomotion").facts["discount"].value == 0.98  # the base config leaves branches out
    assert rsl.env("SpotGetup").facts["discount"].value == 0.98


def test_an_item_assignment_sets_the_key(repos):
    x = extractor(repos, "shapes").env("Go1Getup")
    assert x.facts["unroll_length"].value == 48
    assert lines(x.facts["unroll_length"]) == {line_of(SHAPES_TEXT, 'rl_config["num_steps_per_env"] = 48')}
    assert x.facts["training_env_steps"].value == 50 * 48 * 512
    assert x.facts["transitions_per_update"].value == 48 * 512


def test_a_key_set_inside_unlocked_and_an_augmented_assignment(repos):
    x = extractor(repos, "shapes").env("SpotGetup")
    assert x.facts["gae_lambda"].value == 0.85
    assert x.facts["epochs_per_update"].value == 6 and x.facts["gradient_steps_per_update"].value == 12
    # the number where it is written, and the line that doubles it
    assert lines(x.facts["epochs_per_update"]) == {line_of(SHAPES_TEXT, "num_learning_epochs=3"),
                                                   line_of(SHAPES_TEXT, "num_learning_epochs *= 2")}


def test_a_condition_through_lower_is_decided(repos):
    rsl = extractor(repos, "shapes")
    x = rsl.env("H1Walk")
    assert x.facts["clip_epsilon"].value == 0.1 and x.facts["value_clipping"].value == 0.1
    condition = line_of(SHAPES_TEXT, 'env_name.lower() == "h1walk"')
    assert not [f for f in x.findings if f.kind == "undecidable_branch" and f.provenance[0].line == condition]
    assert rsl.env("Go1Getup").facts["clip_epsilon"].value == 0.25


def test_a_condition_through_a_helper_the_engine_cannot_follow_is_unknown_not_guessed(repos):
    rsl = extractor(repos, "shapes")
    condition = line_of(SHAPES_TEXT, "if _is_biped(env_name):")
    for env in ("Go1Getup", "H1Walk"):
        x = rsl.env(env)
        fact = x.facts["entropy_coef"]
        assert fact.is_unknown, env  # neither the base 0.005 nor the branch's 0.02
        assert f"rsl_rl_config({env!r})" in fact.unknown and bfx.LOCO_PARAMS in fact.unknown
        assert repos["playground"]["shapes"][:12] in fact.unknown  # the ref read
        assert f"depends on `_is_biped(env_name)` ({bfx.LOCO_PARAMS}:{condition})" in fact.unknown
        assert lines(fact) == {line_of(SHAPES_TEXT, "entropy_coef=0.005"), line_of(SHAPES_TEXT, "entropy_coef = 0.02")}
        assert any(f.kind == "pattern_not_found" and f.key == "entropy_coef" for f in x.findings)
        undecided = [f for f in x.findings if f.kind == "undecidable_branch"]
        assert [f.provenance[0].line for f in undecided] == [condition]
        assert "`_is_biped(env_name)` is not a condition on env_name" in undecided[0].message
    family = rsl.family("locomotion")
    assert family.facts["entropy_coef"].value == 0.005
    assert not [f for f in family.findings if f.kind == "dead_branch"]  # undecided is not dead


def test_a_section_replaced_by_what_the_engine_cannot_follow_makes_its_keys_unknown(repos):
    x = extractor(repos, "shapes").env("Go1JoystickFlatTerrain")
    for key in ("discount", "gae_lambda", "clip_epsilon", "epochs_per_update"):
        fact = x.facts[key]
        assert fact.is_unknown, key  # not the base config's value, nor rsl-rl-lib's default
        assert "(its section algorithm)" in fact.unknown and "make_algorithm" in fact.unknown
        assert "rsl_rl_config('Go1JoystickFlatTerrain')" in fact.unknown and bfx.LOCO_PARAMS in fact.unknown
        assert line_of(SHAPES_TEXT, "rl_config.algorithm = make_algorithm(env_name)") in lines(fact)
    assert x.facts["unroll_length"].value == 16  # the other keys keep their values


@pytest.mark.parametrize("env, written", [
    ("Go1Getup", "ConfigDict.update of"), ("SpotGetup", "setattr of the name"),
    ("H1Walk", "ConfigDict item"), ("Go1JoystickFlatTerrain", "`**TUNED` is not a known dict"),
])
def test_a_write_of_fields_not_known_leaves_no_key_to_a_default(repos, env, written):
    x = extractor(repos, "open").env(env)
    for key in ("discount", "value_loss_coef", "max_grad_norm"):  # set by the base / left to rsl-rl-lib
        fact = x.facts[key]
        assert fact.is_unknown, (env, key)
        assert written in fact.unknown and f"rsl_rl_config({env!r})" in fact.unknown, fact.unknown
        assert bfx.LOCO_PARAMS in fact.unknown and repos["playground"]["open"][:12] in fact.unknown
    assert x.facts["unroll_length"].value == 16  # the top-level config is not touched
    family = extractor(repos, "open").family("locomotion")
    assert family.facts["value_loss_coef"].value == 1.5  # rsl-rl-lib's default where nothing else may set it
    assert family.facts["discount"].value == 0.98


def test_a_missing_config_function_is_unknown_not_rsl_rl_lib_defaults(repos):
    x = extractor(repos, "no_function").family("manipulation")
    for key in ("discount", "learning_rate", "value_loss_coef", "unroll_length"):
        fact = x.facts[key]
        assert fact.is_unknown, key  # the old walker gave PPO.__init__'s defaults (gamma=0.9 ...)
        assert "no rsl_rl_config() function" in fact.unknown and bfx.MANIP_PARAMS in fact.unknown
        assert repos["playground"]["no_function"][:12] in fact.unknown
    assert any(f.kind == "pattern_not_found" and not f.key and "no rsl_rl_config()" in f.message for f in x.findings)
    # what is not Playground's config is still read
    assert x.facts["num_envs"].value == 512 and x.facts["advantage_form"].value == "gae"
