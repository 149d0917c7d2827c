"""Learning-curve PNGs: per arm the mean over seeds of the evaluation return at each checkpoint,
with a 95% bootstrap band."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

import numpy as np

from ..safety.io import write_atomic

Curve = tuple[Sequence[int], Sequence[float]]


def mean_and_band(curves: list[Curve], reps: int = 500, seed: int = 0):
    """Steps, mean score and a 95% percentile-bootstrap interval of the mean, on the steps all
    curves share (curves are cut to the shortest one)."""
    length = min(len(c[1]) for c in curves)
    steps = np.asarray(curves[0][0][:length], dtype=float)
    scores = np.asarray([c[1][:length] for c in curves], dtype=float)  # (seeds, points)
    mean = scores.mean(axis=0)
    if scores.shape[0] < 2:
        return steps, mean, mean, mean
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, scores.shape[0], size=(reps, scores.shape[0]))
    replicates = scores[rows].mean(axis=1)  # (reps, points)
    low, high = np.quantile(replicates, [0.025, 0.975], axis=0)
    return steps, mean, low, high


def learning_curves(path: str | Path, title: str, arms: dict[str, list[Curve]], ylabel: str) -> Path:
    """Write a PNG with one mean line and CI band per arm (arms with no curve are skipped);
    ``ylabel`` says what the scores are."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for label, curves in arms.items():
        curves = [c for c in curves if len(c[1]) > 0]
        if not curves:
            continue
        steps, mean, low, high = mean_and_band(curves)
        line, = axes.plot(steps, mean, label=f"{label} (n={len(curves)})")
        axes.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    axes.set_title(title, fontsize=10)
    axes.set_xlabel("env steps")
    axes.set_ylabel(ylabel, fontsize=9)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})  # no timestamp in the file
    plt.close(figure)
    return write_atomic(path, buffer.getvalue())
