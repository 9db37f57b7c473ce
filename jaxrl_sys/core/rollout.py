"""A batch of environments stepped on device, keyed by global env id.

Each env draws its randomness from `fold_in(key, env_id)`, so a run is the same whether its
envs live on one device or are split over many.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.core import collectives
from jaxrl_sys.core.types import Discrete, Env, Metrics, PyTree


@struct.dataclass
class VecEnvState:
    """The per-env part of a run: env states, current observations, global env ids, and a
    recurrent agent's per-env state (None for a feed-forward agent): `memory` [B, ...] and
    `starts` bool [B] (does the current observation begin an episode).

    The agent resets `memory` itself in the step its env auto-resets (see `reset_memory` in
    `jaxrl_sys.core.networks`), so it is always the state the current observation is read with.
    """

    env_state: PyTree
    obs: jax.Array
    env_ids: jax.Array
    memory: PyTree = None
    starts: Optional[jax.Array] = None


@struct.dataclass
class StepResult:
    """What one vectorised env step returns besides the new state."""

    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    info: dict


def per_env_keys(key: jax.Array, env_ids: jax.Array) -> jax.Array:
    """One key per env, derived from its global id.

    Args:
        key: a PRNG key.
        env_ids: [B] int32 global env ids.

    Returns:
        [B] keys (`key`'s shape with a leading B).
    """
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, env_ids)


def reset_envs(env: Env, key: jax.Array, env_ids: jax.Array) -> VecEnvState:
    """Reset every env in the batch.

    Args:
        env: the env.
        key: a PRNG key, folded with each env's id.
        env_ids: [B] int32 global env ids.

    Returns:
        Env states (leaves [B, ...]), observations [B, ...] and `env_ids`; no memory.
    """
    obs, env_state = jax.vmap(env.reset)(per_env_keys(key, env_ids))
    return VecEnvState(env_state=env_state, obs=obs, env_ids=env_ids)


def step_envs(
    env: Env, state: VecEnvState, actions: jax.Array, key: jax.Array
) -> tuple[VecEnvState, StepResult]:
    """Step every env once (auto-resetting finished episodes).

    Args:
        env: the env.
        state: the envs' state, leaves [B, ...].
        actions: [B, ...] actions (e.g. [B] ints).
        key: a PRNG key, folded with each env's id.

    Returns:
        state: `state` with the new env states and observations (of the next episode where one
            ended).
        result: reward, terminated and truncated [B], and info (leaves [B, ...]).
    """
    obs, env_state, reward, terminated, truncated, info = jax.vmap(env.step)(
        per_env_keys(key, state.env_ids), state.env_state, actions
    )
    return (
        state.replace(env_state=env_state, obs=obs),
        StepResult(reward=reward, terminated=terminated, truncated=truncated, info=info),
    )


def episode_metrics(info: dict, axis_name: Optional[str]) -> Metrics:
    """Sums of finished-episode returns/lengths and their count, summed over devices.

    Sums (not means) so that a driver can combine any number of iterations and devices
    exactly; `mean_return = episode_return_sum / episode_count`.

    Args:
        info: step infos with `episode_done`, `episode_return` and `episode_length`, all of one
            shape (e.g. [B] or [T, B]).
        axis_name: the device axis to sum over, or None.

    Returns:
        `episode_return_sum`, `episode_length_sum` and `episode_count`, float32 scalars.
    """
    done = info["episode_done"].astype(jnp.float32)
    sums = {
        "episode_return_sum": jnp.sum(info["episode_return"] * done),
        "episode_length_sum": jnp.sum(info["episode_length"] * done),
        "episode_count": jnp.sum(done),
    }
    return collectives.psum(sums, axis_name)


def episode_tally(info: dict) -> Metrics:
    """One step's finished episodes per env: `episode_return_sum`, `episode_length_sum` and
    `episode_count`, each [B]. Added up in a rollout's carry and reduced once after it
    (`episode_totals`), so the loop body holds no reduction over the batch.

    Args:
        info: step infos with `episode_done`, `episode_return` and `episode_length` [B].

    Returns:
        The three float32 [B] arrays, zero where no episode ended.
    """
    done = info["episode_done"].astype(jnp.float32)
    return {
        "episode_return_sum": info["episode_return"].astype(jnp.float32) * done,
        "episode_length_sum": info["episode_length"].astype(jnp.float32) * done,
        "episode_count": done,
    }


def empty_tally(num_envs: int) -> Metrics:
    """Zero `episode_tally`s of `num_envs` envs, a rollout's starting carry.

    Args:
        num_envs: B, the envs tallied.

    Returns:
        The three `episode_tally` arrays, float32 zeros [B].
    """
    zeros = jnp.zeros((num_envs,), jnp.float32)
    return {"episode_return_sum": zeros, "episode_length_sum": zeros, "episode_count": zeros}


def episode_totals(tally: Metrics, axis_name: Optional[str]) -> Metrics:
    """`episode_metrics`' float32 scalars from per-env tallies [B] (`episode_tally` summed over
    a rollout), summed over envs and devices.

    Args:
        tally: `episode_tally`'s three arrays [B], summed over the rollout's steps.
        axis_name: the device axis to sum over, or None.

    Returns:
        `episode_return_sum`, `episode_length_sum` and `episode_count`, float32 scalars.
    """
    return collectives.psum(jax.tree.map(jnp.sum, tally), axis_name)


def has_legal_actions(env: Env) -> bool:
    """Whether `env` masks its actions: a discrete action space and `legal_actions` defined
    (a continuous env may define the method and refuse it, as JaxMARL's adapter does).

    Args:
        env: an env.

    Returns:
        True where `legal_actions(env, states)` reads the env's own masks.
    """
    return env.spec.discrete and hasattr(env, "legal_actions")


def legal_actions(env: Env, env_state: PyTree) -> jax.Array:
    """Legal-action masks bool [B, n] of a batch of env states (all True if the env has none).

    Uses `env.legal_actions` (vmapped) where the env defines it; otherwise every one of the
    `spec.action_space.n` actions is legal. Only for discrete action spaces.

    Args:
        env: an env with a `Discrete` action space of n actions.
        env_state: env states, leaves [B, ...].

    Returns:
        bool [B, n] masks.
    """
    space = env.spec.action_space
    if not isinstance(space, Discrete):
        raise TypeError(f"{env.spec.name}: legal actions need a discrete action space")
    if hasattr(env, "legal_actions"):
        return jax.vmap(env.legal_actions)(env_state)
    batch = jax.tree.leaves(env_state)[0].shape[0]
    return jnp.ones((batch, space.n), jnp.bool_)
