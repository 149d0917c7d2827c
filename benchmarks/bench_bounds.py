"""How long the bounded-input cases take: inputs built to be slow (alias bombs, 20,000 spec keys,
computations the engine stops at a limit, template limits). The tests check that each gives the
right answer or the right limit error; how fast it does so is measured here, never asserted in a
test (a loaded machine would fail it). Each case runs ``--repeats`` times; the median is printed.

    python benchmarks/bench_bounds.py [--repeats 3]

Run it from a checkout with brax-diff installed (``pip install -e .``); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def alias_bomb(levels: int, width: int = 10) -> str:
    lines = ["_a0: &a0 {" + ", ".join(f"k{i}: {i}" for i in range(width)) + "}"]
    for level in range(1, levels + 1):
        lines.append(f"_a{level}: &a{level} {{" + ", ".join(f"k{i}: *a{level - 1}" for i in range(width)) + "}")
    return "\n".join(lines) + f"\nbomb:\n  agent:\n    <<: *a{levels}\n    own: 1\n"


def spec_cases() -> dict:
    from brax_diff.extractors.slm.spec import SpecFile
    from brax_diff.safety.limits import LimitExceeded

    def refused(text: str) -> None:
        try:
            SpecFile(text, "bomb.yaml", {}).resolve("bomb")
        except LimitExceeded:
            return
        raise AssertionError("not refused")

    keys = "v:\n  agent:\n    extra:\n" + "".join(f"      key{i}: {i}\n" for i in range(20_000))
    return {"spec: 111,111 aliased values resolve": lambda: SpecFile(alias_bomb(4), "b.yaml", {}).resolve("bomb"),
            "spec: an alias bomb past the limit is refused": lambda: refused(alias_bomb(6)),
            "spec: 20,000 plain keys resolve": lambda: SpecFile(keys, "k.yaml", {}).resolve("v")}


def engine_cases() -> dict:
    from memsnapshot import engine_call
    from test_bounded import ENGINE_CASES

    return {f"engine: {name}": (lambda source=source: engine_call(source)) for name, (source, _) in ENGINE_CASES.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cases = {**spec_cases(), **engine_cases()}
    print(f"| case | median seconds ({args.repeats} runs) |\n| --- | ---: |")
    for name, run in cases.items():
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
        print(f"| {name} | {statistics.median(times):.3f} |")


if __name__ == "__main__":
    main()
