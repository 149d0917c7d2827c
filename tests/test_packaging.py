"""The wheel: what it puts into site-packages, and that the installed package imports its
extractors from inside itself (never a top-level ``extractors``, a name another project on the
package index has)."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = sorted(out.glob("brax_diff-*.whl"))
    assert len(found) == 1
    return found[0]


def test_the_wheel_ships_the_extractors_inside_the_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/", 1)[0] for n in names} == {"brax_diff", f"{wheel.name.split('-')[0]}-0.2.0.dist-info"}
    for module in ("brax.py", "slm.py", "flow.py", "mapping.py", "__init__.py"):
        assert f"brax_diff/extractors/{module}" in names
    assert "brax_diff/templates/report.md.j2" in names
    assert not any(n.startswith("extractors/") for n in names)


def test_the_installed_package_imports_its_own_extractors(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                             capture_output=True, text=True, timeout=300, env=clean)
    assert install.returncode == 0, install.stderr
    probe = ("import brax_diff, brax_diff.extractors.brax as b, brax_diff.extractors.slm as s; "
             "print(b.__file__); print(s.__file__); print(brax_diff.EXTRACTORS_DIR)")
    done = subprocess.run([str(python), "-I", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=clean)
    assert done.returncode == 0, done.stderr
    brax_file, slm_file, folder = done.stdout.splitlines()
    site = Path(brax_file).parent.parent
    assert Path(brax_file) == site / "extractors" / "brax.py" and Path(slm_file).parent == site / "extractors"
    assert str(site).startswith(str(env_dir)) and Path(folder) == site / "extractors"


def test_a_source_checkout_imports_its_own_extractors_whatever_is_installed():
    """An editable install of another checkout maps brax_diff.extractors to its folder: the
    brax_diff of this checkout must still run with this checkout's extractors."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", "import brax_diff.extractors.slm as s; print(s.__file__)"],
                          cwd=root.parent, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == root / "extractors" / "slm.py"
