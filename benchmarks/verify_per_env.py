"""Every comparison of a verify.json's list of conclusions, pooled and per environment, as a table.

    python benchmarks/verify_per_env.py [VERIFY_JSON]   # default: reports/phase5-seed/verify/verify.json

Pooling environments hides effects of opposite sign (spec_fixes - reference is -13 on
CartpoleBalance and +59 on CartpoleSwingup in the committed evidence), and holding each family
at 5 % lets the list of conclusions run above it. `brax-diff verify` now decides every gap and
stand_in comparison pooled and on each environment, with the stand-in's equivalence and paired
difference, under one Holm-Bonferroni at 5 % (brax_diff/verify/runner.py::judge); this prints
those verdicts as recorded (a verify.json from before that: restate it first with
benchmarks/verify_recompute.py).
"""

from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    data = json.load(open(path, encoding="utf-8"))
    rows = [v for v in data["verdicts"] if v.get("family") in ("gap", "stand_in")]
    tests = max((v.get("tests_in_family", 0) for v in rows), default=0)
    print(f"{len(rows)} comparisons; one Holm-Bonferroni at 5 % over the {tests} tests of the list of conclusions")
    print("| comparison | environment | seeds | mean | interval | level | p | verdict |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | --- |")
    for v in sorted(rows, key=lambda v: (v["name"].split("@")[0], v.get("env", ""))):
        ci = f"[{v['ci'][0]:+.1f}, {v['ci'][1]:+.1f}]" if v.get("ci") else "unbounded"
        print(f"| {v['arm']} - {v['vs']} | {v.get('env', 'pooled')} | {v.get('seeds', 0)} | {v['delta']:+.1f} | {ci} | "
              f"{1 - v['ci_level']:.3g} | {v['p']:.3g} | {v['verdict']} |")
    same = data.get("equivalence")
    if same:
        print(f"stand-in equivalent to the reference: {same['equivalent']} (p {same.get('p')}, level {same.get('level')})")
        for env, test in same["envs"].items():
            paired = test.get("paired_difference") or {}
            print(f"  {env}: margin ±{test['margin']:.3g}, paired {paired.get('difference')} {paired.get('ci')} "
                  f"p {paired.get('p')} at level {paired.get('level')}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reports/phase5-seed/verify/verify.json")
