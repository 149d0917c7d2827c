"""The GPU verification (scripts/verify-gpu-prepare.sh here, scripts/verify-gpu.sh there) end to
end on the CPU at a tiny size (VERIFY_GPU_SCALE=tiny): the bundle made from fixture repositories,
the timing runs, the window fit, the trained reference and stand-in, the full-evidence estimate.
The same code path as on the GPU machine, except the wheels (this machine has the verify extra;
VERIFY_GPU_WHEELS=0) and the jax compatibility layer, which jax 0.9 does not need
(tests/test_jax_compat.py forces it through Brax's trainer). Marked `training`: it pays the cold
XLA compilations of three trainers' shapes.
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


def _environment(tmp_path: Path, **env: str) -> dict:
    paths = make_upstreams(tmp_path / "up")
    bin_dir = tmp_path / "bin"  # python3 as this interpreter, whatever else is on PATH
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    return dict(os.environ, PYTHONPATH=str(ROOT), BRAX_REPO=str(paths["brax"]),
                PLAYGROUND_REPO=str(paths["playground"]), SLM_REPO=str(paths["slm"]), BRAX_REF="HEAD",
                PLAYGROUND_REF="HEAD", SLM_REF="HEAD", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env)


def _script(name: str, args: list[str], environment: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / name), *args], capture_output=True, text=True,
                          env=environment, timeout=3600)


def test_an_unknown_scale_and_a_missing_bundle_are_one_error_each(tmp_path):
    environment = dict(os.environ, VERIFY_GPU_BUNDLE=str(tmp_path / "nothing"))
    done = _script("verify-gpu.sh", [str(tmp_path / "out")], dict(environment, VERIFY_GPU_SCALE="huge"))
    assert done.returncode == 2 and done.stderr.strip() == "error: VERIFY_GPU_SCALE must be full or tiny, got huge"
    done = _script("verify-gpu.sh", [str(tmp_path / "out")], environment)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: no bundle at {tmp_path / 'nothing'}: run scripts/verify-gpu-prepare.sh "
                                   "first (where the repositories are)")


def test_the_bundle_holds_both_extractions_and_the_written_variant(tmp_path):
    environment = _environment(tmp_path, VERIFY_GPU_WHEELS="0", VERIFY_GPU_ENV="CartpoleBalance",
                               VERIFY_GPU_FAILING="CartpoleBalance CheetahRun", SLM_VARIANT="ppo_fx")
    done = _script("verify-gpu-prepare.sh", [str(tmp_path / "bundle")], environment)
    assert done.returncode == 0, done.stderr[-3000:]
    bundle = tmp_path / "bundle"
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["env"] == "CartpoleBalance" and meta["failing_envs"] == ["CartpoleBalance", "CheetahRun"]
    from brax_diff.verify.inputs import load_extraction

    brax, slm = load_extraction(bundle / "brax.json", "brax"), load_extraction(bundle / "slm.json", "slm")
    fixed = load_extraction(bundle / "spec_fixes.json", "slm")
    assert brax.scope["env"] == "CartpoleBalance" and slm.scope["variant"] == "ppo_fx"
    # the written variant moved what the spec can express to Brax's values
    assert fixed.value("discount") == brax.value("discount") and slm.value("discount") != brax.value("discount")


@pytest.mark.training
@pytest.mark.install
@pytest.mark.skipif(training_stack_missing() is not None, reason="needs the verify extra (torch, jax, brax)")
def test_the_gpu_run_measures_fits_trains_and_costs_at_a_tiny_size_on_the_cpu(tmp_path):
    environment = _environment(tmp_path, VERIFY_GPU_WHEELS="0", VERIFY_GPU_ENV="CartpoleBalance",
                               SLM_VARIANT="ppo_fx", VERIFY_GPU_BUNDLE=str(tmp_path / "bundle"),
                               VERIFY_GPU_SCALE="tiny", VERIFY_GPU_DEADLINE="3000",
                               VERIFY_GPU_CACHE=str(tmp_path / "cache"),
                               VERIFY_GPU_SITE=str(tmp_path / "site"))
    done = _script("verify-gpu-prepare.sh", [str(tmp_path / "bundle")], environment)
    assert done.returncode == 0, done.stderr[-3000:]
    # The wheels path as on the GPU machine: the trainer's pure wheels (this interpreter's versions) in
    # the bundle, installed by the script into a folder of its own that comes first on the path.
    import importlib.metadata

    pins = [f"{name}=={importlib.metadata.version(name)}" for name in ("brax", "playground")]
    fetched = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                              "-d", str(tmp_path / "bundle" / "wheels"), *pins], capture_output=True, text=True)
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    done = _script("verify-gpu.sh", [str(tmp_path / "out")], environment)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "brax" / "training" / "agents" / "ppo" / "train.py").is_file()
    assert (tmp_path / "site" / "mujoco_playground" / "__init__.py").is_file()
    assert f'"{tmp_path / "site"}' in done.stdout  # the trainers ran from the carried wheels (below)
    lines = done.stdout.splitlines()
    # the two arms the window trains first, SLM-Lab's baseline after the runs
    assert [line.split(":")[0].split(" in ")[0] for line in lines if line.startswith(("measured ", "ran "))] == [
        "measured reference", "measured stand_in", "ran 2 run(s)", "measured baseline"]
    window = json.loads((tmp_path / "out" / "window.json").read_text())
    assert window["complete"] is True and window["physics_impl"] == "jax"
    assert window["bundle"]["commits"].keys() == {"brax", "playground", "slm"}
    rates = window["rates"]
    assert {arm: rates[arm]["num_envs"] for arm in rates} == {"reference": 4, "stand_in": 4, "baseline": 4}
    assert all(rates[arm]["update_seconds"] > 0 and rates[arm]["eval_seconds"] > 0 for arm in rates)
    fit = window["fit"]
    assert fit["arms"] == ["reference", "stand_in"] and fit["seeds"] == 1 and fit["evals"] == 1
    # Brax's own budget (--budget 1 in a tiny run): one update of both arms
    assert fit["budget"] == rates["stand_in"]["update_env_steps"] == rates["reference"]["update_env_steps"]
    full = {row["arm"]: row for row in window["full_evidence"]}
    assert set(full) == {"baseline", "spec_fixes", "all_fixes", "reference", "all"}
    assert full["baseline"]["basis"] == "measured" and full["reference"]["basis"] == "measured"
    assert full["all"]["minutes_at_20_seeds"] == pytest.approx(2 * full["all"]["minutes_at_10_seeds"], abs=0.11)
    assert full["all"]["minutes_at_10_seeds"] == pytest.approx(sum(full[a]["minutes_at_10_seeds"] for a in full
                                                                   if a != "all"), abs=0.25)
    result = json.loads((tmp_path / "out" / "verify.json").read_text())
    assert sorted(run["arm"] for run in result["runs"]) == ["reference", "stand_in"]
    assert all(run["status"] == "ok" for run in result["runs"]), [r["error"] for r in result["runs"]]
    assert result["platform"]["accelerator"] == "none"
    assert (tmp_path / "cache").is_dir() and not (tmp_path / "out" / "cache").exists()  # results only come back
