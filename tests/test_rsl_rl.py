"""The RSL-RL side on hand-written repositories shaped like rsl-rl-lib 3.x and Playground:
every canonical key read with its lines, a dead branch, a layout the readers do not know
(unknown with a finding), and `report --against rsl-rl` end to end."""

from __future__ import annotations

import json

import pytest

import brax_fixtures as bfx
import rsl_rl_fixtures as fx
from brax_fixtures import line_of
from gitfixture import make_repo

from brax_diff.cli import main
from brax_diff.config import Settings
from brax_diff.extractors.rsl_rl import FAMILIES, RslRlExtractor
from brax_diff.facts.scope import RSL_RL_FAMILIES
from brax_diff.sources.repository import Repository
from brax_diff.facts.vocabulary import KEYS


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("rsl")
    return {
        "brax": make_repo(root / "brax", bfx.BRAX_COMMITS) and root / "brax",
        "playground": make_repo(root / "playground", [fx.PLAYGROUND_RSL]) and root / "playground",
        "rsl_rl": root / "rsl_rl", "rsl_rl_shas": make_repo(root / "rsl_rl", [fx.RSL_RL, fx.RSL_RL_MOVED]),
    }


def extractor(repos, rsl: int = 0) -> RslRlExtractor:
    return RslRlExtractor(Repository(repos["rsl_rl"], "rsl_rl").resolve(repos["rsl_rl_shas"][rsl]),
                          Repository(repos["playground"], "playground").resolve("HEAD"))


def lines(fact) -> set[tuple[str, int]]:
    return {(p.path, p.line) for p in fact.provenance}


def test_every_canonical_key_is_read_from_config_script_wrapper_and_library(repos):
    x = extractor(repos).family("locomotion")
    assert set(x.facts) == set(KEYS)
    values = {k: f.value for k, f in x.facts.items()}
    loco = fx.LOCO_PARAMS_TEXT + fx.LOCO_RSL_TEXT
    assert values["num_envs"] == 512 and values["unroll_length"] == 16 and values["unrolls_per_update"] == 1
    assert values["transitions_per_update"] == 512 * 16 and values["minibatch_transitions"] == 512 * 16 // 2
    assert (values["epochs_per_update"], values["minibatches_per_epoch"], values["gradient_steps_per_update"]) == (3, 2, 6)
    assert (values["discount"], values["gae_lambda"], values["clip_epsilon"], values["entropy_coef"]) == (0.98, 0.9, 0.25, 0.005)
    assert values["value_loss_coef"] == 2.0 and values["value_clipping"] == 0.25 and values["value_loss"] == "mse"
    assert values["policy_hidden_layers"] == [64, 32] and values["value_hidden_layers"] == [128, 64]
    assert values["activation"] == "elu" and values["kernel_init"] == "kaiming_uniform"
    assert values["learning_rate"] == 5e-4 and values["lr_schedule"] == "constant" and values["lr_final_factor"] == 1.0
    assert values["max_grad_norm"] == 0.5 and values["grad_clip_scope"] == "global" and values["adam_eps"] == 1e-8
    assert values["truncation"] == "bootstrap_current_state" and values["gae_recompute"] == "per_update"
    assert values["advantage_form"] == "gae"  # returns - values of the lambda-recursion
    assert values["advantage_normalization_scope"] == "batch" and values["advantage_normalization"] is True
    assert values["obs_normalization"] is True and values["obs_norm_std_eps"] == 0.05 and values["obs_clip"] is None
    assert values["obs_norm_update"] == "per_env_step" and values["obs_norm_method"] == "welford"
    assert values["action_distribution"] == "normal" and values["std_state_dependent"] is False
    assert values["std_transform"] == "other" and values["entropy_estimator"] == "analytic"
    assert values["shared_network"] is False and values["reward_scale"] == 1.0 and values["reward_scale_site"] == "none"
    assert values["training_env_steps"] == 50 * 16 * 512
    assert values["action_repeat"] == 1 and values["physics_backend"] == "jax" and values["policy_obs_keys"] == "state"
    # where they come from: the config, the script, the wrapper, the library
    assert lines(x.facts["discount"]) == {(bfx.LOCO_PARAMS, line_of(loco, "gamma=0.98"))}
    assert (fx.SCRIPT, line_of(fx.SCRIPT_TEXT, '"num_envs", 512')) in lines(x.facts["num_envs"])
    assert (fx.WRAPPER, line_of(fx.WRAPPER_TEXT, '"time_outs": truncation')) in lines(x.facts["truncation"])
    assert (fx.PPO, line_of(fx.PPO_TEXT, "self.transition.rewards += self.gamma")) in lines(x.facts["truncation"])
    assert (fx.WRAPPER, line_of(fx.WRAPPER_TEXT, "torch.clip(action, -0.5, 0.5)")) in lines(x.facts["action_distribution"])
    assert "[-0.5, 0.5]" in x.facts["action_distribution"].note
    # the env boundary: the wrapper's clip; nothing sets TF32, so torch's float32 default at `import torch`
    assert values["action_bounding"] == "clip" and values["matmul_precision"] == "float32"
    assert lines(x.facts["matmul_precision"]) == {(fx.SCRIPT, line_of(fx.SCRIPT_TEXT, "import torch"))}
    # the score: the training episodes' returns the logger keeps, logged once per iteration; no resets
    env = extractor(repos).env("Go1JoystickFlatTerrain")
    assert (env.value("eval_policy"), env.value("num_resets_per_eval"), env.value("env_steps_between_resets")) == (
        "training_episodes", 0, 0)
    assert env.value("eval_interval_env_steps") == 16 * 512  # num_steps_per_env x num_envs
    assert (fx.LOGGER, line_of(fx.LOGGER_TEXT, "self.rewbuffer.extend")) in lines(env.facts["eval_policy"])
    assert (fx.RUNNER, line_of(fx.RUNNER_TEXT, "self.env.step(actions)")) in lines(env.facts["num_resets_per_eval"])
    # what each environment decides is left to it; what runs only at run time is an explained unknown
    assert x.facts["episode_length"].is_unknown and x.unknown_keys() == []
    assert x.facts["value_obs_keys"].is_unknown and "observation_size" in x.facts["value_obs_keys"].unknown


def test_a_key_the_config_leaves_out_takes_the_library_default(repos):
    x = extractor(repos).family("manipulation")
    assert x.facts["value_loss_coef"].value == 1.5  # PPO.__init__'s default in the fixture
    assert lines(x.facts["value_loss_coef"]) == {(fx.PPO, line_of(fx.PPO_TEXT, "value_loss_coef=1.5"))}
    assert x.facts["lr_schedule"].value == "adaptive_kl" and x.facts["lr_final_factor"].value is None
    assert x.facts["obs_normalization"].value is False and x.facts["obs_norm_update"].value is None
    assert x.facts["policy_hidden_layers"].value == [16] and x.facts["num_envs"].value == 512


def test_env_branches_apply_and_a_misspelt_branch_is_dead(repos):
    rsl = extractor(repos)
    assert rsl.env("SpotGetup").facts["discount"].value == 0.95
    assert rsl.env("Go1Getup").facts["training_env_steps"].value == 10 * 16 * 512
    assert rsl.env("H1Walk").facts["training_env_steps"].value == 50 * 16 * 512
    dead = [f for f in rsl.family("locomotion").findings if f.kind == "dead_branch"]
    assert len(dead) == 1 and "'Go1JoyStickFlatTerrain' looks like registered 'Go1JoystickFlatTerrain'" in dead[0].message
    assert dead[0].provenance[0].line == line_of(fx.LOCO_PARAMS_TEXT + fx.LOCO_RSL_TEXT, 'env_name == "Go1JoyStick')
    # A live branch's name that no env has (upstream's "G1Joystick"): the env it looks like misses the setting.
    # "Spot" is matched as a prefix (.startswith) and begins SpotGetup: no finding.
    names = [f for f in rsl.family("locomotion").findings if f.kind == "unregistered_env_name"]
    assert [(f.severity, f.provenance[0].line) for f in names] == [
        ("WARNING", line_of(fx.LOCO_PARAMS_TEXT + fx.LOCO_RSL_TEXT, '"Go1Joystick"):'))]
    assert names[0].message.endswith("is not a registered locomotion env (it looks like registered "
                                     "'Go1JoystickFlatTerrain', which the branch does not reach)")
    assert rsl.env("Go1JoystickFlatTerrain").facts["training_env_steps"].value == 10 * 16 * 512


def test_a_layout_the_readers_do_not_know_is_unknown_with_a_finding(repos):
    x = extractor(repos, rsl=1).family("locomotion")
    assert x.facts["truncation"].is_unknown
    assert "rsl_rl/algorithms/ppo.py: PPO.process_env_step" in x.facts["truncation"].unknown
    assert x.facts["std_transform"].is_unknown and "rsl_rl/modules/actor_critic.py not found" in x.facts[
        "std_transform"].unknown
    keys = {f.key for f in x.findings if f.kind == "pattern_not_found"}
    assert {"truncation", "std_transform", "action_distribution", "entropy_estimator"} <= keys
    assert x.facts["discount"].value == 0.98  # what the config gives is still read


def test_the_families_agree_across_the_package():
    assert Settings().rsl_rl_ref is None  # the release Playground pins, read at its ref
    assert tuple(FAMILIES) == RSL_RL_FAMILIES
    from brax_diff.extractors.brax.extractor import FAMILIES as BRAX_FAMILIES
    from brax_diff.extractors.mapping import FAMILIES as MAPPED
    from brax_diff.facts.scope import PLAYGROUND_FAMILIES

    assert BRAX_FAMILIES == MAPPED == PLAYGROUND_FAMILIES  # the config modules Playground has, everywhere


# Shaped like Playground's uv.lock: the package table rsl-rl-lib's pin sits in, among others.
LOCK = """
version = 1
requires-python = ">=3.10"

[[package]]
name = "rsl-rl-lib"
version = "{version}"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "playground"
version = "0.1.0"
source = {{ editable = "." }}
dependencies = [
    {{ name = "rsl-rl-lib" }},
]
"""


def test_without_a_ref_rsl_rl_is_read_at_the_release_playground_pins(tmp_path, capsys):
    import subprocess

    root = tmp_path
    rsl = make_repo(root / "rsl_rl", [fx.RSL_RL, fx.RSL_RL_MOVED])
    subprocess.run(["git", "-C", str(root / "rsl_rl"), "tag", "v3.2.0", rsl[0]], check=True)
    make_repo(root / "playground", [{**fx.PLAYGROUND_RSL, "uv.lock": LOCK.format(version="3.2.0")},
                                    {"uv.lock": LOCK.format(version="3.2.0") + '[[package]]\nname = "rsl-rl-lib"\n'
                                                                               'version = "9.9"\n'},
                                    {"uv.lock": None}])
    base = ["extract", "rsl-rl", "--rsl-rl-repo", str(root / "rsl_rl"), "--playground-repo", str(root / "playground"),
            "--env", "SpotGetup", "--format", "json"]
    assert main(base + ["--playground", "HEAD~2"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    out = out[0] if isinstance(out, list) else out
    assert out["sources"]["rsl_rl"]["commit"] == rsl[0] and out["sources"]["rsl_rl"]["ref"] == "v3.2.0"
    assert main(base + ["--playground", "HEAD~1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: rsl_rl: no default ref: Playground's uv.lock at HEAD~1 ("
                   f"{_sha(root / 'playground', 'HEAD~1')[:12]}) pins rsl-rl-lib 3.2.0 and 9.9; give --rsl-rl REF "
                   "(an rsl_rl tag such as v3.3.0)"]
    assert main(base + ["--playground", "HEAD"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: rsl_rl: no default ref: Playground's uv.lock at HEAD (") and "does not exist" in err
    assert main(base + ["--playground", "HEAD", "--rsl-rl", rsl[1]]) == 0, capsys.readouterr().err  # given: used


def _sha(repo, ref: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "rev-parse", ref], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_report_against_rsl_rl_end_to_end(repos, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["report", "--against", "rsl-rl", "--family", "locomotion", "--brax-repo", str(repos["brax"]),
            "--brax", "HEAD~2", "--playground-repo", str(repos["playground"]), "--playground", "HEAD",
            "--rsl-rl-repo", str(repos["rsl_rl"]), "--rsl-rl", repos["rsl_rl_shas"][0], "--output", str(out),
            "--quiet"]
    assert main(args) == 0, capsys.readouterr().err
    model = json.loads((out / "locomotion.json").read_text())
    assert model["against"]["title"] == "RSL-RL" and model["slm"]["side"] == "rsl_rl"
    assert {s["name"] for s in model["sources"]} == {"brax", "playground", "rsl_rl"}
    by_key = {d["key"]: d for d in model["differences"]}
    assert by_key["discount"]["slm"]["value"] == 0.98 and by_key["discount"]["status"] == "differs"
    assert "vs RSL-RL 0.98" in by_key["discount"]["reason"]
    assert all(d["fix"] is None for d in model["differences"])  # no SLM-Lab spec to set
    assert sorted(r["env"] for r in model["matrix"]["rows"]) == ["Go1Getup", "Go1JoystickFlatTerrain", "H1Walk",
                                                                 "SpotGetup"]
    text = (out / "locomotion.md").read_text()
    assert text.startswith("# Brax PPO vs RSL-RL PPO: locomotion") and "| Key | Brax | RSL-RL |" in text
    assert "SLM-Lab variant" not in text and "Brax 0.99, RSL-RL 0.98" in text
    # No sentence calls RSL-RL's values SLM-Lab's: only rationales written for SLM-Lab name it, and say so;
    # no spec-change risk is offered for a side with no spec.
    naming = [line for line in text.splitlines() if "SLM-Lab" in line]
    assert naming and all("(Written for Brax vs SLM-Lab.)" in line for line in naming), naming
    assert "- Risk (" not in text
    assert "https://github.com/leggedrobotics/rsl_rl/blob/" in text
    assert main(args + ["--check"]) == 0  # the same inputs give the same files
    assert main(["report", "--against", "rsl-rl", "--env", "BallInCup", "--brax-repo", str(repos["brax"]),
                 "--playground-repo", str(repos["playground"]), "--rsl-rl-repo", str(repos["rsl_rl"]), "--rsl-rl", "HEAD",
                 "--output", str(out)]) == 2
    assert "no RSL-RL config" in capsys.readouterr().err


def test_a_rule_written_for_one_side_says_so_against_another(tmp_path):
    from brax_diff.compare.pairing import Difference
    from brax_diff.errors import ConfigError
    from brax_diff.facts.model import Fact
    from brax_diff.compare.rules import classify, load_rules

    table = load_rules()
    assert table.get("BD040").sides == ("slm",) and table.get("BD033").sides == ()
    difference = Difference("truncation", "advantages", "differs", Fact("truncation", "mask_bootstrap_last_state"),
                            Fact("truncation", "bootstrap_current_state"))
    against_slm, = classify([difference], table)
    against_rsl, = classify([difference], table, side="rsl_rl", fixes=False)
    assert against_rsl.severity == against_slm.severity and against_rsl.rule == "BD040"
    assert against_rsl.rationale == "(Written for Brax vs SLM-Lab.) " + against_slm.rationale
    # A reason names the side compared (it said "SLM-Lab's value is 1.0" of RSL-RL's value)
    coef = Difference("value_loss_coef", "value", "differs", Fact("value_loss_coef", 0.25),
                      Fact("value_loss_coef", 1.0))
    clip = Difference("max_grad_norm", "optimizer", "match", Fact("max_grad_norm", None), Fact("max_grad_norm", 1.0))
    by_side = {side: classify([coef, clip], table, side=side, fixes=False)[0].because for side in ("slm", "rsl_rl")}
    assert by_side == {side: f"one value is at least 2x the other and for `max_grad_norm`, {name}'s value is 1.0"
                       for side, name in (("slm", "SLM-Lab"), ("rsl_rl", "RSL-RL"))}
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules:\n  - code: BD033\n    sides: [cleanrl]\n")
    with pytest.raises(ConfigError, match="`sides` must be a list of sides"):
        load_rules(bad)


def test_history_walks_rsl_rl_on_playground_configs(repos, capsys):
    """`history --rsl-rl A..B`: the commit that drops actor_critic.py and the timeout bootstrap is
    listed with the keys it changes, each old value with its line (issue 25: history for the third side)."""
    first, second = repos["rsl_rl_shas"]
    assert main(["history", "--rsl-rl", f"{first}..{second}", "--family", "locomotion", "--format", "json",
                 "--playground-repo", str(repos["playground"]), "--rsl-rl-repo", str(repos["rsl_rl"]), "-q"]) == 0
    walk, = json.loads(capsys.readouterr().out)["walks"]
    commit, = walk["commits"]
    assert commit["sha"] == second
    changes = {c["key"]: c for scope in commit["scopes"] for c in scope["changes"]}
    assert changes["action_distribution"]["old"]["value"] == "normal"
    assert changes["action_distribution"]["new"]["value"] is None  # actor_critic.py is gone: unknown, not a default
    assert any(link.endswith("rsl_rl/modules/actor_critic.py#L23") for link in changes["action_distribution"]["old"]["links"])
    assert changes["truncation"]["old"]["value"] == "bootstrap_current_state"


def test_history_refuses_an_slm_variant_on_the_rsl_rl_side(repos, capsys):
    assert main(["history", "--rsl-rl", "HEAD", "--variant", "ppo_playground", "--playground-repo",
                 str(repos["playground"]), "--rsl-rl-repo", str(repos["rsl_rl"]), "-q"]) == 2
    assert capsys.readouterr().err == ("error: --variant is an SLM-Lab spec variant; walk RSL-RL with --family or "
                                       "--env\n")


def test_a_runner_that_resets_or_is_missing_leaves_the_evaluation_keys_unknown_naming_the_file(tmp_path):
    from brax_diff.extractors.rsl_rl.evaluation import read_learn
    from brax_diff.sources.repository import Repository
    from gitfixture import make_repo

    resets = fx.RUNNER_TEXT.replace("            self.alg.compute_returns(obs)\n",
                                    "            obs = self.env.reset()\n            self.alg.compute_returns(obs)\n")
    make_repo(tmp_path / "a", [{fx.RUNNER: resets, fx.LOGGER: fx.LOGGER_TEXT}])
    found = read_learn(Repository(tmp_path / "a", "a").resolve("HEAD"))
    assert found.resets == (line_of(resets, "obs = self.env.reset()"),) and found.why is None
    make_repo(tmp_path / "b", [{"rsl_rl/__init__.py": ""}])
    assert read_learn(Repository(tmp_path / "b", "b").resolve("HEAD")).why == (
        "rsl_rl/runners/on_policy_runner.py defines no OnPolicyRunner.learn at this ref")


# -- model sections: can rsl_rl at this ref build what train_rsl_rl.py hands it? ------------------
# The 4.0+ shape: the runner hands the whole config to PPO.construct_algorithm, which builds
# the actor and the critic from sections of their own.
RUNNER_4 = '''
class OnPolicyRunner:
    def __init__(self, env, train_cfg, log_dir=None, device="cpu"):
        self.cfg = train_cfg
        alg_class = resolve_callable(self.cfg["algorithm"]["class_name"])
        self.alg = alg_class.construct_algorithm(obs, self.env, self.cfg, self.device)

    def learn(self, num_learning_iterations, init_at_random_ep_len=False):
        for it in range(num_learning_iterations):
            for _ in range(self.cfg["num_steps_per_env"]):
                obs, rewards, dones, extras = self.env.step(actions)
            self.alg.compute_returns(obs)
            loss_dict = self.alg.update()
'''
CONSTRUCT = '''

    @staticmethod
    def construct_algorithm(obs, env, cfg, device):
        actor_class = resolve_callable(cfg["actor"].pop("class_name"))
        critic_class = resolve_callable(cfg["critic"].pop("class_name"))
        if "rnd_cfg" in cfg["algorithm"] and cfg["algorithm"]["rnd_cfg"] is not None:
            pass
'''
# Shaped like Playground's pull/275: the 3.x `policy` section turned into 4.0's actor/critic.
CONVERTED = '''  train_cfg_dict = train_cfg.to_dict()
  if "policy" in train_cfg_dict and "actor" not in train_cfg_dict:
    policy = train_cfg_dict.pop("policy")
    train_cfg_dict["actor"] = {"class_name": "MLPModel", "hidden_dims": policy.get("actor_hidden_dims")}
    train_cfg_dict["critic"] = {"class_name": "MLPModel", "hidden_dims": policy.get("critic_hidden_dims")}
  runner = OnPolicyRunner(brax_env, train_cfg_dict, "/tmp", device="cpu")
'''
INLINE = '''  runner = OnPolicyRunner(brax_env, train_cfg.to_dict(), "/tmp", device="cpu")
'''


def _sections_case(tmp_path, runner_4: bool, script: str):
    rsl = {**fx.RSL_RL, fx.RUNNER: RUNNER_4, fx.PPO: fx.PPO_TEXT + CONSTRUCT} if runner_4 else fx.RSL_RL
    rsl_sha = make_repo(tmp_path / "rsl_rl", [rsl])[0]
    make_repo(tmp_path / "playground", [{**fx.PLAYGROUND_RSL, fx.SCRIPT: fx.SCRIPT_TEXT.replace(INLINE, script)}])
    assert INLINE in fx.SCRIPT_TEXT
    x = RslRlExtractor(Repository(tmp_path / "rsl_rl", "rsl_rl").resolve(rsl_sha),
                       Repository(tmp_path / "playground", "playground").resolve("HEAD")).env("SpotGetup")
    return [f for f in x.findings if f.kind == "cannot_train" or "model sections" in f.message]


def test_a_section_the_runner_reads_and_the_script_does_not_pass_is_cannot_train(tmp_path):
    # 3.x runner, the 3.x `policy` section: trains
    assert _sections_case(tmp_path / "a", False, INLINE) == []
    # 4.0+ runner (rsl_rl v5.4.2 with Playground 838855d): actor and critic are missing
    found = _sections_case(tmp_path / "b", True, INLINE)
    assert [(f.severity, f.message.split(" to build")[0]) for f in found] == [
        ("ERROR", "rsl_rl reads train_cfg['actor']"), ("ERROR", "rsl_rl reads train_cfg['critic']")]
    assert found[0].message.endswith("passes no 'actor' section (model sections it passes: policy): OnPolicyRunner "
                                     "stops with a KeyError before the first step")
    assert {(p.path, p.line) for p in found[0].provenance} == {
        (fx.PPO, line_of(fx.PPO_TEXT + CONSTRUCT, 'cfg["actor"].pop')),
        (fx.SCRIPT, line_of(fx.SCRIPT_TEXT, "runner = OnPolicyRunner"))}
    # the script's conversion to actor/critic (Playground's pull/275): trains on 4.0+, stops on 3.x
    assert _sections_case(tmp_path / "c", True, CONVERTED) == []
    found = _sections_case(tmp_path / "d", False, CONVERTED)
    assert [f.message.split(" to build")[0] for f in found] == ["rsl_rl reads train_cfg['policy']"]
    assert "(model sections it passes: actor, critic)" in found[0].message
    # a change under a test that reads more than the dict's keys: undecided, said, no ERROR
    undecided = CONVERTED.replace('if "policy" in train_cfg_dict and', "if _PLAY_ONLY.value and")
    found = _sections_case(tmp_path / "e", True, undecided)
    assert [f.severity for f in found] == ["WARNING"]
    assert found[0].message == ("model sections not checked: learning/train_rsl_rl.py: main: what `train_cfg_dict` "
                                "holds at the OnPolicyRunner call is undecided: the test `_PLAY_ONLY.value` reads "
                                "more than the dict's keys")
    assert [(p.path, p.line) for p in found[0].provenance] == [(fx.SCRIPT, line_of(
        fx.SCRIPT_TEXT.replace(INLINE, undecided), "if _PLAY_ONLY.value and"))]


def test_the_4_0_layout_clips_each_network_and_leaves_normalization_to_sections_not_read(tmp_path):
    """rsl_rl 4.0+: one clip_grad_norm_ per network, and no translation of empirical_normalization
    (at v4.0.0 with Playground's pull/275 normalization was off while the 3.x reading said per_env_step)."""
    update = "nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)"
    assert update in fx.PPO_TEXT
    per_network = fx.PPO_TEXT.replace(update, "nn.utils.clip_grad_norm_(self.actor.parameters(), self.max_grad_norm)"
                                      "\n            nn.utils.clip_grad_norm_(self.critic.parameters(), "
                                      "self.max_grad_norm)")
    sha = make_repo(tmp_path / "rsl_rl", [{**fx.RSL_RL, fx.RUNNER: RUNNER_4, fx.PPO: per_network + CONSTRUCT}])[0]
    make_repo(tmp_path / "playground", [{**fx.PLAYGROUND_RSL, fx.SCRIPT: fx.SCRIPT_TEXT.replace(INLINE, CONVERTED)}])
    x = RslRlExtractor(Repository(tmp_path / "rsl_rl", "rsl_rl").resolve(sha),
                       Repository(tmp_path / "playground", "playground").resolve("HEAD")).env("SpotGetup")
    clip = x.facts["grad_clip_scope"]
    assert clip.value == "per_network" and {p.line for p in clip.provenance} == {
        line_of(per_network, "clip_grad_norm_(self.actor"), line_of(per_network, "clip_grad_norm_(self.critic")}
    for key in ("obs_normalization", "obs_norm_update", "obs_norm_method"):
        assert x.facts[key].is_unknown, key
        assert x.facts[key].unknown.endswith("rsl_rl at this ref does not read empirical_normalization; each "
                                             "network's own obs_normalization (its actor/critic section, 4.0+) "
                                             "decides, and is not read")
    assert extractor_facts_at_3x_are_unchanged(tmp_path)


def extractor_facts_at_3x_are_unchanged(tmp_path) -> bool:
    sha = make_repo(tmp_path / "rsl3", [fx.RSL_RL])[0]
    x = RslRlExtractor(Repository(tmp_path / "rsl3", "rsl_rl").resolve(sha),
                       Repository(tmp_path / "playground", "playground").resolve("HEAD")).env("SpotGetup")
    return (x.facts["grad_clip_scope"].value, x.facts["obs_norm_update"].value) == ("global", "per_env_step")
