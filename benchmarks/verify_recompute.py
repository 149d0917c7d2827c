"""Restate a verify.json's statistics from its own runs (no run trains again).

    python benchmarks/verify_recompute.py VERIFY_JSON [...]   # rewrites each file in place

For committed evidence trained under older rules (reports/phase5-seed/verify*/verify.json):
verdicts, gap and equivalence are recomputed by `brax_diff.verify.runner.recompute`; the plan,
runs, platform, plots and throughput stay as recorded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from brax_diff.facts.model import dumps
from brax_diff.verify.runner import recompute


def main(paths: list[str]) -> None:
    for path in map(Path, paths):
        path.write_text(dumps(recompute(json.loads(path.read_text(encoding="utf-8")))), encoding="utf-8")
        print(f"restated {path}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["reports/phase5-seed/verify/verify.json"])
