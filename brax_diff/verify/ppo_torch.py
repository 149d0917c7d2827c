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
4. the learning rate steps once per update (:func:`lr_factor`, a ``LambdaLR``) over the
   schedule's own horizon (``lr_decay_steps``, SLM-Lab's ``max_frame``), so a short run
   sees the learning rates the first steps of the real run see.

A run is scored by an evaluator called at fixed env-step checkpoints (``evaluate``, see
:mod:`.evaluate`), never by its training episodes. Seed i fixes the env reset keys (as
Brax's trainer derives them), the policy's and the value net's initial weights (each from a
generator of its own, so an arm that changes one network keeps the other's weights) and the
sampling and shuffling streams.

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

from .settings import TrainerSettings


# -- pieces ------------------------------------------------------------------------------
def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
        truncated: torch.Tensor, discount: float, lam: float,
        truncation: str = "bootstrap_next_obs_across_reset") -> torch.Tensor:
    """Generalized advantage estimates over one unroll; every tensor is (T, envs).

    ``next_values[t]`` is V of the observation after step t (after an auto-reset, the
    reset state's, as in SLM-Lab). A termination cuts the bootstrap and the chain.
    ``truncation="bootstrap_next_obs_across_reset"`` is SLM-Lab's ``calc_gaes``: a truncation
    cuts nothing. ``"mask_bootstrap_last_state"`` is Brax's ``compute_gae``: truncated steps get
    advantage 0 and cut the chain.
    """
    not_terminated = 1.0 - terminated
    keep = torch.ones_like(truncated) if truncation == "bootstrap_next_obs_across_reset" else 1.0 - truncated
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


def lr_factor(update: int, total_updates: float, final_factor: float, schedule: str) -> float:
    """SLM-Lab's ``LinearToMin``: max(final, 1 - update (1 - final) / total_updates); 1 when constant.

    ``total_updates`` is SLM-Lab's ``max(1, frame / frames_per_update)``, a float."""
    if schedule == "constant":
        return 1.0
    return max(final_factor, 1.0 - update * (1.0 - final_factor) / max(1.0, total_updates))


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


def init_linear(layer: nn.Linear, kernel_init: str, generator: torch.Generator | None = None) -> None:
    """orthogonal (gain sqrt 2, SLM-Lab's gain for its relu default) or lecun_uniform
    (U(+-sqrt(3 / fan_in)), Brax's); biases 0."""
    if kernel_init == "orthogonal":
        nn.init.orthogonal_(layer.weight, gain=math.sqrt(2.0), generator=generator)
    else:
        bound = math.sqrt(3.0 / layer.in_features)
        nn.init.uniform_(layer.weight, -bound, bound, generator=generator)
    nn.init.zeros_(layer.bias)


def mlp(inputs: int, hidden: tuple[int, ...], outputs: int, activation: str, kernel_init: str,
        generator: torch.Generator | None = None) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = inputs
    for size in hidden:
        layers += [nn.Linear(width, size), ACTIVATIONS[activation]()]
        width = size
    layers.append(nn.Linear(width, outputs))
    for layer in layers:
        if isinstance(layer, nn.Linear):
            init_linear(layer, kernel_init, generator)
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


_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def tanh_log_det_jacobian(raw: torch.Tensor) -> torch.Tensor:
    """log |d tanh(x) / dx| = log(1 - tanh(x)^2), in the stable form torch's TanhTransform uses."""
    return 2.0 * (math.log(2.0) - raw - nn.functional.softplus(-2.0 * raw))


class ActionDistribution:
    """A diagonal Normal over the raw (pre-squash) action, optionally tanh-squashed.

    Raw actions are what is stored, so log-probabilities never need atanh; the tanh case
    subtracts tanh's log-det-Jacobian, and its entropy is the base entropy plus a
    one-sample estimate of that Jacobian term (as Brax estimates it). Written out rather
    than built from torch.distributions: the objects cost more than the arithmetic at the
    minibatch sizes a CPU run uses.
    """

    def __init__(self, loc: torch.Tensor, std: torch.Tensor, squash: bool, sampled_entropy: bool | None = None):
        self.loc, self.std, self.squash = loc, std, squash
        # entropy_estimator: sampled_squashed adds tanh's Jacobian at one draw; analytic does not
        self.sampled_entropy = squash if sampled_entropy is None else sampled_entropy and squash

    def sample(self, noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(raw action to store, action for the env in [-1, 1]); ``noise``: the standard normal
        draw to use (default: torch's global generator)."""
        with torch.no_grad():
            raw = self.loc + self.std * (torch.randn_like(self.loc) if noise is None else noise)
        env_action = torch.tanh(raw) if self.squash else raw.clamp(-1.0, 1.0)
        return raw, env_action

    def log_prob(self, raw: torch.Tensor) -> torch.Tensor:
        logp = -0.5 * ((raw - self.loc) / self.std) ** 2 - self.std.log() - _LOG_SQRT_2PI
        if self.squash:
            logp = logp - tanh_log_det_jacobian(raw)
        return logp.sum(-1)

    def entropy(self, noise: torch.Tensor | None = None) -> torch.Tensor:
        entropy = 0.5 + _LOG_SQRT_2PI + self.std.log()
        if self.sampled_entropy:
            draw = torch.randn_like(self.loc) if noise is None else noise
            entropy = entropy + tanh_log_det_jacobian(self.loc + self.std * draw)
        return entropy.sum(-1)


def load_brax_initial_weights(policy: nn.Sequential, value: nn.Sequential, settings: TrainerSettings,
                              obs_size: int, action_size: int, seed: int) -> None:
    """Overwrite both networks with the weights Brax's ``ppo.train`` initializes at ``seed``:
    ``make_ppo_networks`` with the same layer sizes, activation and kernel initializer, its
    flax ``init`` from ppo.train's key_policy and key_value (``keys.brax_keys``), each Dense
    layer's kernel (in, out) copied transposed into the torch Linear (out, in), biases as they are."""
    from .brax_reference import network_factory
    from .keys import brax_keys

    networks = network_factory({"policy_hidden_layer_sizes": settings.policy_hidden_layers,
                                "value_hidden_layer_sizes": settings.value_hidden_layers,
                                "activation": settings.activation, "distribution_type": "tanh_normal",
                                "kernel_init": settings.kernel_init})(obs_size, action_size)
    keys = brax_keys(seed)
    for net, params in ((policy, networks.policy_network.init(keys["key_policy"])),
                        (value, networks.value_network.init(keys["key_value"]))):
        linears = [layer for layer in net if isinstance(layer, nn.Linear)]
        dense = params["params"]
        if sorted(dense) != sorted(f"hidden_{i}" for i in range(len(linears))):
            raise ValueError(f"Brax's network has layers {sorted(dense)}, this one {len(linears)} linear layers")
        with torch.no_grad():
            for i, layer in enumerate(linears):
                kernel, bias = (np.asarray(dense[f"hidden_{i}"][name]) for name in ("kernel", "bias"))
                if kernel.T.shape != tuple(layer.weight.shape):
                    raise ValueError(f"Brax's layer {i} is {kernel.shape}, this one {tuple(layer.weight.shape)}")
                layer.weight.copy_(torch.from_numpy(kernel.T.copy()))
                layer.bias.copy_(torch.from_numpy(bias.copy()))


class Policy(nn.Module):
    """MLP -> (loc, raw std) per action dimension: a state-dependent std, as SLM-Lab's nets."""

    def __init__(self, obs_size: int, action_size: int, settings: TrainerSettings,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.settings = settings
        self.net = mlp(obs_size, settings.policy_hidden_layers, 2 * action_size, settings.activation,
                       settings.kernel_init, generator)

    def forward(self, obs: torch.Tensor) -> ActionDistribution:
        loc, raw = self.net(obs).chunk(2, dim=-1)
        estimator = self.settings.entropy_estimator
        return ActionDistribution(loc, std_from_raw(raw, self.settings),
                                  self.settings.action_distribution == "tanh_normal",
                                  None if estimator is None else estimator == "sampled_squashed")


class VecEnv(Protocol):
    num_envs: int
    obs_size: int
    action_size: int
    episode_length: int
    action_repeat: int

    def reset(self, seed: int) -> torch.Tensor: ...
    def reset_all(self) -> torch.Tensor: ...  # every env at once, to fresh initial states
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
class Sequences:
    """One update's data as whole unroll sequences, time-major (T, sequences, ...), for a loss
    that recomputes GAE per minibatch (Brax's). Sequence u x num_envs + e is env e's unroll u, as
    Brax orders its batch. ``obs`` and ``bootstrap_obs`` (each sequence's observation after its
    last step) are as stored: raw under obs_norm_update per_batch_before_sgd, normalized otherwise."""

    obs: torch.Tensor
    bootstrap_obs: torch.Tensor
    raw_actions: torch.Tensor
    log_probs: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    mean_reward: float = float("nan")

    def select(self, idx: torch.Tensor) -> "Sequences":
        return Sequences(self.obs[:, idx], self.bootstrap_obs[idx], self.raw_actions[:, idx], self.log_probs[:, idx],
                         self.rewards[:, idx], self.terminated[:, idx], self.truncated[:, idx], self.mean_reward)


def brax_advantages(rewards: torch.Tensor, values: torch.Tensor, bootstrap: torch.Tensor, terminated: torch.Tensor,
                    truncated: torch.Tensor, discount: float, lam: float, truncation: str, advantage_form: str
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(value targets vs, policy advantages) over (T, B) sequences, from values with no gradient.

    vs = lambda-GAE + V (what Brax's ``compute_gae`` returns first); the advantage is the GAE itself
    (``advantage_form="gae"``) or Brax's ``(r + discount (1 - term) vs_{t+1} - V_t) x (1 - trunc)``
    with vs_{T} the bootstrap value (``"vtrace_pg"``)."""
    next_values = torch.cat([values[1:], bootstrap[None]])
    lambda_gae = gae(rewards, values, next_values, terminated, truncated, discount, lam, truncation)
    vs = lambda_gae + values
    if advantage_form == "gae":
        return vs, lambda_gae
    keep = torch.ones_like(truncated) if truncation == "bootstrap_next_obs_across_reset" else 1.0 - truncated
    next_vs = torch.cat([vs[1:], bootstrap[None]])
    return vs, (rewards + discount * (1.0 - terminated) * next_vs - values) * keep


@dataclass
class TrainLog:
    """The learning curve: (env steps, evaluation score) at every checkpoint, the first
    before any update; ``reward_per_step`` is each update's mean raw training reward (a
    diagnostic, never a score)."""

    steps: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    reward_per_step: list[float] = field(default_factory=list)
    env_steps: int = 0
    updates: int = 0
    seconds: float = 0.0


class PPO:
    def __init__(self, settings: TrainerSettings, obs_size: int, action_size: int, schedule_updates: float,
                 device: torch.device | str = "cpu", seed: int = 0):
        self.s, self.device = settings, torch.device(device)
        # One generator per network: an arm that changes one network's shape keeps the other's weights.
        self.policy = Policy(obs_size, action_size, settings, seeded_generator(seed, "policy_init")).to(self.device)
        self.value = mlp(obs_size, settings.value_hidden_layers, 1, settings.activation,
                         settings.kernel_init, seeded_generator(seed, "value_init")).to(self.device)
        if settings.initial_weights == "brax_keys":
            load_brax_initial_weights(self.policy.net, self.value, settings, obs_size, action_size, seed)
        self.obs_stats = RunningMeanStd(obs_size, settings.obs_norm_std_eps, settings.obs_clip)
        self.returns = ReturnNormalizer() if settings.value_target_normalization else None
        self.optimizers, self.schedulers = [], []
        # SLM-Lab: separate nets, separate Adams, separate clips; Brax: one Adam (optax chain), one clip
        groups = ((self.policy, self.value),) if settings.grad_clip_scope == "global" else (self.policy, self.value)
        for net in groups:
            params = ([p for n in net for p in n.parameters()] if isinstance(net, tuple) else net.parameters())
            # fused: one kernel for all tensors (same update as Adam's loop, to float rounding)
            optim = torch.optim.Adam(params, lr=settings.learning_rate, eps=settings.adam_eps, fused=True)
            self.optimizers.append(optim)
            self.schedulers.append(torch.optim.lr_scheduler.LambdaLR(
                optim, lambda u: lr_factor(u, schedule_updates, settings.lr_final_factor, settings.lr_schedule)))

    @property
    def normalizes_at_use(self) -> bool:
        """Brax's timing: raw observations are stored and normalized where a network reads them."""
        return self.s.obs_normalization and self.s.obs_norm_update == "per_batch_before_sgd"

    def observe(self, obs: torch.Tensor) -> torch.Tensor:
        """An arriving observation batch as stored: per env step (SLM-Lab), folded into the running
        statistics and normalized; per batch (Brax), raw (the batch updates the statistics)."""
        if not self.s.obs_normalization or self.normalizes_at_use:
            return obs
        self.obs_stats.update(obs)
        return self.obs_stats.normalize(obs)

    def at_use(self, obs: torch.Tensor) -> torch.Tensor:
        """A stored observation as the networks read it."""
        return self.obs_stats.normalize(obs) if self.normalizes_at_use else obs

    @torch.no_grad()
    def collect(self, env: VecEnv, obs: torch.Tensor) -> tuple["Batch | Sequences", torch.Tensor]:
        s, unrolls = self.s, []
        rewards_total = 0.0
        for _ in range(s.unrolls_per_update):
            steps = {k: [] for k in ("obs", "raw", "logp", "reward", "term", "trunc")}
            for _ in range(s.unroll_length):
                dist = self.policy(self.at_use(obs))
                raw, action = dist.sample()
                next_obs, reward, terminated, truncated = env.step(action)
                steps["obs"].append(obs)
                steps["raw"].append(raw)
                steps["logp"].append(dist.log_prob(raw))
                steps["reward"].append(reward)
                steps["term"].append(terminated)
                steps["trunc"].append(truncated)
                obs = self.observe(next_obs)
            unroll = {k: torch.stack(v) for k, v in steps.items()}
            unroll["bootstrap_obs"] = obs
            rewards_total += float(unroll["reward"].mean())
            unrolls.append(unroll)
        if self.normalizes_at_use:  # Brax: once per batch, before SGD, from every stored observation
            self.obs_stats.update(torch.cat([u["obs"] for u in unrolls]))
        if s.gae_recompute == "per_minibatch":
            def seq(key: str) -> torch.Tensor:  # (T, unroll x env, ...): sequence u x num_envs + e
                return torch.cat([u[key] for u in unrolls], dim=1)

            return Sequences(seq("obs"), torch.cat([u["bootstrap_obs"] for u in unrolls]), seq("raw"), seq("logp"),
                             seq("reward"), seq("term"), seq("trunc"), rewards_total / s.unrolls_per_update), obs
        for unroll in unrolls:
            values = self.value(self.at_use(unroll["obs"])).squeeze(-1)
            next_values = torch.cat([values[1:], self.value(self.at_use(unroll["bootstrap_obs"])).squeeze(-1)[None]])
            unroll["adv"] = gae(unroll["reward"] * s.reward_scale, values, next_values, unroll["term"],
                                unroll["trunc"], s.discount, s.gae_lambda, s.truncation)
            unroll["target"] = unroll["adv"] + values
            unroll["value"] = values

        def flat(key: str) -> torch.Tensor:
            data = torch.cat([u[key] for u in unrolls])
            return data.reshape(-1, *data.shape[2:])

        batch = Batch(self.at_use(flat("obs")), flat("raw"), flat("logp"), flat("adv"), flat("target"), flat("value"),
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
            nn.utils.clip_grad_norm_(net.parameters(), self.s.max_grad_norm, foreach=True)
        optim.step()

    def brax_loss(self, data: Sequences, entropy_noise: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Brax's ``compute_ppo_loss`` on one minibatch of sequences: GAE with the current value
        parameters (no gradient through it), the clipped surrogate on the (population-std)
        standardized advantages, 0.5 x vf_coefficient x (vs - V)^2 (= value_loss_coef x ..., the
        canonical coefficient counts Brax's 0.5), minus entropy_coef x the entropy (a one-sample
        estimate under sampled_squashed; ``entropy_noise``: its standard normal draw, (T, B, A))."""
        s = self.s
        obs = self.at_use(data.obs)
        dist = self.policy(obs)
        baseline = self.value(obs).squeeze(-1)
        bootstrap = self.value(self.at_use(data.bootstrap_obs)).squeeze(-1)
        vs, advantages = brax_advantages(data.rewards * s.reward_scale, baseline.detach(), bootstrap.detach(),
                                         data.terminated, data.truncated, s.discount, s.gae_lambda, s.truncation,
                                         s.advantage_form)
        if s.advantage_normalization:
            advantages = (advantages - advantages.mean()) / (advantages.std(unbiased=False) + 1e-8)
        ratio = torch.exp(dist.log_prob(data.raw_actions) - data.log_probs)
        eps = s.clip_epsilon
        policy_loss = -torch.min(ratio * advantages, ratio.clamp(1.0 - eps, 1.0 + eps) * advantages).mean()
        value_loss = s.value_loss_coef * ((vs - baseline) ** 2).mean()
        entropy_loss = -s.entropy_coef * dist.entropy(entropy_noise).mean()
        total = policy_loss + value_loss + entropy_loss
        return total, {"total_loss": total, "policy_loss": policy_loss, "v_loss": value_loss,
                       "entropy_loss": entropy_loss}

    def apply_gradients(self, loss: torch.Tensor) -> None:
        """One gradient step of every optimizer on ``loss`` (policy and value terms together).

        A global clip is optax's ``clip_by_global_norm``: scaled by max_norm / norm only when the
        norm exceeds max_norm (torch's clip_grad_norm_ adds 1e-6 to the norm)."""
        for optim in self.optimizers:
            optim.zero_grad()
        loss.backward()
        if self.s.max_grad_norm is not None:
            for optim in self.optimizers:
                params = [p for group in optim.param_groups for p in group["params"] if p.grad is not None]
                if self.s.grad_clip_scope == "global":
                    grads = [p.grad for p in params]
                    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
                    scale = torch.where(norm > self.s.max_grad_norm, self.s.max_grad_norm / norm, torch.ones_like(norm))
                    torch._foreach_mul_(grads, scale)
                else:  # each network's own clip, as step() does it
                    nn.utils.clip_grad_norm_(params, self.s.max_grad_norm, foreach=True)
        for optim in self.optimizers:
            optim.step()

    def update_sequences(self, batch: Sequences, generator: torch.Generator) -> float:
        """Brax's SGD: per epoch a permutation of the sequences, minibatches of whole sequences,
        each its own loss with GAE recomputed (:meth:`brax_loss`)."""
        s = self.s
        sequences = batch.obs.shape[1]
        size = s.effective_minibatch // s.unroll_length
        last = float("nan")
        for _ in range(s.epochs_per_update):
            order = torch.randperm(sequences, generator=generator).to(self.device)
            for start in range(0, sequences, size):
                loss, _ = self.brax_loss(batch.select(order[start:start + size]))
                self.apply_gradients(loss)
                last = float(loss.detach())
        for scheduler in self.schedulers:
            scheduler.step()
        return last

    def update(self, batch: "Batch | Sequences", generator: torch.Generator) -> float:
        if isinstance(batch, Sequences):
            return self.update_sequences(batch, generator)
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
                # One backward for both losses: the networks share no parameter, so each gets the
                # gradient of its own loss, bit for bit, at half the autograd-engine calls; each is
                # then clipped and stepped as before (per network, or globally).
                self.apply_gradients(policy_loss + value_loss)
                losses = (policy_loss, value_loss)
        if s.epochs_per_update and total:
            last = float(losses[0].detach() + losses[1].detach())
        for scheduler in self.schedulers:
            scheduler.step()
        return last


# A run's random streams, one per purpose. The environment's reset keys are not among them:
# they follow Brax's own key derivation from the seed (envs.training_reset_keys), so every arm,
# Brax's trainer included, starts seed i from the same states.
STREAMS = ("policy_init", "value_init", "minibatch_shuffle", "action_noise")


def stream_seed(seed: int, purpose: str) -> int:
    """The torch seed of one purpose's stream: numpy's SeedSequence(seed) spawned once per
    purpose (statistically independent streams; seed + offset schemes overlapped across seeds:
    seed 2's action noise was seed 0's value-network initialisation)."""
    child = np.random.SeedSequence(seed).spawn(len(STREAMS))[STREAMS.index(purpose)]
    return int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))  # 63 bits: any torch accepts it


def seeded_generator(seed: int, purpose: str) -> torch.Generator:
    """A CPU generator for one of a run's random streams (STREAMS)."""
    return torch.Generator().manual_seed(stream_seed(seed, purpose))


def schedule_updates(settings: TrainerSettings, budget: int) -> float:
    """Updates the LR schedule runs over: SLM-Lab's frame / frames per update, the frame being
    ``lr_decay_steps`` (the real run's horizon) or, when that is unknown, this run's budget."""
    horizon = settings.lr_decay_steps if settings.lr_decay_steps else budget
    return max(1.0, horizon / settings.transitions_per_update)


class ResetClock:
    """When every training env is reset together (``env_steps_between_resets``): after the first
    update by which each env has run that many env steps since the last reset, as Brax's train()
    resets after whole training steps; never when it is 0."""

    def __init__(self, settings: TrainerSettings, action_repeat: int):
        self.every = settings.env_steps_between_resets
        self.per_update = settings.unroll_length * settings.unrolls_per_update * action_repeat
        self.since = 0

    def due(self) -> bool:
        """Count one update; True when the envs are to be reset now."""
        self.since += self.per_update
        if not self.every or self.since < self.every:
            return False
        self.since = 0
        return True


def train(env: VecEnv, settings: TrainerSettings, budget: int, seed: int, device: str = "cpu",
          on_update: Callable[[int], None] | None = None, evaluate: Callable[["PPO"], float] | None = None,
          eval_every: int | None = None) -> TrainLog:
    """Train for ``budget`` env steps, scoring with ``evaluate`` at step 0 and every ``eval_every`` steps.

    ``budget`` and ``eval_every`` must be whole updates (the plan rounds them; a mismatch is an
    error, never a silent extra update). Env steps count action repeats, as Brax counts them.
    Raises FloatingPointError when a loss or an observation goes NaN, naming the update.
    """
    update_steps = settings.transitions_per_update * int(getattr(env, "action_repeat", 1))
    if budget % update_steps or (eval_every is not None and eval_every % update_steps):
        raise ValueError(f"budget {budget} and checkpoint interval {eval_every} must be whole updates of "
                         f"{update_steps} env steps")
    torch.manual_seed(stream_seed(seed, "action_noise"))  # action sampling
    shuffles = seeded_generator(seed, "minibatch_shuffle")
    agent = PPO(settings, env.obs_size, env.action_size, schedule_updates(settings, budget), device, seed)
    log, started = TrainLog(), time.perf_counter()
    obs = agent.observe(env.reset(seed))
    resets = ResetClock(settings, int(getattr(env, "action_repeat", 1)))

    def checkpoint() -> None:
        if evaluate is not None and (eval_every is None and log.env_steps in (0, budget)
                                     or eval_every is not None and log.env_steps % eval_every == 0):
            log.steps.append(log.env_steps)
            log.scores.append(float(evaluate(agent)))

    checkpoint()
    for update in range(budget // update_steps):
        batch, obs = agent.collect(env, obs)
        loss = agent.update(batch, shuffles)
        if not math.isfinite(loss) or not math.isfinite(batch.mean_reward) or not bool(torch.isfinite(obs).all()):
            raise FloatingPointError(f"NaN or inf at update {update + 1} (loss {loss}, reward {batch.mean_reward})")
        log.env_steps += update_steps
        log.updates += 1
        log.reward_per_step.append(batch.mean_reward)
        if resets.due():
            obs = agent.observe(env.reset_all())
        checkpoint()
        if on_update:
            on_update(update_steps)
    log.seconds = time.perf_counter() - started
    return log
