"""The statistics behind a verdict: aggregates by hand, the test against scipy's Welch test,
Holm's levels, Fieller's ratio, and the rule's error rates measured by simulation."""

from __future__ import annotations

import math

import pytest

np = pytest.importorskip("numpy", reason="the statistics need numpy (the verify extra)")
scipy_stats = pytest.importorskip("scipy.stats", reason="the statistics need scipy (the verify extra)")

from brax_diff.verify import stats  # noqa: E402


def test_iqm_drops_a_quarter_from_each_end():
    assert stats.iqm([1, 2, 3, 4]) == 2.5  # middle two
    assert stats.iqm([100, 1, 3, 2, 4]) == 3.0  # floor(1.25) = 1 cut each end: mean(2, 3, 4)
    assert stats.iqm(list(range(1, 9))) == 4.5  # mean(3, 4, 5, 6)
    # all 8 scores of 2 tasks pooled: sorted 1 2 3 4 10 20 30 40, cut 2 each end: mean(3, 4, 10, 20)
    assert stats.iqm([[1, 10], [2, 20], [3, 30], [4, 40]]) == 9.25
    rng = np.random.default_rng(3)
    for n in (3, 5, 7, 10):
        values = rng.normal(size=n)
        assert stats.iqm(values) == pytest.approx(scipy_stats.trim_mean(values, 0.25))


def test_probability_of_improvement_counts_ties_as_half():
    assert stats.probability_of_improvement([1, 2, 3], [2, 2, 2]) == 0.5  # (0 + 1/2 + 1) / 3
    assert stats.probability_of_improvement([3, 4], [1, 2]) == 1.0
    x, y = [[5, 1], [6, 2]], [[1, 3], [2, 1.5]]  # task 1 all better (1.0), task 2 one of four (0.25)
    assert stats.probability_of_improvement(x, y) == pytest.approx((1.0 + 0.25) / 2)
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement([[1, 2]], [[1]])
    with pytest.raises(ValueError, match="shape"):
        stats.as_scores([])


def test_the_test_is_welchs_with_a_bootstrap_standard_error():
    x = [510.0, 480.0, 530.0, 495.0, 470.0, 505.0]
    y = [450.0, 470.0, 430.0, 480.0, 455.0]
    d = stats.difference(x, y)
    welch = scipy_stats.ttest_ind(x, y, equal_var=False)
    assert d.delta == pytest.approx(np.mean(x) - np.mean(y))
    # the bootstrap variance, scaled by n/(n-1), estimates s^2/n: within Monte Carlo error of Welch
    classical = math.sqrt(np.var(x, ddof=1) / 6 + np.var(y, ddof=1) / 5)
    assert d.se == pytest.approx(classical, rel=0.05)
    assert d.p == pytest.approx(welch.pvalue, rel=0.15)
    assert 5 < d.df < 10  # Welch-Satterthwaite between min(n) - 1 and n_x + n_y - 2
    low, high = d.interval(0.05)
    assert low < d.delta < high and high - d.delta == pytest.approx(d.delta - low)
    assert stats.difference(x, y) == d  # the bootstrap's generator is seeded: same inputs, same answer


def test_stratified_bootstrap_resamples_within_each_task():
    scores = np.array([[1.0, 100.0], [2.0, 200.0], [3.0, 300.0]])
    rng = np.random.default_rng(0)
    for _ in range(20):
        sample = stats.stratified_resample(scores, rng)
        assert set(sample[:, 0]) <= {1.0, 2.0, 3.0} and set(sample[:, 1]) <= {100.0, 200.0, 300.0}
    # two tasks: the mean is the mean of task means, its variance the sum of task variances / 4
    spread = stats.spread(scores)
    assert spread.mean == pytest.approx(101.0)
    assert spread.variance == pytest.approx((1.0 / 3 + 10000.0 / 3) / 4, rel=0.1)


def test_holm_levels_step_down_and_stop_at_the_first_non_rejection():
    assert stats.holm_levels([0.01, 0.04, 0.02], 0.05) == pytest.approx([0.05 / 3, 0.05, 0.05 / 2])
    # 0.03 > 0.05 / 2 stops the chain: 0.04 is held to 0.05 / 2 as well, and not rejected
    assert stats.holm_levels([0.01, 0.04, 0.03], 0.05) == pytest.approx([0.05 / 3, 0.05 / 2, 0.05 / 2])
    # 0.02 > 0.05 / 3: nothing is rejected and every test is held to the first level
    assert stats.holm_levels([0.02, 0.021, 0.5], 0.05) == pytest.approx([0.05 / 3] * 3)
    assert stats.holm_levels([0.2], 0.05) == [0.05]
    assert stats.holm_levels([], 0.05) == []


def test_decide_family_intervals_agree_with_the_decisions():
    rng = np.random.default_rng(11)
    base = rng.normal(500, 20, 5)
    family = {"helps": (base + 200, base[::-1]), "hurts": (base - 300, base[::-1]),
              "nothing": (rng.normal(500, 20, 5), base)}
    decided = stats.decide_family(family)
    assert decided["helps"].verdict == stats.SUPPORTED and decided["helps"].ci[0] > 0
    assert decided["hurts"].verdict == stats.NOT_SUPPORTED and decided["hurts"].ci[1] < 0
    nothing = decided["nothing"]
    assert nothing.verdict == stats.INCONCLUSIVE and nothing.ci[0] < 0 < nothing.ci[1]
    assert nothing.min_detectable_effect is not None and nothing.min_detectable_effect > 0
    assert {v.tests_in_family for v in decided.values()} == {3}
    for verdict in decided.values():
        assert verdict.to_json()["ci_level"] == pytest.approx(1 - verdict.level)
    # too few seeds: inconclusive by rule, with the effect it could have found
    few = stats.decide_family({"k": ([1.0, 2.0, 3.0], [10.0, 11.0, 12.0])})["k"]
    assert few.verdict == stats.INCONCLUSIVE and few.ci is None and "at least 4" in few.reason
    assert few.min_detectable_effect is not None
    # identical scores everywhere: no spread, no effect, nothing to claim
    flat = stats.decide_family({"k": ([5.0] * 5, [5.0] * 5)})["k"]
    assert flat.verdict == stats.INCONCLUSIVE and flat.delta == 0.0


def _simulated_families(rng, seeds, keys, sims, effect=0.0):
    """Verdicts of `sims` simulated families: `keys` arms against one baseline, N(0, 1) scores."""
    for _ in range(sims):
        baseline = rng.normal(0.0, 1.0, seeds)
        family = {f"key{i}": (rng.normal(effect, 1.0, seeds), baseline) for i in range(keys)}
        yield stats.decide_family(family, reps=1000)


@pytest.mark.parametrize("keys", [1, 3, 20])
def test_identical_arms_are_falsely_supported_at_most_5_percent_of_the_time(keys):
    """The rule on arms with no effect at all, 5 seeds: the family-wise rate of a false
    'supported' stays at or under 5% (the old 'all runs beat all runs' rule: 8% per key at 5
    seeds, 33% at 2), and of any decisive verdict under 5% + two standard errors."""
    sims = 400 if keys < 20 else 150
    rng = np.random.default_rng(2026 + keys)
    supported = decisive = 0
    for family in _simulated_families(rng, 5, keys, sims):
        supported += any(v.verdict == stats.SUPPORTED for v in family.values())
        decisive += any(v.verdict != stats.INCONCLUSIVE for v in family.values())
    assert supported / sims <= 0.05
    assert decisive / sims <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / sims)


def test_a_planted_one_sd_effect_at_10_seeds_is_found():
    """Sample means exactly 1 sd apart at 10 seeds (both samples standardized): supported.
    Over random draws with a true 1-sd effect the rule finds it about as often as Welch's
    t-test can (theory: 56%): asserted at least 45%."""
    rng = np.random.default_rng(7)

    def standardized(n):
        z = rng.normal(size=n)
        return (z - z.mean()) / z.std(ddof=1)

    planted = stats.decide_family({"fix": (standardized(10) + 1.0, standardized(10))})["fix"]
    assert planted.verdict == stats.SUPPORTED, planted
    assert planted.delta == pytest.approx(1.0)
    found = sum(f["key0"].verdict == stats.SUPPORTED for f in _simulated_families(rng, 10, 1, 300, effect=1.0))
    assert found / 300 >= 0.45


def test_fieller_ratio_by_hand():
    # 30 / 60 with small variances: close to the delta-method interval around 0.5
    low, high = stats.fieller_ratio(30.0, 60.0, 4.0, 9.0, 2.0, df=1e9)
    assert low < 0.5 < high
    delta_se = math.sqrt((4.0 - 2 * 0.5 * 2.0 + 0.25 * 9.0) / 60.0**2)
    assert low == pytest.approx(0.5 - 1.96 * delta_se, abs=0.01)
    assert high == pytest.approx(0.5 + 1.96 * delta_se, abs=0.01)
    # a denominator whose own interval contains 0: unbounded
    assert stats.fieller_ratio(30.0, 2.0, 4.0, 9.0, 2.0, df=10) is None
