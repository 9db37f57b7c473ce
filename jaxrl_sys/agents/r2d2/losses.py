"""R2D2's targets and loss as pure functions of replayed sequences.

A replayed item is `burn_in + seq_length` stored steps with the recurrent state before its
first step (`Batch`, [B, L, ...]). Both networks replay it from that state; the burn-in steps
only warm the state (`networks.unroll`), and the loss is on the remaining steps. Each step's
target is its n-step return inside the sequence (`core.returns.n_step_sequence_targets`),
bootstrapped from the value of the step's next observation (`networks.next_q`) with double
Q-learning: the online network picks the action, the target network values it.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.r2d2.networks import RecurrentQNetwork, next_q, unroll
from jaxrl_sys.core.returns import n_step_sequence_targets


@struct.dataclass
class Batch:
    """Sampled replay items, batch-major [B, L, ...] (L = burn_in + seq_length): each step's
    observation, action, reward, end flags, next observation (pre-reset `final_observation`)
    and whether it begins an episode; the state before the first step [B, ...]; importance
    weights [B] (ones without prioritisation)."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    starts: jax.Array
    memory: Any
    weights: jax.Array

    @classmethod
    def from_items(cls, items: dict, weights: jax.Array) -> Batch:
        """The batch of gathered replay `items` (a dict with a key per field).

        Args:
            items: field name -> leaves [B, L, ...] (`memory` [B, ...]).
            weights: [B] importance weights.

        Returns:
            The batch.
        """
        return cls(**items, weights=weights)


def time_major(x: jax.Array) -> jax.Array:
    """[B, L, ...] as [L, B, ...].

    Args:
        x: [B, L, ...].

    Returns:
        [L, B, ...].
    """
    return jnp.swapaxes(x, 0, 1)


def taken_q(q: jax.Array, actions: jax.Array) -> jax.Array:
    """Q-values [...] of int `actions` [...] in `q` [..., A].

    Args:
        q: [..., A] Q-values.
        actions: [...] int actions.

    Returns:
        [...] Q-values.
    """
    return jnp.take_along_axis(q, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]


def sequence_q_targets(q_target_next: jax.Array, q_online_next: Optional[jax.Array],
                       rewards: jax.Array, terminated: jax.Array, truncated: jax.Array,
                       n_step: int, gamma: float) -> jax.Array:
    """n-step targets [T, B] of the steps [T, B] of sequences, from the Q-values [T, B, A] of
    each step's next observation: the target network's at the action the online network ranks
    best (double Q), or at its own best when `q_online_next` is None. No gradient flows
    through them.

    Args:
        q_target_next: [T, B, A] the target network's Q-values of each step's next observation.
        q_online_next: [T, B, A] the online network's, or None.
        rewards: [T, B] rewards.
        terminated: bool [T, B].
        truncated: bool [T, B].
        n_step: the horizon.
        gamma: the discount.

    Returns:
        [T, B] targets.
    """
    chooser = q_target_next if q_online_next is None else q_online_next
    next_values = taken_q(q_target_next, jnp.argmax(chooser, axis=-1))
    targets = n_step_sequence_targets(rewards, next_values, terminated, truncated, n_step, gamma)
    return jax.lax.stop_gradient(targets)


def sequence_priorities(td_error: jax.Array, eta: float) -> jax.Array:
    """R2D2's priority [B] of sequences from their TD errors [T, B]:
    eta * max |TD| + (1 - eta) * mean |TD|.

    Args:
        td_error: [T, B] TD errors.
        eta: the weight of the maximum.

    Returns:
        [B] priorities.
    """
    size = jnp.abs(td_error)
    return eta * jnp.max(size, axis=0) + (1.0 - eta) * jnp.mean(size, axis=0)


def r2d2_loss(params: Any, target_params: Any, batch: Batch, *, network: RecurrentQNetwork,
              burn_in: int, n_step: int, gamma: float, double_q: bool, huber_delta: float
              ) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """The weighted mean Huber loss [] over the learned steps of sequences [B, L, ...], with
    (TD errors [T, B] of those steps, mean taken Q []). Differentiate with respect to `params`
    (the online network); the target network only values next observations.

    Args:
        params: the online network's parameters.
        target_params: the target network's parameters.
        batch: sequences [B, L, ...] of L = burn_in + T steps, importance weights [B].
        network: the recurrent Q-network.
        burn_in: the steps that only warm the recurrent state.
        n_step: the targets' horizon.
        gamma: the discount.
        double_q: whether the online network picks the next actions.
        huber_delta: the Huber loss's delta.

    Returns:
        loss: the scalar loss.
        aux: (TD errors [T, B], scalar mean Q-value of the taken actions).
    """
    obs, starts = time_major(batch.obs), time_major(batch.starts)
    q, carries = unroll(network, params, batch.memory, obs, starts, burn_in)
    _, target_carries = unroll(network, target_params, batch.memory, obs, starts, burn_in)
    learned = lambda x: time_major(x)[burn_in:]  # noqa: E731
    final_obs = learned(batch.final_obs)
    q_target_next = next_q(network, target_params, target_carries, final_obs)
    q_online_next = None
    if double_q:
        q_online_next = next_q(network, jax.lax.stop_gradient(params),
                               jax.lax.stop_gradient(carries), final_obs)
    targets = sequence_q_targets(q_target_next, q_online_next, learned(batch.reward),
                                 learned(batch.terminated), learned(batch.truncated), n_step,
                                 gamma)
    q_taken = taken_q(q, learned(batch.action))
    td_error = q_taken - targets
    huber = optax.huber_loss(td_error, delta=huber_delta)
    return jnp.mean(batch.weights[None, :] * huber), (td_error, jnp.mean(q_taken))
