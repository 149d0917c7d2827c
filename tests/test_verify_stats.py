"""IQM, stratified bootstrap, probability of improvement and the verdict rule, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from brax_diff.verify import stats


def test_iqm_drops_a_quarter_from_each_end():
    assert stats.iqm([1, 2, 3, 4]) == 2.5  # middle two
    assert stats.iqm([100, 1, 3, 2, 4]) == 3.0  # floor(1.25) = 1 cut each end: mean(2, 3, 4)
    assert stats.iqm(list(range(1, 9))) == 4.5  # mean(3, 4, 5, 6)
    # all 8 scores of 2 tasks pooled: sorted 1 2 3 4 10 20 30 40, cut 2 each end: mean(3, 4, 10, 20)
    assert stats.iqm([[1, 10], [2, 20], [3, 30], [4, 40]]) == 9.25


def test_iqm_agrees_with_scipy_trim_mean():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for n in (3, 5, 7, 10):
        values = rng.normal(size=n)
        assert stats.iqm(values) == pytest.approx(scipy_stats.trim_mean(values, 0.25))


def test_probability_of_improvement_counts_ties_as_half():
    assert stats.probability_of_improvement([1, 2, 3], [2, 2, 2]) == 0.5  # (0 + 1/2 + 1) / 3
    assert stats.probability_of_improvement([3, 4], [1, 2]) == 1.0
    assert stats.probability_of_improvement([1, 2], [3, 4]) == 0.0
    # two tasks averaged: task 1 all better (1.0), task 2 one of four pairs better (0.25)
    x = [[5, 1], [6, 2]]
    y = [[1, 3], [2, 1.5]]
    assert stats.probability_of_improvement(x, y) == pytest.approx((1.0 + 0.25) / 2)


def test_stratified_resample_keeps_each_task_in_its_column():
    scores = np.array([[1.0, 100.0], [2.0, 200.0], [3.0, 300.0]])
    rng = np.random.default_rng(0)
    for _ in range(20):
        sample = stats.stratified_resample(scores, rng)
        assert set(sample[:, 0]) <= {1.0, 2.0, 3.0}
        assert set(sample[:, 1]) <= {100.0, 200.0, 300.0}


def test_bootstrap_interval_contains_the_point_estimate_and_is_deterministic():
    scores = [480.0, 510.0, 495.0, 530.0, 470.0]
    low, high = stats.iqm_ci(scores, reps=500)
    assert low <= stats.iqm(scores) <= high
    assert 470.0 <= low and high <= 530.0
    assert stats.iqm_ci(scores, reps=500) == (low, high)


def test_planted_effect_is_supported_and_identical_settings_are_not():
    baseline = [500.0, 512.0, 488.0, 505.0, 495.0]
    cannot_learn = [20.0, 25.0, 18.0, 22.0, 21.0]  # e.g. learning rate 0
    effect = stats.compare(cannot_learn, baseline)
    assert effect.verdict == stats.SUPPORTED
    assert effect.poi == 0.0 and effect.ci[1] < 0 and effect.iqm_delta == pytest.approx(21.0 - 500.0)
    same = stats.compare(list(baseline), baseline)
    assert same.iqm_delta == 0.0 and same.poi == 0.5
    assert same.verdict == stats.NOT_SUPPORTED  # CI well inside +-10% of 500
    noisy = stats.compare([300.0, 700.0, 480.0, 520.0, 510.0], baseline)
    assert noisy.verdict != stats.SUPPORTED


def test_verdict_rule_cases():
    assert stats.verdict((5.0, 20.0), poi=0.9, margin=1.0) == stats.SUPPORTED
    assert stats.verdict((5.0, 20.0), poi=0.6, margin=1.0) == stats.INCONCLUSIVE  # CI clear, POI not decisive
    assert stats.verdict((-0.5, 0.8), poi=0.5, margin=1.0) == stats.NOT_SUPPORTED
    assert stats.verdict((-3.0, 0.8), poi=0.4, margin=1.0) == stats.INCONCLUSIVE
    assert stats.verdict((-9.0, -2.0), poi=0.1, margin=1.0) == stats.SUPPORTED


def test_scores_shape_is_checked():
    with pytest.raises(ValueError, match="shape"):
        stats.as_scores([])
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement([[1, 2]], [[1]])


def test_plot_labels_say_when_no_episode_finished():
    from brax_diff.verify.cache import RunResult
    from brax_diff.verify.plan import RunSpec
    from brax_diff.verify.runner import ESTIMATE_LABEL, _arm

    def result(arm, kind):
        return RunResult(RunSpec("torch", arm, "CartpoleBalance", 0, 100, {}), "ok", [10, 20], [1.0, 2.0],
                         score_kind=kind)

    results = [result("baseline", "reward_per_step_x_episode_length"), result("reference", "episode_return")]
    label, curves = _arm(results, "CartpoleBalance", "baseline", "baseline (SLM-Lab)")
    assert label == "baseline (SLM-Lab)" + ESTIMATE_LABEL and curves == [([10, 20], [1.0, 2.0])]
    assert _arm(results, "CartpoleBalance", "reference", "Brax ppo.train")[0] == "Brax ppo.train"
