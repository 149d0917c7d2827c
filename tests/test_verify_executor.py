"""`verify --executor ray` without a cluster: bad addresses, a cluster that cannot train, Ray
imported only when asked for. (A real local Ray cluster: tests/test_verify_training.py.)"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from test_verify_plan import write_pair

from brax_diff.cli import main
from brax_diff.errors import BraxDiffError

ROOT = Path(__file__).resolve().parent.parent


def run_cli(args, capsys):
    code = main(["verify", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_an_unreachable_address_is_one_error_line_and_leaves_the_cache_alone(tmp_path, capsys):
    pytest.importorskip("ray", reason="needs the distributed extra")
    pytest.importorskip("torch", reason="needs the verify extra")
    cache = tmp_path / "cache"
    code, out, err = run_cli([*write_pair(tmp_path), "--seeds", "1", "--budget", "1600", "--no-reference",
                              "--executor", "ray", "--address", f"127.0.0.1:{closed_port()}", "--cache", str(cache),
                              "--output", str(tmp_path / "out"), "--quiet"], capsys)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("error: cannot reach the Ray cluster at 127.0.0.1:") and "ray start --head" in line
    assert not cache.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, message", [
    (["--address", "10.0.0.1:6379"], "error: --address names a Ray cluster: it needs --executor ray"),
    (["--executor", "dask"], "error: --executor must be one of local, ray, got 'dask'"),
])
def test_executor_flags_are_checked_before_any_work(tmp_path, capsys, args, message):
    code, out, err = run_cli([*write_pair(tmp_path), "--plan", *args], capsys)
    assert (code, out, err.strip()) == (2, "", message)


def test_a_malformed_address_is_one_error_line():
    from brax_diff.verify.ray_executor import check_reachable

    with pytest.raises(BraxDiffError, match="expected HOST:PORT"):
        check_reachable("head-node:sixty")


class _FakeRay(types.ModuleType):
    """Enough of `ray` for the driver's side: a cluster whose workers answer the probe with ``answer``."""

    def __init__(self, answer):
        super().__init__("ray")
        self.answer, self.calls, self.initialized = answer, [], False
        self.exceptions = types.SimpleNamespace(RayTaskError=RuntimeError, RayError=OSError)

    def is_initialized(self):
        return self.initialized

    def init(self, **kwargs):
        self.calls.append(("init", kwargs.get("address"), kwargs.get("runtime_env")))
        self.initialized = True

    def shutdown(self):
        self.calls.append(("shutdown", None))
        self.initialized = False

    def cluster_resources(self):
        return {"CPU": 8.0}

    def remote(self, fn):
        ray = self

        class Task:
            def options(self, **options):
                ray.calls.append(("options", fn.__name__, options.get("num_cpus"), options.get("num_gpus")))
                return self

            def remote(self, *args):
                ray.calls.append(("task", fn.__name__))
                return object()

        return Task()

    def get(self, ref, timeout=None):
        return self.answer


def test_a_cluster_without_the_training_stack_is_one_error_and_no_task_runs(monkeypatch):
    from brax_diff.verify import ray_executor

    fake = _FakeRay({"missing": "torch"})
    monkeypatch.setitem(sys.modules, "ray", fake)
    with pytest.raises(BraxDiffError) as caught:
        ray_executor.RayCluster.connect(None, lambda line: None)
    assert str(caught.value) == ("the Ray cluster's workers cannot train: torch is not installed there "
                                 "(pip install 'brax-diff[verify]' on every node)")
    assert ("task", "_probe") in fake.calls and ("task", "_unit") not in fake.calls
    assert fake.calls[-1] == ("shutdown", None)  # the Ray it started is stopped again


def test_a_cluster_that_can_train_declares_each_tasks_resources(monkeypatch):
    from brax_diff.verify import ray_executor

    fake = _FakeRay({"missing": None})
    monkeypatch.setitem(sys.modules, "ray", fake)
    lines = []
    cluster = ray_executor.RayCluster.connect(None, lines.append)
    assert (cluster.cpus, cluster.gpus, cluster.device) == (8, 0.0, "cpu")
    assert ("options", "_probe", 1, None) in fake.calls
    assert lines == ["ray: 8 CPU(s), 0 GPU(s); each task asks for 1 CPU"]
    assert fake.calls[0] == ("init", None, {"py_modules": [str(ROOT / "brax_diff")]})  # this checkout's code


def test_ray_is_imported_only_when_asked_for():
    code = ("import sys; import brax_diff.cli, brax_diff.verify.runner, brax_diff.verify.plan; "
            "from brax_diff.cli import main; main(['verify', '--help']); print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
