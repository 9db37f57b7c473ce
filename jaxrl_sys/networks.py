"""Small Flax networks shared by the agents."""

from __future__ import annotations

from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
}


def orthogonal(scale: float) -> nn.initializers.Initializer:
    """Orthogonal initialiser with gain `scale` (the usual choice for policy-gradient MLPs)."""
    return nn.initializers.orthogonal(scale)


class MLP(nn.Module):
    """Fully connected torso; flattens everything after the batch dimension."""

    hidden: Sequence[int]
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.reshape(x.shape[0], -1)
        act = ACTIVATIONS[self.activation]
        for width in self.hidden:
            x = act(nn.Dense(width, kernel_init=orthogonal(np.sqrt(2.0)))(x))
        return x


class Head(nn.Module):
    """A linear output layer with a chosen orthogonal gain."""

    features: int
    scale: float = 1.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(
            self.features, kernel_init=orthogonal(self.scale), bias_init=nn.initializers.zeros
        )(x)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs.

    Discrete: returns (logits, value). Continuous: returns ((mean, log_std), value) with a
    state-independent log standard deviation, as is standard for PPO.
    """

    action_dim: int
    discrete: bool
    hidden: Sequence[int] = (64, 64)
    activation: str = "tanh"

    def setup(self) -> None:
        self.actor_torso = MLP(self.hidden, self.activation)
        self.actor_head = Head(self.action_dim, scale=0.01)
        self.critic_torso = MLP(self.hidden, self.activation)
        self.critic_head = Head(1, scale=1.0)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))

    def value(self, obs: jax.Array) -> jax.Array:
        """State value V(obs), shape [batch]."""
        return self.critic_head(self.critic_torso(obs))[:, 0]

    def policy(self, obs: jax.Array):
        """Policy parameters: logits, or (mean, log_std) broadcast to the batch."""
        out = self.actor_head(self.actor_torso(obs))
        if self.discrete:
            return out
        return out, jnp.broadcast_to(self.log_std, out.shape)

    def __call__(self, obs: jax.Array):
        return self.policy(obs), self.value(obs)
