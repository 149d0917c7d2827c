"""The GitHub Actions workflow and the pre-commit hook: their YAML, and the commands they run.

The commands are parsed out of the YAML and run (through a `brax-diff` shim on PATH) in a
fixture SLM-Lab checkout whose brax-diff.toml points at fixture Brax / Playground repos.
Where a subcommand or extractor they need is not in this checkout, those tests skip and
say what is missing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from gitfixture import add_commit, make_repo

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "examples" / "brax-diff-workflow.yml"  # a template for repositories that use brax-diff
OWN_WORKFLOWS = ROOT / ".github" / "workflows"
HOOKS = ROOT / ".pre-commit-hooks.yaml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def triggers(data: dict) -> dict:
    return data.get("on", data.get(True))  # YAML 1.1 reads a bare `on:` key as True


def steps() -> list[dict]:
    return workflow()["jobs"]["report"]["steps"]


def step(name: str) -> dict:
    found = [s for s in steps() if s.get("name") == name]
    assert len(found) == 1, f"no single step named {name!r}"
    return found[0]


def defaults_env() -> dict[str, str]:
    """The job's env with each `${{ inputs.x || 'd' }}` expression at its default d."""
    out = {}
    for key, value in workflow()["jobs"]["report"]["env"].items():
        fallback = re.fullmatch(r"\$\{\{\s*inputs\.[\w-]+\s*\|\|\s*'([^']*)'\s*\}\}", str(value))
        if fallback:
            out[key] = fallback.group(1)
        elif "${{" not in str(value):
            out[key] = str(value)
    return out


def brax_diff_commands(run: str) -> list[list[str]]:
    """`brax-diff ...` lines of a run script, split as the shell would (env vars kept)."""
    return [shlex.split(line) for line in run.splitlines() if line.strip().startswith("brax-diff ")]


# -- the workflow's shape ---------------------------------------------------------------------------


def test_workflow_triggers_schedule_and_dispatch_with_inputs():
    on = triggers(workflow())
    assert set(on) == {"schedule", "workflow_dispatch"}
    assert re.fullmatch(r"[\d*/,-]+( [\d*/,-]+){4}", on["schedule"][0]["cron"])
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["open-pr"] == {"description": inputs["open-pr"]["description"], "default": False, "type": "boolean"}
    assert inputs["brax-ref"]["default"] == "main" and inputs["playground-ref"]["default"] == "main"
    assert defaults_env()["BRAX_REF"] == "main" and defaults_env()["PLAYGROUND_REF"] == "main"


def test_workflow_steps_check_upload_pr_and_fail():
    uses = [s.get("uses", "").split("@")[0] for s in steps()]
    assert uses[:3] == ["actions/checkout", "actions/setup-python", "actions/cache"]
    assert steps()[0]["with"]["fetch-depth"] == 0
    install = step("Install brax-diff")["run"]
    assert install.rstrip().endswith('python -m pip install "$BRAX_DIFF_PACKAGE"')
    # Never a bare name from PyPI: the package is the repository variable (a git URL or a path).
    assert workflow()["jobs"]["report"]["env"]["BRAX_DIFF_PACKAGE"] == "${{ vars.BRAX_DIFF_PACKAGE }}"
    check = step("Check the reports against upstream")
    assert check["id"] == "check" and check["continue-on-error"] is True
    assert brax_diff_commands(check["run"]) == [
        ["brax-diff", "report", "--brax", "$BRAX_REF", "--playground", "$PLAYGROUND_REF", "--slm", "HEAD", "--check",
         "--format", "github", "--summary", "$BRAX_DIFF_SUMMARY"]]
    summary = step("Summarise what moved")
    assert summary["if"] == "always()" and '>> "$GITHUB_STEP_SUMMARY"' in summary["run"]
    regenerate = brax_diff_commands(step("Regenerate the reports")["run"])
    assert regenerate == [["brax-diff", "report", "--brax", "$BRAX_REF", "--playground", "$PLAYGROUND_REF",
                           "--slm", "HEAD"]]
    upload = step("Upload the reports")
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert upload["with"]["path"] == "reports/"
    pr = step("Open a pull request with the regenerated reports")
    assert pr["uses"].startswith("peter-evans/create-pull-request@")
    assert "inputs.open-pr" in pr["if"] and pr["with"]["add-paths"] == "reports/"
    assert pr["with"]["body-path"] == "${{ env.BRAX_DIFF_SUMMARY }}"
    fail = step("Fail when a classification changed")
    assert fail["if"] == "steps.check.outcome == 'failure'" and "exit 1" in fail["run"]
    assert [s.get("name") for s in steps()][-1] == "Fail when a classification changed"
    assert workflow()["permissions"] == {"contents": "write", "pull-requests": "write"}


def test_workflow_cache_path_is_where_brax_diff_caches_outside_the_checkout():
    # Issue 35: in the workspace, a commit that ships .brax-diff-cache/ planted trusted facts.
    env = workflow()["jobs"]["report"]["env"]
    assert env["BRAX_DIFF_CACHE_DIR"] == "${{ runner.temp }}/brax-diff-cache" == steps()[2]["with"]["path"]


# -- the pre-commit hook -----------------------------------------------------------------------------


def hook() -> dict:
    hooks = yaml.safe_load(HOOKS.read_text(encoding="utf-8"))
    assert [h["id"] for h in hooks] == ["brax-diff-check"]
    return hooks[0]


def test_hook_definition():
    data = hook()
    assert data["entry"] == "brax-diff report --check"
    assert data["language"] == "python" and data["pass_filenames"] is False
    # `report --slm HEAD` reads committed blobs, so the hook runs where HEAD is what matters.
    assert data["stages"] == ["pre-push", "manual"]
    # language: python installs this repository: its console script must be `brax-diff`.
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["brax-diff"] == "brax_diff.cli:main"


@pytest.mark.parametrize("path,runs", [
    ("slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml", True),
    ("slm_lab/spec/experimental/ppo/x.yml", True),
    ("slm_lab/spec/a.json", True),
    ("brax-diff.toml", True),
    ("slm_lab/agent/algorithm/ppo.py", False),
    ("docs/slm_lab/spec/a.yaml", False),
    ("reports/brax_vs_slm.md", False),
])
def test_hook_runs_only_when_spec_paths_change(path, runs):
    assert bool(re.search(hook()["files"], path)) is runs


# -- running the commands against fixture repositories ------------------------------------------------


def missing_for_report() -> str | None:
    """What this checkout lacks to run `brax-diff report`, or None."""
    from brax_diff.cli import build_parser

    missing = []
    if "report" not in build_parser().commands:
        missing.append("the `report` command (brax_diff/cli/report.py registers none)")
    for module in ("brax_diff.extractors.brax.extractor", "brax_diff.extractors.slm.extractor", "brax_diff.compare.pairing", "brax_diff.compare.rules"):
        if importlib.util.find_spec(module) is None:
            missing.append(module)
    return ", ".join(missing) or None


def upstream_fixtures():
    """The merged project's hand-written upstream-shaped fixture files, or None before merge."""
    try:
        import brax_fixtures
        import slm_fixtures
    except ImportError:
        return None
    return brax_fixtures, slm_fixtures


def missing_to_run() -> str | None:
    missing = [m for m in (missing_for_report(),) if m]
    if upstream_fixtures() is None:
        missing.append("tests/brax_fixtures.py and tests/slm_fixtures.py (upstream-shaped fixture files)")
    return ", ".join(missing) or None


# The fixture spec's variants, one per family (SLM-Lab's real names are not in the fixture spec).
FIXTURE_MAPPING = """
family_defaults:
  dm_control: [ppo_fx]
  locomotion: [ppo_fx_rs]
  manipulation: [ppo_fx_small]
variants:
  ppo_fx: {family: dm_control}
  ppo_fx_rs: {family: locomotion}
  ppo_fx_small: {family: manipulation}
"""
DM_PARAMS = "mujoco_playground/config/dm_control_suite_params.py"
SPEC_PATH = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"


@pytest.fixture()
def slm_checkout(tmp_path):
    """A fixture SLM-Lab checkout configured (brax-diff.toml) to compare with fixture upstreams."""
    brax, playground, slm = tmp_path / "brax", tmp_path / "playground", tmp_path / "slm"
    fixtures = upstream_fixtures()
    if fixtures:
        brax_files, playground_files, slm_files = (fixtures[0].BRAX_OLD, fixtures[0].PLAYGROUND,
                                                   fixtures[1].repo_files())
    else:  # enough for the plumbing test; the report tests skip
        brax_files, playground_files, slm_files = {"README.md": "b\n"}, {"README.md": "p\n"}, {SPEC_PATH: "x: 1\n"}
    make_repo(brax, [brax_files], origin="https://github.com/google/brax.git")
    make_repo(playground, [playground_files], origin="https://github.com/google-deepmind/mujoco_playground.git")
    # The cache is BRAX_DIFF_CACHE_DIR below: a checkout's settings file cannot choose it.
    config = (f'brax-repo = "{brax}"\nplayground-repo = "{playground}"\n'
              'mapping = "brax-diff-mapping.yaml"\n')
    make_repo(slm, [{**slm_files, "brax-diff.toml": config, "brax-diff-mapping.yaml": FIXTURE_MAPPING}],
              origin="https://github.com/kengz/SLM-Lab.git")
    shim = tmp_path / "bin" / "brax-diff"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m brax_diff "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, **defaults_env(), "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT), "BRAX_DIFF_CACHE_DIR": str(tmp_path / "cache"),
           "BRAX_DIFF_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_STEP_SUMMARY": str(tmp_path / "step.md")}
    return {"slm": slm, "brax": brax, "playground": playground, "env": env}


def run_step(script: str, checkout) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=checkout["slm"], env=checkout["env"],
                          capture_output=True, text=True, timeout=300)


def regenerate_reports(checkout) -> list[Path]:
    done = run_step(step("Regenerate the reports")["run"], checkout)
    assert done.returncode == 0, done.stderr
    written = sorted(p.relative_to(checkout["slm"]) for p in (checkout["slm"] / "reports").rglob("*") if p.is_file())
    assert written, "the regenerate step wrote nothing under reports/ (the artifact path)"
    return written


def test_workflow_commands_run_against_fixture_repos(slm_checkout):
    missing = missing_to_run()
    if missing:
        pytest.skip(f"cannot run the workflow's `brax-diff report` steps: this checkout lacks {missing}; "
                    "rerun after merge")
    written = regenerate_reports(slm_checkout)
    assert {p.suffix for p in written} == {".md", ".json"}
    check = run_step(step("Check the reports against upstream")["run"], slm_checkout)
    assert check.returncode == 0, check.stdout + check.stderr
    # Upstream moves: Playground's dm_control discount changes, so the reports are stale.
    params = upstream_fixtures()[0].PLAYGROUND[DM_PARAMS]
    assert params.count("discounting=0.99,") == 1
    add_commit(slm_checkout["playground"], {DM_PARAMS: params.replace("discounting=0.99,", "discounting=0.9,")})
    moved = run_step(step("Check the reports against upstream")["run"], slm_checkout)
    assert moved.returncode == 1, moved.stdout + moved.stderr  # 1: stale reports (2 would be bad input)
    # Each move is an annotation on a report file; the summary reaches the job summary.
    annotations = moved.stdout.splitlines()
    assert annotations and all(re.match(r"^::(warning|error) file=reports/\w+\.md,line=\d+,title=", a)
                               for a in annotations)
    assert any("::discount (dm_control): Brax 0.99 → 0.9" in a for a in annotations)
    assert run_step(step("Summarise what moved")["run"], slm_checkout).returncode == 0
    job_summary = (slm_checkout["slm"].parent / "step.md").read_text()
    assert job_summary.startswith("## brax-diff: what moved\n") and "| `discount` | dm_control | Brax `0.99` → `0.9` |" \
        in job_summary


def test_workflow_check_stays_green_when_only_commits_move(slm_checkout):
    missing = missing_to_run()
    if missing:
        pytest.skip(f"cannot run the workflow's `brax-diff report` steps: this checkout lacks {missing}; "
                    "rerun after merge")
    regenerate_reports(slm_checkout)
    add_commit(slm_checkout["slm"], {}, message="commit the regenerated reports")  # as the workflow's PR does
    add_commit(slm_checkout["brax"], {"README.md": "docs only\n"}, message="upstream docs")
    check = run_step(step("Check the reports against upstream")["run"], slm_checkout)
    assert check.returncode == 0, check.stdout + check.stderr


def test_hook_entry_runs_against_fixture_repos(slm_checkout):
    missing = missing_to_run()
    if missing:
        pytest.skip(f"cannot run the hook's `brax-diff report --check`: this checkout lacks {missing}; rerun after merge")
    regenerate_reports(slm_checkout)
    done = run_step(hook()["entry"], slm_checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    spec = upstream_fixtures()[1].SPEC
    assert spec.count("gamma: 0.995") == 1
    add_commit(slm_checkout["slm"], {SPEC_PATH: spec.replace("gamma: 0.995", "gamma: 0.5")}, message="spec change")
    changed = run_step(hook()["entry"], slm_checkout)
    assert changed.returncode == 1, changed.stdout + changed.stderr


def test_every_command_in_the_yaml_is_report():
    """The YAML runs `report` only; the two checks (workflow, hook) both pass --check."""
    commands = [c for s in steps() if "run" in s for c in brax_diff_commands(s["run"])]
    commands.append(shlex.split(hook()["entry"]))
    assert [c[1] for c in commands] == ["report", "report", "report"]
    assert ["--check" in c for c in commands] == [True, False, True]


def test_step_runner_reaches_this_checkouts_cli_with_the_jobs_env(slm_checkout):
    """The machinery the two tests above use: `brax-diff` on PATH is this checkout, env defaults set."""
    done = run_step('brax-diff --help && echo "refs: $BRAX_REF $PLAYGROUND_REF"', slm_checkout)
    assert done.returncode == 0, done.stderr
    assert "history" in done.stdout and done.stdout.rstrip().endswith("refs: main main")
    settings = subprocess.run([sys.executable, "-c", "from brax_diff.config import load_settings; "
                               "s = load_settings(); print(s.brax_repo, s.playground_repo)"],
                              cwd=slm_checkout["slm"], env=slm_checkout["env"], capture_output=True, text=True)
    assert settings.stdout.split() == [str(slm_checkout["brax"]), str(slm_checkout["playground"])]


def test_install_step_refuses_to_guess_a_package(slm_checkout):
    checkout = {**slm_checkout, "env": {**slm_checkout["env"], "BRAX_DIFF_PACKAGE": ""}}
    done = run_step(step("Install brax-diff")["run"], checkout)
    assert done.returncode == 1
    assert done.stdout.startswith("::error::set the repository variable BRAX_DIFF_PACKAGE to brax-diff's git URL")


# -- where the workflows live, and what they pin ---------------------------------------------------


def _git_here(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def test_this_repository_runs_its_own_tests_and_not_the_template():
    """The template would run here weekly and fail (no SLM-Lab); this repository's workflow runs .ci/run."""
    own = sorted(p.name for p in OWN_WORKFLOWS.iterdir())
    assert own == ["ci.yml"]
    ci = yaml.safe_load((OWN_WORKFLOWS / "ci.yml").read_text(encoding="utf-8"))
    assert set(triggers(ci)) == {"push", "pull_request", "workflow_dispatch"}
    runs = [s["run"] for job in ci["jobs"].values() for s in job["steps"] if "run" in s]
    assert runs[-1] == "bash .ci/run"
    assert ci["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("path", [WORKFLOW, OWN_WORKFLOWS / "ci.yml"], ids=["template", "ci"])
def test_every_action_is_pinned_by_a_full_commit_sha(path):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    uses = [s["uses"] for job in data["jobs"].values() for s in job["steps"] if "uses" in s]
    assert uses
    for action in uses:
        name, _, ref = action.partition("@")
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{path.name}: {action} is not pinned by commit"
    text = path.read_text(encoding="utf-8")
    for line in text.splitlines():  # each pin says which release it is, for the next update
        if "uses:" in line:
            assert re.search(r"@[0-9a-f]{40}\s+# v\d+(\.\d+)*$", line), line


# What users copy to install brax-diff or run its hook: every pin must exist.
PIN_SOURCES = [ROOT / "README.md", ROOT / "docs" / "history.md", HOOKS, WORKFLOW]
INSTALL_PIN = re.compile(r"git\+https://github\.com/[\w.-]+/brax-diff@([\w./-]+)")
HOOK_REV = re.compile(r"^\s*#?\s*rev:\s*([\w./-]+)", re.M)


def documented_pins() -> list[tuple[str, str]]:
    pins = []
    for path in PIN_SOURCES:
        text = path.read_text(encoding="utf-8")
        pins += [(path.name, pin) for pin in INSTALL_PIN.findall(text)]
        pins += [(path.name, pin) for pin in HOOK_REV.findall(text)]
    return pins


def test_install_pins_exist_in_this_repository():
    pins = documented_pins()
    assert {name for name, _ in pins} >= {"README.md", "history.md", ".pre-commit-hooks.yaml",
                                          "brax-diff-workflow.yml"}
    for name, pin in pins:
        if pin.isupper():  # a placeholder the text names as one (COMMIT)
            continue
        found = _git_here("rev-parse", "--verify", "--quiet", f"{pin}^{{commit}}")
        if found.returncode != 0 and pin == "main":  # a clone of another branch still has origin's main
            found = _git_here("rev-parse", "--verify", "--quiet", "origin/main^{commit}")
        assert found.returncode == 0, f"{name} pins brax-diff at {pin!r}, which this repository does not have"


def test_the_pin_check_catches_a_pin_that_does_not_exist():
    assert INSTALL_PIN.findall("pip install git+https://github.com/OWNER/brax-diff@v0.2.0") == ["v0.2.0"]
    assert HOOK_REV.findall("#     rev: v0.2.0  # note") == ["v0.2.0"]
    assert _git_here("rev-parse", "--verify", "--quiet", "no-such-pin-0.0^{commit}").returncode != 0
