"""The team's shared actor and critic (one set of parameters for every agent, told apart by a
one-hot agent id), feed-forward or recurrent, and the ways the agent reads them.

Rows are (env, agent) pairs: observations [T, B, N, D] are read as [T, B * N, ...]. The actor
sees an agent's observation and id; the critic sees the same (IPPO) or the env's world state
with the id (MAPPO's centralised value). Unavailable actions get no probability. Continuous
actions (`continuous`) are a diagonal Gaussian: the actor's means with a learned
state-independent log standard deviation, and no masks (`legal` None). With a policy per team
(`agent_teams` set) the parameters are stacked [K, ...] and each agent's rows go through its
team's."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.teams import per_agent, with_agent_ids
from jaxrl_sys.core import distributions as dist
from jaxrl_sys.core.networks import MLP, Head, SequenceMemory, initial_memory
from jaxrl_sys.core.types import PyTree

MASKED_LOGIT = -1e9  # the logit of an unavailable action


class TeamActorCritic(nn.Module):
    """An actor and a critic, each an MLP then (`memory` "gru"/"lstm") a recurrent core and one
    more layer, over time-major rows: `__call__(memory, actor_in [T, R, Da], critic_in
    [T, R, Dc], starts [T, R])` -> (memory after the last step, (logits [T, R, A], values
    [T, R])); continuous, the policy is (means, log-stds) concatenated [T, R, 2A]. `memory` is (actor's, critic's) state [R, ...], or None when feed-forward.
    `values(critic_memory, critic_in, starts)` runs the critic alone: (its memory after,
    values [T, R]). `agent_teams` [N] (a policy per team) tells `apply_sequences` and
    `sequence_values` to read parameters stacked per team; () shares one set."""

    action_dim: int
    hidden: Sequence[int] = (64, 64)
    activation: str = "tanh"
    memory: str = "none"
    memory_size: int = 128
    agent_teams: tuple[int, ...] = ()
    continuous: bool = False

    def setup(self) -> None:
        recurrent = self.memory != "none"
        for branch in ("actor", "critic"):
            setattr(self, f"{branch}_torso", MLP(tuple(self.hidden), self.activation))
            if recurrent:
                setattr(self, f"{branch}_memory", SequenceMemory(self.memory, self.memory_size))
                setattr(self, f"{branch}_post", MLP((self.hidden[-1],), self.activation))
        self.actor_head = Head(self.action_dim, scale=0.01)
        self.critic_head = Head(1, scale=1.0)
        if self.continuous:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))

    def __call__(self, memory: PyTree, actor_in: jax.Array, critic_in: jax.Array,
                 starts: jax.Array):
        actor_mem, features = self._branch("actor", None if memory is None else memory[0],
                                           actor_in, starts)
        critic_mem, values = self.values(None if memory is None else memory[1], critic_in,
                                         starts)
        logits = self.actor_head(features).reshape(*actor_in.shape[:2], -1)
        if self.continuous:
            logits = jnp.concatenate(
                [logits, jnp.broadcast_to(self.log_std, logits.shape)], axis=-1)
        return (None if memory is None else (actor_mem, critic_mem)), (logits, values)

    def values(self, memory: PyTree, critic_in: jax.Array, starts: jax.Array):
        """The critic alone: (its memory after the last step, values [T, R])."""
        memory, features = self._branch("critic", memory, critic_in, starts)
        return memory, self.critic_head(features)[..., 0].reshape(critic_in.shape[:2])

    def _branch(self, name: str, memory: PyTree, inputs: jax.Array, starts: jax.Array):
        """One branch's (memory after, features [T * R, H]) of inputs [T, R, D]."""
        steps, rows = inputs.shape[:2]
        features = getattr(self, f"{name}_torso")(inputs.reshape(steps * rows, -1))
        if self.memory == "none":
            return None, features
        memory, (_, outputs) = getattr(self, f"{name}_memory")(
            memory, (features.reshape(steps, rows, -1), starts))
        return memory, getattr(self, f"{name}_post")(outputs.reshape(steps * rows, -1))


def team_memory(memory: str, size: int, envs: int, agents: int) -> PyTree:
    """The initial (actor, critic) state [B, N, ...] of a team's recurrent network; None when
    feed-forward."""
    if memory == "none":
        return None
    one = initial_memory(memory, size, envs * agents)
    shaped = jax.tree.map(lambda m: m.reshape(envs, agents, *m.shape[1:]), one)
    return (shaped, shaped)


def critic_inputs(obs: jax.Array, world_state: jax.Array, central: bool) -> jax.Array:
    """What each agent's critic reads, [..., N, C]: the world state [..., S] with the agent's
    id (MAPPO), or its own observation [..., N, D] with its id (IPPO)."""
    if not central:
        return with_agent_ids(obs)
    agents = obs.shape[-2]
    world = jnp.broadcast_to(world_state[..., None, :],
                             (*world_state.shape[:-1], agents, world_state.shape[-1]))
    return with_agent_ids(world)


def masked_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Logits with every unavailable action (`legal` False) pushed to `MASKED_LOGIT`."""
    return jnp.where(legal, logits, MASKED_LOGIT)


def apply_sequences(network: TeamActorCritic, params: Any, memory: PyTree, obs: jax.Array,
                    critic_in: jax.Array, starts: Optional[jax.Array]):
    """The network over team sequences [T, B, N, ...]: (memory after, (logits [T, B, N, A],
    values [T, B, N])), rows (env, agent) flattened for the network and back. `memory`
    (actor, critic) [B, N, ...]; `starts` [T, B] (recurrent only)."""
    steps, envs, agents = obs.shape[:3]
    if network.agent_teams:
        return _apply_per_agent(network, params, memory, obs, critic_in, starts)
    rows = lambda x: x.reshape(steps, envs * agents, *x.shape[3:])  # noqa: E731
    flat_memory = jax.tree.map(lambda m: m.reshape(envs * agents, *m.shape[2:]), memory)
    row_starts = (jnp.zeros((steps, envs * agents), jnp.bool_) if starts is None
                  else jnp.repeat(starts, agents, axis=1))
    memory, (logits, values) = network.apply(params, flat_memory, rows(obs), rows(critic_in),
                                             row_starts)
    memory = jax.tree.map(lambda m: m.reshape(envs, agents, *m.shape[1:]), memory)
    return memory, (logits.reshape(steps, envs, agents, -1),
                    values.reshape(steps, envs, agents))


def sequence_values(network: TeamActorCritic, params: Any, critic_memory: PyTree,
                    critic_in: jax.Array, starts: Optional[jax.Array]) -> jax.Array:
    """The critic alone over team sequences [T, B, N, C]: values [T, B, N] (its memory, [B, N,
    ...] before step 0, is not returned)."""
    steps, envs, agents = critic_in.shape[:3]
    if network.agent_teams:
        return _apply_per_agent(network, params, critic_memory, critic_in, None, starts,
                                method=TeamActorCritic.values)[1]
    row_starts = (jnp.zeros((steps, envs * agents), jnp.bool_) if starts is None
                  else jnp.repeat(starts, agents, axis=1))
    memory = jax.tree.map(lambda m: m.reshape(envs * agents, *m.shape[2:]), critic_memory)
    _, values = network.apply(params, memory,
                              critic_in.reshape(steps, envs * agents, *critic_in.shape[3:]),
                              row_starts, method=TeamActorCritic.values)
    return values.reshape(steps, envs, agents)


def _apply_per_agent(network: TeamActorCritic, params: Any, memory: PyTree, first: jax.Array,
                     critic_in: Optional[jax.Array], starts: Optional[jax.Array],
                     method: Any = None):
    """`apply_sequences` (or, with `method=TeamActorCritic.values` and `first` the critic's
    inputs, the critic alone) with a policy per team: each agent's rows [T, B] through its
    team's parameters (stacked [K, ...]), agents vmapped. Returns what the method returns with
    agents on axis 2 of sequences [T, B, N, ...] and axis 1 of memory [B, N, ...]."""
    steps, envs = first.shape[:2]
    row_starts = jnp.zeros((steps, envs), jnp.bool_) if starts is None else starts
    inputs = (first,) if critic_in is None else (first, critic_in)

    def one_agent(agent_params, agent_memory, *agent_inputs):
        return network.apply(agent_params, agent_memory, *agent_inputs, row_starts,
                             **({} if method is None else {"method": method}))

    out_axes = (1, 2) if method is not None else (1, (2, 2))
    return jax.vmap(one_agent, in_axes=(0, 1) + (2,) * len(inputs), out_axes=out_axes)(
        per_agent(params, network.agent_teams), memory, *inputs)


def sample(logits: jax.Array, legal: Optional[jax.Array], key: jax.Array,
           greedy: "bool | jax.Array" = False) -> tuple[jax.Array, jax.Array]:
    """Actions [..., N] among the legal ones (`legal` [..., N, A]) and their log-probs: a sample,
    or (greedy) the masked argmax; `greedy` bool [N] picks per agent. `legal` None: a
    continuous policy (means and log-stds [..., N, 2A]), actions [..., N, A] sampled or (greedy)
    its means."""
    if legal is None:
        mean, log_std = jnp.split(logits, 2, axis=-1)
        if isinstance(greedy, bool) and greedy:  # no noise to draw
            return mean, dist.gaussian_log_prob(mean, log_std, mean)
        noisy = dist.gaussian_sample(key, mean, log_std)
        action = jnp.where(jnp.asarray(greedy)[..., None], mean, noisy)
        return action, dist.gaussian_log_prob(mean, log_std, action)
    logits = masked_logits(logits, legal)
    if isinstance(greedy, bool) and greedy:
        action = jnp.argmax(logits, axis=-1)
    elif isinstance(greedy, bool):
        action = jax.random.categorical(key, logits, axis=-1)
    else:
        action = jnp.where(greedy, jnp.argmax(logits, axis=-1),
                           jax.random.categorical(key, logits, axis=-1))
    return action, dist.categorical_log_prob(logits, action)


def scored(logits: jax.Array, legal: Optional[jax.Array],
           actions: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(log-probs, entropies) of taken actions [...] under masked logits [..., A], or (`legal`
    None) of continuous actions [..., A] under means and log-stds [..., 2A]."""
    if legal is None:
        mean, log_std = jnp.split(logits, 2, axis=-1)
        return dist.gaussian_log_prob(mean, log_std, actions), dist.gaussian_entropy(log_std)
    logits = masked_logits(logits, legal)
    return dist.categorical_log_prob(logits, actions), dist.categorical_entropy(logits)
