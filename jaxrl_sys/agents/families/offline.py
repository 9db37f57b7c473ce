"""What the offline agents (MARWIL and BC, IQL, CQL) share, written once: the config of a
learner that takes gradient steps on a recorded dataset, the dataset read and checked
against the env, its rows (with discounted returns-to-go) dealt to shards that stand where an
online agent's envs are, each shard's draws keyed by its global id (so N devices draw the
batch one device draws), and the iteration of `updates_per_iteration` gradient steps.

The shards are the env state's `replay`: `--no-save-replay` leaves them out of checkpoints
(they are the dataset, read again on resume).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_positive,
)
from jaxrl_sys.core.returns import episode_returns
from jaxrl_sys.core.rollout import per_env_keys
from jaxrl_sys.core.types import Box, EnvSpec, Metrics
from jaxrl_sys.datasets.minari_format import DatasetError, read_dataset
from jaxrl_sys.datasets.transitions import Transitions, from_episodes


@dataclasses.dataclass(frozen=True)
class OfflineConfig(RolloutBudget):
    """An offline learner's budget and data. A step is a gradient step: one iteration takes
    `updates_per_iteration` of them, and `total_steps` counts them; no env is stepped in
    training (greedy evaluation plays the env the run names)."""

    dataset: str = ""  # a Minari dataset directory, or a dataset id under MINARI_DATASETS_PATH
    total_steps: int = 20_000  # gradient steps
    updates_per_iteration: int = 100
    # the dataset's rows are dealt round-robin to this many shards, split over devices; each
    # shard samples its share of every batch from its own rows
    shards: int = 8
    batch_size: int = 256  # global, split over the shards
    learning_rate: float = 1e-3
    max_grad_norm: float = 10.0
    gamma: float = 0.99

    @property
    def num_envs(self) -> int:
        """The dataset's shards stand where an online agent's envs are (split over devices).

        Returns:
            `shards`.
        """
        return self.shards

    @property
    def rollout_steps(self) -> int:
        """Gradient steps per iteration (an iteration's length, as an online agent's
        rollout).

        Returns:
            `updates_per_iteration`.
        """
        return self.updates_per_iteration

    @property
    def steps_per_iteration(self) -> int:
        """Steps one iteration counts: its gradient steps.

        Returns:
            `updates_per_iteration`.
        """
        return self.updates_per_iteration

    def validate_offline(self) -> None:
        """The shared fields' checks (each agent's `validate` calls it first)."""
        check_at_least(self, 1, "total_steps", "updates_per_iteration", "shards", "batch_size")
        check_budget(self)
        if self.batch_size % self.shards:
            raise ConfigError(f"batch_size={self.batch_size} does not divide over "
                              f"shards={self.shards}")
        check_positive(self, "learning_rate", "max_grad_norm")
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(f"gamma must be in [0, 1], got {self.gamma}")


@struct.dataclass
class Rows:
    """Dataset rows (leaves [..., ...]): the transition and its discounted return-to-go."""

    obs: jax.Array
    actions: jax.Array
    rewards: jax.Array
    next_obs: jax.Array
    terminated: jax.Array  # bool: no bootstrap from next_obs
    returns: jax.Array  # the discounted rewards to the episode's end


@struct.dataclass
class DatasetShards:
    """This device's shards: rows [S, R, ...] and the shards' global ids [S]."""

    replay: Rows
    env_ids: jax.Array


def load_transitions(config: OfflineConfig, spec: EnvSpec) -> Transitions:
    """The dataset `config` names as transitions (actions int32 or float32), or ConfigError
    (one line) when there is none, it cannot be read, it was recorded in another env, or it
    does not fit `spec`'s observations and actions.

    Args:
        config: the agent's config (its `dataset` and `shards`).
        spec: the env's spec.

    Returns:
        The transitions, host arrays.
    """
    if not config.dataset:
        raise ConfigError("this agent learns from a recorded dataset: --set dataset=PATH "
                          "(a Minari dataset, which jaxrl-record writes from a run)")
    try:
        dataset = read_dataset(config.dataset)
    except DatasetError as error:
        raise ConfigError(str(error)) from None
    if dataset.env_name is not None and dataset.env_name != spec.name:
        raise ConfigError(f"{config.dataset} was recorded in {dataset.env_name}; the run names "
                          f"{spec.name} (--env {dataset.env_name})")
    data = from_episodes(dataset.episodes)
    if tuple(data.obs.shape[1:]) != tuple(spec.obs_shape):
        raise ConfigError(f"{config.dataset}: observations of shape {data.obs.shape[1:]}, "
                          f"{spec.name}'s are {spec.obs_shape}")
    if isinstance(spec.action_space, Box):
        if tuple(data.actions.shape[1:]) != tuple(spec.action_space.shape):
            raise ConfigError(f"{config.dataset}: actions of shape {data.actions.shape[1:]}, "
                              f"{spec.name}'s are {spec.action_space.shape}")
        actions = data.actions.astype(np.float32)
    else:
        if data.actions.ndim != 1 or not np.issubdtype(data.actions.dtype, np.integer):
            raise ConfigError(f"{config.dataset}: {spec.name} takes one integer action per step")
        if data.actions.min() < 0 or data.actions.max() >= spec.action_space.n:
            raise ConfigError(f"{config.dataset}: actions outside 0..{spec.action_space.n - 1}")
        actions = data.actions.astype(np.int32)
    if data.size < config.shards:
        raise ConfigError(f"{config.dataset}: {data.size} transitions, fewer than "
                          f"shards={config.shards}")
    return data.replace(actions=actions)


def dealt_rows(data: Transitions, gamma: float, shards: int) -> Rows:
    """The dataset's rows with their discounted returns-to-go (episodes end where they
    terminate or are truncated; nothing is bootstrapped), dealt round-robin: row i goes to
    shard i % shards. Where M does not divide, the deal goes on from the first rows again, so
    no row is left out and fewer than `shards` rows are held twice.

    Args:
        data: the transitions (M rows).
        gamma: the discount of the returns-to-go.
        shards: the number of shards.

    Returns:
        The rows, leaves [shards, ceil(M / shards), ...].
    """
    returns, _ = episode_returns(jnp.asarray(data.rewards), jnp.asarray(data.terminated),
                                 jnp.asarray(data.truncated), gamma)
    rows = Rows(jnp.asarray(data.obs), jnp.asarray(data.actions), jnp.asarray(data.rewards),
                jnp.asarray(data.next_obs), jnp.asarray(data.terminated), returns)
    per_shard = -(-data.size // shards)
    order = np.arange(per_shard * shards) % data.size

    def deal(x: jax.Array) -> jax.Array:
        x = x[order].reshape(per_shard, shards, *x.shape[1:])
        return jnp.swapaxes(x, 0, 1)

    return jax.tree.map(deal, rows)


def init_shards(data: Transitions, config: OfflineConfig, key: jax.Array,
                env_ids: jax.Array) -> DatasetShards:
    """The shards of global ids `env_ids` (an agent's `init_envs`).

    Args:
        data: the transitions.
        config: the agent's config (`gamma`, `shards`).
        key: unused (the data is not random).
        env_ids: [S] int32 global shard ids.

    Returns:
        The shards, rows [S, R, ...].
    """
    del key
    rows = dealt_rows(data, config.gamma, config.shards)
    return DatasetShards(replay=jax.tree.map(lambda x: x[env_ids], rows), env_ids=env_ids)


def sample_rows(shards: DatasetShards, key: jax.Array, per_shard: int) -> Rows:
    """`per_shard` rows drawn uniformly (with replacement) from each shard, with the shard's
    key (of its global id).

    Args:
        shards: this device's shards.
        key: a PRNG key, the same on every device.
        per_shard: rows to draw from each shard.

    Returns:
        The rows, leaves [S * per_shard, ...].
    """
    size = shards.replay.returns.shape[1]

    def one_shard(rows: Rows, shard_key: jax.Array) -> Rows:
        picks = jax.random.randint(shard_key, (per_shard,), 0, size)
        return jax.tree.map(lambda x: x[picks], rows)

    sampled = jax.vmap(one_shard)(shards.replay, per_env_keys(key, shards.env_ids))
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), sampled)


def gradient_steps(update: Callable, config: OfflineConfig, state, shards: DatasetShards,
                   key: jax.Array) -> tuple[object, DatasetShards, Metrics]:
    """An offline agent's `train_step`: `updates_per_iteration` calls of
    `update(state, rows, key) -> (state, metrics)`, each on a fresh batch; no env steps, so
    no episodes (the driver's greedy evaluation reports the return).

    Args:
        update: one gradient step.
        config: the agent's config.
        state: the learner state.
        shards: this device's shards (returned unchanged).
        key: a PRNG key.

    Returns:
        The state, the shards, and the steps' mean metrics (with zero episode counts).
    """
    per_shard = config.batch_size // config.shards

    def one_update(state, step_key: jax.Array):
        sample_key, update_key = jax.random.split(step_key)
        return update(state, sample_rows(shards, sample_key, per_shard), update_key)

    state, metrics = jax.lax.scan(one_update, state,
                                  jax.random.split(key, config.updates_per_iteration))
    metrics = jax.tree.map(jnp.mean, metrics)
    zero = jnp.zeros((), jnp.float32)
    metrics.update(episode_return_sum=zero, episode_length_sum=zero, episode_count=zero)
    return state, shards, metrics


def clip_per_network(grads: Any, max_norm: float) -> Any:
    """Each network's gradient (each entry of `grads`) scaled to a global norm of at most
    `max_norm` on its own, so that one network's large gradient does not shrink another's
    (the networks of an offline agent have separate losses).

    Args:
        grads: {network name: its gradient tree}, or a NamedTuple of them.
        max_norm: the largest norm of each network's gradient.

    Returns:
        The clipped gradients, the same structure.
    """
    def clip(tree):
        norm = optax.tree.norm(tree)
        scale = jnp.minimum(1.0, max_norm / (norm + 1e-6))
        return jax.tree.map(lambda g: g * scale, tree)

    if isinstance(grads, dict):
        return {name: clip(tree) for name, tree in grads.items()}
    return type(grads)(*(clip(tree) for tree in grads))


def shards_placement_problem(config: OfflineConfig, devices: int) -> Optional[str]:
    """Each device samples from whole shards: the shards must divide over the devices.

    Args:
        config: the agent's config.
        devices: the number of devices.

    Returns:
        The problem in one line, or None.
    """
    if config.shards % devices:
        return (f"shards={config.shards} does not divide over {devices} devices: each device "
                "samples from whole shards of the dataset")
    return None
