"""SLM-Lab extractor: spec resolution with lines, code facts, findings, mapping, CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import slm_fixtures as fx
from brax_diff.cli import main
from brax_diff.errors import BraxDiffError, ConfigError, SpecError
from brax_diff.safety.limits import LimitExceeded
from brax_diff.sources.repository import Repository
from brax_diff.extractors.slm.extractor import SlmExtractor, load_mapping, validate_mapping
from brax_diff.extractors.slm.spec import SpecFile
from gitfixture import add_commit, make_repo

ROOT = Path(__file__).resolve().parent.parent
SETS = {"max_frame": "1e6"}


@pytest.fixture(scope="module")
def slm_repo(tmp_path_factory):
    """Commit 0: code defines LinearToMin. Commit 1: the branch is gone, the spec unchanged."""
    path = tmp_path_factory.mktemp("slm") / "SLM-Lab"
    shas = make_repo(path, [fx.repo_files(), {"slm_lab/agent/net/net_util.py": fx.NET_UTIL_WITHOUT_MIN}])
    return path, shas


def extractor(slm_repo, index=0, **kwargs):
    path, shas = slm_repo
    snapshot = Repository(path, "slm").resolve(shas[index])
    kwargs.setdefault("sets", SETS)
    return SlmExtractor(snapshot, **kwargs)


def lines(fact):
    return sorted((p.path.rsplit("/", 1)[-1], p.line) for p in fact.provenance)


# -- spec resolution ------------------------------------------------------------------------

def test_variants_in_file_order_without_anchor_keys(slm_repo):
    assert extractor(slm_repo).variants() == ["ppo_fx", "ppo_fx_small", "ppo_fx_big_mb", "ppo_fx_rs",
                                              "ppo_fx_unread"]


def test_merged_values_point_at_the_anchor_line_and_overrides_at_their_own(slm_repo):
    facts = extractor(slm_repo).variant("ppo_fx").facts
    assert facts["gae_lambda"].value == 0.9  # inherited through << *algorithm
    assert lines(facts["gae_lambda"]) == [("ppo_playground.yaml", fx.line_of(fx.SPEC, "lam: 0.9"))]
    assert facts["discount"].value == 0.995  # the variant's own override wins over the anchor's 0.98
    assert lines(facts["discount"]) == [("ppo_playground.yaml", fx.line_of(fx.SPEC, "gamma: 0.995"))]
    assert facts["discount"].note == "spec: agent.algorithm.gamma"
    assert facts["entropy_coef"].value == 0.003
    assert facts["clip_epsilon"].value == 0.25
    assert facts["policy_hidden_layers"].value == [48, 48]
    assert facts["value_hidden_layers"].value == [96, 96, 96]
    assert facts["activation"].value == "silu"
    assert facts["learning_rate"].value == 2.5e-4
    assert facts["adam_eps"].value == 1e-6
    assert lines(facts["adam_eps"]) == [("ppo_playground.yaml", fx.line_of(fx.SPEC, "eps: 1.0e-6"))]


def test_placeholder_is_substituted_as_a_number():
    spec = SpecFile(fx.SPEC, fx.SPEC_PATH, {"max_frame": "2e7"}).resolve("ppo_fx")
    assert spec.get("env.max_frame") == 20000000
    assert spec.get("agent.net.lr_scheduler_spec.frame") == 20000000
    assert spec.unset == [(("env", "name"), "env")]  # names the env only: reported, not fatal


def test_unsubstituted_placeholder_names_the_variable():
    run_length_only = SpecFile(fx.SPEC, fx.SPEC_PATH, {}).resolve("ppo_fx")
    assert sorted(var for _, var in run_length_only.unset) == ["env", "max_frame", "max_frame"]
    setting = fx.SPEC.replace("lam: 0.9\n", 'lam: "${lam}"\n')
    with pytest.raises(SpecError, match=r"\$\{lam\}.*--set lam=VALUE"):
        SpecFile(setting, fx.SPEC_PATH, {}).resolve("ppo_fx")


def test_a_set_the_spec_has_no_placeholder_for_is_an_error_naming_the_placeholders_it_has():
    with pytest.raises(SpecError) as caught:
        SpecFile(fx.SPEC, fx.SPEC_PATH, {"max_frame": "1", "maxframe": "2", "envv": "x"})
    assert str(caught.value) == (f"--set maxframe=2, envv=x: the spec {fx.SPEC_PATH} has no ${{maxframe}} or "
                                 "${envv} placeholder; its placeholders: ${env}, ${max_frame}")
    with pytest.raises(SpecError, match=r"has no \$\{env\} placeholder; it has no placeholders$"):
        SpecFile("v: {a: 1}\n", "plain.yaml", {"env": "x"})
    assert SpecFile(fx.SPEC, fx.SPEC_PATH, {"env": "playground/A", "max_frame": "1"}).placeholders() == [
        "env", "max_frame"]


@pytest.mark.parametrize("text, message", [
    ("a: [1, 2\nb: 3\n", "invalid YAML at line"),
    ("- just\n- a list\n", "expected a mapping of spec names"),
    ("v:\n  agent:\n    <<: 3\n", "'<<' must merge a mapping"),
])
def test_bad_yaml_is_one_spec_error(text, message):
    with pytest.raises(SpecError, match=message):
        SpecFile(text, "bad.yaml", {}).resolve("v")


def test_invalid_json_and_self_referencing_alias():
    with pytest.raises(SpecError, match="invalid JSON at line 2"):
        SpecFile('{"v": {\n  "agent": ,\n}}', "bad.json", {})
    with pytest.raises(SpecError, match="refers to itself"):
        SpecFile("v: &loop\n  agent: *loop\n", "loop.yaml", {}).resolve("v")


def test_non_mapping_where_a_mapping_belongs(slm_repo):
    text = fx.SPEC.replace("ppo_fx_unread:\n  agent:\n    name: PPO\n    algorithm:\n      <<: *algorithm\n"
                           "      time_horizon: 16\n      training_epoch: 1\n      fancy_knob: 3\n",
                           "ppo_fx_unread:\n  agent:\n    name: PPO\n    algorithm: [PPO]\n")
    assert text != fx.SPEC
    path, _ = slm_repo
    sha = add_commit(path, {fx.SPEC_PATH: text}, message="algorithm as a list")
    ex = SlmExtractor(Repository(path, "slm").resolve(sha), sets=SETS)
    with pytest.raises(SpecError, match=r"agent.algorithm must be a mapping, not list \(line \d+\)"):
        ex.variant("ppo_fx_unread")
    assert ex.variant("ppo_fx").facts["discount"].value == 0.995  # other variants still resolve


def test_alias_bomb_is_bounded():
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        levels.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    text = "\n".join(levels) + "\nbomb:\n  agent: *a8\n"
    with pytest.raises(LimitExceeded, match=r"^bomb.yaml: line 1: aliases expand past 200000 values \(limit"):
        SpecFile(text, "bomb.yaml", {}).resolve("bomb")


def nested_alias_bomb(levels: int, width: int = 10) -> str:
    """Mappings of aliases of mappings: ``width ** levels`` values from a few hundred bytes."""
    lines = ["_a0: &a0 {" + ", ".join(f"k{i}: {i}" for i in range(width)) + "}"]
    for level in range(1, levels + 1):
        lines.append(f"_a{level}: &a{level} {{" + ", ".join(f"k{i}: *a{level - 1}" for i in range(width)) + "}")
    return "\n".join(lines) + f"\nbomb:\n  agent:\n    <<: *a{levels}\n    own: 1\n"


def test_nested_mapping_aliases_resolve_in_time_linear_in_the_result():
    # The walk forgot merged lines by scanning every recorded path: 11,111 values took 6 s,
    # 111,111 more than 10 minutes. Now each value costs the same.
    spec = SpecFile(nested_alias_bomb(4), "bomb.yaml", {}).resolve("bomb")
    assert len(spec.lines) == 111_113 and spec.get("agent.k9.k9.k9.k9.k9") == 9 and spec.get("agent.own") == 1
    assert spec.line("agent.k3.k2.k1.k0.k5") == 1 and spec.line("agent.k3") == 4 and spec.line("agent.own") == 9
    with pytest.raises(LimitExceeded, match=r"^bomb.yaml: line \d: aliases expand past 200000 values \(limit"):
        SpecFile(nested_alias_bomb(6), "bomb.yaml", {}).resolve("bomb")


def test_many_plain_keys_in_a_variant_resolve_fast():
    # 8,000 keys took 31 s through `extract slm` (quadratic in the keys).
    text = "v:\n  agent:\n    extra:\n" + "".join(f"      key{i}: {i}\n" for i in range(20_000))
    spec = SpecFile(text, "keys.yaml", {}).resolve("v")
    assert spec.get("agent.extra.key19999") == 19999 and spec.line("agent.extra.key19999") == 20_003


def test_thousands_of_unread_algorithm_keys_extract_in_linear_time(tmp_path, capsys, monkeypatch):
    # 8,000 keys in a variant took 31 s through `extract slm`: besides the alias walk, every
    # unread-key finding was checked against all earlier ones.
    monkeypatch.chdir(tmp_path)
    spec = textwrap.dedent(fx.SPEC).lstrip("\n").replace(
        "      training_epoch: 5\n", "      training_epoch: 5\n" + "".join(f"      key{i}: {i}\n" for i in range(12_000)), 1)
    path = tmp_path / "SLM-Lab"
    make_repo(path, [{**fx.repo_files(), fx.SPEC_PATH: spec}])
    code, out, _ = run_cli(["--repo", str(path), "--set", "max_frame=1000", "--variant", "ppo_fx", "--format", "json"],
                           capsys)
    unread = [f for f in json.loads(out)["findings"] if f["kind"] == "unread_spec_key"]
    assert code == 0 and len(unread) == 12_000
    assert any("agent.algorithm.key11999 " in f["message"] for f in unread)


@pytest.mark.parametrize("text, message", [
    ("v: {x: " + "[" * 3000 + "]" * 3000 + "}\n", "deep.yaml: line 1: nesting deeper than 64 levels (limit)"),
    ("v:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(100)),
     "deep.yaml: line 64: nesting deeper than 64 levels (limit)"),
    ("a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 100)) + "v: {x: *a99}\n",
     "deep.yaml: line 37: values nest deeper than 64 levels (limit)"),  # a36, 64 levels below v
    ("v: {time_horizon: " + "9" * 5001 + "}\n", "deep.yaml: line 1: an integer of 5001 digits; the limit is 100"),
])
def test_deep_or_huge_specs_stop_at_a_limit_naming_the_line(text, message):
    with pytest.raises(LimitExceeded) as caught:
        SpecFile(text, "deep.yaml", {}).resolve("v")
    assert str(caught.value) == message


def test_huge_integer_in_a_json_spec_is_a_spec_error():
    with pytest.raises(SpecError, match=r"^demo.json: invalid JSON: an integer of 5001 digits; the limit is 100"):
        SpecFile('{"v": {"x": ' + "9" * 5001 + "}}", "demo.json", {})


@pytest.mark.parametrize("key", ["time_horizon", "minibatch_size"])
def test_zero_time_horizon_or_minibatch_is_one_line(capsys, tmp_path, monkeypatch, key):
    # time_horizon: 0 raised ZeroDivisionError in the minibatch count.
    monkeypatch.chdir(tmp_path)
    spec = fx.SPEC.replace("time_horizon: 16\n", "time_horizon: 0\n", 1) if key == "time_horizon" else \
        fx.SPEC.replace("minibatch_size: 64\n", "minibatch_size: 0\n", 1)
    path = tmp_path / "SLM-Lab"
    make_repo(path, [{**fx.repo_files(), fx.SPEC_PATH: spec}])
    written = spec.lstrip("\n").splitlines()  # as make_repo writes the file
    line = written.index(f"      {key}: 0" if key == "time_horizon" else f"  {key}: 0") + 1
    code, _, err = run_cli(["--repo", str(path), "--set", "max_frame=1000", "--variant", "ppo_fx"], capsys)
    assert code == 2
    assert err == (f"error: {fx.SPEC_PATH}: line {line}: variant ppo_fx: agent.algorithm.{key} "
                   "must be at least 1, not 0\n")


@pytest.mark.parametrize("old, new, message", [
    ("  val_loss_coef: 0.4\n", "  val_loss_coef: {}\n", "agent.algorithm.val_loss_coef must be a number, not dict {}"),
    ("    lr: 2.5e-4\n", "    lr: g\n", "agent.net.optim_spec.lr must be a number, not str 'g'"),
    ("      training_epoch: 5\n", "      training_epoch: {a: 1}\n",
     "agent.algorithm.training_epoch must be a number, not dict {'a': 1}"),
    ("  loss_spec: {name: MSELoss}\n", "  loss_spec: {name: [MSELoss]}\n", "agent.net.loss_spec.name must be a name, not a list"),
])
def test_a_spec_value_of_the_wrong_type_is_one_line_naming_it(tmp_path, old, new, message):
    # Found by tests/test_fuzz.py: float({}) and {[...]: ...} lookups were TypeErrors.
    spec = textwrap.dedent(fx.SPEC).lstrip("\n")
    assert old in spec
    changed = spec.replace(old, new, 1)
    line = changed.splitlines().index(new.rstrip("\n")) + 1
    path = tmp_path / "SLM-Lab"
    make_repo(path, [{**fx.repo_files(), fx.SPEC_PATH: changed}])
    ex = SlmExtractor(Repository(path, "slm").resolve("HEAD"), sets=SETS)
    with pytest.raises(SpecError) as caught:
        ex.variant("ppo_fx")
    assert str(caught.value) == f"{fx.SPEC_PATH}: line {line}: variant ppo_fx: {message}"


def test_a_setting_neither_spec_nor_code_gives_is_a_fact_without_lines(tmp_path):
    spec = textwrap.dedent(fx.SPEC).lstrip("\n").replace("      training_epoch: 5\n", "", 1)
    path = tmp_path / "SLM-Lab"
    make_repo(path, [{**fx.repo_files(), fx.SPEC_PATH: spec}])
    fact = SlmExtractor(Repository(path, "slm").resolve("HEAD"), sets=SETS).variant("ppo_fx").facts["epochs_per_update"]
    assert fact.value is None and fact.provenance == ()


def test_missing_variant_lists_the_choices(slm_repo):
    with pytest.raises(SpecError, match="no variant 'nope' .*ppo_fx_small"):
        extractor(slm_repo).variant("nope")


def test_spec_missing_at_ref(slm_repo):
    with pytest.raises(SpecError, match="spec file slm_lab/spec/none.yaml not found"):
        extractor(slm_repo, spec="slm_lab/spec/none.yaml")


def test_json_spec_resolves_with_lines(slm_repo):
    facts = extractor(slm_repo, spec=fx.JSON_SPEC_PATH, sets={}).variant("ppo_json").facts  # no placeholders
    assert facts["discount"].value == 0.9
    assert lines(facts["discount"]) == [("ppo_demo.json", fx.line_of(fx.JSON_SPEC, '"gamma": 0.9'))]
    assert facts["shared_network"].value is True
    assert facts["lr_schedule"].value == "constant"
    # no action_pdtype: "default" is ACTION_PDS' first multi_continuous entry
    assert facts["action_distribution"].value == "normal"
    assert ("policy_util.py", fx.line_of(fx.POLICY_UTIL, "ACTION_PDS = {")) in lines(facts["action_distribution"])
    # val_loss_coef is absent: the PPO default dict gives it, with the code line
    assert facts["value_loss_coef"].value == 0.75
    assert ("ppo.py", fx.line_of(fx.PPO, "val_loss_coef=0.75")) in lines(facts["value_loss_coef"])


# -- code facts and the batch guard -----------------------------------------------------------

def test_batch_facts_without_adjustment(slm_repo):
    facts = extractor(slm_repo).variant("ppo_fx").facts
    assert facts["num_envs"].value == 8
    assert facts["unroll_length"].value == 16 and facts["unroll_length"].declared is None
    assert facts["unrolls_per_update"].value == 1
    assert facts["transitions_per_update"].value == 128
    assert facts["minibatch_transitions"].value == 64
    assert facts["minibatches_per_epoch"].value == 2
    assert facts["epochs_per_update"].value == 5
    assert facts["gradient_steps_per_update"].value == 10


def test_guard_rounds_to_multiples_of_num_envs(slm_repo):
    facts = extractor(slm_repo).variant("ppo_fx_small").facts
    # time_horizon 10 and minibatch 12 with 8 envs: both rounded up to 16
    assert (facts["unroll_length"].value, facts["unroll_length"].declared) == (16, 10)
    assert (facts["minibatch_transitions"].value, facts["minibatch_transitions"].declared) == (16, 12)
    assert (facts["transitions_per_update"].value, facts["transitions_per_update"].declared) == (128, 80)
    assert facts["minibatches_per_epoch"].value == 8
    assert facts["gradient_steps_per_update"].value == 24
    guard_line = fx.line_of(fx.PPO, "self.time_horizon = math.ceil")
    assert ("ppo.py", guard_line) in lines(facts["unroll_length"])
    assert ("ppo_playground.yaml", fx.line_of(fx.SPEC, "time_horizon: 10")) in lines(facts["unroll_length"])


def test_guard_caps_the_minibatch_at_the_batch(slm_repo):
    facts = extractor(slm_repo).variant("ppo_fx_big_mb").facts
    assert (facts["minibatch_transitions"].value, facts["minibatch_transitions"].declared) == (128, 1024)
    assert facts["minibatches_per_epoch"].value == 1
    assert ("ppo.py", fx.line_of(fx.PPO, "self.minibatch_size = batch_size")) in lines(
        facts["minibatch_transitions"])


def test_policy_and_net_code_facts(slm_repo):
    facts = extractor(slm_repo).variant("ppo_fx").facts
    assert facts["std_min"].value == pytest.approx(math.exp(-4))
    assert facts["std_max"].value == pytest.approx(math.exp(1))
    assert lines(facts["std_max"]) == [("policy_util.py", fx.line_of(fx.POLICY_UTIL, "torch.clamp"))]
    assert facts["std_transform"].value == "clamped_exp"
    assert facts["std_state_dependent"].value is True  # log_std_init absent -> head
    assert facts["action_distribution"].value == "normal"
    assert facts["max_grad_norm"].value == 0.7
    assert ("base.py", fx.line_of(fx.NET_BASE, "clip_grad_norm_")) in lines(facts["max_grad_norm"])
    assert facts["kernel_init"].value == "orthogonal"
    assert "hid_layers_activation='tanh'" in facts["kernel_init"].note
    assert facts["value_loss"].value == "mse"
    assert facts["value_loss_coef"].value == 0.4
    assert facts["truncation"].value == "bootstrap_next_obs_across_reset"
    assert facts["advantage_normalization_scope"].value == "minibatch"
    assert facts["obs_norm_std_eps"].value == 1e-6
    assert facts["obs_clip"].value is None  # GPU path: no clip
    # reward_scale absent: make_env applies no TransformReward (the `!= 1.0` branch is not taken)
    assert facts["reward_scale"].value == 1.0 and facts["reward_scale_site"].value == "none"


def test_scheduler_defined_gives_linear_decay_to_min_factor(slm_repo):
    extraction = extractor(slm_repo).variant("ppo_fx")
    assert extraction.facts["lr_schedule"].value == "linear_decay"
    assert extraction.facts["lr_final_factor"].value == 0.05
    assert not [f for f in extraction.findings if f.severity == "ERROR"]


def test_linear_decay_to_a_final_factor_of_one_is_constant(tmp_path):
    """LinearToMin with min_factor 1.0 (SLM-Lab's own way to a constant rate, and what
    `brax-diff fix` writes for BD020) never moves: constant, not linear_decay."""
    spec = fx.SPEC.replace("    min_factor: 0.05", "    min_factor: 1.0")
    assert spec != fx.SPEC
    path = tmp_path / "SLM-Lab"
    sha, = make_repo(path, [{**fx.repo_files(), fx.SPEC_PATH: spec}])
    facts = SlmExtractor(Repository(path, "slm").resolve(sha), sets=SETS).variant("ppo_fx").facts
    assert facts["lr_schedule"].value == "constant"
    assert "final factor of 1" in facts["lr_schedule"].note
    assert facts["lr_final_factor"].value == 1.0
    assert facts["lr_decay_steps"].value is None and not facts["lr_decay_steps"].is_unknown
    assert ("ppo_playground.yaml", fx.line_of(spec, "min_factor: 1.0")) in lines(facts["lr_schedule"])


def test_scheduler_the_code_lacks_is_an_error_with_both_lines(slm_repo):
    extraction = extractor(slm_repo, 1).variant("ppo_fx")
    errors = [f for f in extraction.findings if f.severity == "ERROR"]
    assert [f.kind for f in errors] == ["spec_code_mismatch"]
    assert "LinearToMin" in errors[0].message
    where = sorted((p.path.rsplit("/", 1)[-1], p.line) for p in errors[0].provenance)
    assert where == [("net_util.py", fx.line_of(fx.NET_UTIL_WITHOUT_MIN, "getattr(torch.optim.lr_scheduler")),
                     ("ppo_playground.yaml", fx.line_of(fx.SPEC, "name: LinearToMin"))]
    assert extraction.facts["lr_schedule"].value is None
    assert extraction.facts["lr_schedule"].declared == "LinearToMin"
    for key in ("lr_final_factor", "lr_decay_steps"):  # explained by the same cause, not "no reader"
        assert "'LinearToMin' is not defined at this ref" in extraction.facts[key].unknown


def test_constant_lr_reward_scale_and_no_grad_clip(slm_repo):
    facts = extractor(slm_repo, 1).variant("ppo_fx_rs").facts
    assert facts["lr_schedule"].value == "constant" and facts["lr_final_factor"].value == 1.0
    assert facts["reward_scale"].value == 10.0
    assert facts["max_grad_norm"].value is None
    for key in ("entropy_coef", "entropy_schedule", "entropy_coef_final"):  # no entropy_coef_spec: said so
        assert facts[key].value is None and "entropy_coef_spec is not set" in facts[key].unknown
    assert facts["value_loss_coef"].value == 0.75  # the code default
    assert facts["clip_epsilon"].value == 0.3


def test_unread_spec_key_is_an_error(slm_repo):
    findings = extractor(slm_repo).variant("ppo_fx_unread").findings
    unread = {f.message.split(" ")[0]: f for f in findings if f.kind == "unread_spec_key"}
    assert sorted(unread) == ["agent.algorithm.fancy_knob", "env.action_repeat"]
    assert {f.severity for f in unread.values()} == {"ERROR"}
    files = sorted(p.path.rsplit("/", 1)[-1] for p in unread["agent.algorithm.fancy_knob"].provenance)
    assert files == ["ppo.py", "ppo_playground.yaml"]
    assert ("ppo_playground.yaml", fx.line_of(fx.SPEC, "action_repeat: 2")) in lines(unread["env.action_repeat"])


def test_unread_env_key_only_for_playground_envs(slm_repo):
    # A gym env gets the remaining env keys as constructor kwargs: nothing is unread.
    gym_sets = {**SETS, "env": "CartPole-v1"}
    findings = extractor(slm_repo, sets=gym_sets).variant("ppo_fx_unread").findings
    assert [f.message.split(" ")[0] for f in findings if f.kind == "unread_spec_key"] == [
        "agent.algorithm.fancy_knob"]
    playground_sets = {**SETS, "env": "playground/CartpoleBalance"}
    findings = extractor(slm_repo, sets=playground_sets).variant("ppo_fx_unread").findings
    assert "env.action_repeat" in [f.message.split(" ")[0] for f in findings if f.kind == "unread_spec_key"]


def test_extraction_shape_and_determinism(slm_repo):
    first = extractor(slm_repo).variant("ppo_fx").to_json()
    second = extractor(slm_repo).variant("ppo_fx").to_json()
    assert first == second
    assert first["side"] == "slm" and list(first["sources"]) == ["slm"]
    assert first["scope"] == {"envs": [], "family": None, "variant": "ppo_fx"}
    assert list(first["facts"]) == sorted(first["facts"])


# -- mapping ------------------------------------------------------------------------------------

MAPPING = {
    "family_defaults": {"dm_control": ["ppo_playground", "ppo_fx"], "locomotion": ["ppo_fx_rs"]},
    "variants": {
        "ppo_fx": {"family": "dm_control"},
        "ppo_fx_small": {"family": "dm_control", "envs": ["FingerSpin"]},
        "ppo_fx_rs": {"family": "locomotion", "envs": ["Go1*"]},
        "ppo_gone": {"family": "locomotion", "envs": ["Go1Getup"]},
    },
}


def test_variant_for_env_family_and_fallback(slm_repo):
    ex = extractor(slm_repo, mapping=MAPPING)
    assert ex.variant_for("dm_control") == "ppo_fx"  # ppo_playground is not in this spec
    assert ex.variant_for("dm_control", "FingerSpin") == "ppo_fx_small"
    assert ex.variant_for("dm_control", "CartpoleBalance") == "ppo_fx"
    assert ex.variant_for(None, "Go1Getup") == "ppo_fx_rs"  # ppo_gone is absent; the pattern matches
    assert ex.family_of("ppo_fx_small") == "dm_control" and ex.family_of("ppo_fx_big_mb") is None
    assert ex.variant("ppo_fx_small").scope == {"variant": "ppo_fx_small", "family": "dm_control",
                                                 "envs": ["FingerSpin"]}
    with pytest.raises(BraxDiffError, match="no default SLM-Lab variant for family 'manipulation'"):
        ex.variant_for("manipulation")


def test_an_env_mapped_to_another_familys_variant_gets_that_variant(slm_repo):
    """A mapping that names an env under a variant of another family is followed, not ignored;
    the env's own family still wins where it names the env, and patterns stay within a family."""
    mapping = {"family_defaults": MAPPING["family_defaults"],
               "variants": {**MAPPING["variants"], "ppo_fx_rs": {"family": "locomotion", "envs": ["Go1*", "CartpoleBalance"]},
                            "ppo_fx_big_mb": {"family": "locomotion", "envs": ["Finger*"]}}}
    ex = extractor(slm_repo, mapping=mapping)
    assert ex.variant_for("dm_control", "CartpoleBalance") == "ppo_fx_rs"
    assert ex.variant_for("dm_control", "FingerSpin") == "ppo_fx_small"  # its own family names it
    assert ex.variant_for("dm_control", "FingerTurnEasy") == "ppo_fx"  # another family's pattern: not taken


def test_shipped_mapping_maps_playground_variants():
    mapping = load_mapping()
    assert mapping["variants"]["ppo_playground_fingerspin"] == {"family": "dm_control", "envs": ["FingerSpin"]}
    assert mapping["family_defaults"]["dm_control"] == ["ppo_playground"]
    assert {v["family"] for v in mapping["variants"].values()} == {"dm_control", "locomotion", "manipulation"}


def test_bad_mapping_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="family"):
        validate_mapping({"variants": {"x": {"family": "atari"}}})
    bad = tmp_path / "m.yaml"
    bad.write_text("variants: [\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_mapping(str(bad))


# -- CLI ------------------------------------------------------------------------------------------

def run_cli(args, capsys):
    code = main(["extract", "slm", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_strict_and_exit_codes(slm_repo, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no brax-diff.toml here
    path, shas = slm_repo
    base = ["--repo", str(path), "--set", "max_frame=1000"]
    code, out, _ = run_cli([*base, "--ref", shas[0], "--format", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["scope"]["variant"] == "ppo_fx"  # the file's first variant by default
    assert data["facts"]["unroll_length"]["value"] == 16
    code, out2, _ = run_cli([*base, "--ref", shas[0], "--format", "json"], capsys)
    assert out2 == out  # deterministic bytes
    code, out, _ = run_cli([*base, "--ref", shas[0], "--all-variants", "--format", "json"], capsys)
    assert [e["scope"]["variant"] for e in json.loads(out)] == fx_variants()
    assert run_cli([*base, "--ref", shas[0], "--strict"], capsys)[0] == 0
    assert run_cli([*base, "--ref", shas[1], "--strict", "--format", "json"], capsys)[0] == 1
    assert run_cli([*base, "--ref", shas[1], "--format", "json"], capsys)[0] == 0


def fx_variants():
    return ["ppo_fx", "ppo_fx_small", "ppo_fx_big_mb", "ppo_fx_rs", "ppo_fx_unread"]


@pytest.mark.parametrize("extra, message", [
    (["--variant", "nope"], "no variant 'nope'"),
    (["--set", "oops"], "--set 'oops': expected KEY=VALUE"),
    (["--variant", "ppo_fx", "--all-variants"], "not both"),
    (["--spec", "slm_lab/spec/missing.yaml"], "not found"),
    (["--format", "xml"], "--format 'xml'"),
    (["--ref", "no-such-ref"], "cannot resolve ref"),
])
def test_cli_bad_input_is_one_line_and_exit_2(slm_repo, capsys, tmp_path, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    path, shas = slm_repo
    args = ["--repo", str(path), "--set", "max_frame=1000"]
    if "--ref" not in extra:
        args += ["--ref", shas[0]]
    code, out, err = run_cli([*args, *extra], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_cli_missing_placeholder_exit_2(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = {**fx.repo_files(), fx.SPEC_PATH: fx.SPEC.replace("lam: 0.9\n", 'lam: "${lam}"\n')}
    path = tmp_path / "SLM-Lab"
    make_repo(path, [files])
    code, _, err = run_cli(["--repo", str(path)], capsys)
    assert code == 2 and "--set lam=VALUE" in err and err.count("\n") == 1


def test_cli_user_mapping_flag(slm_repo, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, shas = slm_repo
    user = tmp_path / "mapping.yaml"
    user.write_text("family_defaults: {}\nvariants:\n  ppo_fx: {family: locomotion, envs: [Go1Getup]}\n")
    code, out, _ = run_cli(["--repo", str(path), "--ref", shas[0], "--set", "max_frame=1",
                            "--mapping", str(user), "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["scope"] == {"envs": ["Go1Getup"], "family": "locomotion", "variant": "ppo_fx"}


def test_cli_runs_as_a_module(slm_repo, tmp_path):
    path, shas = slm_repo
    done = subprocess.run([sys.executable, "-m", "brax_diff", "extract", "slm", "--repo", str(path), "--ref",
                           shas[1], "--set", "max_frame=1000", "--variant", "ppo_fx"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "spec_code_mismatch" in done.stdout and "LinearToMin" in done.stdout


# -- spec values SLM-Lab cannot train with (hardening) -----------------------------------------

def _edited(tmp_path, old: str, new: str):
    files = fx.repo_files()
    assert old in files[fx.SPEC_PATH]
    files[fx.SPEC_PATH] = files[fx.SPEC_PATH].replace(old, new, 1)
    path = tmp_path / "SLM-Lab"
    shas = make_repo(path, [files])
    return SlmExtractor(Repository(path, "slm").resolve(shas[0]), sets=SETS)


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_a_run_length_that_is_not_finite_is_unknown_with_its_value(tmp_path, value):
    facts = _edited(tmp_path, 'max_frame: "${max_frame}"', f"max_frame: {value}").variant("ppo_fx").facts
    fact = facts["training_env_steps"]
    assert fact.is_unknown and "not a run length" in fact.unknown
    assert lines(fact) == [("ppo_playground.yaml", fx.line_of(fx.SPEC, 'max_frame: "${max_frame}"'))]


def test_an_explicit_null_gamma_leaves_discount_and_the_advantage_recursion_unknown(tmp_path):
    facts = _edited(tmp_path, "      gamma: 0.995", "      gamma: ~").variant("ppo_fx").facts
    assert facts["discount"].is_unknown and "gamma is None" in facts["discount"].unknown
    assert facts["advantage_form"].is_unknown
    assert "gamma=None, lam=0.9" in facts["advantage_form"].unknown


@pytest.mark.parametrize("value, shown", [("!!int 16.0", "'16.0'"), ("!!float abc", "'abc'"),
                                          ("!!timestamp 2020-13-45", "month must be in 1..12")])
def test_a_tagged_scalar_yaml_cannot_convert_is_one_error_line(tmp_path, capsys, value, shown):
    files = fx.repo_files()
    files[fx.SPEC_PATH] = files[fx.SPEC_PATH].replace('max_frame: "${max_frame}"', f"max_frame: {value}", 1)
    path = tmp_path / "SLM-Lab"
    make_repo(path, [files])
    code = main(["extract", "slm", "--slm-repo", str(path), "--spec", fx.SPEC_PATH, "--variant", "ppo_fx"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and shown in err[0]
