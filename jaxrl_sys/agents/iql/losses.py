"""IQL's maths (Kostrikov et al. 2022, "Offline Reinforcement Learning with Implicit
Q-Learning"): V regresses on an upper expectile of the target critics' Q over the data's
actions, so it never queries an action outside the data; the critics regress on
r + gamma * V(s'); the policy is extracted by advantage-weighted regression."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def expectile_loss(diff: jax.Array, expectile: float) -> jax.Array:
    """The asymmetric squared loss |tau - 1(diff < 0)| * diff^2, averaged.

    Args:
        diff: [B] target minus prediction (Q(s, a) - V(s) for IQL's value).
        expectile: tau in (0, 1); 0.5 is the mean squared error halved.

    Returns:
        The mean loss (a scalar).
    """
    weight = jnp.where(diff < 0, 1.0 - expectile, expectile)
    return jnp.mean(weight * jnp.square(diff))


def critic_targets(rewards: jax.Array, terminated: jax.Array, next_values: jax.Array,
                   gamma: float) -> jax.Array:
    """r + gamma * (1 - terminated) * V(s'): a truncated step bootstraps, a terminated one not.

    Args:
        rewards: [B] rewards.
        terminated: [B] bool.
        next_values: [B] V of the next observations.
        gamma: the discount.

    Returns:
        [B] targets (no gradient flows through them).
    """
    return jax.lax.stop_gradient(rewards + gamma * (1.0 - terminated) * next_values)


def twin_critic_loss(q_values: jax.Array, targets: jax.Array) -> jax.Array:
    """Both critics' mean squared error to the targets, summed over the twins.

    Args:
        q_values: [2, B] the critics' Q of the data's actions.
        targets: [B] targets.

    Returns:
        The loss (a scalar).
    """
    return jnp.sum(jnp.mean(jnp.square(q_values - targets[None]), axis=-1))


def awr_policy_loss(log_probs: jax.Array, advantages: jax.Array, temperature: float,
                    max_weight: float) -> tuple[jax.Array, jax.Array]:
    """Advantage-weighted regression: -E[min(exp(beta * A), max_weight) * log pi(a|s)].

    Args:
        log_probs: [B] the policy's log-likelihood of the data's actions.
        advantages: [B] Q(s, a) - V(s) (no gradient flows through them).
        temperature: beta; 0 is behaviour cloning.
        max_weight: the largest weight one row may get.

    Returns:
        The loss and the weights [B].
    """
    weights = jnp.minimum(jnp.exp(temperature * jax.lax.stop_gradient(advantages)), max_weight)
    return -jnp.mean(weights * log_probs), weights
