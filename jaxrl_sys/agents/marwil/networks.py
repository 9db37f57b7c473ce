"""MARWIL's networks: a policy (logits for discrete actions; a mean and a state-independent
log standard deviation for continuous ones) and a value network, separate MLPs."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.core.networks import MLP, Head
from jaxrl_sys.core.types import Box, EnvSpec


class PolicyNetwork(nn.Module):
    """Logits [B, A] and an empty log std, or a Gaussian's mean [B, D] and log standard
    deviation [D], for observations [B, ...]."""

    action_size: int
    hidden: tuple[int, ...]
    activation: str
    continuous: bool

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = MLP(self.hidden, self.activation)(obs.astype(jnp.float32))
        out = Head(self.action_size, scale=0.01)(x)
        log_std = self.param("log_std", nn.initializers.zeros, (self.action_size,))
        return out, log_std if self.continuous else jnp.zeros((0,))


class ValueNetwork(nn.Module):
    """State values [B] for observations [B, ...]."""

    hidden: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = MLP(self.hidden, self.activation)(obs.astype(jnp.float32))
        return Head(1)(x)[:, 0]


def build_networks(spec: EnvSpec, config) -> tuple[PolicyNetwork, ValueNetwork]:
    """The policy and value networks `config` asks for on `spec`."""
    continuous = isinstance(spec.action_space, Box)
    size = (int(jnp.prod(jnp.asarray(spec.action_space.shape))) if continuous
            else spec.action_space.n)
    return (PolicyNetwork(size, tuple(config.hidden), config.activation, continuous),
            ValueNetwork(tuple(config.hidden), config.activation))
