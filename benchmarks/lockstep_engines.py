"""Do the two PyTorch engines agree at a late state? Trains the single-seed trainer K updates
(default 40: past the first time-limit truncation at the cpu preset's shapes), copies its whole
state into a seed-batched model of one seed (weights, Adam moments and steps, LR schedule,
observation and return statistics, shuffle and sampling generators), then runs one collect and
update on each from the same env state and scores the same weights with both evaluators.

    python benchmarks/lockstep_engines.py VERIFY_JSON [K]

VERIFY_JSON: a verify.json whose first planned run's settings are trained (the seed-era
evidence: reports/phase5-seed/verify/verify.json, its baseline). Prints the largest
differences; docs/verify.md has the figures.
"""
import json
import sys

import torch

from brax_diff.verify import ppo_torch, ppo_batched
from brax_diff.verify.envs import PlaygroundVecEnv
from brax_diff.verify.settings import TrainerSettings
from brax_diff.verify.evaluate import TorchEvaluator, policy_params
torch.set_num_threads(1)
settings = TrainerSettings.from_json(json.load(open(sys.argv[1]))['plan']['runs'][0]['settings'])
K = int(sys.argv[2]) if len(sys.argv) > 2 else 40
seed = 0
env = PlaygroundVecEnv("CartpoleBalance", settings.num_envs, "cpu", settings.episode_length)
budget = 10**6 // settings.transitions_per_update * settings.transitions_per_update
torch.manual_seed(seed)
shuffles = ppo_torch._generator(seed, 3)
agent = ppo_torch.PPO(settings, env.obs_size, env.action_size, ppo_torch.schedule_updates(settings, budget), "cpu", seed)
obs = agent.observe(env.reset(seed))
for u in range(K):
    batch, obs = agent.collect(env, obs)
    agent.update(batch, shuffles)
print("trained", K, "updates; obs count", agent.obs_stats.count, flush=True)
# batched clone
b = ppo_batched.SeedBatchedPPO(settings, env.obs_size, env.action_size, ppo_torch.schedule_updates(settings, budget), [seed])
lin = lambda net: [m for m in net if isinstance(m, torch.nn.Linear)]
with torch.no_grad():
    for (w, bb), l in zip(b.policy_layers, lin(agent.policy.net)): w[0].copy_(l.weight.T); bb[0, 0].copy_(l.bias)
    for (w, bb), l in zip(b.value_layers, lin(agent.value)): w[0].copy_(l.weight.T); bb[0, 0].copy_(l.bias)
def copy_adam(src_opt, src_params, dst_opt, dst_layers, transpose):
    dst = [t for layer in dst_layers for t in layer]
    src = list(src_params)
    for ps, pd in zip(src, dst):
        st = src_opt.state[ps]
        m, v = st["exp_avg"], st["exp_avg_sq"]
        if pd.dim() == 3 and pd.shape[1] != 1:  # weight (1, in, out)
            m, v = m.T, v.T
        dst_opt.state[pd] = {"step": st["step"].clone(), "exp_avg": m.reshape(pd.shape).clone().contiguous(),
                             "exp_avg_sq": v.reshape(pd.shape).clone().contiguous()}
copy_adam(agent.optimizers[0], agent.policy.parameters(), b.optimizers[0], b.policy_layers, True)
copy_adam(agent.optimizers[1], agent.value.parameters(), b.optimizers[1], b.value_layers, True)
for sd, ss in zip(b.schedulers, agent.schedulers): sd.load_state_dict(ss.state_dict())
for od, os_ in zip(b.optimizers, agent.optimizers):
    for gd, gs in zip(od.param_groups, os_.param_groups): gd["lr"] = gs["lr"]
b.obs_stats.mean = agent.obs_stats.mean[None].clone(); b.obs_stats.var = agent.obs_stats.var[None].clone(); b.obs_stats.count = agent.obs_stats.count
if agent.returns is not None:
    b.returns.stats.mean = agent.returns.stats.mean[None].clone(); b.returns.stats.var = agent.returns.stats.var[None].clone(); b.returns.stats.count = agent.returns.stats.count
b.shuffles[0].set_state(shuffles.get_state())
b.samplers[0].set_state(torch.get_rng_state())
state = env._state
# one more update on each
batch1, obs1 = agent.collect(env, obs)
loss1 = agent.update(batch1, shuffles)
env._state = state
batch2, obs2 = b.collect(env, obs[None])
loss2 = b.update(batch2)
print("adv diff", (batch1.advantages - batch2.advantages[0]).abs().max().item(), "targets", (batch1.targets - batch2.targets[0]).abs().max().item())
print("raw act diff", (batch1.raw_actions - batch2.raw_actions[0]).abs().max().item())
for (w, bb), l in zip(b.policy_layers, lin(agent.policy.net)):
    print("policy w diff", (w[0] - l.weight.T).abs().max().item(), "scale", l.weight.abs().max().item())
for (w, bb), l in zip(b.value_layers, lin(agent.value)):
    print("value w diff", (w[0] - l.weight.T).abs().max().item())
print("returns std", agent.returns.std if agent.returns else None, b.returns.std if b.returns else None)
print("loss", loss1, loss2)
e1 = TorchEvaluator("CartpoleBalance", settings, 0, 32, False, settings.episode_length)
e2 = TorchEvaluator("CartpoleBalance", settings, [0, 1, 2], 32, False, settings.episode_length)
p_single = policy_params(agent)
p_batched = b.policy_params(0)
for k in ("obs_mean", "obs_var"):
    print(k, abs(p_single[k] - p_batched[k]).max())
print("layers", [float(abs(a[0] - c[0]).max()) for a, c in zip(p_single["layers"], p_batched["layers"])])
s1 = [e1.score(p_single), e1.score(p_single)]
s2 = [e2.score(p_batched, 0), e2.score(p_batched, 1), e2.score(p_batched, 0)]
print("single eval", s1, "batched eval (0, 1, 0)", s2)
