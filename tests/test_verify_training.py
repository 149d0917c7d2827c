"""Real tiny trainings on a MuJoCo Playground environment (CPU).

All tests share one set of shapes (CartpoleBalance, 16 envs x 10 steps, 50-step episodes,
policy 32x32, value 64x64, 4 evaluation episodes) and one persistent XLA compilation cache
inside this module's tmp dir, so the environment compiles once. The Brax reference run costs
about 2 CPU-minutes of compilation on its own: the price of testing Brax's own trainer end to
end, scored by the same evaluator as the PyTorch arms.
"""

from __future__ import annotations

import json

import pytest

for _module in ("torch", "jax", "mujoco_playground", "brax", "matplotlib", "scipy"):
    pytest.importorskip(_module, reason=f"training tests need the verify extra ({_module})")

from test_verify_plan import BRAX_VALUES, SLM_VALUES, extraction  # noqa: E402

from brax_diff import __version__  # noqa: E402
from brax_diff.verify import build_plan, run_plan, stats  # noqa: E402
from brax_diff.verify import runner as runner_module  # noqa: E402
from brax_diff.verify.cache import FAILED, OK  # noqa: E402

pytestmark = pytest.mark.training

ENV = "CartpoleBalance"
BUDGET = 1600  # 10 updates of 160 transitions; all_fixes' 320-step updates: 5
OVERRIDES = {"episode_length": 50}
# Brax's update is 16 envs x 10 steps x 2 minibatches = 320 steps: 2 checkpoints need 2 x 5 of them
REFERENCE_BUDGET = 2 * BUDGET
# Brax's resets as Playground's DM Control config has them: every env after each update (20 env steps per env)
BRAX_LEARNING = dict(BRAX_VALUES, learning_rate=1e-3, num_resets_per_eval=10, env_steps_between_resets=20,
                     action_repeat=1)


def plan_for(seeds: int, budget: int = BUDGET, keys=("learning_rate",), arms=("gap", "loo"), reference=False,
             brax_values=BRAX_VALUES, engine="single"):
    return build_plan(extraction("brax", brax_values), extraction("slm", SLM_VALUES), envs=[ENV], seeds=seeds,
                      budget=budget, keys=list(keys), overrides=OVERRIDES, reference=reference, arms=arms, evals=2,
                      eval_envs=4, engine=engine)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("verify")


@pytest.fixture(scope="module")
def first_result(workdir):
    lines: list[str] = []
    result = run_plan(plan_for(4), workdir / "cache", progress=False, output_dir=workdir / "out", log=lines.append)
    return result, lines


def test_pipeline_end_to_end_on_playground(first_result, workdir):
    result, lines = first_result
    assert lines == [runner_module.CPU_HINT]
    assert result.device == "cpu"
    assert [(r.spec.arm, r.spec.seed) for r in result.results] == [
        (arm, seed) for seed in range(4) for arm in ("baseline", "all_fixes", "loo:learning_rate")]
    for run in result.results:
        assert run.status == OK, run.error
        assert run.env_steps == BUDGET and run.steps == [0, 800, 1600]  # every arm scored at the same steps
        assert run.score == run.scores[-1] and 0.0 < run.score <= 50.0  # 50-step episodes, rewards in [0, 1]
        assert run.score_kind == "eval_return/stochastic/4_episodes"
    by_seed = {}
    for run in result.results:
        by_seed.setdefault(run.spec.seed, []).append(run.scores[0])
    for seed, before_training in by_seed.items():
        # at step 0, baseline and loo:learning_rate share policy weights and evaluation episodes:
        # the same score; all_fixes keeps them too (no key here changes the policy's shape)
        assert len(set(before_training)) == 1, (seed, before_training)
    (entry,) = [v for v in result.verdicts if v["family"] == "loo"]
    assert entry["arm"] == "all_fixes" and entry["vs"] == "loo:learning_rate" and entry["key"] == "learning_rate"
    assert entry["seeds"] == 4 and entry["verdict"] in (stats.SUPPORTED, stats.NOT_SUPPORTED, stats.INCONCLUSIVE)
    assert result.plots == {"loo:learning_rate": f"plots/{ENV}-loo-learning_rate.png", f"gap:{ENV}": f"plots/{ENV}-gap.png"}
    png = (workdir / "out" / result.plots["loo:learning_rate"]).read_bytes()
    assert png.startswith(b"\x89PNG")
    saved = json.loads((workdir / "out" / "verify.json").read_text())
    assert {r["status"] for r in saved["runs"]} == {"ok"} and len(saved["runs"]) == 12
    for run in saved["runs"]:
        assert {"arm", "env", "seed", "env_steps", "score", "score_kind", "status"} <= set(run)
    assert saved["throughput"]["torch-ppo"]["runs"] == 12
    # loo:learning_rate puts Brax's learning rate back to SLM-Lab's: the baseline's settings, one run
    assert len(list((workdir / "cache" / "runs").glob("*.json"))) == 8


def test_the_same_seed_and_settings_give_the_same_run(first_result, workdir):
    """A rerun outside the cache reproduces a run exactly: scores are a function of the inputs."""
    result, _ = first_result
    again = run_plan(plan_for(1), workdir / "rerun-cache", progress=False, log=lambda line: None)
    original = {(r.spec.arm, r.spec.seed): r.scores for r in result.results}
    for run in again.results:
        assert run.scores == original[(run.spec.arm, 0)]


def test_the_jax_policy_computes_the_torch_policys_action():
    import jax
    import numpy as np
    import torch

    from brax_diff.verify import ppo_torch
    from brax_diff.verify.evaluate import make_policy, policy_params
    from brax_diff.verify.settings import TrainerSettings

    for changes in ({}, {"action_distribution": "tanh_normal", "std_transform": "softplus", "std_min": 0.001,
                         "std_max": None, "activation": "relu"}):
        settings = TrainerSettings(num_envs=4, unroll_length=5, policy_hidden_layers=(8, 8),
                                   value_hidden_layers=(8,), **changes)
        agent = ppo_torch.PPO(settings, 5, 2, 10.0, seed=3)
        agent.observe(torch.randn(64, 5) * 3 + 1)  # non-trivial running statistics
        obs = torch.randn(7, 5)
        with torch.no_grad():
            dist = agent.policy(agent.obs_stats.normalize(obs))
        mode = torch.tanh(dist.loc) if settings.action_distribution == "tanh_normal" else dist.loc.clamp(-1, 1)
        params = policy_params(agent)
        action, _ = make_policy(settings, deterministic=True)(params)(np.asarray(obs), jax.random.PRNGKey(0))
        assert np.allclose(np.asarray(action), mode.numpy(), atol=1e-5)
        # stochastic: loc + std * noise, the same std transform
        key = jax.random.PRNGKey(1)
        sampled, _ = make_policy(settings, deterministic=False)(params)(np.asarray(obs), key)
        noise = np.asarray(jax.random.normal(key, (7, 2)))
        raw = dist.loc.numpy() + dist.std.numpy() * noise
        expected = np.tanh(raw) if settings.action_distribution == "tanh_normal" else np.clip(raw, -1, 1)
        assert np.allclose(np.asarray(sampled), expected, atol=1e-5)


def test_training_envs_reset_with_brax_trainers_keys():
    import jax
    import numpy as np

    from brax_diff.verify.keys import brax_keys, training_reset_keys

    keys = brax_keys(7)
    # ppo.train: PRNGKey(seed) -> (global, local); local folded with process 0, split in 3: key_env is the 2nd
    global_key, local_key = jax.random.split(jax.random.PRNGKey(7))
    _, key_env, eval_key = jax.random.split(jax.random.fold_in(local_key, 0), 3)
    assert np.array_equal(keys["key_env"], key_env) and np.array_equal(keys["eval_key"], eval_key)
    assert np.array_equal(training_reset_keys(7, 4), jax.random.split(key_env, 4))


def test_reset_all_restarts_each_seeds_block_from_brax_trainers_next_keys():
    import jax.numpy as jnp
    import torch

    from brax_diff.verify.envs import PlaygroundVecEnv
    from brax_diff.verify.keys import next_reset_keys, training_reset_keys

    env = PlaygroundVecEnv(ENV, 16, episode_length=50)  # this module's shapes: compiled once
    first = env.reset([3, 4])  # two seeds of 8 envs, as the seed-batched trainer steps them
    again = env.reset_all()
    keys = jnp.concatenate([next_reset_keys(training_reset_keys(seed, 8)) for seed in (3, 4)])
    expected = env._to_torch(env._reset(keys).obs)
    assert torch.equal(again, expected) and not torch.equal(again, first)
    assert torch.equal(env.reset([3, 4]), first)  # a new run starts the chain again


def test_interrupted_verify_resumes_without_rerunning_finished_runs(workdir, monkeypatch):
    # the batched engine; all_fixes moves learning_rate: a run of its own
    plan = plan_for(2, budget=2 * BUDGET, arms=("gap",), engine="batched")
    assert [r.arm for r in plan.runs] == ["baseline", "all_fixes"] * 2
    calls: list[tuple[str, list[int]]] = []
    original = runner_module.Runner.run_unit

    def interrupted_after_one(self, specs):
        if calls:
            raise KeyboardInterrupt
        calls.append((specs[0].arm, [s.seed for s in specs]))
        return original(self, specs)

    monkeypatch.setattr(runner_module.Runner, "run_unit", interrupted_after_one)
    with pytest.raises(KeyboardInterrupt):
        run_plan(plan, workdir / "cache", progress=False, log=lambda line: None)
    assert calls == [("baseline", [0, 1])]  # one unit: the arm's seeds batched

    rerun: list[tuple[str, list[int]]] = []

    def counting(self, specs):
        rerun.append((specs[0].arm, [s.seed for s in specs]))
        return original(self, specs)

    monkeypatch.setattr(runner_module.Runner, "run_unit", counting)
    result = run_plan(plan, workdir / "cache", progress=True, log=lambda line: None)
    assert rerun == [("all_fixes", [0, 1])]  # the baseline's seeds came from the cache
    assert [r.status for r in result.results] == [OK] * 4
    # a batched seed's result does not depend on the seeds beside it: seed 0 alone, bit for bit
    alone = run_plan(plan_for(1, budget=2 * BUDGET, arms=("gap",), engine="batched"), workdir / "alone-cache",
                     progress=False, log=lambda line: None)
    assert [r.scores for r in alone.results] == [r.scores for r in result.results if r.spec.seed == 0]


def test_a_crashing_run_is_recorded_as_failed_not_dropped(workdir, monkeypatch):
    from brax_diff.verify import ppo_batched

    real_train = ppo_batched.train

    def nan_without_the_fix(env, settings, *args, **kwargs):
        if settings.learning_rate == 1e-3 and settings.unrolls_per_update == 2:  # loo:learning_rate
            raise FloatingPointError("NaN or inf at update 3 (loss nan, reward 0.5)")
        return real_train(env, settings, *args, **kwargs)

    monkeypatch.setattr(ppo_batched, "train", nan_without_the_fix)
    plan = plan_for(2, budget=3 * BUDGET, keys=("learning_rate", "unrolls_per_update"), engine="batched")
    result = run_plan(plan, workdir / "cache", progress=False, output_dir=workdir / "failed", log=lambda line: None)
    failed = [r for r in result.results if r.status == FAILED]
    assert [(r.spec.arm, r.spec.seed) for r in failed] == [("loo:learning_rate", 0), ("loo:learning_rate", 1)]
    assert failed[0].error == "FloatingPointError: NaN or inf at update 3 (loss nan, reward 0.5)"
    entry = next(v for v in result.verdicts if v.get("key") == "learning_rate")
    assert entry["verdict"] == stats.INCONCLUSIVE and entry["seeds"] == 0
    assert "FAILED CartpoleBalance loo:learning_rate seed 0: FloatingPointError" in runner_module.render(result)
    saved = json.loads((workdir / "failed" / "verify.json").read_text())
    assert sorted(r["status"] for r in saved["runs"]).count("failed") == 2
    # a recorded failure is kept on resume, and retried only when asked
    monkeypatch.setattr(ppo_batched, "train", real_train)
    again = run_plan(plan, workdir / "cache", progress=False, log=lambda line: None)
    assert [r.status for r in again.results].count(FAILED) == 2
    retried = run_plan(plan, workdir / "cache", progress=False, retry_failed=True, log=lambda line: None)
    assert [r.status for r in retried.results] == [OK] * len(plan.runs)


def test_two_processes_give_the_same_runs_as_one(first_result, workdir):
    """jobs=2: each run in a worker process of its own, results equal to the sequential ones."""
    result, _ = first_result
    plan = plan_for(1, keys=("learning_rate",), arms=("gap",))
    parallel = run_plan(plan, workdir / "parallel-cache", progress=False, log=lambda line: None, jobs=2)
    sequential = {(r.spec.arm, r.spec.seed): r.scores for r in result.results}
    assert [r.status for r in parallel.results] == [OK, OK]
    for run in parallel.results:
        assert run.scores == sequential[(run.spec.arm, 0)]


def test_a_worker_process_that_dies_is_retried_alone_then_recorded_failed(first_result, workdir, tmp_path,
                                                                          monkeypatch):
    """--jobs 2: a worker process that dies (here SIGKILL; the committed evidence's first try met a
    segfault in libgcc_s) broke the pool and `verify` ended in a BrokenProcessPool traceback,
    losing the runs in flight. Now the units in flight are charged a death and run again, each
    alone; past WORKER_DEATHS_ALLOWED its runs are recorded failed (cached, as a failed run is)
    and every other unit still finishes with the runs it gives in one process."""
    import os
    import signal
    import threading
    import time

    from brax_diff.verify import worker

    result, _ = first_result
    sequential = {(r.spec.arm, r.spec.seed): r.scores for r in result.results}
    plan = plan_for(1, keys=("learning_rate",), arms=("gap",))  # baseline and all_fixes: two units
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "xla").symlink_to(workdir / "cache" / "xla")  # this module's compiled programs
    trace = tmp_path / "trace"
    monkeypatch.setenv(worker.TRACE_ENV, str(trace))  # spawned workers inherit it
    monkeypatch.setattr(runner_module, "WORKER_DEATHS_ALLOWED", 1)
    killed: list[tuple[str, int]] = []
    stop = threading.Event()

    def kill_every_start_of_the_first_unit() -> None:
        victim = None
        while not stop.is_set():
            for event, run, pid in (line.split() for line in (trace.read_text().splitlines()
                                                             if trace.exists() else [])):
                victim = victim or run
                if event == "start" and run == victim and (run, int(pid)) not in killed:
                    os.kill(int(pid), signal.SIGKILL)
                    killed.append((run, int(pid)))
            time.sleep(0.005)  # a start seen late can be a run that already finished

    killer = threading.Thread(target=kill_every_start_of_the_first_unit, daemon=True)
    killer.start()
    try:
        parallel = run_plan(plan, cache, progress=False, log=lambda line: None, jobs=2)
    finally:
        stop.set()
        killer.join(timeout=5)
    victim = killed[0][0]
    seen = trace.read_text() if trace.exists() else ""
    # died, ran alone, died again: failed (the trace says what ran where, when this does not hold)
    assert [run for run, _ in killed] == [victim, victim], f"killed {killed}; trace:\n{seen}"
    by_id = {r.spec.run_id(__version__): r for r in parallel.results}
    assert by_id[victim].status == FAILED and "its worker process died 2 times" in by_id[victim].error
    (other,) = [r for run_id, r in by_id.items() if run_id != victim]
    assert other.status == OK and other.scores == sequential[(other.spec.arm, 0)]
    events = [line.split() for line in trace.read_text().splitlines()]
    assert [run for event, run, _ in events if event == "done"] == [other.spec.run_id(__version__)]  # once
    again = run_plan(plan, cache, progress=False, log=lambda line: None, jobs=2)  # the failure is cached
    assert [r.status for r in again.results] == [r.status for r in parallel.results]
    assert len(trace.read_text().splitlines()) == len(events)  # nothing ran again


def test_brax_reference_arguments():
    """What the reference run hands Brax's trainer, built without training."""
    from brax_diff.verify import brax_reference

    plan = plan_for(1, budget=REFERENCE_BUDGET, reference=True, arms=("gap",))
    spec = next(r for r in plan.runs if r.arm == "reference")
    env, kwargs = brax_reference.train_kwargs(spec.settings, ENV, spec.budget, 0, spec.scoring)
    assert kwargs["num_envs"] == 16 and kwargs["batch_size"] == 16 and kwargs["num_minibatches"] == 2
    assert kwargs["episode_length"] == 50 and kwargs["num_timesteps"] == spec.budget == 3200
    assert kwargs["num_evals"] == 3 and kwargs["num_eval_envs"] == 4 and kwargs["deterministic_eval"] is False
    assert kwargs["clipping_epsilon"] == 0.3 and kwargs["learning_rate"] == 0.0
    networks = kwargs["network_factory"](env.observation_size, env.action_size)
    assert networks.policy_network is not None and networks.value_network is not None
    assert env.__class__.__name__ == "Balance"


def test_brax_reference_is_scored_at_the_same_checkpoints(workdir):
    """Brax's own trainer end to end (about 2 CPU-minutes, most of it XLA compiling), beside
    the PyTorch arms: one score kind, one env-step count, the gap computed; its training envs
    reset together after every update (ppo.train's pmap'd reset), as Playground's DM Control
    config has Brax do."""
    plan = plan_for(1, budget=REFERENCE_BUDGET, keys=(), reference=True, arms=("gap",), brax_values=BRAX_LEARNING)
    result = run_plan(plan, workdir / "cache", progress=False, log=lambda line: None)
    reference = next(r for r in result.results if r.spec.arm == "reference")
    assert reference.status == OK, reference.error
    assert reference.spec.settings["train"]["num_resets_per_eval"] == 5  # one update per reset epoch
    baseline = next(r for r in result.results if r.spec.arm == "baseline")
    assert reference.steps == baseline.steps == [0, 1600, 3200]
    assert reference.score_kind == baseline.score_kind and 0.0 < reference.score <= 50.0
    assert result.gap["seeds"] == 1 and result.gap["closed_fraction_ci"] is None  # 1 seed: nothing resolved


def test_cli_verify_reuses_the_cache_and_prints_the_gap(first_result, workdir, tmp_path, capsys):
    from test_verify_plan import write_pair

    from brax_diff.cli import main

    code = main(["verify", *write_pair(tmp_path), "--seeds", "4", "--budget", str(BUDGET), "--keys", "learning_rate",
                 "--set", "episode_length=50", "--no-reference", "--evals", "2", "--eval-envs", "4",
                 "--cache", str(workdir / "cache"), "--output", str(tmp_path / "out"), "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.strip() == runner_module.CPU_HINT
    lines = captured.out.splitlines()
    assert lines[0].startswith("verify: 12 runs on cpu in ") and "(0 failed)" in lines[0]
    assert any(line.split()[:2] == ["loo", "all_fixes"] for line in lines)
    assert lines[-1] == f"results: {tmp_path / 'out' / 'verify.json'}"
    saved = json.loads((tmp_path / "out" / "verify.json").read_text())
    assert [r["score"] for r in saved["runs"]] == [r.score for r in first_result[0].results]


def test_every_training_process_runs_xla_on_one_thread(monkeypatch):
    """Runs in this process and in workers agree bit for bit only on one XLA configuration."""
    import os

    from brax_diff.verify import worker

    assert os.environ["XLA_FLAGS"] == worker.XLA_CPU_FLAGS  # what conftest set for this session
    assert worker.configure_cpu_process() is None
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
    warning = worker.configure_cpu_process()
    assert warning.startswith("XLA_FLAGS='--xla_cpu_multi_thread_eigen=true', not '--xla_cpu_multi_thread_eigen=false")


def test_a_ray_cluster_gives_the_local_runs_and_retries_a_killed_worker(workdir, tmp_path, monkeypatch):
    """`--executor ray` on a local 2-CPU Ray: one worker is killed (SIGKILL) in the middle of
    its unit; Ray retries that unit, the results equal a local run's bit for bit, every unit
    finished once, and a second verify finds everything in the cache and submits nothing."""
    import os
    import signal
    import threading
    import time

    ray = pytest.importorskip("ray", reason="the Ray test needs the distributed extra")
    plan = plan_for(2, budget=2 * BUDGET, arms=("gap",), engine="batched")  # baseline, all_fixes: 2 units of 2 seeds
    local = run_plan(plan, workdir / "cache", progress=False, log=lambda line: None)  # cached by the resume test
    cache = tmp_path / "ray-cache"
    cache.mkdir()
    (cache / "xla").symlink_to(workdir / "cache" / "xla")  # the compiled programs of this module's shapes
    trace = tmp_path / "trace"
    from brax_diff.verify import worker

    monkeypatch.setenv(worker.TRACE_ENV, str(trace))  # workers of a Ray started here inherit it
    killed: list[tuple[str, int]] = []

    def kill_the_first_worker_that_starts_a_unit() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            starts = [line.split() for line in (trace.read_text().splitlines() if trace.exists() else [])]
            if starts:
                _, run, pid = starts[0]
                time.sleep(0.5)  # into its training
                os.kill(int(pid), signal.SIGKILL)
                killed.append((run, int(pid)))
                return
            time.sleep(0.05)

    from brax_diff.verify.ray_executor import runtime_env

    ray.init(num_cpus=2, runtime_env=runtime_env(), include_dashboard=False, log_to_driver=False)
    try:
        killer = threading.Thread(target=kill_the_first_worker_that_starts_a_unit, daemon=True)
        killer.start()
        result = run_plan(plan, cache, progress=False, log=lambda line: None, executor="ray")
        killer.join(timeout=5)
        assert len(killed) == 1
        events = [line.split() for line in trace.read_text().splitlines()]
        killed_run, killed_pid = killed[0]
        assert ["done", killed_run, str(killed_pid)] not in events  # killed mid-run: that try never finished
        starts = sorted(run for event, run, _ in events if event == "start")
        dones = sorted(run for event, run, _ in events if event == "done")
        assert len(dones) == 2 and len(set(dones)) == 2  # each unit finished exactly once
        assert starts.count(killed_run) == 2 and len(starts) == 3  # the killed unit was retried, nothing else
        assert [r.status for r in result.results] == [OK] * 4
        assert [(r.spec.arm, r.spec.seed, r.scores) for r in result.results] == [
            (r.spec.arm, r.spec.seed, r.scores) for r in local.results]
        assert len(list((cache / "runs").glob("*.json"))) == 4
        again = run_plan(plan, cache, progress=False, log=lambda line: None, executor="ray")
        assert [r.scores for r in again.results] == [r.scores for r in local.results]
        assert len(trace.read_text().splitlines()) == len(events)  # everything from the cache: no task
    finally:
        ray.shutdown()


@pytest.mark.slow  # 41 min wall at load 12 on 2 cores, nearly all Brax's compiles
def test_stand_in_trains_beside_the_reference_and_verify_json_has_the_equivalence(workdir):
    """The stand_in arm end to end at the tiny shapes: Brax's values and loss semantics in the
    PyTorch trainer, scored at the reference's checkpoints, and verify.json's ``equivalence``
    (2 seeds a side: too few for the TOST to ever say yes, and it says so)."""
    brax_values = dict(BRAX_LEARNING, gae_recompute="per_minibatch", obs_norm_update="per_batch_before_sgd",
                       entropy_estimator="sampled_squashed", truncation="mask_bootstrap_last_state")
    plan = build_plan(extraction("brax", brax_values), extraction("slm", SLM_VALUES), envs=[ENV], seeds=2,
                      budget=REFERENCE_BUDGET, keys=[], overrides=OVERRIDES, reference=True, arms=("gap", "stand_in"),
                      evals=2, eval_envs=4)
    result = run_plan(plan, workdir / "cache", progress=False, output_dir=workdir / "stand_in", log=lambda line: None)
    by_arm = {(r.spec.arm, r.spec.seed): r for r in result.results}
    assert by_arm[("stand_in", 0)].spec.settings["env_steps_between_resets"] == 20
    for seed in (0, 1):
        stand_in, reference = by_arm[("stand_in", seed)], by_arm[("reference", seed)]
        assert stand_in.status == OK, stand_in.error
        assert stand_in.steps == reference.steps == [0, 1600, 3200]
        assert stand_in.score_kind == reference.score_kind and 0.0 < stand_in.score <= 50.0
    written = json.loads((workdir / "stand_in" / "verify.json").read_text())
    env = written["equivalence"]["envs"][ENV]
    assert (env["n_stand_in"], env["n_reference"], env["equivalent"]) == (2, 2, None)
    assert written["equivalence"]["margin"] == written["plan"]["equivalence_margin"] == 100.0


def test_a_reseeded_evaluator_scores_as_a_fresh_one():
    """A worker keeps one compiled evaluator per env, scoring and settings and swaps each run's
    seed in (Runner.evaluator): seed 1 scored by the evaluator seed 0 compiled gives the score
    an evaluator of seed 1's own gives, evaluation after evaluation, so cached runs stay valid."""
    import torch

    from brax_diff.verify import ppo_torch
    from brax_diff.verify.evaluate import TorchEvaluator, policy_params
    from brax_diff.verify.settings import TrainerSettings

    settings = TrainerSettings.from_json(plan_for(1).runs[0].settings)
    agent = ppo_torch.PPO(settings, 5, 1, 10.0, seed=3)
    agent.observe(torch.randn(64, 5) * 2)
    params = policy_params(agent)
    reused = TorchEvaluator(ENV, settings, 0, 4, False, 50)
    reused.score(params)
    reused.reseed(1)
    fresh = TorchEvaluator(ENV, settings, 1, 4, False, 50)
    assert [reused.score(params) for _ in range(2)] == [fresh.score(params) for _ in range(2)]
    assert reused.reseed(0).score(params) == TorchEvaluator(ENV, settings, 0, 4, False, 50).score(params)
