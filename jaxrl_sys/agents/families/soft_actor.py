"""The soft actor of the off-policy actor-critic family (SAC, and CQL on SAC): a Gaussian
squashed by tanh into [-1, 1], its exact log-density, and the actor network giving its mean
and log standard deviation (the critics are `families.continuous_control.Critic`)."""

from __future__ import annotations

import math
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import dense
from jaxrl_sys.core.networks import ACTIVATIONS

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def tanh_log_det_jacobian(u: jax.Array) -> jax.Array:
    """log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), elementwise, exact and finite for
    any u (the naive form is -inf once tanh(u) rounds to 1).

    Args:
        u: pre-squash values, any shape.

    Returns:
        The log-determinants, `u`'s shape.
    """
    return 2.0 * (_LOG_2 - u - jax.nn.softplus(-2.0 * u))


def tanh_gaussian_log_prob(mean: jax.Array, log_std: jax.Array, u: jax.Array) -> jax.Array:
    """Log-density [B] of a = tanh(u), u ~ N(mean, exp(log_std)^2), all inputs [B, A].

    Takes the pre-squash `u` (not `a`): near the bounds `a` rounds to +-1 in float32 while `u`
    keeps the information, so the density stays exact there.

    Args:
        mean: [B, A] the Gaussian's means.
        log_std: [B, A] its log standard deviations.
        u: [B, A] pre-squash values.

    Returns:
        [B] log-densities of tanh(u).
    """
    z = (u - mean) * jnp.exp(-log_std)
    gaussian = -0.5 * z**2 - log_std - 0.5 * _LOG_2PI
    return jnp.sum(gaussian - tanh_log_det_jacobian(u), axis=-1)


def tanh_gaussian_sample(
    mean: jax.Array, log_std: jax.Array, noise: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Reparameterised sample a = tanh(mean + std * noise) in [-1, 1] and its log-density.

    Args:
        mean: [B, A] the Gaussian's means.
        log_std: [B, A] its log standard deviations.
        noise: [B, A] standard normal noise.

    Returns:
        The actions [B, A] and their log-densities [B].
    """
    u = mean + jnp.exp(log_std) * noise
    return jnp.tanh(u), tanh_gaussian_log_prob(mean, log_std, u)


LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0


class Actor(nn.Module):
    """obs [B, ...] -> (mean, log_std) [B, A] of the pre-squash Gaussian; log_std squashed
    into [LOG_STD_MIN, LOG_STD_MAX]."""

    action_dim: int
    hidden: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = obs.reshape(obs.shape[0], -1)
        for width in self.hidden:
            x = ACTIVATIONS[self.activation](dense(width)(x))
        mean = dense(self.action_dim, 0.01)(x)
        log_std = jnp.tanh(dense(self.action_dim, 0.01)(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1.0)
        return mean, log_std
