"""``verify --executor ray``: every unit of work a Ray task (the optional ``distributed`` extra).

Imported only when asked for. A unit (:func:`.runner.units`: a PyTorch arm's seeds on one
environment, batched, or one run of Brax's trainer) is one task that asks for
``TASK_CPUS`` CPU (a training process runs XLA and torch on one thread each) and one GPU
when the cluster has GPUs. The driver ships this checkout's ``brax_diff`` to the workers
(``runtime_env`` ``py_modules``: they need only the verify extra), and stores each result
in its own run cache as the task returns: workers never write to it, so the cache holds
whole runs only, whatever happens to a worker. A worker that dies is retried by Ray (up to
``MAX_RETRIES`` times; a finished unit is never redone); Ctrl-C cancels the tasks still
queued or running. Before any task, a probe task checks that a worker imports the training
stack, and the address is checked to answer: a cluster that cannot train stops the command
with one error line, the cache untouched.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..errors import BraxDiffError

TASK_CPUS = 1  # one training process: XLA and torch on one thread (worker.configure_cpu_process)
MAX_RETRIES = 3  # a worker that dies (killed, out of memory, node lost) is retried this often
PROBE_TIMEOUT_S = 300  # a worker must start and import the training stack within this
CONNECT_TIMEOUT_S = 5.0
INSTALL_HINT = "pip install 'brax-diff[distributed]'"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A ``host:port`` (or ``ray://host:port``) that accepts a TCP connection, else BraxDiffError."""
    target = address.split("://", 1)[-1]
    host, sep, port = target.rpartition(":")
    if not sep:
        host, port = target, "6379"
    try:
        number = int(port)
    except ValueError:
        raise BraxDiffError(f"--address {address!r}: expected HOST:PORT (the address `ray start --head` prints)") \
            from None
    try:
        with socket.create_connection((host, number), timeout=timeout):
            pass
    except OSError as exc:
        raise BraxDiffError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc} "
                            "(is `ray start --head` running there?)") from None


def runtime_env() -> dict[str, Any]:
    """The job's runtime environment: this checkout's ``brax_diff`` shipped to every worker (Ray
    uploads a directory only at the job level, ``ray.init``; a process that starts Ray itself
    before calling ``run_plan`` should pass this)."""
    import brax_diff

    return {"py_modules": [str(Path(brax_diff.__file__).resolve().parent)]}


def _probe() -> dict[str, Any]:
    """On a worker: can it train? (the first missing training package, and a GPU)."""
    from brax_diff.verify.stack import training_stack_missing

    return {"missing": training_stack_missing()}


def _unit(spec_jsons: list[dict], cache_dir: str) -> dict[str, Any]:
    """On a worker: train one unit; its results as JSON (the driver stores them)."""
    from brax_diff.verify import worker
    from brax_diff.verify.stack import training_stack_missing

    missing = training_stack_missing()
    if missing:
        return {"missing": missing}
    if "runner" not in worker.WORKER:
        worker.start_worker(cache_dir, None, store=False)
    return {"results": worker.run_worker_unit(spec_jsons)}


def missing_stack_error(missing: str) -> BraxDiffError:
    return BraxDiffError(f"the Ray cluster's workers cannot train: {missing} is not installed there "
                         "(pip install 'brax-diff[verify]' on every node)")


@dataclass
class RayCluster:
    ray: Any
    started_here: bool
    cpus: int
    gpus: float

    @property
    def device(self) -> str:
        return "cuda" if self.gpus else "cpu"

    @classmethod
    def connect(cls, address: str | None, log: Callable[[str], None]) -> "RayCluster":
        """Join the cluster at ``address`` (None: start Ray on this machine; or use the Ray this
        process already started) and check that its workers can train."""
        try:
            import ray
        except ImportError:
            raise BraxDiffError(f"--executor ray needs Ray (the distributed extra): {INSTALL_HINT}") from None
        if address not in (None, "auto", "local") and not ray.is_initialized():
            check_reachable(address)
        started_here = not ray.is_initialized()
        if started_here:
            try:
                ray.init(address=address, runtime_env=runtime_env(), include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            except Exception as exc:  # ConnectionError, version mismatch, ...
                raise BraxDiffError(f"cannot connect to the Ray cluster at {address or 'this machine'}: "
                                    f"{_first_line(exc)}") from None
        cluster = cls(ray, started_here, 1, 0.0)
        try:
            resources = ray.cluster_resources()
            cluster.cpus = max(1, int(resources.get("CPU", 1)))
            cluster.gpus = 1.0 if resources.get("GPU", 0) >= 1 else 0.0
            probe = ray.remote(_probe).options(num_cpus=TASK_CPUS)
            answer = ray.get(probe.remote(), timeout=PROBE_TIMEOUT_S)
        except BaseException as exc:
            cluster.close()
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise BraxDiffError(f"the Ray cluster's workers cannot run brax-diff: {_first_line(exc)}") from None
        if answer.get("missing"):
            cluster.close()
            raise missing_stack_error(answer["missing"])
        log(f"ray: {cluster.cpus} CPU(s), {int(cluster.gpus and resources.get('GPU', 0))} GPU(s); each task asks for "
            f"{TASK_CPUS} CPU{' and 1 GPU' if cluster.gpus else ''}")
        return cluster

    def run(self, plan, work: list[list[int]], done: dict, cache, bar) -> None:
        """Every unit of ``work`` as a task; each result stored in ``cache`` as its task returns."""
        from .cache import RunResult
        from .worker import failed_result

        ray = self.ray
        task = ray.remote(_unit).options(num_cpus=TASK_CPUS, num_gpus=self.gpus, max_retries=MAX_RETRIES)
        cache_dir = str(cache.directory.resolve())
        refs = {task.remote([plan.runs[i].to_json() for i in unit], cache_dir): unit for unit in work}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for ref in ready:
                    unit = refs.pop(ref)
                    try:
                        answer = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # brax_diff itself failed on the worker
                        raise BraxDiffError(f"a Ray task failed: {_first_line(getattr(exc, 'cause', None) or exc)}") from None
                    except ray.exceptions.RayError as exc:  # the worker died MAX_RETRIES + 1 times
                        answer = {"results": [failed_result(plan.runs[i], exc, 0.0, self.device).to_json() for i in unit]}
                    if answer.get("missing"):
                        raise missing_stack_error(answer["missing"])
                    for index, data in zip(unit, answer["results"]):
                        result = replace(RunResult.from_json(data), spec=plan.runs[index])
                        cache.store(result)
                        done[index] = result
                        bar.finish_run(result)
        except BaseException:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise

    def close(self) -> None:
        if self.started_here and self.ray.is_initialized():
            self.ray.shutdown()
