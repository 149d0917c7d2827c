"""Playground's brax_ppo_config run by the data-flow engine (issue 26, item 1): every shape an
upstream refactor may give the config function yields what the function returns for each env,
or an unknown naming the statement - never a value from a statement skipped silently.

Fixture code in upstream's shape (hand-written, not upstream's)."""

from __future__ import annotations

import pytest

import brax_fixtures as fx
from brax_diff.extractors.brax.extractor import BraxExtractor
from brax_diff.extractors.playground.params import ParamsFunction
from brax_diff.extractors.engine.pyast import Code
from brax_diff.sources.repository import Repository
from gitfixture import make_repo

TEMPLATE = '''
"""Fixture tuned configs for a legged family."""
import copy

from ml_collections import config_dict

{prelude}

def brax_ppo_config(env_name: str, impl=None) -> config_dict.ConfigDict:
  rl_config = {base}
{body}
  return rl_config
'''
BASE = ("config_dict.create(\n      num_envs=128,\n      discounting=0.97,\n      num_minibatches=4,\n"
        "      network_factory=config_dict.create(policy_hidden_layer_sizes=(128, 128)),\n  )")

# name -> (module prelude, base expression, function body, {key: expected for Go1Getup})
CASES = {
    "unlocked": ("", BASE, '  if env_name == "Go1Getup":\n    with rl_config.unlocked():\n'
                           '      rl_config.discounting = 0.95\n', {"discounting": 0.95}),
    "update_kwargs": ("", BASE, '  if env_name == "Go1Getup":\n    rl_config.update(discounting=0.95)\n',
                      {"discounting": 0.95}),
    "update_dict": ("", BASE, '  if env_name == "Go1Getup":\n    rl_config.update({"discounting": 0.95})\n',
                    {"discounting": 0.95}),
    "item": ("", BASE, '  if env_name == "Go1Getup":\n    rl_config["discounting"] = 0.95\n',
             {"discounting": 0.95}),
    "augmented": ("", BASE, '  if env_name == "Go1Getup":\n    rl_config.num_minibatches *= 2\n',
                  {"num_minibatches": 8}),
    "create_star_base": ('_BASE = dict(num_envs=128, discounting=0.97)\n',
                         "config_dict.create(**_BASE, num_minibatches=4)",
                         '  if env_name == "Go1Getup":\n    rl_config.discounting = 0.95\n',
                         {"discounting": 0.95, "num_envs": 128, "num_minibatches": 4}),
    "for_around_branch": ("", BASE, '  for name in ("Go1Getup", "Go1Handstand"):\n    if env_name == name:\n'
                                    '      rl_config.discounting = 0.95\n', {"discounting": 0.95}),
    "match": ("", BASE, '  match env_name:\n    case "Go1Getup" | "Go1Handstand":\n'
                        '      rl_config.discounting = 0.95\n    case _:\n      pass\n', {"discounting": 0.95}),
    "try_around_branch": ("", BASE, '  try:\n    if env_name == "Go1Getup":\n      rl_config.discounting = 0.95\n'
                                    '  except KeyError:\n    pass\n', {"discounting": 0.95}),
    "setattr": ("", BASE, '  if env_name == "Go1Getup":\n    setattr(rl_config, "discounting", 0.95)\n',
                {"discounting": 0.95}),
    "annotated": ("", BASE, '  if env_name == "Go1Getup":\n    rl_config.discounting: float = 0.95\n',
                  {"discounting": 0.95}),
    "tuple_assignment": ("", BASE, '  if env_name == "Go1Getup":\n'
                                   '    rl_config.discounting, rl_config.num_envs = 0.95, 64\n',
                         {"discounting": 0.95, "num_envs": 64}),
    "returned_copy": ("", BASE, '  if env_name == "Go1Getup":\n    tuned = copy.deepcopy(rl_config)\n'
                                '    tuned.discounting = 0.95\n    return tuned\n', {"discounting": 0.95}),
    "resolved_copy": ("", BASE, '  if env_name == "Go1Getup":\n'
                                '    rl_config = rl_config.copy_and_resolve_references()\n'
                                '    rl_config.discounting = 0.95\n', {"discounting": 0.95}),
    "base_from_helper": ('def _base():\n  return config_dict.create(num_envs=128, discounting=0.97)\n', "_base()",
                         '  if env_name == "Go1Getup":\n    rl_config.discounting = 0.95\n',
                         {"discounting": 0.95, "num_envs": 128}),
    "helper_condition": ('def _is_getup(name):\n  return name.startswith("Go1")\n', BASE,
                         '  if _is_getup(env_name):\n    rl_config.discounting = 0.95\n', {"discounting": 0.95}),
    "lower_condition": ("", BASE, '  if env_name.lower() == "go1getup":\n    rl_config.discounting = 0.95\n',
                        {"discounting": 0.95}),
    "nested_network_item": ("", BASE, '  if env_name == "Go1Getup":\n'
                                      '    rl_config.network_factory["policy_hidden_layer_sizes"] = (64,)\n', {}),
}


# Writes whose field names the engine does not know (the call, or the name, is not known here).
UNNAMED = {
    "update_unknown_kwargs": '  if env_name == "Go1Getup":\n    rl_config.update(**TUNED)\n',
    "setattr_unknown_name": '  if env_name == "Go1Getup":\n    setattr(rl_config, KEY, 0.95)\n',
}


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("upstream")
    brax = make_repo(root / "brax", fx.BRAX_COMMITS, origin="https://github.com/google/brax.git")
    commits = [{**fx.PLAYGROUND, fx.LOCO_PARAMS: TEMPLATE.format(prelude=prelude, base=base, body=body)}
               for prelude, base, body, _ in CASES.values()]
    commits.append({**fx.PLAYGROUND, fx.LOCO_PARAMS: TEMPLATE.format(
        prelude="", base=BASE, body='  if env_name == "Go1Getup":\n    del rl_config.discounting\n'
                                    '    del rl_config["num_envs"]\n')})
    commits.append({**fx.PLAYGROUND, fx.LOCO_PARAMS: TEMPLATE.format(
        prelude="", base=BASE, body='  match env_name:\n    case str(name) if name.endswith("Getup"):\n'
                                    '      rl_config.discounting = 0.95\n')})
    for body in UNNAMED.values():
        commits.append({**fx.PLAYGROUND, fx.LOCO_PARAMS: TEMPLATE.format(prelude="", base=BASE, body=body)})
    playground = make_repo(root / "playground", commits)
    return {"brax": root / "brax", "playground": root / "playground", "brax_shas": brax,
            "playground_shas": dict(zip([*CASES, "deleted", "unmodelled", *UNNAMED], playground))}


def params(repos, case: str) -> ParamsFunction:
    snapshot = Repository(repos["playground"], "playground").resolve(repos["playground_shas"][case])
    return ParamsFunction(snapshot, "locomotion")


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_shape_gives_what_the_function_returns(repos, case):
    function = params(repos, case)
    getup, spot = function.evaluate("Go1Getup"), function.evaluate("SpotGetup")
    for key, value in CASES[case][3].items():
        assert getup.train[key].value == value, key
    # another environment keeps the base values
    assert spot.train["discounting"].value == 0.97
    assert spot.train["num_envs"].value == 128


def test_a_changed_value_cites_the_line_that_changes_it(repos):
    text = TEMPLATE.format(prelude="", base=BASE, body=CASES["update_kwargs"][2])
    setting = params(repos, "update_kwargs").evaluate("Go1Getup").train["discounting"]
    assert fx.line_of(text, "rl_config.update(discounting=0.95)") in {p.line for p in setting.provenance}
    assert "(override)" in setting.origin


def test_a_deleted_key_is_no_longer_passed(repos):
    config = params(repos, "deleted").evaluate("Go1Getup")
    assert "discounting" not in config.train and "num_envs" not in config.train
    assert "discounting" in params(repos, "deleted").evaluate("SpotGetup").train


def test_a_nested_config_item_is_set(repos):
    network = params(repos, "nested_network_item").evaluate("Go1Getup").network
    assert network["policy_hidden_layer_sizes"].value == (64,)


def test_the_base_config_leaves_every_branch_out(repos):
    for case in ("match", "for_around_branch", "update_kwargs", "helper_condition"):
        assert params(repos, case).evaluate(None).train["discounting"].value == 0.97, case


def test_a_statement_the_engine_does_not_follow_makes_the_keys_it_sets_unknown(repos):
    setting = params(repos, "unmodelled").evaluate("Go1Getup").train["discounting"]
    assert isinstance(setting.value, Code)
    assert "mujoco_playground/config/locomotion_params.py" in setting.value.text
    assert "brax_ppo_config()" in setting.value.text
    # untouched keys keep their values
    assert params(repos, "unmodelled").evaluate("Go1Getup").train["num_envs"].value == 128


def test_the_extractor_reports_a_value_set_inside_unlocked(repos):
    brax = Repository(repos["brax"], "brax").resolve(repos["brax_shas"][1])
    playground = Repository(repos["playground"], "playground").resolve(repos["playground_shas"]["unlocked"])
    extractor = BraxExtractor(brax, playground)
    assert extractor.env("Go1Getup").value("discount") == 0.95
    assert extractor.env("SpotGetup").value("discount") == 0.97


@pytest.mark.parametrize("case, written", [("update_unknown_kwargs", "`**TUNED` is not a known dict"),
                                           ("setattr_unknown_name", "setattr of the name")])
def test_a_write_of_field_names_not_known_makes_every_field_unknown(repos, case, written):
    """Was silently skipped (every field kept its base value): the engine did not make the call
    ``update(**TUNED)``, and ``setattr`` of a name not known wrote nothing."""
    text = TEMPLATE.format(prelude="", base=BASE, body=UNNAMED[case])
    getup = params(repos, case).evaluate("Go1Getup").train
    for key in ("discounting", "num_envs"):
        assert isinstance(getup[key].value, Code), key
        assert written in getup[key].value.text
        assert f"{fx.LOCO_PARAMS}:{fx.line_of(text, 'TUNED' if case.startswith('update') else 'setattr(')}" in \
            getup[key].value.text
    assert params(repos, case).evaluate("SpotGetup").train["discounting"].value == 0.97


@pytest.mark.parametrize("case", sorted(UNNAMED))
def test_a_train_default_behind_a_write_of_unknown_names_is_unknown_not_the_default(repos, case):
    """A config that may hold fields the engine cannot list (``update(**TUNED)``, ``setattr`` of a
    name not known) may set any ``train()`` parameter: one it does not list is unknown, not
    ``train()``'s default; where no such write runs the defaults stand."""
    brax = Repository(repos["brax"], "brax").resolve(repos["brax_shas"][1])
    playground = Repository(repos["playground"], "playground").resolve(repos["playground_shas"][case])
    extractor = BraxExtractor(brax, playground)
    getup = extractor.env("Go1Getup")
    fact = getup.facts["entropy_coef"]  # no config of the fixture sets entropy_cost: train()'s default else
    assert fact.is_unknown and "may hold fields" in fact.unknown and "brax_ppo_config('Go1Getup')" in fact.unknown
    assert extractor.env("SpotGetup").value("entropy_coef") == fx_default_entropy(extractor)


def fx_default_entropy(extractor):
    return extractor.defaults().value("entropy_coef")


def test_a_network_default_behind_a_write_of_unknown_names_is_unknown_too(repos):
    brax = Repository(repos["brax"], "brax").resolve(repos["brax_shas"][1])
    playground = Repository(repos["playground"], "playground").resolve(repos["playground_shas"]["update_unknown_kwargs"])
    fact = BraxExtractor(brax, playground).env("Go1Getup").facts["activation"]  # make_ppo_networks' default
    assert fact.is_unknown and "the config may hold fields not listed" in fact.unknown, fact
