"""A run's random streams are independent: one numpy SeedSequence per seed, spawned per
purpose. The scheme it replaced (``seed * 1_000_003 + stream`` beside ``torch.manual_seed(seed)``)
gave seed 2's action noise the stream of seed 0's value-network initialisation."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from brax_diff.verify import ppo_torch  # noqa: E402
from brax_diff.verify.settings import TrainerSettings  # noqa: E402

from test_verify_ppo import _ToyDynamicsEnv  # noqa: E402

SEEDS = range(12)


def _first_draws(seed: int, purpose: str, n: int = 32) -> tuple:
    generator = torch.Generator().manual_seed(ppo_torch.stream_seed(seed, purpose))
    return tuple(torch.rand(n, generator=generator, dtype=torch.float64).tolist())


def test_no_two_seeds_or_purposes_share_a_stream():
    draws = {(seed, purpose): _first_draws(seed, purpose) for seed in SEEDS for purpose in ppo_torch.STREAMS}
    values = {}
    for key, first in draws.items():
        for value in first:  # not one of the first 32 draws of any stream appears in another
            assert values.setdefault(value, key) == key, (key, values[value])
    # the old overlap, named: seed 2's action noise against seed 0's value initialisation
    assert ppo_torch.stream_seed(2, "action_noise") != ppo_torch.stream_seed(0, "value_init")
    assert set(draws[(2, "action_noise")]).isdisjoint(draws[(0, "value_init")])
    seeds = {ppo_torch.stream_seed(s, p) for s, p in itertools.product(SEEDS, ppo_torch.STREAMS)}
    assert len(seeds) == len(SEEDS) * len(ppo_torch.STREAMS) and all(0 <= s < 2**63 for s in seeds)


def test_stream_seeds_are_numpy_seedsequence_children():
    import numpy as np

    child = np.random.SeedSequence(7).spawn(len(ppo_torch.STREAMS))[ppo_torch.STREAMS.index("minibatch_shuffle")]
    assert ppo_torch.stream_seed(7, "minibatch_shuffle") == int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))


def _short_run(seed: int) -> list:
    settings = TrainerSettings(num_envs=4, unroll_length=10, epochs_per_update=2, minibatch_transitions=8,
                               policy_hidden_layers=(8,), value_hidden_layers=(8,), lr_decay_steps=100_000)
    state = []

    def keep(agent):
        state.append([p.detach().clone() for p in (*agent.policy.parameters(), *agent.value.parameters())])
        return 0.0

    log = ppo_torch.train(_ToyDynamicsEnv(settings.num_envs), settings, 3 * settings.transitions_per_update, seed,
                          evaluate=keep, eval_every=settings.transitions_per_update)
    return [state, log.reward_per_step]


def test_the_same_seed_trains_bit_identically_twice():
    (first, rewards), (second, rewards_again) = _short_run(3), _short_run(3)
    assert rewards == rewards_again
    assert len(first) == 4 and all(torch.equal(p, q) for a, b in zip(first, second) for p, q in zip(a, b))
    other, _ = _short_run(4)
    assert not torch.equal(first[0][0], other[0][0])
