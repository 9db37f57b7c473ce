"""The agents' shared Q-network (one set of parameters for every agent, told apart by a
one-hot agent id appended to its observation), QMIX's monotonic mixer, and the ways the agent
reads them.

Rows are (env, agent) pairs: team observations [T, B, N, D] are read by the network as
[T, B * N, D + N]. The mixer turns the agents' chosen Q-values [..., N] into the team's
Q_tot [...] with weights that a hypernetwork computes from the world state and that are kept
non-negative (`abs`), so dQ_tot/dQ_a >= 0 (Rashid et al. 2018); VDN's mix is the sum.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.teams import with_agent_ids
from jaxrl_sys.core.networks import MLP, Head, SequenceMemory, initial_memory, orthogonal
from jaxrl_sys.core.types import PyTree


class TeamQNetwork(nn.Module):
    """Q-values of time-major rows: the torso MLP `hidden`, then (`memory` "gru"/"lstm") a
    recurrent core of `memory_size` units, then a linear Q head.

    `__call__(memory [R, ...] or None, inputs [T, R, D], starts [T, R])` -> (memory after the
    last step, Q-values [T, R, A], the memory after each step [T, R, ...] or None)."""

    num_actions: int
    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"
    memory: str = "none"
    memory_size: int = 64

    @nn.compact
    def __call__(self, memory: PyTree, inputs: jax.Array, starts: jax.Array):
        steps, rows = inputs.shape[:2]
        x = MLP(tuple(self.hidden), self.activation)(inputs.reshape(steps * rows, -1))
        carries = None
        if self.memory != "none":
            memory, (carries, outputs) = SequenceMemory(self.memory, self.memory_size)(
                memory, (x.reshape(steps, rows, -1), starts))
            x = outputs.reshape(steps * rows, -1)
        q = Head(self.num_actions)(x)
        return memory, q.reshape(steps, rows, -1), carries


class HyperNetwork(nn.Module):
    """A two-layer ReLU network that outputs a mixing layer's weights from the world state."""

    hidden: int
    output: int
    init_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(nn.Dense(self.hidden, kernel_init=orthogonal(self.init_scale))(x))
        return nn.Dense(self.output, kernel_init=orthogonal(self.init_scale))(x)


class MonotonicMixer(nn.Module):
    """QMIX's mixing network (JaxMARL's `MixingNetwork`): Q_tot = w2 . elu(w1 q + b1) + b2
    with w1 = |hyper_1(s)| [N, E], b1 = dense(s) [E], w2 = |hyper_2(s)| [E], b2 = hyper_b(s).

    `__call__(agent_qs [..., N], state [..., S])` -> Q_tot [...]."""

    embedding: int = 32
    hypernet_hidden: int = 128
    init_scale: float = 0.001

    @nn.compact
    def __call__(self, agent_qs: jax.Array, state: jax.Array) -> jax.Array:
        lead, agents = agent_qs.shape[:-1], agent_qs.shape[-1]
        s = state.reshape(-1, state.shape[-1])
        q = agent_qs.reshape(-1, 1, agents)
        emb = self.embedding
        w1 = jnp.abs(HyperNetwork(self.hypernet_hidden, emb * agents, self.init_scale)(s))
        b1 = nn.Dense(emb, kernel_init=orthogonal(self.init_scale))(s)
        w2 = jnp.abs(HyperNetwork(self.hypernet_hidden, emb, self.init_scale)(s))
        b2 = HyperNetwork(emb, 1, self.init_scale)(s)
        hidden = nn.elu(q @ w1.reshape(-1, agents, emb) + b1[:, None, :])  # [R, 1, E]
        q_tot = hidden @ w2.reshape(-1, emb, 1) + b2[:, None, :]  # [R, 1, 1]
        return q_tot.reshape(lead)


def mix(mixer: Optional[MonotonicMixer], params: Any, agent_qs: jax.Array,
        state: Optional[jax.Array]) -> jax.Array:
    """The team's Q_tot [...] of the agents' Q-values [..., N]: QMIX's mixer under `params`
    (its parameters) and the world state [..., S], or (VDN, `mixer` None) their sum."""
    if mixer is None:
        return jnp.sum(agent_qs, axis=-1)
    return mixer.apply(params, agent_qs, state)


def team_memory(memory: str, size: int, envs: int, agents: int) -> PyTree:
    """The initial recurrent state [B, N, ...] of every agent of B teams; None when
    feed-forward."""
    one = initial_memory(memory, size, envs * agents)
    return jax.tree.map(lambda m: m.reshape(envs, agents, *m.shape[1:]), one)


def team_q(network: TeamQNetwork, params: Any, memory: PyTree, obs: jax.Array,
           starts: Optional[jax.Array]) -> tuple[PyTree, jax.Array, PyTree]:
    """The network over team sequences: observations [T, B, N, D] (ids appended here), memory
    [B, N, ...], `starts` [T, B] (an env's agents all begin together). Returns (memory after,
    Q-values [T, B, N, A], memory after each step [T, B, N, ...]), rows back as teams."""
    steps, envs, agents = obs.shape[:3]
    rows = envs * agents
    inputs = with_agent_ids(obs).reshape(steps, rows, -1)
    row_starts = (jnp.zeros((steps, rows), jnp.bool_) if starts is None
                  else jnp.repeat(starts, agents, axis=1))
    flat_memory = jax.tree.map(lambda m: m.reshape(rows, *m.shape[2:]), memory)
    memory, q, carries = network.apply(params, flat_memory, inputs, row_starts)
    teams = lambda x: x.reshape(x.shape[0], envs, agents, *x.shape[2:])  # noqa: E731
    memory = jax.tree.map(lambda m: m.reshape(envs, agents, *m.shape[1:]), memory)
    return memory, teams(q), jax.tree.map(teams, carries)


def next_team_q(network: TeamQNetwork, params: Any, carries: PyTree,
                obs: jax.Array) -> jax.Array:
    """Q-values [..., N, A] of observations [..., N, D] that continue the episodes held by
    `carries` [..., N, H] (None when feed-forward), one step with no reset: each step's next
    observation valued from the state that step left behind."""
    lead = obs.shape[:-2]
    rows = math.prod(lead)
    flat_obs = obs.reshape(1, rows, *obs.shape[-2:])
    flat_carries = jax.tree.map(lambda c: c.reshape(rows, *c.shape[len(lead):]), carries)
    _, q, _ = team_q(network, params, flat_carries, flat_obs, None)
    return q[0].reshape(*lead, *q.shape[-2:])


def unroll(network: TeamQNetwork, params: Any, memory: PyTree, obs: jax.Array,
           starts: Optional[jax.Array], burn_in: int) -> tuple[jax.Array, PyTree]:
    """Replay team sequences [L, B, N, D] from their stored state [B, N, ...]: the first
    `burn_in` steps only warm the state (no gradient flows into them), then (Q-values
    [L - burn_in, B, N, A], memory after each of those steps)."""
    if burn_in:
        memory, _, _ = team_q(network, params, memory, obs[:burn_in], starts[:burn_in])
    memory = jax.lax.stop_gradient(memory)
    _, q, carries = team_q(network, params, memory, obs[burn_in:],
                           None if starts is None else starts[burn_in:])
    return q, carries


def masked_argmax(q: jax.Array, legal: jax.Array) -> jax.Array:
    """The best legal action [...] of Q-values [..., A] under `legal` bool [..., A]."""
    return jnp.argmax(jnp.where(legal, q, -jnp.inf), axis=-1)


def epsilon_greedy(q: jax.Array, legal: jax.Array, keys: jax.Array,
                   epsilon: jax.Array | float) -> jax.Array:
    """Team actions [B, N] from Q-values and legal masks [B, N, A] with one key per env [B]:
    each agent takes its best legal action, or with probability `epsilon` one of its legal
    actions uniformly at random."""
    agents = q.shape[1]

    def one_env(key: jax.Array, legal_env: jax.Array) -> tuple[jax.Array, jax.Array]:
        explore_key, pick_key = jax.random.split(key)
        explore = jax.random.uniform(explore_key, (agents,)) < epsilon
        uniform = jnp.where(legal_env, 0.0, -jnp.inf)
        return explore, jax.random.categorical(pick_key, uniform, axis=-1)

    explore, random_actions = jax.vmap(one_env)(keys, legal)
    return jnp.where(explore, random_actions, masked_argmax(q, legal))
