"""Observation normalisation that lives in the agent's state (`--set normalize_obs=true`).

The running statistics are pooled over every env, and over every device through a
collective, so all envs see one transform. Being part of the agent state, they are
checkpointed and resumed with it, and evaluation normalises with exactly what training used.
A disabled normaliser is `None` in the state, so runs without it keep their state's shape.

Every observation an agent acts on is counted once: `update_if_empty` gives provisional
statistics of the envs' first observations (so the first rollout is normalised too), and the
first `update` replaces them, since the observations it folds in begin with those same ones.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.core import collectives

CLIP = 10.0
EPSILON = 1e-8


@struct.dataclass
class RunningStats:
    """Per-element mean and (population) variance of the observations seen, and their count.

    A negative count -n marks provisional statistics (`update_if_empty`): those of n first
    observations, which weigh nothing in the next `update`. A count of 0: none yet.
    """

    mean: jax.Array
    var: jax.Array
    count: jax.Array  # float32 scalar


def init_stats(enabled: bool, obs_shape: tuple[int, ...]) -> Optional[RunningStats]:
    """Empty statistics for `obs_shape`, or None when normalisation is off.

    Args:
        enabled: whether observations are normalised.
        obs_shape: one observation's shape.

    Returns:
        Mean zeros and variance ones of `obs_shape` with count 0, or None when not `enabled`.
    """
    if not enabled:
        return None
    return RunningStats(mean=jnp.zeros(obs_shape, jnp.float32),
                        var=jnp.ones(obs_shape, jnp.float32), count=jnp.zeros((), jnp.float32))


def update(stats: Optional[RunningStats], obs: jax.Array,
           axis_name: Optional[str]) -> Optional[RunningStats]:
    """`stats` with a batch of observations (any leading axes) folded in, pooled over the
    devices of `axis_name` (the parallel-variance merge); provisional statistics are
    replaced by the batch's. None stays None.

    Args:
        stats: the statistics, or None.
        obs: [..., *obs_shape] observations, any leading axes (e.g. [T, B, ...]).
        axis_name: the device axis to pool over, or None.

    Returns:
        The new statistics (None for None).
    """
    if stats is None:
        return None
    x = obs.reshape(-1, *stats.mean.shape).astype(jnp.float32)
    n = collectives.psum(jnp.asarray(x.shape[0], jnp.float32), axis_name)
    batch_mean = collectives.psum(jnp.sum(x, axis=0), axis_name) / n
    batch_m2 = collectives.psum(jnp.sum(jnp.square(x - batch_mean), axis=0), axis_name)
    count = jnp.maximum(stats.count, 0.0)  # provisional statistics weigh nothing
    total = count + n
    delta = batch_mean - stats.mean
    mean = jnp.where(count > 0, stats.mean + delta * (n / total), batch_mean)
    m2 = stats.var * count + batch_m2 + jnp.square(delta) * (count * n / total)
    return RunningStats(mean=mean, var=m2 / total, count=total)


def update_if_empty(stats: Optional[RunningStats], obs: jax.Array,
                    axis_name: Optional[str]) -> Optional[RunningStats]:
    """Provisional statistics of `obs` (the envs' first observations) if none are in yet, so
    that the first rollout is normalised too; the next `update` replaces them, as its batch
    holds these observations again. Started statistics are returned unchanged.

    Args:
        stats: the statistics, or None.
        obs: [..., *obs_shape] observations, any leading axes (e.g. [B, ...]).
        axis_name: the device axis to pool over, or None.

    Returns:
        Provisional statistics (count negative), or `stats` (None for None).
    """
    if stats is None:
        return None
    first = update(stats, obs, axis_name)
    started = first.replace(count=-first.count)
    return jax.tree.map(lambda new, old: jnp.where(stats.count != 0, old, new), started, stats)


def normalize(stats: Optional[RunningStats], obs: jax.Array) -> jax.Array:
    """`obs` standardised with `stats` and clipped to +-CLIP; unchanged when `stats` is None
    or empty.

    Args:
        stats: the statistics, or None.
        obs: [..., *obs_shape] observations, any leading axes.

    Returns:
        float32 observations of `obs`' shape (`obs` itself when `stats` is None).
    """
    if stats is None:
        return obs
    x = obs.astype(jnp.float32)
    z = jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + EPSILON), -CLIP, CLIP)
    return jnp.where(stats.count != 0, z, x)
