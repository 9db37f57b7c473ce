"""MARWIL's maths (Wang et al. 2018, "Exponentially Weighted Imitation Learning for Batched
Historical Data"): the value network regresses on the data's discounted returns-to-go, and the
policy maximises the log-likelihood of the data's actions weighted by exp(beta * A / c),
A = return - value, c the root of a moving average of A^2. With beta 0 every weight is 1:
behaviour cloning."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.offline_networks import action_log_probs
from jaxrl_sys.core.types import Metrics


def advantage_weights(advantages: jax.Array, adv_norm_sq: jax.Array, beta: float,
                      max_weight: float) -> jax.Array:
    """MARWIL's exponential weights min(exp(beta * A / c), max_weight), c = sqrt(c^2).

    Args:
        advantages: [B] returns-to-go minus values (no gradient flows through them).
        adv_norm_sq: the moving average c^2 of the squared advantage (a scalar).
        beta: the inverse temperature; 0 gives weight 1 everywhere (behaviour cloning).
        max_weight: the largest weight one row may get.

    Returns:
        [B] weights.
    """
    scaled = beta * jax.lax.stop_gradient(advantages) / (jnp.sqrt(adv_norm_sq) + 1e-8)
    return jnp.minimum(jnp.exp(scaled), max_weight)


def updated_adv_norm(adv_norm_sq: jax.Array, batch_mean_sq: jax.Array,
                     rate: float) -> jax.Array:
    """c^2 moved towards the batch's mean squared advantage by `rate`.

    Args:
        adv_norm_sq: the moving average so far (a scalar).
        batch_mean_sq: the batch's mean squared advantage (a scalar).
        rate: the moving average's update rate, in [0, 1].

    Returns:
        The new moving average (a scalar).
    """
    return adv_norm_sq + rate * (batch_mean_sq - adv_norm_sq)


def marwil_loss(policy_fn: Callable, value_fn: Callable, params: Any, batch: Any,
                adv_norm_sq: jax.Array, beta: float, value_loss_weight: float,
                max_weight: float, continuous: bool) -> tuple[jax.Array, tuple[Metrics, jax.Array]]:
    """-E[w * log pi(a|s)] + value_loss_weight * 0.5 * E[(G - V(s))^2] over a batch.

    Args:
        policy_fn: `policy_fn(params["policy"], obs) -> (out, log_std)`.
        value_fn: `value_fn(params["value"], obs) -> values [B]`.
        params: {"policy": ..., "value": ...}.
        batch: rows with `obs` [B, ...], `actions` [B, ...] and `returns` [B] (discounted
            returns-to-go of the data).
        adv_norm_sq: c^2, the moving average of the squared advantage.
        beta: MARWIL's beta (0: behaviour cloning, and the value is not trained).
        value_loss_weight: the value loss's weight.
        max_weight: the clip of the exponential weights.
        continuous: whether the actions are continuous.

    Returns:
        The loss, and (metrics, the batch's advantages [B]).
    """
    out, log_std = policy_fn(params["policy"], batch.obs)
    log_probs = action_log_probs(out, log_std, batch.actions, continuous)
    values = value_fn(params["value"], batch.obs)
    advantages = batch.returns - values
    weights = advantage_weights(advantages, adv_norm_sq, beta, max_weight)
    policy_loss = -jnp.mean(weights * log_probs)
    value_loss = 0.5 * jnp.mean(jnp.square(advantages))
    use_value = value_loss_weight * (beta > 0)
    loss = policy_loss + use_value * value_loss
    metrics = {"policy_loss": policy_loss, "value_loss": value_loss,
               "log_likelihood": jnp.mean(log_probs), "weight_mean": jnp.mean(weights)}
    return loss, (metrics, advantages)
