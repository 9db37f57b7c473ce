"""IQL's networks: the offline family's policy and state-value network, and twin Q critics:
one head per action for discrete actions, the continuous-control family's critic on
(observation, action in [-1, 1]) for continuous ones."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import Critic, to_unit_box
from jaxrl_sys.agents.families.offline_networks import (
    ActionValues, PolicyNetwork, ValueNetwork, build_networks,
)
from jaxrl_sys.core.types import Box, EnvSpec


class TwinCritics:
    """Two independently initialised Q critics of one env's actions: `init(key, obs)` and
    `values(params, obs, actions) -> [2, B]` of the taken actions (env units)."""

    def __init__(self, spec: EnvSpec, hidden: tuple[int, ...], activation: str) -> None:
        self.spec = spec
        self.continuous = isinstance(spec.action_space, Box)
        if self.continuous:
            self.module = Critic(hidden, activation)
            self.low = jnp.asarray(spec.action_space.low, jnp.float32)
            self.high = jnp.asarray(spec.action_space.high, jnp.float32)
        else:
            self.module = ActionValues(spec.action_space.n, hidden, activation)

    def init(self, key: jax.Array, obs: jax.Array) -> Any:
        """The twins' parameters, every leaf with a leading axis of 2."""
        keys = jax.random.split(key, 2)
        if self.continuous:
            action = jnp.zeros((1, *self.spec.action_space.shape), jnp.float32)
            return jax.vmap(self.module.init, in_axes=(0, None, None))(keys, obs, action)
        return jax.vmap(self.module.init, in_axes=(0, None))(keys, obs)

    def values(self, params: Any, obs: jax.Array, actions: jax.Array) -> jax.Array:
        """Both critics' Q-values [2, B] of `actions` ([B] ints, or [B, D] in env units)."""
        if self.continuous:
            unit = to_unit_box(actions.reshape(actions.shape[0], -1), self.low, self.high)
            return jax.vmap(self.module.apply, in_axes=(0, None, None))(params, obs, unit)
        q = jax.vmap(self.module.apply, in_axes=(0, None))(params, obs)  # [2, B, A]
        taken = jax.nn.one_hot(actions, q.shape[-1], dtype=q.dtype)
        return jnp.sum(q * taken, axis=-1)


def build(spec: EnvSpec, config) -> tuple[PolicyNetwork, ValueNetwork, TwinCritics]:
    """IQL's policy, value network and twin critics for `spec`."""
    policy, value = build_networks(spec, config)
    return policy, value, TwinCritics(spec, tuple(config.hidden), config.activation)
