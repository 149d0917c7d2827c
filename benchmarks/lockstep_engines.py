"""Do the two PyTorch engines compute the same updates? The single-seed trainer's whole state
(weights, Adam moments and steps, LR schedule, observation and return statistics, shuffle and
sampling generators) is copied into a seed-batched model of one seed, and both run one collect
and update from the same env state.

    python benchmarks/lockstep_engines.py VERIFY_JSON [K]           # once, after K updates (40)
    python benchmarks/lockstep_engines.py VERIFY_JSON --every [U]   # before each of U updates
    python benchmarks/lockstep_engines.py VERIFY_JSON --fresh [U]   # each engine on its own (6)

The first form trains K updates (40: past the first time-limit truncation at the cpu
preset's shapes), compares one update, and scores the same weights with both evaluators.
``--every`` follows a whole run of U updates (default: the plan's budget), comparing every
update (truncations, the last updates) from the single-seed trainer's state, and prints the
largest difference seen and the updates where any passed 1e-5. ``--fresh`` trains each engine
from its own construction, as the runner does (evaluation at step 0 included), and prints how
far their policy weights are apart after each of U updates: how fast rounding grows.

VERIFY_JSON: a verify.json whose first planned run's settings are trained (the seed-era
evidence: reports/phase5-seed/verify/verify.json, its baseline). docs/verify.md has the figures.
"""
import json
import sys

import torch

from brax_diff.verify import ppo_batched, ppo_torch
from brax_diff.verify.envs import PlaygroundVecEnv
from brax_diff.verify.evaluate import TorchEvaluator, policy_params
from brax_diff.verify.settings import TrainerSettings

torch.set_num_threads(1)
run = json.load(open(sys.argv[1]))["plan"]["runs"][0]
settings = TrainerSettings.from_json(run["settings"])
every, fresh = "--every" in sys.argv, "--fresh" in sys.argv
numbers = [a for a in sys.argv[2:] if a not in ("--every", "--fresh")]
budget = int(run["budget"])
K = int(numbers[0]) if numbers else (budget // settings.transitions_per_update if every else 40)
seed = 0
env = PlaygroundVecEnv("CartpoleBalance", settings.num_envs, "cpu", settings.episode_length)
horizon = ppo_torch.schedule_updates(settings, budget)
torch.manual_seed(ppo_torch.stream_seed(seed, "action_noise"))  # as ppo_torch.train seeds its streams
shuffles = ppo_torch.seeded_generator(seed, "minibatch_shuffle")
agent = ppo_torch.PPO(settings, env.obs_size, env.action_size, horizon, "cpu", seed)
obs = agent.observe(env.reset(seed))


def linear(net):
    return [m for m in net if isinstance(m, torch.nn.Linear)]


def batched_copy() -> ppo_batched.SeedBatchedPPO:
    """A one-seed batched model holding exactly the single-seed trainer's state now."""
    b = ppo_batched.SeedBatchedPPO(settings, env.obs_size, env.action_size, horizon, [seed])
    with torch.no_grad():
        for (w, bias), layer in zip(b.policy_layers, linear(agent.policy.net)):
            w[0].copy_(layer.weight.T)
            bias[0, 0].copy_(layer.bias)
        for (w, bias), layer in zip(b.value_layers, linear(agent.value)):
            w[0].copy_(layer.weight.T)
            bias[0, 0].copy_(layer.bias)
    for src_opt, src_params, dst_opt, dst_layers in ((agent.optimizers[0], agent.policy.parameters(), b.optimizers[0],
                                                      b.policy_layers),
                                                     (agent.optimizers[1], agent.value.parameters(), b.optimizers[1],
                                                      b.value_layers)):
        for ps, pd in zip(list(src_params), [t for layer in dst_layers for t in layer]):
            st = src_opt.state.get(ps)
            if not st:
                continue  # before the first step: Adam has no state yet
            m, v = st["exp_avg"], st["exp_avg_sq"]
            if pd.dim() == 3 and pd.shape[1] != 1:  # a weight, (1, in, out)
                m, v = m.T, v.T
            dst_opt.state[pd] = {"step": st["step"].clone(), "exp_avg": m.reshape(pd.shape).clone().contiguous(),
                                 "exp_avg_sq": v.reshape(pd.shape).clone().contiguous()}
    for dst, src in zip(b.schedulers, agent.schedulers):
        dst.load_state_dict(src.state_dict())
    for dst, src in zip(b.optimizers, agent.optimizers):
        for gd, gs in zip(dst.param_groups, src.param_groups):
            gd["lr"] = gs["lr"]
    b.obs_stats.mean, b.obs_stats.var = agent.obs_stats.mean[None].clone(), agent.obs_stats.var[None].clone()
    b.obs_stats.count = agent.obs_stats.count
    if agent.returns is not None:
        b.returns.stats.mean = agent.returns.stats.mean[None].clone()
        b.returns.stats.var = agent.returns.stats.var[None].clone()
        b.returns.stats.count = agent.returns.stats.count
    b.shuffles[0].set_state(shuffles.get_state())
    b.samplers[0].set_state(torch.get_rng_state())
    return b


def one_update_each(obs):
    """One collect and update by each engine from the same state; (single's obs after, differences)."""
    b = batched_copy()
    state = env._state
    batch1, obs1 = agent.collect(env, obs)
    loss1 = agent.update(batch1, shuffles)
    after = env._state
    env._state = state
    batch2, obs2 = b.collect(env, obs[None])
    loss2 = b.update(batch2)
    env._state = after  # the run goes on from the single-seed trainer's step
    diffs = {
        "obs": (obs1 - obs2[0]).abs().max().item(),
        "advantages": (batch1.advantages - batch2.advantages[0]).abs().max().item(),
        "raw_actions": (batch1.raw_actions - batch2.raw_actions[0]).abs().max().item(),
        "policy": max((w[0] - layer.weight.T).abs().max().item()
                      for (w, _), layer in zip(b.policy_layers, linear(agent.policy.net))),
        "value": max((w[0] - layer.weight.T).abs().max().item()
                     for (w, _), layer in zip(b.value_layers, linear(agent.value))),
        "loss": abs(loss1 - float(loss2[0])),
    }
    return obs1, diffs, b


if fresh:
    U = int(numbers[0]) if numbers else 6
    weights = {}
    for engine in ("single", "batched"):
        fresh_env = PlaygroundVecEnv("CartpoleBalance", settings.num_envs, "cpu", settings.episode_length)
        evaluator = TorchEvaluator("CartpoleBalance", settings, seed if engine == "single" else [seed], 32, False,
                                   settings.episode_length)
        seen = weights[engine] = []
        if engine == "single":
            update = ppo_torch.PPO.update

            def record(self, batch, generator, update=update, seen=seen):
                loss = update(self, batch, generator)
                seen.append([layer.weight.detach().T.clone() for layer in linear(self.policy.net)])
                return loss
            ppo_torch.PPO.update = record
            ppo_torch.train(fresh_env, settings, U * settings.transitions_per_update, seed, "cpu",
                            evaluate=evaluator, eval_every=U * settings.transitions_per_update)
            ppo_torch.PPO.update = update
        else:
            update = ppo_batched.SeedBatchedPPO.update

            def record_batched(self, batch, update=update, seen=seen):
                loss = update(self, batch)
                seen.append([w[0].detach().clone() for w, _ in self.policy_layers])
                return loss
            ppo_batched.SeedBatchedPPO.update = record_batched
            ppo_batched.train(fresh_env, settings, U * settings.transitions_per_update, [seed], "cpu",
                              evaluate=lambda i, params: evaluator.score(params, i),
                              eval_every=U * settings.transitions_per_update)
            ppo_batched.SeedBatchedPPO.update = update
    for u, (a, b) in enumerate(zip(weights["single"], weights["batched"]), start=1):
        print("update", u, "policy weights apart by", max((x - y).abs().max().item() for x, y in zip(a, b)))
    sys.exit(0)

if every:
    episode = env.episode_length
    steps_per_update = settings.unroll_length * settings.unrolls_per_update
    worst: dict[str, float] = {}
    flagged = []
    for u in range(K):
        truncated = (u * steps_per_update) // episode != ((u + 1) * steps_per_update - 1) // episode
        obs, diffs, _ = one_update_each(obs)
        for k, v in diffs.items():
            worst[k] = max(worst.get(k, 0.0), v)
        if max(diffs["policy"], diffs["value"], diffs["obs"]) > 1e-5:
            flagged.append((u + 1, truncated, {k: f"{v:.1e}" for k, v in diffs.items()}))
        if (u + 1) % 32 == 0:
            print(f"update {u + 1}/{K}: worst so far", {k: f"{v:.1e}" for k, v in worst.items()}, flush=True)
    print("updates compared", K, "worst", {k: f"{v:.2e}" for k, v in worst.items()})
    print("updates past 1e-5:", len(flagged))
    for item in flagged[:20]:
        print("  ", item)
    sys.exit(0)

for _ in range(K):
    batch, obs = agent.collect(env, obs)
    agent.update(batch, shuffles)
print("trained", K, "updates; obs count", agent.obs_stats.count, flush=True)
obs, diffs, b = one_update_each(obs)
print(diffs)
print("returns std", agent.returns.std if agent.returns else None, b.returns.std if b.returns else None)
e1 = TorchEvaluator("CartpoleBalance", settings, 0, 32, False, settings.episode_length)
e2 = TorchEvaluator("CartpoleBalance", settings, [0, 1, 2], 32, False, settings.episode_length)
p_single, p_batched = policy_params(agent), b.policy_params(0)
for k in ("obs_mean", "obs_var"):
    print(k, abs(p_single[k] - p_batched[k]).max())
print("layers", [float(abs(a[0] - c[0]).max()) for a, c in zip(p_single["layers"], p_batched["layers"])])
print("single eval", [e1.score(p_single), e1.score(p_single)], "batched eval (0, 1, 0)",
      [e2.score(p_batched, 0), e2.score(p_batched, 1), e2.score(p_batched, 0)])
