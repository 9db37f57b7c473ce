"""The quantities ES learns from, as functions of arrays: each env's first episode's return
in a fixed window of steps, and each member's fitness as the mean over its episodes. The
search distribution's update itself is evosax's (OpenAI-ES, ARS; agent.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def first_episode_returns(rewards: jax.Array, done: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The return and length of each env's first episode in a window of steps [T, B]: the
    rewards up to and including its first end (terminated or truncated), or to the window's
    end where it has none (the episode cut at T steps).

    Args:
        rewards: [T, B] rewards.
        done: bool [T, B] episode ends.

    Returns:
        returns: [B] the first episode's undiscounted return.
        lengths: [B] int32 its steps.
    """
    ended_before = jnp.cumsum(done, axis=0) - done  # ends strictly before step t
    alive = ended_before == 0
    returns = jnp.sum(jnp.where(alive, rewards, 0.0), axis=0)
    return returns, jnp.sum(alive, axis=0).astype(jnp.int32)


def member_fitness(returns: jax.Array, episodes_per_member: int) -> jax.Array:
    """Each member's fitness [P]: the mean return of its episodes, from the returns of every
    env [P * E] ordered by global env id (member m plays envs m*E .. m*E + E - 1).

    Args:
        returns: [P * E] episode returns.
        episodes_per_member: E.

    Returns:
        [P] mean returns.
    """
    return returns.reshape(-1, episodes_per_member).mean(axis=1)
