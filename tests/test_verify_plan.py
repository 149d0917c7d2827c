"""The static half of verify: the plan, the settings mapping, the CLI's --plan. No torch, no jax."""

from __future__ import annotations

import json

import pytest

from brax_diff.cli import main
from brax_diff.errors import BraxDiffError
from brax_diff.facts.model import Extraction, Fact, Finding, Provenance, SourceInfo, dumps
from brax_diff.verify import build_plan
from brax_diff.verify.costs import estimate, load_throughput, run_seconds
from brax_diff.verify.plan import BRAX, TORCH, RunSpec, Scoring, resolve_options, same_value
from brax_diff.verify.settings import (TrainerSettings, apply_fact, brax_train_settings, parse_overrides,
                                       settings_from_facts, split_sets)

# Small shapes shared with the training tests: 16 envs x 10 steps, 2 epochs of 2 minibatches.
SLM_VALUES = {
    "num_envs": 16, "unroll_length": 10, "unrolls_per_update": 1, "transitions_per_update": 160,
    "epochs_per_update": 2, "minibatch_transitions": 80, "minibatches_per_epoch": 2,
    "learning_rate": 1e-3, "lr_schedule": "linear_decay", "lr_final_factor": 0.033, "lr_decay_steps": 100_000,
    "policy_hidden_layers": [32, 32], "value_hidden_layers": [64, 64], "activation": "SiLU",
    "entropy_coef": 0.01, "clip_epsilon": 0.2, "obs_norm_method": "welford", "discount": 0.995,
}
BRAX_VALUES = dict(SLM_VALUES, activation="swish", learning_rate=0.0, lr_schedule="constant",
                   lr_final_factor=1.0, lr_decay_steps=None, unrolls_per_update=2, transitions_per_update=320,
                   obs_norm_method="ema", clip_epsilon=0.3, value_loss_coef=0.25)
BRAX_VALUES.pop("minibatch_transitions")


def extraction(side: str, values: dict, env: str = "CartpoleBalance") -> Extraction:
    source = SourceInfo(f"https://github.com/example/{side}", "a" * 40, "2025-01-01T00:00:00+00:00")
    facts = {key: Fact(key, value, (Provenance(source.repo, source.commit, "params.py", line),))
             for line, (key, value) in enumerate(sorted(values.items()), start=1)}
    return Extraction(side, {side: source}, {"env": env}, facts)


def pair(slm_values=SLM_VALUES, brax_values=BRAX_VALUES):
    return extraction("brax", brax_values), extraction("slm", slm_values)


def test_plan_moves_every_expressible_difference_and_explains_the_rest():
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=3, budget=1600)
    actions = {a.key: a.action for a in plan.ablations}
    for key in ("learning_rate", "unrolls_per_update", "clip_epsilon", "lr_schedule", "lr_final_factor"):
        assert actions[key] == "variant", key
    assert actions["transitions_per_update"] == "derived"
    assert actions["lr_decay_steps"] == "derived"  # Brax's constant rate has no horizon to move
    assert actions["obs_norm_method"] == "unsupported"
    assert actions["value_loss_coef"] == "missing"  # no SLM-Lab fact
    assert actions["minibatch_transitions"] == "missing"
    assert actions["activation"] == "match"  # SiLU and swish are one function
    assert actions["num_envs"] == "match"
    moved = ["clip_epsilon", "learning_rate", "lr_final_factor", "lr_schedule", "unrolls_per_update"]
    assert plan.arms() == ["baseline", "all_fixes", *[f"loo:{k}" for k in moved], "reference"]
    assert len(plan.runs) == 3 * len(plan.arms())
    assert {r.seed for r in plan.runs} == {0, 1, 2}


def test_all_fixes_moves_every_key_and_leave_one_out_puts_one_back():
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, arms=("gap", "loo", "variants"))
    runs = {r.arm: r.settings for r in plan.runs}
    baseline, fixed = runs["baseline"], runs["all_fixes"]
    assert fixed["learning_rate"] == 0.0 and fixed["unrolls_per_update"] == 2 and fixed["clip_epsilon"] == 0.3
    assert fixed["lr_schedule"] == "constant" and fixed["lr_final_factor"] == 1.0
    # the minibatch count rules: Brax's 2 minibatches of a 2x longer batch are 2 x 160
    assert fixed["minibatch_transitions"] == 160 and baseline["minibatch_transitions"] == 80
    loo = runs["loo:clip_epsilon"]
    assert {k for k in fixed if fixed[k] != loo[k]} == {"clip_epsilon"} and loo["clip_epsilon"] == 0.2
    variant = runs["variant:learning_rate"]
    assert {k for k in baseline if baseline[k] != variant[k]} == {"learning_rate"}
    unrolls = runs["variant:unrolls_per_update"]
    assert {k for k in baseline if baseline[k] != unrolls[k]} == {"unrolls_per_update", "minibatch_transitions"}
    assert runs["reference"]["train"]["clipping_epsilon"] == 0.3
    assert {r.trainer for r in plan.runs if r.arm != "reference"} == {TORCH}
    assert next(r for r in plan.runs if r.arm == "reference").trainer == BRAX


def test_budget_is_rounded_to_whole_updates_of_every_arm_and_checkpoints_are_shared():
    brax, slm = pair()
    # baseline 160 steps per update, all_fixes and reference 320: checkpoints on multiples of 320
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1900, evals=2, arms=("gap",))
    assert plan.update_steps["CartpoleBalance"] == {"baseline": 160, "all_fixes": 320, "reference": 320}
    assert plan.requested_budget == 1900 and plan.budget == 1920
    assert plan.scoring == Scoring(2, 960, 32, False) and plan.scoring.checkpoints == [0, 960, 1920]
    assert {r.budget for r in plan.runs} == {1920} and {r.scoring for r in plan.runs} == {plan.scoring}
    assert "rounded to 1,920 = 2 checkpoint(s) x 960" in plan.render() and not plan.warnings
    # 5 whole updates do not split into 2 checkpoints without a 20% overshoot: 1 checkpoint, said so
    odd = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1500, evals=2, arms=("gap",))
    assert odd.budget == 1600 and odd.scoring.evals == 1
    assert odd.warnings == ["1 checkpoint(s), not 2: 5 whole updates of 320 env steps (every arm's update divides "
                            "it) split no further without overshooting the budget (env steps per update: all_fixes, "
                            "reference 320; baseline 160)"]
    # a budget smaller than one update: one checkpoint, and a warning that says by how much
    tiny = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=100, evals=5, arms=("gap",))
    assert tiny.budget == 320 and tiny.scoring.evals == 1
    assert any("one update is 320 env steps, more than the budget of 100" in w for w in tiny.warnings)
    assert "warning: CartpoleBalance all_fixes: one update is 320" in tiny.render()


def test_a_longer_slm_update_grows_the_budget_and_the_warning_names_the_update_sizes_that_did():
    """The cpu preset's budget is in env steps; the arms' updates come from the refs' settings.
    SLM-Lab master's time_horizon 2048 (65,536 env steps an update at 32 envs, against Brax's
    15,360) made the preset's 245,760 steps 983,040 with one checkpoint: the plan says why."""
    brax, slm = pair(slm_values=dict(SLM_VALUES, unroll_length=64, transitions_per_update=1024))
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, evals=4, arms=("gap",))
    assert plan.update_steps["CartpoleBalance"] == {"baseline": 1024, "all_fixes": 320, "reference": 320}
    assert plan.budget == 5120 and plan.scoring.evals == 1
    assert plan.warnings[-1] == ("the budget of 1,600 env steps became 5,120 to end on whole updates of every arm "
                                 "(env steps per update: baseline 1,024; all_fixes, reference 320; every 5,120 steps "
                                 "all end one)")
    with_loo = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, evals=4)
    assert with_loo.warnings[-1].endswith("(env steps per update: loo:unroll_length 2,048; baseline 1,024; "
                                          "all_fixes, loo:clip_epsilon and 4 more 320; loo:unrolls_per_update 160)")


def test_scaling_envs_keeps_each_sides_minibatch_count():
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, num_envs=4, arms=("gap",))
    runs = {r.arm: r.settings for r in plan.runs}
    assert runs["baseline"]["num_envs"] == 4 and runs["baseline"]["minibatch_transitions"] == 20  # 40 / 2
    assert runs["all_fixes"]["minibatch_transitions"] == 40  # 4 x 10 x 2 / 2
    train = runs["reference"]["train"]
    assert train["num_envs"] == 4 and train["num_minibatches"] == 2 and train["batch_size"] == 4
    four = extraction("brax", dict(BRAX_VALUES, minibatches_per_epoch=4))
    with pytest.raises(BraxDiffError, match="does not split into 4 minibatches"):
        build_plan(four, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, num_envs=3, arms=("gap",))


def test_a_decaying_lr_needs_the_real_runs_horizon():
    brax, slm = pair(slm_values={k: v for k, v in SLM_VALUES.items() if k != "lr_decay_steps"})
    with pytest.raises(BraxDiffError, match="--set lr_decay_steps=N$"):
        build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600)
    frame = "agent.net.lr_scheduler_spec.frame is '${max_frame}', the run's length"
    slm.unknown("lr_decay_steps", f"lr_decay_steps: {frame}",
                Finding("unset_placeholder", "WARNING", frame, (), "lr_decay_steps"))
    with pytest.raises(BraxDiffError, match=r"lr_scheduler_spec.frame, which the spec leaves to the command line "
                                            r"as \$\{max_frame\}\); give the values to train with: --set max_frame=N$"):
        build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600)
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600,
                      overrides={"lr_decay_steps": 1_000_000})
    assert plan.baseline["CartpoleBalance"].lr_decay_steps == 1_000_000


def test_every_missing_value_is_asked_for_at_once_and_a_missing_scheduler_is_named_not_max_frame():
    """SLM-Lab master names an LR scheduler its code lacks: the schedule, its end and its horizon
    are all unknown for that reason. One error asks for all three (not one per run) and says the
    variant cannot train; --set max_frame would not help, so it is not the advice."""
    brax, slm = pair()
    slm.scope["variant"] = "ppo_fx"
    why = "lr_scheduler_spec.name 'LinearToMin' is not defined at this ref: training fails before it is used"
    for key in ("lr_schedule", "lr_final_factor", "lr_decay_steps"):
        slm.unknown(key, f"{key}: {why}", Finding("pattern_not_found", "WARNING", f"{key}: {why}", (), key))
    slm.find(Finding("spec_code_mismatch", "ERROR", "agent.net.lr_scheduler_spec.name 'LinearToMin': "
                     "get_lr_scheduler has no branch for it", (), "lr_schedule"))
    second = extraction("slm", dict(SLM_VALUES), env="CheetahRun")
    second.facts.pop("lr_decay_steps")
    with pytest.raises(BraxDiffError) as raised:
        build_plan(brax, {"CartpoleBalance": slm, "CheetahRun": second}, envs=["CartpoleBalance", "CheetahRun"],
                   seeds=1, budget=1600)
    message = str(raised.value)
    assert message == (
        "CartpoleBalance: lr_final_factor, lr_schedule, lr_decay_steps are unknown because SLM-Lab's ppo_fx cannot "
        "train at this ref: agent.net.lr_scheduler_spec.name 'LinearToMin': get_lr_scheduler has no branch for it; "
        "CheetahRun: the baseline needs SLM-Lab's lr_decay_steps, unknown at this ref (the learning rate decays and "
        "SLM-Lab's spec gives no horizon for it); make the variant train at that ref (or --variant one that does), "
        "or plan with values of your choosing, which are not what SLM-Lab trains: --set lr_final_factor=VALUE "
        "--set lr_schedule=VALUE --set lr_decay_steps=N")
    assert "max_frame" not in message
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, overrides={
        "lr_schedule": "linear_decay", "lr_final_factor": 0.1, "lr_decay_steps": 1_000_000})
    assert plan.baseline["CartpoleBalance"].lr_decay_steps == 1_000_000
    assert plan.warnings[0] == ("CartpoleBalance: SLM-Lab's ppo_fx cannot train at this ref, so the baseline trains "
                                "settings SLM-Lab itself cannot run: agent.net.lr_scheduler_spec.name 'LinearToMin': "
                                "get_lr_scheduler has no branch for it")


def test_keys_limit_the_moved_keys_and_unknown_keys_are_errors():
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=2, budget=1600, keys=["learning_rate"])
    assert plan.arms() == ["baseline", "all_fixes", "loo:learning_rate", "reference"]
    skipped = [a.key for a in plan.ablations if a.action == "skipped"]
    assert "clip_epsilon" in skipped and "learning_rate" not in skipped
    with pytest.raises(BraxDiffError, match="unknown canonical key 'lernrate'"):
        build_plan(brax, slm, envs=["CartpoleBalance"], seeds=2, budget=1600, keys=["lernrate"])
    with pytest.raises(BraxDiffError, match="--seeds"):
        build_plan(brax, slm, envs=["CartpoleBalance"], seeds=0, budget=1600)
    with pytest.raises(BraxDiffError, match="unknown arm group"):
        build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, arms=("gapp",))


def test_a_brax_value_the_trainer_cannot_take_is_unsupported_not_run():
    brax, slm = pair(brax_values=dict(BRAX_VALUES, lr_schedule="adaptive_kl"))
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600)
    entry = next(a for a in plan.ablations if a.key == "lr_schedule")
    assert entry.action == "unsupported" and "adaptive_kl" in entry.reason
    assert "loo:lr_schedule" not in plan.arms()


def test_a_constant_schedules_end_moves_with_its_start():
    """clip_epsilon_final under constant schedules is clip_epsilon again: derived, not a second fix."""
    constant = {"clip_epsilon_schedule": "constant", "entropy_schedule": "constant", "entropy_coef_final": 0.01}
    slm = extraction("slm", dict(SLM_VALUES, clip_epsilon_final=0.2, **constant))
    brax = extraction("brax", dict(BRAX_VALUES, clip_epsilon_final=0.3, **constant))
    plan = build_plan(brax, slm, seeds=1, budget=3200)
    by_key = {a.key: a for a in plan.ablations}
    assert (by_key["clip_epsilon_final"].action, by_key["clip_epsilon_final"].reason) == (
        "derived", "follows from clip_epsilon (a constant clip_epsilon_schedule ends where it starts)")
    assert by_key["clip_epsilon"].action == "variant" and by_key["entropy_coef_final"].action == "match"
    assert plan.warnings == []
    decaying = extraction("slm", dict(SLM_VALUES, clip_epsilon_final=0.1, **dict(constant, clip_epsilon_schedule="linear_decay")))
    plan = build_plan(brax, decaying, seeds=1, budget=3200)
    by_key = {a.key: a for a in plan.ablations}
    assert by_key["clip_epsilon_final"].action == "unsupported"
    assert (by_key["clip_epsilon_schedule"].action, by_key["clip_epsilon_schedule"].reason) == (
        "unsupported", "a constant clip range only")
    assert plan.warnings == ["CartpoleBalance: SLM-Lab's clip_epsilon_schedule is 'linear_decay', the PyTorch trainer "
                             "runs 'constant': the baseline is not SLM-Lab's settings there"]


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


def test_presets_fill_what_the_flags_leave_open():
    cpu = resolve_options("cpu", seeds=None, budget=None, arms=None, num_envs=None, evals=None, eval_envs=None)
    assert cpu["arms"] == ("gap",) and cpu["seeds"] == 5 and cpu["num_envs"] == 32 and cpu["jobs"] == 2
    mine = resolve_options("cpu", seeds=7, budget=None, arms="gap,loo", num_envs=None, evals=None, eval_envs=None)
    assert mine["seeds"] == 7 and mine["arms"] == ("gap", "loo") and mine["budget"] == cpu["budget"]
    assert cpu["overrides"] == {"epochs_per_update": 4}
    merged = resolve_options("cpu", overrides={"epochs_per_update": 8, "num_envs": 16})
    assert merged["overrides"] == {"epochs_per_update": 8, "num_envs": 16}
    default = resolve_options(None, seeds=None, budget=None, arms=None, num_envs=None, evals=None, eval_envs=None)
    assert default["arms"] == ("gap", "loo") and default["num_envs"] is None and default["seeds"] == 5
    assert default["overrides"] == {}
    with pytest.raises(BraxDiffError, match="unknown --preset 'laptop'"):
        resolve_options("laptop")


def test_verify_set_splits_trainer_settings_from_spec_variables():
    fields, spec_vars = split_sets(["num_envs=8", "max_frame=1e8", "lr_decay_steps=1e8"])
    assert fields == {"num_envs": 8, "lr_decay_steps": 100_000_000} and spec_vars == {"max_frame": "1e8"}
    with pytest.raises(BraxDiffError, match="expected NAME=VALUE"):
        split_sets(["num_envs"])
    with pytest.raises(BraxDiffError, match="not a int"):
        split_sets(["lr_decay_steps=1.5"])
    # Twice with two values: SLM-Lab's -s takes the first, most tools the last; brax-diff neither.
    with pytest.raises(BraxDiffError, match=r"--set max_frame is given twice \('1e8' and '2e8'\)"):
        split_sets(["max_frame=1e8", "max_frame=2e8"])
    with pytest.raises(BraxDiffError, match="--set num_envs is given twice"):
        split_sets(["num_envs=8", "num_envs=16"])
    assert split_sets(["max_frame=1e8", "max_frame=1e8"])[1] == {"max_frame": "1e8"}


def test_the_estimate_counts_every_run_and_says_which_machine():
    brax, slm = pair()
    throughput = load_throughput()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=2, budget=1600, arms=("gap",))
    cost = estimate(plan, throughput)
    one_seed = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, arms=("gap",))
    single = estimate(one_seed, throughput)
    assert cost.compile_seconds == single.compile_seconds  # one compilation per shape, not per seed
    # the single-seed engine (the default): every seed a run of its own
    assert cost.seconds - cost.compile_seconds == pytest.approx(2 * (single.seconds - single.compile_seconds))
    # batched: an arm's 2 seeds are one unit, the per-call terms once, the per-seed terms twice
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=2, budget=1600, arms=("gap",), engine="batched")
    cost = estimate(plan, throughput)
    baseline, all_fixes, reference = plan.runs[:3]
    assert [r.arm for r in plan.runs[:3]] == ["baseline", "all_fixes", "reference"]
    one, two = run_seconds(baseline, throughput), run_seconds(baseline, throughput, seeds=2)
    assert one < two < 1.5 * one
    assert cost.seconds - cost.compile_seconds == pytest.approx(
        two + run_seconds(all_fixes, throughput, seeds=2) + 2 * run_seconds(reference, throughput))
    assert single.seconds - single.compile_seconds == pytest.approx(
        one + run_seconds(all_fixes, throughput) + run_seconds(reference, throughput))
    longer = estimate(build_plan(brax, slm, envs=["CartpoleBalance"], seeds=2, budget=16000, arms=("gap",)),
                      throughput)
    assert longer.seconds > cost.seconds
    assert throughput.machine in cost.render() and set(cost.per_arm) == {"baseline", "all_fixes", "reference"}
    two = estimate(plan, throughput, jobs=2)
    assert two.seconds - two.compile_seconds == pytest.approx((cost.seconds - cost.compile_seconds) / 2)


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


def test_truncation_maps_to_the_trainers_without_changing_what_they_do():
    # Brax's trainer: its own bootstrap_on_timeout flag; a value it cannot run is left to its default
    assert brax_train_settings({"truncation": "mask_bootstrap_last_state"})["train"] == {"bootstrap_on_timeout": False}
    assert brax_train_settings({"truncation": "bootstrap_current_state"})["train"] == {"bootstrap_on_timeout": True}
    assert brax_train_settings({"truncation": "bootstrap_next_obs_across_reset"})["train"] == {}
    # the PyTorch trainer: SLM-Lab's GAE by default, Brax's mask when asked; nothing else
    assert TrainerSettings().truncation == "bootstrap_next_obs_across_reset"
    settings, _ = settings_from_facts({"truncation": "mask_bootstrap_last_state"})
    assert settings.truncation == "mask_bootstrap_last_state"
    with pytest.raises(BraxDiffError, match="truncation 'terminal' is not one this trainer runs"):
        settings_from_facts({"truncation": "terminal"})


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
    scoring = Scoring(2, 800, 16, False)
    settings = TrainerSettings().to_json()
    spec = RunSpec(TORCH, "baseline", "CartpoleBalance", 0, 1600, settings, scoring)
    same = RunSpec(TORCH, "other-arm-name", "CartpoleBalance", 0, 1600, settings, scoring)
    assert spec.run_id("0.2.0") == same.run_id("0.2.0")  # the arm's name is a label, not an input
    different = [
        RunSpec(TORCH, "baseline", "CartpoleBalance", 1, 1600, settings, scoring),
        RunSpec(TORCH, "baseline", "CartpoleBalance", 0, 3200, settings, scoring),
        RunSpec(TORCH, "baseline", "CartpoleSwingup", 0, 1600, settings, scoring),
        RunSpec(BRAX, "baseline", "CartpoleBalance", 0, 1600, settings, scoring),
        RunSpec(TORCH, "baseline", "CartpoleBalance", 0, 1600, TrainerSettings(learning_rate=0.0).to_json(), scoring),
        RunSpec(TORCH, "baseline", "CartpoleBalance", 0, 1600, settings, Scoring(2, 800, 16, True)),
        RunSpec(TORCH, "baseline", "CartpoleBalance", 0, 1600, settings, Scoring(2, 800, 32, False)),
    ]
    ids = {spec.run_id("0.2.0")} | {d.run_id("0.2.0") for d in different} | {spec.run_id("0.3.0")}
    assert len(ids) == 9
    assert RunSpec.from_json(spec.to_json()) == spec


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


def test_cli_plan_prints_steps_updates_and_an_estimated_time(tmp_path, capsys):
    code = main(["verify", "--plan", *write_pair(tmp_path), "--seeds", "2", "--budget", "1500",
                 "--keys", "learning_rate,clip_epsilon"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("verify plan: 10 runs = 1 env(s) x 2 seed(s) x 5 arm(s); 1,600 env steps per run, "
                          "16,000 in all")
    assert "budget 1,500 rounded to 1,600 = 5 checkpoint(s) x 320" in out
    assert "env steps per update: baseline 160 (10 updates), all_fixes 160 (10 updates)" in out
    assert "reference 320 (5 updates)" in out
    assert "learning_rate" in out and "slm=0.001" in out and "brax=0" in out
    assert "transitions_per_update" in out and "derived" in out
    assert "arms: baseline, all_fixes, loo:clip_epsilon, loo:learning_rate, reference" in out
    assert "estimated wall time: " in out and "measured" in out


def test_cli_plan_json_and_errors(tmp_path, capsys):
    args = write_pair(tmp_path)
    assert main(["verify", "--plan", *args, "--format", "json", "--seeds", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["seeds"] == 1 and data["requested_budget"] == 1_000_000 and data["budget"] % 320 == 0
    assert {r["arm"] for r in data["runs"]} >= {"baseline", "all_fixes", "loo:learning_rate", "reference"}
    assert data["estimate"]["seconds"] > 0 and data["presets"]["cpu"]["arms"] == ["gap"]
    assert main(["verify", "--plan", *args, "--set", "max_frame=1e8"]) == 2
    assert "spec variables need the SLM-Lab repository" in capsys.readouterr().err
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
            "brax_diff.verify.costs, brax_diff.cli.verify; bad = [m for m in ('torch', 'jax', 'brax', 'mujoco_playground') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture()
def fixture_repos(tmp_path):
    """Upstream-shaped fixture repositories (hand-written files) for the real extractors."""
    import brax_fixtures
    import slm_fixtures
    from gitfixture import make_repo

    paths = {name: tmp_path / name for name in ("brax", "playground", "slm")}
    make_repo(paths["brax"], [brax_fixtures.BRAX_OLD], origin="https://github.com/google/brax.git")
    make_repo(paths["playground"], [brax_fixtures.PLAYGROUND],
              origin="https://github.com/google-deepmind/mujoco_playground.git")
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("family_defaults:\n  dm_control: [ppo_fx]\nvariants:\n  ppo_fx: {family: dm_control}\n")
    make_repo(paths["slm"], [slm_fixtures.repo_files()], origin="https://github.com/kengz/SLM-Lab.git")
    return ["--brax-repo", str(paths["brax"]), "--playground-repo", str(paths["playground"]),
            "--slm-repo", str(paths["slm"]), "--variant", "ppo_fx", "--env", "CheetahRun"]


def test_verify_needs_the_real_runs_length_and_takes_it_as_a_spec_variable(fixture_repos, capsys):
    """The fixture spec's LR decays over ${max_frame}: without it, the plan stops and says how;
    with --set max_frame=N the SLM-Lab extraction has lr_decay_steps = N."""
    assert main(["verify", "--plan", *fixture_repos]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: CheetahRun: the baseline needs SLM-Lab's lr_decay_steps, unknown at this ref "
                          "(SLM-Lab's learning rate decays over lr_scheduler_spec.frame")
    assert err.endswith("give the values to train with: --set max_frame=N\n") and err.count("\n") == 1
    assert main(["verify", "--plan", *fixture_repos, "--set", "max_frame=2000000", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"]["CheetahRun"]["lr_decay_steps"] == 2_000_000
    assert data["spec_sets"] == {"max_frame": "2000000"}
    assert main(["verify", "--plan", *fixture_repos, "--set", "maxframe=1"]) == 2
    assert "has no ${maxframe} placeholder" in capsys.readouterr().err


def test_a_written_variant_is_the_spec_fixes_arm_beside_the_trainer_level_all_fixes():
    """`fixed` is the SLM-Lab variant `brax-diff fix` writes, read back: spec_fixes trains its
    settings exactly (the baseline a plan of that variant has), as SLM-Lab would run it;
    all_fixes stays the trainer-level arm (code changes included) that moves every expressible
    difference to Brax's value, and leave-one-out undoes all_fixes' moves."""
    brax, slm = pair()
    # the spec can set the clip range and a longer horizon (Brax's batch, 1 x 20), not 2 unrolls
    written = extraction("slm", dict(SLM_VALUES, clip_epsilon=0.3, unroll_length=20, transitions_per_update=320))
    written.scope["variant"] = "ppo_fx_brax"
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, arms=("gap", "loo"), fixed=written)
    runs = {r.arm: r.settings for r in plan.runs}
    alone = build_plan(brax, written, envs=["CartpoleBalance"], seeds=1, budget=1600, arms=("gap",))
    without = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, arms=("gap", "loo"))
    assert runs["spec_fixes"] == {r.arm: r.settings for r in alone.runs}["baseline"]
    assert (runs["spec_fixes"]["unroll_length"], runs["spec_fixes"]["unrolls_per_update"]) == (20, 1)
    assert runs["spec_fixes"]["clip_epsilon"] == 0.3 and runs["spec_fixes"]["lr_schedule"] == "linear_decay"
    # all_fixes is the trainer-level arm whether or not a spec variant was written
    assert runs["all_fixes"] == {r.arm: r.settings for r in without.runs}["all_fixes"]
    assert (runs["all_fixes"]["unroll_length"], runs["all_fixes"]["unrolls_per_update"]) == (10, 2)
    assert runs["all_fixes"]["lr_schedule"] == "constant" and runs["all_fixes"]["learning_rate"] == 0.0
    assert plan.arms() == ["baseline", "all_fixes", "spec_fixes", *[a for a in without.arms() if a.startswith("loo:")],
                           "reference"]
    assert {r.arm: r.settings for r in plan.runs if r.arm.startswith("loo:")} == {
        r.arm: r.settings for r in without.runs if r.arm.startswith("loo:")}
    assert [a.to_json() for a in plan.ablations] == [a.to_json() for a in without.ablations]
    spec_actions = {a.key: (a.action, a.reason) for a in plan.spec_ablations}
    assert spec_actions["unrolls_per_update"][0] == "not_in_spec"
    assert spec_actions["unroll_length"] == ("variant", "the written variant sets 20")
    assert spec_actions["clip_epsilon"] == ("variant", "")
    described = plan.to_json()
    assert described["all_fixes"] == {"from": "settings", "title": "all_fixes (trainer-level, code changes included)"}
    assert described["spec_fixes"]["variants"] == {"CartpoleBalance": "ppo_fx_brax"}
    assert without.to_json()["spec_fixes"] is None and "spec_fixes" not in without.arms()
    text = plan.render()
    assert "spec_fixes trains the spec variant `brax-diff fix` writes, as SLM-Lab runs it: CartpoleBalance ppo_fx_brax" in text
    assert "all_fixes is trainer-level, code changes included" in text
    assert "the spec keeps SLM-Lab's" in text and "unrolls_per_update" in text
    with pytest.raises(BraxDiffError, match="give --keys to fix"):
        build_plan(brax, slm, envs=["CartpoleBalance"], keys=["clip_epsilon"], fixed=written)


def test_the_reference_resets_its_envs_as_often_as_the_real_run_does():
    """Issue 23: Brax's resets of every training env reach ppo.train scaled as every other size:
    after as many updates as the real run resets after (env_steps_between_resets over one
    update's env steps per env), via the num_resets_per_eval that splits the plan's checkpoint
    interval into such epochs; the stand_in resets alike, all_fixes moves the key, the baseline
    never resets. Where no such count exists the plan says so, never silently."""
    def planned(every, **extra):
        values = dict(BRAX_VALUES, num_resets_per_eval=10, env_steps_between_resets=every, action_repeat=1,
                      action_distribution="tanh_normal", std_transform="softplus", std_min=0.001, std_max=None)
        values.update(extra)
        brax, slm = pair(brax_values=values, slm_values=dict(SLM_VALUES, num_resets_per_eval=0,
                                                              env_steps_between_resets=0))
        plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=3200, evals=2,
                          arms=("gap", "stand_in"))
        by_arm = {r.arm: r.settings for r in plan.runs}
        return plan, by_arm

    # Brax's update: 16 envs x 2 unrolls x 10 steps, 20 env steps per env; 5 updates between checkpoints
    plan, arms = planned(20)  # the real run resets after every update
    assert plan.scoring.checkpoints == [0, 1600, 3200]
    assert arms["reference"]["train"]["num_resets_per_eval"] == 5  # 5 epochs of ceil(5 / 5) = 1 update
    assert arms["stand_in"]["env_steps_between_resets"] == 20 and arms["all_fixes"]["env_steps_between_resets"] == 20
    assert arms["baseline"]["env_steps_between_resets"] == 0
    # the stand_in starts each seed from the weights Brax's trainer starts it from; no other arm does
    assert arms["stand_in"]["initial_weights"] == "brax_keys"
    assert {arms[a]["initial_weights"] for a in ("baseline", "all_fixes")} == {"torch_generators"}
    actions = {a.key: (a.action, a.reason) for a in plan.ablations}
    assert actions["env_steps_between_resets"] == ("variant", "")
    assert actions["num_resets_per_eval"][0] == "derived" and "env_steps_between_resets" in actions["num_resets_per_eval"][1]
    assert not plan.warnings
    assert planned(100)[1]["reference"]["train"]["num_resets_per_eval"] == 1  # every 5 updates: once a checkpoint

    for every, extra, why in (
            (40, {}, "a reset every 2 update(s) does not divide the plan's 5 updates between checkpoints"),
            (30, {}, "30 is not whole updates of 20 env steps per env"),
            (20, {"action_repeat": None}, "its action_repeat or num_envs is not known to the plan")):
        plan, arms = planned(every, **extra)
        assert "num_resets_per_eval" not in arms["reference"]["train"], every
        assert arms["stand_in"]["env_steps_between_resets"] == 0  # it stands for the reference
        assert arms["all_fixes"]["env_steps_between_resets"] == every
        assert (f"CartpoleBalance: Brax resets every training env after {every:,} env steps of each "
                f"(num_resets_per_eval 10); the reference and the stand_in run without those resets: {why}"
                ) in plan.warnings
    brax, slm = pair(brax_values=dict(BRAX_VALUES, num_resets_per_eval=10, env_steps_between_resets=20,
                                      action_repeat=1), slm_values=dict(SLM_VALUES, env_steps_between_resets=0))
    off = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=3200, evals=2, arms=("gap", "stand_in"),
                     overrides={"env_steps_between_resets": 0})  # --set: no arm resets, the reference neither
    assert all(r.settings.get("env_steps_between_resets", 0) == 0 and "num_resets_per_eval" not in
               r.settings.get("train", {}) for r in off.runs)
    plan, arms = planned(0, num_resets_per_eval=0)
    assert "num_resets_per_eval" not in arms["reference"]["train"] and not any("resets" in w for w in plan.warnings)
    assert arms["stand_in"]["env_steps_between_resets"] == 0


def test_a_stand_in_of_a_policy_it_cannot_copy_says_it_draws_its_own_weights():
    brax, slm = pair()  # these Brax values keep a normal policy: not the tanh_normal MLP copied
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=3200, evals=2, arms=("gap", "stand_in"))
    assert {r.arm: r.settings for r in plan.runs}["stand_in"]["initial_weights"] == "torch_generators"
    assert ("CartpoleBalance: the stand_in draws its own initial weights: Brax's normal policy is not the "
            "tanh_normal MLP whose weights it copies") in plan.warnings


def test_a_replication_plans_fresh_seeds_whose_runs_are_the_same_runs():
    """--first-seed N: seeds N .. N + seeds - 1, each run the one a plan from seed 0 makes for that
    seed (same settings, same cache identity), so a finding of seeds 0-9 is replicated on fresh
    seeds and a longer plan reuses both. The stand_in group alone plans the reference it is
    tested against, and nothing else."""
    brax, slm = pair(brax_values=dict(BRAX_VALUES, action_distribution="tanh_normal", std_transform="softplus",
                                      std_min=0.001, std_max=None))
    kwargs = dict(envs=["CartpoleBalance"], budget=3200, evals=2, arms=("stand_in",))
    fresh = build_plan(brax, slm, seeds=2, first_seed=3, **kwargs)
    assert [(r.arm, r.seed) for r in fresh.runs] == [("reference", 3), ("stand_in", 3), ("reference", 4),
                                                      ("stand_in", 4)]
    whole = build_plan(brax, slm, seeds=5, **kwargs)
    assert {(r.arm, r.seed): r.run_id("0.2.0") for r in fresh.runs} == {
        (r.arm, r.seed): r.run_id("0.2.0") for r in whole.runs if r.seed >= 3}
    assert fresh.to_json()["first_seed"] == 3 and "first_seed" not in whole.to_json()  # old plans' JSON as before
    assert "2 seed(s) (3-4) x 2 arm(s)" in fresh.render()
    assert "spec_fixes" not in fresh.render() and "all_fixes is" not in fresh.render()
    no_reference = build_plan(brax, slm, seeds=1, reference=False, **kwargs)
    assert [r.arm for r in no_reference.runs] == ["stand_in"]
    with pytest.raises(BraxDiffError, match="--first-seed must be >= 0"):
        build_plan(brax, slm, seeds=1, first_seed=-1, **kwargs)
    with pytest.raises(BraxDiffError, match="--first-seed must be <= 1,000,000"):
        resolve_options(None, first_seed=1_000_001)
