"""The soft actor-critic losses the off-policy actor-critic family shares (SAC, and CQL on
SAC): the critics' soft target and loss, the actor's loss and the temperature's loss, on
arrays (what the unit tests check)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def soft_target(
    reward: jax.Array, terminated: jax.Array, next_q: jax.Array, next_log_prob: jax.Array,
    alpha: jax.Array, gamma: float, reward_scale: float,
) -> jax.Array:
    """The critics' soft target [B]: r * reward_scale + gamma * (min of the target twins'
    `next_q` [2, B] - alpha * log pi(a'|s')), not bootstrapped after termination.

    A truncated step is stored with terminated False and its pre-reset next observation, so
    it bootstraps. reward, terminated, next_log_prob: [B]. No gradient flows through it.

    Args:
        reward: [B] rewards.
        terminated: bool [B].
        next_q: [2, B] the target twins' Q-values at the next states and sampled next actions.
        next_log_prob: [B] log pi(a'|s') of those actions.
        alpha: scalar temperature.
        gamma: the discount.
        reward_scale: the rewards' factor.

    Returns:
        [B] float32 targets.
    """
    next_q = jnp.min(next_q, axis=0)
    not_terminated = 1.0 - terminated.astype(jnp.float32)
    target = reward.astype(jnp.float32) * reward_scale + (
        gamma * not_terminated * (next_q - alpha * next_log_prob)
    )
    return jax.lax.stop_gradient(target)


def critic_loss(q: jax.Array, target: jax.Array) -> jax.Array:
    """Twin-critic loss: half the squared error of each critic's Q [2, B] against the shared
    target [B], summed over the twins and averaged over the batch.

    Args:
        q: [2, B] each twin's Q-values of the batch's actions.
        target: [B] soft targets.

    Returns:
        The scalar loss.
    """
    return 0.5 * jnp.mean(jnp.sum((q - target) ** 2, axis=0))


def actor_loss(log_prob: jax.Array, q: jax.Array, alpha: jax.Array) -> jax.Array:
    """Actor loss: mean of alpha * log pi(a|s) [B] - min of the twins' Q(s, a) [2, B], for
    actions a freshly sampled from the policy.

    Args:
        log_prob: [B] log pi(a|s) of freshly sampled actions.
        q: [2, B] the twins' Q-values of those actions.
        alpha: scalar temperature.

    Returns:
        The scalar loss.
    """
    q_pi = jnp.min(q, axis=0)
    return jnp.mean(alpha * log_prob - q_pi)


def alpha_loss(log_alpha: jax.Array, log_prob: jax.Array, target_entropy: float) -> jax.Array:
    """Temperature loss: -log_alpha * mean(log pi + target_entropy) over log_prob [B]; its
    gradient raises alpha while the policy's entropy is below `target_entropy`.

    Args:
        log_alpha: scalar log temperature.
        log_prob: [B] log pi(a|s) of freshly sampled actions.
        target_entropy: the entropy the temperature aims at.

    Returns:
        The scalar loss.
    """
    entropy_gap = jnp.mean(jax.lax.stop_gradient(log_prob) + target_entropy)
    return -log_alpha * entropy_gap
