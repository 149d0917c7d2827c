import sys
from pathlib import Path

# Tests import the checkout they live in, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import os

import pytest

# Training tests compare runs made in this process with runs made in worker processes: both
# must run XLA as `brax-diff verify` does (brax_diff.verify.worker.XLA_CPU_FLAGS), set before
# any test starts jax. Written out here so that collecting the tests imports neither.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")


SLOW_TESTS = "BRAX_DIFF_SLOW_TESTS"


def pytest_collection_modifyitems(config, items):
    """``slow`` tests (whole trainings, tens of minutes on 2 CPUs) run only when asked for:
    CI's whole run stays under 20 minutes."""
    if os.environ.get(SLOW_TESTS) == "1":
        return
    skip = pytest.mark.skip(reason=f"a slow end-to-end training: set {SLOW_TESTS}=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own cache folder: no test reads what another (or a user) cached."""
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
