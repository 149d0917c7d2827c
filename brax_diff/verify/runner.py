"""Run a plan: every run once (cached), then verdicts, plots and one JSON result.

A run that raises or goes NaN is recorded as failed with its error and counted as such;
it is never silently dropped. Finished runs come from the cache, so an interrupted
``verify`` resumes where it stopped.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BraxDiffError
from ..facts import dumps
from ..io import write_atomic
from . import stats
from .cache import FAILED, OK, RunCache, RunResult
from .plan import BRAX, TORCH, Plan, RunSpec
from .settings import TrainerSettings

TORCH_CPU_THREADS = 1  # see run_plan
CPU_HINT = ("no GPU visible to both JAX and PyTorch: training on the CPU; expect a few thousand env "
            "steps/s, so consider a smaller --budget (e.g. 200000) or --set num_envs=256")


@dataclass
class VerifyResult:
    plan: Plan
    results: list[RunResult]
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    reference: dict[str, dict[str, Any]] = field(default_factory=dict)
    device: str = "cpu"
    seconds: float = 0.0

    @property
    def failed(self) -> list[RunResult]:
        return [r for r in self.results if r.status == FAILED]

    def to_json(self) -> dict:
        return {
            "plan": self.plan.to_json(),
            "device": self.device,
            "verdicts": self.verdicts,
            "reference": self.reference,
            "runs": [{"arm": r.spec.arm, "env": r.spec.env, "seed": r.spec.seed, "trainer": r.spec.trainer,
                      "status": r.status, "final_score": r.final_score, "env_steps": r.env_steps,
                      "seconds": round(r.seconds, 1), "error": r.error} for r in self.results],
        }


def pick_device() -> str:
    """"cuda" when both PyTorch and JAX see a GPU, else "cpu"."""
    import torch

    from .envs import jax_backend

    return "cuda" if torch.cuda.is_available() and jax_backend() == "gpu" else "cpu"


class _Progress:
    """A rich progress bar over env steps, with runs done and the current steps/s."""

    def __init__(self, plan: Plan, enabled: bool):
        self.enabled = enabled
        self.total_runs = len(plan.runs)
        self.done = 0
        self.advanced = 0  # env steps shown for the run in progress
        if not enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("env steps · runs {task.fields[runs]} · {task.fields[rate]} steps/s"),
                            TimeElapsedColumn(), transient=False)
        self.task = self.bar.add_task("verify", total=sum(r.budget for r in plan.runs),
                                      runs=f"0/{self.total_runs}", rate="-")
        self.bar.start()

    def describe(self, spec: RunSpec) -> None:
        if self.enabled:
            self.bar.update(self.task, description=f"{spec.env} {spec.arm} seed {spec.seed}")

    def advance(self, steps: int, rate: float | None = None) -> None:
        self.advanced += steps
        if self.enabled:
            self.bar.update(self.task, advance=steps, **({"rate": f"{rate:,.0f}"} if rate else {}))

    def finish_run(self, result: RunResult) -> None:
        """The bar counts each run's budget: a cached or failed run fills its share at once."""
        self.done += 1
        remaining = max(0, result.spec.budget - self.advanced)
        self.advanced = 0
        if self.enabled:
            self.bar.update(self.task, advance=remaining, runs=f"{self.done}/{self.total_runs}")

    def close(self) -> None:
        if self.enabled:
            self.bar.stop()


class Runner:
    # Jitted environments, kept for the process: a second plan in one process (tests, resume)
    # reuses them instead of tracing and compiling again.
    _envs: dict[tuple, Any] = {}

    def __init__(self, cache: RunCache, device: str, progress: _Progress):
        self.cache, self.device, self.progress = cache, device, progress

    def env(self, name: str, num_envs: int, episode_length: int | None):
        from .envs import PlaygroundVecEnv

        key = (name, num_envs, episode_length, self.device)
        if key not in self._envs:
            self._envs[key] = PlaygroundVecEnv(name, num_envs, self.device, episode_length)
        return self._envs[key]

    def run(self, spec: RunSpec) -> RunResult:
        self.progress.describe(spec)
        started = time.perf_counter()
        try:
            if spec.trainer == TORCH:
                result = self._run_torch(spec)
            elif spec.trainer == BRAX:
                result = self._run_brax(spec)
            else:
                raise BraxDiffError(f"unknown trainer {spec.trainer!r}")
        except (KeyboardInterrupt, BraxDiffError):
            raise
        except Exception as exc:  # a crash is a result too: recorded, shown, never dropped
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            result = RunResult(spec, FAILED, error=f"{type(exc).__name__}: {message}"[:500],
                               seconds=time.perf_counter() - started, device=self.device)
        self.cache.store(result)
        return result

    def _run_torch(self, spec: RunSpec) -> RunResult:
        from . import ppo_torch

        settings = TrainerSettings.from_json(spec.settings)
        env = self.env(spec.env, settings.num_envs, settings.episode_length)
        clock = {"t": time.perf_counter()}

        def on_update(steps: int, score: float) -> None:
            now = time.perf_counter()
            self.progress.advance(steps, steps / max(now - clock["t"], 1e-9))
            clock["t"] = now

        log = ppo_torch.train(env, settings, spec.budget, spec.seed, self.device, on_update)
        steps, scores, kind = ppo_torch.curve(log, env.episode_length)
        return RunResult(spec, OK, steps, scores, ppo_torch.final_score(log, env.episode_length), log.env_steps,
                         log.seconds, device=self.device, score_kind=kind)

    def _run_brax(self, spec: RunSpec) -> RunResult:
        import math

        from . import brax_reference

        last = {"steps": 0, "t": time.perf_counter()}

        def on_eval(steps: int, score: float) -> None:
            now = time.perf_counter()
            delta = steps - last["steps"]
            self.progress.advance(delta, delta / max(now - last["t"], 1e-9) if delta else None)
            last.update(steps=steps, t=now)
            if not math.isfinite(score):
                raise FloatingPointError(f"eval reward is {score} at {steps} env steps")

        steps, scores, seconds = brax_reference.train(spec.settings, spec.env, spec.budget, spec.seed, on_eval)
        return RunResult(spec, OK, steps, scores, scores[-1] if scores else None, steps[-1] if steps else 0,
                         seconds, device=self.device)


def _final_scores(results: list[RunResult], env: str, arm: str) -> list[float]:
    return [r.final_score for r in results
            if r.spec.env == env and r.spec.arm == arm and r.status == OK and r.final_score is not None]


def _score_matrix(results: list[RunResult], envs: list[str], arm: str) -> list[list[float]] | None:
    """(seeds, envs) of one arm's final scores, cut to the seed count every env has."""
    columns = [_final_scores(results, env, arm) for env in envs]
    runs = min(len(c) for c in columns)
    if runs == 0:
        return None
    return [[column[i] for column in columns] for i in range(runs)]


def verdicts(plan: Plan, results: list[RunResult], plots: dict[str, str]) -> dict[str, dict[str, Any]]:
    """One verdict per variant key, stratified over the environments that ran it."""
    out: dict[str, dict[str, Any]] = {}
    keys = sorted({a.key for a in plan.ablations if a.action == "variant"})
    for key in keys:
        envs = [a.env for a in plan.ablations if a.key == key and a.action == "variant"]
        arm = f"variant:{key}"
        failed = sum(1 for r in results if r.spec.arm in (arm, "baseline") and r.spec.env in envs
                     and r.status == FAILED)
        variant, baseline = _score_matrix(results, envs, arm), _score_matrix(results, envs, "baseline")
        entry: dict[str, Any] = {"envs": envs, "failed_runs": failed, "plot": plots.get(key)}
        if variant is None or baseline is None or len(variant) < 2 or len(baseline) < 2:
            entry.update(verdict=stats.INCONCLUSIVE, iqm_delta=None, ci=None, poi=None,
                         reason="fewer than 2 finished runs per arm")
        else:
            comparison = stats.compare(variant, baseline)
            entry.update(comparison.to_json())
        out[key] = entry
    return out


def reference_summary(plan: Plan, results: list[RunResult]) -> dict[str, dict[str, Any]]:
    """Brax's trainer against the SLM-Lab baseline, per environment."""
    out: dict[str, dict[str, Any]] = {}
    if not plan.with_reference:
        return out
    for env in plan.envs:
        brax_scores = _final_scores(results, env, "reference")
        slm_scores = _final_scores(results, env, "baseline")
        entry: dict[str, Any] = {"brax_finished": len(brax_scores), "slm_finished": len(slm_scores)}
        if brax_scores:
            entry["brax_iqm"] = stats.iqm(brax_scores)
        if slm_scores:
            entry["slm_iqm"] = stats.iqm(slm_scores)
        if len(brax_scores) >= 2 and len(slm_scores) >= 2:
            entry["iqm_delta_ci"] = list(stats.iqm_difference_ci(brax_scores, slm_scores))
            entry["poi_brax_over_slm"] = stats.probability_of_improvement(brax_scores, slm_scores)
        out[env] = entry
    return out


def _curves(results: list[RunResult], env: str, arm: str):
    return [(r.steps, r.scores) for r in results if r.spec.env == env and r.spec.arm == arm and r.status == OK]


# A run shorter than one episode has no episode return: its curve is an estimate, and the
# plot says so, since it is not comparable with a curve of finished episodes.
ESTIMATE_LABEL = " [no episode finished: reward/step x episode length]"


def _arm(results: list[RunResult], env: str, arm: str, label: str) -> tuple[str, list]:
    runs = [r for r in results if r.spec.env == env and r.spec.arm == arm and r.status == OK]
    estimated = any(r.score_kind != "episode_return" for r in runs)
    return label + (ESTIMATE_LABEL if estimated else ""), _curves(results, env, arm)


def write_plots(plan: Plan, results: list[RunResult], output: Path) -> dict[str, str]:
    """One PNG per variant key (first environment that ran it) and one per env for the reference."""
    from .plots import learning_curves

    plots: dict[str, str] = {}
    for ablation in plan.ablations:
        if ablation.action != "variant" or ablation.key in plots:
            continue
        name = f"plots/{ablation.env}-{ablation.key}.png"
        learning_curves(output / name, f"{ablation.env}: {ablation.key} slm={ablation.slm} -> brax={ablation.brax}",
                        dict([_arm(results, ablation.env, "baseline", "baseline (SLM-Lab)"),
                              _arm(results, ablation.env, f"variant:{ablation.key}",
                                   f"variant ({ablation.key} = Brax)")]))
        plots[ablation.key] = name
    if plan.with_reference:
        for env in plan.envs:
            name = f"plots/{env}-reference.png"
            learning_curves(output / name, f"{env}: SLM-Lab settings (PyTorch) vs Brax's trainer",
                            dict([_arm(results, env, "baseline", "baseline (SLM-Lab)"),
                                  _arm(results, env, "reference", "Brax ppo.train")]))
            plots[f"reference:{env}"] = name
    return plots


def run_plan(plan: Plan, cache_dir: str | Path, progress: bool = True, output_dir: str | Path | None = None,
             retry_failed: bool = False, device: str | None = None, log=None) -> VerifyResult:
    """Run every run of ``plan`` not already in the cache, then judge and plot.

    ``log`` receives human-readable lines (default: stderr). Results go to
    ``output_dir/verify.json`` and ``output_dir/plots/`` when ``output_dir`` is given.
    """
    log = log or (lambda line: print(line, file=sys.stderr))
    started = time.perf_counter()
    from .envs import enable_compilation_cache

    cache = RunCache(cache_dir)
    enable_compilation_cache(Path(cache_dir) / "xla")
    device = device or pick_device()
    if device == "cpu":
        log(CPU_HINT)
        import torch

        # JAX steps the env in this process; torch's own CPU thread pool fighting XLA's for the
        # same cores made small updates 20-30x slower here (measured: 12 s vs 0.4 s per run).
        torch.set_num_threads(TORCH_CPU_THREADS)
    bar = _Progress(plan, progress)
    runner = Runner(cache, device, bar)
    results: list[RunResult] = []
    try:
        for spec in plan.runs:
            cached = cache.load(spec)
            if cached is not None and (cached.status == OK or not retry_failed):
                result = cached
            else:
                result = runner.run(spec)
            results.append(result)
            bar.finish_run(result)
    finally:
        bar.close()
    plots: dict[str, str] = {}
    if output_dir is not None:
        plots = write_plots(plan, results, Path(output_dir))
    result = VerifyResult(plan, results, verdicts(plan, results, plots), reference_summary(plan, results), device,
                          time.perf_counter() - started)
    for key, plot in plots.items():
        if key.startswith("reference:"):
            result.reference[key.split(":", 1)[1]]["plot"] = plot
    if output_dir is not None:
        write_atomic(Path(output_dir) / "verify.json", dumps(result.to_json()))
    return result


def render(result: VerifyResult) -> str:
    """The verdicts as plain text, failed runs named."""
    lines = [f"verify: {len(result.results)} runs on {result.device} in {result.seconds:.0f} s "
             f"({len(result.failed)} failed)"]
    for key, entry in sorted(result.verdicts.items()):
        if entry.get("ci"):
            low, high = entry["ci"]
            lines.append(f"  {key:<30} {entry['verdict']:<14} IQM delta {entry['iqm_delta']:+.1f} "
                         f"[{low:+.1f}, {high:+.1f}]  P(variant > baseline) {entry['poi']:.2f}  "
                         f"n={entry['seeds']}")
        else:
            lines.append(f"  {key:<30} {entry['verdict']:<14} ({entry.get('reason', '')})")
    for env, entry in sorted(result.reference.items()):
        brax, slm = entry.get("brax_iqm"), entry.get("slm_iqm")
        lines.append(f"  reference {env}: Brax ppo.train IQM {brax if brax is None else round(brax, 1)}, "
                     f"SLM-Lab settings IQM {slm if slm is None else round(slm, 1)}")
    for failed in result.failed:
        lines.append(f"  FAILED {failed.spec.env} {failed.spec.arm} seed {failed.spec.seed}: {failed.error}")
    return "\n".join(lines) + "\n"
