"""SAC's actor (mean and log-std of the pre-squash Gaussian); its twin critics are the
continuous-control family's (`families.continuous_control.Critic`)."""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import dense
from jaxrl_sys.core.networks import ACTIVATIONS

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
