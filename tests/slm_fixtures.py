"""Hand-written files shaped like an SLM-Lab checkout, for the SLM extractor's tests.

Only the shapes the extractor reads and runs are here (``util.set_attr`` of a default dict
and of spec keys, a batch guard, an actor/critic spec split, a ratio clamp, a train loop
that hands its losses to ``train_step``, a ``make_env`` that builds a playground env, a
log-std clamp, a scheduler branch, ...); the values differ from upstream on purpose, so a
test that passes read them from these files.
"""

from __future__ import annotations

SPEC_PATH = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"
JSON_SPEC_PATH = "slm_lab/spec/demo/ppo_demo.json"

SPEC = """
# Fixture spec. Variants:
#   ppo_fx          - dm_control default
#   ppo_fx_small    - small batch (guard rounds it)
#   ppo_fx_big_mb   - minibatch larger than the batch
#   ppo_fx_rs       - reward_scale 10, constant LR, no grad clip
#   ppo_fx_unread   - a key no code reads

_policy: &policy
  modules:
    body:
      Sequential:
        - LazyLinear: {out_features: 48}
        - SiLU:
        - LazyLinear: {out_features: 48}
        - SiLU:
  graph: {input: x, modules: {body: [x]}, output: body}

_value: &value
  modules:
    body:
      Sequential:
        - LazyLinear: {out_features: 96}
        - SiLU:
        - LazyLinear: {out_features: 96}
        - SiLU:
        - LazyLinear: {out_features: 96}
        - SiLU:
  graph: {input: x, modules: {body: [x]}, output: body}

_env: &env
  name: "${env}"
  max_frame: "${max_frame}"
  normalize_obs: true

_algorithm: &algorithm
  name: PPO
  action_pdtype: Normal
  gamma: 0.98
  lam: 0.9
  clip_eps_spec: {name: no_decay, start_val: 0.25}
  entropy_coef_spec:
    name: no_decay
    start_val: 0.003
  val_loss_coef: 0.4
  minibatch_size: 64

_net: &net
  type: ArcNet
  actor_arc: *policy
  critic_arc: *value
  shared: false
  hid_layers_activation: tanh
  init_fn: orthogonal_
  clip_grad_val: 0.7
  use_same_optim: false
  loss_spec: {name: MSELoss}
  optim_spec:
    name: Adam
    lr: 2.5e-4
    eps: 1.0e-6
  lr_scheduler_spec:
    name: LinearToMin
    frame: "${max_frame}"
    min_factor: 0.05

ppo_fx:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      gamma: 0.995
      time_horizon: 16
      training_epoch: 5
    memory: {name: OnPolicyBatchReplay}
    net: *net
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_small:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 10
      minibatch_size: 12
      training_epoch: 3
    memory: {name: OnPolicyBatchReplay}
    net: *net
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_big_mb:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      minibatch_size: 1024
      training_epoch: 2
    memory: {name: OnPolicyBatchReplay}
    net: *net
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}

ppo_fx_rs:
  agent:
    name: PPO
    algorithm:
      name: PPO
      gamma: 0.97
      lam: 0.95
      clip_eps_spec: {name: no_decay, start_val: 0.3}
      time_horizon: 16
      minibatch_size: 32
      training_epoch: 4
    memory: {name: OnPolicyBatchReplay}
    net:
      <<: *net
      clip_grad_val: null
      lr_scheduler_spec: null
  env:
    <<: *env
    num_envs: 8
    reward_scale: 10.0
  meta: {max_session: 1}

ppo_fx_unread:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 1
      fancy_knob: 3
    memory: {name: OnPolicyBatchReplay}
    net: *net
  env:
    <<: *env
    num_envs: 8
    action_repeat: 2
  meta: {max_session: 1}
"""

JSON_SPEC = """{
  "ppo_json": {
    "agent": {
      "name": "PPO",
      "algorithm": {
        "name": "PPO",
        "gamma": 0.9,
        "lam": 0.8,
        "clip_eps_spec": {"name": "no_decay", "start_val": 0.1},
        "time_horizon": 32,
        "minibatch_size": 128,
        "training_epoch": 2
      },
      "memory": {"name": "OnPolicyBatchReplay"},
      "net": {
        "type": "ArcNet",
        "shared": true,
        "use_same_optim": true,
        "optim_spec": {"name": "Adam", "lr": 0.0003},
        "lr_scheduler_spec": null
      }
    },
    "env": {"name": "playground/CartpoleBalance", "max_frame": 1000, "num_envs": 4},
    "meta": {"max_session": 1}
  }
}
"""

PPO = '''
import math

from slm_lab.agent.algorithm import policy_util
from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.lib import math_util, util
import torch


class PPO(ActorCritic):
    """Fixture PPO: defaults, the keys it reads, a batch guard, a clipped loss, a train loop."""

    def init_algorithm_params(self):
        util.set_attr(
            self,
            dict(
                action_pdtype="default",
                minibatch_size=4,
                val_loss_coef=0.75,
                normalize_v_targets=False,
                clip_vloss=False,
                normalize_advantages="standardize",
                entropy_coef_spec=None,
            ),
        )
        util.set_attr(
            self,
            self.algorithm_spec,
            [
                "action_pdtype",
                "gamma",
                "lam",
                "clip_eps_spec",
                "entropy_coef_spec",
                "val_loss_coef",
                "minibatch_size",
                "time_horizon",
                "training_epoch",
                "normalize_v_targets",
                "clip_vloss",
                "normalize_advantages",
            ],
        )
        self.to_train = 0
        num_envs = self.agent.env.num_envs
        if self.minibatch_size % num_envs != 0 or self.time_horizon % num_envs != 0:
            self.minibatch_size = math.ceil(self.minibatch_size / num_envs) * num_envs
            self.time_horizon = math.ceil(self.time_horizon / num_envs) * num_envs
            print("rounded to multiples of num_envs")
        batch_size = self.time_horizon * num_envs
        if self.minibatch_size > batch_size:
            self.minibatch_size = batch_size
        self.training_frequency = self.time_horizon
        assert self.memory_spec["name"] == "OnPolicyBatchReplay", "PPO needs OnPolicyBatchReplay"
        self.clip_eps_scheduler = policy_util.VarScheduler(self.clip_eps_spec)
        self.clip_eps = self.clip_eps_scheduler.start_val
        if self.entropy_coef_spec is not None:
            self.entropy_coef_scheduler = policy_util.VarScheduler(self.entropy_coef_spec)
            self.agent.entropy_coef = self.entropy_coef_scheduler.start_val

    def calc_policy_loss(self, batch, pdparams, advs):
        clip_eps = self.clip_eps
        advs = advs.view(-1)
        if len(advs) > 1:
            advs = math_util.standardize(advs)
        ratios = torch.exp(pdparams - batch["log_probs"])
        sur_1 = ratios * advs
        sur_2 = torch.clamp(ratios, 1.0 - clip_eps, 1.0 + clip_eps) * advs
        action_pd = policy_util.init_action_pd(self.agent.ActionPD, pdparams)
        entropy = action_pd.entropy().mean()
        return -torch.min(sur_1, sur_2).mean() - self.agent.entropy_coef * entropy

    def train(self):
        if self.to_train == 1:
            batch = self.sample()
            with torch.no_grad():
                v_preds = self.calc_v(batch["states"])
                batch["advs"], batch["v_targets"] = self.calc_gae_advs_v_targets(batch, v_preds)
            for _ in range(self.training_epoch):
                for minibatch in util.split_minibatch(batch, self.minibatch_size):
                    if self.agent.env.is_venv:
                        for k, v in minibatch.items():
                            minibatch[k] = math_util.venv_pack(v, self.agent.env.num_envs)
                    pdparams, v_preds = self.calc_pdparam_v(minibatch)
                    policy_loss = self.calc_policy_loss(minibatch, pdparams, minibatch["advs"])
                    val_loss = self.calc_val_loss(v_preds, minibatch["v_targets"])
                    if self.shared:
                        self.net.train_step(policy_loss + val_loss, self.optim)
                    else:
                        self.net.train_step(policy_loss, self.optim)
                        self.critic_net.train_step(val_loss, self.critic_optim)
            self.to_train = 0
'''

ACTOR_CRITIC = '''
from slm_lab.agent import net
from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.net import net_util
from slm_lab.lib import math_util
import torch


class ActorCritic(Algorithm):
    def calc_v(self, states):
        return (self.net if self.shared else self.critic_net)(states).view(-1)

    def calc_gae_advs_v_targets(self, batch, v_preds):
        last_v_pred = self.calc_v(batch["next_states"][-1:])
        v_preds_all = torch.cat((v_preds, last_v_pred), dim=0)
        advs = math_util.calc_gaes(batch["rewards"], batch["terminateds"], v_preds_all, self.gamma, self.lam)
        return advs, advs + v_preds

    def init_nets(self, global_nets=None):
        assert "shared" in self.net_spec, "Specify shared for ActorCritic in net_spec"
        self.shared = self.net_spec["shared"]
        actor_net_spec = self.net_spec.copy()
        critic_net_spec = self.net_spec.copy()
        for k in self.net_spec:
            if "actor_" in k:
                actor_net_spec[k.replace("actor_", "")] = actor_net_spec.pop(k)
                critic_net_spec.pop(k)
            if "critic_" in k:
                critic_net_spec[k.replace("critic_", "")] = critic_net_spec.pop(k)
                actor_net_spec.pop(k)
        if critic_net_spec["use_same_optim"]:
            critic_net_spec = actor_net_spec
        NetClass = getattr(net, actor_net_spec["type"])
        self.net = NetClass(actor_net_spec, self.agent.state_dim, self.agent.action_dim)
        if not self.shared:
            CriticNetClass = getattr(net, critic_net_spec["type"])
            self.critic_net = CriticNetClass(critic_net_spec, self.agent.state_dim, 1)
            self.critic_optim = net_util.get_optim(self.critic_net, self.critic_net.optim_spec)
        self.optim = net_util.get_optim(self.net, self.net.optim_spec)

    def sample(self):
        return self.agent.memory.sample()

    def calc_pdparam_v(self, batch):
        pdparams = self.net(batch["states"])
        v_preds = pdparams if self.shared else self.critic_net(batch["states"])
        return pdparams, v_preds

    def calc_val_loss(self, v_preds, v_targets):
        if self.normalize_v_targets:
            v_std = v_targets.std() + 1e-8
            val_loss = self.val_loss_coef * self.net.loss_fn(v_preds / v_std, v_targets / v_std)
        else:
            val_loss = self.val_loss_coef * self.net.loss_fn(v_preds, v_targets)
        return val_loss
'''

ALGORITHM_BASE = '''
class Algorithm:
    def __init__(self, agent, global_nets=None):
        self.agent = agent
        self.algorithm_spec = agent.agent_spec["algorithm"]
        self.name = self.algorithm_spec["name"]
        self.memory_spec = agent.agent_spec["memory"]
        self.net_spec = agent.agent_spec["net"]
        self.init_algorithm_params()
        self.init_nets(global_nets)
'''

ALGORITHM_INIT = '''
from .actor_critic import *
from .ppo import *
'''

POLICY_UTIL = '''
from torch import distributions
import numpy as np
import torch

from slm_lab.lib import math_util, util

ACTION_PDS = {
    "continuous": ["Normal", "Beta"],
    "multi_continuous": ["Normal", "MultivariateNormal"],
    "discrete": ["Categorical"],
}


def get_action_pd_cls(action_pdtype, action_type):
    assert action_pdtype in ACTION_PDS[action_type], "not a distribution of this action type"
    return getattr(distributions, action_pdtype)


def init_action_pd(ActionPD, pdparam):
    loc, scale = pdparam
    scale = torch.clamp(scale, min=-4, max=1).exp()
    return ActionPD(loc=loc, scale=scale)


class VarScheduler:
    def __init__(self, var_decay_spec=None):
        self._updater_name = "no_decay" if var_decay_spec is None else var_decay_spec["name"]
        self._updater = getattr(math_util, self._updater_name)
        util.set_attr(self, dict(start_val=np.nan))
        util.set_attr(self, var_decay_spec, ["start_val", "end_val", "start_step", "end_step"])
        if not getattr(self, "end_val", None):
            self.end_val = self.start_val
'''

ARC_NET = '''
import torch.nn as nn

from slm_lab.agent.net import net_util
from slm_lab.agent.net.base import Net
from slm_lab.lib import util


class ArcNet(Net, nn.Module):
    def __init__(self, net_spec, in_dim, out_dim):
        super().__init__(net_spec, in_dim, out_dim)
        util.set_attr(
            self,
            dict(
                init_fn=None,
                shared=False,
                hid_layers_activation="relu",
                clip_grad_val=None,
                loss_spec={"name": "MSELoss"},
                optim_spec={"name": "Adam"},
                lr_scheduler_spec=None,
                log_std_init=None,
            ),
        )
        util.set_attr(
            self,
            self.net_spec,
            [
                "init_fn",
                "shared",
                "hid_layers_activation",
                "clip_grad_val",
                "loss_spec",
                "optim_spec",
                "lr_scheduler_spec",
                "log_std_init",
            ],
        )
        arc = net_spec.get("arc")
        self.tails, self.log_std = net_util.build_tails(arc, out_dim, None, self.log_std_init)
        self.loss_fn = net_util.get_loss_fn(self, self.loss_spec)
'''

NET_INIT = '''
from slm_lab.agent.net.arc_net import *
'''

NET_UTIL_WITH_MIN = '''
import torch
import torch.nn as nn

from slm_lab.lib import optimizer

setattr(torch.optim, "GlobalAdam", optimizer.GlobalAdam)


class NoOpLRScheduler:
    def __init__(self, optim):
        self.optim = optim


def get_nn_name(uncased_name):
    for nn_name in nn.__dict__:
        if uncased_name.lower() == nn_name.lower():
            return nn_name
    raise ValueError(f"Name {uncased_name} not found in torch.nn")


def get_loss_fn(cls, loss_spec):
    LossClass = getattr(nn, get_nn_name(loss_spec["name"]))
    loss_kwargs = {k: v for k, v in loss_spec.items() if k != "name"}
    return LossClass(**loss_kwargs)


def get_optim(net, optim_spec):
    OptimClass = getattr(torch.optim, optim_spec["name"])
    optim_kwargs = {k: v for k, v in optim_spec.items() if k != "name"}
    return OptimClass(net.parameters(), **optim_kwargs)


def get_lr_scheduler(optim, lr_scheduler_spec, steps_per_schedule=1):
    if not lr_scheduler_spec:
        lr_scheduler = NoOpLRScheduler(optim)
    elif lr_scheduler_spec["name"] == "LinearToZero":
        frame = float(lr_scheduler_spec["frame"])
        n = max(1, frame / steps_per_schedule)
        lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optim, lr_lambda=lambda x: max(0, 1 - x / n))
    elif lr_scheduler_spec["name"] == "LinearToMin":
        frame = float(lr_scheduler_spec["frame"])
        floor = float(lr_scheduler_spec.get("min_factor", 0.2))
        n = max(1, frame / steps_per_schedule)
        lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            optim, lr_lambda=lambda x: max(floor, 1 - x * (1 - floor) / n))
    else:
        SchedulerClass = getattr(torch.optim.lr_scheduler, lr_scheduler_spec["name"])
        lr_scheduler = SchedulerClass(optim)
    return lr_scheduler


def init_layers(net, init_fn_name):
    if init_fn_name is None:
        return
    init_fn = getattr(nn.init, init_fn_name)
    gain = nn.init.calculate_gain(net.hid_layers_activation)
    net.apply(lambda module: init_fn(module.weight, gain=gain))


def build_tails(tail_in_dim, out_dim, out_layer_activation, log_std_init=None):
    if log_std_init is not None:
        return nn.Linear(tail_in_dim, out_dim[0]), nn.Parameter(torch.ones(out_dim[0]) * log_std_init)
    return nn.ModuleList([nn.Linear(tail_in_dim, d) for d in out_dim]), None
'''

# The same module after the LinearToMin branch was dropped: specs naming it break.
NET_UTIL_WITHOUT_MIN = NET_UTIL_WITH_MIN.replace('''    elif lr_scheduler_spec["name"] == "LinearToMin":
        frame = float(lr_scheduler_spec["frame"])
        floor = float(lr_scheduler_spec.get("min_factor", 0.2))
        n = max(1, frame / steps_per_schedule)
        lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            optim, lr_lambda=lambda x: max(floor, 1 - x * (1 - floor) / n))
''', "")

NET_BASE = '''
import torch.nn as nn


class Net:
    def __init__(self, net_spec, in_dim, out_dim):
        self.net_spec = net_spec
        self.in_dim = in_dim
        self.out_dim = out_dim

    def train_step(self, loss, optim, lr_scheduler=None):
        optim.zero_grad()
        loss.backward()
        if self.clip_grad_val is not None:
            nn.utils.clip_grad_norm_(self.parameters(), self.clip_grad_val)
        optim.step()
        return loss
'''

ONPOLICY = '''
class OnPolicyBatchReplay:
    def add_experience(self, state):
        self.states.append(state)
        if len(self.states) == self.agent.algorithm.training_frequency:
            self.agent.algorithm.to_train = 1
'''

MATH_UTIL = '''
import torch


def standardize(v):
    return (v - v.mean()) / (v.std() + 1e-08)


def calc_gaes(rewards, terminateds, v_preds, gamma, lam):
    not_terminateds = 1 - terminateds
    deltas = rewards + gamma * v_preds[1:] * not_terminateds - v_preds[:-1]
    gaes = torch.zeros_like(rewards)
    future = 0.0
    for t in reversed(range(len(rewards))):
        gaes[t] = future = deltas[t] + gamma * lam * not_terminateds[t] * future
    return gaes


def venv_pack(batch_tensor, num_envs):
    return batch_tensor.view([-1, num_envs] + list(batch_tensor.shape)[1:])


def no_decay(start_val, end_val, start_step, end_step, step):
    return start_val


def linear_decay(start_val, end_val, start_step, end_step, step):
    if step < start_step:
        return start_val
    slope = (end_val - start_val) / (end_step - start_step)
    return max(slope * (step - start_step) + start_val, end_val)
'''

UTIL = '''
import numpy as np


def set_attr(obj, attr_dict, keys=None):
    if attr_dict is None:
        return obj
    if keys is not None:
        attr_dict = {k: attr_dict[k] for k in keys if k in attr_dict}
    for attr, val in attr_dict.items():
        setattr(obj, attr, val)
    return obj


def split_minibatch(batch, mb_size):
    size = len(batch["rewards"])
    idxs = np.random.permutation(size)
    chunks = int(size / mb_size)
    parts = np.array_split(idxs[:chunks * mb_size], chunks)
    if size % mb_size != 0:  # the leftover becomes a smaller last minibatch
        parts += [idxs[chunks * mb_size:]]
    return [{k: v[p] for k, v in batch.items()} for p in parts]
'''

ENV_INIT = '''
from gymnasium.wrappers.vector import NormalizeObservation as VectorNormalizeObservation
from gymnasium.wrappers.vector import TransformReward as VectorTransformReward
import gymnasium as gym

from slm_lab.env.wrappers import ClockWrapper, VectorClipObservation
from slm_lab.lib import util

RESERVED = {"name", "num_envs", "max_t", "max_frame", "normalize_obs", "clip_obs", "reward_scale", "device"}


def _set_env_attributes(env, spec):
    env_spec = spec["env"]
    util.set_attr(env, env_spec, ["name", "max_t", "max_frame"])


def _make_playground_env(name, num_envs, normalize_obs, clip_obs, device=None, reward_scale=1.0):
    try:
        from slm_lab.env.playground import PlaygroundVecEnv
        from slm_lab.env.wrappers import TorchNormalizeObservation
    except ImportError:
        raise ImportError("playground/ envs need MuJoCo Playground")
    env = PlaygroundVecEnv(name.removeprefix("playground/"), num_envs)
    if reward_scale != 1.0:
        env = VectorTransformReward(env, lambda r: r * reward_scale)
    if device is not None and normalize_obs:
        env = TorchNormalizeObservation(env)
    if device is None:
        if normalize_obs:
            env = VectorNormalizeObservation(env)
        if clip_obs is not None:
            env = VectorClipObservation(env, bound=float(clip_obs))
    return env


def make_env(spec):
    env_spec = spec["env"]
    name = env_spec["name"]
    num_envs = env_spec.get("num_envs", 1)
    normalize_obs = env_spec.get("normalize_obs", False)
    clip_obs = env_spec.get("clip_obs", 10.0 if normalize_obs else None)
    reward_scale = env_spec.get("reward_scale", 1.0)
    device = env_spec.get("device")
    if device is None or device == "auto":
        import torch
        device = "cuda" if torch.cuda.is_available() else None
    if not name.startswith("playground/"):  # other envs take the remaining keys as kwargs
        make_kwargs = {k: v for k, v in env_spec.items() if k not in RESERVED}
        return gym.make(name, **make_kwargs)
    env = _make_playground_env(name, num_envs, normalize_obs, clip_obs, device=device, reward_scale=reward_scale)
    _set_env_attributes(env, spec)
    return ClockWrapper(env, env_spec.get("max_frame"))
'''

PLAYGROUND = '''
import jax
import jax.numpy as jnp
import numpy as np
from mujoco_playground import registry as pg_registry
from mujoco_playground import wrapper as pg_wrapper

# Per-env action repeat (a table of SLM-Lab's own).
_ACTION_REPEAT = {
    "PendulumSwingup": 4,
}


def _build_config_overrides(env_name):
    default_cfg = pg_registry.get_default_config(env_name)
    return {"impl": "warp"} if hasattr(default_cfg, "impl") else {}


class PlaygroundVecEnv:
    def __init__(self, env_name, num_envs, episode_length=1000, device=None):
        self._env_name = env_name
        self.num_envs = num_envs
        self._device = device
        self._base_env = pg_registry.load(env_name, config_overrides=_build_config_overrides(env_name))
        action_repeat = _ACTION_REPEAT.get(env_name, 1)
        self._env = pg_wrapper.wrap_for_brax_training(
            self._base_env, episode_length=episode_length, action_repeat=action_repeat
        )
        self._jit_step = jax.jit(self._env.step)

    def _get_obs(self, state):
        obs = state.obs
        if isinstance(obs, dict):
            obs = obs.get("state", jnp.concatenate([obs[k] for k in sorted(obs)], axis=-1))
        return np.asarray(obs)

    def step(self, actions):
        self._state = self._jit_step(self._state, actions)
        obs = self._get_obs(self._state)
        rewards = np.asarray(self._state.reward).astype(np.float32)
        dones = np.asarray(self._state.done).astype(bool)
        # Brax's EpisodeWrapper sets state.info["truncation"] (1 at the time limit)
        truncation = self._state.info.get("truncation", None)
        if truncation is not None:
            truncated = np.asarray(truncation).astype(bool)
            terminated = dones & ~truncated
        else:
            terminated = dones
            truncated = np.zeros_like(dones, dtype=bool)
        return obs, rewards, terminated, truncated, {}
'''

WRAPPERS = '''
class TorchNormalizeObservation:
    def __init__(self, env, epsilon: float = 1e-6):
        self.env = env
        self.epsilon = epsilon
        self.count = 0
        self.mean = 0.0

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self.count = self.count + obs.shape[0]
        self.mean = self.mean + (obs.mean(dim=0) - self.mean) * obs.shape[0] / self.count
        return (obs - self.mean) / self.epsilon, rewards, terminated, truncated, info


class VectorClipObservation:
    def __init__(self, env, bound):
        self.env = env
        self.bound = bound


class ClockWrapper:
    def __init__(self, env, max_frame):
        self.env = env
        self.max_frame = max_frame
'''


# SLM-Lab's GPU switches (upstream's shape, written for these tests): TF32 on Ampere-or-newer GPUs
# when OPTIMIZE_PERF is on, its default.
PERF = '''
import torch

from slm_lab.lib.env_var import optimize_perf


def optimize():
    _perf_gpu()


def _perf_gpu():
    if not torch.cuda.is_available() or not optimize_perf():
        return
    major, _ = torch.cuda.get_device_capability()
    if major >= 8:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
'''

ENV_VAR = '''
import os


def optimize_perf():
    return os.getenv("OPTIMIZE_PERF", "true").lower() == "true"
'''


# How SLM-Lab scores a session (upstream's shape, written for these tests): a separate eval env only
# with meta.rigorous_eval, the training env otherwise; scores at the meta's frequencies, else defaults.
CONTROL_PATH = "slm_lab/experiment/control.py"
CONTROL = '''
"""Fixture session: trains an agent, scores it at its checkpoints."""
from slm_lab.env import make_env


class Session:
    def __init__(self, spec):
        self.spec = spec
        self.agent, self.env = make_agent_env(spec)
        self._rigorous_eval = self.spec.get("meta", {}).get("rigorous_eval", False)
        if self._rigorous_eval:
            self.eval_env = make_env(self.spec)
        else:
            self.eval_env = self.env

    def run_rl(self):
        state, info = self.env.reset()
        is_venv = self.env.is_venv
        while self.env.get() < self.env.max_frame:
            action = self.agent.act(state)
            next_state, reward, terminated, truncated, info = self.env.step(action)
            self.try_ckpt(self.agent, self.env)
            if not is_venv and (terminated or truncated):
                state, info = self.env.reset()
            else:
                state = next_state
'''

def repo_files(net_util: str = NET_UTIL_WITH_MIN) -> dict[str, str]:
    """One commit's files of the fixture SLM-Lab checkout."""
    return {
        SPEC_PATH: SPEC,
        JSON_SPEC_PATH: JSON_SPEC,
        "slm_lab/agent/algorithm/__init__.py": ALGORITHM_INIT,
        "slm_lab/agent/algorithm/base.py": ALGORITHM_BASE,
        "slm_lab/agent/algorithm/ppo.py": PPO,
        "slm_lab/agent/algorithm/actor_critic.py": ACTOR_CRITIC,
        "slm_lab/agent/algorithm/policy_util.py": POLICY_UTIL,
        "slm_lab/agent/net/__init__.py": NET_INIT,
        "slm_lab/agent/net/arc_net.py": ARC_NET,
        "slm_lab/agent/net/net_util.py": net_util,
        "slm_lab/agent/net/base.py": NET_BASE,
        "slm_lab/agent/memory/onpolicy.py": ONPOLICY,
        "slm_lab/lib/math_util.py": MATH_UTIL,
        "slm_lab/lib/util.py": UTIL,
        "slm_lab/env/__init__.py": ENV_INIT,
        "slm_lab/env/playground.py": PLAYGROUND,
        "slm_lab/env/wrappers.py": WRAPPERS,
        "slm_lab/lib/perf.py": PERF,
        "slm_lab/lib/env_var.py": ENV_VAR,
        CONTROL_PATH: CONTROL,
    }


def line_of(text: str, needle: str, after: str | None = None) -> int:
    """1-based line of the first ``needle`` in ``text`` (after the line holding ``after``),
    counted as the fixture repo stores the file (dedented, leading newline dropped)."""
    import textwrap

    lines = textwrap.dedent(text).lstrip("\n").splitlines()
    start = 0
    if after is not None:
        start = next(i for i, line in enumerate(lines) if after in line) + 1
    return next(i for i, line in enumerate(lines[start:], start) if needle in line) + 1
