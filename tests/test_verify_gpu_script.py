"""scripts/verify-gpu.sh end to end on the CPU at a tiny size (VERIFY_GPU_SCALE=tiny): the same
steps as on a GPU (plan and estimate, then `brax-diff verify` with the gpu preset scaled down,
then the throughput summary), training for real on fixture repositories. Marked `training`:
it pays cold XLA compilations (the environment and evaluator per PyTorch run, Brax's trainer
once): measured 164 s wall, 200 CPU-s, on an idle 2-core AMD EPYC (2026-12-03); it runs in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from upstream_repos import make_upstreams

from brax_diff.verify import training_stack_missing

ROOT = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    paths = make_upstreams(tmp_path / "up")
    environment = dict(os.environ, PYTHONPATH=str(ROOT), BRAX_REPO=str(paths["brax"]),
                       PLAYGROUND_REPO=str(paths["playground"]), SLM_REPO=str(paths["slm"]), BRAX_REF="HEAD",
                       PLAYGROUND_REF="HEAD", SLM_REF="HEAD", CACHE=str(tmp_path / "cache"), **env)
    bin_dir = tmp_path / "bin"  # `brax-diff` as this checkout's CLI, whatever is installed
    bin_dir.mkdir()
    (bin_dir / "brax-diff").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m brax_diff "$@"\n')
    (bin_dir / "brax-diff").chmod(0o755)
    environment["PATH"] = f"{bin_dir}{os.pathsep}{environment['PATH']}"
    return subprocess.run(["bash", str(ROOT / "scripts" / "verify-gpu.sh"), str(tmp_path / "out")],
                          capture_output=True, text=True, env=environment, timeout=3600)


def test_an_unknown_scale_is_one_error(tmp_path):
    done = _run(tmp_path, VERIFY_GPU_SCALE="huge")
    assert done.returncode == 2 and done.stderr.strip() == "error: VERIFY_GPU_SCALE must be full or tiny, got huge"


@pytest.mark.training
@pytest.mark.skipif(training_stack_missing() is not None, reason="needs the verify extra (torch, jax, brax)")
def test_the_gpu_script_runs_end_to_end_at_a_tiny_size_on_the_cpu(tmp_path):
    done = _run(tmp_path, VERIFY_GPU_SCALE="tiny", VERIFY_GPU_ENVS="CartpoleBalance", SLM_VARIANT="ppo_fx")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "tiny CPU run of the GPU verification (VERIFY_GPU_SCALE=tiny): same steps, scaled presets" in lines
    plan_line = next(line for line in lines if line.startswith("verify plan:"))
    assert "1 env(s) x 1 seed(s)" in plan_line
    estimate = next(line for line in lines if line.startswith("estimated wall time"))
    assert "extrapolated until a GPU run calibrates them" in estimate
    result = json.loads((tmp_path / "out" / "CartpoleBalance" / "verify.json").read_text())
    arms = {run["arm"] for run in result["runs"]}
    assert {"baseline", "all_fixes", "spec_fixes", "reference"} <= arms
    assert all(run["status"] == "ok" for run in result["runs"]), [r["error"] for r in result["runs"]]
    assert result["plan"]["scoring"]["eval_envs"] == 2 and result["platform"]["accelerator"] == "none"
    summary = next(line for line in lines if line.startswith("CartpoleBalance {"))
    assert '"torch-ppo"' in summary and '"brax-ppo"' in summary


def test_a_gpu_plan_costed_from_cpu_constants_says_it_is_extrapolated():
    from test_verify_plan import pair

    from brax_diff.verify import build_plan
    from brax_diff.verify.costs import estimate, load_throughput

    brax, slm = pair()
    plan = build_plan(brax, slm, envs=["CartpoleBalance"], seeds=1, budget=1600, evals=1, eval_envs=4)
    throughput = load_throughput()
    assert throughput.device == "cpu"
    on_gpu = estimate(plan, throughput, device="gpu")
    assert on_gpu.extrapolated_to == "gpu" and on_gpu.to_json()["extrapolated_to"] == "gpu"
    assert on_gpu.render().endswith("; for a GPU these are extrapolated until a GPU run calibrates them "
                                    "(benchmarks/bench_trainers.py --calibrate there, then verify --throughput FILE)")
    assert "extrapolated" not in estimate(plan, throughput).render()
    assert "extrapolated" not in estimate(plan, throughput, device="cpu").render()
