"""ES's policy: a deterministic network (an MLP, or with no hidden layers ARS's linear map)
from observations to actions: the argmax of its outputs for discrete actions, their tanh
mapped onto the env's box for continuous ones."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import to_env_units
from jaxrl_sys.core.networks import MLP, orthogonal
from jaxrl_sys.core.types import EnvSpec


class Policy(nn.Module):
    """Outputs [B, n] for observations [B, ...]: one per discrete action, or one per action
    dimension (in [-1, 1] after the tanh)."""

    outputs: int
    hidden: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = MLP(self.hidden, self.activation)(obs)
        return nn.Dense(self.outputs, kernel_init=orthogonal(0.01))(x)


def build_network(spec: EnvSpec, config: Any) -> Policy:
    """The policy network for `spec`'s observations and actions."""
    action_space = spec.action_space
    outputs = action_space.n if spec.discrete else action_space.shape[0]
    return Policy(outputs, tuple(config.hidden), config.activation)


def policy_actions(network: Policy, spec: EnvSpec, params: Any, obs: jax.Array) -> jax.Array:
    """Env actions [B] (discrete) or [B, A] (in the box) of the policy `params` for
    observations [B, ...] (already normalised where the config normalises them)."""
    out = network.apply(params, obs)
    if spec.discrete:
        return jnp.argmax(out, axis=-1).astype(jnp.int32)
    box = spec.action_space
    return to_env_units(jnp.tanh(out), jnp.asarray(box.low), jnp.asarray(box.high))


def member_actions(network: Policy, spec: EnvSpec, params: Any, obs: jax.Array) -> jax.Array:
    """Actions [B, ...] when each env plays its own member: `params` leaves [B, ...], one
    parameter set per env, for observations [B, ...]."""
    one = lambda p, o: policy_actions(network, spec, p, o[None])[0]  # noqa: E731
    return jax.vmap(one)(params, obs)
