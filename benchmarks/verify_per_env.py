"""Per-environment paired differences of a verify.json's arms, with one Holm over all of them.

    python benchmarks/verify_per_env.py [VERIFY_JSON]   # default: reports/phase5-seed/verify/verify.json

Pooling environments hides effects of opposite sign (spec_fixes - reference is -13 on
CartpoleBalance and +59 on CartpoleSwingup in the committed evidence), and holding each family
at 5 % lets the list of conclusions run above it. This prints every comparison the README's
Verification paragraph states, per environment: the mean paired difference, its 95 % interval
(the exact sign-flip test inverted) and p, then which survive one Holm-Bonferroni over all of
them at 5 %.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from brax_diff.verify.stats import holm_levels, sign_flip_interval, sign_flip_p

PAIRS = (("baseline", "reference"), ("baseline", "stand_in"), ("spec_fixes", "reference"),
         ("spec_fixes", "baseline"), ("all_fixes", "reference"), ("all_fixes", "baseline"))
ALPHA = 0.05


def main(path: str) -> None:
    data = json.load(open(path, encoding="utf-8"))
    runs = {(r["arm"], r["env"], r["seed"]): r["score"] for r in data["runs"] if r["status"] == "ok"}
    envs = sorted({env for _, env, _ in runs})
    rows = []
    for x, y in PAIRS:
        for env in envs:
            seeds = sorted(s for a, e, s in runs if a == x and e == env and (y, env, s) in runs)
            if not seeds:
                continue
            diffs = np.array([runs[(x, env, s)] - runs[(y, env, s)] for s in seeds])
            rows.append((f"{x} - {y}", env, len(seeds), float(diffs.mean()), sign_flip_interval(diffs, ALPHA),
                         sign_flip_p(diffs)))
    levels = holm_levels([r[-1] for r in rows], ALPHA)
    print(f"{len(rows)} comparisons, one Holm-Bonferroni at {ALPHA:.0%} over all of them")
    print("| comparison | environment | seeds | mean | 95% interval | p | Holm level | holds |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | --- |")
    for (name, env, n, mean, ci, p), level in zip(rows, levels):
        interval = f"[{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else "unbounded"
        print(f"| {name} | {env} | {n} | {mean:+.1f} | {interval} | {p:.3g} | {level:.3g} | "
              f"{'yes' if p <= level else 'no'} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reports/phase5-seed/verify/verify.json")
