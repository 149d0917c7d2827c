"""The stand_in arm's update is Brax's, step by step (issue 23, item 2: the lockstep half).

Same data, same initial parameters: a Brax ``make_ppo_networks`` init (tanh-normal, softplus +
min_std scale, swish) is copied into the PyTorch trainer's networks; the running observation
statistics are updated from the same batch on both sides; then ``UPDATES`` minibatch steps run
on both sides: Brax's own ``compute_ppo_loss`` under ``jax.value_and_grad`` with the optimizer
``ppo.train`` builds (``optax.chain(clip_by_global_norm, adam)``), and the stand-in's
``PPO.brax_loss`` + ``PPO.apply_gradients`` with the entropy's one standard-normal draw taken
from the same JAX key (the only random number in the loss). The data has terminations,
time-limit truncations and a gradient norm above the clip, so the truncation mask, the
termination cut, the global clip and the sampled tanh entropy all act.

Tolerance, and why: every loss term, every clipped gradient and every parameter after every
update agree to rtol 1e-5 with an absolute floor of 1e-5 x max(1, the tensor's largest
magnitude) (``close``); measured (6 updates): gradients within 6e-6, parameters within 2.5e-6,
loss terms within 5e-6 absolute (a policy loss near 0 has no meaningful relative error). Both sides compute in float32 (the torch statistics keep float64 and are cast at
use, Brax's are float32); the remaining differences are summation order and the two
libraries' transcendental kernels, a few ulp (~1e-7 relative) per operation, which
Adam's first steps (m / sqrt(v) is about +-1 at step one) can carry to about lr x 1e-6 in a
parameter. A semantic difference does not hide in 1e-5: dropping the truncation mask, the
Jacobian term of the entropy, the vs-form of the advantage, the population std of the
advantage standardization, or clipping per network moves a loss term or a gradient by far
more (``test_each_semantic_is_visible_at_this_tolerance`` checks that it does).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("brax")
optax = pytest.importorskip("optax")
torch = pytest.importorskip("torch")

import jax.numpy as jnp  # noqa: E402
from brax.training import types  # noqa: E402
from brax.training.acme import running_statistics  # noqa: E402
from brax.training.agents.ppo import losses as brax_losses  # noqa: E402
from brax.training.agents.ppo import networks as brax_networks  # noqa: E402

from brax_diff.verify import ppo_torch  # noqa: E402
from brax_diff.verify.settings import BRAX_SEMANTICS, TrainerSettings  # noqa: E402

OBS, ACT, T, B = 5, 2, 6, 8
UPDATES = 4
RTOL = 1e-5
LOSS = dict(entropy_cost=0.05, discounting=0.97, reward_scaling=10.0, gae_lambda=0.95, clipping_epsilon=0.2,
            normalize_advantage=True, vf_coefficient=0.5)
MAX_GRAD_NORM, LEARNING_RATE = 0.5, 3e-3
POLICY, VALUE = (16, 16), (32, 32)


def stand_in_settings(**changes) -> TrainerSettings:
    values = dict(num_envs=B, unroll_length=T, minibatch_transitions=T * B, epochs_per_update=1,
                  discount=LOSS["discounting"], gae_lambda=LOSS["gae_lambda"], reward_scale=LOSS["reward_scaling"],
                  clip_epsilon=LOSS["clipping_epsilon"], entropy_coef=LOSS["entropy_cost"],
                  value_loss_coef=0.5 * LOSS["vf_coefficient"], advantage_normalization=True,
                  value_target_normalization=False, obs_normalization=True, obs_norm_std_eps=0.0,
                  learning_rate=LEARNING_RATE, lr_schedule="constant", adam_eps=1e-8, max_grad_norm=MAX_GRAD_NORM,
                  action_distribution="tanh_normal", std_transform="softplus", std_min=0.001, std_max=None,
                  policy_hidden_layers=POLICY, value_hidden_layers=VALUE, activation="silu",
                  kernel_init="lecun_uniform", **BRAX_SEMANTICS)
    values.update(changes)
    return TrainerSettings(**values)


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    obs = (rng.normal(size=(B, T + 1, OBS)) * [1.0, 3.0, 0.5, 2.0, 1.0] + [0.5, -1.0, 2.0, 0.0, 1.0]).astype(np.float32)
    truncation = np.zeros((B, T), np.float32)
    truncation[[1, 4], [2, 5]] = 1.0
    discount = np.ones((B, T), np.float32)
    discount[[2, 5, 6], [3, 0, 5]] = 0.0  # terminations
    discount[1, 2] = 0.0  # a truncated step: Brax's termination is (1 - discount)(1 - truncation) = 0 there
    return {"obs": obs[:, :T], "next_obs": obs[:, 1:], "raw": rng.normal(size=(B, T, ACT)).astype(np.float32) * 1.5,
            "reward": rng.uniform(-1, 1, size=(B, T)).astype(np.float32), "discount": discount,
            "truncation": truncation, "logp_noise": rng.normal(size=(B, T)).astype(np.float32) * 0.2}


@functools.lru_cache(maxsize=None)
def brax_side():
    """Brax's network, its initial parameters and its jitted loss-and-gradient (compiled once)."""
    network = brax_networks.make_ppo_networks(
        OBS, ACT, preprocess_observations_fn=running_statistics.normalize, policy_hidden_layer_sizes=POLICY,
        value_hidden_layer_sizes=VALUE, activation=jax.nn.swish, distribution_type="tanh_normal")
    key_policy, key_value = jax.random.split(jax.random.PRNGKey(0))
    params = jax.jit(lambda kp, kv: brax_losses.PPONetworkParams(network.policy_network.init(kp),
                                                                 network.value_network.init(kv)))(key_policy, key_value)
    optimizer = optax.chain(optax.clip_by_global_norm(MAX_GRAD_NORM), optax.adam(LEARNING_RATE))
    loss_and_grad = jax.value_and_grad(
        lambda p, n, d, k: brax_losses.compute_ppo_loss(p, n, d, k, network, **LOSS), has_aux=True)

    @jax.jit
    def step(params, opt_state, normalizer, batch, key):
        """One minibatch_step of ppo.train: loss and gradient, global clip, Adam."""
        (_, metrics), grads = loss_and_grad(params, normalizer, batch, key)
        clipped, _ = optax.clip_by_global_norm(MAX_GRAD_NORM).update(grads, optax.EmptyState())
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, metrics, clipped, optax.tree.norm(grads),
                jax.random.normal(key, (T, B, ACT)))

    @jax.jit
    def prepare(params, obs, raw):
        """The normalizer after the batch, and the behaviour policy's logits and log-probs under it."""
        normalizer = running_statistics.update(
            running_statistics.init_state(jax.ShapeDtypeStruct((OBS,), jnp.float32)), obs)
        logits = network.policy_network.apply(normalizer, params.policy, obs)
        return normalizer, logits, network.parametric_action_distribution.log_prob(logits, raw)

    return network, params, step, prepare, optimizer.init(params)


class Pair:
    """A Brax network and a stand-in PPO holding the same parameters and statistics."""

    def __init__(self, settings: TrainerSettings):
        self.network, self.params, self.step, self.prepare, self.opt_state = brax_side()
        self.agent = ppo_torch.PPO(settings, OBS, ACT, schedule_updates=1.0, seed=0)
        for net, params in ((self.agent.policy.net, self.params.policy), (self.agent.value, self.params.value)):
            linears = [m for m in net if isinstance(m, torch.nn.Linear)]
            for i, layer in enumerate(linears):
                dense = params["params"][f"hidden_{i}"]
                with torch.no_grad():
                    layer.weight.copy_(torch.from_numpy(np.array(dense["kernel"]).T.copy()))
                    layer.bias.copy_(torch.from_numpy(np.array(dense["bias"])))
        self.normalizer = None


def brax_batch(pair: Pair, data: dict) -> types.Transition:
    """The batch as ppo.train hands it to the loss; sets ``pair.normalizer`` (updated from the batch
    before SGD, as ppo.train does); behaviour log-probs near the current policy's: ratios near 1."""
    pair.normalizer, logits, logp = pair.prepare(pair.params, jnp.asarray(data["obs"]), jnp.asarray(data["raw"]))
    behaviour = logp + data["logp_noise"]
    return types.Transition(
        observation=jnp.asarray(data["obs"]), action=jnp.tanh(data["raw"]), reward=jnp.asarray(data["reward"]),
        discount=jnp.asarray(data["discount"]), next_observation=jnp.asarray(data["next_obs"]),
        extras={"state_extras": {"truncation": jnp.asarray(data["truncation"])},
                "policy_extras": {"raw_action": jnp.asarray(data["raw"]), "log_prob": behaviour,
                                  "distribution_params": logits}})


def torch_batch(batch: types.Transition) -> ppo_torch.Sequences:
    def time_major(x):
        return torch.from_numpy(np.array(x)).transpose(0, 1).contiguous()

    truncation = batch.extras["state_extras"]["truncation"]
    termination = (1 - batch.discount) * (1 - truncation)
    return ppo_torch.Sequences(time_major(batch.observation), torch.from_numpy(np.array(batch.next_observation[:, -1])),
                               time_major(batch.extras["policy_extras"]["raw_action"]),
                               time_major(batch.extras["policy_extras"]["log_prob"]), time_major(batch.reward),
                               time_major(termination), time_major(truncation))


def close(torch_value, brax_value, what: str) -> None:
    ours = np.asarray(torch_value.detach() if hasattr(torch_value, "detach") else torch_value, dtype=np.float64)
    theirs = np.asarray(brax_value, dtype=np.float64)
    floor = RTOL * max(1.0, float(np.abs(theirs).max()))
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=floor, err_msg=what)


def torch_tensors(pair: Pair, attr: str) -> list:
    out = []
    for net in (pair.agent.policy.net, pair.agent.value):
        for layer in (m for m in net if isinstance(m, torch.nn.Linear)):
            out += [getattr(layer.weight, attr).T, getattr(layer.bias, attr)]
    return out


def brax_tensors(tree) -> list:
    out = []
    for params in (tree.policy, tree.value):
        layers = params["params"]
        for i in range(len(layers)):
            out += [layers[f"hidden_{i}"]["kernel"], layers[f"hidden_{i}"]["bias"]]
    return out


def run_lockstep(settings: TrainerSettings, updates: int = UPDATES) -> list[dict]:
    """Run both sides; return per update the loss terms and clipped gradients of each (no asserts)."""
    pair, data = Pair(settings), make_data()
    batch = brax_batch(pair, data)
    pair.agent.obs_stats.update(torch.from_numpy(data["obs"]))
    sequences = torch_batch(batch)
    steps = []
    for update in range(updates):
        key = jax.random.PRNGKey(100 + update)
        pair.params, pair.opt_state, metrics, clipped, grad_norm, noise = pair.step(
            pair.params, pair.opt_state, pair.normalizer, batch, key)
        noise = torch.from_numpy(np.array(noise))  # the loss's one draw: sample(seed=key) of a (T, B, A) Normal
        total, ours = pair.agent.brax_loss(sequences, noise)
        pair.agent.apply_gradients(total)
        steps.append({"brax": metrics, "torch": ours, "brax_grads": brax_tensors(clipped),
                      "torch_grads": [g.clone() for g in torch_tensors(pair, "grad")],
                      "brax_params": brax_tensors(pair.params), "torch_params": [p.clone() for p in torch_tensors(pair, "data")],
                      "brax_grad_norm": float(grad_norm)})
    return steps


def test_observation_statistics_match_brax_running_statistics():
    pair, data = Pair(stand_in_settings()), make_data()
    brax_batch(pair, data)
    pair.agent.obs_stats.update(torch.from_numpy(data["obs"]))
    close(pair.agent.obs_stats.mean, pair.normalizer.mean, "mean")
    close(pair.agent.obs_stats.var.sqrt(), pair.normalizer.std, "std")
    normalized = (data["obs"] - np.asarray(pair.normalizer.mean)) / np.asarray(pair.normalizer.std)
    close(pair.agent.at_use(torch.from_numpy(data["obs"])), normalized, "normalized")


def test_stand_in_update_equals_brax_compute_ppo_loss_step_by_step():
    steps = run_lockstep(stand_in_settings())
    assert steps[0]["brax_grad_norm"] > MAX_GRAD_NORM  # the global clip acts
    for update, step in enumerate(steps):
        for name in ("total_loss", "policy_loss", "v_loss", "entropy_loss"):
            close(step["torch"][name], step["brax"][name], f"update {update}: {name}")
        for i, (ours, theirs) in enumerate(zip(step["torch_grads"], step["brax_grads"])):
            close(ours, theirs, f"update {update}: clipped gradient {i}")
        for i, (ours, theirs) in enumerate(zip(step["torch_params"], step["brax_params"])):
            close(ours, theirs, f"update {update}: parameter {i}")
    # the parameters moved: the comparison is not of an update that did nothing
    assert not np.allclose(np.asarray(steps[-1]["brax_params"][0]), np.asarray(steps[0]["brax_params"][0]))


@pytest.mark.parametrize("change", [
    {"truncation": "bootstrap_next_obs_across_reset"},
    {"advantage_form": "gae"},
    {"entropy_estimator": "analytic"},
    {"grad_clip_scope": "per_network"},
])
def test_each_semantic_is_visible_at_this_tolerance(change):
    """Moving one semantic back to SLM-Lab's value breaks the lockstep: the tolerance can see it."""
    step = run_lockstep(stand_in_settings(**change), updates=1)[0]
    mismatched = []
    for name in ("total_loss", "policy_loss", "v_loss", "entropy_loss"):
        try:
            close(step["torch"][name], step["brax"][name], name)
        except AssertionError:
            mismatched.append(name)
    for i, (ours, theirs) in enumerate(zip(step["torch_grads"], step["brax_grads"])):
        try:
            close(ours, theirs, str(i))
        except AssertionError:
            mismatched.append(f"grad {i}")
    assert mismatched, f"{change} left the update within tolerance of Brax's"


def test_the_trainers_resets_use_the_keys_brax_trainer_resets_with():
    """Brax's own ``ppo.train`` with num_resets_per_eval > 0 (its trivial ``fast`` env, about 20
    CPU-seconds), every key it passes to the training envs' reset recorded: the first reset's are
    ``keys.training_reset_keys`` and each later one's ``keys.next_reset_keys`` of the one before,
    the chain ``envs.PlaygroundVecEnv.reset_all`` follows (the same wrapper's reset of the same
    keys: the same states). 2 evaluations after init x 2 resets each, one update per reset epoch."""
    from brax import envs
    from brax.envs.base import Wrapper
    from brax.envs.wrappers import training as brax_training
    from brax.training.agents.ppo import train as ppo

    from brax_diff.verify.keys import next_reset_keys, training_reset_keys

    num_envs, eval_envs, seed = 4, 2, 3
    recorded = []

    class RecordResets(Wrapper):
        def reset(self, rng):
            jax.debug.callback(lambda keys: recorded.append(np.asarray(keys)), rng)
            return self.env.reset(rng)

    ppo.train(environment=envs.get_environment("fast"), num_timesteps=160, num_evals=3, episode_length=100,
              num_envs=num_envs, batch_size=4, num_minibatches=2, unroll_length=5, num_updates_per_batch=1,
              num_resets_per_eval=2, seed=seed, num_eval_envs=eval_envs,
              wrap_env_fn=lambda env, **kw: RecordResets(brax_training.wrap(env, **kw)),
              network_factory=functools.partial(brax_networks.make_ppo_networks, policy_hidden_layer_sizes=(4,),
                                                value_hidden_layer_sizes=(4,)))
    training = [keys for keys in recorded if keys.shape[0] == num_envs]  # the evaluator resets eval_envs
    assert len(training) == 1 + 2 * 2
    expected = [np.asarray(training_reset_keys(seed, num_envs))]
    while len(expected) < len(training):
        expected.append(np.asarray(next_reset_keys(expected[-1])))
    for got, want in zip(training, expected):
        assert np.array_equal(got, want)
    assert not np.array_equal(training[1], training[2])  # every reset starts new episodes


def test_the_stand_in_starts_from_the_weights_brax_trainer_starts_from():
    """``initial_weights="brax_keys"``: the policy and value nets of seed 3 are, bit for bit, what
    ``make_ppo_networks(...).init`` gives with ppo.train's key_policy and key_value at seed 3, so
    the stand_in's step-0 policy is the reference's (measured on CartpoleBalance, seeds 0-39:
    the same step-0 scores); every other arm keeps its own generators."""
    from brax_diff.verify.keys import brax_keys

    settings = stand_in_settings().moved(initial_weights="brax_keys")
    agent = ppo_torch.PPO(settings, OBS, ACT, 1.0, seed=3)
    networks = brax_networks.make_ppo_networks(OBS, ACT, policy_hidden_layer_sizes=POLICY,
                                               value_hidden_layer_sizes=VALUE, activation=jax.nn.swish)
    keys = brax_keys(3)
    for net, params in ((agent.policy.net, networks.policy_network.init(keys["key_policy"])),
                        (agent.value, networks.value_network.init(keys["key_value"]))):
        linears = [layer for layer in net if isinstance(layer, torch.nn.Linear)]
        assert len(linears) == len(params["params"])
        for i, layer in enumerate(linears):
            dense = params["params"][f"hidden_{i}"]
            assert np.array_equal(layer.weight.detach().numpy(), np.asarray(dense["kernel"]).T)
            assert np.array_equal(layer.bias.detach().numpy(), np.asarray(dense["bias"]))
    own = ppo_torch.PPO(stand_in_settings(), OBS, ACT, 1.0, seed=3)
    assert not torch.equal(own.policy.net[0].weight, agent.policy.net[0].weight)
    with pytest.raises(Exception, match="initial_weights brax_keys copies Brax's tanh_normal policy MLP"):
        settings.moved(action_distribution="normal")
