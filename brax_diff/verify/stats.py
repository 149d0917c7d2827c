"""Few-seed statistics: descriptive aggregates, and a test a verdict can rest on.

Scores are arrays shaped ``(runs, tasks)``: one column per environment, one row per seed.

Descriptive, as rliable (Agarwal et al., 2021) defines them: the IQM (mean of the middle
50%, ``trim_mean(x, 0.25)``), the stratified bootstrap (runs resampled within each task)
and the probability of improvement (Mann-Whitney, ties 1/2, averaged over tasks).

The **test** behind a verdict is paired by seed (below, "the paired test"): the sign-flip
permutation test and the paired bootstrap-t, decisive where all reject. The unpaired
bootstrap-Welch difference (:func:`difference`, the stratified bootstrap's SE with Welch
degrees of freedom) is kept for descriptive use; the bootstrap's *percentile* interval is not
used for decisions (at 2-5 seeds it is too narrow: ``tests/test_verify_stats.py``). A list of
comparisons is one family, corrected with Holm-Bonferroni (:func:`holm_levels`); every
interval is reported at the level its test was held to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE
BOOTSTRAP_REPS = 4000
POWER = 0.8  # the power a minimum detectable effect is stated at
MIN_SEEDS = 4  # fewer finished runs per arm and task: no decisive verdict (see docs/verify.md)


def as_scores(values) -> np.ndarray:
    """A list of per-seed scores (one task) or a (runs, tasks) array -> float array (runs, tasks)."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0:
        raise ValueError(f"scores must be (runs,) or (runs, tasks), got shape {array.shape}")
    return array


# -- descriptive (rliable) ---------------------------------------------------------------
def iqm(scores) -> float:
    """Interquartile mean over all runs and tasks."""
    flat = np.sort(as_scores(scores).ravel())
    cut = int(0.25 * flat.size)
    return float(flat[cut:flat.size - cut].mean())


def mean(scores) -> float:
    """Mean over tasks of each task's mean over runs."""
    return float(as_scores(scores).mean(axis=0).mean())


def stratified_resample(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One bootstrap replicate: each task's column resampled with replacement."""
    runs, tasks = scores.shape
    rows = rng.integers(0, runs, size=(runs, tasks))
    return np.take_along_axis(scores, rows, axis=0)


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(low), float(high)


def iqm_ci(scores, reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of one arm's IQM (descriptive; plots and tables)."""
    scores = as_scores(scores)
    rng = np.random.default_rng(seed)
    replicates = np.array([iqm(stratified_resample(scores, rng)) for _ in range(reps)])
    return percentile_interval(replicates)


def probability_of_improvement(x, y) -> float:
    """P(X > Y) averaged over tasks; ties count 1/2."""
    x, y = as_scores(x), as_scores(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError("x and y must have the same tasks")
    per_task = []
    for task in range(x.shape[1]):
        xs, ys = x[:, task][:, None], y[:, task][None, :]
        per_task.append(float(np.mean((xs > ys) + 0.5 * (xs == ys))))
    return float(np.mean(per_task))


# -- the test ----------------------------------------------------------------------------
def _t_quantile(p: float, df: float) -> float:
    from scipy import stats as scipy_stats

    return float(scipy_stats.t.ppf(p, df))


def _t_two_sided_p(t: float, df: float) -> float:
    from scipy import stats as scipy_stats

    return float(2.0 * scipy_stats.t.sf(abs(t), df))


@dataclass(frozen=True)
class Spread:
    """One arm's mean and the bootstrap variance of that mean, per stratum (task)."""

    mean: float
    variances: tuple[float, ...]  # per task: bootstrap variance of the task mean, x n/(n-1)
    runs: tuple[int, ...]  # per task

    @property
    def variance(self) -> float:
        tasks = len(self.variances)
        return float(sum(self.variances)) / tasks**2


def spread(scores, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> Spread:
    """The stratified bootstrap of one arm's mean: replicate variance per task, corrected."""
    scores = as_scores(scores)
    runs, tasks = scores.shape
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, runs, size=(reps, runs, tasks))
    task_means = np.take_along_axis(np.broadcast_to(scores, (reps, runs, tasks)), rows, axis=1).mean(axis=1)
    correction = runs / (runs - 1) if runs > 1 else 0.0
    variances = tuple(float(task_means[:, t].var(ddof=1) * correction) if reps > 1 else 0.0 for t in range(tasks))
    return Spread(float(scores.mean(axis=0).mean()), variances, (runs,) * tasks)


def mean_interval(scores, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The ``confidence`` interval of one arm's mean over its seeds (Student's t, n - 1 df)."""
    values = np.asarray(scores, dtype=float)
    if values.size < 2:
        raise ValueError("an interval needs at least 2 scores")
    half = _t_quantile(0.5 + confidence / 2.0, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    center = float(values.mean())
    return center - half, center + half


@dataclass(frozen=True)
class Difference:
    """mean(x) - mean(y) with its standard error, degrees of freedom and two-sided p-value."""

    delta: float
    se: float
    df: float
    p: float
    seeds: int  # the smaller arm's runs per task

    def interval(self, alpha: float = ALPHA) -> tuple[float, float]:
        if self.se == 0.0:
            return self.delta, self.delta
        half = _t_quantile(1.0 - alpha / 2.0, self.df) * self.se
        return self.delta - half, self.delta + half

    def min_detectable_effect(self, alpha: float = ALPHA, power: float = POWER) -> float | None:
        """The smallest true |difference| this test finds with probability ``power`` at level
        ``alpha`` (normal-theory approximation with this SE and df); None without a spread."""
        if self.se == 0.0 or not math.isfinite(self.df):
            return None
        return (_t_quantile(1.0 - alpha / 2.0, self.df) + _t_quantile(power, self.df)) * self.se


def difference(x, y, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> Difference:
    """The test statistic of x against y; x and y resampled independently, stratified by task."""
    x, y = as_scores(x), as_scores(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError("x and y must have the same tasks")
    sx, sy = spread(x, reps, seed), spread(y, reps, seed + 1)
    return _difference(sx, sy)


def _difference(sx: Spread, sy: Spread) -> Difference:
    delta = sx.mean - sy.mean
    tasks = len(sx.variances)
    parts = [(v / tasks**2, n) for s in (sx, sy) for v, n in zip(s.variances, s.runs)]
    variance = sum(v for v, _ in parts)
    seeds = min(min(sx.runs), min(sy.runs))
    if variance <= 0.0:
        return Difference(delta, 0.0, math.inf, 1.0 if delta == 0.0 else 0.0, seeds)
    denominator = sum(v * v / (n - 1) for v, n in parts if n > 1)
    df = variance**2 / denominator if denominator > 0 else math.inf
    se = math.sqrt(variance)
    return Difference(delta, se, df, _t_two_sided_p(delta / se, df), seeds)


def holm_levels(pvalues: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """Holm-Bonferroni: the level each test of one family is held to.

    Sorted by p, the k-th test (from 0) is held to alpha / (m - k) while every smaller p was
    rejected; once one is not, it and every later test are held to that level. A test is
    rejected exactly when its p is at or under its level, so an interval at 1 - level
    excludes no-effect exactly when the test rejects.
    """
    m = len(pvalues)
    levels = [0.0] * m
    stopped: float | None = None
    for rank, index in enumerate(sorted(range(m), key=lambda i: (pvalues[i], i))):
        level = alpha / (m - rank) if stopped is None else stopped
        if stopped is None and pvalues[index] > level:
            stopped = level
        levels[index] = level
    return levels


def fieller_ratio(point_a: float, point_b: float, var_a: float, var_b: float, cov_ab: float, df: float,
                  alpha: float = ALPHA) -> tuple[float, float] | None:
    """Fieller's interval for point_a / point_b given the estimates' (co)variances.

    None when the denominator's own interval contains 0: the ratio is then unbounded."""
    t = _t_quantile(1.0 - alpha / 2.0, df) if math.isfinite(df) else 1.959963984540054
    qa = point_b**2 - t * t * var_b
    if qa <= 0.0:
        return None
    qb = point_a * point_b - t * t * cov_ab
    qc = point_a**2 - t * t * var_a
    disc = qb * qb - qa * qc
    if disc < 0.0:
        return None
    root = math.sqrt(disc)
    return (qb - root) / qa, (qb + root) / qa


# -- the paired test ----------------------------------------------------------------------
# Seed i of every arm shares its reset keys (and, where shapes allow, initial weights), so a
# comparison is paired by seed. A verdict rests on two tests of the mean paired difference and
# is decisive only where all reject (so its level is at most any one's, and it holds
# wherever one of them holds):
# * the sign-flip permutation test: exact when the arms are exchangeable within a seed (each
#   difference as likely +d as -d, whatever the shape). The p counts every one of the 2^n
#   sign vectors (meet in the middle) up to EXACT_SEEDS seeds; its smallest p is 2 / 2^n.
#   Where the arms differ in shape with equal means (a solve-or-plateau arm against a narrow
#   one, a lognormal tail) the differences are skewed, not symmetric, and it alone runs above
#   its level (measured: tests/test_stats_level.py);
# * the paired bootstrap-t: mean / se against the bootstrap distribution of
#   (mean* - mean) / se*, symmetric and equal-tailed, the larger p (second-order correct for a
#   skewed mean, Hall 1988; not exact).
EXACT_SEEDS = 32  # exact enumeration up to here; beyond, MONTE_CARLO_FLIPS random sign vectors
MONTE_CARLO_FLIPS = 100_000
BOOTSTRAP_T_REPS = 20_000  # resamples behind a verdict's bootstrap-t
SIMULATED_BOOTSTRAP_T_REPS = 5_000  # per simulated comparison (power, level checks): the equal-tailed
# p is at least 2 / (reps + 1), and at 1,000 that was above the first Holm level of 27 tests (0.0019)
BOOTSTRAP_T_SEED = 20_262  # fixed: the same verdict every run
SIMULATIONS = 400  # per effect size, when a verdict's detectable effect is simulated
TEST_NAME = ("paired sign-flip permutation test (exact) and paired bootstrap-t (symmetric and equal-tailed) "
             "of the mean difference; decisive where all reject")


def paired_differences(x, y) -> np.ndarray:
    """Per seed: the mean over tasks of x - y (rows of x and y are the same seeds)."""
    x, y = as_scores(x), as_scores(y)
    if x.shape != y.shape:
        raise ValueError(f"paired scores need the same seeds and tasks, got shapes {x.shape} and {y.shape}")
    return (x - y).mean(axis=1)


_SIGNS: dict[int, np.ndarray] = {}


def _signs(k: int) -> np.ndarray:
    """Every sign vector of length k, (2^k, k)."""
    if k not in _SIGNS:
        codes = np.arange(2**k)[:, None] >> np.arange(k)[None, :]
        _SIGNS[k] = np.where(codes & 1, -1.0, 1.0)
    return _SIGNS[k]


def smallest_p(seeds: int) -> float:
    """The smallest two-sided p the sign-flip test can give at ``seeds`` paired seeds (the
    combined test's p is never smaller)."""
    return min(1.0, 2.0 / 2.0**seeds) if seeds <= EXACT_SEEDS else 2.0 / (MONTE_CARLO_FLIPS + 1)


def seeds_needed(level: float) -> int:
    """The fewest seeds at which the sign-flip test can reject at ``level``."""
    n = 1
    while smallest_p(n) > level:
        n += 1
    return n


def _bootstrap_counts(n: int, reps: int, seed: int = BOOTSTRAP_T_SEED) -> np.ndarray:
    """(reps, n): how often each of n seeds is drawn in each resample (a fixed generator)."""
    rows = np.random.default_rng(seed).integers(0, n, size=(reps, n))
    counts = np.zeros((reps, n))
    np.add.at(counts, (np.arange(reps)[:, None], rows), 1.0)
    return counts


def _bootstrap_t(rows: np.ndarray, reps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the mean, its standard error and the resampled (mean* - mean) / se* (rows, reps).

    A resample with se* 0 (every drawn difference equal) counts as infinitely far, on its
    side, when its mean moved and 0 when not."""
    count, n = rows.shape
    counts = _bootstrap_counts(n, reps).T / n  # (n, reps): a matrix product per row block
    means = rows.mean(axis=1)
    se = rows.std(axis=1, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(count)
    boot_mean = rows @ counts
    boot_var = np.maximum((rows * rows) @ counts - boot_mean**2, 0.0) * n / max(n - 1, 1)
    boot_se = np.sqrt(boot_var / n)
    moved = boot_mean - means[:, None]
    tol = 1e-9 * (np.abs(rows).max(axis=1, initial=0.0)[:, None] + 1.0)
    t = np.where(boot_se > tol, moved / np.where(boot_se > tol, boot_se, 1.0),
                 np.where(np.abs(moved) > tol, np.copysign(np.inf, moved), 0.0))
    return means, se, t


def bootstrap_t_pvalues(differences, reps: int = BOOTSTRAP_T_REPS) -> np.ndarray:
    """Two-sided bootstrap-t p-values, one per row of ``differences`` (rows, seeds): the larger
    of the symmetric one (resamples with |t*| >= |t|) and the equal-tailed one (twice the
    smaller tail), each (hits + 1) / (reps + 1). Where the differences are skewed the two
    disagree, and the verdict takes the more cautious. A row whose differences are all equal
    has no spread: p 0 when they are not 0 (the sign-flip test then decides), else 1."""
    rows = np.atleast_2d(np.asarray(differences, dtype=float))
    out = np.empty(rows.shape[0])
    block = max(1, 4_000_000 // max(1, reps * rows.shape[1]))  # bounded memory
    for start in range(0, rows.shape[0], block):
        part = rows[start:start + block]
        means, se, t_boot = _bootstrap_t(part, reps)
        scale = 1e-9 * (np.abs(part).max(axis=1, initial=0.0) + 1.0)
        t = np.where(se > scale, means / np.where(se > scale, se, 1.0),
                     np.where(np.abs(means) > scale, np.copysign(np.inf, means), 0.0))[:, None]
        slack = 1e-12 * np.abs(np.where(np.isfinite(t), t, 0.0))
        symmetric = ((np.abs(t_boot) >= np.abs(t) - slack).sum(axis=1) + 1.0) / (reps + 1.0)
        lower = ((t_boot <= t + slack).sum(axis=1) + 1.0) / (reps + 1.0)
        upper = ((t_boot >= t - slack).sum(axis=1) + 1.0) / (reps + 1.0)
        p = np.maximum(symmetric, np.minimum(1.0, 2.0 * np.minimum(lower, upper)))
        p = np.where(np.isinf(t[:, 0]), 0.0, p)
        out[start:start + block] = np.where(t[:, 0] == 0.0, 1.0, p)
    return out


def paired_pvalues(differences, reps: int = BOOTSTRAP_T_REPS) -> np.ndarray:
    """The verdict's p per row of ``differences``: the largest of the sign-flip and the two
    bootstrap-t p-values (decisive where all reject)."""
    rows = np.atleast_2d(np.asarray(differences, dtype=float))
    return np.maximum(sign_flip_pvalues(rows), bootstrap_t_pvalues(rows, reps))


def paired_rejects(differences, level: float, reps: int = BOOTSTRAP_T_REPS) -> np.ndarray:
    """Per row of ``differences``: does the verdict's test reject at ``level``? The same as
    ``paired_pvalues(...) <= level``; the bootstrap runs only on the rows the sign-flip test
    rejects (it must too), which in a simulation under no difference is a few in a hundred."""
    rows = np.atleast_2d(np.asarray(differences, dtype=float))
    out = sign_flip_pvalues(rows) <= level
    if out.any():
        out[out] = bootstrap_t_pvalues(rows[out], reps) <= level
    return out


def paired_p(differences, reps: int = BOOTSTRAP_T_REPS) -> float:
    return float(paired_pvalues(np.asarray(differences, dtype=float)[None, :], reps)[0])


def bootstrap_t_interval(differences, level: float, reps: int = BOOTSTRAP_T_REPS) -> tuple[float, float] | None:
    """The shifts neither bootstrap-t rejects at ``level`` (the union of the symmetric interval,
    mean -+ q se, and the equal-tailed one, mean - se t*_high .. mean - se t*_low, the
    quantiles the p-values' counts cut at); None when ``reps`` is too few for the level."""
    d = np.asarray(differences, dtype=float)[None, :]
    means, se, t_boot = _bootstrap_t(d, reps)
    ranked = np.sort(t_boot[0])
    k_sym = math.floor(level * (reps + 1) + 1e-9)  # the k-th most extreme: p <= level exactly beyond it
    k_tail = math.floor(level / 2 * (reps + 1) + 1e-9)
    if k_sym < 1 or k_tail < 1:
        return None
    q = float(np.sort(np.abs(t_boot[0]))[::-1][k_sym - 1])
    low_t, high_t = float(ranked[k_tail - 1]), float(ranked[::-1][k_tail - 1])
    if not all(map(math.isfinite, (q, low_t, high_t))):
        return None
    m, s = float(means[0]), float(se[0])
    return min(m - q * s, m - high_t * s), max(m + q * s, m - low_t * s)


def paired_interval(differences, level: float, reps: int = BOOTSTRAP_T_REPS) -> tuple[float, float] | None:
    """The verdict's test inverted: the shifts that one of its tests does not reject (the union
    of their intervals, all around the mean); None when it cannot reject here."""
    flip = sign_flip_interval(differences, level)
    boot = bootstrap_t_interval(differences, level, reps)
    if flip is None or boot is None:
        return None
    return min(flip[0], boot[0]), max(flip[1], boot[1])


def sign_flip_pvalues(differences) -> np.ndarray:
    """Two-sided sign-flip p-values, one per row of ``differences`` (rows, seeds): the test
    that a row's paired differences are centred on 0. Exact up to EXACT_SEEDS seeds."""
    rows = np.atleast_2d(np.asarray(differences, dtype=float))
    if rows.shape[0] > 8:  # in small chunks: one search over many rows' sums is slower (measured)
        return np.concatenate([_sign_flip_pvalues(rows[i:i + 8]) for i in range(0, rows.shape[0], 8)])
    return _sign_flip_pvalues(rows)


def _sign_flip_pvalues(rows: np.ndarray) -> np.ndarray:
    count, n = rows.shape
    if n == 0:
        return np.ones(count)
    magnitudes = np.abs(rows)
    observed = np.abs(rows.sum(axis=1))
    tol = 1e-9 * magnitudes.sum(axis=1)
    if n > EXACT_SEEDS:
        rng = np.random.default_rng(0)
        signs = rng.choice((-1.0, 1.0), size=(MONTE_CARLO_FLIPS, n))
        hits = np.array([np.sum(np.abs(signs @ m) >= o - t) for m, o, t in zip(magnitudes, observed, tol)])
        p = (hits + 1) / (MONTE_CARLO_FLIPS + 1)
    else:
        half = n // 2
        left = magnitudes[:, :half] @ _signs(half).T  # (rows, 2^half)
        right = np.sort(magnitudes[:, half:] @ _signs(n - half).T, axis=1)
        # every row's sums in one sorted array: row r's shifted by r * span, so a search stays in its row
        span = 4.0 * magnitudes.sum(axis=1).max() + 1.0
        offsets = np.arange(count)[:, None] * span
        flat = (right + offsets).ravel()
        wanted = (observed - tol)[:, None] - left + offsets
        row_ends = (np.arange(count)[:, None] + 1) * right.shape[1]
        at_or_above = (row_ends - np.searchsorted(flat, wanted, side="left")).sum(axis=1)
        # sign vectors whose sum is >= observed; by symmetry as many are <= -observed
        p = np.minimum(1.0, 2.0 * at_or_above / 2.0**n)
    return np.where(observed <= tol, 1.0, p)


def sign_flip_p(differences) -> float:
    """Two-sided p of the sign-flip test that the paired differences are centred on 0."""
    return float(sign_flip_pvalues(np.asarray(differences, dtype=float)[None, :])[0])


def sign_flip_interval(differences, level: float) -> tuple[float, float] | None:
    """The shifts the test does not reject at ``level`` (the test inverted, by bisection):
    the 1 - level interval of the mean paired difference; None when the test cannot reject
    at this seed count (the interval is then the whole line)."""
    d = np.asarray(differences, dtype=float)
    if d.size == 0 or smallest_p(d.size) > level:
        return None
    center = float(d.mean())
    spread_ = float(d.max() - d.min()) or 1.0

    def bound(direction: float) -> float:
        inside, outside = center, center + direction * spread_
        while sign_flip_p(d - outside) > level:  # beyond every difference p is its smallest
            outside = center + 2.0 * (outside - center)
        for _ in range(60):
            middle = 0.5 * (inside + outside)
            if sign_flip_p(d - middle) > level:
                inside = middle
            else:
                outside = middle
            if abs(outside - inside) <= 1e-9 * spread_:
                break
        return inside

    return bound(-1.0), bound(1.0)


def simulated_power(sample_pair, effect: float, seeds: int, level: float, sims: int = SIMULATIONS,
                    seed: int = 0, jump: float | None = None) -> float:
    """The share of ``sims`` simulated comparisons the verdict's test rejects at ``level`` with a
    true effect. ``sample_pair(rng, seeds) -> (x, y)`` draws one comparison with no difference;
    the effect is a location shift of x by ``effect``, or with ``jump`` a solve-type effect:
    each seed of x independently, with probability ``effect``, gains ``jump`` (more seeds solve,
    the rest unchanged). Measured on the same test the verdict uses."""
    if smallest_p(seeds) > level:
        return 0.0
    rng = np.random.default_rng(seed)
    drawn = [sample_pair(rng, seeds) for _ in range(sims)]
    differences = np.array([np.asarray(x, dtype=float) - np.asarray(y, dtype=float) for x, y in drawn])
    if jump is None:
        differences = differences + effect
    else:
        differences = differences + jump * (rng.random(differences.shape) < effect)
    return float(np.mean(paired_rejects(differences, level, SIMULATED_BOOTSTRAP_T_REPS)))


def detectable_effect(sample_pair, seeds: int, level: float, power: float = POWER, sims: int = SIMULATIONS,
                      seed: int = 0, scale: float = 1.0) -> float | None:
    """The smallest shift found with probability ``power`` at ``level`` (simulated with
    ``sample_pair``, to 2 % of ``scale``); None when the test cannot reject at ``seeds``."""
    if smallest_p(seeds) > level:
        return None
    low, high = 0.0, scale
    while simulated_power(sample_pair, high, seeds, level, sims, seed) < power:
        low, high = high, 2.0 * high
        if high > 1e6 * scale:
            return None
    while high - low > 0.02 * scale:
        middle = 0.5 * (low + high)
        if simulated_power(sample_pair, middle, seeds, level, sims, seed) >= power:
            high = middle
        else:
            low = middle
    return high


def detectable_solve_share(sample_pair, jump: float, seeds: int, level: float, power: float = POWER,
                           sims: int = SIMULATIONS, seed: int = 0) -> float | None:
    """The smallest share of seeds that must newly solve (each gaining ``jump``) for the test to
    find the effect with probability ``power`` at ``level``, to 0.025; None when not even every
    seed solving is found (or the test cannot reject at ``seeds``)."""
    if smallest_p(seeds) > level or jump <= 0 or simulated_power(sample_pair, 1.0, seeds, level, sims, seed,
                                                                 jump) < power:
        return None
    low, high = 0.0, 1.0
    while high - low > 0.025:
        middle = 0.5 * (low + high)
        if simulated_power(sample_pair, middle, seeds, level, sims, seed, jump) >= power:
            high = middle
        else:
            low = middle
    return high


def resampled_differences(differences) -> "callable":
    """A no-difference sampler from observed paired differences: centred, signs flipped at
    random, resampled with replacement (x carries them, y is 0)."""
    centred = np.asarray(differences, dtype=float) - float(np.mean(differences))

    def sample(rng: np.random.Generator, seeds: int):
        drawn = rng.choice(centred, size=seeds, replace=True) * rng.choice((-1.0, 1.0), size=seeds)
        return drawn, np.zeros(seeds)

    return sample


# -- solving: solve-or-plateau outcomes ------------------------------------------------------
def clopper_pearson(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion."""
    from scipy import stats as scipy_stats

    if trials <= 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    low = 0.0 if successes == 0 else float(scipy_stats.beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(scipy_stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


def mcnemar_exact_p(only_x: int, only_y: int) -> float:
    """Exact McNemar test: two-sided binomial p of the discordant pairs (x solved and y not,
    and the reverse) under 1/2 each."""
    from scipy import stats as scipy_stats

    discordant = only_x + only_y
    if discordant == 0:
        return 1.0
    return min(1.0, 2.0 * float(scipy_stats.binom.cdf(min(only_x, only_y), discordant, 0.5)))


@dataclass(frozen=True)
class Solving:
    """The probability of solving (score >= threshold) of both arms, over paired (seed, task)
    runs: each with its exact interval, and the exact McNemar test of their difference."""

    threshold: float
    solved_x: int
    solved_y: int
    runs: int
    only_x: int
    only_y: int
    p: float
    level: float = ALPHA
    verdict: str = "inconclusive"

    def to_json(self) -> dict:
        confidence = 1.0 - self.level
        return {"threshold": self.threshold, "runs": self.runs, "rate_x": self.solved_x / self.runs,
                "rate_x_ci": list(clopper_pearson(self.solved_x, self.runs, confidence)),
                "rate_y": self.solved_y / self.runs,
                "rate_y_ci": list(clopper_pearson(self.solved_y, self.runs, confidence)),
                "ci_level": confidence, "only_x": self.only_x, "only_y": self.only_y, "p": self.p,
                "test": "exact McNemar test on the paired runs", "verdict": self.verdict}


def solving(x, y, threshold: float) -> Solving:
    solved_x, solved_y = as_scores(x) >= threshold, as_scores(y) >= threshold
    only_x = int(np.sum(solved_x & ~solved_y))
    only_y = int(np.sum(solved_y & ~solved_x))
    return Solving(float(threshold), int(solved_x.sum()), int(solved_y.sum()), int(solved_x.size), only_x, only_y,
                   mcnemar_exact_p(only_x, only_y))


# -- verdicts ----------------------------------------------------------------------------
SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not_supported", "inconclusive"


@dataclass(frozen=True)
class Verdict:
    """One comparison of a family, decided at its Holm level by the paired test (TEST_NAME).

    ``supported``: the test rejects and mean(x) - mean(y) > 0 (x, the arm with the fix, scores
    higher); ``not_supported``: it rejects and the difference is negative; ``inconclusive``:
    it does not reject. ``ci`` is the test inverted at the same level (None when the test
    cannot reject at this seed count). ``min_detectable_effect``: the smallest true
    shift this seed count finds with 80 % probability at the same level, simulated from the
    observed differences' own shape; ``min_detectable_solve_share``: the smallest share of
    seeds that must newly solve to be found so. ``solving``: the probability-of-solving measure,
    decided in a family of its own.
    """

    name: str
    verdict: str
    mean_x: float
    mean_y: float
    delta: float
    ci: tuple[float, float] | None
    level: float  # the test's Holm level; the CI is at 1 - level
    p: float | None
    seeds: int
    tests_in_family: int
    min_detectable_effect: float | None = None
    poi: float | None = None
    reason: str | None = None
    solving: Solving | None = None
    min_detectable_solve_share: float | None = None

    def to_json(self) -> dict:
        out = {"verdict": self.verdict, "mean_x": self.mean_x, "mean_y": self.mean_y, "delta": self.delta,
               "ci": None if self.ci is None else [self.ci[0], self.ci[1]],
               "ci_level": 1.0 - self.level, "p": self.p, "seeds": self.seeds,
               "tests_in_family": self.tests_in_family, "poi": self.poi, "test": TEST_NAME}
        if self.verdict == INCONCLUSIVE:
            out["min_detectable_effect"] = self.min_detectable_effect
            if self.min_detectable_solve_share is not None or self.solving is not None:
                out["min_detectable_solve_share"] = self.min_detectable_solve_share
        if self.reason:
            out["reason"] = self.reason
        if self.solving is not None:
            out["solving"] = self.solving.to_json()
        return out


def _cannot_reject(seeds: int, level: float) -> str:
    return (f"at {seeds} paired seeds the sign-flip test's smallest p is {smallest_p(seeds):.3g}, above its "
            f"level {level:.3g}: {seeds_needed(level)} seeds are needed")


def solve_jump(x, y, threshold: float) -> float:
    """What one seed newly solving one environment adds to its paired difference (averaged
    over the tasks): from y's mean unsolved score to a solved score, the mean of the runs of x
    and y at or above ``threshold`` (the threshold itself when none solved)."""
    x, y = as_scores(x), as_scores(y)
    runs = np.concatenate([x.ravel(), y.ravel()])
    solved = runs[runs >= threshold]
    unsolved = y[y < threshold]
    target = float(solved.mean()) if solved.size else float(threshold)
    return max(0.0, target - (float(unsolved.mean()) if unsolved.size else target)) / x.shape[1]


def decide_family(comparisons: dict[str, tuple[np.ndarray, np.ndarray]], alpha: float = ALPHA,
                  reps: int = BOOTSTRAP_T_REPS, detail: bool = True,
                  solve_threshold: float | None = None,
                  extra_pvalues: dict[str, float] | None = None) -> dict[str, Verdict]:
    """Verdicts for one family of paired comparisons ``{name: (x scores, y scores)}`` (x: with
    the fix; row i of x and y is seed i).

    Comparisons with fewer than MIN_SEEDS seeds are inconclusive by rule and do not count in
    the family's correction. ``detail`` False skips the intervals and detectable effects
    (simulations need only the decisions). ``solve_threshold``: the probability of solving is
    measured too, its McNemar tests corrected as a family of their own; an inconclusive
    comparison then also gets the share of seeds that must newly solve to be found.
    ``reps``: the bootstrap-t's resamples. ``extra_pvalues``: other tests the same list of
    conclusions states (an equivalence test), held under the same Holm; each comes back as a
    Verdict with only its p, level and decision (supported: rejected).
    """
    tested: dict[str, np.ndarray] = {}
    out: dict[str, Verdict] = {}
    pairs = {name: (as_scores(x), as_scores(y)) for name, (x, y) in comparisons.items()}
    for name, (x, y) in sorted(pairs.items()):
        seeds = int(min(x.shape[0], y.shape[0]))
        if seeds < MIN_SEEDS:
            out[name] = Verdict(name, INCONCLUSIVE, mean(x), mean(y), mean(x) - mean(y), None, alpha, None, seeds,
                                0, None, probability_of_improvement(x, y),
                                f"{seeds} finished run(s) per arm; a verdict needs at least {MIN_SEEDS}")
            continue
        tested[name] = paired_differences(x, y)
    names = sorted(tested)
    pvalues = {n: paired_p(tested[n], reps) for n in names}
    extra = dict(extra_pvalues or {})
    every = names + sorted(extra)
    levels = holm_levels([pvalues[n] if n in pvalues else extra[n] for n in every], alpha)
    for name, level in zip(every[len(names):], levels[len(names):]):
        out[name] = Verdict(name, SUPPORTED if extra[name] <= level else INCONCLUSIVE, math.nan, math.nan, math.nan,
                            None, level, extra[name], 0, len(every))
    for name, level in zip(names, levels):
        d, (x, y) = tested[name], pairs[name]
        delta = float(d.mean())
        rejected = pvalues[name] <= level
        verdict = INCONCLUSIVE if not rejected else SUPPORTED if delta > 0 else NOT_SUPPORTED
        ci = mde = share = reason = None
        if detail:
            ci = paired_interval(d, level, reps)
            if verdict == INCONCLUSIVE:
                scale = float(np.std(d, ddof=1)) if d.size > 1 else 0.0
                null = resampled_differences(d)
                mde = detectable_effect(null, d.size, level, scale=scale) if scale > 0 else None
                if solve_threshold is not None and scale > 0:
                    share = detectable_solve_share(null, solve_jump(x, y, solve_threshold), d.size, level)
            if ci is None:
                reason = _cannot_reject(d.size, level)
        out[name] = Verdict(name, verdict, mean(x), mean(y), delta, ci, level, pvalues[name], d.size, len(every),
                            mde, probability_of_improvement(x, y), reason, min_detectable_solve_share=share)
    if solve_threshold is not None:
        measured = {n: solving(*pairs[n], solve_threshold) for n in names}
        solve_levels = holm_levels([measured[n].p for n in names], alpha)
        for name, level in zip(names, solve_levels):
            s = measured[name]
            decided = (INCONCLUSIVE if s.p > level else SUPPORTED if s.only_x > s.only_y else NOT_SUPPORTED)
            out[name] = replace(out[name], solving=replace(s, level=level, verdict=decided))
    return out


# -- null shapes the plan's power and the tests' level checks simulate ----------------------
def _normal(rng, n):
    return rng.normal(300.0, 100.0, n)


def _bimodal(rng, n):
    """Solve-or-plateau: each seed solves (about 1000) with probability 0.2, else plateaus at 170-480."""
    solved = rng.random(n) < 0.2
    return np.where(solved, rng.normal(997.0, 2.0, n), rng.uniform(170.0, 480.0, n))


def _heavy(rng, n):
    return 300.0 + 100.0 * rng.standard_t(2, n)


NULL_SHAPES = {"normal": _normal, "bimodal": _bimodal, "heavy-tailed": _heavy}
BIMODAL_JUMP = 997.0 - 325.0  # a seed of the bimodal shape going from the plateau's mean to solved


def null_pair(shape) -> "callable":
    """A no-difference sampler: x and y drawn independently from one score distribution
    (a NULL_SHAPES function, or an array of observed scores resampled with replacement)."""
    if callable(shape):
        return lambda rng, seeds: (shape(rng, seeds), shape(rng, seeds))
    scores = np.asarray(shape, dtype=float)
    return lambda rng, seeds: (rng.choice(scores, seeds), rng.choice(scores, seeds))


def holm_rejections(pvalues, alpha: float = ALPHA) -> np.ndarray:
    """Holm-Bonferroni over each row of ``pvalues`` (families, tests): which tests it rejects
    (the same rule as :func:`holm_levels`, vectorized for simulations)."""
    p = np.atleast_2d(np.asarray(pvalues, dtype=float))
    m = p.shape[1]
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    passed = np.cumprod(ranked <= alpha / (m - np.arange(m)), axis=1).astype(bool)
    out = np.zeros_like(passed)
    np.put_along_axis(out, order, passed, axis=1)
    return out


GAP_FAMILY = ((1, 0), (2, 0), (2, 1))  # all_fixes vs baseline, reference vs baseline, reference vs all_fixes


def _mcnemar_pvalues(only_x: np.ndarray, only_y: np.ndarray) -> np.ndarray:
    from scipy import stats as scipy_stats

    discordant = only_x + only_y
    return np.where(discordant == 0, 1.0, np.minimum(1.0, 2.0 * scipy_stats.binom.cdf(
        np.minimum(only_x, only_y), np.maximum(discordant, 1), 0.5)))


def null_family_rates(sample_arm, seeds: int, families: int, alpha: float = ALPHA,
                      solve_threshold: float | None = None, seed: int = 0,
                      comparisons=GAP_FAMILY) -> tuple[float, float | None]:
    """Simulated families with no true difference: arms drawn independently by
    ``sample_arm(rng, n)`` (exchangeable) and compared as ``comparisons`` (arm index pairs) say.
    Returns the share of families with any decisive verdict, for the mean test and (given
    ``solve_threshold``) the solving test, decided exactly as :func:`decide_family` decides them
    with ``reps=SIMULATED_BOOTSTRAP_T_REPS``."""
    rng = np.random.default_rng(seed)
    arms_drawn = 1 + max(max(pair) for pair in comparisons)
    scores = np.array([[sample_arm(rng, seeds) for _ in range(arms_drawn)] for _ in range(families)], dtype=float)
    differences = np.stack([scores[:, x] - scores[:, y] for x, y in comparisons], axis=1)  # (families, tests, seeds)
    mean_rate = 0.0 if seeds < MIN_SEEDS else _any_rejected(differences, alpha)
    if solve_threshold is None:
        return mean_rate, None
    solved = scores >= solve_threshold
    only_x = np.stack([(solved[:, x] & ~solved[:, y]).sum(axis=1) for x, y in comparisons], axis=1)
    only_y = np.stack([(solved[:, y] & ~solved[:, x]).sum(axis=1) for x, y in comparisons], axis=1)
    mcnemar = _mcnemar_pvalues(only_x, only_y)
    if seeds < MIN_SEEDS:
        mcnemar[:] = 1.0
    return mean_rate, float(np.mean(holm_rejections(mcnemar, alpha).any(axis=1)))


def _any_rejected(differences: np.ndarray, alpha: float) -> float:
    """The share of families (families, tests, seeds) in which Holm rejects anything: exactly
    those whose smallest p is at or under alpha / tests, Holm's first step."""
    families, tests, seeds = differences.shape
    rejected = paired_rejects(differences.reshape(-1, seeds), alpha / tests, SIMULATED_BOOTSTRAP_T_REPS)
    return float(np.mean(rejected.reshape(families, tests).any(axis=1)))


def list_comparisons(comparisons: Sequence[tuple[int, int]], envs: int) -> list[tuple[int, int, int | None]]:
    """Every test a list of conclusions rests on: each comparison (x arm, y arm) pooled over the
    environments and, with several, on each environment alone (env index; None: pooled)."""
    out: list[tuple[int, int, int | None]] = [(x, y, None) for x, y in comparisons]
    if envs > 1:
        out += [(x, y, env) for x, y in comparisons for env in range(envs)]
    return out


def null_list_rates(draw, seeds: int, families: int, comparisons: Sequence[tuple[int, int]],
                    alpha: float = ALPHA, seed: int = 0) -> float:
    """The share of simulated lists of conclusions with at least one false decisive verdict.

    ``draw(rng, families, seeds) -> (families, seeds, arms, envs)`` scores with no difference in
    any arm's mean (the arms may differ in shape, and row i of every arm is one seed: pairing
    kept). Every comparison pooled and per environment (:func:`list_comparisons`) is decided as
    :func:`decide_family` decides one list, one Holm over all of them, with
    ``reps=SIMULATED_BOOTSTRAP_T_REPS``."""
    scores = np.asarray(draw(np.random.default_rng(seed), families, seeds), dtype=float)
    tests = list_comparisons(comparisons, scores.shape[3])
    rows = [(scores[:, :, x] - scores[:, :, y]).mean(axis=2) if env is None else
            scores[:, :, x, env] - scores[:, :, y, env] for x, y, env in tests]
    differences = np.stack(rows, axis=1)  # (families, tests, seeds)
    return 0.0 if seeds < MIN_SEEDS else _any_rejected(differences, alpha)


def power_table(seeds: int, level: float, sims: int = SIMULATIONS, seed: int = 0) -> dict[str, float | None]:
    """Per NULL_SHAPES shape (score scale ~100-1000): the smallest true difference the paired
    test finds with 80 % probability at ``level`` and ``seeds`` seeds, simulated."""
    return {name: detectable_effect(null_pair(shape), seeds, level, sims=sims, seed=seed, scale=100.0)
            for name, shape in NULL_SHAPES.items()}
