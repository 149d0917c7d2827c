"""Each piece of the PyTorch PPO against values computed by hand (no environment needed)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch PPO needs torch (the verify extra)")

from brax_diff.verify import ppo_torch  # noqa: E402
from brax_diff.verify.settings import TrainerSettings  # noqa: E402

T3 = dict(rewards=[1.0, 1.0, 1.0], values=[0.5, 0.5, 0.5], next_values=[0.5, 0.5, 2.0])


def run_gae(terminated, truncated, truncation="bootstrap_next_obs_across_reset"):
    column = lambda xs: torch.tensor(xs, dtype=torch.float64)[:, None]  # noqa: E731  (T, 1 env)
    out = ppo_torch.gae(column(T3["rewards"]), column(T3["values"]), column(T3["next_values"]),
                        column(terminated), column(truncated), discount=0.9, lam=0.5,
                        truncation=truncation)
    return [round(float(v), 10) for v in out[:, 0]]


def test_gae_on_a_short_trajectory():
    # deltas = r + 0.9 V' - V = [0.95, 0.95, 2.3]; gamma * lambda = 0.45
    # A2 = 2.3, A1 = 0.95 + 0.45 * 2.3 = 1.985, A0 = 0.95 + 0.45 * 1.985 = 1.84325
    assert run_gae([0, 0, 0], [0, 0, 0]) == [1.84325, 1.985, 2.3]


def test_gae_termination_cuts_bootstrap_and_chain():
    # terminated at t=1: delta1 = 1 - 0.5 = 0.5, A1 = 0.5, A0 = 0.95 + 0.45 * 0.5
    assert run_gae([0, 1, 0], [0, 0, 0]) == [1.175, 0.5, 2.3]


def test_gae_truncation_slm_lab_keeps_the_chain_brax_masks_it():
    assert run_gae([0, 0, 0], [0, 1, 0], truncation="bootstrap_next_obs_across_reset") == [1.84325, 1.985, 2.3]
    # Brax: delta1 masked to 0 and the chain cut at t=1: A1 = 0, A0 = 0.95
    assert run_gae([0, 0, 0], [0, 1, 0], truncation="mask_bootstrap_last_state") == [0.95, 0.0, 2.3]


def test_std_clamp_and_transforms():
    raw = torch.tensor([-10.0, 0.0, 3.0])
    slm = TrainerSettings()  # clamped_exp, log-std in [-5, 0.5]
    assert ppo_torch.std_from_raw(raw, slm).tolist() == pytest.approx([math.exp(-5), 1.0, math.exp(0.5)])
    brax = TrainerSettings(std_transform="softplus", std_min=0.001, std_max=None)
    assert ppo_torch.std_from_raw(torch.tensor([0.0]), brax).item() == pytest.approx(math.log(2) + 0.001)
    assert ppo_torch.std_from_raw(torch.tensor([-30.0]), brax).item() == pytest.approx(0.001, abs=1e-9)


def test_linear_decay_factor_at_chosen_updates():
    assert ppo_torch.lr_factor(0, 100, 0.033, "linear_decay") == 1.0
    assert ppo_torch.lr_factor(50, 100, 0.033, "linear_decay") == pytest.approx(1 - 50 * 0.967 / 100)
    assert ppo_torch.lr_factor(100, 100, 0.033, "linear_decay") == pytest.approx(0.033)
    assert ppo_torch.lr_factor(250, 100, 0.033, "linear_decay") == pytest.approx(0.033)
    assert ppo_torch.lr_factor(50, 100, 0.033, "constant") == 1.0


def test_lambda_lr_moves_both_optimizers_once_per_update():
    agent = ppo_torch.PPO(TrainerSettings(num_envs=4, unroll_length=5, minibatch_transitions=10,
                                          policy_hidden_layers=(8,), value_hidden_layers=(8,)), 3, 1, 10)
    for _ in range(5):
        for optimizer, scheduler in zip(agent.optimizers, agent.schedulers):
            optimizer.step()  # no gradients yet: moves nothing, keeps the documented call order
            scheduler.step()
    for optimizer in agent.optimizers:
        assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * (1 - 5 * 0.967 / 10))


def test_standardize_uses_the_unbiased_std():
    out = ppo_torch.standardize(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    std = math.sqrt(5 / 3)  # sum of squared deviations 5, over n - 1
    assert out.tolist() == pytest.approx([-1.5 / std, -0.5 / std, 0.5 / std, 1.5 / std])
    assert ppo_torch.standardize(torch.tensor([7.0])).tolist() == [7.0]


def small_agent(**changes):
    settings = TrainerSettings(num_envs=4, unroll_length=5, epochs_per_update=3, minibatch_transitions=7,
                               policy_hidden_layers=(8,), value_hidden_layers=(8,), **changes)
    torch.manual_seed(0)
    return ppo_torch.PPO(settings, 3, 2, 10.0)


def test_per_minibatch_standardization_makes_the_policy_loss_scale_free():
    obs, raw = torch.randn(6, 3), torch.randn(6, 2)
    agent = small_agent()
    old = agent.policy(obs).log_prob(raw).detach()
    adv = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0, 0.0])
    scoped = agent.policy_loss(obs, raw, old, adv)
    assert agent.policy_loss(obs, raw, old, 10 * adv + 5).item() == pytest.approx(scoped.item(), rel=1e-5)
    batch_scope = small_agent(advantage_normalization_scope="batch")  # standardized before, not here
    assert batch_scope.policy_loss(obs, raw, old, 10 * adv + 5).item() != pytest.approx(
        batch_scope.policy_loss(obs, raw, old, adv).item(), rel=1e-3)
    # at ratio 1 the surrogate is the mean advantage, 0 after standardizing: only the entropy term is left
    entropy = agent.policy(obs).entropy().mean()
    assert scoped.item() == pytest.approx(-0.01 * entropy.item(), abs=1e-6)


def test_update_runs_epochs_times_minibatches_steps_after_slm_lab_rounding():
    agent = small_agent()
    assert agent.s.effective_minibatch == 10 and agent.s.minibatches_per_epoch == 2  # 20 transitions, 7 -> 10
    n = agent.s.transitions_per_update
    batch = ppo_torch.Batch(torch.randn(n, 3), torch.randn(n, 2), torch.zeros(n), torch.randn(n), torch.randn(n),
                            torch.zeros(n), 0.5)
    agent.update(batch, torch.Generator().manual_seed(0))
    for optimizer in agent.optimizers:
        steps = {int(state["step"]) for state in optimizer.state.values()}
        assert steps == {3 * 2}


def test_gradient_clipping_bounds_the_norm():
    agent = small_agent(max_grad_norm=0.01, learning_rate=0.0)
    loss = agent.value(torch.randn(5, 3) * 100).pow(2).sum()
    agent.step(agent.value, agent.optimizers[1], loss)
    norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in agent.value.parameters()))
    assert norm.item() == pytest.approx(0.01, rel=1e-4)


def test_running_obs_statistics_match_numpy_and_clip():
    import numpy as np

    stats = ppo_torch.RunningMeanStd(2, eps=0.0, clip=1.5)
    a, b = torch.tensor([[0.0, 1.0], [2.0, 3.0]]), torch.tensor([[4.0, 5.0], [6.0, 7.0], [8.0, 9.0]])
    stats.update(a)
    stats.update(b)
    both = np.concatenate([a.numpy(), b.numpy()])
    assert stats.mean.tolist() == pytest.approx(both.mean(0).tolist())
    assert stats.var.tolist() == pytest.approx(both.var(0).tolist())
    assert stats.normalize(torch.tensor([[100.0, 5.0]]))[0].tolist() == pytest.approx([1.5, 0.0])


def test_return_normalizer_floors_std_at_one_and_clips_at_ten():
    small = ppo_torch.ReturnNormalizer()
    small.update(torch.tensor([0.1, -0.1]))
    assert small.std == 1.0 and small.normalize(torch.tensor([25.0, 0.5])).tolist() == [10.0, 0.5]
    large = ppo_torch.ReturnNormalizer()
    large.update(torch.tensor([100.0, -100.0]))  # population variance 10000
    assert large.std == pytest.approx(100.0) and large.normalize(torch.tensor([50.0])).item() == pytest.approx(0.5)


def test_tanh_normal_log_prob_matches_torch_transformed_distribution():
    from torch.distributions import Normal, TanhTransform, TransformedDistribution

    loc, std = torch.tensor([[0.2, -0.3]]), torch.tensor([[0.5, 0.8]])
    raw = torch.tensor([[0.4, -1.1]])
    ours = ppo_torch.ActionDistribution(loc, std, squash=True).log_prob(raw)
    reference = TransformedDistribution(Normal(loc, std), [TanhTransform()]).log_prob(torch.tanh(raw)).sum(-1)
    assert ours.item() == pytest.approx(reference.item(), rel=1e-5)
    plain = ppo_torch.ActionDistribution(loc, std, squash=False)
    assert plain.log_prob(raw).item() == pytest.approx(Normal(loc, std).log_prob(raw).sum().item())
    _, action = plain.sample()
    assert action.abs().max() <= 1.0


def test_initializers():
    ortho = ppo_torch.mlp(16, (16,), 4, "silu", "orthogonal")[0]
    product = ortho.weight @ ortho.weight.T
    assert torch.allclose(product, 2.0 * torch.eye(16), atol=1e-5)  # gain sqrt 2
    lecun = ppo_torch.mlp(12, (64,), 4, "relu", "lecun_uniform")[0]
    assert float(lecun.weight.detach().abs().max()) <= math.sqrt(3 / 12)
    assert float(lecun.bias.detach().abs().max()) == 0.0
    assert isinstance(ppo_torch.mlp(3, (8, 8), 1, "tanh", "orthogonal")[1], torch.nn.Tanh)


def test_entropy_matches_torch_normal_and_tanh_adds_the_jacobian_estimate():
    from torch.distributions import Normal

    loc, std = torch.tensor([[0.2, -0.3]]), torch.tensor([[0.5, 0.8]])
    plain = ppo_torch.ActionDistribution(loc, std, squash=False)
    assert plain.entropy().item() == pytest.approx(Normal(loc, std).entropy().sum().item(), rel=1e-6)
    torch.manual_seed(3)
    squashed = ppo_torch.ActionDistribution(loc, std, squash=True).entropy().item()
    torch.manual_seed(3)
    sample = loc + std * torch.randn_like(loc)
    assert squashed == pytest.approx(plain.entropy().item()
                                     + float(ppo_torch.tanh_log_det_jacobian(sample).sum()), rel=1e-6)
    assert ppo_torch.tanh_log_det_jacobian(torch.tensor([0.7])).item() == pytest.approx(
        math.log(1 - math.tanh(0.7) ** 2), rel=1e-6)


def test_lr_schedule_runs_over_the_real_horizon_not_the_budget():
    settings = TrainerSettings(num_envs=32, unroll_length=30, lr_decay_steps=100_000_000)  # 960 per update
    updates = ppo_torch.schedule_updates(settings, budget=307_200)
    assert updates == pytest.approx(100_000_000 / 960)
    # after this run's 320 updates SLM-Lab's real run is still at 99.7% of its start rate...
    assert ppo_torch.lr_factor(320, updates, 0.033, "linear_decay") == pytest.approx(1 - 320 * 0.967 / updates)
    assert ppo_torch.lr_factor(320, updates, 0.033, "linear_decay") > 0.99
    # ...where a schedule squeezed into the budget would be at its floor
    squeezed = ppo_torch.schedule_updates(settings.moved(lr_decay_steps=None), budget=307_200)
    assert squeezed == 320 and ppo_torch.lr_factor(320, squeezed, 0.033, "linear_decay") == pytest.approx(0.033)


def test_seed_fixes_each_networks_initial_weights_on_its_own():
    base = TrainerSettings(num_envs=4, unroll_length=5, policy_hidden_layers=(8,), value_hidden_layers=(16,))
    a = ppo_torch.PPO(base, 3, 2, 10, seed=4)
    b = ppo_torch.PPO(base, 3, 2, 10, seed=4)
    wider_policy = ppo_torch.PPO(base.moved(policy_hidden_layers=(8, 8)), 3, 2, 10, seed=4)
    other_seed = ppo_torch.PPO(base, 3, 2, 10, seed=5)
    same = lambda x, y: all(torch.equal(p, q) for p, q in zip(x.parameters(), y.parameters()))  # noqa: E731
    assert same(a.policy, b.policy) and same(a.value, b.value)
    assert same(a.value, wider_policy.value)  # an arm that changes the policy keeps the value net's weights
    assert not same(a.policy, other_seed.policy) and not same(a.value, other_seed.value)


class _CountingEnv:
    """A stand-in VecEnv: constant observations, reward 1, never done."""

    num_envs, obs_size, action_size, episode_length, action_repeat = 2, 3, 1, 1000, 1

    def reset(self, seed):
        return torch.zeros(2, 3)

    def step(self, action):
        return torch.zeros(2, 3), torch.ones(2), torch.zeros(2), torch.zeros(2)


def test_train_scores_at_every_checkpoint_and_only_whole_updates():
    settings = TrainerSettings(num_envs=2, unroll_length=5, epochs_per_update=1, minibatch_transitions=10,
                               policy_hidden_layers=(4,), value_hidden_layers=(4,), lr_decay_steps=10_000)
    calls = []
    log = ppo_torch.train(_CountingEnv(), settings, budget=40, seed=0, evaluate=lambda agent: calls.append(1) or 7.0,
                          eval_every=20)
    assert log.steps == [0, 20, 40] and log.scores == [7.0, 7.0, 7.0] and len(calls) == 3
    assert log.env_steps == 40 and log.updates == 4 and log.reward_per_step == [1.0] * 4
    with pytest.raises(ValueError, match="whole updates of 10 env steps"):
        ppo_torch.train(_CountingEnv(), settings, budget=45, seed=0)
    with pytest.raises(ValueError, match="whole updates"):
        ppo_torch.train(_CountingEnv(), settings, budget=40, seed=0, evaluate=lambda agent: 0.0, eval_every=15)


class _ResettingEnv(_CountingEnv):
    """_CountingEnv that logs every step and every reset of all envs together; after a reset
    the observations are 5.0 until the next step."""

    def __init__(self, num_envs: int = 2):
        self.num_envs, self.calls = num_envs, []

    def reset(self, seed):
        return torch.zeros(self.num_envs, 3)

    def step(self, action):
        self.calls.append("step")
        return torch.zeros(self.num_envs, 3), torch.ones(self.num_envs), torch.zeros(self.num_envs), \
            torch.zeros(self.num_envs)

    def reset_all(self):
        self.calls.append("reset_all")
        return torch.full((self.num_envs, 3), 5.0)


def _steps_before_each_reset(calls: list[str]) -> list[int]:
    out, steps = [], 0
    for call in calls:
        if call == "step":
            steps += 1
        else:
            out.append(steps)
    return out


@pytest.mark.parametrize("every, resets_after", [
    (0, []),  # never: SLM-Lab's envs restart only at their episode's end
    (10, [10, 20, 30, 40]),  # every 2 updates of 5 steps per env
    (12, [15, 30]),  # after the first update by which 12 steps ran: the 3rd, then the 6th
    (5, [5, 10, 15, 20, 25, 30, 35, 40]),  # every update (Playground's DM Control config at Brax's shape)
])
def test_every_env_is_reset_together_after_whole_updates(every, resets_after):
    from brax_diff.verify import ppo_batched

    settings = TrainerSettings(num_envs=2, unroll_length=5, epochs_per_update=1, minibatch_transitions=10,
                               policy_hidden_layers=(4,), value_hidden_layers=(4,), lr_decay_steps=10_000,
                               env_steps_between_resets=every)
    env = _ResettingEnv()
    ppo_torch.train(env, settings, budget=80, seed=0)
    assert _steps_before_each_reset(env.calls) == resets_after and env.calls.count("step") == 40
    batched = _ResettingEnv(num_envs=4)  # two seeds of 2 envs: every block reset at once
    ppo_batched.train(batched, settings, budget=80, seeds=[0, 1])
    assert _steps_before_each_reset(batched.calls) == resets_after


def test_the_first_observation_after_a_reset_is_the_reset_state(monkeypatch):
    settings = TrainerSettings(num_envs=2, unroll_length=5, epochs_per_update=1, minibatch_transitions=10,
                               policy_hidden_layers=(4,), value_hidden_layers=(4,), lr_decay_steps=10_000,
                               env_steps_between_resets=5, obs_normalization=False)
    acting = []  # what the policy acts on while collecting: one row per env (minibatches have 10)
    forward = ppo_torch.Policy.forward
    monkeypatch.setattr(ppo_torch.Policy, "forward",
                        lambda self, obs: (acting.append(obs.clone()) if obs.shape[0] == 2 else None) or
                        forward(self, obs))
    ppo_torch.train(_ResettingEnv(), settings, budget=20, seed=0)
    firsts = [float(obs.max()) for obs in acting[::5]]  # the first step of each of the 2 updates
    assert len(acting) == 10 and firsts == [0.0, 5.0] and float(acting[1].max()) == 0.0


def test_a_negative_reset_interval_is_refused():
    with pytest.raises(Exception, match="env_steps_between_resets must be a whole number >= 0, got -1"):
        TrainerSettings(env_steps_between_resets=-1)


# -- seeds batched in one model (brax_diff/verify/ppo_batched.py) ----------------------------
def _random_batch(n: int, obs_size: int, action_size: int, seed: int) -> ppo_torch.Batch:
    g = torch.Generator().manual_seed(100 + seed)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    return ppo_torch.Batch(r(n, obs_size) * 2, r(n, action_size), r(n) * 0.1 - 1.0, r(n), r(n) * 30, r(n) * 30, 0.5)


@pytest.mark.parametrize("changes", [
    {},  # SLM-Lab's: minibatch advantage standardization, return normalization, grad clip
    {"action_distribution": "tanh_normal", "std_transform": "softplus", "std_min": 0.001, "std_max": None,
     "advantage_normalization_scope": "batch", "value_target_normalization": False, "max_grad_norm": None,
     "value_clipping": 0.2, "activation": "relu", "kernel_init": "lecun_uniform"},
])
def test_three_seeds_batched_update_as_three_separate_updates(changes):
    """One update of 3 seeds in one batched model equals, seed by seed, the single-seed
    trainer's update on the same data (weights, Adam state, return statistics), to 1e-5."""
    from brax_diff.verify import ppo_batched

    settings = TrainerSettings(num_envs=4, unroll_length=5, epochs_per_update=3, minibatch_transitions=7,
                               policy_hidden_layers=(8, 8), value_hidden_layers=(16,), max_grad_norm=0.5,
                               lr_decay_steps=1000, **{k: v for k, v in changes.items() if k != "max_grad_norm"})
    if "max_grad_norm" in changes:
        settings = settings.moved(max_grad_norm=changes["max_grad_norm"])
    seeds, obs_size, action_size, n = [3, 0, 7], 3, 2, 20
    batches = [_random_batch(n, obs_size, action_size, s) for s in seeds]
    batched = ppo_batched.SeedBatchedPPO(settings, obs_size, action_size, 10.0, seeds)
    singles = [ppo_torch.PPO(settings, obs_size, action_size, 10.0, seed=s) for s in seeds]
    for i, single in enumerate(singles):  # the same initial weights, seed by seed, exactly
        weights = [layer.weight.T for layer in single.policy.net if isinstance(layer, torch.nn.Linear)]
        assert all(torch.equal(w, stacked[i]) for w, (stacked, _) in zip(weights, batched.policy_layers))
    stacked = ppo_batched.SeedBatch(*(torch.stack([getattr(b, f) for b in batches]) for f in
                                      ("obs", "raw_actions", "log_probs", "advantages", "targets", "old_values")),
                                    torch.tensor([b.mean_reward for b in batches]))
    shuffles = [ppo_torch.seeded_generator(seed, "minibatch_shuffle") for seed in seeds]  # what ppo_torch.train shuffles with
    for update in range(2):  # the second update starts from moved weights, Adam moments and statistics
        for i, seed in enumerate(seeds):  # the sampling streams (the tanh entropy estimate draws)
            batched.samplers[i].manual_seed(seed + update)
        losses = batched.update(stacked)
        for i, (seed, single) in enumerate(zip(seeds, singles)):
            torch.manual_seed(seed + update)  # the single trainer draws from torch's global generator
            loss = single.update(batches[i], shuffles[i])
            assert losses[i].item() == pytest.approx(loss, abs=1e-5)
    for i, single in enumerate(singles):
        policy = [t for layer in single.policy.net if isinstance(layer, torch.nn.Linear) for t in (layer.weight.T,
                                                                                                    layer.bias)]
        mine = [t[i].reshape(-1) for layer in batched.policy_layers for t in layer]
        for theirs, ours in zip(policy, mine):
            assert torch.allclose(theirs.reshape(-1), ours, atol=1e-5), (seeds[i], (theirs.reshape(-1) - ours).abs().max())
        value = [t for layer in single.value if isinstance(layer, torch.nn.Linear) for t in (layer.weight.T, layer.bias)]
        mine = [t[i].reshape(-1) for layer in batched.value_layers for t in layer]
        for theirs, ours in zip(value, mine):
            assert torch.allclose(theirs.reshape(-1), ours, atol=1e-5)
        if single.returns is not None:
            assert batched.returns.std[i].item() == pytest.approx(single.returns.std, rel=1e-6)
    # the seeds moved apart: a test of three copies of one seed would pass with mixed-up rows too
    assert not torch.allclose(batched.policy_layers[0][0][0], batched.policy_layers[0][0][1])


class _SeedBlocksEnv:
    """A stand-in for N seeds' envs, 2 per seed (seed-major blocks): random observations,
    reward 1, never done; block ``nan_block``'s observations turn NaN after ``nan_after`` steps."""

    obs_size, action_size, episode_length, action_repeat = 3, 1, 1000, 1

    def __init__(self, seeds: int, nan_block: int | None = None, nan_after: int = 0):
        self.num_envs, self.nan_block, self.nan_after = 2 * seeds, nan_block, nan_after
        self.generator, self.steps = torch.Generator().manual_seed(0), 0

    def reset(self, seeds):
        assert 2 * len(seeds) == self.num_envs
        return torch.randn(self.num_envs, 3, generator=self.generator)

    def step(self, action):
        self.steps += 1
        obs = torch.randn(self.num_envs, 3, generator=self.generator)
        if self.nan_block is not None and self.steps > self.nan_after:
            obs[2 * self.nan_block:2 * self.nan_block + 2] = float("nan")
        return obs, torch.ones(self.num_envs), torch.zeros(self.num_envs), torch.zeros(self.num_envs)


def test_a_seed_that_goes_nan_fails_alone_and_leaves_the_others_untouched():
    from brax_diff.verify import ppo_batched

    settings = TrainerSettings(num_envs=2, unroll_length=5, epochs_per_update=2, minibatch_transitions=5,
                               policy_hidden_layers=(4,), value_hidden_layers=(4,), lr_decay_steps=10_000)

    def run(env):
        final = {}

        def evaluate(i, params):
            final[i] = params
            return 7.0 + i

        logs, failures = ppo_batched.train(env, settings, budget=40, seeds=[0, 1, 2], evaluate=evaluate, eval_every=20)
        return logs, failures, final

    logs, failures, final = run(_SeedBlocksEnv(3, nan_block=1, nan_after=12))  # NaN from update 3's collection
    assert failures == {1: "NaN or inf at update 3 (loss nan, reward 1.0)"}
    assert [log.steps for log in logs] == [[0, 20, 40], [0, 20], [0, 20, 40]]
    assert [log.scores for log in logs] == [[7.0] * 3, [8.0] * 2, [9.0] * 3]
    assert [log.env_steps for log in logs] == [40, 20, 40]
    clean_logs, clean_failures, clean = run(_SeedBlocksEnv(3))
    assert clean_failures == {}
    for i in (0, 2):  # the other seeds' final policies are exactly those of a run without the NaN
        assert all((a == b).all() for (a, _), (b, _) in zip(final[i]["layers"], clean[i]["layers"]))
        assert (final[i]["obs_mean"] == clean[i]["obs_mean"]).all()
    with pytest.raises(ValueError, match="3 seeds of 2 envs need an env of 6, not 4"):
        ppo_batched.train(_SeedBlocksEnv(2), settings, budget=40, seeds=[0, 1, 2])


class _ToyDynamicsEnv:
    """A small action-dependent env, per-seed blocks of envs: block i starts from seed i's
    states whether it is stepped alone or with other seeds' blocks; episodes end by
    termination (|x0| > 3) or truncation (``episode_length``), auto-resetting."""

    obs_size, action_size, action_repeat = 4, 1, 1

    def __init__(self, num_envs: int, episode_length: int = 20):
        self.num_envs, self.episode_length = num_envs, episode_length

    def reset(self, seed):
        seeds = [seed] if isinstance(seed, int) else list(seed)
        per_seed = self.num_envs // len(seeds)
        self.start = torch.cat([torch.randn(per_seed, 4, generator=torch.Generator().manual_seed(1000 + s))
                                for s in seeds])
        self.x, self.t = self.start.clone(), torch.zeros(self.num_envs)
        return self.x.clone()

    def step(self, action):
        a, x = action.reshape(self.num_envs, -1)[:, 0], self.x
        nx = torch.stack([x[:, 0] + 0.1 * x[:, 1], x[:, 1] + 0.1 * a - 0.05 * x[:, 0], 0.9 * x[:, 2] + 0.3 * a,
                          torch.sin(x[:, 3]) + x[:, 0]], 1)
        reward = 1.0 - nx[:, 0].abs().clamp(max=1.0)
        self.t += 1
        terminated = (nx[:, 0].abs() > 3.0).float()
        truncated = ((self.t >= self.episode_length) & (terminated == 0)).float()
        done = (terminated + truncated) > 0
        nx[done], self.t[done] = self.start[done], 0
        self.x = nx
        return nx.clone(), reward, terminated, truncated


def test_batched_runs_follow_the_single_seed_runs_seed_by_seed():
    """Whole runs (collection, sampling streams, every update's state) of both trainers on an
    action-dependent env: seed i batched is seed i alone, to float noise. The one-update test
    above reseeds both trainers' samplers, so it cannot see a sampling stream of the batched
    trainer that differs from the single-seed trainer's (it did: ``ppo_torch.train`` seeds
    torch's global generator before building its networks, whose default inits draw from it)."""
    from brax_diff.verify import ppo_batched

    settings = TrainerSettings(num_envs=4, unroll_length=10, epochs_per_update=2, minibatch_transitions=8,
                               policy_hidden_layers=(8, 8), value_hidden_layers=(16,), max_grad_norm=0.5,
                               lr_decay_steps=100_000)
    seeds, budget = [0, 1, 2], 4 * settings.transitions_per_update
    single = {}
    for seed in seeds:
        def keep(agent, seed=seed):
            single[seed] = ([layer.weight.detach().T.clone() for layer in agent.policy.net
                             if isinstance(layer, torch.nn.Linear)], agent.obs_stats.mean.clone())
            return 0.0
        ppo_torch.train(_ToyDynamicsEnv(settings.num_envs), settings, budget, seed, evaluate=keep)
    batched = {}

    def keep_batched(i, params):
        batched[seeds[i]] = params
        return 0.0

    logs, failures = ppo_batched.train(_ToyDynamicsEnv(3 * settings.num_envs), settings, budget, seeds,
                                       evaluate=keep_batched)
    assert failures == {} and [log.updates for log in logs] == [4, 4, 4]
    for seed in seeds:
        weights, obs_mean = single[seed]
        for w, (mine, _) in zip(weights, batched[seed]["layers"]):
            assert torch.allclose(w, torch.from_numpy(mine), atol=1e-4), (seed, (w - torch.from_numpy(mine)).abs().max())
        assert torch.allclose(obs_mean.float(), torch.from_numpy(batched[seed]["obs_mean"]), atol=1e-4)


def _update_one_backward_per_network(agent: ppo_torch.PPO, batch: ppo_torch.Batch, generator: torch.Generator) -> None:
    """PPO.update as it was before one backward served both networks: policy step, then value step."""
    s = agent.s
    size, total = s.effective_minibatch, batch.obs.shape[0]
    for _ in range(s.epochs_per_update):
        order = torch.randperm(total, generator=generator)
        for start in range(0, total, size):
            idx = order[start:start + size]
            policy_loss = agent.policy_loss(batch.obs[idx], batch.raw_actions[idx], batch.log_probs[idx],
                                            batch.advantages[idx])
            value_loss = agent.value_loss(agent.value(batch.obs[idx]).squeeze(-1), batch.targets[idx],
                                          batch.old_values[idx])
            agent.step(agent.policy, agent.optimizers[0], policy_loss)
            agent.step(agent.value, agent.optimizers[1], value_loss)
    for scheduler in agent.schedulers:
        scheduler.step()


def test_one_backward_for_both_networks_gives_the_same_parameters_bit_for_bit():
    """The speed-up (one autograd call per minibatch) changes no number: same seed, same weights."""
    batch = _random_batch(20, 3, 2, 0)
    fast, slow = small_agent(max_grad_norm=0.05), small_agent(max_grad_norm=0.05)  # the clip binds
    for _ in range(2):
        fast.update(batch, torch.Generator().manual_seed(5))
        _update_one_backward_per_network(slow, batch, torch.Generator().manual_seed(5))
    for a, b in zip(list(fast.policy.parameters()) + list(fast.value.parameters()),
                    list(slow.policy.parameters()) + list(slow.value.parameters())):
        assert torch.equal(a, b)
    assert not torch.equal(next(fast.policy.parameters()), next(small_agent().policy.parameters()))
