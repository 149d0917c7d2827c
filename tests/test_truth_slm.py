"""SLM-Lab read as what it computes and whether it can train, at every ref (issue 10).

Each case is a hand-written commit on top of the fixture SLM-Lab (``slm_fixtures``), or a
variant of the fixture spec: the key gets the value the code computes, or it is
explicitly unknown with a finding; a variant that cannot start is a ``cannot_train`` ERROR
with the line that stops it.
"""

from __future__ import annotations

import json

import pytest

import slm_fixtures as fx
from brax_diff.cli import main
from brax_diff.sources.repository import Repository
from brax_diff.facts.vocabulary import KEYS
from brax_diff.extractors.slm.extractor import SlmExtractor, trains
from gitfixture import make_repo

SETS = {"max_frame": "1e6"}

# Spec variants shaped like SLM-Lab branches the extractor met.
VARIANTS = """
ppo_fx_arc:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 2
    memory: {name: OnPolicyBatchReplay}
    net:
      type: ArcNet
      arc: *policy
      shared: false
      hid_layers_activation: tanh
      init_fn: orthogonal_
      clip_grad_val: 0.7
      use_same_optim: false
      loss_spec: {name: MSELoss}
      optim_spec: {name: Adam, lr: 2.5e-4}
      lr_scheduler_spec: null
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_noshared:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 2
    memory: {name: OnPolicyBatchReplay}
    net:
      type: ArcNet
      actor_arc: *policy
      critic_arc: *value
      use_same_optim: false
      optim_spec: {name: Adam, lr: 2.5e-4}
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_l1:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 2
    memory: {name: OnPolicyBatchReplay}
    net:
      <<: *net
      loss_spec: {name: L1Loss}
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_badloss:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 2
    memory: {name: OnPolicyBatchReplay}
    net:
      <<: *net
      loss_spec: {name: NoSuchLoss}
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_vnorm:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 2
      normalize_v_targets: true
    memory: {name: OnPolicyBatchReplay}
    net: *net
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_decay:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 2
      clip_eps_spec: {name: linear_decay, start_val: 0.3, end_val: 0.1, start_step: 0, end_step: 1000}
    memory: {name: OnPolicyBatchReplay}
    net: *net
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}
"""
# Declared, not effective: decays "to 0.0" that the fixture's VarScheduler takes for unset
# (`if not getattr(self, "end_val", None)`), and a run length written in the variant, which a
# --set max_frame cannot reach (it replaces ${max_frame} only).
DECLARED = """
ppo_fx_to_zero:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 2
      clip_eps_spec: {name: linear_decay, start_val: 0.3, end_val: 0.0, start_step: 0, end_step: 1000}
      entropy_coef_spec:
        name: linear_decay
        start_val: 0.02
        end_val: 0.0
        start_step: 0
        end_step: 1000
    memory: {name: OnPolicyBatchReplay}
    net: *net
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_frames:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 2
    memory: {name: OnPolicyBatchReplay}
    net:
      <<: *net
      lr_scheduler_spec: null
  env:
    name: "${env}"
    max_frame: 5000
    normalize_obs: true
    num_envs: 8
  meta: {max_session: 1}
"""
SPEC = fx.SPEC + VARIANTS + DECLARED

# reward_scale handed to the env class, which multiplies by it (SLM-Lab 6eb08fe9's shape).
ENV_SCALES_IN_CLASS = fx.ENV_INIT.replace(
    "    env = PlaygroundVecEnv(name.removeprefix(\"playground/\"), num_envs)\n"
    "    if reward_scale != 1.0:\n"
    "        env = VectorTransformReward(env, lambda r: r * reward_scale)\n",
    "    env = PlaygroundVecEnv(name.removeprefix(\"playground/\"), num_envs, reward_scale=reward_scale)\n")
PLAYGROUND_SCALES = fx.PLAYGROUND.replace(
    "    def __init__(self, env_name, num_envs, episode_length=1000, device=None):\n",
    "    def __init__(self, env_name, num_envs, episode_length=1000, device=None, reward_scale=1.0):\n"
    "        self._reward_scale = reward_scale\n").replace(
    "        rewards = np.asarray(self._state.reward).astype(np.float32)\n",
    "        rewards = np.asarray(self._state.reward).astype(np.float32) * self._reward_scale\n")
TWICE_COEF = fx.ACTOR_CRITIC.replace(
    "            val_loss = self.val_loss_coef * self.net.loss_fn(v_preds, v_targets)\n",
    "            val_loss = 2 * self.val_loss_coef * self.net.loss_fn(v_preds, v_targets)\n")
REASSIGNED = fx.PPO.replace("            batch = self.sample()\n",
                            "            batch = self.sample()\n            self.clip_eps = self.clip_eps * 0.5\n")
TWICE_EPS = fx.PPO.replace("torch.clamp(ratios, 1.0 - clip_eps, 1.0 + clip_eps)",
                           "torch.clamp(ratios, 1.0 - 2 * clip_eps, 1.0 + 2 * clip_eps)")
SECOND_TRAIN = fx.PPO + fx.PPO[fx.PPO.index("    def train(self):"):].replace(
    "self.critic_net.train_step(val_loss, self.critic_optim)", "self.critic_net.train_step(3 * val_loss, self.critic_optim)")
# A guard that only makes the minibatch divide the batch (SLM-Lab 6eb08fe9's shape): a
# minibatch num_envs does not divide can then reach venv_pack.
DIVIDES_BATCH_ONLY = fx.PPO.replace(
    "        if self.minibatch_size % num_envs != 0 or self.time_horizon % num_envs != 0:\n"
    "            self.minibatch_size = math.ceil(self.minibatch_size / num_envs) * num_envs\n"
    "            self.time_horizon = math.ceil(self.time_horizon / num_envs) * num_envs\n"
    "            print(\"rounded to multiples of num_envs\")\n"
    "        batch_size = self.time_horizon * num_envs\n"
    "        if self.minibatch_size > batch_size:\n"
    "            self.minibatch_size = batch_size\n",
    "        batch_size = self.time_horizon * num_envs\n"
    "        if self.minibatch_size > batch_size:\n"
    "            self.minibatch_size = batch_size\n"
    "        if batch_size % self.minibatch_size != 0:\n"
    "            self.minibatch_size = batch_size // (batch_size // self.minibatch_size)\n")
# The code adjusts what the spec declares, after set_attr (issue 26: the spec's values were reported).
CODE_ADJUSTS = fx.PPO.replace(
    "        self.to_train = 0\n",
    "        self.to_train = 0\n"
    "        self.gamma = self.gamma ** 2\n"
    "        self.lam = 0.8\n"
    "        self.training_epoch = self.training_epoch * 2\n", 1)
CODE_ADJUSTS_UNREADABLY = fx.PPO.replace(
    "        self.to_train = 0\n",
    "        self.to_train = 0\n"
    "        self.gamma = self.agent.env.some_gamma()\n", 1)
HALVED_LR = fx.NET_UTIL_WITH_MIN.replace(
    "    optim_kwargs = {k: v for k, v in optim_spec.items() if k != \"name\"}\n",
    "    optim_kwargs = {k: v for k, v in optim_spec.items() if k != \"name\"}\n"
    "    optim_kwargs[\"lr\"] = optim_kwargs[\"lr\"] / 2\n")
NO_PLAYGROUND_BUILDER = fx.ENV_INIT.replace(
    "    if not name.startswith(\"playground/\"):  # other envs take the remaining keys as kwargs\n"
    "        make_kwargs = {k: v for k, v in env_spec.items() if k not in RESERVED}\n"
    "        return gym.make(name, **make_kwargs)\n",
    "    make_kwargs = {k: v for k, v in env_spec.items() if k not in RESERVED}\n"
    "    return gym.make(name, **make_kwargs)\n")
NO_GPU_NORMALIZER = fx.WRAPPERS[:fx.WRAPPERS.index("class VectorClipObservation")]
NO_GPU_NORMALIZER = fx.WRAPPERS.replace(NO_GPU_NORMALIZER, "\n")

CASES = {
    "base": {},
    "env_scales": {"slm_lab/env/__init__.py": ENV_SCALES_IN_CLASS, "slm_lab/env/playground.py": PLAYGROUND_SCALES},
    "twice_coef": {"slm_lab/agent/algorithm/actor_critic.py": TWICE_COEF},
    "reassigned": {"slm_lab/agent/algorithm/ppo.py": REASSIGNED},
    "twice_eps": {"slm_lab/agent/algorithm/ppo.py": TWICE_EPS},
    "second_train": {"slm_lab/agent/algorithm/ppo.py": SECOND_TRAIN},
    "divides_batch_only": {"slm_lab/agent/algorithm/ppo.py": DIVIDES_BATCH_ONLY},
    "no_builder": {"slm_lab/env/__init__.py": NO_PLAYGROUND_BUILDER},
    "no_gpu_normalizer": {"slm_lab/env/wrappers.py": NO_GPU_NORMALIZER},
    "code_adjusts": {"slm_lab/agent/algorithm/ppo.py": CODE_ADJUSTS, "slm_lab/agent/net/net_util.py": HALVED_LR},
    "code_adjusts_unreadably": {"slm_lab/agent/algorithm/ppo.py": CODE_ADJUSTS_UNREADABLY},
}


@pytest.fixture(scope="module")
def slm_repo(tmp_path_factory):
    path = tmp_path_factory.mktemp("truth-slm") / "SLM-Lab"
    base = {**fx.repo_files(), fx.SPEC_PATH: SPEC}
    shas = make_repo(path, [{**base, **files} for files in CASES.values()])
    return path, dict(zip(CASES, shas))


def extract(slm_repo, case: str, variant: str, **sets):
    path, shas = slm_repo
    snapshot = Repository(path, "slm").resolve(shas[case])
    return SlmExtractor(snapshot, sets={**SETS, **sets}).variant(variant)


def where(fact_or_finding) -> set[tuple[str, int]]:
    return {(p.path.rsplit("/", 1)[-1], p.line) for p in fact_or_finding.provenance}


def errors(extraction, kind: str = "cannot_train") -> list:
    return [f for f in extraction.findings if f.kind == kind and f.severity == "ERROR"]


# -- values read from where the code puts them ----------------------------------------------------

def test_reward_scale_handed_to_the_env_class_is_read_where_it_multiplies(slm_repo):
    facts = extract(slm_repo, "env_scales", "ppo_fx_rs").facts
    assert facts["reward_scale"].value == 10.0 and facts["reward_scale_site"].value == "env"
    assert ("playground.py", fx.line_of(PLAYGROUND_SCALES, "* self._reward_scale")) in where(facts["reward_scale"])
    assert ("ppo_playground.yaml", fx.line_of(SPEC, "reward_scale: 10.0")) in where(facts["reward_scale"])
    assert extract(slm_repo, "env_scales", "ppo_fx").facts["reward_scale"].value == 1.0
    assert extract(slm_repo, "base", "ppo_fx_rs").facts["reward_scale"].value == 10.0  # TransformReward


def test_an_arc_both_nets_share_gives_both_their_layers(slm_repo):
    facts = extract(slm_repo, "base", "ppo_fx_arc").facts
    assert facts["policy_hidden_layers"].value == [48, 48]
    assert facts["value_hidden_layers"].value == [48, 48]  # the critic builds from `arc` too
    assert facts["activation"].value == "silu"
    assert "agent.net.arc" in facts["value_hidden_layers"].note


def test_a_missing_shared_the_algorithm_asserts_cannot_train(slm_repo):
    x = extract(slm_repo, "base", "ppo_fx_noshared")
    stops = errors(x)
    assert stops and "Specify shared" in stops[0].message
    assert ("actor_critic.py", fx.line_of(fx.ACTOR_CRITIC, 'assert "shared" in self.net_spec')) in where(stops[0])
    fact = x.facts["shared_network"]
    assert fact.value is None and "Specify shared" in fact.unknown  # not the net class's default False
    assert trains(x)[0] is False and "Specify shared" in trains(x)[1]


def test_a_constant_factor_in_front_of_the_coefficient_counts(slm_repo):
    facts = extract(slm_repo, "twice_coef", "ppo_fx").facts
    assert facts["value_loss_coef"].value == pytest.approx(2 * 0.4)
    assert ("actor_critic.py", fx.line_of(TWICE_COEF, "val_loss = 2 * self.val_loss_coef")) in where(
        facts["value_loss_coef"])


def test_a_value_reassigned_inside_train_is_what_the_loss_uses(slm_repo):
    facts = extract(slm_repo, "reassigned", "ppo_fx").facts
    assert facts["clip_epsilon"].value == pytest.approx(0.25 * 0.5)


def test_a_clip_range_of_twice_epsilon(slm_repo):
    facts = extract(slm_repo, "twice_eps", "ppo_fx").facts
    assert facts["clip_epsilon"].value == pytest.approx(0.5)
    assert extract(slm_repo, "base", "ppo_fx").facts["clip_epsilon"].value == 0.25


def test_an_l1_value_loss_is_not_mse(slm_repo):
    facts = extract(slm_repo, "base", "ppo_fx_l1").facts
    assert facts["value_loss"].value == "l1" and facts["value_loss_coef"].value == 0.4


def test_the_second_def_train_is_the_one_that_runs(slm_repo):
    assert extract(slm_repo, "second_train", "ppo_fx").facts["value_loss_coef"].value == pytest.approx(3 * 0.4)


def test_the_line_of_the_branch_the_variant_executes_is_cited(slm_repo):
    normalized = extract(slm_repo, "base", "ppo_fx_vnorm").facts["value_loss_coef"]
    plain = extract(slm_repo, "base", "ppo_fx").facts["value_loss_coef"]
    branch = ("actor_critic.py", fx.line_of(fx.ACTOR_CRITIC, "loss_fn(v_preds / v_std"))
    other = ("actor_critic.py", fx.line_of(fx.ACTOR_CRITIC, "loss_fn(v_preds, v_targets)"))
    assert branch in where(normalized) and other not in where(normalized)
    assert other in where(plain) and branch not in where(plain)


def test_schedules_are_facts(slm_repo):
    decay = extract(slm_repo, "base", "ppo_fx_decay").facts
    assert (decay["clip_epsilon"].value, decay["clip_epsilon_schedule"].value,
            decay["clip_epsilon_final"].value) == (0.3, "linear_decay", pytest.approx(0.1))
    constant = extract(slm_repo, "base", "ppo_fx").facts
    assert (constant["clip_epsilon_schedule"].value, constant["clip_epsilon_final"].value) == ("constant", 0.25)
    assert (constant["entropy_schedule"].value, constant["entropy_coef_final"].value) == ("constant", 0.003)


# -- can it train? ---------------------------------------------------------------------------------

def test_a_minibatch_venv_pack_cannot_view_cannot_train(slm_repo):
    x = extract(slm_repo, "divides_batch_only", "ppo_fx_small")  # batch 80, minibatch 12 -> 13 rows of 8?
    stops = [f for f in errors(x) if "venv_pack" in f.message]
    assert stops and "minibatch of 13 transitions" in stops[0].message
    assert ("math_util.py", fx.line_of(fx.MATH_UTIL, "def venv_pack")) not in where(stops[0])
    assert ("ppo.py", fx.line_of(DIVIDES_BATCH_ONLY, "math_util.venv_pack(v")) in where(stops[0])
    assert trains(extract(slm_repo, "divides_batch_only", "ppo_fx"))[0] is True  # 64 divides by 8


def test_a_loss_class_torch_lacks_cannot_train(slm_repo):
    x = extract(slm_repo, "base", "ppo_fx_badloss")
    stops = errors(x)
    assert stops and "NoSuchLoss not found in torch.nn" in stops[0].message
    assert ("net_util.py", fx.line_of(fx.NET_UTIL_WITH_MIN, 'raise ValueError(f"Name')) in where(stops[0])


def test_make_env_without_a_playground_builder_cannot_train(slm_repo):
    x = extract(slm_repo, "no_builder", "ppo_fx", env="playground/CartpoleBalance")
    stops = [f for f in errors(x) if "no builder for playground/ envs" in f.message]
    assert stops and ("__init__.py", fx.line_of(NO_PLAYGROUND_BUILDER, "return gym.make(")) in where(stops[0])
    assert trains(extract(slm_repo, "base", "ppo_fx", env="playground/CartpoleBalance"))[0] is True


def test_a_device_path_that_cannot_import_its_wrapper_cannot_train(slm_repo):
    x = extract(slm_repo, "no_gpu_normalizer", "ppo_fx", env="playground/CartpoleBalance")
    stops = errors(x)
    assert stops and "cannot import name 'TorchNormalizeObservation'" in stops[0].message
    assert ("__init__.py", fx.line_of(fx.ENV_INIT, 'raise ImportError("playground/')) in where(stops[0])


# -- no silent absence; the CLI says whether each variant trains -------------------------------------

def test_every_key_in_every_variant_and_every_unknown_has_a_finding(slm_repo):
    path, shas = slm_repo
    ex = SlmExtractor(Repository(path, "slm").resolve(shas["base"]), sets=SETS)
    for name in ex.variants():
        x = ex.variant(name)
        assert set(x.facts) == set(KEYS), name
        for key in x.unknown_keys():
            assert any(f.key == key for f in x.findings), (name, key)


def test_all_variants_prints_trains_or_fails_why(slm_repo, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, shas = slm_repo
    code = main(["extract", "slm", "--repo", str(path), "--ref", shas["base"], "--set", "max_frame=1000",
                 "--all-variants"])
    out = capsys.readouterr().out
    assert code == 0
    assert "ppo_fx: trains" in out
    line = next(l for l in out.splitlines() if l.startswith("ppo_fx_noshared: "))
    assert line.startswith("ppo_fx_noshared: fails: building the algorithm stops:") and "Specify shared" in line
    assert "actor_critic.py:" in line  # the line that stops it


def test_strict_fails_on_an_unknown_key(slm_repo, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, shas = slm_repo
    base = ["extract", "slm", "--repo", str(path), "--ref", shas["base"], "--set", "max_frame=1000", "--format", "json"]
    assert main([*base, "--variant", "ppo_fx_rs"]) == 0  # entropy_coef_spec absent: unknown keys
    data = json.loads(capsys.readouterr().out)
    assert data["facts"]["entropy_coef"] == {**data["facts"]["entropy_coef"], "value": None}
    assert "unknown" in data["facts"]["entropy_coef"]
    assert main([*base, "--variant", "ppo_fx_rs", "--strict"]) == 1
    err = capsys.readouterr().err
    assert "unknown" in err and "entropy_coef" in err


# -- declared in the spec, not what runs ------------------------------------------------------------

def declared_findings(extraction) -> dict:
    return {f.key: f for f in extraction.findings if f.kind == "declared_not_effective"}


def test_a_decay_to_zero_the_scheduler_takes_for_unset_stays_constant(slm_repo):
    x = extract(slm_repo, "base", "ppo_fx_to_zero")
    facts = x.facts
    override = ("policy_util.py", fx.line_of(fx.POLICY_UTIL, "self.end_val = self.start_val"))
    clip_end = ("ppo_playground.yaml", fx.line_of(SPEC, "end_val: 0.0", after="ppo_fx_to_zero:"))
    entropy_end = ("ppo_playground.yaml", fx.line_of(SPEC, "        end_val: 0.0", after="ppo_fx_to_zero:"))
    for schedule, final, value, end in (("clip_epsilon_schedule", "clip_epsilon_final", 0.3, clip_end),
                                        ("entropy_schedule", "entropy_coef_final", 0.02, entropy_end)):
        assert (facts[schedule].value, facts[schedule].declared) == ("constant", "linear_decay")  # what runs
        assert (facts[final].value, facts[final].declared) == (value, 0.0)
        assert {override, end} <= where(facts[final]) and {override, end} <= where(facts[schedule])
        finding = declared_findings(x)[final]
        # IMPORTANT (issue 22 item 5): both values and the line that overrides the spec.
        assert finding.severity == "IMPORTANT" and {override, end} <= where(finding)
        dotted = "clip_eps_spec" if final.startswith("clip") else "entropy_coef_spec"
        assert finding.message.startswith(f"{final}: the spec asks for 0.0 (agent.algorithm.{dotted}.end_val), "
                                          f"but the code runs {value} (overridden at ")
        assert f"slm_lab/agent/algorithm/policy_util.py:{override[1]}" in finding.message
        assert "'linear_decay'" in declared_findings(x)[schedule].message
    assert facts["entropy_coef"].value == 0.02 and facts["entropy_coef"].declared is None
    decay = extract(slm_repo, "base", "ppo_fx_decay")  # end_val 0.1: the decay the spec asks for runs
    assert decay.facts["clip_epsilon_final"].declared is None and not declared_findings(decay)


def test_a_horizon_the_batch_guard_rounds_is_declared_not_effective(slm_repo):
    x = extract(slm_repo, "base", "ppo_fx_small")  # time_horizon 10, minibatch 12, 8 envs: both rounded to 16
    assert (x.facts["unroll_length"].value, x.facts["unroll_length"].declared) == (16, 10)
    guard = ("ppo.py", fx.line_of(fx.PPO, "self.time_horizon = math.ceil("))
    horizon = ("ppo_playground.yaml", fx.line_of(SPEC, "time_horizon: 10"))
    finding = declared_findings(x)["unroll_length"]
    assert {guard, horizon} <= where(finding)
    assert finding.severity == "IMPORTANT"
    assert finding.message.startswith("unroll_length, gae_horizon: the spec asks for 10 (agent.algorithm.time_horizon), "
                                      "but the code runs 16 (overridden at ")
    assert f"slm_lab/agent/algorithm/ppo.py:{guard[1]}" in finding.message
    assert declared_findings(x)["minibatch_transitions"].message.startswith(
        "minibatch_transitions: the spec asks for 12 (agent.algorithm.minibatch_size")
    assert "transitions_per_update" not in declared_findings(x)  # derived: explained by its inputs
    assert not declared_findings(extract(slm_repo, "base", "ppo_fx"))  # 16 and 64 divide by 8: nothing moves


def test_a_set_the_variant_has_no_placeholder_for_is_ignored(slm_repo):
    x = extract(slm_repo, "base", "ppo_fx_frames")  # SETS: max_frame=1e6
    fact = x.facts["training_env_steps"]
    assert (fact.value, fact.declared) == (5000, 1000000)
    written = ("ppo_playground.yaml", fx.line_of(SPEC, "max_frame: 5000"))
    finding = declared_findings(x)["training_env_steps"]
    assert finding.severity == "IMPORTANT" and where(finding) == {written}
    assert finding.message == ("--set max_frame=1e6 is ignored by ppo_fx_frames: the variant has no ${max_frame}; "
                               "env.max_frame is 5000")
    assert not declared_findings(extract(slm_repo, "base", "ppo_fx"))  # it takes ${max_frame}


def test_values_the_algorithm_adjusts_after_reading_the_spec(slm_repo):
    """gamma, lam and training_epoch were read from the spec although init_algorithm_params changed them."""
    base = extract(slm_repo, "base", "ppo_fx").facts
    facts = extract(slm_repo, "code_adjusts", "ppo_fx").facts
    assert facts["discount"].value == pytest.approx(base["discount"].value ** 2)
    assert facts["discount"].declared == base["discount"].value
    assert facts["gae_lambda"].value == 0.8
    assert facts["epochs_per_update"].value == 2 * base["epochs_per_update"].value
    assert ("ppo.py", fx.line_of(CODE_ADJUSTS, "self.lam = 0.8")) in where(facts["gae_lambda"])
    assert "the algorithm sets self.lam = 0.8" in facts["gae_lambda"].note
    assert facts["learning_rate"].value == pytest.approx(base["learning_rate"].value / 2)  # get_optim halves it
    assert facts["learning_rate"].declared == base["learning_rate"].value
    assert ("net_util.py", fx.line_of(HALVED_LR, 'optim_kwargs["lr"] = optim_kwargs["lr"] / 2')) in where(
        facts["learning_rate"])


def test_a_value_the_algorithm_sets_from_unread_code_is_unknown(slm_repo):
    x = extract(slm_repo, "code_adjusts_unreadably", "ppo_fx")
    fact = x.facts["discount"]
    assert fact.value is None and "self.gamma is not computed statically" in fact.unknown
    assert any(f.key == "discount" for f in x.findings)


def test_a_get_default_the_code_transforms_is_not_read_as_the_value():
    """``env_spec.get("num_envs", 1) * 2`` does not run with 1 (issue 26: read as the bare default)."""
    from brax_diff.extractors.engine.pyast import PyModule
    from brax_diff.extractors.slm.code import string_keys_read

    module = PyModule('def make_env(env_spec):\n'
                      '    num_envs = env_spec.get("num_envs", 1) * 2\n'
                      '    scale = -env_spec.get("reward_scale", 1.0)\n'
                      '    clip_obs = env_spec.get("clip_obs", 10.0)\n', "slm_lab/env/__init__.py")
    keys = string_keys_read(module, module.module, {"env_spec"})
    assert {k: f.value for k, f in keys.items()} == {"num_envs": None, "reward_scale": None, "clip_obs": 10.0}
    assert keys["num_envs"].line == 2
