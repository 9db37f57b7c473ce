"""The objectives of the policy-gradient family as functions of arrays: PPO's clipped one
(PPO, APPO, MAPPO, IPPO: the clipped policy loss, the value loss, optionally clipped, the
entropy term, their weighted sum, and advantage normalisation) and the unclipped actor-critic
one of A2C and REINFORCE with a baseline (`actor_critic_loss`).

Every array is one flattened minibatch, [N] with N = steps x envs. The targets (advantages and
returns) are `jaxrl_sys.core.returns.gae`'s, computed once per rollout before the epochs, with
PPO's `vtrace=True` V-trace's, computed before every minibatch step, or REINFORCE's
whole-episode returns (`jaxrl_sys.core.returns.episode_returns`).
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jaxrl_sys.core import collectives
from jaxrl_sys.core.types import Metrics

ADVANTAGE_EPSILON = 1e-8


def normalized_advantages(advantages: jax.Array, axis_name: Optional[str]) -> jax.Array:
    """[N] advantages standardised to mean 0 and standard deviation 1, with the statistics
    pooled over the devices of `axis_name`, so every device scales by the global minibatch's.

    Args:
        advantages: [N] advantages.
        axis_name: the device axis to pool the statistics over, or None.

    Returns:
        [N] standardised advantages.
    """
    mean = collectives.pmean(jnp.mean(advantages), axis_name)
    var = collectives.pmean(jnp.mean((advantages - mean) ** 2), axis_name)
    return (advantages - mean) / (jnp.sqrt(var) + ADVANTAGE_EPSILON)


def importance_ratio(log_probs: jax.Array, old_log_probs: jax.Array) -> jax.Array:
    """pi(a|s) / pi_old(a|s), [N], from the log-probabilities of the taken actions [N].

    Args:
        log_probs: [N] log pi(a|s) under the current parameters.
        old_log_probs: [N] log pi_old(a|s) under the acting ones.

    Returns:
        [N] ratios.
    """
    return jnp.exp(log_probs - old_log_probs)


def clipped_policy_loss(ratio: jax.Array, advantages: jax.Array, clip_eps: float) -> jax.Array:
    """The clipped surrogate, negated for descent: -mean(min(r A, clip(r, 1-eps, 1+eps) A)),
    a scalar from ratios and advantages [N]. The ratio stops paying once it has moved the
    action's probability `clip_eps` in the advantage's direction.

    Args:
        ratio: [N] importance ratios pi / pi_old.
        advantages: [N] advantages.
        clip_eps: how far the ratio may move from 1 before it stops paying.

    Returns:
        The scalar loss.
    """
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    return -jnp.mean(jnp.minimum(ratio * advantages, clipped * advantages))


def value_loss(values: jax.Array, returns: jax.Array) -> jax.Array:
    """Half the mean squared error of values [N] against returns [N], a scalar.

    Args:
        values: [N] values under the current parameters.
        returns: [N] value targets.

    Returns:
        The scalar loss.
    """
    return 0.5 * jnp.mean((values - returns) ** 2)


def clipped_value_loss(values: jax.Array, old_values: jax.Array, returns: jax.Array,
                       clip_eps: float) -> jax.Array:
    """`value_loss`, pessimistic over the values [N] and the old values [N] moved at most
    `clip_eps` towards them: 0.5 mean(max((v - R)^2, (v_old + clip(v - v_old) - R)^2)).

    Args:
        values: [N] values under the current parameters.
        old_values: [N] values under the acting ones.
        returns: [N] value targets.
        clip_eps: how far a value may move from its old one.

    Returns:
        The scalar loss.
    """
    value_error = (values - returns) ** 2
    values_clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
    return 0.5 * jnp.mean(jnp.maximum(value_error, (values_clipped - returns) ** 2))


def entropy_term(entropy: jax.Array) -> jax.Array:
    """Mean policy entropy of the minibatch's states [N], a scalar; the loss subtracts
    `ent_coef` times it, so more entropy lowers the loss.

    Args:
        entropy: [N] policy entropies.

    Returns:
        The scalar mean entropy.
    """
    return jnp.mean(entropy)


def approx_kl(ratio: jax.Array, log_probs: jax.Array, old_log_probs: jax.Array) -> jax.Array:
    """KL(pi_old || pi) estimated as mean((r - 1) - log r) over [N] (non-negative per sample);
    a diagnostic, not part of the loss.

    Args:
        ratio: [N] importance ratios pi / pi_old.
        log_probs: [N] log pi(a|s).
        old_log_probs: [N] log pi_old(a|s).

    Returns:
        The scalar estimate.
    """
    return jnp.mean((ratio - 1.0) - (log_probs - old_log_probs))


def ppo_loss(
    log_probs: jax.Array,
    entropy: jax.Array,
    values: jax.Array,
    old_log_probs: jax.Array,
    old_values: jax.Array,
    advantages: jax.Array,
    returns: jax.Array,
    *,
    clip_eps: float,
    vf_coef: float,
    ent_coef: float,
    clip_value: bool,
    normalize_advantages: bool,
    axis_name: Optional[str],
) -> tuple[jax.Array, Metrics]:
    """PPO's loss, policy + vf_coef * value - ent_coef * entropy, and its parts as metrics.

    The first three arrays [N] come from the current parameters, the next two from the
    acting ones; advantages and returns [N] are the rollout's targets.

    Args:
        log_probs: [N] log-probabilities of the taken actions under the current parameters.
        entropy: [N] policy entropies under the current parameters.
        values: [N] values under the current parameters.
        old_log_probs: [N] log-probabilities of the taken actions under the acting parameters.
        old_values: [N] values under the acting parameters.
        advantages: [N] advantages.
        returns: [N] value targets.
        clip_eps: the ratio's (and, with `clip_value`, the value's) clip.
        vf_coef: the value loss's weight.
        ent_coef: the entropy bonus's weight.
        clip_value: whether the value loss is `clipped_value_loss`.
        normalize_advantages: whether advantages are standardised first (`normalized_advantages`).
        axis_name: the device axis the standardisation pools over, or None.

    Returns:
        loss: the scalar loss.
        metrics: scalars `loss`, `policy_loss`, `value_loss`, `entropy` and `approx_kl`.
    """
    if normalize_advantages:
        advantages = normalized_advantages(advantages, axis_name)
    ratio = importance_ratio(log_probs, old_log_probs)
    policy = clipped_policy_loss(ratio, advantages, clip_eps)
    if clip_value:
        value = clipped_value_loss(values, old_values, returns, clip_eps)
    else:
        value = value_loss(values, returns)
    mean_entropy = entropy_term(entropy)
    total = policy + vf_coef * value - ent_coef * mean_entropy
    metrics = dict(loss=total, policy_loss=policy, value_loss=value, entropy=mean_entropy,
                   approx_kl=approx_kl(ratio, log_probs, old_log_probs))
    return total, metrics


def weighted_mean(x: jax.Array, weights: Optional[jax.Array]) -> jax.Array:
    """mean(weights * x) over [N], a scalar; the plain mean when `weights` is None. The
    denominator is N whatever the weights, so every device's term has the same scale and
    their mean over devices is the global minibatch's.

    Args:
        x: [N] values.
        weights: [N] weights (1 where a step counts, 0 where it does not), or None.

    Returns:
        The scalar mean.
    """
    return jnp.mean(x if weights is None else weights * x)


def policy_gradient_loss(log_probs: jax.Array, advantages: jax.Array,
                         weights: Optional[jax.Array] = None) -> jax.Array:
    """The score-function surrogate, negated for descent: -mean(w log pi(a|s) A), a scalar
    from log-probabilities and advantages [N]. Its gradient is the policy gradient estimate
    -mean(w A grad log pi(a|s)) of A2C and REINFORCE; it equals the clipped surrogate's
    gradient on the data's own policy (every ratio 1; tested).

    Args:
        log_probs: [N] log pi(a|s) under the current parameters.
        advantages: [N] advantages (held fixed).
        weights: [N] weights, or None for all ones.

    Returns:
        The scalar loss.
    """
    return -weighted_mean(log_probs * jax.lax.stop_gradient(advantages), weights)


def actor_critic_loss(
    log_probs: jax.Array,
    entropy: jax.Array,
    values: jax.Array,
    advantages: jax.Array,
    returns: jax.Array,
    weights: Optional[jax.Array] = None,
    *,
    vf_coef: float,
    ent_coef: float,
    normalize_advantages: bool,
    axis_name: Optional[str],
) -> tuple[jax.Array, Metrics]:
    """A2C's and REINFORCE-with-baseline's loss, policy + vf_coef * value - ent_coef *
    entropy, with the unclipped `policy_gradient_loss`; each term a `weighted_mean` over the
    minibatch, so steps of weight 0 (REINFORCE's steps whose episode runs past the rollout)
    add nothing.

    Args:
        log_probs: [N] log-probabilities of the taken actions under the current parameters.
        entropy: [N] policy entropies under the current parameters.
        values: [N] values under the current parameters.
        advantages: [N] advantages.
        returns: [N] value targets.
        weights: [N] weights, or None for all ones.
        vf_coef: the value loss's weight.
        ent_coef: the entropy bonus's weight.
        normalize_advantages: whether advantages are standardised first
            (`normalized_advantages`; with weights, over the weighted steps).
        axis_name: the device axis the standardisation pools over, or None.

    Returns:
        loss: the scalar loss.
        metrics: scalars `loss`, `policy_loss`, `value_loss` and `entropy`.
    """
    if normalize_advantages:
        advantages = weighted_normalized_advantages(advantages, weights, axis_name)
    policy = policy_gradient_loss(log_probs, advantages, weights)
    value = 0.5 * weighted_mean((values - returns) ** 2, weights)
    mean_entropy = weighted_mean(entropy, weights)
    total = policy + vf_coef * value - ent_coef * mean_entropy
    metrics = dict(loss=total, policy_loss=policy, value_loss=value, entropy=mean_entropy)
    return total, metrics


def weighted_normalized_advantages(advantages: jax.Array, weights: Optional[jax.Array],
                                   axis_name: Optional[str]) -> jax.Array:
    """`normalized_advantages` over the steps of weight 1 only (all of them when `weights` is
    None), pooled over the devices of `axis_name`.

    Args:
        advantages: [N] advantages.
        weights: [N] 0/1 weights, or None.
        axis_name: the device axis to pool the statistics over, or None.

    Returns:
        [N] standardised advantages (any value where the weight is 0).
    """
    if weights is None:
        return normalized_advantages(advantages, axis_name)
    count = jnp.maximum(collectives.pmean(jnp.sum(weights), axis_name), ADVANTAGE_EPSILON)
    mean = collectives.pmean(jnp.sum(weights * advantages), axis_name) / count
    var = collectives.pmean(jnp.sum(weights * (advantages - mean) ** 2), axis_name) / count
    return (advantages - mean) / (jnp.sqrt(var) + ADVANTAGE_EPSILON)
