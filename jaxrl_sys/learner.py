"""Pieces that several learners share: the learning-rate schedule, each device's share of a
global batch and its own random stream, and the warm-up gate of off-policy agents.

The gate keeps one compiled program for the whole run: the learner step is computed every
iteration and its result kept only once enough data has been collected.
"""

from __future__ import annotations

from typing import Optional, Union

import jax
import jax.numpy as jnp
import optax

from jaxrl_sys.config import ConfigError
from jaxrl_sys.types import Metrics, PyTree


def learning_rate(
    initial: float, anneal: bool, num_updates: int, final_fraction: float = 0.0
) -> Union[float, optax.Schedule]:
    """`initial`, or a linear decay to `final_fraction * initial` over `num_updates` steps."""
    if not anneal:
        return initial
    return optax.linear_schedule(initial, final_fraction * initial, num_updates)


def local_batch_size(batch_size: int, axis_name: Optional[str]) -> int:
    """This device's share of a global batch (inside the mapped body); it must divide evenly."""
    devices = jax.lax.axis_size(axis_name) if axis_name is not None else 1
    if batch_size % devices:
        raise ConfigError(f"batch_size={batch_size} does not divide over {devices} devices")
    return batch_size // devices


def device_key(key: jax.Array, axis_name: Optional[str]) -> jax.Array:
    """`key` folded with this device's index (0 outside a mapped axis).

    The run key is replicated over devices; what must differ per device (search noise,
    replay sample positions) draws from this key, or every device would draw the same numbers.
    """
    device = 0 if axis_name is None else jax.lax.axis_index(axis_name)
    return jax.random.fold_in(key, device)


def keep_where(ready: jax.Array, new: PyTree, old: PyTree) -> PyTree:
    """`new` where `ready`, else `old`, leaf by leaf (both trees have the same structure)."""
    return jax.tree.map(lambda n, o: jnp.where(ready, n, o), new, old)


def nan_unless(ready: jax.Array, metrics: Metrics) -> Metrics:
    """Metrics that are NaN before learning starts, so chunk means skip the warm-up."""
    return jax.tree.map(lambda m: jnp.where(ready, m, jnp.nan), metrics)
