"""The static half of verify: the plan, the settings mapping, the CLI's --plan. No torch, no jax."""

from __future__ import annotations

import json

import pytest

from brax_diff.cli import main
from brax_diff.errors import BraxDiffError
from brax_diff.facts import Extraction, Fact, Provenance, SourceInfo, dumps
from brax_diff.verify import build_plan
from brax_diff.verify.plan import BRAX, TORCH, RunSpec, same_value
from brax_diff.verify.settings import (TrainerSettings, apply_fact, brax_train_settings, parse_overrides,
                                       settings_from_facts)

# Small shapes shared with the training tests: 16 envs x 10 steps, 2 epochs of 2 minibatches.
SLM_VALUES = {
    "num_envs": 16, "unroll_length": 10, "unrolls_per_update": 1, "transitions_per_update": 160,
    "epochs_per_update": 2, "minibatch_transitions": 80, "minibatches_per_epoch": 2,
    "learning_rate": 1e-3, "lr_schedule": "linear_decay", "lr_final_factor": 0.033,
    "policy_hidden_layers": [32, 32], "value_hidden_layers": [64, 64], "activation": "SiLU",
    "entropy_coef": 0.01, "clip_epsilon": 0.2, "obs_norm_method": "welford", "discount": 0.995,
}
BRAX_VALUES = dict(SLM_VALUES, activation="swish", learning_rate=0.0, lr_schedule="constant",
                   lr_final_factor=1.0, unrolls_per_update=2, transitions_per_update=320,
                   obs_norm_method="ema", clip_epsilon=0.3, value_loss_coef=0.25)
BRAX_VALUES.pop("minibatch_transitions")


def extraction(side: str, values: dict, env: str = "CartpoleBalance") -> Extraction:
    source = SourceInfo(f"https://github.com/example/{side}", "a" * 40, "2025-01-01T00:00:00+00:00")
    facts = {key: Fact(key, value, (Provenance(source.repo, source.commit, "params.py", line),))
             for line, (key, value) in enumerate(sorted(values.items()), start=1)}
    return Extraction(side, {side: source}, {"env": env}, facts)


def pair(slm_values=SLM_VALUES, brax_values=BRAX_VALUES):
    return extraction("brax", brax_values), extraction("slm", slm_values)


def test_plan_runs_a_variant_per_expressible_difference_and_explains_the_rest():
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=3, budget=1600)
    actions = {a.key: a.action for a in plan.ablations}
    assert actions["learning_rate"] == "variant"
    assert actions["unrolls_per_update"] == "variant"
    assert actions["clip_epsilon"] == "variant"
    assert actions["lr_schedule"] == "variant"
    assert actions["lr_final_factor"] == "variant"
    assert actions["transitions_per_update"] == "derived"
    assert actions["obs_norm_method"] == "unsupported"
    assert actions["value_loss_coef"] == "missing"  # no SLM-Lab fact
    assert actions["minibatch_transitions"] == "missing"
    assert actions["activation"] == "match"  # SiLU and swish are one function
    assert actions["num_envs"] == "match"
    arms = plan.arms()
    assert arms == ["baseline", "variant:clip_epsilon", "variant:learning_rate", "variant:lr_final_factor",
                    "variant:lr_schedule", "variant:unrolls_per_update", "reference"]
    assert len(plan.runs) == 3 * len(arms)
    assert {r.seed for r in plan.runs} == {0, 1, 2}


def test_variant_moves_exactly_one_setting_to_the_brax_value():
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600)
    runs = {r.arm: r for r in plan.runs}
    baseline = runs["baseline"].settings
    assert baseline["learning_rate"] == 1e-3 and baseline["num_envs"] == 16 and baseline["discount"] == 0.995
    for arm in ("learning_rate", "unrolls_per_update", "clip_epsilon"):
        variant = runs[f"variant:{arm}"].settings
        changed = {k for k in baseline if baseline[k] != variant[k]}
        assert changed == {arm}
    assert runs["variant:learning_rate"].settings["learning_rate"] == 0.0
    assert runs["variant:unrolls_per_update"].settings["unrolls_per_update"] == 2
    assert runs["baseline"].trainer == TORCH and runs["reference"].trainer == BRAX


def test_keys_limit_the_variants_and_unknown_keys_are_errors():
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=2, budget=1600, keys=["learning_rate"])
    assert plan.arms() == ["baseline", "variant:learning_rate", "reference"]
    skipped = [a.key for a in plan.ablations if a.action == "skipped"]
    assert "clip_epsilon" in skipped and "learning_rate" not in skipped
    with pytest.raises(BraxDiffError, match="unknown canonical key 'lernrate'"):
        build_plan(brax, slm, envs=["CartpoleBalance"], seeds=2, budget=1600, keys=["lernrate"])
    with pytest.raises(BraxDiffError, match="--seeds"):
        build_plan(brax, slm, envs=["CartpoleBalance"], seeds=0, budget=1600)


def test_a_brax_value_the_trainer_cannot_take_is_unsupported_not_run():
    brax, slm = pair(brax_values=dict(BRAX_VALUES, lr_schedule="adaptive_kl"))
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600)
    entry = next(a for a in plan.ablations if a.key == "lr_schedule")
    assert entry.action == "unsupported" and "adaptive_kl" in entry.reason
    assert "variant:lr_schedule" not in plan.arms()


def test_overrides_apply_to_every_run_and_to_the_brax_reference():
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600,
                      overrides=parse_overrides(["num_envs=8", "policy_hidden_layers=16,16"]))
    for run in plan.runs:
        if run.trainer == TORCH:
            assert run.settings["num_envs"] == 8 and run.settings["policy_hidden_layers"] == [16, 16]
    reference = next(r for r in plan.runs if r.arm == "reference").settings
    assert reference["train"]["num_envs"] == 8
    assert reference["network"]["policy_hidden_layer_sizes"] == [16, 16]


def test_brax_train_settings_derive_batch_size_and_double_the_value_coefficient():
    kwargs = brax_train_settings(dict(BRAX_VALUES, max_grad_norm=None))
    train = kwargs["train"]
    # 16 envs x 2 unrolls = 32 sequences per update, in 2 minibatches of 16
    assert train["batch_size"] == 16 and train["num_minibatches"] == 2
    assert train["num_updates_per_batch"] == 2 and train["unroll_length"] == 10
    assert train["vf_loss_coefficient"] == 0.5  # canonical 0.25 counts Brax's 0.5 factor
    assert train["clipping_epsilon"] == 0.3 and train["discounting"] == 0.995
    assert train["max_grad_norm"] is None
    assert "learning_rate_schedule" not in train  # constant is Brax's default
    assert kwargs["network"]["activation"] == "swish"


def test_settings_from_facts_and_minibatch_rounding():
    settings, defaults = settings_from_facts(SLM_VALUES)
    assert settings.activation == "silu" and settings.policy_hidden_layers == (32, 32)
    assert "reward_scale" in defaults and "learning_rate" not in defaults
    # SLM-Lab rounds the minibatch to divide the batch: 160 transitions, 70 asked -> 2 x 80
    odd = settings.moved(minibatch_transitions=70)
    assert odd.effective_minibatch == 80 and odd.minibatches_per_epoch == 2
    assert settings.moved(minibatch_transitions=1000).effective_minibatch == 160
    assert apply_fact(settings, "minibatches_per_epoch", 4).minibatch_transitions == 40
    with pytest.raises(BraxDiffError, match="lr_schedule 'cosine'"):
        settings.moved(lr_schedule="cosine")


def test_run_id_covers_what_changes_a_run():
    spec = RunSpec(TORCH, "baseline", "CartpoleBalance", 0, 1600, TrainerSettings().to_json())
    same = RunSpec(TORCH, "other-arm-name", "CartpoleBalance", 0, 1600, TrainerSettings().to_json())
    assert spec.run_id("0.1.0") == same.run_id("0.1.0")  # the arm's name is a label, not an input
    different = [
        RunSpec(TORCH, "baseline", "CartpoleBalance", 1, 1600, TrainerSettings().to_json()),
        RunSpec(TORCH, "baseline", "CartpoleBalance", 0, 3200, TrainerSettings().to_json()),
        RunSpec(TORCH, "baseline", "CartpoleSwingup", 0, 1600, TrainerSettings().to_json()),
        RunSpec(BRAX, "baseline", "CartpoleBalance", 0, 1600, TrainerSettings().to_json()),
        RunSpec(TORCH, "baseline", "CartpoleBalance", 0, 1600, TrainerSettings(learning_rate=0.0).to_json()),
    ]
    ids = {spec.run_id("0.1.0")} | {d.run_id("0.1.0") for d in different} | {spec.run_id("0.2.0")}
    assert len(ids) == 7


def test_same_value_compares_floats_and_activation_names():
    assert same_value(0.1 + 0.2, 0.3) and not same_value(0.3, 0.31)
    assert same_value("swish", "SiLU") and not same_value("relu", "silu")
    assert same_value([32, 32], [32.0, 32.0]) and not same_value([32], [32, 32])
    assert not same_value(True, 1.5)


def test_parse_overrides_types_and_errors():
    assert parse_overrides(["num_envs=8", "max_grad_norm=none", "obs_normalization=false",
                            "learning_rate=3e-4"]) == {
        "num_envs": 8, "max_grad_norm": None, "obs_normalization": False, "learning_rate": 3e-4}
    with pytest.raises(BraxDiffError, match="bad override 'bogus=1'"):
        parse_overrides(["bogus=1"])
    with pytest.raises(BraxDiffError, match="not a int"):
        parse_overrides(["num_envs=many"])


def write_pair(tmp_path):
    brax, slm = pair()
    (tmp_path / "brax.json").write_text(dumps(brax.to_json()))
    (tmp_path / "slm.json").write_text(dumps(slm.to_json()))
    return ["--brax-json", str(tmp_path / "brax.json"), "--slm-json", str(tmp_path / "slm.json")]


def test_cli_plan_prints_the_plan(tmp_path, capsys):
    code = main(["verify", "--plan", *write_pair(tmp_path), "--seeds", "2", "--budget", "1600",
                 "--keys", "learning_rate,clip_epsilon"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("verify plan: 8 runs = 1 env(s) x 2 seed(s) x 4 arm(s), 1,600 env steps each")
    assert "learning_rate" in out and "slm=0.001" in out and "brax=0" in out
    assert "transitions_per_update" in out and "derived" in out
    assert "arms: baseline, variant:clip_epsilon, variant:learning_rate, reference" in out


def test_cli_plan_json_and_errors(tmp_path, capsys):
    args = write_pair(tmp_path)
    assert main(["verify", "--plan", *args, "--format", "json", "--seeds", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["seeds"] == 1 and data["budget"] == 1_000_000
    assert {r["arm"] for r in data["runs"]} >= {"baseline", "variant:learning_rate", "reference"}
    assert main(["verify", "--plan", *args, "--keys", "nope"]) == 2
    assert capsys.readouterr().err.strip() == "error: unknown canonical key 'nope' in --keys"
    assert main(["verify", "--plan", "--brax-json", args[1]]) == 2
    assert "go together" in capsys.readouterr().err
    assert main(["verify", "--plan", "--brax-json", args[3], "--slm-json", args[3]]) == 2
    assert "is the 'slm' side, expected 'brax'" in capsys.readouterr().err


def test_plan_module_imports_no_training_stack():
    import subprocess
    import sys

    code = ("import sys; import brax_diff.verify, brax_diff.verify.plan, brax_diff.verify.settings, "
            "brax_diff.cli.verify; bad = [m for m in ('torch', 'jax', 'brax', 'mujoco_playground') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "[]"
