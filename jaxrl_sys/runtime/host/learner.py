"""The host loop's learner side: the agent's `learn` compiled data-parallel over the learner
mesh, each thread's rollout rows assembled into global arrays split over it, the acting
parameters sent to every actor device, and a chunk's metrics summed over processes."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

from jaxrl_sys.core.types import HostFns, PyTree, Rollout
from jaxrl_sys.runtime.driver import EPISODE_KEYS
from jaxrl_sys.runtime.host.actors import HostEnv, initial_memory
from jaxrl_sys.runtime.host.placement import (
    ENV_AXIS_SPEC, REPLICATED, TIME_MAJOR_SPEC, HostPlacement,
)
from jaxrl_sys.runtime.waiting import fetch


def rollout_shapes(fns: HostFns, env: HostEnv, params: PyTree, act: Callable,
                    placement: HostPlacement) -> Rollout:
    """Abstract shapes and shardings of one global rollout, to compile `learn` before the
    workers start stepping."""
    b, t = fns.num_envs, fns.rollout_steps
    rows = placement.layout.thread_envs
    obs = jax.ShapeDtypeStruct((rows, *env.spec.obs_shape), jnp.dtype(env.spec.obs_dtype))
    ids = jax.ShapeDtypeStruct((rows,), jnp.int32)
    action, extras, _ = jax.eval_shape(act, params, obs, jax.random.PRNGKey(0), np.int32(0), ids,
                                       initial_memory(fns, rows), np.ones(rows, bool))
    sharding = placement.sharding(TIME_MAJOR_SPEC)

    def over_time(x):
        return jax.ShapeDtypeStruct((t, b, *x.shape[1:]), x.dtype, sharding=sharding)

    scalar = lambda dtype: jax.ShapeDtypeStruct((t, b), dtype, sharding=sharding)  # noqa: E731
    return Rollout(
        obs=over_time(obs), action=over_time(action), reward=scalar(jnp.float32),
        terminated=scalar(jnp.bool_), truncated=scalar(jnp.bool_), next_obs=over_time(obs),
        extras=jax.tree.map(over_time, extras),
        env_ids=jax.ShapeDtypeStruct((b,), jnp.int32,
                                     sharding=placement.sharding(ENV_AXIS_SPEC)),
    )


def learn_fn(fns: HostFns, placement: HostPlacement) -> Callable:
    """`fns.learn` data-parallel over the learner mesh: rollout rows and replay rows split
    over it, agent state replicated (the agent `pmean`s its gradients over "device")."""
    rollout_spec = Rollout(*([TIME_MAJOR_SPEC] * 6), extras=TIME_MAJOR_SPEC,
                           env_ids=ENV_AXIS_SPEC)
    sharded = jax.shard_map(
        fns.learn, mesh=placement.mesh,
        in_specs=(REPLICATED, ENV_AXIS_SPEC, rollout_spec, REPLICATED),
        out_specs=(REPLICATED, ENV_AXIS_SPEC, REPLICATED),
        check_vma=False,  # see jaxrl_sys.runtime.execution: pmean of a replicated gradient
    )
    return jax.jit(sharded, donate_argnums=(1,))


def global_rollout(parts: list[list[tuple[Any, Rollout]]], env_ids: jax.Array,
                    placement: HostPlacement) -> Rollout:
    """The threads' parts (already on their learner devices, in env order) as one rollout of
    global arrays [T, B, ...] split over the learner mesh."""
    by_device: dict[Any, list[Rollout]] = {}
    for thread_parts in parts:
        for device, part in thread_parts:
            by_device.setdefault(device, []).append(part)
    shards = [jax.tree.map(lambda *xs: xs[0] if len(xs) == 1 else jnp.concatenate(xs, axis=1),
                           *pieces) for pieces in by_device.values()]
    sharding = placement.sharding(TIME_MAJOR_SPEC)
    num_envs = placement.layout.num_envs

    def assemble(*leaves: jax.Array) -> jax.Array:
        shape = (leaves[0].shape[0], num_envs, *leaves[0].shape[2:])
        return jax.make_array_from_single_device_arrays(shape, sharding, list(leaves))

    return jax.tree.map(assemble, *shards)._replace(env_ids=env_ids)


def global_env_ids(placement: HostPlacement) -> jax.Array:
    """Global env ids [B], split over the learner mesh like the rollout's rows."""
    sharding = placement.sharding(ENV_AXIS_SPEC)
    ids = np.arange(placement.layout.num_envs, dtype=np.int32)
    return jax.make_array_from_callback(ids.shape, sharding, lambda index: ids[index])


def actor_params(fns: HostFns, agent_state: PyTree, devices: set) -> dict[Any, PyTree]:
    """The acting parameters on every actor device (from the learner's replicated state)."""
    params = jax.tree.map(lambda x: x.addressable_data(0), fns.actor_params(agent_state))
    return {device: jax.device_put(params, device) for device in devices}


def stack_chunk(metrics: list[dict]) -> dict:
    """Per-iteration metrics of one chunk as [1 seed, K] arrays for `driver.summarize`; the
    episode sums are added up over processes."""
    host = fetch(metrics)
    stacked = {k: np.asarray([[float(m[k]) for m in host]]) for k in host[0]}
    if jax.process_count() > 1:
        local = np.stack([stacked[k] for k in EPISODE_KEYS])
        total = np.asarray(multihost_utils.process_allgather(local)).sum(axis=0)
        stacked.update({k: total[i] for i, k in enumerate(EPISODE_KEYS)})
    return stacked


def thread_pieces(placement: HostPlacement, thread: int) -> list[tuple[Any, int, int]]:
    """(learner device, first, last + 1) of the parts of thread `thread`'s rows that each
    learner device of this process holds, in the thread's own rows."""
    start = thread * placement.layout.thread_envs
    stop = start + placement.layout.thread_envs
    return [(device, max(first, start) - start, min(last, stop) - start)
            for device, first, last in placement.local_learner_rows()
            if first < stop and last > start]
