"""MADDPG's networks: a decentralised actor shared by the team (each agent's one-hot id
appended to its observation), stochastic over discrete actions or deterministic over
continuous ones, and a centralised critic per agent, shared the same way."""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

from jaxrl_sys.agents.families.continuous_control import dense
from jaxrl_sys.agents.families.teams import with_agent_ids
from jaxrl_sys.core.networks import ACTIVATIONS


class TeamActor(nn.Module):
    """Observations [B, N, D] -> each agent's action logits [B, N, A], or (`continuous`) its
    action [B, N, A] in [-1, 1] (tanh of the last layer)."""

    num_actions: int  # or the continuous action's size
    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"
    continuous: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = with_agent_ids(obs.astype(jnp.float32))
        for width in self.hidden:
            x = ACTIVATIONS[self.activation](dense(width)(x))
        out = dense(self.num_actions, scale=0.01)(x)
        return jnp.tanh(out) if self.continuous else out


class CentralCritics(nn.Module):
    """(world state [B, S], each agent's view of the joint action [B, N, N, A]) -> Q [B, N]:
    agent i's critic reads the world state, the joint action in row i (one-hot, relaxed or
    continuous actions of all N agents) and its own id."""

    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"

    @nn.compact
    def __call__(self, world: jax.Array, joints: jax.Array) -> jax.Array:
        batch, agents = joints.shape[:2]
        states = jnp.broadcast_to(world[:, None, :], (batch, agents, world.shape[-1]))
        x = with_agent_ids(jnp.concatenate([states, joints.reshape(batch, agents, -1)], -1))
        for width in self.hidden:
            x = ACTIVATIONS[self.activation](dense(width)(x))
        return dense(1)(x)[..., 0]
