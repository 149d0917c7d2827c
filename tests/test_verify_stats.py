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
    """Paired by seed at 10 seeds: the sign-flip test decides, its inverted interval agrees."""
    rng = np.random.default_rng(11)
    base = rng.normal(500, 20, 10)
    family = {"helps": (base + 200 + rng.normal(0, 5, 10), base), "hurts": (base - 300 + rng.normal(0, 5, 10), base),
              "nothing": (base + rng.normal(0, 20, 10), base)}
    decided = stats.decide_family(family)
    assert decided["helps"].verdict == stats.SUPPORTED and decided["helps"].ci[0] > 0
    assert decided["hurts"].verdict == stats.NOT_SUPPORTED and decided["hurts"].ci[1] < 0
    # every sign of 10 differences the same way: the exact p is 2 / 2^10
    assert decided["helps"].p == pytest.approx(2 / 1024) and decided["hurts"].p == pytest.approx(2 / 1024)
    nothing = decided["nothing"]
    assert nothing.verdict == stats.INCONCLUSIVE and nothing.ci[0] < 0 < nothing.ci[1]
    assert nothing.min_detectable_effect is not None and nothing.min_detectable_effect > 0
    assert {v.tests_in_family for v in decided.values()} == {3}
    for verdict in decided.values():
        assert verdict.to_json()["ci_level"] == pytest.approx(1 - verdict.level)
        assert verdict.to_json()["test"].startswith("paired sign-flip")
    # too few seeds: inconclusive by rule
    few = stats.decide_family({"k": ([1.0, 2.0, 3.0], [10.0, 11.0, 12.0])})["k"]
    assert few.verdict == stats.INCONCLUSIVE and few.ci is None and "at least 4" in few.reason
    # 5 seeds, all five differences positive: p = 1/16 > 0.05, so no verdict and no interval
    five = stats.decide_family({"k": (np.arange(5.0) + 100, np.arange(5.0))})["k"]
    assert five.verdict == stats.INCONCLUSIVE and five.p == pytest.approx(1 / 16) and five.ci is None
    assert "6 seeds are needed" in five.reason
    # identical scores everywhere: no spread, no effect, nothing to claim
    flat = stats.decide_family({"k": ([5.0] * 5, [5.0] * 5)})["k"]
    assert flat.verdict == stats.INCONCLUSIVE and flat.delta == 0.0


def test_sign_flip_p_counts_every_sign_vector():
    from itertools import product

    rng = np.random.default_rng(4)
    for n in (6, 9, 12):
        d = rng.normal(0.4, 1.0, n)
        observed = abs(d.sum())
        exact = sum(abs(np.dot(signs, np.abs(d))) >= observed - 1e-12
                    for signs in product((-1.0, 1.0), repeat=n)) / 2**n
        assert stats.sign_flip_p(d) == pytest.approx(exact, abs=1e-15)
    assert stats.smallest_p(5) == 1 / 16 and stats.seeds_needed(0.05) == 6 and stats.seeds_needed(0.05 / 3) == 7


def test_solving_is_measured_with_exact_intervals_and_mcnemar():
    # 10 paired seeds: x solves on seeds 0-6, y on seeds 0-1 only: 5 discordant, all for x
    x = [1000.0] * 7 + [300.0] * 3
    y = [1000.0] * 2 + [300.0] * 8
    s = stats.solving(x, y, 800.0)
    assert (s.solved_x, s.solved_y, s.only_x, s.only_y) == (7, 2, 5, 0)
    assert s.p == pytest.approx(2 * 0.5**5)  # exact McNemar: 0.0625, not decisive at 5 %
    out = s.to_json()
    low, high = out["rate_x_ci"]  # Clopper-Pearson 95 % for 7/10
    assert low == pytest.approx(0.3475, abs=1e-4) and high == pytest.approx(0.9333, abs=1e-4)
    assert stats.clopper_pearson(0, 10) == pytest.approx((0.0, 0.3085), abs=1e-4)
    decided = stats.decide_family({"k": (x, y)}, solve_threshold=800.0)["k"]
    assert decided.solving.verdict == stats.INCONCLUSIVE and decided.to_json()["solving"]["threshold"] == 800.0


def _simulated_families(rng, seeds, keys, sims, effect=0.0):
    """Verdicts of `sims` simulated families: `keys` arms against one baseline, N(0, 1) scores."""
    for _ in range(sims):
        baseline = rng.normal(0.0, 1.0, seeds)
        family = {f"key{i}": (rng.normal(effect, 1.0, seeds), baseline) for i in range(keys)}
        yield stats.decide_family(family, detail=False)


@pytest.mark.parametrize("keys", [1, 3, 20])
def test_identical_arms_are_falsely_supported_at_most_5_percent_of_the_time(keys):
    """The rule on arms with no effect at all, 10 seeds: the family-wise rate of a false
    decisive verdict stays under 5% + two standard errors."""
    sims = 400 if keys < 20 else 150
    rng = np.random.default_rng(2026 + keys)
    decisive = 0
    for family in _simulated_families(rng, 10, keys, sims):
        decisive += any(v.verdict != stats.INCONCLUSIVE for v in family.values())
    assert decisive / sims <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / sims)


def test_a_planted_one_sd_effect_at_10_seeds_is_found():
    """A true 1-sd effect (unpaired noise) at 10 seeds: found about as often as a paired t-test
    would (theory about 0.5); asserted at least 0.35."""
    rng = np.random.default_rng(7)
    found = sum(f["key0"].verdict == stats.SUPPORTED for f in _simulated_families(rng, 10, 1, 300, effect=1.0))
    assert found / 300 >= 0.35


def test_fieller_ratio_by_hand():
    # 30 / 60 with small variances: close to the delta-method interval around 0.5
    low, high = stats.fieller_ratio(30.0, 60.0, 4.0, 9.0, 2.0, df=1e9)
    assert low < 0.5 < high
    delta_se = math.sqrt((4.0 - 2 * 0.5 * 2.0 + 0.25 * 9.0) / 60.0**2)
    assert low == pytest.approx(0.5 - 1.96 * delta_se, abs=0.01)
    assert high == pytest.approx(0.5 + 1.96 * delta_se, abs=0.01)
    # a denominator whose own interval contains 0: unbounded
    assert stats.fieller_ratio(30.0, 2.0, 4.0, 9.0, 2.0, df=10) is None
