"""The Brax extractor and `brax-diff extract brax`, on hand-written fixture repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import brax_fixtures as fx
from brax_diff.cli import main
from brax_diff.errors import BraxDiffError
from brax_diff.sources.repository import Repository
from brax_diff.facts.vocabulary import KEYS
from brax_diff.extractors.brax.extractor import FAMILIES, BraxExtractor
from gitfixture import make_repo

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("upstream")
    brax_shas = make_repo(root / "brax", fx.BRAX_COMMITS, origin="https://github.com/google/brax.git")
    playground_shas = make_repo(root / "playground", fx.PLAYGROUND_COMMITS)
    return {"brax": root / "brax", "playground": root / "playground",
            "brax_shas": brax_shas, "playground_shas": playground_shas}


def extractor(repos, brax: int = 1, playground: int = 0) -> BraxExtractor:
    return BraxExtractor(Repository(repos["brax"], "brax").resolve(repos["brax_shas"][brax]),
                         Repository(repos["playground"], "playground").resolve(repos["playground_shas"][playground]))


def values(extraction) -> dict:
    return {key: fact.value for key, fact in extraction.facts.items()}


def lines(fact, path: str) -> set[int]:
    return {p.line for p in fact.provenance if p.path == path}


def cli(repos, capsys, *args: str, brax: int = 1, playground: int = 0) -> tuple[int, str, str]:
    argv = ["extract", "brax", "--repo", str(repos["brax"]), "--ref", repos["brax_shas"][brax],
            "--playground-repo", str(repos["playground"]), "--playground-ref", repos["playground_shas"][playground],
            *args]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# -- every key, from the older code shape ---------------------------------------------------
def test_defaults_give_every_key_from_the_code(repos):
    old = extractor(repos, brax=0).defaults()
    assert set(old.facts) == set(KEYS)
    # num_timesteps has no default: the run's length is unknown, and said so; a per-environment key
    # (what train() runs depends on each environment's action repeat), so no finding at this scope
    assert old.facts["training_env_steps"].unknown.startswith("training_env_steps: from train()'s num_timesteps")
    assert old.findings == []
    assert values(old) == {
        "num_envs": 4, "unroll_length": 8,
        "unrolls_per_update": 16 * 4 // 4,  # batch_size * num_minibatches // num_envs
        "transitions_per_update": 4 * 8 * 16, "epochs_per_update": 3, "minibatches_per_epoch": 4,
        "minibatch_transitions": 4 * 8 * 16 // 4, "gradient_steps_per_update": 3 * 4, "gae_horizon": 8,
        "reward_scale": 2.0, "reward_scale_site": "loss",
        "obs_normalization": False, "obs_norm_method": "none", "obs_norm_std_eps": 0.0, "obs_clip": None,
        "value_loss": "mse", "value_loss_coef": 0.25, "value_clipping": None, "value_target_normalization": False,
        "value_hidden_layers": [64, 64, 64], "obs_norm_update": None,
        "gae_lambda": 0.9, "discount": 0.99, "advantage_normalization": True,
        "advantage_normalization_scope": "minibatch", "truncation": "mask_bootstrap_last_state",
        "gae_recompute": "per_minibatch", "advantage_form": "gae", "grad_clip_scope": None,
        "entropy_estimator": "sampled_squashed", "learning_rate": 3e-4, "lr_schedule": "constant", "lr_final_factor": 1.0, "lr_decay_steps": None,
        "adam_eps": 1e-8, "max_grad_norm": None, "entropy_coef": 1e-3, "entropy_schedule": "constant",
        "entropy_coef_final": 1e-3,
        "action_distribution": "tanh_normal", "std_state_dependent": True, "std_transform": "softplus",
        "std_min": 0.001, "std_max": None, "policy_hidden_layers": [64, 64], "activation": "silu",
        "kernel_init": "lecun_uniform", "shared_network": False, "clip_epsilon": 0.2,
        "clip_epsilon_schedule": "constant", "clip_epsilon_final": 0.2,
        # This train() takes no episode_length or action_repeat, and num_timesteps has no default.
        "episode_length": None, "action_repeat": None, "training_env_steps": None,
        "policy_obs_keys": "state", "value_obs_keys": "state", "physics_backend": None,
        # nor num_evals, num_resets_per_eval or deterministic_eval: the evaluation protocol is not read
        "num_resets_per_eval": None, "eval_interval_env_steps": None, "eval_policy": None,
        "env_steps_between_resets": None,
        # The env boundary: NormalTanhDistribution's Squash().forward is tanh(x); JAX's default
        # precision, cited from the fixture Playground's README; the auto-reset discards the final
        # observation; each environment's own step decides the rest (none at this scope).
        "action_bounding": "tanh", "matmul_precision": "tf32", "final_observation": "discarded",
        "env_action_clip": None, "reward_floor": None,
    }
    assert old.facts["eval_policy"].unknown == ("eval_policy: neither the config nor the signature sets "
                                                "train(deterministic_eval=...)")
    assert old.unknown_keys() == []  # the per-environment keys (the run's length among them) are left to each env
    assert old.scope == {"family": None, "env": None}
    assert old.facts["obs_norm_method"].declared == "welford"  # the statistics kept, unused


def test_derived_facts_list_every_input_line(repos):
    old = extractor(repos, brax=0).defaults()
    text = fx.TRAIN_OLD
    unrolls = old.facts["unrolls_per_update"]
    assert lines(unrolls, fx.TRAIN) == {fx.line_of(text, "batch_size: int = 16"),
                                        fx.line_of(text, "num_minibatches: int = 4"),
                                        fx.line_of(text, "num_envs: int = 4"),
                                        fx.line_of(text, "length=batch_size * num_minibatches // num_envs")}
    assert fx.line_of(text, "unroll_length: int = 8") in lines(old.facts["transitions_per_update"], fx.TRAIN)
    coef = old.facts["value_loss_coef"]
    assert lines(coef, fx.LOSSES) == {fx.line_of(fx.LOSSES_OLD, "v_loss = jnp.mean(v_error * v_error) * 0.5 * 0.5")}
    assert lines(old.facts["adam_eps"], fx.TRAIN) == {fx.line_of(text, "optax.adam(")}
    assert lines(old.facts["advantage_normalization_scope"], fx.LOSSES) == {
        fx.line_of(fx.LOSSES_OLD, "advantages.mean()")}
    assert lines(old.facts["kernel_init"], fx.NETWORKS) == {fx.line_of(fx.NETWORKS_TEXT, "kernel_init=jax.nn")}
    assert lines(old.facts["std_min"], fx.DISTRIBUTION) == {fx.line_of(fx.DISTRIBUTION_TEXT, "min_std=0.001"),
                                                             fx.line_of(fx.DISTRIBUTION_TEXT, "softplus")}
    url = old.facts["num_envs"].provenance[0].url
    assert url == f"https://github.com/google/brax/blob/{repos['brax_shas'][0]}/{fx.TRAIN}#L{fx.line_of(text, 'num_envs: int = 4')}"


def test_a_newer_commit_moves_defaults_and_reads_new_parameters(repos):
    old, new = extractor(repos, brax=0).defaults(), extractor(repos, brax=1).defaults()
    assert (old.value("learning_rate"), new.value("learning_rate")) == (3e-4, 1e-3)
    assert new.value("value_loss_coef") == pytest.approx(0.5 * 0.8)  # 0.5 * vf_loss_coefficient
    assert fx.line_of(fx.TRAIN_NEW, "vf_loss_coefficient: float = 0.8") in lines(new.facts["value_loss_coef"], fx.TRAIN)
    assert new.value("adam_eps") == 1e-6
    assert new.value("max_grad_norm") == 0.7
    assert new.value("kernel_init") == "orthogonal"  # policy_network_kernel_init_fn now decides
    assert new.value("obs_norm_std_eps") == 1e-5
    assert (new.value("obs_norm_method"), new.facts["obs_norm_method"].declared) == ("none", "ema")
    assert new.value("truncation") == "mask_bootstrap_last_state"  # bootstrap_on_timeout defaults to False
    assert new.value("grad_clip_scope") == "global"  # the clip is chained into the one optimizer
    assert new.sources["brax"].commit == repos["brax_shas"][1]


# -- layering --------------------------------------------------------------------------------
def test_family_config_layers_over_signature_defaults(repos):
    dm = extractor(repos).family("dm_control")
    assert dm.scope == {"family": "dm_control", "env": None}
    assert {k: dm.value(k) for k in ("num_envs", "unroll_length", "unrolls_per_update", "transitions_per_update",
                                     "minibatches_per_epoch", "minibatch_transitions", "epochs_per_update",
                                     "gradient_steps_per_update", "gae_horizon", "reward_scale", "discount",
                                     "learning_rate", "obs_normalization", "obs_norm_method")} == {
        "num_envs": 64, "unroll_length": 30, "unrolls_per_update": 32 * 8 // 64,
        "transitions_per_update": 64 * 30 * 4, "minibatches_per_epoch": 8, "minibatch_transitions": 64 * 30 * 4 // 8,
        "epochs_per_update": 4, "gradient_steps_per_update": 32, "gae_horizon": 30, "reward_scale": 5.0,
        "discount": 0.99, "learning_rate": 2e-3, "obs_normalization": True, "obs_norm_method": "ema"}
    assert dm.value("clip_epsilon") == 0.2  # not in the config: train()'s default
    assert lines(dm.facts["reward_scale"], fx.DM_PARAMS) == {fx.line_of(fx.DM_PARAMS_TEXT, "reward_scaling=5.0")}
    assert lines(dm.facts["clip_epsilon"], fx.TRAIN) >= {fx.line_of(fx.TRAIN_NEW, "clipping_epsilon: float = 0.2")}
    assert set(dm.facts) == set(KEYS)


def test_network_factory_create_and_replacement(repos):
    ex = extractor(repos)
    loco = ex.family("locomotion")
    assert (loco.value("policy_hidden_layers"), loco.value("value_hidden_layers")) == ([128, 128], [256, 256])
    assert loco.value("unrolls_per_update") == 64 * 4 // 128
    getup = ex.env("Go1Getup")
    # the branch replaces network_factory wholesale: value layers fall back to make_ppo_networks()
    assert (getup.value("policy_hidden_layers"), getup.value("value_hidden_layers")) == ([512, 256], [64, 64, 64])
    assert lines(getup.facts["value_hidden_layers"], fx.PPO_NETWORKS) == {
        fx.line_of(fx.PPO_NETWORKS_NEW, "value_hidden_layer_sizes=(64,) * 3")}
    cartesian = ex.env("PandaPickCubeCartesian")
    assert cartesian.value("policy_hidden_layers") == [256, 256]  # rl_config.network_factory.x = ...
    assert (cartesian.value("num_envs"), cartesian.value("reward_scale"), cartesian.value("unrolls_per_update")) == (
        32, 0.1, 16 * 4 // 32)


@pytest.mark.parametrize("env, key, value", [
    ("BallInCup", "discount", 0.95),  # ==
    ("CheetahRun", "learning_rate", 3e-4),  # in (...)
    ("WalkerRun", "learning_rate", 3e-4),
    ("FingerTurnEasy", "entropy_coef", 0.02),  # startswith and !=
    ("FingerSpin", "entropy_coef", 1e-3),  # excluded by != : train() default
    ("AcrobotSwingup", "unrolls_per_update", 32 * 8 // 128),  # a separate if before the chain
    ("PendulumSwingup", "epochs_per_update", 4),  # the misspelt branch does not fire
    ("PandaPickCubeOrientation", "num_envs", 16),  # startswith after an == branch
    ("PandaPickCubeCartesian", "num_envs", 32),
])
def test_env_overrides(repos, env, key, value):
    extraction = extractor(repos).env(env)
    assert extraction.scope["env"] == env
    assert extraction.value(key) == value


def test_override_provenance_points_at_the_branch(repos):
    ball = extractor(repos).env("BallInCup")
    assert lines(ball.facts["discount"], fx.DM_PARAMS) == {fx.line_of(fx.DM_PARAMS_TEXT, "rl_config.discounting = 0.95")}


# -- findings --------------------------------------------------------------------------------
def test_dead_branches_are_reported_with_their_condition_line(repos):
    ex = extractor(repos)
    dm_dead = [f for f in ex.family("dm_control").findings if f.kind == "dead_branch"]
    assert len(dm_dead) == 1 and dm_dead[0].severity == "WARNING"
    assert dm_dead[0].provenance[0].line == fx.line_of(fx.DM_PARAMS_TEXT, 'env_name == "PendulumSwingUp"')
    assert "PendulumSwingup" in dm_dead[0].message  # the registered spelling is suggested
    loco_dead = [f for f in ex.family("locomotion").findings if f.kind == "dead_branch"]
    assert [f.provenance[0].line for f in loco_dead] == [fx.line_of(fx.LOCO_PARAMS_TEXT, '"Go1Backflip"')]
    assert not [f for f in ex.family("manipulation").findings if f.kind == "dead_branch"]
    # a live branch naming one unregistered env is only INFO
    infos = [f for f in ex.family("locomotion").findings if f.kind == "unregistered_env_name"]
    assert [f.severity for f in infos] == ["INFO"] and "SpotHandstand" in infos[0].message
    # the env scope carries its family's dead branches
    assert any(f.kind == "dead_branch" for f in ex.env("BallInCup").findings)


def test_env_rejected_by_else_raise(repos):
    walk = extractor(repos).env("H1Walk")
    rejected = [f for f in walk.findings if f.kind == "env_rejected"]
    assert len(rejected) == 1 and rejected[0].provenance[0].line == fx.line_of(fx.LOCO_PARAMS_TEXT, "raise ValueError")
    assert any(f.kind == "base_config_incomplete" for f in extractor(repos).family("manipulation").findings)


def test_registry_is_read_statically(repos):
    ex = extractor(repos)
    assert ex.families() == list(FAMILIES)
    assert ex.environments("dm_control") == ["AcrobotSwingup", "BallInCup", "CheetahRun", "FingerSpin",
                                             "FingerTurnEasy", "PendulumSwingup", "WalkerRun"]
    assert ex.environments("manipulation") == ["PandaPickCube", "PandaPickCubeCartesian", "PandaPickCubeOrientation"]
    assert ex.family_of("SpotGetup") == "locomotion"
    with pytest.raises(BraxDiffError, match="PendulumSwingup"):
        ex.family_of("PendulumSwingUp")


def test_playground_ref_that_moves_a_value(repos):
    before, after = extractor(repos, playground=0).family("dm_control"), extractor(repos, playground=1).family("dm_control")
    assert (before.value("unroll_length"), after.value("unroll_length")) == (30, 25)
    assert (before.value("transitions_per_update"), after.value("transitions_per_update")) == (64 * 30 * 4, 64 * 25 * 4)
    assert after.value("gae_horizon") == 25


def test_refactored_function_is_a_finding_not_a_crash(repos):
    refactored = extractor(repos, brax=2).family("dm_control")
    missing = [f for f in refactored.findings if f.kind == "pattern_not_found"]
    assert missing and all(f.severity == "WARNING" for f in missing)
    assert any("unrolls_per_update" in f.message and fx.TRAIN in f.message for f in missing)
    # The commit is the extraction's source, never the message's: the same blobs at another commit say the same.
    assert refactored.sources["brax"].commit == repos["brax_shas"][2]
    assert not any(sha[:7] in f.message for f in refactored.findings for sha in repos["brax_shas"])
    for gone in ("unrolls_per_update", "transitions_per_update", "epochs_per_update"):
        fact = refactored.facts[gone]  # still there: null, saying why, with a finding for the key
        assert fact.value is None and "training_step() not found in train()" in (fact.unknown or "")
        assert [f.message for f in missing if f.key == gone] == [fact.unknown]
        assert fact.to_json()["unknown"] == fact.unknown and fact.to_json()["value"] is None
    assert set(refactored.facts) == set(KEYS)
    assert refactored.value("learning_rate") == 2e-3 and refactored.value("value_loss_coef") == pytest.approx(0.4)
    assert refactored.value("num_envs") == 64 and refactored.value("minibatches_per_epoch") == 8


# -- CLI ---------------------------------------------------------------------------------------
def test_cli_json_shape(repos, capsys):
    code, out, err = cli(repos, capsys, "--env", "BallInCup", "--format", "json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert set(data) == {"side", "sources", "scope", "facts", "findings"}
    assert data["side"] == "brax" and data["scope"] == {"family": "dm_control", "env": "BallInCup"}
    assert set(data["sources"]) == {"brax", "playground"}
    assert data["sources"]["brax"]["commit"] == repos["brax_shas"][1]
    assert {"repo", "commit", "date"} <= set(data["sources"]["playground"])
    assert set(data["facts"]) == set(KEYS)
    fact = data["facts"]["discount"]
    assert fact["value"] == 0.95
    assert set(fact["provenance"][0]) == {"repo", "commit", "path", "line"}
    finding = data["findings"][0]
    assert {"kind", "severity", "message", "provenance"} <= set(finding)


def test_cli_without_scope_prints_all_families_deterministically(repos, capsys):
    first = cli(repos, capsys, "--format", "json")
    second = cli(repos, capsys, "--format", "json")
    assert first == second and first[0] == 0
    assert [e["scope"]["family"] for e in json.loads(first[1])] == list(FAMILIES)
    table = cli(repos, capsys)
    assert table == cli(repos, capsys) and "unrolls_per_update" in table[1] and "dead_branch" in table[1]


def test_cli_defaults_scope(repos, capsys):
    code, out, _ = cli(repos, capsys, "--defaults", "--format", "json", brax=0)
    data = json.loads(out)
    assert code == 0 and data["scope"] == {"family": None, "env": None}
    assert data["facts"]["learning_rate"]["value"] == 3e-4


def test_cli_strict_exits_1_on_missing_pattern(repos, capsys):
    code, out, err = cli(repos, capsys, "--family", "dm_control", brax=2)
    assert code == 0 and "pattern_not_found" in out
    code, out, err = cli(repos, capsys, "--family", "dm_control", "--strict", brax=2)
    assert code == 1 and err.startswith("error: --strict") and len(err.strip().splitlines()) == 1
    assert cli(repos, capsys, "--family", "dm_control", "--strict", brax=1)[0] == 0


@pytest.mark.parametrize("args, brax, playground, expected", [
    (["--env", "PendulumSwingUp"], 1, 0, "not a registered Playground environment"),
    (["--family", "dm_control"], 3, 0, fx.LOSSES),  # file deleted at that Brax commit
    (["--family", "manipulation"], 1, 2, fx.MANIP_PARAMS),  # file deleted at that Playground commit
    (["--family", "quadrupeds"], 1, 0, "unknown Playground family"),
    (["--family", "dm_control", "--env", "BallInCup"], 1, 0, "choose one of"),
    (["--format", "yaml"], 1, 0, "unknown --format"),
])
def test_cli_bad_input_is_one_line_exit_2(repos, capsys, args, brax, playground, expected):
    code, out, err = cli(repos, capsys, *args, brax=brax, playground=playground)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and expected in err
    assert "Traceback" not in err


def test_cli_missing_file_names_repo_ref_and_path(repos, capsys):
    code, _, err = cli(repos, capsys, "--family", "dm_control", brax=3)
    assert code == 2 and repos["brax_shas"][3] in err and str(repos["brax"]) in err and fx.LOSSES in err


@pytest.mark.parametrize("flag", ["--ref", "--playground-ref"])
def test_cli_bad_ref(repos, capsys, flag):
    argv = ["extract", "brax", "--repo", str(repos["brax"]), "--playground-repo", str(repos["playground"]),
            "--family", "dm_control", flag, "no-such-ref"]
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 2 and "no-such-ref" in err and len(err.strip().splitlines()) == 1


def test_cli_bad_repo_path(repos, capsys, tmp_path):
    code = main(["extract", "brax", "--repo", str(tmp_path / "nowhere"), "--defaults"])
    _, err = capsys.readouterr()
    assert code == 2 and "nowhere" in err and len(err.strip().splitlines()) == 1


def test_config_keys_the_brax_function_does_not_accept(repos):
    # the fixture train() has no episode_length parameter: upstream this would be a TypeError
    unknown = [f for f in extractor(repos).family("dm_control").findings if f.kind == "unknown_parameter"]
    assert [f.severity for f in unknown] == ["WARNING"] and "'episode_length'" in unknown[0].message
    assert unknown[0].provenance[0].line == fx.line_of(fx.DM_PARAMS_TEXT, "episode_length=")


def test_obs_norm_eps_site_is_read_from_running_statistics(repos):
    fact = extractor(repos, brax=1).defaults().facts["obs_norm_std_eps"]
    assert fact.value == 1e-5 and "variance inside the sqrt" in fact.note and "1e-06" in fact.note


def test_normal_distribution_reads_the_std_options(repos):
    normal = extractor(repos).env("PandaPickCube")
    assert {k: normal.value(k) for k in ("action_distribution", "std_state_dependent", "std_transform", "std_min",
                                         "std_max")} == {
        "action_distribution": "normal", "std_state_dependent": True, "std_transform": "exp", "std_min": None,
        "std_max": None}
    assert lines(normal.facts["std_transform"], fx.MANIP_PARAMS) == {fx.line_of(fx.MANIP_PARAMS_TEXT, 'noise_std_type="log"')}


def test_conditions_on_other_arguments_are_not_guessed(repos):
    spot = extractor(repos).env("SpotGetup")
    assert spot.value("num_envs") == 128  # `impl == "warp"` is not decided statically: not taken
    unknown = [f for f in spot.findings if f.kind == "unevaluated_condition"]
    assert [f.severity for f in unknown] == ["INFO"]
    assert unknown[0].provenance[0].line == fx.line_of(fx.LOCO_PARAMS_TEXT, 'impl == "warp"')
    assert not [f for f in extractor(repos).family("locomotion").findings
                if f.kind == "dead_branch" and "warp" in f.message]


# -- limits (issue 12) ------------------------------------------------------------------------

@pytest.mark.parametrize("replacement, message", [
    ("    num_envs: int = 10**10**10,\n", "10 ** 10000000000 has more than 100 digits (limit)"),
    ("    num_envs: int = " + "9" * 5001 + ",\n", "an integer of 5001 digits; the limit is 100"),
    ("    num_envs: int = " + "(" * 5000 + "4" + ")" * 5000 + ",\n", "nesting deeper than 64 levels (limit)"),
])
def test_a_train_default_past_a_limit_is_one_line_and_fast(tmp_path, replacement, message):
    # 10**10**10 hung; 5,001 digits was a ValueError; 5,000 parentheses crashed libcst (SIGSEGV).
    # Run as a process of its own, so the old behaviour fails the test instead of the run.
    train = fx.TRAIN_OLD.replace("    num_envs: int = 4,\n", replacement)
    assert train != fx.TRAIN_OLD
    brax = make_repo(tmp_path / "brax", [{**fx.BRAX_OLD, fx.TRAIN: train}])
    make_repo(tmp_path / "playground", fx.PLAYGROUND_COMMITS[:1])
    done = subprocess.run([sys.executable, "-m", "brax_diff", "extract", "brax", "--repo", str(tmp_path / "brax"),
                           "--ref", brax[0], "--playground-repo", str(tmp_path / "playground"), "--defaults"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    assert done.stderr == f"error: {fx.TRAIN}: line {fx.line_of(train, 'num_envs: int =')}: {message}\n"
