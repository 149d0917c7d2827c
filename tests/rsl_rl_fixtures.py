"""Hand-written files shaped like rsl-rl-lib 3.x and Playground's RSL-RL entry points, for
fixture repositories. No upstream code: each file has only the shapes the RSL-RL side reads,
with numbers chosen apart from upstream's so a test shows where each value came from."""

from __future__ import annotations

from brax_fixtures import LOCO_PARAMS, LOCO_PARAMS_TEXT, MANIP_PARAMS, MANIP_PARAMS_TEXT, PLAYGROUND

PPO = "rsl_rl/algorithms/ppo.py"
ACTOR_CRITIC = "rsl_rl/modules/actor_critic.py"
NORMALIZATION = "rsl_rl/networks/normalization.py"
RUNNER = "rsl_rl/runners/on_policy_runner.py"
MLP = "rsl_rl/networks/mlp.py"
SCRIPT = "learning/train_rsl_rl.py"
WRAPPER = "mujoco_playground/_src/wrapper_torch.py"

PPO_TEXT = '''
import torch
from torch import optim


class PPO:
    def __init__(self, policy, storage, num_learning_epochs=7, num_mini_batches=3, clip_param=0.15, gamma=0.9,
                 lam=0.8, value_loss_coef=1.5, entropy_coef=0.02, learning_rate=0.002, max_grad_norm=0.7,
                 use_clipped_value_loss=True, schedule="adaptive", desired_kl=0.02,
                 normalize_advantage_per_mini_batch=False, device="cpu"):
        self.policy = policy
        self.optimizer = optim.Adam(self.policy.parameters(), lr=learning_rate)
        self.gamma = gamma

    def process_env_step(self, obs, rewards, dones, extras):
        self.policy.update_normalization(obs)
        self.transition.rewards = rewards.clone()
        if "time_outs" in extras:
            self.transition.rewards += self.gamma * (self.transition.values * extras["time_outs"]).squeeze(1)
        self.storage.add_transition(self.transition)

    def compute_returns(self, obs):
        advantage = 0
        for step in reversed(range(self.storage.num_transitions_per_env)):
            delta = self.storage.rewards[step] + (1.0 - self.storage.dones[step]) * self.gamma * next_values - v
            advantage = delta + self.gamma * self.lam * advantage
            self.storage.returns[step] = advantage + self.storage.values[step]
        self.storage.advantages = self.storage.returns - self.storage.values
        if not self.normalize_advantage_per_mini_batch:
            self.storage.advantages = (self.storage.advantages - self.storage.advantages.mean()) / (
                self.storage.advantages.std() + 1e-8)

    def update(self):
        for batch in self.storage.mini_batch_generator(self.num_mini_batches, self.num_learning_epochs):
            if self.normalize_advantage_per_mini_batch:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            if self.desired_kl is not None and self.schedule == "adaptive":
                self.learning_rate = self.learning_rate / 1.5
            if self.use_clipped_value_loss:
                clipped = old_values + (values - old_values).clamp(-self.clip_param, self.clip_param)
                value_loss = torch.max((values - returns).pow(2), (clipped - returns).pow(2)).mean()
            else:
                value_loss = (returns - values).pow(2).mean()
            loss = surrogate_loss + self.value_loss_coef * value_loss - self.entropy_coef * entropy.mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
            self.optimizer.step()
'''

ACTOR_CRITIC_TEXT = '''
import torch
from torch.distributions import Normal

from rsl_rl.networks import MLP, EmpiricalNormalization


class ActorCritic(torch.nn.Module):
    def __init__(self, obs, obs_groups, num_actions, actor_obs_normalization=False,
                 critic_obs_normalization=False, actor_hidden_dims=[32, 32], critic_hidden_dims=[32, 32],
                 activation="tanh", init_noise_std=0.3, noise_std_type="scalar", state_dependent_std=False):
        super().__init__()
        self.actor = MLP(1, num_actions, actor_hidden_dims, activation)
        self.critic = MLP(1, 1, critic_hidden_dims, activation)
        self.std = torch.nn.Parameter(init_noise_std * torch.ones(num_actions))

    @property
    def entropy(self):
        return self.distribution.entropy().sum(dim=-1)

    def _update_distribution(self, obs):
        mean = self.actor(obs)
        std = self.std.expand_as(mean)
        self.distribution = Normal(mean, std)
'''

NORMALIZATION_TEXT = '''
import torch


class EmpiricalNormalization(torch.nn.Module):
    def __init__(self, shape, eps=0.05, until=None):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return (x - self._mean) / (self._std + self.eps)
'''

RUNNER_TEXT = '''
class OnPolicyRunner:
    def __init__(self, env, train_cfg, log_dir=None, device="cpu"):
        self.cfg = train_cfg
        self.policy_cfg = train_cfg["policy"]
        if self.cfg.get("empirical_normalization") is not None:
            if self.policy_cfg.get("actor_obs_normalization") is None:
                self.policy_cfg["actor_obs_normalization"] = self.cfg["empirical_normalization"]

    def learn(self, num_learning_iterations, init_at_random_ep_len=False):
        for it in range(num_learning_iterations):
            for _ in range(self.cfg["num_steps_per_env"]):
                actions = self.alg.act(obs)
                obs, rewards, dones, extras = self.env.step(actions)
                self.alg.process_env_step(obs, rewards, dones, extras)
                self.logger.process_env_step(rewards, dones, extras)
            self.alg.compute_returns(obs)
            loss_dict = self.alg.update()
            self.logger.log(it=it, loss_dict=loss_dict)
'''

# The logger's episode returns (upstream's shape: a deque of the returns of finished episodes).
LOGGER = "rsl_rl/utils/logger.py"
LOGGER_TEXT = '''
from collections import deque


class Logger:
    def __init__(self):
        self.rewbuffer = deque(maxlen=100)

    def process_env_step(self, rewards, dones, extras):
        self.cur_reward_sum += rewards
        new_ids = (dones > 0).nonzero(as_tuple=False)
        self.rewbuffer.extend(self.cur_reward_sum[new_ids][:, 0].tolist())
        self.cur_reward_sum[new_ids] = 0
'''

MLP_TEXT = '''
from torch import nn


class MLP(nn.Sequential):
    def __init__(self, input_dim, output_dim, hidden_dims, activation="elu"):
        layers = [nn.Linear(input_dim, hidden_dims[0])]
        super().__init__(*layers)
'''

RSL_RL = {PPO: PPO_TEXT, ACTOR_CRITIC: ACTOR_CRITIC_TEXT, NORMALIZATION: NORMALIZATION_TEXT, RUNNER: RUNNER_TEXT,
          LOGGER: LOGGER_TEXT,
          MLP: MLP_TEXT}
# A later layout (as in rsl-rl-lib 4.x): the policy module and its file are gone.
RSL_RL_MOVED = {ACTOR_CRITIC: None, PPO: PPO_TEXT.replace('if "time_outs" in extras:', "if False:")}

LOCO_RSL_TEXT = '''

def rsl_rl_config(env_name: str, unused_impl=None) -> config_dict.ConfigDict:
  rl_config = config_dict.create(
      seed=1,
      policy=config_dict.create(
          init_noise_std=0.5,
          actor_hidden_dims=[64, 32],
          critic_hidden_dims=[128, 64],
          activation="elu",
          class_name="ActorCritic",
      ),
      algorithm=config_dict.create(
          class_name="PPO",
          value_loss_coef=2.0,
          use_clipped_value_loss=True,
          clip_param=0.25,
          entropy_coef=0.005,
          num_learning_epochs=3,
          num_mini_batches=2,
          learning_rate=5e-4,
          schedule="fixed",
          gamma=0.98,
          lam=0.9,
          max_grad_norm=0.5,
      ),
      num_steps_per_env=16,
      max_iterations=50,
      empirical_normalization=True,
  )

  if env_name in ("Go1Getup", "Go1JoystickFlatTerrain", "Go1Joystick"):
    rl_config.max_iterations = 10
  if env_name.startswith("Spot"):
    rl_config.seed = 2
  if env_name == "Go1JoyStickFlatTerrain":
    rl_config.algorithm.schedule = "adaptive"
  if env_name == "SpotGetup":
    rl_config.algorithm.gamma = 0.95

  return rl_config
'''

MANIP_RSL_TEXT = '''

def rsl_rl_config(env_name: str, unused_impl=None) -> config_dict.ConfigDict:
  return config_dict.create(
      policy=config_dict.create(actor_hidden_dims=[16], critic_hidden_dims=[16], activation="elu"),
      algorithm=config_dict.create(schedule="adaptive", gamma=0.97, learning_rate=1e-3),
      num_steps_per_env=8,
      max_iterations=20,
      empirical_normalization=False,
  )
'''

SCRIPT_TEXT = '''
from absl import flags
import torch

from mujoco_playground import registry, wrapper_torch
from mujoco_playground.config import locomotion_params, manipulation_params

_ENV_NAME = flags.DEFINE_string("env_name", "Go1Getup", "Environment.")
_IMPL = flags.DEFINE_enum("impl", "jax", ["jax", "warp"], "MJX implementation")
_PLAY_ONLY = flags.DEFINE_boolean("play_only", False, "Only play.")
_SEED = flags.DEFINE_integer("seed", 1, "Seed.")
_NUM_ENVS = flags.DEFINE_integer("num_envs", 512, "Parallel envs.")


def get_rl_config(env_name):
  if env_name in registry.manipulation._envs:
    return manipulation_params.rsl_rl_config(env_name)
  return locomotion_params.rsl_rl_config(env_name)


def main(argv):
  num_envs = 1 if _PLAY_ONLY.value else _NUM_ENVS.value
  env_cfg = registry.get_default_config(_ENV_NAME.value)
  env_cfg.impl = _IMPL.value
  raw_env = registry.load(_ENV_NAME.value, config=env_cfg)
  brax_env = wrapper_torch.RSLRLBraxWrapper(
      raw_env,
      num_envs,
      _SEED.value,
      env_cfg.episode_length,
      1,
  )
  train_cfg = get_rl_config(_ENV_NAME.value)
  if isinstance(raw_env.observation_size, dict):
    train_cfg.obs_groups = {"policy": ["state"], "critic": ["privileged_state"]}
  else:
    train_cfg.obs_groups = {"policy": ["state"], "critic": ["state"]}
  runner = OnPolicyRunner(brax_env, train_cfg.to_dict(), "/tmp", device="cpu")
  runner.learn(num_learning_iterations=train_cfg.max_iterations, init_at_random_ep_len=False)
'''

WRAPPER_TEXT = '''
import torch


class RSLRLBraxWrapper:
  def __init__(self, env, num_actors, seed, episode_length, action_repeat, randomization_fn=None):
    self.num_envs = num_actors

  def step(self, action):
    action = torch.clip(action, -0.5, 0.5)
    self.env_state = self.step_fn(self.env_state, action)
    truncation = self.env_state.info["truncation"]
    info_ret = {"time_outs": truncation, "log": {}}
    return obs, reward, done, info_ret
'''

PLAYGROUND_RSL = {**PLAYGROUND, LOCO_PARAMS: LOCO_PARAMS_TEXT + LOCO_RSL_TEXT,
                  MANIP_PARAMS: MANIP_PARAMS_TEXT + MANIP_RSL_TEXT, SCRIPT: SCRIPT_TEXT, WRAPPER: WRAPPER_TEXT}
