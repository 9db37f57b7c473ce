"""R2D2's recurrent Q-network and the ways the agent reads it: acting one step at a time,
unrolling stored sequences, and valuing each step's next observation from the state the
step left behind."""

from __future__ import annotations

import math
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.networks import MLP, Head, SequenceMemory, check_torso_fits, make_torso
from jaxrl_sys.core.types import Discrete, EnvSpec, PyTree


class RecurrentQNetwork(nn.Module):
    """Q-values of time-major sequences: the observation torso, a GRU or LSTM `memory` of
    `memory_size` units, one `hidden[-1]`-wide layer and a Q head (plain or dueling).

    `__call__(memory [B, ...], obs [T, B, ...], starts [T, B])` -> (memory after the last step,
    Q-values [T, B, A], the memory after each step [T, B, ...]). The state is reset to zeros
    before every step whose `starts` is True, so no output depends on an earlier episode.
    """

    num_actions: int
    hidden: Sequence[int] = (64,)
    activation: str = "relu"
    torso: str = "mlp"
    memory: str = "gru"
    memory_size: int = 64
    dueling: bool = False

    @nn.compact
    def __call__(self, memory: PyTree, obs: jax.Array, starts: jax.Array):
        steps, batch = obs.shape[:2]
        features = make_torso(self.torso, self.hidden, self.activation)(
            obs.reshape(steps * batch, *obs.shape[2:]))
        memory, (carries, outputs) = SequenceMemory(self.memory, self.memory_size)(
            memory, (features.reshape(steps, batch, -1), starts))
        x = MLP((self.hidden[-1],), self.activation)(outputs.reshape(steps * batch, -1))
        q = Head(self.num_actions)(x)
        if self.dueling:
            q = Head(1)(x) + q - q.mean(axis=-1, keepdims=True)
        return memory, q.reshape(steps, batch, -1), carries


def build_network(spec: EnvSpec, config: Any) -> RecurrentQNetwork:
    """The network `config` asks for on `spec`'s observations and actions; ConfigError for
    continuous actions or a conv torso on observations it cannot take."""
    if not isinstance(spec.action_space, Discrete):
        raise ConfigError(f"r2d2 needs discrete actions; {spec.name} has continuous actions")
    check_torso_fits(config.torso, spec.obs_shape, spec.name)
    return RecurrentQNetwork(spec.action_space.n, tuple(config.hidden), config.activation,
                             config.torso, config.memory, config.memory_size, config.dueling)


def step_q(network: RecurrentQNetwork, params: Any, memory: PyTree, obs: jax.Array,
           starts: jax.Array) -> tuple[PyTree, jax.Array]:
    """One acting step on observations [B, ...]: (memory after it, Q-values [B, A]); rows
    whose `starts` [B] is True begin an episode and are reset first."""
    memory, q, _ = network.apply(params, memory, obs[None], starts[None])
    return memory, q[0]


def next_q(network: RecurrentQNetwork, params: Any, carries: PyTree, obs: jax.Array) -> jax.Array:
    """Q-values [..., A] of observations [..., obs...] that continue the episodes held by
    `carries` [..., memory] (leading axes alike, e.g. [T, B]), one step with no reset: the
    value of each step's next observation (its pre-reset `final_observation`) from the state
    that step left behind."""
    lead = jax.tree.leaves(carries)[0].shape[:-1]
    rows = math.prod(lead)
    flat_carries = jax.tree.map(lambda c: c.reshape(rows, -1), carries)
    flat_obs = obs.reshape(rows, *obs.shape[len(lead):])
    _, q, _ = network.apply(params, flat_carries, flat_obs[None],
                            jnp.zeros((1, rows), jnp.bool_))
    return q[0].reshape(*lead, -1)


def unroll(network: RecurrentQNetwork, params: Any, memory: PyTree, obs: jax.Array,
           starts: jax.Array, burn_in: int) -> tuple[jax.Array, PyTree]:
    """Replay sequences [L, B, ...] from their stored state `memory` [B, ...]: the first
    `burn_in` steps only warm the state (no gradient flows back into them or into the stored
    state), then (Q-values [L - burn_in, B, A], memory after each of those steps)."""
    if burn_in:
        memory, _, _ = network.apply(params, memory, obs[:burn_in], starts[:burn_in])
    memory = jax.lax.stop_gradient(memory)
    _, q, carries = network.apply(params, memory, obs[burn_in:], starts[burn_in:])
    return q, carries
