"""verify.json records the platform, and the run cache's identity includes it: training is
bit-identical only on the same CPU and builds."""

from __future__ import annotations

import pytest

pytest.importorskip("scipy", reason="the verdicts need the verify extra's statistics")

from verify_fixtures import synthetic_result  # noqa: E402

from brax_diff.verify import platform  # noqa: E402
from brax_diff.verify.cache import RunCache  # noqa: E402

CPUINFO = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n"
           "flags\t: fpu sse2 avx512f fma avx2 ht amx_tile\n")


def test_the_cpu_model_is_read_from_cpuinfo():
    assert platform.cpu_model(CPUINFO) == "Intel(R) Xeon(R) Platinum 8480C"
    assert platform.cpu_simd(CPUINFO) == "amx_tile avx2 avx512f fma sse2"  # the kernels' features, sorted
    assert platform.cpu_simd("model name\t: X\n") == "unknown"
    described = platform.describe()
    assert set(described) == {"cpu", "cpu_simd", "accelerator", "python", "machine", "packages"}
    # the physics packages too: MuJoCo's builds change a run's floating-point path
    assert set(described["packages"]) == {"brax", "jax", "jaxlib", "mujoco", "mujoco-mjx", "numpy", "playground",
                                          "torch"}


def test_a_run_from_another_platform_is_another_run(tmp_path):
    result = synthetic_result()
    run = next(r for r in result.results if r.spec.arm == "baseline")
    here = {"cpu": "AMD EPYC", "accelerator": "none", "python": "3.11.7", "machine": "x86_64",
            "packages": {"torch": "2.13.0+cpu"}}
    there = dict(here, cpu="Intel(R) Xeon(R) Platinum 8480C")
    RunCache(tmp_path, platform=here).store(run)
    assert RunCache(tmp_path, platform=here).load(run.spec) is not None
    assert RunCache(tmp_path, platform=there).load(run.spec) is None
    assert run.spec.identity("v", here)["platform"]["cpu"] == "AMD EPYC"
    assert run.spec.identity("v")["seed_streams"] == "seedsequence/1"


def test_verify_json_records_the_platform():
    result = synthetic_result()
    result.platform = {"cpu": "X", "accelerator": "none"}
    assert result.to_json()["platform"] == {"cpu": "X", "accelerator": "none"}
    result.platform = {}
    assert result.to_json()["platform"] == platform.describe()
