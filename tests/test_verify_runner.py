"""The runner's statistics over recorded runs (no training): what is compared with what."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("scipy", reason="the verdicts need the verify extra's statistics")

from verify_fixtures import SCORES, synthetic_result  # noqa: E402

from brax_diff.errors import BraxDiffError  # noqa: E402
from brax_diff.verify.runner import gap_summary, paired_scores, verdicts  # noqa: E402


def test_runs_of_different_score_kinds_or_env_steps_are_never_compared():
    result = synthetic_result()
    runs = list(result.results)
    runs[0] = dataclasses.replace(runs[0], score_kind="eval_return/deterministic/4_episodes")
    with pytest.raises(BraxDiffError, match="runs of different kinds cannot be compared"):
        paired_scores(runs, ["CartpoleBalance"], "all_fixes", "baseline")
    runs = list(result.results)
    runs[1] = dataclasses.replace(runs[1], env_steps=runs[1].env_steps + 320)
    with pytest.raises(BraxDiffError, match="env steps"):
        verdicts(result.plan, runs)


def test_only_seeds_every_compared_arm_finished_are_paired():
    result = synthetic_result()
    runs = [r for r in result.results if not (r.spec.arm == "reference" and r.spec.seed == 3)]
    x, y, seeds = paired_scores(runs, ["CartpoleBalance"], "reference", "baseline")
    assert seeds == [0, 1, 2, 4, 5, 6, 7, 8, 9] and x[:4] == [[760.0], [800.0], [720.0], [790.0]]
    assert y == [[SCORES["baseline"][s]] for s in seeds]


def test_the_gap_and_its_families():
    result = synthetic_result()
    families = {(v["family"], v["name"]): v for v in result.verdicts}
    gap = families[("gap", "all_fixes_vs_baseline")]
    assert gap["tests_in_family"] == 3 and gap["verdict"] == "supported" and gap["seeds"] == 10
    assert gap["delta"] == pytest.approx(658.0 - 220.0)
    behind = result.gap["baseline_vs_reference"]
    assert behind["arm"] == "baseline" and behind["vs"] == "reference"
    assert behind["delta"] == pytest.approx(220.0 - 770.0) and behind["ci"][1] < 0
    assert behind["verdict"] == "not_supported"  # baseline does not score higher: it scores lower
    assert result.gap["closed_fraction"] == pytest.approx(438.0 / 550.0)
    low, high = result.gap["closed_fraction_ci"]
    assert low < 438.0 / 550.0 < high < 1.0
    loo = families[("loo", "loo:learning_rate")]
    assert loo["arm"] == "all_fixes" and loo["vs"] == "loo:learning_rate" and loo["tests_in_family"] == 2
    assert loo["verdict"] == "supported"
    clip = families[("loo", "loo:clip_epsilon")]
    assert clip["verdict"] == "inconclusive" and clip["min_detectable_effect"] > 0
    # one seed left in the reference arm: the fraction cannot be bounded
    few = [r for r in result.results if r.spec.arm != "reference" or r.spec.seed == 0]
    summary = gap_summary(result.plan, few, verdicts(result.plan, few))
    assert summary["closed_fraction"] is None and "fewer than 2 seeds" in summary["reason"]


def test_an_unbounded_fraction_is_never_a_number():
    """Reference barely above the baseline and noisy: the gap's interval holds 0, so the
    fraction is "unbounded" in verify.json, the text and the report, never a ratio."""
    from brax_diff.report.verification import verification_entries
    from brax_diff.verify.runner import VerifyResult, render

    result = synthetic_result()
    noise = [300.0, -250.0, 280.0, -310.0, 260.0, -240.0, 330.0, -270.0, 290.0, -300.0]
    runs = [dataclasses.replace(r, score=r.score + 30.0 + noise[r.spec.seed] - 550.0)
            if r.spec.arm == "reference" else r for r in result.results]
    decided = verdicts(result.plan, runs)
    gap = gap_summary(result.plan, runs, decided)
    assert gap["closed_fraction"] == "unbounded" and gap["closed_fraction_ci"] is None
    text = render(VerifyResult(result.plan, runs, decided, gap))
    assert "fraction of the gap the fixes close: unbounded (the gap between baseline and reference" in text
    entries = verification_entries({"plan": result.plan.to_json(), "verdicts": decided, "gap": gap,
                                    "runs": [r.to_json() for r in runs]}, Path("."), Path("."))
    assert entries["gap"]["closed_fraction"] == "unbounded"


def test_a_cached_run_answers_under_the_arm_that_asks(tmp_path):
    """An all_fixes that moves nothing is the baseline's run: it must still count as all_fixes."""
    from brax_diff.verify.cache import RunCache

    result = synthetic_result()
    baseline = next(r for r in result.results if r.spec.arm == "baseline" and r.spec.seed == 0)
    cache = RunCache(tmp_path)
    cache.store(baseline)
    same_settings = dataclasses.replace(baseline.spec, arm="all_fixes")
    loaded = cache.load(same_settings)
    assert cache.path(same_settings) == cache.path(baseline.spec)
    assert loaded.spec.arm == "all_fixes" and loaded.scores == baseline.scores and loaded.score == baseline.score


def test_units_of_work_batch_an_arms_seeds_and_keep_reference_runs_apart():
    from test_verify_plan import BRAX_VALUES, SLM_VALUES, extraction

    from brax_diff.verify import build_plan
    from brax_diff.verify.runner import units

    plan = build_plan(extraction("brax", BRAX_VALUES), extraction("slm", SLM_VALUES), envs=["CartpoleBalance"],
                      seeds=3, budget=3200, keys=["learning_rate"], arms=("gap",), evals=2, eval_envs=4,
                      overrides={"episode_length": 50}, engine="batched")
    arms = [(r.arm, r.seed) for r in plan.runs]
    assert arms == [(a, s) for s in range(3) for a in ("baseline", "all_fixes", "reference")]
    named = lambda work: [[arms[i] for i in unit] for unit in work]  # noqa: E731
    single = build_plan(extraction("brax", BRAX_VALUES), extraction("slm", SLM_VALUES), envs=["CartpoleBalance"],
                        seeds=3, budget=3200, keys=["learning_rate"], arms=("gap",), evals=2, eval_envs=4,
                        overrides={"episode_length": 50})
    assert units(single, list(range(9))) == [[i] for i in range(9)]  # the default engine: a run per seed
    assert [r.run_id("v") for r in single.runs] != [r.run_id("v") for r in plan.runs]  # never mixed in the cache
    assert "engine" not in single.runs[0].identity("v") and plan.runs[0].identity("v")["engine"] == "seed-batched/2"
    assert named(units(plan, list(range(9)))) == [
        [("baseline", 0), ("baseline", 1), ("baseline", 2)], [("all_fixes", 0), ("all_fixes", 1), ("all_fixes", 2)],
        [("reference", 0)], [("reference", 1)], [("reference", 2)]]
    # only what is pending: a cached seed is not trained again beside the others
    assert named(units(plan, [1, 3, 4])) == [[("all_fixes", 0), ("all_fixes", 1)], [("baseline", 1)]]
    # more workers than units: the largest unit is split in halves until every worker has one
    assert named(units(plan, [0, 3, 6], jobs=2)) == [[("baseline", 0), ("baseline", 1)], [("baseline", 2)]]


def test_the_progress_bar_goes_to_stderr_never_to_stdout(capsys):
    """stdout carries only the result asked for, also when it is piped."""
    from brax_diff.verify.worker import Progress as _Progress

    result = synthetic_result()
    bar = _Progress(result.plan, True)
    for run in result.results:
        bar.advance(run.spec.budget, 1000.0)
        bar.finish_run(run)
    bar.close()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "verify" in captured.err and f"runs {len(result.results)}/{len(result.results)}" in captured.err


def test_the_text_result_shows_every_arms_score_and_every_verdict():
    from brax_diff.verify.runner import VerifyResult, render

    lines = render(synthetic_result()).splitlines()
    assert lines[1] == "scores (mean of the finished seeds, 95% interval):"
    assert lines[2].split() == ["CartpoleBalance", "baseline", "220.0", "[204.9,", "235.1]", "n=10"]
    assert lines[6].split() == ["CartpoleBalance", "reference", "770.0", "[748.7,", "791.3]", "n=10"]
    # the verdict's tests inverted at the Holm level (the union of the sign-flip and bootstrap-t
    # intervals): all ten differences positive
    assert lines[10].split() == ["all_fixes", "-", "baseline", "+438.0", "[+409.2,", "+469.1]", "at", "98.3%",
                                 "supported", "n=10"]
    # Fieller on the paired differences, at the level of the gap's own row
    assert "  fraction of the gap the fixes close: 0.80 [0.78, 0.81] at 95.0% (Fieller)" in lines
    assert "  loo      all_fixes - loo:learning_rate      +418.0 [+389.3, +447.6] at 97.5%  supported  n=10" in lines
    # without the reference arm there is no gap summary: its family's verdicts are still shown
    result = synthetic_result()
    runs = [r for r in result.results if r.spec.arm != "reference"]
    plan = dataclasses.replace(result.plan, runs=[r for r in result.plan.runs if r.arm != "reference"])
    decided = verdicts(plan, runs)
    text = render(VerifyResult(plan, runs, decided, gap_summary(plan, runs, decided)))
    assert "  gap      all_fixes - baseline               +438.0 [+416.2, +466.7] at 95.0%  supported  n=10" in text
    assert "reference" not in text


def test_a_flipped_gap_row_reads_its_solve_rates_the_same_way_round():
    """``baseline - reference`` is the family's ``reference - baseline`` read backwards: the
    rates of solving must follow (they were left as the reference's first)."""
    result = synthetic_result()
    scores = {"baseline": [990.0, 230.0, 995.0, 250.0, 220.0] * 2, "reference": [760.0, 800.0, 720.0, 780.0, 790.0] * 2}
    runs = [dataclasses.replace(r, score=scores[r.spec.arm][r.spec.seed]) if r.spec.arm in scores else r
            for r in result.results]
    decided = verdicts(result.plan, runs)
    family = next(v for v in decided if v["name"] == "reference_vs_baseline")
    assert (family["solving"]["rate_x"], family["solving"]["rate_y"]) == (0.2, 0.4)
    behind = gap_summary(result.plan, runs, decided)["baseline_vs_reference"]
    assert (behind["solving"]["rate_x"], behind["solving"]["rate_y"]) == (0.4, 0.2)
    assert (behind["solving"]["only_x"], behind["solving"]["only_y"]) == (family["solving"]["only_y"],
                                                                          family["solving"]["only_x"])
    assert behind["solving"]["rate_x_ci"] == family["solving"]["rate_y_ci"]


def test_runs_at_the_default_initial_weights_keep_the_identity_they_had_before_the_setting():
    """initial_weights was added after runs were cached: at its default (the trainer's own
    generators, what every run before it did) it is not part of the run's identity; Brax's
    initial weights (the stand_in) are another run."""
    from dataclasses import replace

    from test_verify_plan import pair

    from brax_diff.verify import build_plan

    brax, slm = pair()
    spec = next(r for r in build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600).runs
                if r.arm == "baseline")
    assert spec.settings["initial_weights"] == "torch_generators"
    before = replace(spec, settings={k: v for k, v in spec.settings.items() if k != "initial_weights"})
    assert spec.run_id("v") == before.run_id("v")
    assert replace(spec, settings=dict(spec.settings, initial_weights="brax_keys")).run_id("v") != spec.run_id("v")
