"""What the off-policy continuous-control family (SAC, TD3 and DDPG) shares, written once: the
action box (policies act in [-1, 1], envs take their own units), the learner state of an actor
with critics and target copies (TD3, DDPG, MADDPG), uniform random actions before learning
starts, twin Q critics on (observation, action), replay rows of transitions, each
device's share of the batch and its slice of the global batch's noise, and absorbing one
vector step into replay followed by `updates_per_step` updates.

Stored transitions are `{obs, action, reward, terminated, next_obs}` with `action` in env units
and `next_obs` the pre-reset observation (`info["final_observation"]`), so targets bootstrap
through truncation and never through termination.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.core import collectives, obs_norm, replay
from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval,
)
from jaxrl_sys.core.learner import device_key, when_ready
from jaxrl_sys.core.networks import ACTIVATIONS
from jaxrl_sys.core.types import EnvSpec, Metrics


@dataclasses.dataclass(frozen=True)
class ContinuousControlConfig(RolloutBudget):
    """The hyper-parameters every agent of the family has (replay, warm-up, updates per env
    step, targets, learning rates, networks, exploration noise's correlation) and their
    checks; each agent's Config adds its own fields and sets its own defaults."""

    total_steps: int = 30_000
    num_envs: int = 4
    rollout_steps: int = 50  # vectorised env steps per iteration (per train_step call)
    buffer_size: int = 100_000  # total over envs; each env keeps buffer_size // num_envs
    batch_size: int = 256  # global, per gradient update (split over devices)
    learning_starts: int = 1_000  # env steps (all envs) of uniform random actions, no updates
    updates_per_step: int = 1  # gradient updates per vectorised env step
    gamma: float = 0.99
    tau: float = 0.01  # Polyak rate of the targets
    actor_learning_rate: float = 3e-3
    critic_learning_rate: float = 3e-3
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "relu"
    normalize_obs: bool = False
    # Exploration noise per env as an AR(1) process: each step keeps this share of the last
    # step's noise (unit variance either way). 0 is white noise; near 1 the policy's
    # perturbations last tens of steps and carry it far, which sparse rewards such as
    # MountainCarContinuous's need (Eberhard et al. 2023). On-device loop only.
    noise_correlation: float = 0.0
    # LayerNorm before each hidden activation of the critics: bounds the features a Q-value
    # is read from, against late divergence of the bootstrapped targets (Ball et al. 2023)
    critic_layer_norm: bool = False

    @property
    def capacity_per_env(self) -> int:
        """Transitions each env's replay keeps.

        Returns:
            `buffer_size // num_envs`.
        """
        return self.buffer_size // self.num_envs

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps", "buffer_size",
                       "batch_size", "updates_per_step")
        check_budget(self)
        check_at_least(self, 0, "learning_starts")
        if self.buffer_size % self.num_envs:
            raise ConfigError(
                f"buffer_size={self.buffer_size} must be divisible by num_envs={self.num_envs}"
            )
        check_positive(self, "actor_learning_rate", "critic_learning_rate", "tau")
        check_unit_interval(self, "gamma", "tau")
        if not 0.0 <= self.noise_correlation < 1.0:
            raise ConfigError(f"noise_correlation={self.noise_correlation} must be in [0, 1)")
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")


@struct.dataclass
class ActorCriticParams:
    """An actor, its critics and their target copies (TD3's, DDPG's and MADDPG's)."""

    actor: Any
    critic: Any  # TD3's twins: every leaf with a leading axis of 2
    target_actor: Any
    target_critic: Any


class ActorCriticOptState(NamedTuple):
    """The actor's and the critics' optimiser states, apart (TD3 moves the actor only every
    `policy_delay` steps)."""

    actor: Any
    critic: Any


@struct.dataclass
class ActorCriticState:
    """Learner state: parameters, optimiser states, counters (per seed, replicated), and the
    observation statistics when `normalize_obs` (None otherwise)."""

    params: ActorCriticParams
    opt_state: ActorCriticOptState
    env_steps: jax.Array  # env steps taken so far, over all envs of the seed
    updates: jax.Array  # critic updates so far
    obs_stats: Optional[obs_norm.RunningStats] = None


def to_env_units(a: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Actions [B, A] in [-1, 1] mapped onto the env's box [low, high] ([A] each).

    Args:
        a: [B, A] actions in [-1, 1].
        low: [A] the box's lower bounds.
        high: [A] its upper bounds.

    Returns:
        [B, A] actions in env units.
    """
    return low + 0.5 * (a + 1.0) * (high - low)


def to_unit_box(action: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Actions [B, A] in env units mapped into [-1, 1] (clipped), the policies' range.

    Args:
        action: [B, A] actions in env units.
        low: [A] the box's lower bounds.
        high: [A] its upper bounds.

    Returns:
        [B, A] actions in [-1, 1].
    """
    return jnp.clip(2.0 * (action - low) / (high - low) - 1.0, -1.0, 1.0)


def white_noise(keys: jax.Array, action_dim: int) -> jax.Array:
    """Standard normal noise [B, action_dim], one row per key of `keys` [B].

    Args:
        keys: [B] PRNG keys.
        action_dim: A.

    Returns:
        [B, A] float32 noise.
    """
    return jax.vmap(lambda k: jax.random.normal(k, (action_dim,)))(keys)


def correlated_noise(last: jax.Array, fresh: jax.Array, correlation: float) -> jax.Array:
    """One step of an AR(1) process with unit variance: `correlation` of the last noise kept,
    the rest fresh standard normal noise; `fresh` itself (white noise) at 0. Near 1 a policy's
    perturbations last tens of steps, which sparse rewards such as MountainCarContinuous's
    need (Eberhard et al. 2023).

    Args:
        last: [B, A] the last step's noise.
        fresh: [B, A] standard normal noise.
        correlation: the share kept, in [0, 1).

    Returns:
        [B, A] noise with unit variance.
    """
    if correlation == 0.0:
        return fresh
    return correlation * last + math.sqrt(1.0 - correlation**2) * fresh


def uniform_actions(keys: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Uniform random actions [B, A] in env units, one row per key of `keys` [B].

    Args:
        keys: [B] PRNG keys.
        low: [A] the box's lower bounds.
        high: [A] its upper bounds.

    Returns:
        [B, A] actions in env units.
    """
    u = jax.vmap(
        lambda k: jax.random.uniform(k, low.shape, minval=-1.0, maxval=1.0))(keys)
    return to_env_units(u, low, high)


def dense(features: int, scale: float = 1.0) -> nn.Dense:
    """A dense layer with lecun-normal weights times `scale` (no QR: safe under vmap on CPU).

    Args:
        features: the output width.
        scale: the weights' variance factor.

    Returns:
        The layer.
    """
    init = nn.initializers.variance_scaling(scale, "fan_in", "normal")
    return nn.Dense(features, kernel_init=init)


class Critic(nn.Module):
    """(obs [B, ...], action [B, A] in [-1, 1]) -> Q [B]."""

    hidden: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False  # LayerNorm before each hidden activation

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([obs.reshape(obs.shape[0], -1), action], axis=-1)
        for width in self.hidden:
            x = dense(width)(x)
            if self.layer_norm:
                x = nn.LayerNorm()(x)
            x = ACTIVATIONS[self.activation](x)
        return dense(1)(x)[:, 0]


def init_twin_critics(critic: Critic, key: jax.Array, obs: jax.Array, action_dim: int) -> Any:
    """Two independently initialised critics.

    Args:
        critic: the critic module.
        key: a PRNG key.
        obs: [1, ...] an example observation.
        action_dim: A.

    Returns:
        The twins' parameters, every leaf with a leading axis of 2.
    """
    return jax.vmap(critic.init, in_axes=(0, None, None))(
        jax.random.split(key, 2), obs, jnp.zeros((1, action_dim), jnp.float32)
    )


def twin_q_values(critic: Critic, params: Any, obs: jax.Array, action: jax.Array,
                  apart: bool = False) -> jax.Array:
    """The twin critics' Q-values.

    Args:
        critic: the critic module.
        params: the twins' parameters (leading axis 2).
        obs: [B, ...] observations.
        action: [B, A] actions in [-1, 1].
        apart: apply the twins one after the other instead of vmapped over their axis. On
            XLA:CPU two matrix products ran faster than one batched over the twins (continuous
            CQL's update: 1.17x the old step, against 1.10x vmapped). The values came out the
            same bits here; the gradients differ in the last bits, so agents whose learning
            checks ran vmapped keep that.

    Returns:
        [2, B] Q-values.
    """
    if apart:
        return jnp.stack([critic.apply(jax.tree.map(lambda leaf: leaf[twin], params), obs, action)
                          for twin in range(2)])
    return jax.vmap(critic.apply, in_axes=(0, None, None))(params, obs, action)


def transition(obs_dtype: Any, obs: jax.Array, action: jax.Array, reward: jax.Array,
               terminated: jax.Array, next_obs: jax.Array) -> dict:
    """One replay row per env (leaves [envs, ...]), observations stored as `obs_dtype`.

    Args:
        obs_dtype: the stored observations' dtype (the env's).
        obs: [E, ...] observations.
        action: [E, A] actions in env units.
        reward: [E] rewards.
        terminated: bool [E].
        next_obs: [E, ...] pre-reset next observations.

    Returns:
        The row: obs, action, reward (float32), terminated, next_obs.
    """
    return dict(
        obs=obs.astype(obs_dtype),
        action=action,
        reward=reward.astype(jnp.float32),
        terminated=terminated,
        next_obs=next_obs.astype(obs_dtype),
    )


def init_replay(spec: EnvSpec, num_envs: int, capacity_per_env: int) -> replay.ReplayState:
    """Empty transition replay for `num_envs` envs.

    Args:
        spec: the env's spec (observation shape and dtype, the action box).
        num_envs: the envs whose rows it keeps.
        capacity_per_env: transitions each env keeps.

    Returns:
        The replay state.
    """
    obs_dtype = jnp.dtype(spec.obs_dtype)
    example = dict(
        obs=jnp.zeros(spec.obs_shape, obs_dtype),
        action=jnp.zeros(tuple(spec.action_space.shape), jnp.float32),
        reward=jnp.zeros((), jnp.float32),
        terminated=jnp.zeros((), jnp.bool_),
        next_obs=jnp.zeros(spec.obs_shape, obs_dtype),
    )
    return replay.init(example, num_envs, capacity_per_env)


def local_batch_size(batch_size: int, num_envs: int, local_envs: int) -> int:
    """This device's share of the global batch: batch_size * local_envs / num_envs.

    Args:
        batch_size: the global batch.
        num_envs: the envs of a seed over all devices.
        local_envs: this device's envs.

    Returns:
        The local batch size; ConfigError where it does not divide.
    """
    share = batch_size * local_envs
    if share % num_envs:
        devices = num_envs // local_envs
        raise ConfigError(f"batch_size={batch_size} does not divide over {devices} devices")
    return share // num_envs


def global_noise(axis_name: str | None, key: jax.Array, local_batch: int,
                 action_dim: int | tuple[int, ...],
                 draw: Callable[..., jax.Array] = jax.random.normal) -> jax.Array:
    """This device's slice of the noise drawn for the global batch, so that N devices draw
    what 1 device would.

    Args:
        axis_name: the device axis, or None.
        key: a PRNG key, the same on every device.
        local_batch: this device's rows.
        action_dim: A, or a row's shape.
        draw: `draw(key, shape)`, the noise's distribution (standard normal by default).

    Returns:
        [local_batch, A] (or [local_batch, *shape]) noise.
    """
    row = (action_dim,) if isinstance(action_dim, int) else tuple(action_dim)
    devices = collectives.axis_size(axis_name)
    if devices == 1:
        return draw(key, (local_batch, *row))
    noise = draw(key, (devices * local_batch, *row))
    start = collectives.axis_index(axis_name) * local_batch
    return jax.lax.dynamic_slice_in_dim(noise, start, local_batch)


def mean_over_learned(metrics: Metrics, learned: jax.Array) -> Metrics:
    """Per-step metrics averaged over the steps that learned (the driver averages with
    nanmean).

    Args:
        metrics: scalars per step, each [T].
        learned: [T] 0 or 1, whether the step learned.

    Returns:
        Each metric's mean over the learning steps, NaN if none learned.
    """
    count = jnp.sum(learned)
    return jax.tree.map(
        lambda m: jnp.where(count > 0, jnp.sum(m) / jnp.maximum(count, 1.0), jnp.nan), metrics
    )


def absorb(config: Any, axis_name: str | None, update: Callable, state: Any,
           buffer: replay.ReplayState, row: dict, key: jax.Array, local_batch: int
           ) -> tuple[Any, replay.ReplayState, Metrics, jax.Array]:
    """Add one vector step's transitions to `buffer`, count the env steps and observation
    statistics, then take `updates_per_step` updates once past `learning_starts`. Shared by
    the on-device loop and the host loop.

    Args:
        config: the agent's Config (`num_envs`, `learning_starts`, `updates_per_step`).
        axis_name: the device axis, or None.
        update: `update(state, batch, key) -> (state, metrics)`, one gradient step.
        state: the learner state (with `env_steps` and `obs_stats`).
        buffer: this device's replay.
        row: the step's transitions (`transition`), leaves [local envs, ...].
        key: a PRNG key.
        local_batch: this device's share of each update's batch.

    Returns:
        state: the learner state.
        buffer: the replay with the row added.
        metrics: averaged over the updates, 0 where none was taken.
        learned: scalar float, 1 where it learned.
    """
    buffer = replay.add(buffer, row)
    state = state.replace(
        env_steps=state.env_steps + config.num_envs,
        obs_stats=obs_norm.update(state.obs_stats, row["obs"], axis_name),
    )
    learn = state.env_steps >= config.learning_starts

    def updates(state, buffer, key):
        sample_key, grad_key = jax.random.split(key)
        # every update's batch in one draw: [updates, local batch, ...]
        batches, _ = replay.sample(buffer, device_key(sample_key, axis_name),
                                   config.updates_per_step * local_batch)
        batches = jax.tree.map(
            lambda x: x.reshape(config.updates_per_step, local_batch, *x.shape[1:]), batches)

        def one_update(state, batch_and_u):
            batch, u = batch_and_u
            return update(state, batch, jax.random.fold_in(grad_key, u))

        state, metrics = jax.lax.scan(
            one_update, state, (batches, jnp.arange(config.updates_per_step)))
        return state, buffer, jax.tree.map(jnp.mean, metrics)

    state, buffer, metrics = when_ready(learn, updates, state, buffer, key)
    metrics = jax.tree.map(lambda m: jnp.where(learn, m, 0.0), metrics)
    return state, buffer, metrics, learn.astype(jnp.float32)
