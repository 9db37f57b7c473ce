"""SAC's policy distribution: a Gaussian squashed by tanh into [-1, 1], its exact
log-density, and the temporally correlated noise that can drive its exploration."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def tanh_log_det_jacobian(u: jax.Array) -> jax.Array:
    """log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), elementwise, exact and finite for
    any u (the naive form is -inf once tanh(u) rounds to 1)."""
    return 2.0 * (_LOG_2 - u - jax.nn.softplus(-2.0 * u))


def tanh_gaussian_log_prob(mean: jax.Array, log_std: jax.Array, u: jax.Array) -> jax.Array:
    """Log-density [B] of a = tanh(u), u ~ N(mean, exp(log_std)^2), all inputs [B, A].

    Takes the pre-squash `u` (not `a`): near the bounds `a` rounds to +-1 in float32 while `u`
    keeps the information, so the density stays exact there.
    """
    z = (u - mean) * jnp.exp(-log_std)
    gaussian = -0.5 * z**2 - log_std - 0.5 * _LOG_2PI
    return jnp.sum(gaussian - tanh_log_det_jacobian(u), axis=-1)


def tanh_gaussian_sample(
    mean: jax.Array, log_std: jax.Array, noise: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Reparameterised sample a = tanh(mean + std * noise) [B, A] in [-1, 1] and its
    log-density [B]; `noise` [B, A] is standard normal."""
    u = mean + jnp.exp(log_std) * noise
    return jnp.tanh(u), tanh_gaussian_log_prob(mean, log_std, u)
