"""Offline-to-online fine-tuning for the offline family (IQL and CQL): with `online_rollout`
> 0, each dataset shard also steps one env of its own, `online_rollout` steps per iteration
with the agent's exploring policy, and keeps what it saw in a ring beside its dataset rows.
Every draw is then uniform over the shard's dataset rows and ring rows together: the dataset
stays in the replay, as in the IQL and CQL papers' fine-tuning. The learner itself starts from
an offline run's (`jaxrl-train --init-from RUN_DIR`).

Each shard's env and draws are keyed by the shard's global id, so N devices step and draw what
one device does.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.core import replay
from jaxrl_sys.core.rollout import (
    VecEnvState, empty_tally, episode_tally, episode_totals, per_env_keys, reset_envs,
    step_envs,
)
from jaxrl_sys.core.types import Env, Metrics

# explore(learner state, obs [S, ...], keys [S]) -> actions [S, ...]: the exploring policy
Explore = Callable[[Any, jax.Array, jax.Array], jax.Array]


@struct.dataclass
class OnlineRows:
    """The shards' envs (one per shard, leaves [S, ...]) and rings of what they saw (data
    leaves [S, C, ...], rows shaped as the dataset's, with zero returns-to-go)."""

    envs: VecEnvState
    ring: replay.ReplayState


def init_online(env: Env, example_row: Any, capacity_per_shard: int, key: jax.Array,
                env_ids: jax.Array) -> OnlineRows:
    """Fresh envs for the shards of global ids `env_ids` and empty rings.

    Args:
        env: the env the dataset was recorded in.
        example_row: one dataset row (leaves without a batch axis), the ring rows' shape.
        capacity_per_shard: ring rows per shard.
        key: a PRNG key, folded with each shard's id.
        env_ids: [S] int32 global shard ids.

    Returns:
        The envs, reset, and zero-filled rings [S, capacity_per_shard, ...].
    """
    envs = reset_envs(env, key, env_ids)
    return OnlineRows(envs, replay.init(example_row, env_ids.shape[0], capacity_per_shard))


def collect(env: Env, explore: Explore, steps: int, row_of: Callable[..., Any],
            axis_name: Optional[str], state: Any, online: OnlineRows,
            key: jax.Array) -> tuple[OnlineRows, Metrics]:
    """`steps` steps of every shard's env with the exploring policy, each transition added to
    its shard's ring (`next_obs` the pre-reset observation, so a truncated episode's last row
    bootstraps from where it stopped).

    Args:
        env: the env.
        explore: the exploring policy.
        steps: env steps per shard.
        row_of: (obs, actions, rewards, next_obs, terminated) -> a ring row batch [S, ...].
        axis_name: the device axis the episode metrics sum over, or None.
        state: the learner state (`explore`'s first argument).
        online: the envs and rings.
        key: a PRNG key, the same on every device.

    Returns:
        The envs and rings after the steps, and the finished episodes' sums
        (`episode_return_sum`, `episode_length_sum`, `episode_count`).
    """
    def one_step(carry, t):
        envs, ring, tally = carry
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        actions = explore(state, envs.obs, per_env_keys(act_key, envs.env_ids))
        next_envs, result = step_envs(env, envs, actions, env_key)
        ring = replay.add(ring, row_of(envs.obs, actions, result.reward,
                                       result.info["final_observation"], result.terminated))
        tally = jax.tree.map(jnp.add, tally, episode_tally(result.info))
        return (next_envs, ring, tally), None

    start = (online.envs, online.ring, empty_tally(online.envs.env_ids.shape[0]))
    (envs, ring, tally), _ = jax.lax.scan(one_step, start, jnp.arange(steps))
    return OnlineRows(envs, ring), episode_totals(tally, axis_name)


def draw_with_ring(dataset_rows: Any, ring: replay.ReplayState, key: jax.Array,
                   count: int) -> Any:
    """`count` rows of one shard drawn uniformly (with replacement) from its dataset rows
    and its ring's filled rows together.

    Args:
        dataset_rows: the shard's dataset rows, leaves [R, ...].
        ring: the shard's ring, data leaves [C, ...], `size` a scalar.
        key: the shard's PRNG key.
        count: rows to draw.

    Returns:
        The rows, leaves [count, ...].
    """
    held = jax.tree.leaves(dataset_rows)[0].shape[0]
    picks = jax.random.randint(key, (count,), 0, held + ring.size)
    from_ring = picks >= held
    in_data = jnp.minimum(picks, held - 1)
    in_ring = jnp.clip(picks - held, 0, jax.tree.leaves(ring.data)[0].shape[0] - 1)

    def pick(data_leaf: jax.Array, ring_leaf: jax.Array) -> jax.Array:
        chosen = from_ring.reshape(count, *([1] * (data_leaf.ndim - 1)))
        return jnp.where(chosen, ring_leaf[in_ring], data_leaf[in_data])

    return jax.tree.map(pick, dataset_rows, ring.data)
