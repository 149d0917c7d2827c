"""What Brax's trainer needs from jax and a newer jax no longer has.

brax 0.14.2 (the newest release) places its training state with ``jax.device_put_replicated``,
which jax 0.10 removed (google/brax#671). The GPU machine verification runs on has jax 0.11
preinstalled and no network, so the trainer cannot be pinned back to jax 0.9 there. ``apply``
puts back a ``device_put_replicated`` with the old meaning (``value`` copied onto each of
``devices``, stacked along a new leading axis that ``jax.pmap`` maps over), and nothing else:
where jax still has the function it is left alone. Every process that calls Brax's trainer
calls ``apply`` first (:func:`brax_diff.verify.brax_reference.train`).
"""

from __future__ import annotations

from typing import Any, Sequence

PATCHED = "device_put_replicated"


def device_put_replicated(value: Any, devices: Sequence[Any]) -> Any:
    """``value``'s leaves stacked ``len(devices)`` times along a new axis 0, one slice per device."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = list(devices)
    if not devices:
        raise ValueError("device_put_replicated needs at least one device")
    sharding = NamedSharding(Mesh(np.array(devices), ("replica",)), PartitionSpec("replica"))

    def put(leaf: Any) -> Any:
        leaf = jnp.asarray(leaf)
        return jax.device_put(jnp.broadcast_to(leaf, (len(devices),) + leaf.shape), sharding)

    return jax.tree_util.tree_map(put, value)


def apply(module: Any = None) -> list[str]:
    """Add what is missing to jax (or ``module``, for tests); returns the names added (none on jax < 0.10)."""
    if module is None:
        import jax as module

    added = []
    if not hasattr(module, PATCHED):  # jax 0.10+ answers AttributeError ("removed") for it
        setattr(module, PATCHED, device_put_replicated)
        added.append(PATCHED)
    return added
