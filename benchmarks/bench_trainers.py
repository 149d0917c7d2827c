"""Env steps/s of both trainers on one environment with the same settings, and brax-diff's
overhead around Brax's trainer.

    python benchmarks/bench_trainers.py [--env CartpoleBalance] [--num-envs 256] [--budget 153600]

1. The PyTorch PPO (SLM-Lab semantics) through ``ppo_torch.train``, after one tiny warm-up
   run that compiles the environment; steps/s over the timed run.
2. Brax's ``ppo.train`` called directly with the same settings (a first call warms the
   persistent XLA cache and is reported separately), then the same run through brax-diff's
   reference path (``Runner._run_brax``, what ``verify`` does); the difference in wall time
   is brax-diff's overhead.

Prints one JSON object with the machine, the settings and the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def machine() -> dict:
    import jax
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "jax": jax.__version__, "jax_backend": jax.default_backend(), "cuda": torch.cuda.is_available()}


def canonical(num_envs: int) -> dict:
    """One setting set both trainers express: Playground's DM Control batch shape scaled to a CPU."""
    return {"num_envs": num_envs, "unroll_length": 30, "unrolls_per_update": 1, "epochs_per_update": 4,
            "minibatches_per_epoch": 4, "discount": 0.995, "gae_lambda": 0.95, "reward_scale": 10.0,
            "obs_normalization": True, "learning_rate": 1e-3, "entropy_coef": 0.01, "clip_epsilon": 0.2,
            "value_loss_coef": 0.25, "max_grad_norm": 1.0, "policy_hidden_layers": [64, 64],
            "value_hidden_layers": [256, 256, 256], "activation": "silu", "action_distribution": "tanh_normal",
            "kernel_init": "lecun_uniform", "lr_schedule": "constant", "bootstrap_on_timeout": False}


def bench_torch(env_name: str, values: dict, budget: int, threads: int) -> dict:
    import torch

    from brax_diff.verify import ppo_torch
    from brax_diff.verify.envs import PlaygroundVecEnv
    from brax_diff.verify.settings import settings_from_facts

    torch.set_num_threads(threads)
    settings, _ = settings_from_facts(values)
    started = time.perf_counter()
    env = PlaygroundVecEnv(env_name, settings.num_envs)
    ppo_torch.train(env, settings, settings.transitions_per_update, 0)  # compiles reset and step
    warmup = time.perf_counter() - started
    log = ppo_torch.train(env, settings, budget, 1)
    return {"warmup_s": round(warmup, 1), "env_steps": log.env_steps, "train_s": round(log.seconds, 1),
            "steps_per_s": round(log.env_steps / log.seconds), "torch_threads": threads}


def bench_brax(env_name: str, values: dict, budget: int, cache: Path) -> dict:
    from brax.training.agents.ppo import train as ppo

    from brax_diff.verify import brax_reference
    from brax_diff.verify.cache import RunCache
    from brax_diff.verify.plan import BRAX, RunSpec
    from brax_diff.verify.runner import Runner, _Progress
    from brax_diff.verify.settings import brax_train_settings

    settings = brax_train_settings(values)

    def direct(seed: int) -> tuple[float, list[tuple[float, int]]]:
        evals: list[tuple[float, int]] = []
        env, kwargs = brax_reference.train_kwargs(settings, env_name, budget, seed,
                                                  lambda steps, _: evals.append((time.perf_counter(), steps)))
        started = time.perf_counter()
        ppo.train(environment=env, **kwargs)
        return time.perf_counter() - started, [(t - started, s) for t, s in evals]

    cold, _ = direct(0)
    warm, evals = direct(1)
    spec = RunSpec(BRAX, "reference", env_name, 1, budget, settings)
    plan = type("OnePlan", (), {"runs": [spec]})()
    runner = Runner(RunCache(cache / "bench-runs"), "cpu", _Progress(plan, enabled=False))
    started = time.perf_counter()
    result = runner.run(spec)
    through = time.perf_counter() - started
    (t0, s0), (t1, s1) = evals[1], evals[-1]  # after the first training epoch: compilation is behind
    return {"cold_first_call_s": round(cold, 1), "direct_s": round(warm, 1), "brax_diff_s": round(through, 1),
            "overhead_s": round(through - warm, 1), "overhead_pct": round(100 * (through - warm) / warm, 1),
            "env_steps": s1, "steps_per_s_after_compile": round((s1 - s0) / (t1 - t0)) if t1 > t0 else None,
            "status": result.status, "error": result.error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--budget", type=int, default=256 * 30 * 20)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (verify uses 1)")
    parser.add_argument("--cache", type=Path, default=None, help="XLA cache dir (default: a fresh tmp dir)")
    parser.add_argument("--skip-brax", action="store_true")
    args = parser.parse_args()

    from brax_diff.verify.envs import enable_compilation_cache

    cache = args.cache or Path(tempfile.mkdtemp(prefix="bench-trainers-"))
    enable_compilation_cache(cache / "xla")
    values = canonical(args.num_envs)
    report = {"machine": machine(), "env": args.env, "budget": args.budget, "settings": values,
              "torch_ppo": bench_torch(args.env, values, args.budget, args.threads)}
    print(json.dumps(report["torch_ppo"]), file=sys.stderr, flush=True)
    if not args.skip_brax:
        report["brax_ppo"] = bench_brax(args.env, values, args.budget, cache)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
