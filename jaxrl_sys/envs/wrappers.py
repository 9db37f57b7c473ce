"""Pure functional wrappers: each takes an `Env` and returns an `Env` with extra state.

Wrapper state is a flax `struct.dataclass` holding the inner env's state plus the wrapper's
own fields, so it stays a pytree that `jit`, `vmap` and `scan` carry like any other.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.core.types import Env, EnvSpec, PyTree

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
    def world_state(self) -> Callable[[PyTree], jax.Array]:
        """The inner env's `world_state(state)` (multi-agent envs) on this wrapper's state."""
        inner = self.env.world_state  # raises AttributeError when the inner env has none
        return lambda state: inner(state.env_state)

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
