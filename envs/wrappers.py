"""Pure functional wrappers: each takes an `Env` and returns an `Env` with extra state.

Wrapper state is a flax `struct.dataclass` holding the inner env's state plus the wrapper's
own fields, so it stays a pytree that `jit`, `vmap` and `scan` carry like any other.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.types import Env, EnvSpec, PyTree

Info = dict[str, jax.Array]
StepOut = tuple[jax.Array, PyTree, jax.Array, jax.Array, jax.Array, Info]


class Wrapper:
    """Base for wrappers: keeps the inner env and forwards its spec; hashes by identity."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.spec: EnvSpec = env.spec

    @property
    def unwrapped(self) -> Env:
        """The innermost env, below every wrapper."""
        return getattr(self.env, "unwrapped", self.env)

    @property
    def legal_actions(self) -> Callable[[PyTree], jax.Array]:
        """The inner env's `legal_actions(state)` on this wrapper's state; AttributeError if none.

        A property, so that `hasattr(wrapper, "legal_actions")` tells whether the inner env has it.
        """
        inner = self.env.legal_actions  # raises AttributeError when the inner env has none

        def legal_actions(state: PyTree) -> jax.Array:
            return inner(state.env_state)

        return legal_actions

    @property
    def player_to_move(self) -> Callable[[PyTree], jax.Array]:
        """The inner env's `player_to_move(state)` on this wrapper's state (two-player games)."""
        inner = self.env.player_to_move  # raises AttributeError when the inner env has none
        return lambda state: inner(state.env_state)

    def innermost_state(self, state: PyTree) -> PyTree:
        """The innermost env's part of this wrapper's `state`."""
        inner = getattr(self.env, "innermost_state", lambda s: s)
        return inner(state.env_state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env!r})"


# --------------------------------------------------------------------------- episode statistics


@struct.dataclass
class EpisodeStatsState:
    """Inner env state plus the running return and length of the current episode."""

    env_state: PyTree
    episode_return: jax.Array  # float32
    episode_length: jax.Array  # int32


class EpisodeStatistics(Wrapper):
    """Adds `episode_done`, `episode_return`, `episode_length` to `info` (raw rewards).

    `episode_done` is True where an episode ended at this step (terminated or truncated); the
    return/length are those of that episode, final reward included, and 0 where none ended.
    The accumulators restart at 0 when the env auto-resets.
    """

    def reset(self, key: jax.Array) -> tuple[jax.Array, EpisodeStatsState]:
        """Reset the inner env and zero the accumulators."""
        obs, env_state = self.env.reset(key)
        zero_f = jnp.zeros((), jnp.float32)
        zero_i = jnp.zeros((), jnp.int32)
        return obs, EpisodeStatsState(env_state, zero_f, zero_i)

    def step(self, key: jax.Array, state: EpisodeStatsState, action: jax.Array) -> StepOut:
        """Step the inner env and account the reward to the current episode."""
        obs, env_state, reward, terminated, truncated, info = self.env.step(
            key, state.env_state, action
        )
        ret = state.episode_return + reward.astype(jnp.float32)
        length = state.episode_length + 1
        done = jnp.logical_or(terminated, truncated)
        info = {
            **info,
            "episode_done": done,
            "episode_return": jnp.where(done, ret, 0.0).astype(jnp.float32),
            "episode_length": jnp.where(done, length, 0).astype(jnp.int32),
        }
        new_state = EpisodeStatsState(
            env_state=env_state,
            episode_return=jnp.where(done, 0.0, ret).astype(jnp.float32),
            episode_length=jnp.where(done, 0, length).astype(jnp.int32),
        )
        return obs, new_state, reward, terminated, truncated, info


# --------------------------------------------------------------------- observation normalisation


@struct.dataclass
class RunningStats:
    """Running per-element mean, (population) variance and count of the observations seen."""

    mean: jax.Array
    var: jax.Array
    count: jax.Array  # float32 scalar


@struct.dataclass
class NormalizeObsState:
    """Inner env state plus the running observation statistics."""

    env_state: PyTree
    stats: RunningStats


def update_stats(
    stats: RunningStats, x: jax.Array, weight: jax.Array | float = 1.0
) -> RunningStats:
    """Fold one observation `x` into `stats` (parallel-variance update); `weight` 0 skips it."""
    weight = jnp.asarray(weight, jnp.float32)
    total = stats.count + weight
    safe_total = jnp.maximum(total, 1.0)
    delta = x - stats.mean
    mean = stats.mean + delta * (weight / safe_total)
    m2 = stats.var * stats.count + jnp.square(delta) * (stats.count * weight / safe_total)
    return RunningStats(mean=mean, var=m2 / safe_total, count=total)


def normalize(stats: RunningStats, x: jax.Array, clip: float, epsilon: float) -> jax.Array:
    """Standardise `x` with `stats` and clip to [-clip, clip]."""
    z = (x - stats.mean) / jnp.sqrt(stats.var + epsilon)
    return jnp.clip(z, -clip, clip)


class NormalizeObservation(Wrapper):
    """Standardises observations with running statistics kept in the env state.

    Statistics are updated with every observation the env emits: the reset observation, each
    step's pre-reset `final_observation`, and the fresh observation after an auto-reset. The
    returned obs and `info["final_observation"]` are normalised with the same (updated)
    statistics and clipped to +-`clip`. Under `jax.vmap` each env keeps its own statistics.
    """

    def __init__(self, env: Env, clip: float = 10.0, epsilon: float = 1e-8) -> None:
        super().__init__(env)
        self.clip = float(clip)
        self.epsilon = float(epsilon)

    def reset(self, key: jax.Array) -> tuple[jax.Array, NormalizeObsState]:
        """Reset the inner env and start statistics from its first observation."""
        obs, env_state = self.env.reset(key)
        empty = RunningStats(
            mean=jnp.zeros(obs.shape, jnp.float32),
            var=jnp.zeros(obs.shape, jnp.float32),
            count=jnp.zeros((), jnp.float32),
        )
        stats = update_stats(empty, obs)
        return self._norm(stats, obs), NormalizeObsState(env_state, stats)

    def step(self, key: jax.Array, state: NormalizeObsState, action: jax.Array) -> StepOut:
        """Step the inner env, update the statistics, and normalise obs and final_observation."""
        obs, env_state, reward, terminated, truncated, info = self.env.step(
            key, state.env_state, action
        )
        final_obs = info["final_observation"]
        done = jnp.logical_or(terminated, truncated)
        stats = update_stats(state.stats, final_obs)
        stats = update_stats(stats, obs, done.astype(jnp.float32))
        info = {**info, "final_observation": self._norm(stats, final_obs)}
        new_state = NormalizeObsState(env_state, stats)
        return self._norm(stats, obs), new_state, reward, terminated, truncated, info

    def _norm(self, stats: RunningStats, x: jax.Array) -> jax.Array:
        return normalize(stats, x, self.clip, self.epsilon)
