"""Log-probabilities, entropies and sampling for the policies the agents use."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

_LOG_2PI = math.log(2.0 * math.pi)


def categorical_sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    """Samples actions of a categorical policy.

    Args:
        key: a PRNG key.
        logits: [..., A] unnormalised log-probabilities of A actions.

    Returns:
        [...] int32 actions.
    """
    return jax.random.categorical(key, logits)


def categorical_log_prob(logits: jax.Array, actions: jax.Array) -> jax.Array:
    """Log-probabilities of `actions` under a categorical policy.

    Args:
        logits: [..., A] unnormalised log-probabilities of A actions.
        actions: [...] integer actions.

    Returns:
        [...] log-probabilities.
    """
    log_probs = jax.nn.log_softmax(logits)
    # a masked sum, not a gather: it fuses with the softmax (and its gradient is a select,
    # not a scatter-add) and gives the same bits, masked-out -inf entries included
    taken = actions[..., None].astype(jnp.int32) == jnp.arange(logits.shape[-1])
    return jnp.sum(jnp.where(taken, log_probs, 0.0), axis=-1)


def categorical_entropy(logits: jax.Array) -> jax.Array:
    """Entropy of a categorical policy.

    Args:
        logits: [..., A] unnormalised log-probabilities of A actions.

    Returns:
        [...] entropies.
    """
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)


def gaussian_sample(key: jax.Array, mean: jax.Array, log_std: jax.Array) -> jax.Array:
    """Samples actions of a diagonal Gaussian policy.

    Args:
        key: a PRNG key.
        mean: [..., D] means of D action dimensions.
        log_std: log standard deviations, any shape that broadcasts with `mean` (e.g. [D]).

    Returns:
        [..., D] actions, `mean`'s shape and dtype.
    """
    return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)


def gaussian_log_prob(mean: jax.Array, log_std: jax.Array, actions: jax.Array) -> jax.Array:
    """Log-density of a diagonal Gaussian, summed over action dimensions.

    Args:
        mean: [..., D] means of D action dimensions.
        log_std: log standard deviations, broadcast with `mean` (e.g. [D] or [..., D]).
        actions: [..., D] actions.

    Returns:
        [...] log-densities.
    """
    z = (actions - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z**2 - log_std - 0.5 * _LOG_2PI, axis=-1)


def gaussian_entropy(log_std: jax.Array) -> jax.Array:
    """Entropy of a diagonal Gaussian, summed over action dimensions.

    Args:
        log_std: [..., D] log standard deviations of D action dimensions.

    Returns:
        [...] entropies.
    """
    return jnp.sum(log_std + 0.5 * (_LOG_2PI + 1.0), axis=-1)
