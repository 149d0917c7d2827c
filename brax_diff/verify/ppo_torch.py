"""A PyTorch PPO with SLM-Lab's semantics, small enough to hold in one's head.

One update, as SLM-Lab's ``PPO.train`` does it (every knob is a field of
:class:`~.settings.TrainerSettings`):

1. collect ``unrolls_per_update`` unrolls of ``unroll_length`` steps from ``num_envs``
   envs; observations are standardized by running statistics as they arrive;
2. values of every stored state under ``no_grad``; GAE per unroll (:func:`gae`), value
   targets = advantages + values;
3. ``epochs_per_update`` passes over the shuffled batch in minibatches; per minibatch the
   advantages are standardized (or once per batch), the clipped surrogate plus entropy
   bonus trains the policy, the (optionally return-normalized) MSE trains the value net,
   each network with its own Adam and its own gradient-norm clip;
4. the learning rate steps once per update (:func:`lr_factor`, a ``LambdaLR``).

The functions are separate so each can be tested against hand-computed values.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal, TanhTransform

from .settings import TrainerSettings


# -- pieces ------------------------------------------------------------------------------
def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
        truncated: torch.Tensor, discount: float, lam: float, bootstrap_on_timeout: bool = True) -> torch.Tensor:
    """Generalized advantage estimates over one unroll; every tensor is (T, envs).

    ``next_values[t]`` is V of the observation after step t (after an auto-reset, the
    reset state's, as in SLM-Lab). A termination cuts the bootstrap and the chain.
    ``bootstrap_on_timeout=True`` is SLM-Lab's ``calc_gaes``: a truncation cuts nothing.
    ``False`` is Brax's ``compute_gae``: truncated steps get advantage 0 and cut the chain.
    """
    not_terminated = 1.0 - terminated
    keep = torch.ones_like(truncated) if bootstrap_on_timeout else 1.0 - truncated
    deltas = (rewards + discount * next_values * not_terminated - values) * keep
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + discount * lam * not_terminated[t] * keep[t] * running
        advantages[t] = running
    return advantages


def standardize(x: torch.Tensor) -> torch.Tensor:
    """SLM-Lab's ``math_util.standardize``: (x - mean) / (std + 1e-8), unbiased std; a single
    element is left alone (SLM-Lab skips standardizing a minibatch of one)."""
    if x.numel() < 2:
        return x
    return (x - x.mean()) / (x.std() + 1e-8)


def lr_factor(update: int, total_updates: int, final_factor: float, schedule: str) -> float:
    """SLM-Lab's ``LinearToMin``: max(final, 1 - update (1 - final) / total_updates); 1 when constant."""
    if schedule == "constant":
        return 1.0
    return max(final_factor, 1.0 - update * (1.0 - final_factor) / max(1, total_updates))


class RunningMeanStd:
    """Per-feature running mean and (population) variance, merged batch by batch (Chan et al.)."""

    def __init__(self, size: int, eps: float = 1e-8, clip: float | None = None):
        self.mean = torch.zeros(size, dtype=torch.float64)
        self.var = torch.ones(size, dtype=torch.float64)
        self.count = 0
        self.eps, self.clip = eps, clip

    def update(self, x: torch.Tensor) -> None:
        x = x.detach().to(torch.float64).reshape(-1, self.mean.shape[0])
        self.mean, self.var = self.mean.to(x.device), self.var.to(x.device)  # follow the data (GPU)
        batch_mean, batch_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total
        self.count = total

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        out = (x - self.mean.to(x)) / torch.sqrt(self.var.to(x) + self.eps)
        return out if self.clip is None else out.clamp(-self.clip, self.clip)


class ReturnNormalizer:
    """SLM-Lab's value-target scaling: divide by the running std of the targets, floored at 1,
    clipped to +-10; the statistics are updated with every minibatch's targets."""

    def __init__(self, eps: float = 1e-8, clip: float = 10.0):
        self.stats = RunningMeanStd(1)
        self.stats.var = torch.zeros(1, dtype=torch.float64) + 1.0
        self.eps, self.clip = eps, clip

    def update(self, targets: torch.Tensor) -> None:
        self.stats.update(targets.reshape(-1, 1))

    @property
    def std(self) -> float:
        return max(1.0, math.sqrt(float(self.stats.var[0]) + self.eps))

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x / self.std).clamp(-self.clip, self.clip)


ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"silu": nn.SiLU, "relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU}


def init_linear(layer: nn.Linear, kernel_init: str) -> None:
    """orthogonal (gain sqrt 2, SLM-Lab's gain for its relu default) or lecun_uniform
    (U(+-sqrt(3 / fan_in)), Brax's); biases 0."""
    if kernel_init == "orthogonal":
        nn.init.orthogonal_(layer.weight, gain=math.sqrt(2.0))
    else:
        bound = math.sqrt(3.0 / layer.in_features)
        nn.init.uniform_(layer.weight, -bound, bound)
    nn.init.zeros_(layer.bias)


def mlp(inputs: int, hidden: tuple[int, ...], outputs: int, activation: str, kernel_init: str) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = inputs
    for size in hidden:
        layers += [nn.Linear(width, size), ACTIVATIONS[activation]()]
        width = size
    layers.append(nn.Linear(width, outputs))
    for layer in layers:
        if isinstance(layer, nn.Linear):
            init_linear(layer, kernel_init)
    return nn.Sequential(*layers)


def std_from_raw(raw: torch.Tensor, settings: TrainerSettings) -> torch.Tensor:
    """The policy's raw std output -> std, per ``std_transform``.

    clamped_exp: exp(clamp(raw, log std_min, log std_max)) (SLM-Lab: log-std in [-5, 0.5]);
    exp: exp(raw); softplus: softplus(raw) + std_min (Brax).
    """
    if settings.std_transform == "softplus":
        std = nn.functional.softplus(raw) + settings.std_min
        return std if settings.std_max is None else std.clamp(max=settings.std_max)
    if settings.std_transform == "exp":
        return raw.exp()
    high = None if settings.std_max is None else math.log(settings.std_max)
    return raw.clamp(min=math.log(settings.std_min), max=high).exp()


class ActionDistribution:
    """A diagonal Normal over the raw (pre-squash) action, optionally tanh-squashed.

    Raw actions are what is stored, so log-probabilities never need atanh; the tanh case
    adds TanhTransform's log-det-Jacobian, and its entropy is the base entropy plus a
    one-sample estimate of that Jacobian term (as Brax estimates it).
    """

    def __init__(self, loc: torch.Tensor, std: torch.Tensor, squash: bool):
        self.base = Normal(loc, std)
        self.squash = TanhTransform(cache_size=1) if squash else None

    def sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(raw action to store, action for the env in [-1, 1])."""
        raw = self.base.sample()
        env_action = self.squash(raw) if self.squash else raw.clamp(-1.0, 1.0)
        return raw, env_action

    def log_prob(self, raw: torch.Tensor) -> torch.Tensor:
        logp = self.base.log_prob(raw)
        if self.squash:
            logp = logp - self.squash.log_abs_det_jacobian(raw, torch.tanh(raw))
        return logp.sum(-1)

    def entropy(self) -> torch.Tensor:
        entropy = self.base.entropy()
        if self.squash:
            sample = self.base.rsample()
            entropy = entropy + self.squash.log_abs_det_jacobian(sample, torch.tanh(sample))
        return entropy.sum(-1)


class Policy(nn.Module):
    """MLP -> (loc, raw std) per action dimension: a state-dependent std, as SLM-Lab's nets."""

    def __init__(self, obs_size: int, action_size: int, settings: TrainerSettings):
        super().__init__()
        self.settings = settings
        self.net = mlp(obs_size, settings.policy_hidden_layers, 2 * action_size, settings.activation,
                       settings.kernel_init)

    def forward(self, obs: torch.Tensor) -> ActionDistribution:
        loc, raw = self.net(obs).chunk(2, dim=-1)
        return ActionDistribution(loc, std_from_raw(raw, self.settings),
                                  self.settings.action_distribution == "tanh_normal")


class VecEnv(Protocol):
    num_envs: int
    obs_size: int
    action_size: int
    episode_length: int

    def reset(self, seed: int) -> torch.Tensor: ...
    def step(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]: ...


@dataclass
class Batch:
    """One update's data, (unrolls, T, envs, ...) flattened to transitions where needed."""

    obs: torch.Tensor
    raw_actions: torch.Tensor
    log_probs: torch.Tensor
    advantages: torch.Tensor
    targets: torch.Tensor
    old_values: torch.Tensor
    mean_reward: float


@dataclass
class TrainLog:
    """The learning curve: after every update in which episodes finished, (env steps, mean
    undiscounted raw return of those episodes), the quantity Brax's ``eval/episode_reward``
    reports. ``reward_per_step`` keeps every update's mean raw reward, the fallback when a
    budget is shorter than one episode."""

    steps: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    reward_per_step: list[float] = field(default_factory=list)
    update_steps: list[int] = field(default_factory=list)
    env_steps: int = 0
    seconds: float = 0.0


class PPO:
    def __init__(self, settings: TrainerSettings, obs_size: int, action_size: int, total_updates: int,
                 device: torch.device | str = "cpu"):
        self.s, self.device = settings, torch.device(device)
        self.policy = Policy(obs_size, action_size, settings).to(self.device)
        self.value = mlp(obs_size, settings.value_hidden_layers, 1, settings.activation,
                         settings.kernel_init).to(self.device)
        self.obs_stats = RunningMeanStd(obs_size, settings.obs_norm_std_eps, settings.obs_clip)
        self.returns = ReturnNormalizer() if settings.value_target_normalization else None
        self.episode_return: torch.Tensor | float = 0.0
        self.finished: list[float] = []  # returns of episodes finished since the last read
        self.optimizers, self.schedulers = [], []
        for net in (self.policy, self.value):  # SLM-Lab: separate nets, separate Adams
            optim = torch.optim.Adam(net.parameters(), lr=settings.learning_rate, eps=settings.adam_eps)
            self.optimizers.append(optim)
            self.schedulers.append(torch.optim.lr_scheduler.LambdaLR(
                optim, lambda u: lr_factor(u, total_updates, settings.lr_final_factor, settings.lr_schedule)))

    def track(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """Sum raw rewards per env; on done, keep the episode's return and start again."""
        self.episode_return = self.episode_return + reward
        finished = done > 0
        if bool(finished.any()):
            self.finished.extend(self.episode_return[finished].tolist())
        self.episode_return = torch.where(finished, torch.zeros_like(reward), self.episode_return)

    def observe(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalize an observation batch, first folding it into the running statistics."""
        if not self.s.obs_normalization:
            return obs
        self.obs_stats.update(obs)
        return self.obs_stats.normalize(obs)

    @torch.no_grad()
    def collect(self, env: VecEnv, obs: torch.Tensor) -> tuple[Batch, torch.Tensor]:
        s, unrolls = self.s, []
        rewards_total = 0.0
        for _ in range(s.unrolls_per_update):
            steps = {k: [] for k in ("obs", "raw", "logp", "reward", "term", "trunc")}
            for _ in range(s.unroll_length):
                dist = self.policy(obs)
                raw, action = dist.sample()
                next_obs, reward, terminated, truncated = env.step(action)
                steps["obs"].append(obs)
                steps["raw"].append(raw)
                steps["logp"].append(dist.log_prob(raw))
                steps["reward"].append(reward)
                steps["term"].append(terminated)
                steps["trunc"].append(truncated)
                self.track(reward, torch.maximum(terminated, truncated))
                obs = self.observe(next_obs)
            unroll = {k: torch.stack(v) for k, v in steps.items()}
            rewards_total += float(unroll["reward"].mean())
            values = self.value(unroll["obs"]).squeeze(-1)
            next_values = torch.cat([values[1:], self.value(obs).squeeze(-1)[None]])
            unroll["adv"] = gae(unroll["reward"] * s.reward_scale, values, next_values, unroll["term"],
                                unroll["trunc"], s.discount, s.gae_lambda, s.bootstrap_on_timeout)
            unroll["target"] = unroll["adv"] + values
            unroll["value"] = values
            unrolls.append(unroll)

        def flat(key: str) -> torch.Tensor:
            data = torch.cat([u[key] for u in unrolls])
            return data.reshape(-1, *data.shape[2:])

        batch = Batch(flat("obs"), flat("raw"), flat("logp"), flat("adv"), flat("target"), flat("value"),
                      rewards_total / s.unrolls_per_update)
        return batch, obs

    def value_loss(self, values: torch.Tensor, targets: torch.Tensor, old_values: torch.Tensor) -> torch.Tensor:
        if self.returns is not None:
            self.returns.update(targets)
            values, targets = self.returns.normalize(values), self.returns.normalize(targets)
        error = (values - targets) ** 2
        if self.s.value_clipping is not None:
            old = old_values if self.returns is None else self.returns.normalize(old_values)
            clipped = old + (values - old).clamp(-self.s.value_clipping, self.s.value_clipping)
            error = torch.max(error, (clipped - targets) ** 2)
        return self.s.value_loss_coef * error.mean()

    def policy_loss(self, obs: torch.Tensor, raw: torch.Tensor, old_logp: torch.Tensor,
                    advantages: torch.Tensor) -> torch.Tensor:
        if self.s.advantage_normalization and self.s.advantage_normalization_scope == "minibatch":
            advantages = standardize(advantages)
        dist = self.policy(obs)
        ratio = torch.exp(dist.log_prob(raw) - old_logp)
        eps = self.s.clip_epsilon
        surrogate = torch.min(ratio * advantages, ratio.clamp(1.0 - eps, 1.0 + eps) * advantages)
        return -surrogate.mean() - self.s.entropy_coef * dist.entropy().mean()

    def step(self, net: nn.Module, optim: torch.optim.Optimizer, loss: torch.Tensor) -> None:
        optim.zero_grad()
        loss.backward()
        if self.s.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(net.parameters(), self.s.max_grad_norm)
        optim.step()

    def update(self, batch: Batch, generator: torch.Generator) -> float:
        s = self.s
        advantages = batch.advantages
        if s.advantage_normalization and s.advantage_normalization_scope == "batch":
            advantages = standardize(advantages)
        size, total = s.effective_minibatch, batch.obs.shape[0]
        last = float("nan")
        for _ in range(s.epochs_per_update):
            order = torch.randperm(total, generator=generator).to(self.device)
            for start in range(0, total, size):
                idx = order[start:start + size]
                policy_loss = self.policy_loss(batch.obs[idx], batch.raw_actions[idx], batch.log_probs[idx],
                                               advantages[idx])
                value_loss = self.value_loss(self.value(batch.obs[idx]).squeeze(-1), batch.targets[idx],
                                             batch.old_values[idx])
                self.step(self.policy, self.optimizers[0], policy_loss)
                self.step(self.value, self.optimizers[1], value_loss)
                last = float(policy_loss.detach() + value_loss.detach())
        for scheduler in self.schedulers:
            scheduler.step()
        return last


def planned_updates(settings: TrainerSettings, budget: int) -> int:
    """Updates a budget buys: whole updates, at least one."""
    return max(1, budget // settings.transitions_per_update)


def train(env: VecEnv, settings: TrainerSettings, budget: int, seed: int, device: str = "cpu",
          on_update: Callable[[int, float], None] | None = None) -> TrainLog:
    """Train for ``budget`` env steps (whole updates, at least one) and return the learning curve.

    Raises FloatingPointError when a loss or an observation goes NaN, naming the update.
    """
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    updates = planned_updates(settings, budget)
    agent = PPO(settings, env.obs_size, env.action_size, updates, device)
    log, started = TrainLog(), time.perf_counter()
    obs = agent.observe(env.reset(seed))
    agent.episode_return = torch.zeros(env.num_envs, device=agent.device)
    for update in range(updates):
        batch, obs = agent.collect(env, obs)
        loss = agent.update(batch, generator)
        if not math.isfinite(loss) or not math.isfinite(batch.mean_reward) or not bool(torch.isfinite(obs).all()):
            raise FloatingPointError(f"NaN or inf at update {update + 1} (loss {loss}, reward {batch.mean_reward})")
        steps = settings.transitions_per_update
        log.env_steps += steps
        log.reward_per_step.append(batch.mean_reward)
        log.update_steps.append(log.env_steps)
        if agent.finished:
            log.steps.append(log.env_steps)
            log.scores.append(float(np.mean(agent.finished)))
            agent.finished = []
        if on_update:
            on_update(steps, log.scores[-1] if log.scores else float("nan"))
    log.seconds = time.perf_counter() - started
    return log


def curve(log: TrainLog, episode_length: int) -> tuple[list[int], list[float], str]:
    """(steps, scores, kind): finished-episode returns, or with none finished (a budget shorter
    than one episode) each update's reward per step x episode length."""
    if log.scores:
        return log.steps, log.scores, "episode_return"
    return log.update_steps, [r * episode_length for r in log.reward_per_step], "reward_per_step_x_episode_length"


def final_score(log: TrainLog, episode_length: int) -> float:
    """A run's result: the mean return over its last 20% of curve points (at least one); with no
    finished episode, the mean reward per step of the last 20% of updates x episode length."""
    values = log.scores or [r * episode_length for r in log.reward_per_step]
    if not values:
        return float("nan")
    tail = max(1, len(values) // 5)
    return float(np.mean(values[-tail:]))
