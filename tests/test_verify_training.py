"""Real tiny trainings on a MuJoCo Playground environment (CPU).

All tests share one set of shapes (CartpoleBalance, 16 envs x 10 steps, 50-step episodes,
policy 32x32, value 64x64) and one persistent XLA compilation cache inside this module's tmp
dir, so the environment compiles once. The Brax reference run costs about 2 CPU-minutes of
compilation on its own: the price of testing Brax's own trainer end to end.
"""

from __future__ import annotations

import json

import pytest

for _module in ("torch", "jax", "mujoco_playground", "brax", "matplotlib"):
    pytest.importorskip(_module, reason=f"training tests need the verify extra ({_module})")

from test_verify_plan import BRAX_VALUES, SLM_VALUES, extraction  # noqa: E402

from brax_diff.verify import build_plan, run_plan, stats  # noqa: E402
from brax_diff.verify import runner as runner_module  # noqa: E402
from brax_diff.verify.cache import FAILED, OK  # noqa: E402

pytestmark = pytest.mark.training

ENV = "CartpoleBalance"
BUDGET = 1600  # 10 updates of 160 transitions
OVERRIDES = {"episode_length": 50}


def plan_for(seeds: int, budget: int = BUDGET, keys=("learning_rate",), reference: bool = False):
    return build_plan(extraction("brax", BRAX_VALUES), extraction("slm", SLM_VALUES), envs=[ENV], seeds=seeds,
                      budget=budget, keys=list(keys), overrides=OVERRIDES, reference=reference)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("verify")


@pytest.fixture(scope="module")
def first_result(workdir):
    lines: list[str] = []
    result = run_plan(plan_for(3), workdir / "cache", progress=False, output_dir=workdir / "out", log=lines.append)
    return result, lines


def test_pipeline_end_to_end_on_playground(first_result, workdir):
    result, lines = first_result
    assert lines == [runner_module.CPU_HINT]  # said once: CPU, and a smaller budget
    assert result.device == "cpu"
    assert [(r.spec.arm, r.spec.seed) for r in result.results] == [
        ("baseline", 0), ("variant:learning_rate", 0), ("baseline", 1), ("variant:learning_rate", 1),
        ("baseline", 2), ("variant:learning_rate", 2)]
    for run in result.results:
        assert run.status == OK, run.error
        assert run.env_steps == BUDGET
        assert len(run.scores) == BUDGET // (16 * 50)  # one point per finished round of 50-step episodes
        assert 0.0 < run.final_score <= 50.0  # CartpoleBalance rewards are in [0, 1]
    entry = result.verdicts["learning_rate"]
    assert entry["verdict"] in (stats.SUPPORTED, stats.NOT_SUPPORTED, stats.INCONCLUSIVE)
    assert entry["seeds"] == 3 and len(entry["ci"]) == 2 and 0.0 <= entry["poi"] <= 1.0
    assert entry["plot"] == f"plots/{ENV}-learning_rate.png"
    png = (workdir / "out" / entry["plot"]).read_bytes()
    assert png.startswith(b"\x89PNG")
    saved = json.loads((workdir / "out" / "verify.json").read_text())
    assert saved["verdicts"]["learning_rate"]["verdict"] == entry["verdict"]
    assert len(saved["runs"]) == 6 and {r["status"] for r in saved["runs"]} == {"ok"}
    assert len(list((workdir / "cache" / "runs").glob("*.json"))) == 6


def test_identical_settings_are_not_a_significant_difference(first_result, workdir):
    """Seeds 3-5 of the baseline against seeds 0-2 (cached): same settings, no supported effect."""
    result = run_plan(plan_for(6), workdir / "cache", progress=False, log=lambda line: None)
    baseline = [r.final_score for r in result.results if r.spec.arm == "baseline"]
    cached = {(r.spec.arm, r.spec.seed): r.final_score for r in first_result[0].results}
    assert baseline[:3] == [cached[("baseline", s)] for s in range(3)]  # reused, not rerun
    comparison = stats.compare(baseline[3:], baseline[:3])
    assert comparison.verdict != stats.SUPPORTED, comparison


def test_interrupted_verify_resumes_without_rerunning_finished_runs(workdir, monkeypatch):
    plan = plan_for(2, budget=2 * BUDGET, keys=())
    assert len(plan.runs) == 2
    calls: list[tuple[str, int]] = []
    original = runner_module.Runner.run

    def interrupted_after_one(self, spec):
        if calls:
            raise KeyboardInterrupt
        calls.append((spec.arm, spec.seed))
        return original(self, spec)

    monkeypatch.setattr(runner_module.Runner, "run", interrupted_after_one)
    with pytest.raises(KeyboardInterrupt):
        run_plan(plan, workdir / "cache", progress=False, log=lambda line: None)
    assert calls == [("baseline", 0)]

    rerun: list[tuple[str, int]] = []

    def counting(self, spec):
        rerun.append((spec.arm, spec.seed))
        return original(self, spec)

    monkeypatch.setattr(runner_module.Runner, "run", counting)
    result = run_plan(plan, workdir / "cache", progress=True, log=lambda line: None)
    assert rerun == [("baseline", 1)]  # seed 0 came from the cache
    assert [r.status for r in result.results] == [OK, OK]


def test_a_crashing_run_is_recorded_as_failed_not_dropped(workdir, monkeypatch):
    from brax_diff.verify import ppo_torch

    real_train = ppo_torch.train

    def nan_for_zero_lr(env, settings, *args, **kwargs):
        if settings.learning_rate == 0.0:
            raise FloatingPointError("NaN or inf at update 3 (loss nan, reward 0.5)")
        return real_train(env, settings, *args, **kwargs)

    monkeypatch.setattr(ppo_torch, "train", nan_for_zero_lr)
    plan = plan_for(2, budget=3 * BUDGET)
    result = run_plan(plan, workdir / "cache", progress=False, output_dir=workdir / "failed", log=lambda line: None)
    failed = [r for r in result.results if r.status == FAILED]
    assert [(r.spec.arm, r.spec.seed) for r in failed] == [("variant:learning_rate", 0), ("variant:learning_rate", 1)]
    assert failed[0].error == "FloatingPointError: NaN or inf at update 3 (loss nan, reward 0.5)"
    entry = result.verdicts["learning_rate"]
    assert entry["verdict"] == stats.INCONCLUSIVE and entry["failed_runs"] == 2
    assert "FAILED CartpoleBalance variant:learning_rate seed 0: FloatingPointError" in runner_module.render(result)
    saved = json.loads((workdir / "failed" / "verify.json").read_text())
    assert sorted(r["status"] for r in saved["runs"]) == ["failed", "failed", "ok", "ok"]
    # a recorded failure is kept on resume, and retried only when asked
    monkeypatch.setattr(ppo_torch, "train", real_train)
    again = run_plan(plan, workdir / "cache", progress=False, log=lambda line: None)
    assert [r.status for r in again.results].count(FAILED) == 2
    retried = run_plan(plan, workdir / "cache", progress=False, retry_failed=True, log=lambda line: None)
    assert [r.status for r in retried.results] == [OK] * 4


def test_brax_reference_arguments(first_result):
    """What the reference run hands Brax's trainer, built without training."""
    from brax_diff.verify import brax_reference

    plan = plan_for(1, reference=True)
    settings = next(r for r in plan.runs if r.arm == "reference").settings
    env, kwargs = brax_reference.train_kwargs(settings, ENV, BUDGET, 0)
    assert kwargs["num_envs"] == 16 and kwargs["batch_size"] == 16 and kwargs["num_minibatches"] == 2
    assert kwargs["episode_length"] == 50 and kwargs["num_timesteps"] == BUDGET
    assert kwargs["clipping_epsilon"] == 0.3 and kwargs["learning_rate"] == 0.0
    networks = kwargs["network_factory"](env.observation_size, env.action_size)
    assert networks.policy_network is not None and networks.value_network is not None
    assert env.__class__.__name__ == "Balance"


def test_brax_reference_run(workdir):
    """Brax's own trainer end to end (about 2 CPU-minutes, most of it XLA compiling)."""
    plan = build_plan(extraction("brax", dict(BRAX_VALUES, learning_rate=1e-3)), extraction("slm", SLM_VALUES),
                      envs=[ENV], seeds=1, budget=BUDGET, keys=[], overrides=OVERRIDES)
    result = run_plan(plan, workdir / "cache", progress=False, log=lambda line: None)
    reference = next(r for r in result.results if r.spec.arm == "reference")
    assert reference.status == OK, reference.error
    assert reference.steps[0] == 0 and reference.env_steps >= BUDGET
    assert result.reference[ENV]["brax_finished"] == 1


def test_cli_verify_reuses_the_cache_and_prints_verdicts(first_result, workdir, tmp_path, capsys):
    from test_verify_plan import write_pair

    from brax_diff.cli import main

    code = main(["verify", *write_pair(tmp_path), "--seeds", "3", "--budget", str(BUDGET), "--keys", "learning_rate",
                 "--set", "episode_length=50", "--no-reference", "--cache", str(workdir / "cache"),
                 "--output", str(tmp_path / "out"), "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.strip() == runner_module.CPU_HINT
    lines = captured.out.splitlines()
    assert lines[0].startswith("verify: 6 runs on cpu in ") and lines[0].endswith("(0 failed)")
    verdict = first_result[0].verdicts["learning_rate"]["verdict"]
    assert lines[1].split()[:2] == ["learning_rate", verdict.split()[0]]
    assert lines[-1] == f"results: {tmp_path / 'out' / 'verify.json'}"
    saved = json.loads((tmp_path / "out" / "verify.json").read_text())
    assert [r["final_score"] for r in saved["runs"]] == [r.final_score for r in first_result[0].results]
