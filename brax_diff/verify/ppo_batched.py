"""N seeds of one arm trained in one process as one model: the PPO of :mod:`.ppo_torch`
(read that first) with a leading seed dimension on every tensor.

What is batched, and why: on a CPU a run of the small networks verify trains is mostly
per-call overhead (a jitted env step per collected step, a Python-level forward, backward
and Adam step per minibatch), so N seeds done by the same calls cost little more than one:

* the envs of all seeds are one batch of N x ``num_envs`` envs, stepped by one jitted call;
* each network's layer is one stacked weight (N, in, out) used through ``baddbmm``, so one
  forward/backward serves every seed; one fused Adam over the stacked tensors is N
  independent Adams (Adam is elementwise), and the gradient norm is clipped per seed;
* the evaluation of every seed reuses one compiled evaluator (:class:`.evaluate.TorchEvaluator`).

Nothing mixes across seeds: each seed keeps its own initial weights (the generators of
:class:`.ppo_torch.PPO`), env reset keys (Brax's, :func:`.keys.training_reset_keys`),
sampling stream (the single-seed trainer's own: torch's global stream after
``torch.manual_seed(seed)`` and its networks' construction, drawn in the same order),
shuffles, observation and return statistics, advantage standardization, gradient clip and
evaluation episodes. Every reduction runs over one seed's row. A seed whose loss, reward or
observation goes NaN fails alone (its numbers stay in its own rows); the others train on.
``tests/test_verify_ppo.py`` checks one update of 3 seeds batched against 3 single-seed
``PPO.update`` calls on the same data (to 1e-5), and whole short runs of both trainers on an
action-dependent env against each other, seed by seed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from .ppo_torch import (ActionDistribution, Policy, ResetClock, TrainLog, seeded_generator, gae,
                        load_brax_initial_weights, lr_factor, mlp, schedule_updates, std_from_raw, stream_seed)
from .settings import TrainerSettings

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": nn.functional.silu, "relu": nn.functional.relu, "tanh": torch.tanh, "elu": nn.functional.elu}


def stack_mlp(nets: Sequence[nn.Sequential]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The linear layers of N equal-shaped MLPs as (weight (N, in, out), bias (N, 1, out)) leaves."""
    layers = [[m for m in net if isinstance(m, nn.Linear)] for net in nets]
    out = []
    for per_seed in zip(*layers):
        weight = torch.stack([layer.weight.detach().T for layer in per_seed]).contiguous()
        bias = torch.stack([layer.bias.detach()[None] for layer in per_seed]).contiguous()
        out.append((weight, bias))
    return out


def forward(layers: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor,
            activation: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """(N, batch, in) -> (N, batch, out): every seed's MLP in one batched matmul per layer."""
    for i, (weight, bias) in enumerate(layers):
        x = torch.baddbmm(bias, x, weight)
        if i < len(layers) - 1:
            x = activation(x)
    return x


def standardize_rows(x: torch.Tensor) -> torch.Tensor:
    """:func:`.ppo_torch.standardize` of each seed's row of (N, n)."""
    if x.shape[1] < 2:
        return x
    return (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-8)


class RowRunningMeanStd:
    """:class:`.ppo_torch.RunningMeanStd` per seed: statistics (N, size), data (N, n, size)."""

    def __init__(self, seeds: int, size: int, eps: float = 1e-8, clip: float | None = None):
        self.mean = torch.zeros(seeds, size, dtype=torch.float64)
        self.var = torch.ones(seeds, size, dtype=torch.float64)
        self.count = 0  # the same for every seed: each sees as many samples
        self.eps, self.clip = eps, clip

    def update(self, x: torch.Tensor) -> None:
        x = x.detach().to(torch.float64).reshape(x.shape[0], -1, self.mean.shape[1])
        self.mean, self.var = self.mean.to(x.device), self.var.to(x.device)
        batch_mean, batch_var, n = x.mean(1), x.var(1, unbiased=False), x.shape[1]
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total
        self.count = total

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        out = (x - self.mean[:, None].to(x)) / torch.sqrt(self.var[:, None].to(x) + self.eps)
        return out if self.clip is None else out.clamp(-self.clip, self.clip)


class RowReturnNormalizer:
    """:class:`.ppo_torch.ReturnNormalizer` per seed: targets (N, n) divided by each seed's
    running target std, floored at 1, clipped to +-10."""

    def __init__(self, seeds: int, eps: float = 1e-8, clip: float = 10.0):
        self.stats = RowRunningMeanStd(seeds, 1)
        self.eps, self.clip = eps, clip

    def update(self, targets: torch.Tensor) -> None:
        self.stats.update(targets[..., None])

    @property
    def std(self) -> torch.Tensor:
        return torch.sqrt(self.stats.var + self.eps).clamp(min=1.0)  # (N, 1)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x / self.std.to(x)).clamp(-self.clip, self.clip)


@dataclass
class SeedBatch:
    """One update's data of every seed: (N, transitions, ...), each row in the order the
    single-seed trainer flattens its batch (unroll, step, env)."""

    obs: torch.Tensor
    raw_actions: torch.Tensor
    log_probs: torch.Tensor
    advantages: torch.Tensor
    targets: torch.Tensor
    old_values: torch.Tensor
    mean_reward: torch.Tensor  # (N,)


class SeedBatchedPPO:
    """N independent :class:`.ppo_torch.PPO` agents of one settings, as stacked tensors."""

    def __init__(self, settings: TrainerSettings, obs_size: int, action_size: int, schedule_updates: float,
                 seeds: Sequence[int], device: torch.device | str = "cpu"):
        self.s, self.device, self.seeds = settings, torch.device(device), [int(s) for s in seeds]
        n = len(self.seeds)
        # The single-seed trainer's initial weights, seed by seed (its generators 1 and 2), then stacked.
        # Its action sampling draws from torch's global generator, seeded by ``ppo_torch.train`` just
        # before it builds the networks, whose nn.Linear default initializations (overwritten
        # afterwards) consume draws from it: seed i's sampler is that stream after those draws, so
        # seed i samples the actions the single-seed trainer samples (on a CPU; the global
        # generator itself is left as it was).
        policies, values, self.samplers = [], [], []
        for seed in self.seeds:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(stream_seed(seed, "action_noise"))
                policies.append(Policy(obs_size, action_size, settings, seeded_generator(seed, "policy_init")).net)
                values.append(mlp(obs_size, settings.value_hidden_layers, 1, settings.activation,
                                  settings.kernel_init, seeded_generator(seed, "value_init")))
                if settings.initial_weights == "brax_keys":
                    load_brax_initial_weights(policies[-1], values[-1], settings, obs_size, action_size, seed)
                self.samplers.append(torch.Generator().set_state(torch.get_rng_state()))
        self.policy_layers = [(w.to(self.device).requires_grad_(), b.to(self.device).requires_grad_())
                              for w, b in stack_mlp(policies)]
        self.value_layers = [(w.to(self.device).requires_grad_(), b.to(self.device).requires_grad_())
                             for w, b in stack_mlp(values)]
        self.activation = ACTIVATIONS[settings.activation]
        self.obs_stats = RowRunningMeanStd(n, obs_size, settings.obs_norm_std_eps, settings.obs_clip)
        self.returns = RowReturnNormalizer(n) if settings.value_target_normalization else None
        self.shuffles = [seeded_generator(seed, "minibatch_shuffle") for seed in self.seeds]
        self.optimizers, self.schedulers = [], []
        for layers in (self.policy_layers, self.value_layers):
            params = [t for layer in layers for t in layer]
            optim = torch.optim.Adam(params, lr=settings.learning_rate, eps=settings.adam_eps, fused=True)
            self.optimizers.append(optim)
            self.schedulers.append(torch.optim.lr_scheduler.LambdaLR(
                optim, lambda u: lr_factor(u, schedule_updates, settings.lr_final_factor, settings.lr_schedule)))

    # -- networks ---------------------------------------------------------------------
    def policy(self, obs: torch.Tensor) -> ActionDistribution:
        loc, raw = forward(self.policy_layers, obs, self.activation).chunk(2, dim=-1)
        return ActionDistribution(loc, std_from_raw(raw, self.s), self.s.action_distribution == "tanh_normal")

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return forward(self.value_layers, obs, self.activation).squeeze(-1)

    def noise(self, like: torch.Tensor) -> torch.Tensor:
        """A standard normal draw shaped like (N, ...), seed i's row from seed i's generator."""
        return torch.stack([torch.randn(like.shape[1:], generator=g) for g in self.samplers]).to(like)

    def observe(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.s.obs_normalization:
            return obs
        self.obs_stats.update(obs)
        return self.obs_stats.normalize(obs)

    def policy_params(self, index: int) -> dict:
        """Seed ``index``'s policy in the form :func:`.evaluate.policy_params` gives."""
        import numpy as np

        layers = [(w[index].detach().cpu().numpy().astype(np.float32),
                   b[index, 0].detach().cpu().numpy().astype(np.float32)) for w, b in self.policy_layers]
        return {"layers": layers, "obs_mean": self.obs_stats.mean[index].cpu().numpy().astype(np.float32),
                "obs_var": self.obs_stats.var[index].cpu().numpy().astype(np.float32)}

    # -- one update -------------------------------------------------------------------
    @torch.no_grad()
    def collect(self, env, obs: torch.Tensor) -> tuple[SeedBatch, torch.Tensor]:
        """``obs`` (N, num_envs, obs), normalized; the env holds N x num_envs envs, seed-major."""
        s, n, per_seed = self.s, obs.shape[0], obs.shape[1]
        unrolls, rewards_total = [], torch.zeros(n)
        for _ in range(s.unrolls_per_update):
            steps = {k: [] for k in ("obs", "raw", "logp", "reward", "term", "trunc")}
            for _ in range(s.unroll_length):
                dist = self.policy(obs)
                raw, action = dist.sample(self.noise(dist.loc))
                next_obs, reward, terminated, truncated = env.step(action.reshape(n * per_seed, -1))
                steps["obs"].append(obs)
                steps["raw"].append(raw)
                steps["logp"].append(dist.log_prob(raw))
                steps["reward"].append(reward.view(n, per_seed))
                steps["term"].append(terminated.view(n, per_seed))
                steps["trunc"].append(truncated.view(n, per_seed))
                obs = self.observe(next_obs.view(n, per_seed, -1))
            unroll = {k: torch.stack(v) for k, v in steps.items()}  # (T, N, envs, ...)
            rewards_total += unroll["reward"].mean(dim=(0, 2)).cpu()
            steps_obs = unroll["obs"].movedim(1, 0)  # (N, T, envs, obs)
            values = self.value(steps_obs.reshape(n, -1, steps_obs.shape[-1])).view(n, -1, per_seed).movedim(0, 1)
            next_values = torch.cat([values[1:], self.value(obs)[None]])
            unroll["adv"] = gae(unroll["reward"] * s.reward_scale, values, next_values, unroll["term"],
                                unroll["trunc"], s.discount, s.gae_lambda, s.truncation)
            unroll["target"] = unroll["adv"] + values
            unroll["value"] = values
            unrolls.append(unroll)

        def flat(key: str) -> torch.Tensor:
            data = torch.cat([u[key].movedim(1, 0) for u in unrolls], dim=1)  # (N, unrolls x T, envs, ...)
            return data.reshape(n, -1, *data.shape[3:])

        batch = SeedBatch(flat("obs"), flat("raw"), flat("logp"), flat("adv"), flat("target"), flat("value"),
                          rewards_total / s.unrolls_per_update)
        return batch, obs

    def value_loss(self, values: torch.Tensor, targets: torch.Tensor, old_values: torch.Tensor) -> torch.Tensor:
        """(N,): each seed's loss on its (N, minibatch) rows."""
        if self.returns is not None:
            self.returns.update(targets)
            values, targets = self.returns.normalize(values), self.returns.normalize(targets)
        error = (values - targets) ** 2
        if self.s.value_clipping is not None:
            old = old_values if self.returns is None else self.returns.normalize(old_values)
            clipped = old + (values - old).clamp(-self.s.value_clipping, self.s.value_clipping)
            error = torch.max(error, (clipped - targets) ** 2)
        return self.s.value_loss_coef * error.mean(1)

    def policy_loss(self, obs: torch.Tensor, raw: torch.Tensor, old_logp: torch.Tensor,
                    advantages: torch.Tensor) -> torch.Tensor:
        """(N,): each seed's clipped surrogate and entropy bonus."""
        if self.s.advantage_normalization and self.s.advantage_normalization_scope == "minibatch":
            advantages = standardize_rows(advantages)
        dist = self.policy(obs)
        ratio = torch.exp(dist.log_prob(raw) - old_logp)
        eps = self.s.clip_epsilon
        surrogate = torch.min(ratio * advantages, ratio.clamp(1.0 - eps, 1.0 + eps) * advantages)
        entropy = dist.entropy(self.noise(dist.loc) if dist.squash else None)
        return -surrogate.mean(1) - self.s.entropy_coef * entropy.mean(1)

    def step(self, layers, optim: torch.optim.Optimizer, loss: torch.Tensor) -> None:
        """Backward the sum of the seeds' losses (each seed's gradient is its own loss's), clip
        each seed's gradient norm as ``clip_grad_norm_`` clips one network's, step Adam."""
        optim.zero_grad()
        loss.sum().backward()
        if self.s.max_grad_norm is not None:
            grads = [t.grad for layer in layers for t in layer]
            norms = torch.stack([g.pow(2).flatten(1).sum(1) for g in grads]).sum(0).sqrt()  # (N,)
            coef = (self.s.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.view(-1, *[1] * (g.dim() - 1)))
        optim.step()

    def update(self, batch: SeedBatch) -> torch.Tensor:
        """``epochs_per_update`` shuffled passes; returns each seed's last minibatch loss (N,)."""
        s = self.s
        advantages = batch.advantages
        if s.advantage_normalization and s.advantage_normalization_scope == "batch":
            advantages = standardize_rows(advantages)
        size, total = s.effective_minibatch, batch.obs.shape[1]
        rows = torch.arange(len(self.seeds), device=self.device)[:, None]
        last = torch.full((len(self.seeds),), float("nan"))
        for _ in range(s.epochs_per_update):
            order = torch.stack([torch.randperm(total, generator=g) for g in self.shuffles]).to(self.device)
            for start in range(0, total, size):
                idx = order[:, start:start + size]
                obs = batch.obs[rows, idx]
                policy_loss = self.policy_loss(obs, batch.raw_actions[rows, idx], batch.log_probs[rows, idx],
                                               advantages[rows, idx])
                value_loss = self.value_loss(self.value(obs), batch.targets[rows, idx], batch.old_values[rows, idx])
                self.step(self.policy_layers, self.optimizers[0], policy_loss)
                self.step(self.value_layers, self.optimizers[1], value_loss)
                last = policy_loss.detach() + value_loss.detach()
        for scheduler in self.schedulers:
            scheduler.step()
        return last.cpu()


def train(env, settings: TrainerSettings, budget: int, seeds: Sequence[int], device: str = "cpu",
          on_update: Callable[[int], None] | None = None,
          evaluate: Callable[[int, dict], float] | None = None,
          eval_every: int | None = None) -> tuple[list[TrainLog], dict[int, str]]:
    """:func:`.ppo_torch.train` for every seed of ``seeds`` at once, on an env of
    ``len(seeds) x num_envs`` envs (seed-major); ``evaluate(i, params)`` scores seed i.

    Returns one TrainLog per seed and ``{index: error}`` for the seeds that went NaN (the
    message the single-seed trainer raises); those are not evaluated again. ``on_update``
    gets the env steps of all seeds together.
    """
    update_steps = settings.transitions_per_update * int(getattr(env, "action_repeat", 1))
    if budget % update_steps or (eval_every is not None and eval_every % update_steps):
        raise ValueError(f"budget {budget} and checkpoint interval {eval_every} must be whole updates of "
                         f"{update_steps} env steps")
    n = len(seeds)
    if env.num_envs != n * settings.num_envs:
        raise ValueError(f"{n} seeds of {settings.num_envs} envs need an env of {n * settings.num_envs}, "
                         f"not {env.num_envs}")
    agent = SeedBatchedPPO(settings, env.obs_size, env.action_size, schedule_updates(settings, budget), seeds, device)
    logs = [TrainLog() for _ in seeds]
    failures: dict[int, str] = {}
    started = time.perf_counter()
    obs = agent.observe(env.reset(list(seeds)).view(n, settings.num_envs, -1))
    resets = ResetClock(settings, int(getattr(env, "action_repeat", 1)))

    def checkpoint(env_steps: int) -> None:
        if evaluate is None or not (eval_every is None and env_steps in (0, budget)
                                    or eval_every is not None and env_steps % eval_every == 0):
            return
        for i, log in enumerate(logs):
            if i not in failures:
                log.steps.append(env_steps)
                log.scores.append(float(evaluate(i, agent.policy_params(i))))

    checkpoint(0)
    env_steps = 0
    for update in range(budget // update_steps):
        batch, obs = agent.collect(env, obs)
        loss = agent.update(batch)
        finite_obs = torch.isfinite(obs).flatten(1).all(1).cpu()
        env_steps += update_steps
        for i, log in enumerate(logs):
            if i in failures:
                continue
            reward = float(batch.mean_reward[i])
            if not math.isfinite(float(loss[i])) or not math.isfinite(reward) or not bool(finite_obs[i]):
                failures[i] = f"NaN or inf at update {update + 1} (loss {float(loss[i])}, reward {reward})"
                continue
            log.env_steps += update_steps
            log.updates += 1
            log.reward_per_step.append(reward)
        if len(failures) == n:
            break
        if resets.due():
            obs = agent.observe(env.reset_all().view(n, settings.num_envs, -1))
        checkpoint(env_steps)
        if on_update:
            on_update(update_steps * (n - len(failures)))
    seconds = time.perf_counter() - started
    for log in logs:
        log.seconds = seconds / n  # each seed's share of the wall time
    return logs, failures
