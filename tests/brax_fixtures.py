"""Hand-written files shaped like Brax and MuJoCo Playground, for fixture repositories.

Nothing here is upstream code: these are small stand-ins with the same *shapes* the
extractor reads (a ``train()`` signature, the scans in ``training_step`` / ``sgd_step``,
``compute_ppo_loss``'s ``v_loss`` product, ``brax_ppo_config`` with ``if/elif``
overrides, registries as ``_envs = {...}``). Numbers are chosen so that every derived
value is distinct and checkable by hand.

Brax commits:    BRAX_OLD -> BRAX_NEW (moves defaults, adds parameters) ->
                 BRAX_REFACTORED (training_step renamed) -> BRAX_NO_LOSSES (file deleted)
Playground:      PLAYGROUND -> PLAYGROUND_MOVED (dm_control unroll_length 30 -> 25) ->
                 PLAYGROUND_NO_MANIPULATION (manipulation params deleted)
"""

from __future__ import annotations

TRAIN = "brax/training/agents/ppo/train.py"
LOSSES = "brax/training/agents/ppo/losses.py"
PPO_NETWORKS = "brax/training/agents/ppo/networks.py"
NETWORKS = "brax/training/networks.py"
DISTRIBUTION = "brax/training/distribution.py"
RUNNING_STATISTICS = "brax/training/acme/running_statistics.py"
TYPES = "brax/training/types.py"

DM_PARAMS = "mujoco_playground/config/dm_control_suite_params.py"
LOCO_PARAMS = "mujoco_playground/config/locomotion_params.py"
MANIP_PARAMS = "mujoco_playground/config/manipulation_params.py"
DM_REGISTRY = "mujoco_playground/_src/dm_control_suite/__init__.py"
LOCO_REGISTRY = "mujoco_playground/_src/locomotion/__init__.py"
MANIP_REGISTRY = "mujoco_playground/_src/manipulation/__init__.py"

# -- Brax, older shape: no vf coefficient, the value loss is `* 0.5 * 0.5` --------------
TRAIN_OLD = '''
"""Fixture trainer: the shapes of an on-policy trainer, nothing more."""
import functools

import jax
import optax

from brax.training import acting
from brax.training.acme import running_statistics
from brax.training.agents.ppo import losses as ppo_losses
from brax.training.agents.ppo import networks as ppo_networks


def train(
    environment,
    num_timesteps: int,
    num_envs: int = 4,
    learning_rate: float = 3e-4,
    entropy_cost: float = 1e-3,
    discounting: float = 0.99,
    unroll_length: int = 8,
    batch_size: int = 16,
    num_minibatches: int = 4,
    num_updates_per_batch: int = 3,
    normalize_observations: bool = False,
    reward_scaling: float = 2.0,
    clipping_epsilon: float = 0.2,
    gae_lambda: float = 0.9,
    normalize_advantage: bool = True,
    network_factory=ppo_networks.make_ppo_networks,
):
  normalize = lambda x, y: x
  if normalize_observations:
    normalize = running_statistics.normalize
  optimizer = optax.adam(learning_rate=learning_rate)
  loss_fn = functools.partial(
      ppo_losses.compute_ppo_loss,
      entropy_cost=entropy_cost,
      discounting=discounting,
      reward_scaling=reward_scaling,
      gae_lambda=gae_lambda,
      clipping_epsilon=clipping_epsilon,
      normalize_advantage=normalize_advantage,
  )

  def minibatch_step(carry, data, normalizer_params):
    params, state = carry
    grads = jax.grad(loss_fn)(params, normalizer_params, data)
    return optimizer.update(grads, state), None

  def sgd_step(carry, unused_t, data, normalizer_params):
    shuffled = jax.tree_util.tree_map(lambda x: x.reshape((num_minibatches, -1) + x.shape[1:]), data)
    carry, metrics = jax.lax.scan(
        functools.partial(minibatch_step, normalizer_params=normalizer_params),
        carry,
        shuffled,
        length=num_minibatches,
    )
    return carry, metrics

  def training_step(carry, unused_t):
    state, key, normalizer_params = carry

    def f(carry, unused_t):
      current_state, current_key = carry
      next_state, data = acting.generate_unroll(
          environment, current_state, None, current_key, unroll_length)
      return (next_state, current_key), data

    (state, _), data = jax.lax.scan(
        f, (state, key), (), length=batch_size * num_minibatches // num_envs)
    normalizer_params = running_statistics.update(normalizer_params, data.observation)
    carry, metrics = jax.lax.scan(
        functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),
        carry, (), length=num_updates_per_batch)
    return carry, metrics

  key_policy, key_value = jax.random.split(jax.random.PRNGKey(0))
  init_params = ppo_losses.PPONetworkParams(policy=key_policy, value=key_value)
  optimizer_state = optimizer.init(init_params)
  return training_step
'''

# Newer shape: more parameters, a moved learning-rate default, Adam with an explicit eps.
TRAIN_NEW = (TRAIN_OLD
             .replace("    learning_rate: float = 3e-4,\n", "    learning_rate: float = 1e-3,\n")
             .replace("    normalize_advantage: bool = True,\n", "    normalize_advantage: bool = True,\n"
                      "    vf_loss_coefficient: float = 0.8,\n"
                      "    normalize_observations_mode: str = 'ema',\n"
                      "    normalize_observations_std_eps: float = 1e-5,\n"
                      "    max_grad_norm: float | None = 0.7,\n"
                      "    clipping_epsilon_value: float | None = None,\n"
                      "    bootstrap_on_timeout: bool = False,\n"
                      "    learning_rate_schedule: str | None = None,\n")
             .replace("  optimizer = optax.adam(learning_rate=learning_rate)\n",
                      "  optimizer = optax.adam(learning_rate=learning_rate, eps=1e-6)\n"
                      "  lr_schedule = learning_rate_schedule or 'NONE'\n"
                      "  if max_grad_norm is not None:\n"
                      "    optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optimizer)\n")
             .replace("      normalize_advantage=normalize_advantage,\n",
                      "      normalize_advantage=normalize_advantage,\n"
                      "      vf_coefficient=vf_loss_coefficient,\n"
                      "      clipping_epsilon_value=clipping_epsilon_value,\n")
             .replace("    normalizer_params = running_statistics.update(",
                      "    if bootstrap_on_timeout:\n"
                      "      data = types.Transition(\n"
                      "          observation=data.observation,\n"
                      "          reward=data.reward + discounting * data.extras['state_extras']['time_out']\n"
                      "          * data.extras['policy_extras']['value'],\n"
                      "          extras=data.extras,\n"
                      "      )\n"
                      "    normalizer_params = running_statistics.update(")
             .replace("from brax.training import acting\n", "from brax.training import acting\nfrom brax.training import types\n"))

# Refactored: the step function renamed, so the unroll scan is no longer where it was.
TRAIN_REFACTORED = TRAIN_NEW.replace("def training_step(", "def collect_and_learn(").replace(
    "return training_step", "return collect_and_learn")

# The loss's entropy cost passed where the loss is called, not bound by the partial: the
# training step makes it, partials hand it down to minibatch_step, which passes it as a
# keyword to a gradient wrapper that forwards **kwargs to the loss (Brax pull/660's shape).
GRADIENTS = "brax/training/gradients.py"
GRADIENTS_TEXT = '''
"""Fixture gradient wrapper: forwards every argument to the loss."""
import jax


def loss_and_pgrad(loss_fn, pmap_axis_name, has_aux=False):
  g = jax.value_and_grad(loss_fn, has_aux=has_aux)

  def h(*args, **kwargs):
    value, grad = g(*args, **kwargs)
    return value, jax.lax.pmean(grad, axis_name=pmap_axis_name)

  return g if pmap_axis_name is None else h
'''

TRAIN_CALL_BINDING = (TRAIN_NEW
                      .replace("import jax\n", "import jax\nimport jax.numpy as jnp\n")
                      .replace("from brax.training import acting\n",
                               "from brax.training import acting\nfrom brax.training import gradients\n")
                      .replace("      entropy_cost=entropy_cost,\n      discounting", "      discounting")
                      .replace("  def minibatch_step(carry, data, normalizer_params):\n"
                               "    params, state = carry\n"
                               "    grads = jax.grad(loss_fn)(params, normalizer_params, data)\n",
                               "  loss_and_pgrad_fn = gradients.loss_and_pgrad(loss_fn, pmap_axis_name='i')\n\n"
                               "  def minibatch_step(carry, data, normalizer_params, entropy_cost=None):\n"
                               "    params, state = carry\n"
                               "    _, grads = loss_and_pgrad_fn(params, normalizer_params, data,\n"
                               "                                 entropy_cost=entropy_cost)\n")
                      .replace("  def sgd_step(carry, unused_t, data, normalizer_params):\n",
                               "  def sgd_step(carry, unused_t, data, normalizer_params, entropy_cost=None):\n")
                      .replace("        functools.partial(minibatch_step, normalizer_params=normalizer_params),\n",
                               "        functools.partial(minibatch_step, normalizer_params=normalizer_params,\n"
                               "                          entropy_cost=entropy_cost),\n")
                      .replace("    carry, metrics = jax.lax.scan(\n"
                               "        functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),\n",
                               "    current_entropy_cost = jnp.array(entropy_cost, dtype=jnp.float32)\n"
                               "    carry, metrics = jax.lax.scan(\n"
                               "        functools.partial(sgd_step, data=data, normalizer_params=normalizer_params,\n"
                               "                          entropy_cost=current_entropy_cost),\n"))
assert TRAIN_CALL_BINDING.count("entropy_cost=current_entropy_cost") == 1  # every replacement above took

LOSSES_OLD = '''
"""Fixture loss: GAE over the time axis, then a clipped surrogate."""
import jax
import jax.numpy as jnp


class PPONetworkParams:

  def __init__(self, policy, value):
    self.policy = policy
    self.value = value


def compute_gae(truncation, termination, rewards, values, bootstrap_value, lambda_=1.0, discount=0.99):
  truncation_mask = 1 - truncation
  next_values = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)
  deltas = (rewards + discount * (1 - termination) * next_values - values) * truncation_mask

  def step(carry, target_t):
    lam, acc = carry
    mask, delta, ended = target_t
    acc = delta + discount * (1 - ended) * mask * lam * acc
    return (lam, acc), acc

  _, out = jax.lax.scan(step, (lambda_, jnp.zeros_like(bootstrap_value)), (truncation_mask, deltas, termination),
                        reverse=True)
  advantages = out * truncation_mask
  return out + values, advantages


def compute_ppo_loss(
    params,
    normalizer_params,
    data,
    rng,
    ppo_network,
    entropy_cost: float = 1e-4,
    discounting: float = 0.9,
    reward_scaling: float = 1.0,
    gae_lambda: float = 0.95,
    clipping_epsilon: float = 0.3,
    normalize_advantage: bool = True,
):
  baseline = ppo_network.value(params, data.observation)
  rewards = data.reward * reward_scaling
  vs, advantages = compute_gae(
      truncation=data.truncation,
      termination=data.termination,
      rewards=rewards,
      values=baseline,
      bootstrap_value=baseline[-1],
      lambda_=gae_lambda,
      discount=discounting,
  )
  if normalize_advantage:
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
  rho_s = jnp.exp(data.log_prob - data.old_log_prob)
  surrogate = jnp.clip(rho_s, 1 - clipping_epsilon, 1 + clipping_epsilon) * advantages
  policy_loss = -jnp.mean(jnp.minimum(rho_s * advantages, surrogate))
  v_error = vs - baseline
  v_loss = jnp.mean(v_error * v_error) * 0.5 * 0.5
  entropy = jnp.mean(ppo_network.parametric_action_distribution.entropy(data.logits, rng))
  entropy_loss = entropy_cost * -entropy
  return policy_loss + v_loss + entropy_loss
'''

LOSSES_NEW = (LOSSES_OLD
              .replace("    normalize_advantage: bool = True,\n):",
                       "    normalize_advantage: bool = True,\n"
                       "    vf_coefficient: float = 0.5,\n"
                       "    clipping_epsilon_value: float | None = None,\n):")
              .replace("  v_loss = jnp.mean(v_error * v_error) * 0.5 * 0.5\n",
                       "  v_loss = v_error * v_error\n"
                       "  v_loss = jnp.mean(v_loss) * 0.5 * vf_coefficient\n"))

PPO_NETWORKS_OLD = '''
"""Fixture networks: separate policy and value MLPs."""
from flax import linen

from brax.training import distribution
from brax.training import networks


def make_ppo_networks(
    observation_size,
    action_size,
    preprocess_observations_fn=None,
    policy_hidden_layer_sizes=(64,) * 2,
    value_hidden_layer_sizes=(64,) * 3,
    activation=linen.swish,
    policy_obs_key: str = "state",
    value_obs_key: str = "state",
):
  dist = distribution.NormalTanhDistribution(event_size=action_size)
  policy_network = networks.make_policy_network(
      dist.param_size,
      observation_size,
      hidden_layer_sizes=policy_hidden_layer_sizes,
      activation=activation,
  )
  value_network = networks.make_value_network(
      observation_size,
      hidden_layer_sizes=value_hidden_layer_sizes,
      activation=activation,
  )
  return policy_network, value_network, dist
'''

PPO_NETWORKS_NEW = (PPO_NETWORKS_OLD
                    .replace('    value_obs_key: str = "state",\n):',
                             '    value_obs_key: str = "state",\n'
                             '    distribution_type: str = "tanh_normal",\n'
                             '    state_dependent_std: bool = False,\n'
                             '    noise_std_type: str = "scalar",\n'
                             '    policy_network_kernel_init_fn=jax.nn.initializers.orthogonal,\n):')
                    .replace("      activation=activation,\n  )\n  value_network",
                             "      activation=activation,\n"
                             "      kernel_init=policy_network_kernel_init_fn(),\n  )\n  value_network"))

NETWORKS_TEXT = '''
"""Fixture MLP builders."""
import jax
from flax import linen


def make_policy_network(
    param_size,
    obs_size,
    hidden_layer_sizes=(256, 256),
    activation=linen.relu,
    kernel_init=jax.nn.initializers.lecun_uniform(),
):
  return (param_size, obs_size, hidden_layer_sizes, activation, kernel_init)


def make_value_network(obs_size, hidden_layer_sizes=(256, 256), activation=linen.relu):
  return (obs_size, hidden_layer_sizes, activation)
'''

DISTRIBUTION_TEXT = '''
"""Fixture distributions: a Gaussian, optionally squashed by tanh after sampling."""
import jax
import jax.numpy as jnp


class Gaussian:

  def __init__(self, loc, scale):
    self.loc = loc
    self.scale = scale

  def sample(self, seed):
    return self.loc + self.scale * jax.random.normal(seed, self.loc.shape)

  def entropy(self):
    return 0.5 + 0.5 * jnp.log(2.0 * jnp.pi) + jnp.log(self.scale)


class Squash:

  def forward(self, x):
    return jnp.tanh(x)

  def forward_log_det_jacobian(self, x):
    return 2.0 * (jnp.log(2.0) - x - jnp.logaddexp(0.0, -2.0 * x))


class Identity:

  def forward(self, x):
    return x

  def forward_log_det_jacobian(self, x):
    return jnp.zeros_like(x)


class ParametricDistribution:

  def __init__(self, param_size, postprocessor):
    self.param_size = param_size
    self._postprocessor = postprocessor

  def postprocess(self, event):
    return self._postprocessor.forward(event)

  def entropy(self, parameters, seed):
    dist = self.create_dist(parameters)
    entropy = dist.entropy() + self._postprocessor.forward_log_det_jacobian(dist.sample(seed=seed))
    return jnp.sum(entropy, axis=-1)


class NormalTanhDistribution(ParametricDistribution):

  def __init__(self, event_size, min_std=0.001, var_scale=1):
    super().__init__(2 * event_size, Squash())
    self._min_std = min_std
    self._var_scale = var_scale

  def create_dist(self, parameters):
    loc, scale = jnp.split(parameters, 2, axis=-1)
    scale = (jax.nn.softplus(scale) + self._min_std) * self._var_scale
    return Gaussian(loc, scale)


class NormalDistribution(ParametricDistribution):

  def __init__(self, event_size):
    super().__init__(event_size, Identity())

  def create_dist(self, parameters):
    loc, scale = parameters
    return Gaussian(loc, scale)
'''

TYPES_TEXT = '''
"""Fixture transition record."""
from typing import NamedTuple


class Transition(NamedTuple):
  observation: object
  reward: object
  extras: object
'''

RUNNING_STATISTICS_TEXT = '''
"""Fixture running statistics."""
import jax.numpy as jnp


def init_state(nest, std_eps=0.0):
  return nest


def update(state, batch, *, std_min_value: float = 1e-6, std_max_value: float = 1e6):

  def compute_std(summed_variance, std):
    return jnp.clip(jnp.sqrt(summed_variance / state.count + state.std_eps), std_min_value, std_max_value)

  return compute_std(state.summed_variance, state.std)


def normalize(batch, mean_std, max_abs_value=None):
  return (batch - mean_std.mean) / mean_std.std
'''

BRAX_OLD = {TRAIN: TRAIN_OLD, LOSSES: LOSSES_OLD, PPO_NETWORKS: PPO_NETWORKS_OLD, NETWORKS: NETWORKS_TEXT,
            DISTRIBUTION: DISTRIBUTION_TEXT, RUNNING_STATISTICS: RUNNING_STATISTICS_TEXT, TYPES: TYPES_TEXT}
BRAX_NEW = {TRAIN: TRAIN_NEW, LOSSES: LOSSES_NEW, PPO_NETWORKS: PPO_NETWORKS_NEW}
BRAX_REFACTORED = {TRAIN: TRAIN_REFACTORED}
BRAX_NO_LOSSES = {LOSSES: None}
BRAX_COMMITS = [BRAX_OLD, BRAX_NEW, BRAX_REFACTORED, BRAX_NO_LOSSES]

# -- Playground --------------------------------------------------------------------------
DM_PARAMS_TEXT = '''
"""Fixture tuned configs for a control-suite family."""
from ml_collections import config_dict

from mujoco_playground._src import dm_control_suite


def brax_ppo_config(env_name: str, impl=None) -> config_dict.ConfigDict:
  env_config = dm_control_suite.get_default_config(env_name)

  rl_config = config_dict.create(
      num_timesteps=1_000_000,
      reward_scaling=5.0,
      episode_length=env_config.episode_length,
      normalize_observations=True,
      unroll_length=30,
      num_minibatches=8,
      num_updates_per_batch=4,
      discounting=0.99,
      learning_rate=2e-3,
      num_envs=64,
      batch_size=32,
  )

  if env_name.startswith("Acrobot"):
    rl_config.num_envs = 128
  if env_name == "BallInCup":
    rl_config.discounting = 0.95
  elif env_name in ("CheetahRun", "WalkerRun"):
    rl_config.learning_rate = 3e-4
  elif env_name.startswith("Finger") and env_name != "FingerSpin":
    rl_config.entropy_cost = 0.02
  elif env_name == "PendulumSwingUp":
    rl_config.num_updates_per_batch = 2

  return rl_config


def brax_sac_config(env_name: str) -> config_dict.ConfigDict:
  return config_dict.create(num_envs=1)
'''

LOCO_PARAMS_TEXT = '''
"""Fixture tuned configs for a legged family."""
from ml_collections import config_dict


def brax_ppo_config(env_name: str, impl=None) -> config_dict.ConfigDict:
  rl_config = config_dict.create(
      num_envs=128,
      batch_size=64,
      unroll_length=20,
      num_minibatches=4,
      num_updates_per_batch=2,
      max_grad_norm=1.0,
      network_factory=config_dict.create(
          policy_hidden_layer_sizes=(128, 128),
          value_hidden_layer_sizes=(256, 256),
          policy_obs_key="state",
      ),
  )

  if impl == "warp":
    rl_config.num_envs = 256

  if env_name in ("Go1JoystickFlatTerrain", "Go1Getup"):
    rl_config.network_factory = config_dict.create(
        policy_hidden_layer_sizes=(512, 256),
        value_obs_key="privileged_state",
    )
  elif env_name == "Go1Backflip":
    rl_config.discounting = 0.95
  elif env_name in ("SpotGetup", "SpotHandstand"):
    pass
  else:
    raise ValueError(f"Unsupported env: {env_name}")

  return rl_config
'''

MANIP_PARAMS_TEXT = '''
"""Fixture tuned configs for an arm family."""
from ml_collections import config_dict


def brax_ppo_config(env_name: str, impl=None) -> config_dict.ConfigDict:
  rl_config = config_dict.create(
      normalize_observations=True,
      network_factory=config_dict.create(
          policy_hidden_layer_sizes=(32, 32),
      ),
  )
  if env_name == "PandaPickCubeCartesian":
    rl_config.num_envs = 32
    rl_config.reward_scaling = 0.1
    rl_config.network_factory.policy_hidden_layer_sizes = (256, 256)
  elif env_name == "PandaPickCube":
    rl_config.network_factory = config_dict.create(
        distribution_type="normal",
        state_dependent_std=True,
        noise_std_type="log",
    )
  elif env_name.startswith("PandaPickCube"):
    rl_config.num_envs = 16
  else:
    raise ValueError(f"Unsupported env: {env_name}")
  return rl_config
'''

DM_REGISTRY_TEXT = '''
"""Fixture registry of a control-suite family."""
from mujoco_playground._src.dm_control_suite import acrobot, ball_in_cup, cheetah, finger, pendulum, walker

_envs = {
    "AcrobotSwingup": acrobot.Balance,
    "BallInCup": ball_in_cup.BallInCup,
    "CheetahRun": cheetah.Run,
    "FingerSpin": finger.Spin,
    "FingerTurnEasy": finger.Turn,
    "PendulumSwingup": pendulum.SwingUp,
    "WalkerRun": walker.PlanarWalker,
}

_cfgs = {name: None for name in _envs}
'''

LOCO_REGISTRY_TEXT = '''
"""Fixture registry of a legged family."""
from mujoco_playground._src.locomotion.go1 import joystick, getup
from mujoco_playground._src.locomotion.spot import getup as spot_getup

_envs = {
    "Go1JoystickFlatTerrain": joystick.Joystick,
    "Go1Getup": getup.Getup,
    "SpotGetup": spot_getup.Getup,
    "H1Walk": joystick.Joystick,
}
'''

MANIP_REGISTRY_TEXT = '''
"""Fixture registry of an arm family."""
from mujoco_playground._src.manipulation import pick, pick_cartesian

_envs = {
    "PandaPickCube": pick.PandaPickCube,
    "PandaPickCubeCartesian": pick_cartesian.PandaPickCubeCartesian,
}


def register_environment(env_name, env_class, cfg_class):
  _envs[env_name] = env_class


register_environment("PandaPickCubeOrientation", pick.PandaPickCube, None)
'''

# What the env boundary is read from: the README's note on JAX's default matmul precision, the
# training script naming Playground's wrapper, and that wrapper's auto-reset (upstream's shape).
PLAYGROUND_README = '''
# Fixture Playground

On Ampere GPUs JAX's default uses TF32 for matrix multiplications; set
JAX_DEFAULT_MATMUL_PRECISION=highest for full float32.
'''
TRAIN_JAX_PPO = '''
from mujoco_playground import wrapper


def main(argv):
  return wrapper.wrap_for_brax_training
'''
WRAPPER_TEXT = '''
import jax
import jax.numpy as jp


def wrap_for_brax_training(env, episode_length=1000, action_repeat=1):
  env = BraxAutoResetWrapper(env)
  return env


class BraxAutoResetWrapper:
  def step(self, state, action):
    reset_obs = state.info["AutoResetWrapper_first_obs"]
    state = self.env.step(state, action)
    obs = jax.tree.map(lambda x, y: jp.where(state.done, x, y), reset_obs, state.obs)
    return state.replace(obs=obs)
'''
PLAYGROUND = {DM_PARAMS: DM_PARAMS_TEXT, LOCO_PARAMS: LOCO_PARAMS_TEXT, MANIP_PARAMS: MANIP_PARAMS_TEXT,
              DM_REGISTRY: DM_REGISTRY_TEXT, LOCO_REGISTRY: LOCO_REGISTRY_TEXT, MANIP_REGISTRY: MANIP_REGISTRY_TEXT,
              "README.md": PLAYGROUND_README, "learning/train_jax_ppo.py": TRAIN_JAX_PPO,
              "mujoco_playground/_src/wrapper.py": WRAPPER_TEXT}
PLAYGROUND_MOVED = {DM_PARAMS: DM_PARAMS_TEXT.replace("      unroll_length=30,\n", "      unroll_length=25,\n")}
PLAYGROUND_NO_MANIPULATION = {MANIP_PARAMS: None}
PLAYGROUND_COMMITS = [PLAYGROUND, PLAYGROUND_MOVED, PLAYGROUND_NO_MANIPULATION]


def line_of(text: str, snippet: str, occurrence: int = 1) -> int:
    """1-based line of the n-th line containing ``snippet`` in a fixture text (as committed:
    the leading newline is stripped by gitfixture)."""
    lines = text.lstrip("\n").splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if snippet in line]
    if len(hits) < occurrence:
        raise AssertionError(f"{snippet!r} not in fixture text")
    return hits[occurrence - 1]
