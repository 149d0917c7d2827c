"""What runs in a training process: the runner of a unit of runs, its progress bar, the
CPU configuration of the process and the worker entry points the process pool and Ray call."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from ..errors import BraxDiffError
from .cache import FAILED, OK, RunCache, RunResult
from .plan import BATCHED, BRAX, TORCH, Plan, RunSpec
from .settings import TrainerSettings


TORCH_CPU_THREADS = 1  # see configure_cpu_process


# One thread for XLA in every training process: results independent of --jobs (see configure_cpu_process)
XLA_CPU_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def pick_device() -> str:
    """"cuda" when both PyTorch and JAX see a GPU, else "cpu"."""
    import torch

    from .envs import jax_backend

    return "cuda" if torch.cuda.is_available() and jax_backend() == "gpu" else "cpu"


class Progress:
    """A rich progress bar over env steps, with runs done and the current steps/s, on stderr."""

    @classmethod
    def disabled(cls) -> "Progress":
        progress = cls.__new__(cls)
        progress.enabled, progress.total_runs, progress.done, progress.advanced = False, 0, 0, 0
        return progress

    def __init__(self, plan: Plan, enabled: bool):
        self.enabled = enabled
        self.total_runs = len(plan.runs)
        self.done = 0
        self.advanced = 0  # env steps shown for the run in progress
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        # stderr: stdout carries only the result asked for (`verify ... | tee result.txt`)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("env steps · runs {task.fields[runs]} · {task.fields[rate]} steps/s"),
                            TimeElapsedColumn(), console=Console(stderr=True), transient=False)
        self.task = self.bar.add_task("verify", total=sum(r.budget for r in plan.runs),
                                      runs=f"0/{self.total_runs}", rate="-")
        self.bar.start()

    def describe(self, specs: list[RunSpec]) -> None:
        if self.enabled:
            seeds = ",".join(str(s.seed) for s in specs)
            self.bar.update(self.task, description=f"{specs[0].env} {specs[0].arm} seed{'s' if len(specs) > 1 else ''} "
                                                   f"{seeds}")

    def advance(self, steps: int, rate: float | None = None) -> None:
        self.advanced += steps
        if self.enabled:
            self.bar.update(self.task, advance=steps, **({"rate": f"{rate:,.0f}"} if rate else {}))

    def finish_run(self, result: RunResult) -> None:
        """The bar counts each run's budget: a cached or failed run fills its share at once."""
        self.done += 1
        remaining = max(0, result.spec.budget - self.advanced)
        self.advanced = max(0, self.advanced - result.spec.budget)  # a batched unit advanced for all its seeds
        if self.enabled:
            self.bar.update(self.task, advance=remaining, runs=f"{self.done}/{self.total_runs}")

    def close(self) -> None:
        if self.enabled:
            self.bar.stop()


class Runner:
    # Jitted environments, kept for the process: a second plan in one process (tests, resume)
    # reuses them instead of tracing and compiling again.
    _envs: dict[tuple, Any] = {}
    # Compiled evaluators, likewise, reseeded run by run (tracing one took 6 s of a 41 s stand-in run)
    _evaluators: dict[tuple, Any] = {}

    def __init__(self, cache: RunCache | None, device: str, progress: Progress):
        self.cache, self.device, self.progress = cache, device, progress

    def env(self, name: str, num_envs: int, episode_length: int | None):
        from .envs import PlaygroundVecEnv

        key = (name, num_envs, episode_length, self.device)
        if key not in self._envs:
            self._envs[key] = PlaygroundVecEnv(name, num_envs, self.device, episode_length)
        return self._envs[key]

    def evaluator(self, spec: RunSpec, settings: TrainerSettings, seeds: int | list[int]):
        """A TorchEvaluator for ``seeds`` scoring as ``spec`` asks, compiled once per process for
        each env, scoring and settings (its policy function reads the settings)."""
        from .evaluate import TorchEvaluator

        key = (spec.env, spec.scoring.eval_envs, spec.scoring.deterministic, settings.episode_length,
               json.dumps(settings.to_json(), sort_keys=True), self.device)
        if key not in self._evaluators:
            self._evaluators[key] = TorchEvaluator(spec.env, settings, seeds, spec.scoring.eval_envs,
                                                   spec.scoring.deterministic, settings.episode_length)
        return self._evaluators[key].reseed(seeds)

    def run(self, spec: RunSpec) -> RunResult:
        return self.run_unit([spec])[0]

    def run_unit(self, specs: list[RunSpec]) -> list[RunResult]:
        """One unit of work (:func:`units`): a PyTorch arm's seeds trained together, or one run of
        Brax's trainer. Each result is stored in the cache (when the runner has one) as it is
        known; a crash fails every run of the unit, a NaN only its seed."""
        self.progress.describe(specs)
        started, cpu_started = time.perf_counter(), time.process_time()
        try:
            if specs[0].trainer == TORCH and specs[0].engine == BATCHED:
                results = self._run_torch_batched(specs)
            elif specs[0].trainer == TORCH and len(specs) == 1:
                results = [self._run_torch(specs[0])]
            elif specs[0].trainer == BRAX and len(specs) == 1:
                results = [self._run_brax(specs[0])]
            else:
                raise BraxDiffError(f"unknown trainer {specs[0].trainer!r}, or a unit of {len(specs)} runs that "
                                    "do not train batched")
        except (KeyboardInterrupt, BraxDiffError):
            raise
        except Exception as exc:  # a crash is a result too: recorded, shown, never dropped
            seconds = (time.perf_counter() - started) / len(specs)
            results = [failed_result(spec, exc, seconds, self.device) for spec in specs]
        cpu_share = (time.process_time() - cpu_started) / len(specs)  # each run's share of the unit's CPU time
        for result in results:
            result.cpu_seconds = cpu_share
            if self.cache is not None:
                self.cache.store(result)
        return results

    def _progress_per_update(self):
        """A trainer's ``on_update(env_steps)``: advance the bar at the rate since the last update."""
        clock = {"t": time.perf_counter()}

        def on_update(steps: int) -> None:
            now = time.perf_counter()
            self.progress.advance(steps, steps / max(now - clock["t"], 1e-9))
            clock["t"] = now

        return on_update

    def _run_torch(self, spec: RunSpec) -> RunResult:
        """One seed with the single-seed trainer (:mod:`.ppo_torch`)."""
        from . import ppo_torch

        settings = TrainerSettings.from_json(spec.settings)
        env = self.env(spec.env, settings.num_envs, settings.episode_length)
        evaluator = self.evaluator(spec, settings, spec.seed)
        on_update = self._progress_per_update()
        log = ppo_torch.train(env, settings, spec.budget, spec.seed, self.device, on_update, evaluate=evaluator,
                              eval_every=spec.scoring.eval_every)
        if log.steps != spec.scoring.checkpoints:
            raise ValueError(f"evaluated at {log.steps}, not at the plan's checkpoints {spec.scoring.checkpoints}")
        if not all(math.isfinite(s) for s in log.scores):
            raise FloatingPointError(f"evaluation return is not finite: {log.scores}")
        return RunResult(spec, OK, log.steps, log.scores, log.scores[-1], log.env_steps, log.seconds,
                         device=self.device, score_kind=spec.scoring.kind)

    def _run_torch_batched(self, specs: list[RunSpec]) -> list[RunResult]:
        """Every seed of ``specs`` (one arm, one env) in one seed-batched run (:mod:`.ppo_batched`)."""
        from . import ppo_batched

        spec = specs[0]
        settings = TrainerSettings.from_json(spec.settings)
        seeds = [s.seed for s in specs]
        env = self.env(spec.env, settings.num_envs * len(seeds), settings.episode_length)
        evaluator = self.evaluator(spec, settings, seeds)
        on_update = self._progress_per_update()
        logs, failures = ppo_batched.train(env, settings, spec.budget, seeds, self.device, on_update,
                                           evaluate=lambda i, params: evaluator.score(params, i),
                                           eval_every=spec.scoring.eval_every)
        results = []
        for i, (run, log) in enumerate(zip(specs, logs)):
            error = None
            if i in failures:
                error = FloatingPointError(failures[i])
            elif log.steps != run.scoring.checkpoints:
                error = ValueError(f"evaluated at {log.steps}, not at the plan's checkpoints {run.scoring.checkpoints}")
            elif not all(math.isfinite(s) for s in log.scores):
                error = FloatingPointError(f"evaluation return is not finite: {log.scores}")
            if error is not None:
                results.append(failed_result(run, error, log.seconds, self.device))
            else:
                results.append(RunResult(run, OK, log.steps, log.scores, log.scores[-1], log.env_steps, log.seconds,
                                         device=self.device, score_kind=run.scoring.kind))
        return results

    def _run_brax(self, spec: RunSpec) -> RunResult:
        from . import brax_reference

        last = {"steps": 0, "t": time.perf_counter()}

        def on_eval(steps: int, score: float) -> None:
            now = time.perf_counter()
            delta = steps - last["steps"]
            self.progress.advance(delta, delta / max(now - last["t"], 1e-9) if delta else None)
            last.update(steps=steps, t=now)
            if not math.isfinite(score):
                raise FloatingPointError(f"eval reward is {score} at {steps} env steps")

        steps, scores, seconds = brax_reference.train(spec.settings, spec.env, spec.budget, spec.seed, spec.scoring,
                                                      on_eval)
        return RunResult(spec, OK, steps, scores, scores[-1], steps[-1], seconds, device=self.device,
                         score_kind=spec.scoring.kind)


def failed_result(spec: RunSpec, exc: BaseException, seconds: float, device: str) -> RunResult:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return RunResult(spec, FAILED, error=f"{type(exc).__name__}: {message}"[:500], seconds=seconds, device=device,
                     score_kind=spec.scoring.kind)


def quiet_xla_logs() -> None:
    """XLA's C++ log (before jax is imported): loading a cached program logs a screenful of
    "machine type ... doesn't match" per program on CPUs with tuning features, harmless
    here; real XLA failures still raise in Python. A TF_CPP_MIN_LOG_LEVEL the user set wins."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def configure_cpu_process() -> str | None:
    """torch and XLA on one thread each, in the main process and in every worker alike.

    XLA's multi-threaded Eigen sums in another order: the same run scored 43.411476 on the
    default pool and 43.411472 on one thread (measured), so a run's result would depend on
    ``--jobs``. Set before jax starts its backend; returns a warning when it already had.
    """
    import os

    quiet_xla_logs()
    before, started = os.environ.get("XLA_FLAGS"), _jax_backend_started()
    os.environ.setdefault("XLA_FLAGS", XLA_CPU_FLAGS)
    import torch

    # JAX steps the env in this process; torch's own CPU thread pool fighting XLA's for the
    # same cores made small updates 20-30x slower here (measured: 12 s vs 0.4 s per run).
    torch.set_num_threads(TORCH_CPU_THREADS)
    if before not in (None, XLA_CPU_FLAGS):
        return (f"XLA_FLAGS={before!r}, not {XLA_CPU_FLAGS!r}: scores may differ in their last float bits "
                "from the same runs made by `brax-diff verify` (and from the run cache)")
    if before is None and started:
        return ("jax started before verify, on its default threads: scores may differ in their last float "
                "bits from the same runs made by `brax-diff verify` (and from the run cache)")
    return None


def _jax_backend_started() -> bool:
    import sys as _sys

    bridge = _sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", None))


WORKER: dict[str, Any] = {}


TRACE_ENV = "BRAX_DIFF_VERIFY_TRACE"  # a file: every worker appends "start|done <first run id> <pid>" per unit


def _trace(event: str, specs: list[RunSpec]) -> None:
    """One line per unit started and finished, when TRACE_ENV names a file (tests, debugging)."""
    import os

    path = os.environ.get(TRACE_ENV)
    if path:
        from .. import __version__

        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{event} {specs[0].run_id(__version__)} {os.getpid()}\n")


def start_worker(cache_dir: str | None, device: str | None, store: bool = True) -> None:
    """A worker process (``--jobs``, or a Ray worker): one thread each, the shared XLA cache;
    it stores results in the run cache when it has the directory (a process pool on this
    machine), else only returns them (Ray: the driver stores)."""
    configure_cpu_process()
    from .envs import enable_compilation_cache

    if cache_dir is not None:
        try:
            enable_compilation_cache(Path(cache_dir) / "xla")
        except OSError:
            pass  # another node's file system: compile without the cache
    WORKER["runner"] = Runner(RunCache(cache_dir) if cache_dir and store else None, device or pick_device(),
                               Progress.disabled())


def run_worker_unit(spec_jsons: list[dict]) -> list[dict]:
    from .plan import RunSpec

    specs = [RunSpec.from_json(s) for s in spec_jsons]
    _trace("start", specs)
    results = [r.to_json() for r in WORKER["runner"].run_unit(specs)]
    _trace("done", specs)
    return results
