"""CQL's Q-network for discrete actions: an MLP with one output per action (for continuous
actions CQL runs on SAC's actor and critics, continuous.py)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.core.networks import MLP, Head
from jaxrl_sys.core.types import EnvSpec


class QNetwork(nn.Module):
    """Q-values [B, A] for observations [B, ...]."""

    num_actions: int
    hidden: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return Head(self.num_actions)(MLP(self.hidden, self.activation)(obs.astype(jnp.float32)))


def build_network(spec: EnvSpec, config) -> QNetwork:
    """The Q-network for `spec`'s discrete actions (continuous ones: continuous.py)."""
    return QNetwork(spec.action_space.n, tuple(config.hidden), config.activation)
