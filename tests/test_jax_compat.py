"""brax_diff.verify.jax_compat: the device_put_replicated that jax >= 0.10 removed, put back for
brax 0.14.2's trainer (the GPU machine has jax 0.11). jax 0.9 here still has the original, so the
tests compare with it, and force the shim through a real (tiny) Brax training."""

from __future__ import annotations

import pytest

from brax_diff.verify import training_stack_missing

pytestmark = pytest.mark.skipif(training_stack_missing() is not None, reason="needs the verify extra (jax, brax)")


def test_the_shim_places_what_jax_s_own_placed():
    import warnings

    import jax
    import jax.numpy as jnp
    import numpy as np

    from brax_diff.verify.jax_compat import device_put_replicated

    tree = {"w": jnp.arange(6.0).reshape(2, 3), "n": np.int32(7), "nested": (jnp.ones(4),)}
    ours = device_put_replicated(tree, jax.local_devices())
    if hasattr(jax, "device_put_replicated"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            theirs = jax.device_put_replicated(tree, jax.local_devices())
        for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert ours["w"].shape == (len(jax.local_devices()), 2, 3) and ours["n"].shape == (len(jax.local_devices()),)
    # pmap maps over the new axis, as Brax's training epoch does
    summed = jax.pmap(lambda t: t["w"].sum() + t["n"])(ours)
    assert summed.tolist() == [22.0] * len(jax.local_devices())
    with pytest.raises(ValueError, match="at least one device"):
        device_put_replicated(tree, [])


def test_apply_adds_only_what_is_missing():
    import types

    import jax

    from brax_diff.verify import jax_compat

    assert jax_compat.apply() == [] and hasattr(jax, "device_put_replicated")  # jax 0.9: its own, kept
    newer = types.ModuleType("jax")  # as jax >= 0.10: the name is gone
    assert jax_compat.apply(newer) == ["device_put_replicated"]
    assert newer.device_put_replicated is jax_compat.device_put_replicated
    assert jax_compat.apply(newer) == []


@pytest.mark.training
def test_brax_s_trainer_trains_through_the_shim(monkeypatch):
    """As on jax >= 0.10: the trainer's state is placed by the shim, and training goes on."""
    import jax
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    from brax_diff.verify.jax_compat import device_put_replicated

    calls = []
    monkeypatch.setattr(jax, "device_put_replicated",
                        lambda value, devices: calls.append(len(devices)) or device_put_replicated(value, devices))
    steps = []
    ppo.train(environment=envs.get_environment("fast"), num_timesteps=2**12, episode_length=32, num_envs=16,
              batch_size=8, num_minibatches=2, unroll_length=4, num_updates_per_batch=2, num_evals=3,
              num_eval_envs=4, progress_fn=lambda s, m: steps.append(int(s)))
    assert calls == [len(jax.local_devices())] and steps == [0, 2048, 4096]
