"""brax_diff.verify.window's arithmetic: a Rate from a timing run, the window fit, and the
full-evidence estimate, on made-up timings (the GPU run measures the real ones)."""

from __future__ import annotations

import math

import pytest

from brax_diff.errors import BraxDiffError
from brax_diff.verify.window import FULL_EVIDENCE_ARMS, Rate, fit_window, full_evidence_cost, rate_from_timings

UPDATE = 983_040  # Brax's DM Control update: batch 1,024 x 32 minibatches x 30-step unrolls


def _rate(arm, trainer="torch-ppo", update_seconds=2.0, eval_seconds=1.0, overhead=30.0, size=UPDATE, envs=2048):
    return Rate(arm, trainer, "CartpoleSwingup", envs, size, update_seconds, eval_seconds, overhead, 60.0)


def test_a_rate_leaves_the_compiling_update_and_evaluation_out():
    rate = rate_from_timings("stand_in", "torch-ppo", "E", 2048, 1000, [9.0, 1.1, 0.9, 1.0], [5.0, 0.5, 0.5, 0.5, 0.5],
                             20.0)
    assert rate.update_seconds == 1.0 and rate.eval_seconds == 0.5
    assert rate.overhead_seconds == pytest.approx(20.0 - 4 * 1.0 - 5 * 0.5)
    assert rate.env_steps_per_s == 1000.0
    assert rate.run_seconds(10_000, 2) == pytest.approx(rate.overhead_seconds + 10 * 1.0 + 3 * 0.5)
    assert rate.run_seconds(10_001, 2) == pytest.approx(rate.overhead_seconds + 11 * 1.0 + 3 * 0.5)  # whole updates
    with pytest.raises(BraxDiffError, match="needs 2 update\(s\) and an evaluation"):
        rate_from_timings("x", "torch-ppo", "E", 1, 1, [1.0], [1.0], 2.0)
    assert rate_from_timings("x", "torch-ppo", "E", 1, 1, [3.0], [1.0, 1.0], 9.0, warm=True).update_seconds == 3.0


def test_brax_s_own_budget_with_the_seeds_that_fit():
    rates = {"reference": _rate("reference", "brax-ppo", 1.0, 2.0, 40.0), "stand_in": _rate("stand_in")}
    target = 60_000_000
    fit = fit_window(rates, ("reference", "stand_in"), target, evals=10, window_seconds=3_000)
    unit = UPDATE * 10
    assert fit.budget == math.ceil(target / unit) * unit == 68_812_800  # 7 x 10 updates: checkpoints on whole updates
    per_seed = (40 + 70 * 1.0 + 11 * 2.0) + (30 + 70 * 2.0 + 11 * 1.0)  # 132 + 181
    assert fit.seeds == int(3_000 // per_seed) == 9 and fit.seconds == pytest.approx(9 * per_seed)
    assert fit.reason == "Brax's own budget (68,812,800 env steps) fits 9 paired seed(s)"
    capped = fit_window(rates, ("reference", "stand_in"), target, evals=10, window_seconds=100_000)
    assert capped.seeds == 20  # more seeds add little past 20


def test_a_budget_that_does_not_fit_two_seeds_is_cut_to_whole_checkpointed_updates():
    rates = {"reference": _rate("reference", "brax-ppo", 1.0, 2.0, 40.0), "stand_in": _rate("stand_in")}
    fit = fit_window(rates, ("reference", "stand_in"), 60_000_000, evals=10, window_seconds=420)
    # per seed: 70 + 11*3 = 103 s fixed, 3 s per update of both; 2 seeds in 420 s: 210 - 103 = 107 s -> 35 updates
    # -> 3 checkpointed units of 10 updates
    assert (fit.seeds, fit.budget) == (2, 3 * 10 * UPDATE)
    assert fit.seconds == pytest.approx(2 * (103 + 30 * 3.0)) and fit.seconds <= 420
    assert fit.reason.startswith("Brax's own budget (68,812,800 env steps) needs 626 s for 2 seeds; 29,491,200 env "
                                 "steps (42.9 %) fit")
    # Tighter: fewer checkpoints (each costs an evaluation and sets the budget's unit), then one seed.
    # 2 seeds in 200 s: 10 or 5 checkpoints fit no unit; 2 checkpoints: (100 - 79) // 6 = 3 units of 2 updates
    fewer = fit_window(rates, ("reference", "stand_in"), 60_000_000, evals=10, window_seconds=200)
    assert (fewer.seeds, fewer.evals, fewer.budget) == (2, 2, 6 * UPDATE)
    assert fewer.reason.endswith("fit, with 2 checkpoint(s), not 10")
    one = fit_window(rates, ("reference", "stand_in"), 60_000_000, evals=10, window_seconds=150)
    assert (one.seeds, one.evals) == (1, 10) and one.seconds <= 150
    assert one.reason.endswith("with one seed: rates and a learning curve, no paired comparison")
    with pytest.raises(BraxDiffError, match=r"not one update of reference, stand_in fits in 75 s \(one seed of one "
                                            r"update: 79 s\)"):
        fit_window(rates, ("reference", "stand_in"), 60_000_000, evals=10, window_seconds=75)


def test_the_full_evidence_costs_each_arm_at_its_own_or_its_shape_s_rate():
    rates = {"reference": _rate("reference", "brax-ppo", 1.0, 2.0, 40.0), "stand_in": _rate("stand_in"),
             "baseline": _rate("baseline", update_seconds=4.0, size=UPDATE // 2)}
    shapes = {"baseline": ("slm",), "all_fixes": ("brax",), "stand_in": ("brax",), "spec_fixes": ("other",)}
    full = full_evidence_cost(rates, shapes, ["CartpoleSwingup", "FingerTurnHard"], 10 * UPDATE, evals=10)
    rows = {row["arm"]: row for row in full.rows}
    assert list(rows) == [*FULL_EVIDENCE_ARMS, "all"]
    assert rows["baseline"]["basis"] == "measured" and rows["reference"]["basis"] == "measured"
    assert rows["all_fixes"]["basis"] == "at stand_in's rate (same shape)"
    assert rows["spec_fixes"]["basis"].startswith("bound: at the slowest PyTorch rate (baseline)")
    baseline = 30 + 20 * 4.0 + 11 * 1.0
    assert rows["baseline"]["per_run_seconds"] == baseline
    assert rows["baseline"]["minutes_at_10_seeds"] == round(baseline * 10 * 2 / 60, 1)
    per_run = {a: rows[a]["per_run_seconds"] for a in FULL_EVIDENCE_ARMS}  # each exact to 0.1 s here
    assert rows["all"]["minutes_at_20_seeds"] == round(sum(per_run.values()) * 20 * 2 / 60, 1)


def test_a_plan_at_stated_rates_reads_the_bundle_s_shapes_and_says_the_rates_are_stated(tmp_path):
    """`window plan`: what a GPU run would plan, before one is lent (static: no torch, no jax)."""
    import subprocess
    import sys

    from test_verify_gpu_script import ROOT, _environment

    environment = _environment(tmp_path, VERIFY_GPU_WHEELS="0", VERIFY_GPU_ENV="CartpoleBalance",
                               SLM_VARIANT="ppo_fx")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "verify-gpu-prepare.sh"), str(tmp_path / "bundle")],
                          capture_output=True, text=True, env=environment)
    assert done.returncode == 0, done.stderr[-2000:]
    from brax_diff.verify.window import plan_from_stated_rates

    fit, full, rates = plan_from_stated_rates(tmp_path / "bundle", {"reference": (1000.0, 1.0, 10.0),
                                                                    "stand_in": (500.0, 1.0, 5.0)},
                                              timing_seconds=60, deadline_seconds=540, evals=2, budget=1)
    assert rates["stand_in"].update_env_steps == rates["reference"].update_env_steps
    assert fit.budget == 2 * rates["stand_in"].update_env_steps  # one update per checkpoint: the budget's unit
    size = rates["stand_in"].update_env_steps
    per_seed = (10 + 2 * size / 1000 + 3 * 1.0) + (5 + 2 * size / 500 + 3 * 1.0)  # start, 2 updates, 3 checkpoints
    assert fit.seeds == int(fit.window_seconds // per_seed) and fit.seconds == pytest.approx(fit.seeds * per_seed)
    assert fit.window_seconds < 540 - 60 - 20  # the baseline's timing is kept out of the window
    rows = {row["arm"]: row for row in full.rows}
    assert rows["reference"]["basis"] == "stated" and rows["all"]["basis"].startswith("rates stated on")
    assert rows["baseline"]["basis"].startswith("bound: at the slowest PyTorch rate (stand_in)")
    bad = subprocess.run([sys.executable, "-m", "brax_diff.verify.window", "plan", "--bundle", str(tmp_path / "bundle"),
                          "--rate", "reference=fast"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.strip() == ("error: --rate 'reference=fast': expected "
                                                          "ARM=STEPS_PER_S:EVAL_S:START_S")
