"""A verify.json made by the real runner code (plan, verdicts, gap) from hand-chosen scores:
what `report --verification` reads, without training anything."""

from __future__ import annotations

import json
from pathlib import Path

from test_verify_plan import pair

from brax_diff.facts.model import dumps
from brax_diff.verify import build_plan
from brax_diff.verify.cache import OK, RunResult
from brax_diff.verify.runner import VerifyResult, gap_summary, verdicts

ENV = "CartpoleBalance"
# per arm, the score of seeds 0..9 (the paired test needs at least 7 seeds for a verdict in a
# family of three): baseline far below Brax's trainer, the fixes closing most of it
SCORES = {"baseline": [210.0, 230.0, 190.0, 250.0, 220.0] * 2, "all_fixes": [640.0, 700.0, 610.0, 680.0, 660.0] * 2,
          "reference": [760.0, 800.0, 720.0, 780.0, 790.0] * 2}


def synthetic_result() -> VerifyResult:
    brax, slm = pair()
    plan = build_plan(brax, slm, envs=[ENV], seeds=10, budget=1600, keys=["clip_epsilon", "learning_rate"],
                      evals=2, eval_envs=4)
    results = []
    for spec in plan.runs:
        if spec.arm in SCORES:
            score = SCORES[spec.arm][spec.seed]
        elif spec.arm == "loo:learning_rate":  # undoing this fix loses almost everything
            score = SCORES["baseline"][spec.seed] + 20.0
        else:  # undoing clip_epsilon changes nothing that 10 seeds can see
            score = SCORES["all_fixes"][(spec.seed + 2) % 10]
        results.append(RunResult(spec, OK, spec.scoring.checkpoints, [0.0, score / 2, score], score, spec.budget,
                                 10.0, score_kind=spec.scoring.kind))
    decided = verdicts(plan, results)
    result = VerifyResult(plan, results, decided, gap_summary(plan, results, decided))
    result.plots = {f"gap:{ENV}": f"plots/{ENV}-gap.png", "loo:learning_rate": f"plots/{ENV}-loo-learning_rate.png",
                    "loo:clip_epsilon": f"plots/{ENV}-loo-clip_epsilon.png"}
    return result


def write_synthetic(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "verify.json"
    path.write_text(dumps(synthetic_result().to_json()), encoding="utf-8")
    return path


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
