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
    # every module of the tree, at its place under brax_diff/: a subpackage missing from pyproject's
    # list installs a brax-diff that fails on its first import
    for module in sorted(ROOT.glob("brax_diff/**/*.py")):
        assert module.relative_to(ROOT).as_posix() in names
    for module in sorted(ROOT.glob("extractors/**/*.py")):
        assert f"brax_diff/{module.relative_to(ROOT).as_posix()}" in names
    for template in sorted(ROOT.glob("templates/*.j2")):
        assert f"brax_diff/templates/{template.name}" in names
    for data in sorted(ROOT.glob("brax_diff/data/*")):
        assert data.relative_to(ROOT).as_posix() in names
    assert not any(n.startswith("extractors/") for n in names)


def test_the_installed_package_imports_its_own_extractors(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                             capture_output=True, text=True, timeout=300, env=clean)
    assert install.returncode == 0, install.stderr
    probe = ("import brax_diff, brax_diff.extractors.brax.extractor as b, brax_diff.extractors.slm.extractor as s; "
             "print(b.__file__); print(s.__file__); print(brax_diff.EXTRACTORS_DIR)")
    done = subprocess.run([str(python), "-I", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=clean)
    assert done.returncode == 0, done.stderr
    brax_file, slm_file, folder = done.stdout.splitlines()
    site = Path(brax_file).parent.parent.parent
    assert Path(brax_file) == site / "extractors" / "brax" / "extractor.py"
    assert Path(slm_file) == site / "extractors" / "slm" / "extractor.py"
    assert str(site).startswith(str(env_dir)) and Path(folder) == site / "extractors"


def test_a_checkout_imports_its_own_extractors_beside_another_checkouts_editable_install(tmp_path):
    """An editable install of another checkout maps ``brax_diff.extractors`` to that checkout's
    folder (a finder after the path finder); this checkout's code must still read its own."""
    other = tmp_path / "other" / "extractors"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    script = f"""
import importlib.util, sys

class OtherCheckout:  # what setuptools' editable finder does for another checkout
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "brax_diff.extractors":
            return importlib.util.spec_from_file_location(name, {str(other / "__init__.py")!r},
                                                          submodule_search_locations=[{str(other)!r}])

sys.meta_path.append(OtherCheckout())
import brax_diff.extractors
print(brax_diff.extractors.__file__)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "extractors" / "__init__.py")
