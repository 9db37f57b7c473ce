"""SAC's networks: the actor (mean and log-std of the pre-squash Gaussian) and the critic,
used as twins whose parameters carry a leading axis of 2."""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.core.networks import ACTIVATIONS

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0


def _dense(features: int, scale: float = 1.0) -> nn.Dense:
    """A dense layer with lecun-normal weights times `scale` (no QR: safe under vmap on CPU)."""
    init = nn.initializers.variance_scaling(scale, "fan_in", "normal")
    return nn.Dense(features, kernel_init=init)


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
            x = ACTIVATIONS[self.activation](_dense(width)(x))
        mean = _dense(self.action_dim, 0.01)(x)
        log_std = jnp.tanh(_dense(self.action_dim, 0.01)(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1.0)
        return mean, log_std


class Critic(nn.Module):
    """(obs [B, ...], action [B, A] in [-1, 1]) -> Q [B]."""

    hidden: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([obs.reshape(obs.shape[0], -1), action], axis=-1)
        for width in self.hidden:
            x = ACTIVATIONS[self.activation](_dense(width)(x))
        return _dense(1)(x)[:, 0]


def init_twin_critics(critic: Critic, key: jax.Array, obs: jax.Array, action_dim: int) -> Any:
    """Two independently initialised critics, every leaf with a leading axis of 2; `obs`
    [1, ...] is an example observation."""
    return jax.vmap(critic.init, in_axes=(0, None, None))(
        jax.random.split(key, 2), obs, jnp.zeros((1, action_dim), jnp.float32)
    )


def twin_q_values(critic: Critic, params: Any, obs: jax.Array, action: jax.Array) -> jax.Array:
    """Q-values [2, B] of the twin critics `params` for obs [B, ...] and actions [B, A] in
    [-1, 1]."""
    return jax.vmap(critic.apply, in_axes=(0, None, None))(params, obs, action)
