"""Throughput of both trainers, and the constants `verify --plan` estimates time with.

    python benchmarks/bench_trainers.py [--env CartpoleBalance] [--num-envs 32]
    python benchmarks/bench_trainers.py --seeds 5 [--budget 30720] [--repeats 3]
    python benchmarks/bench_trainers.py --calibrate [--write brax_diff/data/throughput.toml]

With ``--seeds N``: the PyTorch trainer at the CPU preset's shapes (SLM-Lab's seed-era
settings, 32 envs, 4 epochs, 32 evaluation episodes), 1 seed and N seeds, each trained
sequentially (one run per seed, as ``verify`` ran them before seed batching) and batched (one
:mod:`brax_diff.verify.ppo_batched` run of all of them): env steps/s of all seeds together,
wall and CPU time (``time.process_time``), a new evaluator per run as ``verify`` made one
(and, for N seeds, sequential runs sharing one compiled evaluator: what batching the training
loop alone gains), and beside them Brax's ``ppo.train`` at the preset's Brax shapes, one seed a
call as ``verify`` calls it (``vs_brax_per_cpu_s``: each case's env steps per CPU-second, all its
seeds together, over Brax's; ``--skip-brax`` leaves it out), and Brax's trainer at the batched
case's env count, N x num_envs envs (``batched_vs_brax_at_equal_envs_per_cpu_s``: the comparison
at equal env counts); the budget is whole updates of both
trainers; compilation excluded (a warm-up of every shape first); medians over ``--repeats``, with the
load average before and after, because a shared machine's wall time is noisy.

Without ``--calibrate``: one run of each trainer in this process with the seed-era
shapes of the CPU preset (SLM-Lab's baseline settings for the PyTorch PPO, Brax's for
``ppo.train``, both scaled to ``--num-envs``), after a warm-up that compiles; prints env
steps/s of each, evaluation included, as JSON.

With ``--calibrate``: times the pieces of the cost model in ``brax_diff/verify/costs.py``
(PyTorch collection at two env counts, a gradient step at two minibatch sizes, an
evaluation at two episode counts, Brax's trainer at three shapes, cold compilations) and
writes the TOML that ``verify --throughput`` reads. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import math
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


# The seed-era values (Brax 2b109a0 / Playground 5a1eaa0 / SLM-Lab 6eb08fe9^, DM Control)
# as the extractors give them, so the benchmark needs no repository.
SLM_SEED = {"unroll_length": 30, "unrolls_per_update": 1, "epochs_per_update": 16, "minibatches_per_epoch": 30,
            "discount": 0.995, "gae_lambda": 0.95, "reward_scale": 1.0, "learning_rate": 1e-3,
            "lr_schedule": "linear_decay", "lr_final_factor": 0.033, "lr_decay_steps": 100_000_000,
            "entropy_coef": 0.01, "clip_epsilon": 0.2, "value_loss_coef": 0.5, "max_grad_norm": 1.0,
            "policy_hidden_layers": [64, 64], "value_hidden_layers": [256, 256, 256], "activation": "silu",
            "action_distribution": "normal", "kernel_init": "orthogonal", "adam_eps": 1e-5,
            "value_target_normalization": True, "truncation": "bootstrap_next_obs_across_reset"}
BRAX_SEED = {"unroll_length": 30, "unrolls_per_update": 16, "epochs_per_update": 16, "minibatches_per_epoch": 32,
             "discount": 0.995, "gae_lambda": 0.95, "reward_scale": 10.0, "learning_rate": 1e-3,
             "entropy_coef": 0.01, "clip_epsilon": 0.3, "value_loss_coef": 0.25, "max_grad_norm": None,
             "obs_normalization": True, "advantage_normalization": True,
             "truncation": "mask_bootstrap_last_state",
             "policy_hidden_layers": [32, 32, 32, 32], "value_hidden_layers": [256, 256, 256, 256, 256],
             "activation": "swish", "action_distribution": "tanh_normal", "kernel_init": "lecun_uniform"}


def torch_settings(values: dict, num_envs: int):
    from brax_diff.verify.settings import settings_from_facts

    return settings_from_facts(dict(values, num_envs=num_envs))[0]


def brax_settings(values: dict, num_envs: int) -> dict:
    from brax_diff.verify.settings import brax_train_settings

    return brax_train_settings(dict(values, num_envs=num_envs))


def scoring(budget: int, evals: int = 5, eval_envs: int = 16):
    from brax_diff.verify.plan import Scoring

    return Scoring(evals, budget // evals, eval_envs, False)


def bench_torch(env_name: str, num_envs: int, budget: int) -> dict:
    """One PyTorch run of SLM-Lab's seed-era settings, evaluation included."""
    import torch

    from brax_diff.verify import ppo_torch
    from brax_diff.verify.envs import PlaygroundVecEnv
    from brax_diff.verify.evaluate import TorchEvaluator

    torch.set_num_threads(1)
    settings = torch_settings(SLM_SEED, num_envs)
    started = time.perf_counter()
    env = PlaygroundVecEnv(env_name, settings.num_envs)
    score = scoring(budget)
    evaluator = TorchEvaluator(env_name, settings, 0, score.eval_envs, False)
    ppo_torch.train(env, settings, settings.transitions_per_update, 0, evaluate=evaluator)  # compiles
    warmup = time.perf_counter() - started
    evaluator = TorchEvaluator(env_name, settings, 1, score.eval_envs, False)
    log = ppo_torch.train(env, settings, budget, 1, evaluate=evaluator, eval_every=score.eval_every)
    return {"warmup_s": round(warmup, 1), "env_steps": log.env_steps, "train_s": round(log.seconds, 1),
            "env_steps_per_s": round(log.env_steps / log.seconds), "scores": [round(s, 1) for s in log.scores]}


def bench_brax(env_name: str, num_envs: int, budget: int) -> dict:
    """Brax's trainer with the seed-era Brax settings: a first call compiles, the second is timed."""
    from brax_diff.verify import brax_reference

    settings = brax_settings(BRAX_SEED, num_envs)
    first = time.perf_counter()
    brax_reference.train(settings, env_name, budget, 0, scoring(budget))
    cold = time.perf_counter() - first
    steps, scores, seconds = brax_reference.train(settings, env_name, budget, 1, scoring(budget))
    return {"first_call_s": round(cold, 1), "env_steps": steps[-1], "train_s": round(seconds, 1),
            "env_steps_per_s": round(steps[-1] / seconds), "scores": [round(s, 1) for s in scores]}


# -- seeds: sequential vs batched -------------------------------------------------------
def cpu_preset_settings(num_envs: int = 32):
    """What `verify --preset cpu` trains the baseline with: SLM-Lab's seed-era settings, scaled."""
    return torch_settings(SLM_SEED, num_envs).moved(epochs_per_update=4)


def _one_seeds_run(env_name: str, settings, budget: int, seeds: list[int], batched: bool, envs: dict,
                   shared_evaluator: bool = False) -> dict:
    """Train ``seeds`` (one batched run, or one run per seed) as the runner does; wall and CPU
    seconds. ``shared_evaluator``: the sequential runs share one compiled evaluator instead of
    tracing one each (isolates what batching the training loop itself gains)."""
    from brax_diff.verify import ppo_batched, ppo_torch
    from brax_diff.verify.envs import PlaygroundVecEnv
    from brax_diff.verify.evaluate import TorchEvaluator, policy_params

    score = scoring(budget, 2, 32)
    wall, cpu = time.perf_counter(), time.process_time()
    scores = []
    if batched:
        key = settings.num_envs * len(seeds)
        env = envs.setdefault(key, PlaygroundVecEnv(env_name, key))
        evaluator = TorchEvaluator(env_name, settings, seeds, score.eval_envs, False)
        logs, failures = ppo_batched.train(env, settings, budget, seeds,
                                           evaluate=lambda i, params: evaluator.score(params, i),
                                           eval_every=score.eval_every)
        assert not failures, failures
        scores = [log.scores[-1] for log in logs]
    else:
        env = envs.setdefault(settings.num_envs, PlaygroundVecEnv(env_name, settings.num_envs))
        shared = TorchEvaluator(env_name, settings, seeds, score.eval_envs, False) if shared_evaluator else None
        for i, seed in enumerate(seeds):
            if shared is None:
                evaluator = TorchEvaluator(env_name, settings, seed, score.eval_envs, False)
            else:
                evaluator = lambda agent, i=i: shared.score(policy_params(agent), i)  # noqa: E731
            log = ppo_torch.train(env, settings, budget, seed, evaluate=evaluator, eval_every=score.eval_every)
            scores.append(log.scores[-1])
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
            "scores": [round(s, 2) for s in scores]}


def _brax_run(env_name: str, num_envs: int, budget: int, seed: int) -> dict:
    """One call of Brax's trainer at the cpu preset's Brax shapes (its seed-era settings, 4
    epochs) and the same scoring as the PyTorch cases: wall and CPU seconds, as verify pays them
    (each call traces its programs again; compiled ones come from the XLA cache)."""
    from brax_diff.verify import brax_reference

    settings = brax_settings(dict(BRAX_SEED, epochs_per_update=4), num_envs)
    wall, cpu = time.perf_counter(), time.process_time()
    _, scores, _ = brax_reference.train(settings, env_name, budget, seed, scoring(budget, 2, 32))
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
            "scores": [round(scores[-1], 2)]}


def bench_seeds(env_name: str, num_envs: int, budget: int, seeds: int, repeats: int, brax: bool = True) -> dict:
    import statistics

    import torch

    torch.set_num_threads(1)
    settings = cpu_preset_settings(num_envs)
    update = settings.transitions_per_update
    brax_update = num_envs * BRAX_SEED["unroll_length"] * BRAX_SEED["unrolls_per_update"]
    # each of the 2 checkpoints after step 0 on whole updates of both trainers
    whole = 2 * (update * brax_update // math.gcd(update, brax_update))
    budget = max(whole, budget // whole * whole)
    envs: dict = {}
    # warm-up: both env shapes (num_envs, and seeds x num_envs) and the evaluator compile
    _one_seeds_run(env_name, settings, 2 * update, [0], False, envs)
    _one_seeds_run(env_name, settings, 2 * update, list(range(seeds)), True, envs)
    if brax:
        _brax_run(env_name, num_envs, 2 * brax_update, 0)  # compiles Brax's programs
    out: dict = {"settings": "SLM-Lab seed-era, cpu preset shapes (epochs_per_update=4)", "num_envs": num_envs,
                 "budget_per_seed": budget, "evaluations": "3 x 32 episodes per seed", "repeats": repeats,
                 "load_before": os.getloadavg(), "cases": {}}
    cases = [(count, batched, False) for count in sorted({1, seeds}) for batched in (False, True)]
    if seeds > 1:
        cases.append((seeds, False, True))
    for count, batched, shared in cases:
        name = (f"{count}_seed{'s' if count > 1 else ''}_{'batched' if batched else 'sequential'}"
                f"{'_shared_evaluator' if shared else ''}")
        runs = [_one_seeds_run(env_name, settings, budget, list(range(count)), batched, envs, shared)
                for _ in range(repeats)]
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        steps = budget * count
        out["cases"][name] = {"env_steps": steps, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                              "env_steps_per_s": round(steps / wall), "env_steps_per_cpu_s": round(steps / cpu),
                              "wall_s_all": [round(r["wall_s"], 2) for r in runs], "scores": runs[0]["scores"]}
        print(json.dumps({name: out["cases"][name]}), file=sys.stderr, flush=True)
    if brax:  # Brax's trainer, one seed a call, side by side: the rate the PyTorch arms are held to
        runs = [_brax_run(env_name, num_envs, budget, 1) for _ in range(repeats)]
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        out["cases"]["brax_1_seed"] = {"env_steps": budget, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                                       "env_steps_per_s": round(budget / wall),
                                       "env_steps_per_cpu_s": round(budget / cpu),
                                       "wall_s_all": [round(r["wall_s"], 2) for r in runs],
                                       "scores": runs[0]["scores"]}
        print(json.dumps({"brax_1_seed": out["cases"]["brax_1_seed"]}), file=sys.stderr, flush=True)
        brax_rate = out["cases"]["brax_1_seed"]["env_steps_per_cpu_s"]
        out["vs_brax_per_cpu_s"] = {name: round(case["env_steps_per_cpu_s"] / brax_rate, 2)
                                    for name, case in out["cases"].items() if name != "brax_1_seed"}
    if brax and seeds > 1:
        # Like with like: the batched seeds step seeds x num_envs envs at once, so Brax's trainer at
        # that many envs (one seed, as many env steps as all the seeds together) is the fair rate.
        wide = seeds * num_envs
        _brax_run(env_name, wide, 2 * brax_update * seeds, 0)  # compiles this shape
        runs = [_brax_run(env_name, wide, budget * seeds, 1) for _ in range(repeats)]
        cpu = statistics.median(r["cpu_s"] for r in runs)
        wall = statistics.median(r["wall_s"] for r in runs)
        name = f"brax_1_seed_{wide}_envs"
        out["cases"][name] = {"env_steps": budget * seeds, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                              "env_steps_per_s": round(budget * seeds / wall),
                              "env_steps_per_cpu_s": round(budget * seeds / cpu), "scores": runs[0]["scores"]}
        print(json.dumps({name: out["cases"][name]}), file=sys.stderr, flush=True)
        out["batched_vs_brax_at_equal_envs_per_cpu_s"] = round(
            out["cases"][f"{seeds}_seeds_batched"]["env_steps_per_cpu_s"] / out["cases"][name]["env_steps_per_cpu_s"], 2)
    if seeds > 1:
        many, one = f"{seeds}_seeds_batched", f"{seeds}_seeds_sequential"
        out["speedup_wall"] = round(out["cases"][one]["wall_s"] / out["cases"][many]["wall_s"], 2)
        out["speedup_cpu"] = round(out["cases"][one]["cpu_s"] / out["cases"][many]["cpu_s"], 2)
        shared = out["cases"][f"{one}_shared_evaluator"]
        out["speedup_cpu_vs_shared_evaluator"] = round(shared["cpu_s"] / out["cases"][many]["cpu_s"], 2)
    out["load_after"] = os.getloadavg()
    return out


# -- calibration -------------------------------------------------------------------------
def _timed(fn, repeat: int) -> float:
    fn()  # warm
    started = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - started) / repeat


def _line(x1: float, y1: float, x2: float, y2: float) -> tuple[float, float]:
    """Intercept and slope through two points, both kept >= 0."""
    slope = max(0.0, (y2 - y1) / (x2 - x1))
    return max(0.0, y1 - slope * x1), slope


def calibrate(env_name: str) -> dict:
    import torch

    from brax_diff.verify import brax_reference, ppo_torch
    from brax_diff.verify.costs import _mlp_parameters
    from brax_diff.verify.envs import PlaygroundVecEnv
    from brax_diff.verify.evaluate import TorchEvaluator

    torch.set_num_threads(1)
    out: dict = {"torch": {}, "brax": {}, "eval": {}}
    settings = torch_settings(SLM_SEED, 32)
    # cold: the first env (reset + step traced and compiled) and the first evaluation
    started = time.perf_counter()
    env = PlaygroundVecEnv(env_name, 32)
    agent = ppo_torch.PPO(settings, env.obs_size, env.action_size, 1.0)
    with torch.no_grad():
        env.step(agent.policy(agent.observe(env.reset(0))).sample()[1])
    TorchEvaluator(env_name, settings, 0, 16, False)(agent)
    cold = time.perf_counter() - started
    # collection: one env step of all envs, at two env counts
    per_step = {}
    for n in (32, 256):
        env = PlaygroundVecEnv(env_name, n)
        agent = ppo_torch.PPO(settings.moved(num_envs=n), env.obs_size, env.action_size, 1.0)
        obs = [agent.observe(env.reset(0))]

        def step(env=env, agent=agent, obs=obs):
            with torch.no_grad():
                dist = agent.policy(obs[0])
                _, action = dist.sample()
                next_obs, *_ = env.step(action)
                obs[0] = agent.observe(next_obs)

        per_step[n] = _timed(lambda: [step() for _ in range(50)], 3) / 50
    out["torch"]["collect_step_s"], per_env = _line(32, per_step[32], 256, per_step[256])
    out["torch"]["collect_env_step_s"] = per_env
    # a gradient step of both nets at two minibatch sizes
    obs_size, action_size = env.obs_size, env.action_size
    agent = ppo_torch.PPO(settings, obs_size, action_size, 1.0)
    parameters = (_mlp_parameters(obs_size, settings.policy_hidden_layers, 2 * action_size)
                  + _mlp_parameters(obs_size, settings.value_hidden_layers, 1))
    per_gradient_step = {}
    for size in (32, 1024):
        obs_batch = torch.randn(size, obs_size)
        raw = torch.randn(size, action_size)
        logp, adv, target = torch.zeros(size), torch.randn(size), torch.randn(size)

        def gradient_step():
            policy_loss = agent.policy_loss(obs_batch, raw, logp, adv)
            value_loss = agent.value_loss(agent.value(obs_batch).squeeze(-1), target, target)
            agent.step(agent.policy, agent.optimizers[0], policy_loss)
            agent.step(agent.value, agent.optimizers[1], value_loss)

        per_gradient_step[size] = _timed(lambda: [gradient_step() for _ in range(20)], 3) / 20
    fixed, per_sample = _line(32, per_gradient_step[32], 1024, per_gradient_step[1024])
    out["torch"]["gradient_step_s"] = fixed
    out["torch"]["sample_param_s"] = per_sample / parameters
    # evaluation at two episode counts (1000-step episodes)
    per_eval = {}
    for count in (16, 64):
        evaluator = TorchEvaluator(env_name, settings, 0, count, False)
        per_eval[count] = _timed(lambda: evaluator(agent), 2)
    run_s, per_episode = _line(16, per_eval[16], 64, per_eval[64])
    out["eval"]["run_s"], out["eval"]["env_step_s"] = run_s, per_episode / 1000
    out["torch"]["compile_s"] = round(max(0.0, cold - per_eval[16]), 1)
    # Brax's trainer: every call traces and loads its programs again (run_s); per env step it
    # collects and does epochs x parameters of SGD. Two budgets at 16 epochs give run_s and the
    # per-step cost; 4 epochs at the larger budget split that cost into collection and SGD.
    def brax_run(values: dict, budget: int) -> float:
        settings = brax_settings(values, 32)
        _, _, seconds = brax_reference.train(settings, env_name, budget, 0, scoring(budget, 1, 16))
        return seconds - per_eval[16] * 2  # its two evaluations

    update = 32 * 30 * 16
    started = time.perf_counter()
    brax_run(BRAX_SEED, update)
    cold = time.perf_counter() - started
    one = brax_run(BRAX_SEED, update)
    five = brax_run(BRAX_SEED, 5 * update)
    per_step_16 = max(0.0, (five - one) / (4 * update))
    run_s = max(0.0, one - per_step_16 * update)
    few_epochs = dict(BRAX_SEED, epochs_per_update=4)
    brax_run(few_epochs, update)  # compiles the 4-epoch program
    low = brax_run(few_epochs, 5 * update)
    per_step_4 = max(0.0, (low - run_s) / (5 * update))
    brax_parameters = (_mlp_parameters(obs_size, tuple(BRAX_SEED["policy_hidden_layers"]), 2 * action_size)
                       + _mlp_parameters(obs_size, tuple(BRAX_SEED["value_hidden_layers"]), 1))
    sample_param_s = max(0.0, (per_step_16 - per_step_4) / (12 * brax_parameters))
    out["brax"].update(compile_s=round(max(0.0, cold - one), 1), run_s=run_s, gradient_step_s=0.0,
                       collect_env_step_s=max(0.0, per_step_4 - 4 * brax_parameters * sample_param_s),
                       sample_param_s=sample_param_s)
    # the PyTorch side's per-run cost: a new evaluator (trace, cached programs loaded)
    started = time.perf_counter()
    TorchEvaluator(env_name, settings, 1, 16, False)(agent)
    out["torch"]["run_s"] = max(0.0, time.perf_counter() - started - per_eval[16])
    out["measured"] = {"torch_collect_step_s": per_step, "torch_gradient_step_s": per_gradient_step,
                       "eval_s": per_eval, "brax_s": {"one_update": one, "five_updates": five, "five_at_4_epochs": low}}
    return out


def write_toml(path: Path, result: dict, description: str) -> None:
    lines = [f"# Measured by `python benchmarks/bench_trainers.py --calibrate` ({description}).",
             "# Constants of the cost model in brax_diff/verify/costs.py: seconds per unit named.",
             f'machine = "{description}"', f'date = "{time.strftime("%Y-%m-%d")}"', ""]
    for part in ("torch", "brax", "eval"):
        lines.append(f"[{part}]")
        for name, value in sorted(result[part].items()):
            lines.append(f"{name} = {float(value):.6g}")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--budget", type=int, default=32 * 30 * 16 * 10)
    parser.add_argument("--cache", type=Path, default=None, help="XLA cache dir (default: a fresh tmp dir)")
    parser.add_argument("--skip-brax", action="store_true")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--seeds", type=int, default=None, help="1 and N seeds, sequential vs batched")
    parser.add_argument("--repeats", type=int, default=3, help="with --seeds: timed repeats per case (median)")
    parser.add_argument("--write", type=Path, default=None, help="with --calibrate: write the TOML here")
    args = parser.parse_args()

    from brax_diff.verify.envs import enable_compilation_cache
    from brax_diff.verify.worker import configure_cpu_process

    configure_cpu_process()  # XLA and torch on one thread each, as every verify process runs them

    cache = args.cache or Path(tempfile.mkdtemp(prefix="bench-trainers-"))
    enable_compilation_cache(cache / "xla")
    info = machine()
    if args.seeds:
        budget = args.budget if "--budget" in sys.argv else 30_720
        print(json.dumps({"machine": info, "env": args.env,
                          **bench_seeds(args.env, args.num_envs, budget, args.seeds, args.repeats,
                                        brax=not args.skip_brax)}, indent=2))
        return
    if args.calibrate:
        result = calibrate(args.env)
        description = f"{info['cpu']}, {info['cores']} cores, jax {info['jax_backend']}, torch 1 thread"
        if args.write:
            write_toml(args.write, result, description)
        print(json.dumps({"machine": info, **result}, indent=2, default=str))
        return
    report = {"machine": info, "env": args.env, "num_envs": args.num_envs, "budget": args.budget,
              "torch_ppo": bench_torch(args.env, args.num_envs, args.budget)}
    print(json.dumps(report["torch_ppo"]), file=sys.stderr, flush=True)
    if not args.skip_brax:
        report["brax_ppo"] = bench_brax(args.env, args.num_envs, args.budget)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
