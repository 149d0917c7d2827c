"""Few-seed statistics the way rliable (Agarwal et al., 2021) defines them, in NumPy.

Scores are arrays shaped ``(runs, tasks)``: one column per environment, one row per seed.

* IQM: the interquartile mean of all scores, the mean of the middle 50% after dropping
  ``floor(0.25 n)`` from each end (``scipy.stats.trim_mean(x, 0.25)``).
* Stratified bootstrap: resample runs with replacement *within* each task, recompute the
  statistic, take the percentile interval of the replicates.
* Probability of improvement P(X > Y): per task, the fraction of (x, y) run pairs with
  x > y, ties counting one half (the Mann-Whitney U statistic over n*m); averaged over tasks.

The verdict rule (documented in docs/verify.md) sits on top of these in :func:`verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_REPS = 2000


def as_scores(values) -> np.ndarray:
    """A list of per-seed scores (one task) or a (runs, tasks) array -> float array (runs, tasks)."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0:
        raise ValueError(f"scores must be (runs,) or (runs, tasks), got shape {array.shape}")
    return array


def iqm(scores) -> float:
    """Interquartile mean over all runs and tasks."""
    flat = np.sort(as_scores(scores).ravel())
    cut = int(0.25 * flat.size)
    return float(flat[cut:flat.size - cut].mean())


def stratified_resample(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One bootstrap replicate: each task's column resampled with replacement."""
    runs, tasks = scores.shape
    rows = rng.integers(0, runs, size=(runs, tasks))
    return np.take_along_axis(scores, rows, axis=0)


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(low), float(high)


def iqm_ci(scores, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> tuple[float, float]:
    scores = as_scores(scores)
    rng = np.random.default_rng(seed)
    replicates = np.array([iqm(stratified_resample(scores, rng)) for _ in range(reps)])
    return percentile_interval(replicates)


def iqm_difference_ci(x, y, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> tuple[float, float]:
    """Bootstrap CI of IQM(x) - IQM(y), x and y resampled independently (stratified by task)."""
    x, y = as_scores(x), as_scores(y)
    rng = np.random.default_rng(seed)
    replicates = np.array([iqm(stratified_resample(x, rng)) - iqm(stratified_resample(y, rng))
                           for _ in range(reps)])
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


def poi_ci(x, y, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> tuple[float, float]:
    x, y = as_scores(x), as_scores(y)
    rng = np.random.default_rng(seed)
    replicates = np.array([probability_of_improvement(stratified_resample(x, rng), stratified_resample(y, rng))
                           for _ in range(reps)])
    return percentile_interval(replicates)


# -- verdicts ----------------------------------------------------------------------------
SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
POI_DECISIVE = 0.75  # P(variant > baseline) at least this (or at most 1 - this) counts as decisive
EQUIVALENCE = 0.10  # |IQM difference| within 10% of the larger IQM counts as "no practical effect"


@dataclass(frozen=True)
class Comparison:
    """Variant vs baseline: the effect of moving one key to the Brax value."""

    iqm_variant: float
    iqm_baseline: float
    iqm_delta: float
    ci: tuple[float, float]
    poi: float
    poi_ci: tuple[float, float]
    margin: float
    seeds: int
    verdict: str

    def to_json(self) -> dict:
        return {"iqm_variant": self.iqm_variant, "iqm_baseline": self.iqm_baseline, "iqm_delta": self.iqm_delta,
                "ci": list(self.ci), "poi": self.poi, "poi_ci": list(self.poi_ci), "margin": self.margin,
                "seeds": self.seeds, "verdict": self.verdict}


def verdict(delta_ci: tuple[float, float], poi: float, margin: float) -> str:
    """The decision rule.

    * supported: the 95% CI of IQM(variant) - IQM(baseline) excludes 0 and the probability
      of improvement is decisive (>= 0.75 or <= 0.25): the difference changes the result.
    * not supported: the whole CI lies within +-margin (10% of the larger |IQM|): any
      effect is too small to matter at this budget.
    * inconclusive: anything else; more seeds (or budget) could decide it.
    """
    low, high = delta_ci
    decisive = poi >= POI_DECISIVE or poi <= 1.0 - POI_DECISIVE
    if (low > 0.0 or high < 0.0) and decisive:
        return SUPPORTED
    if -margin <= low and high <= margin:
        return NOT_SUPPORTED
    return INCONCLUSIVE


def compare(variant, baseline, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> Comparison:
    variant, baseline = as_scores(variant), as_scores(baseline)
    iv, ib = iqm(variant), iqm(baseline)
    ci = iqm_difference_ci(variant, baseline, reps=reps, seed=seed)
    poi = probability_of_improvement(variant, baseline)
    margin = EQUIVALENCE * max(abs(iv), abs(ib))
    return Comparison(iv, ib, iv - ib, ci, poi, poi_ci(variant, baseline, reps=reps, seed=seed), margin,
                      int(min(variant.shape[0], baseline.shape[0])), verdict(ci, poi, margin))
