"""The verdict rule holds its level on the outcome shapes verification really gets.

Exchangeable nulls: families of three paired comparisons (baseline, all_fixes, reference: the
gap family) with no true difference, every arm drawn from one shape: normal, bimodal
(solve-or-plateau), heavy-tailed (Student-t 2 df, lognormal) and the committed runs' own
scores (resampled). Non-exchangeable nulls: equal means, different shapes (a solve-or-plateau
or lognormal baseline and all_fixes against narrow spec_fixes, reference and stand_in; the
committed runs recentred to equal means and resampled by seed, pairing kept), decided as one
list of conclusions: the 8 comparisons of the gap and stand_in rows pooled and on each of 2
environments, one Holm over all 24. Asserted: a false decisive verdict in at most 5 % of
families or lists (plus two binomial standard errors of the simulation) at 10 and 20 seeds.
The sign-flip test alone, each family held on its own (the rule this replaced), ran at 7-11 %
there (re-measured below).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from brax_diff.verify import stats

FAMILIES = 2000
SOLVE_THRESHOLD = 800.0
COMMITTED = Path(__file__).resolve().parent.parent / "reports" / "phase5-seed" / "verify" / "verify.json"


def _committed(arm: str) -> np.ndarray:
    runs = json.loads(COMMITTED.read_text())["runs"]
    return np.array([r["score"] for r in runs if r["arm"] == arm and r["status"] == "ok"])


def _lognormal(rng, n):
    return 100.0 * rng.lognormal(0.0, 1.0, n)


SHAPES = {
    "normal": stats.NULL_SHAPES["normal"],
    "bimodal": stats.NULL_SHAPES["bimodal"],
    "student-t 2 df": stats.NULL_SHAPES["heavy-tailed"],
    "lognormal": _lognormal,
    "committed baseline": "baseline",
    "committed all_fixes": "all_fixes",
}


def _sampler(shape):
    if isinstance(shape, str):
        scores = _committed(shape)
        return lambda rng, n: rng.choice(scores, n)
    return shape


def _decided_one_by_one(draw, seeds: int, families: int, seed: int) -> tuple[float, float]:
    """The same null families decided by decide_family itself, one family at a time."""
    rng = np.random.default_rng(seed)
    wrong_mean = wrong_solving = 0
    for _ in range(families):
        base, fixes, ref = (draw(rng, seeds) for _ in range(3))
        family = {"all_fixes_vs_baseline": (fixes, base), "reference_vs_baseline": (ref, base),
                  "reference_vs_all_fixes": (ref, fixes)}
        decided = stats.decide_family(family, detail=False, solve_threshold=SOLVE_THRESHOLD,
                                      reps=stats.SIMULATED_BOOTSTRAP_T_REPS)
        wrong_mean += any(v.verdict != stats.INCONCLUSIVE for v in decided.values())
        wrong_solving += any(v.solving.verdict != stats.INCONCLUSIVE for v in decided.values())
    return wrong_mean / families, wrong_solving / families


MARGIN = 2.0 * math.sqrt(0.05 * 0.95 / FAMILIES)  # two binomial standard errors at the nominal 5 %


def test_the_committed_runs_are_the_shape_the_audit_found():
    """Solve-or-plateau: SLM-Lab's settings on CartpoleBalance either balance the pole (~1,000)
    or plateau far below; on CartpoleSwingup none solves at this budget (the committed evidence:
    20 seeds on each)."""
    runs = json.loads(COMMITTED.read_text())["runs"]
    balance = np.array([r["score"] for r in runs if r["arm"] == "baseline" and r["env"] == "CartpoleBalance"])
    swingup = np.array([r["score"] for r in runs if r["arm"] == "baseline" and r["env"] == "CartpoleSwingup"])
    assert balance.size == swingup.size == 20 and _committed("baseline").size == 40
    solved = balance >= SOLVE_THRESHOLD
    assert int(solved.sum()) == 5 and balance[~solved].max() < 650  # 5 solve, 15 plateau
    assert swingup.max() < SOLVE_THRESHOLD


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("seeds", [5, 10, 20])
def test_no_difference_gives_a_false_decision_in_at_most_5_percent_of_families(name, seeds):
    mean_rate, solving_rate = stats.null_family_rates(_sampler(SHAPES[name]), seeds, FAMILIES,
                                                      solve_threshold=SOLVE_THRESHOLD, seed=seeds)
    assert mean_rate <= 0.05 + MARGIN, (name, seeds, mean_rate)
    assert solving_rate <= 0.05 + MARGIN, (name, seeds, solving_rate)
    if seeds == 5:  # three tests at 5 seeds: the smallest p (1/16) is above every Holm level
        assert mean_rate == 0.0


@pytest.mark.parametrize("name", ["bimodal", "committed baseline"])
def test_the_vectorized_simulation_decides_as_decide_family_does(name):
    """The rates above come from the batched simulation; decide_family, family by family, on
    the same draws gives the same rates (a liberal shape at 10 seeds, where tests do reject)."""
    draw = _sampler(SHAPES[name])
    batched = stats.null_family_rates(draw, 10, 300, solve_threshold=SOLVE_THRESHOLD, seed=3)
    assert _decided_one_by_one(draw, 10, 300, seed=3) == batched


def test_power_comes_from_the_same_simulation():
    bimodal = stats.null_pair(stats.NULL_SHAPES["bimodal"])
    level = stats.ALPHA / 3  # the first Holm level of the gap family
    assert stats.simulated_power(bimodal, 300.0, 5, level) == 0.0  # cannot reject at 5 seeds
    assert stats.simulated_power(bimodal, 0.0, 20, level, sims=1000) <= level + 2 * math.sqrt(level / 1000)
    at_10 = stats.simulated_power(bimodal, 400.0, 10, level)
    at_20 = stats.simulated_power(bimodal, 400.0, 20, level)
    assert 0.0 < at_10 < at_20 and at_20 >= 0.8
    table_10, table_20 = stats.power_table(10, level, sims=200), stats.power_table(20, level, sims=200)
    assert set(table_10) == {"normal", "bimodal", "heavy-tailed"}
    for shape in table_10:
        assert table_10[shape] is not None and table_20[shape] is not None
        assert table_20[shape] < table_10[shape]
    assert stats.power_table(5, level, sims=50) == {"normal": None, "bimodal": None, "heavy-tailed": None}


def test_the_plan_reports_power_from_the_simulation():
    from test_verify_plan import pair

    from brax_diff.verify import build_plan

    brax, slm = pair()
    for seeds, expected in ((5, "cannot reject"), (10, "found with 80% probability")):
        plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=seeds, budget=1600, evals=1, eval_envs=4)
        power = plan.power(sims=100)
        assert power["seeds_needed"] == 7 and power["level"] == pytest.approx(0.05 / 3)
        text = plan.render(power=power)
        assert expected in text and "solved: a run scoring >= 800" in text
        if seeds == 10:
            assert all(v is not None and 0 < v < 2000 for v in power["detectable"].values())
            assert power["solve_share"] is not None and 0 < power["solve_share"] <= 1
            assert "an effect of more seeds solving" in text


def test_the_plans_seed_count_comes_from_the_real_list_of_conclusions():
    """Issue 37: with spec_fixes the gap family has 5 tests, not 3: 8 seeds are needed, not 7;
    with the stand-in and two environments the list holds 8 comparisons pooled and per
    environment, the equivalence and the paired difference per environment, 27 tests: 11 seeds."""
    import dataclasses

    from test_verify_plan import pair

    from brax_diff.verify import build_plan

    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=10, budget=1600, evals=1, eval_envs=4)
    spec = [dataclasses.replace(r, arm="spec_fixes") for r in plan.runs if r.arm == "baseline"]
    with_spec = dataclasses.replace(plan, runs=plan.runs + spec)
    assert (plan.tests_in_list(), with_spec.tests_in_list()) == (3, 5)
    power = with_spec.power(sims=20)
    assert power["seeds_needed"] == 8 and power["level"] == pytest.approx(0.01)
    stand_in = [dataclasses.replace(r, arm="stand_in") for r in plan.runs if r.arm == "baseline"]
    full = dataclasses.replace(with_spec, runs=with_spec.runs + stand_in, envs=["CartpoleBalance", "CartpoleSwingup"])
    assert full.tests_in_list() == 27 and stats.seeds_needed(0.05 / 27) == 11


# -- non-exchangeable nulls: equal means, different shapes -------------------------------------
ARMS = ("baseline", "all_fixes", "spec_fixes", "reference", "stand_in")
LIST = tuple((ARMS.index(x), ARMS.index(y)) for x, y in (
    ("all_fixes", "baseline"), ("reference", "baseline"), ("reference", "all_fixes"), ("spec_fixes", "baseline"),
    ("reference", "spec_fixes"), ("stand_in", "baseline"), ("stand_in", "all_fixes"), ("stand_in", "spec_fixes")))
WIDE = ("baseline", "all_fixes")  # the arms whose runs solve or plateau in the committed evidence


def _solve_or_plateau(p: float, low: float = 136.0, high: float = 602.0):
    """Each seed solves (~997) with probability p, else plateaus uniformly in [low, high]: at
    p 0.25 on 136-602 the committed CartpoleBalance baseline (5 of 20 solve)."""
    def draw(rng, size):
        return np.where(rng.random(size) < p, rng.normal(997.0, 2.0, size), rng.uniform(low, high, size))
    return draw, p * 997.0 + (1 - p) * (low + high) / 2


def _two_envs(first: tuple, narrow_sd: float):
    """(families, seeds, arms, 2) scores: on the first env the WIDE arms draw ``first`` (a sampler
    and its mean), the others a normal of that mean and ``narrow_sd``; on the second (as
    CartpoleSwingup) the WIDE arms a normal of sd 65, the others sd 14, all of mean 215."""
    wide, centre = first

    def draw(rng, families, seeds):
        out = np.empty((families, seeds, len(ARMS), 2))
        for i, arm in enumerate(ARMS):
            size = (families, seeds)
            out[:, :, i, 0] = wide(rng, size) if arm in WIDE else rng.normal(centre, narrow_sd, size)
            out[:, :, i, 1] = rng.normal(215.0, 65.0 if arm in WIDE else 14.0, size)
        return out
    return draw


def _lognormal_first(rng, size):
    return 100.0 * rng.lognormal(0.0, 1.0, size)


def _committed_recentred():
    """The committed runs, (seeds, arms, envs), each arm moved to its environment's mean over
    all arms: the shapes (and their pairing by seed) kept, every difference in means removed."""
    runs = json.loads(COMMITTED.read_text())["runs"]
    envs = ("CartpoleBalance", "CartpoleSwingup")
    table = {(r["arm"], r["env"], r["seed"]): r["score"] for r in runs if r["status"] == "ok"}
    scores = np.array([[[table[(arm, env, seed)] for env in envs] for arm in ARMS] for seed in range(20)])
    return scores - scores.mean(axis=0, keepdims=True) + scores.mean(axis=(0, 1), keepdims=True)


def _committed_draw(rng, families, seeds):
    scores = _committed_recentred()
    return scores[rng.integers(0, scores.shape[0], size=(families, seeds))]  # whole seeds: pairing kept


NON_EXCHANGEABLE = {
    "solve-or-plateau vs narrow": _two_envs(_solve_or_plateau(0.25), 55.0),
    "lognormal vs narrow": _two_envs((_lognormal_first, 100.0 * math.exp(0.5)), 15.0),
    "committed runs recentred": _committed_draw,
}


def test_the_recentred_committed_runs_keep_their_shapes_and_lose_their_differences():
    scores = _committed_recentred()
    means = scores.mean(axis=0)  # (arms, envs)
    assert np.allclose(means, means[0:1, :])  # every arm at its env's mean
    balance = scores[:, ARMS.index("baseline"), 0]
    reference = scores[:, ARMS.index("reference"), 0]
    assert balance.std() > 4 * reference.std()  # solve-or-plateau against narrow: not exchangeable


@pytest.mark.parametrize("name", list(NON_EXCHANGEABLE))
@pytest.mark.parametrize("seeds", [10, 20])
def test_a_list_of_conclusions_holds_its_level_where_arms_differ_in_shape(name, seeds):
    rate = stats.null_list_rates(NON_EXCHANGEABLE[name], seeds, FAMILIES, LIST, seed=seeds)
    assert rate <= 0.05 + MARGIN, (name, seeds, rate)


def _old_rule_rate(draw, seeds: int) -> float:
    """The rule this replaced: the sign-flip test alone, pooled, the gap (5) and stand_in (3)
    families each held at 5 %; a list is wrong when either family is."""
    scores = draw(np.random.default_rng(seeds), FAMILIES, seeds)
    differences = np.stack([(scores[:, :, x] - scores[:, :, y]).mean(axis=2) for x, y in LIST], axis=1)
    p = stats.sign_flip_pvalues(differences.reshape(-1, seeds)).reshape(FAMILIES, len(LIST))
    return float(np.mean(stats.holm_rejections(p[:, :5]).any(axis=1) | stats.holm_rejections(p[:, 5:]).any(axis=1)))


def test_the_replaced_rule_broke_its_level_on_the_same_nulls():
    """Why the rule changed: on the committed situation the old rule's lists ran above 5 %."""
    old = _old_rule_rate(NON_EXCHANGEABLE["solve-or-plateau vs narrow"], 10)
    assert old > 0.05 + MARGIN, old
    assert _old_rule_rate(NON_EXCHANGEABLE["committed runs recentred"], 10) > 0.05 + MARGIN


def test_where_no_test_of_the_mean_can_hold_its_level():
    """A rarer solve (p 0.2) at 10 seeds: in 0.8^10 = 10.7 % of draws no seed of the baseline
    solves, and its runs then look like a narrow arm shifted down, which any test of the mean
    with power against such a shift rejects. The level holds again at 20 seeds (1.2 %); the
    docs state the limit."""
    rare = _two_envs(_solve_or_plateau(0.2, 170.0, 480.0), 15.0)
    at_10 = stats.null_list_rates(rare, 10, FAMILIES, LIST, seed=10)
    assert 0.8**10 > 0.05 + MARGIN and at_10 > 0.05 + MARGIN, at_10
    assert stats.null_list_rates(rare, 20, FAMILIES, LIST, seed=20) <= 0.05 + MARGIN


def test_the_list_simulation_decides_as_decide_family_does():
    """null_list_rates on the same draws as decide_family over every comparison of the list,
    pooled and per environment, one Holm (a liberal shape at 10 seeds, where tests reject)."""
    draw, families = NON_EXCHANGEABLE["lognormal vs narrow"], 150
    scores = draw(np.random.default_rng(4), families, 10)
    wrong = 0
    for family in scores:
        comparisons = {}
        for t, (x, y, env) in enumerate(stats.list_comparisons(LIST, 2)):
            envs = slice(None) if env is None else slice(env, env + 1)
            comparisons[f"{t:02d}"] = (family[:, x, envs], family[:, y, envs])
        decided = stats.decide_family(comparisons, detail=False, reps=stats.SIMULATED_BOOTSTRAP_T_REPS)
        wrong += any(v.verdict != stats.INCONCLUSIVE for v in decided.values())
    assert stats.null_list_rates(draw, 10, families, LIST, seed=4) == wrong / families
    assert wrong > 0
