"""TD3's and DDPG's deterministic actor; the critics are the continuous-control family's
(`families.continuous_control.Critic`, as twins)."""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import dense
from jaxrl_sys.core.networks import ACTIVATIONS


class DeterministicActor(nn.Module):
    """obs [B, ...] -> actions [B, A] in [-1, 1] (tanh of the last layer)."""

    action_dim: int
    hidden: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = obs.reshape(obs.shape[0], -1)
        for width in self.hidden:
            x = ACTIVATIONS[self.activation](dense(width)(x))
        return jnp.tanh(dense(self.action_dim, 0.01)(x))
