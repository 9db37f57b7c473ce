"""What the offline agents (MARWIL and BC, IQL, CQL) share, written once: the config of a
learner that takes gradient steps on a recorded dataset, the dataset read and checked
against the env, its rows (with discounted returns-to-go) dealt to shards that stand where an
online agent's envs are, each shard's draws keyed by its global id (so N devices draw the
batch one device draws), and the iteration of `updates_per_iteration` gradient steps.

The shards are the env state's `replay`: `--no-save-replay` leaves them out of checkpoints
(they are the dataset, read again on resume). With `online_rollout` > 0 the shards also step
envs and keep what they saw (`families.online_tuning`): offline-to-online fine-tuning.
"""

from __future__ import annotations

import dataclasses
import functools
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
from jaxrl_sys.agents.families.online_tuning import (
    Explore, OnlineRows, collect, draw_with_ring, init_online,
)
from jaxrl_sys.core.types import Box, Env, EnvSpec, Metrics
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
    # offline-to-online (IQL and CQL): env steps each shard takes per iteration with the
    # exploring policy, kept in a ring of `online_buffer` rows (over all shards) that is drawn
    # from together with the dataset; 0 learns from the dataset alone
    online_rollout: int = 0
    online_buffer: int = 100_000

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
        check_at_least(self, 0, "online_rollout")
        if self.online_rollout and self.online_buffer < self.shards:
            raise ConfigError(f"online_buffer={self.online_buffer} holds fewer rows than "
                              f"shards={self.shards}")


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
    """This device's shards: rows [S, R, ...], the shards' global ids [S], and with
    `online_rollout` their envs and rings (None offline)."""

    replay: Rows
    env_ids: jax.Array
    online: Optional[OnlineRows] = None


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
                env_ids: jax.Array, online_env: Optional[Env] = None) -> DatasetShards:
    """The shards of global ids `env_ids` (an agent's `init_envs`).

    Args:
        data: the transitions.
        config: the agent's config (`gamma`, `shards`, `online_rollout`, `online_buffer`).
        key: resets the shards' envs online (the data is not random).
        env_ids: [S] int32 global shard ids.
        online_env: the env the shards step when `online_rollout` > 0.

    Returns:
        The shards, rows [S, R, ...].
    """
    rows = jax.tree.map(lambda x: x[env_ids], dealt_rows(data, config.gamma, config.shards))
    online = None
    if config.online_rollout:
        example = jax.tree.map(lambda x: x[0, 0], rows)
        online = init_online(online_env, example, config.online_buffer // config.shards, key,
                             env_ids)
    return DatasetShards(replay=rows, env_ids=env_ids, online=online)


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
    shard_keys = per_env_keys(key, shards.env_ids)

    def one_shard(rows: Rows, shard_key: jax.Array) -> Rows:
        picks = jax.random.randint(shard_key, (per_shard,), 0, size)
        return jax.tree.map(lambda x: x[picks], rows)

    if shards.online is None:
        sampled = jax.vmap(one_shard)(shards.replay, shard_keys)
    else:
        sampled = jax.vmap(draw_with_ring, in_axes=(0, 0, 0, None))(
            shards.replay, shards.online.ring, shard_keys, per_shard)
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), sampled)


def online_row(obs: jax.Array, actions: jax.Array, rewards: jax.Array, next_obs: jax.Array,
               terminated: jax.Array) -> Rows:
    """An env step's rows [S, ...] for the rings (no return-to-go: zero).

    Args:
        obs: [S, ...] observations acted on.
        actions: [S, ...] actions taken.
        rewards: [S] rewards.
        next_obs: [S, ...] the observations reached (before any reset).
        terminated: [S] bool episode ends with no bootstrap.

    Returns:
        The rows.
    """
    return Rows(obs, actions, rewards, next_obs, terminated, jnp.zeros_like(rewards))


def online_train_step(update: Callable, config: OfflineConfig, env: Env, explore: Explore,
                      axis_name: Optional[str]) -> Callable:
    """The `train_step` of an agent that can fine-tune online (IQL, CQL): `gradient_steps`,
    after each shard's `online_rollout` env steps with `explore` when the shards have envs.

    Args:
        update: one gradient step.
        config: the agent's config.
        env: the env the dataset names.
        explore: the agent's exploring policy.
        axis_name: the device axis the episode sums add over.

    Returns:
        train_step(state, shards, key) -> (state, shards, metrics).
    """
    collect_online = functools.partial(collect, env, explore, config.online_rollout, online_row,
                                       axis_name)
    return functools.partial(gradient_steps, update, config, collect_online=collect_online)


def gradient_steps(update: Callable, config: OfflineConfig, state, shards: DatasetShards,
                   key: jax.Array, collect_online: Optional[Callable] = None
                   ) -> tuple[object, DatasetShards, Metrics]:
    """An offline agent's `train_step`: `updates_per_iteration` calls of
    `update(state, rows, key) -> (state, metrics)`, each on a fresh batch. Offline no env
    steps, so no episodes (the driver's greedy evaluation reports the return); online the
    shards first step their envs (`collect_online`, as `online_train_step` binds it).

    Args:
        update: one gradient step.
        config: the agent's config.
        state: the learner state.
        shards: this device's shards (returned unchanged offline).
        key: a PRNG key.
        collect_online: the shards' env steps, when the shards have envs.

    Returns:
        The state, the shards, and the steps' mean metrics with the episodes' sums (zero
        offline).
    """
    per_shard = config.batch_size // config.shards
    zero = jnp.zeros((), jnp.float32)
    episodes = dict(episode_return_sum=zero, episode_length_sum=zero, episode_count=zero)
    if shards.online is not None:
        collect_key, key = jax.random.split(key)
        online, episodes = collect_online(state, shards.online, collect_key)
        shards = shards.replace(online=online)

    def one_update(state, step_key: jax.Array):
        sample_key, update_key = jax.random.split(step_key)
        return update(state, sample_rows(shards, sample_key, per_shard), update_key)

    state, metrics = jax.lax.scan(one_update, state,
                                  jax.random.split(key, config.updates_per_iteration))
    metrics = jax.tree.map(jnp.mean, metrics)
    metrics.update(episodes)
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
