"""The README's set-up, run as written in a fresh virtual environment on a copy of this
checkout: `pip install . && brax-diff report` with the upstream URLs pointed at fixture
repositories through brax-diff.toml, then the SLM-Lab line inside a fixture SLM-Lab checkout.

It pip-installs brax-diff and its base dependencies from the configured package index (about
half a minute with a warm wheel cache) and runs the real extractors.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from upstream_repos import MAPPING_FILE, make_upstreams

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.install


def readme_commands() -> list[str]:
    """The command lines of the README's set-up section's ```bash blocks."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set-up: the two commands", 1)[1].split("\n## ", 1)[0]
    return [line for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines() if line]


def copy_checkout(target: Path) -> Path:
    """This checkout's files as a fresh clone would have them (tracked and new, not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source = ROOT / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / rel)
    return target


def in_venv(venv_dir: Path, line: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    script = f". {venv_dir}/bin/activate && {line}"
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_readme_setup_runs_as_written_in_a_fresh_venv(tmp_path):
    install, tests, slm_line = readme_commands()
    assert install == "pip install . && brax-diff report"
    assert tests == "pip install -e '.[test,verify,distributed]' && python -m pytest -q"
    assert re.fullmatch(r"pip install (\S+) && brax-diff report --slm HEAD", slm_line)

    paths = make_upstreams(tmp_path / "upstream")
    checkout = copy_checkout(tmp_path / "brax-diff")
    # A settings file names files inside its checkout only: the mapping is copied in.
    shutil.copyfile(paths["slm"] / MAPPING_FILE, checkout / MAPPING_FILE)
    (checkout / "brax-diff.toml").write_text(
        f'brax-repo = "file://{paths["brax"]}"\nplayground-repo = "file://{paths["playground"]}"\n'
        f'slm-repo = "file://{paths["slm"]}"\nmapping = "{MAPPING_FILE}"\n', encoding="utf-8")
    venv_dir = tmp_path / "venv"
    venv.create(venv_dir, with_pip=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["BRAX_DIFF_CACHE_DIR"] = str(tmp_path / "cache")

    done = in_venv(venv_dir, install, checkout, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    families = ("dm_control", "locomotion", "manipulation")
    written = [f"wrote reports/{f}.{ext}" for f in families for ext in ("json", "md")]
    assert [line for line in done.stderr.splitlines() if line.startswith("wrote ")] == written
    report = json.loads((checkout / "reports" / "dm_control.json").read_text())
    slm = report["sources"][2]
    assert (slm["ref"], slm["repo"]) == ("master", "https://github.com/kengz/SLM-Lab")  # the URL's origin link
    assert {s["ref"] for s in report["sources"][:2]} == {"main"}
    clones = sorted(p.name for p in (tmp_path / "cache" / "repos").iterdir() if not p.name.endswith(".lock"))
    assert len(clones) == 3 and all(name.endswith(".git") for name in clones)  # cloned once, into the cache
    assert shutil.which("brax-diff", path=str(venv_dir / "bin")) is not None
    # The static install plans a verification (without the simulated power, which needs numpy) and
    # says in one line which extra training needs.
    plan = in_venv(venv_dir, "brax-diff verify --plan --env BallInCup --seeds 2 --set max_frame=100000", checkout, env)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert plan.stdout.startswith("verify plan: ") and "Traceback" not in plan.stderr
    assert "power: not simulated (the simulation needs numpy, in the verify extra: pip install 'brax-diff[verify]')" \
        in plan.stdout
    train = in_venv(venv_dir, "brax-diff verify --env BallInCup --seeds 2 --set max_frame=100000", checkout, env)
    errors = [line for line in train.stderr.splitlines() if line.startswith("error: ")]
    assert train.returncode == 2 and "Traceback" not in train.stderr and len(errors) == 1
    assert errors[0].startswith("error: training needs the verify extra (") and errors[0].endswith(
        "pip install 'brax-diff[verify]'; --plan works without it")
    # Every other command runs on the static install too (no numpy, torch or jax there).
    for line in ("brax-diff rules --format md", "brax-diff extract brax --env BallInCup",
                 "brax-diff extract slm --set max_frame=1000", "brax-diff history --slm HEAD",
                 "brax-diff fix --family dm_control --diff --quiet"):
        done = in_venv(venv_dir, line, checkout, env)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (line, done.stderr[-2000:])
    # The fixture publishes no results: one error line, no missing module.
    done = in_venv(venv_dir, "brax-diff report --family all --results slm --output results-out", checkout, env)
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == (
        "error: --results: docs/BENCHMARKS.md not found in SLM-Lab at master"), done.stderr[-2000:]

    # The SLM-Lab line, in a fixture SLM-Lab checkout whose brax-diff.toml points at the fixture upstreams.
    slm_checkout = paths["slm"]
    (slm_checkout / "brax-diff.toml").write_text(
        f'brax-repo = "file://{paths["brax"]}"\nplayground-repo = "file://{paths["playground"]}"\n'
        f'mapping = "{MAPPING_FILE}"\n', encoding="utf-8")
    path_given = slm_line.split()[2]
    done = in_venv(venv_dir, slm_line.replace(path_given, str(checkout), 1), slm_checkout, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if line.startswith("wrote ")] == written
    report = json.loads((slm_checkout / "reports" / "dm_control.json").read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=slm_checkout, capture_output=True, text=True).stdout
    assert (report["sources"][2]["ref"], report["sources"][2]["commit"]) == ("HEAD", head.strip())
