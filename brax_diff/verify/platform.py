"""The machine a run trained on: what a result is bit-identical across only when it is equal.

Training is bit-identical on the same CPU and builds (same CPU model, accelerator and package
versions); on another CPU, floating-point kernels differ from the first step (measured: final
scores moved by up to 172 on CartpoleBalance). So verify.json records the platform and the
run cache's identity includes it: a result from another machine is never reused as this one's.
Read without importing torch or jax (package metadata and /proc only).
"""

from __future__ import annotations

import platform as _platform
import re
import shutil
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

# The physics packages too: a run steps Playground's env through MuJoCo (MJX), whose builds change
# the floating-point path as much as torch's do.
PACKAGES = ("brax", "jax", "jaxlib", "mujoco", "mujoco-mjx", "numpy", "playground", "torch")
# CPU features that choose the floating-point kernels (the same model name can ship with some off).
SIMD = re.compile(r"^(sse\d?\w*|ssse3|avx\w*|fma\w*|amx\w*|f16c)$")


def _cpuinfo(given: str | None) -> str:
    """``given``, else /proc/cpuinfo's text ("" where there is none)."""
    if given is not None:
        return given
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name from /proc/cpuinfo ("unknown" where there is none)."""
    for line in _cpuinfo(cpuinfo).splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
            return value.strip()
    return _platform.processor() or "unknown"


def cpu_simd(cpuinfo: str | None = None) -> str:
    """The SIMD features of the first CPU in /proc/cpuinfo's ``flags`` line, sorted ("unknown": none read)."""
    for line in _cpuinfo(cpuinfo).splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return " ".join(sorted(f for f in value.split() if SIMD.match(f))) or "none"
    return "unknown"


def accelerator() -> str:
    """The GPUs nvidia-smi lists (names joined by "; "), or "none"."""
    if shutil.which("nvidia-smi") is None:
        return "none"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    names = [line.strip() for line in out.splitlines() if line.strip()]
    return "; ".join(names) if names else "none"


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@lru_cache(maxsize=1)
def describe() -> dict[str, Any]:
    """``platform`` of verify.json and of the run cache's identity."""
    return {"cpu": cpu_model(), "cpu_simd": cpu_simd(), "accelerator": accelerator(),
            "python": _platform.python_version(), "machine": _platform.machine(), "packages": package_versions()}
