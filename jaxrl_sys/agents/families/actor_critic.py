"""The policy-gradient family's actor-critic (PPO's, IMPALA's): building it from an env spec,
and the ways an agent reads it (sampling actions, scoring taken actions, values), feed-forward
or recurrent (`config.memory`).

A recurrent network's state lives per env in the env carry (`VecEnvState.memory`, with
`starts`: does the current observation begin an episode). `step_policy` and
`evaluate_sequences` take both kinds of network, so an agent reads top to bottom once."""

from __future__ import annotations

from typing import Any, Optional, Union

import jax
import jax.numpy as jnp

from jaxrl_sys.core import distributions as dist
from jaxrl_sys.core.networks import ActorCritic, RecurrentActorCritic, check_torso_fits
from jaxrl_sys.core.types import Box, EnvSpec, PyTree

Network = Union[ActorCritic, RecurrentActorCritic]


def build_network(spec: EnvSpec, config: Any) -> Network:
    """The actor-critic network for an env spec: a categorical head for discrete actions, a
    Gaussian one for a Box; `config` gives `hidden`, `activation`, `torso` and `memory` (a
    recurrent network unless "none") with `memory_size`.

    Args:
        spec: the env's spec.
        config: the agent's Config.

    Returns:
        An `ActorCritic`, or a `RecurrentActorCritic` where `config.memory` is not "none".
    """
    if isinstance(spec.action_space, Box):
        action_dim, discrete = int(spec.action_space.shape[0]), False
    else:
        action_dim, discrete = spec.action_space.n, True
    check_torso_fits(config.torso, spec.obs_shape, spec.name)
    if getattr(config, "memory", "none") != "none":  # IMPALA's config has no memory yet
        return RecurrentActorCritic(
            action_dim=action_dim, discrete=discrete, hidden=config.hidden,
            activation=config.activation, torso=config.torso, memory=config.memory,
            memory_size=config.memory_size)
    return ActorCritic(action_dim=action_dim, discrete=discrete, hidden=config.hidden,
                       activation=config.activation, torso=config.torso)


def sample_actions(network: ActorCritic, params: Any, obs: jax.Array, key: jax.Array,
                   greedy: bool = False) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Actions for observations [B, ...] with their log-probabilities [B] and values [B];
    `key` is one key or per-row keys [B]. Greedy: argmax, or the Gaussian's mean.

    Args:
        network: a feed-forward actor-critic.
        params: its parameters.
        obs: [B, ...] observations.
        key: a PRNG key, or [B] keys (one per row).
        greedy: whether to take the most likely actions.

    Returns:
        actions: [B] ints (discrete) or [B, A] floats (Box).
        log_probs: [B] log-probabilities of the actions.
        values: [B] values.
    """
    return actions_of(network.apply(params, obs), network.discrete, key, greedy)


def actions_of(outputs: Any, discrete: bool, key: jax.Array,
               greedy: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(actions [B], log-probs [B], values [B]) from a network's (policy, values [B]).

    Args:
        outputs: a network's (policy, values [B]): logits [B, A], or (mean, log_std) each [B, A].
        discrete: whether the policy is categorical.
        key: a PRNG key, or [B] keys (one per row).
        greedy: whether to take the most likely actions.

    Returns:
        actions: [B] ints (discrete) or [B, A] floats (Box).
        log_probs: [B] log-probabilities of the actions.
        values: [B] values.
    """
    pi, value = outputs
    obs_rows = value.shape[0]
    keys = key if key.ndim == 2 else jax.random.split(key, obs_rows)
    if discrete:
        if greedy:
            action = jnp.argmax(pi, axis=-1)
        else:
            action = jax.vmap(dist.categorical_sample)(keys, pi)
        return action, dist.categorical_log_prob(pi, action), value
    mean, log_std = pi
    action = mean if greedy else jax.vmap(dist.gaussian_sample)(keys, mean, log_std)
    return action, dist.gaussian_log_prob(mean, log_std, action), value


def step_policy(network: Network, params: Any, memory: PyTree, obs: jax.Array,
                starts: Optional[jax.Array], key: jax.Array, greedy: bool = False,
                ) -> tuple[PyTree, jax.Array, jax.Array, jax.Array]:
    """One acting step on observations [B, ...]: (memory after it, actions [B], log-probs [B],
    values [B]). A recurrent network first resets the rows whose `starts` [B] is True; a
    feed-forward one has no memory (None) and ignores `starts`.

    Args:
        network: the actor-critic, feed-forward or recurrent.
        params: its parameters.
        memory: the state [B, ...] before the step (None when feed-forward).
        obs: [B, ...] observations.
        starts: bool [B], the observations that begin an episode (None when feed-forward).
        key: a PRNG key, or [B] keys (one per row).
        greedy: whether to take the most likely actions.

    Returns:
        memory: the state [B, ...] after the step (`memory` itself when feed-forward).
        actions: [B] ints (discrete) or [B, A] floats (Box).
        log_probs: [B] log-probabilities of the actions.
        values: [B] values.
    """
    if isinstance(network, ActorCritic):
        return (memory, *sample_actions(network, params, obs, key, greedy))
    memory, (pi, value) = network.apply(params, memory, obs[None], starts[None])
    return (memory, *actions_of((jax.tree.map(lambda x: x[0], pi), value[0]),
                                network.discrete, key, greedy))


def evaluate_sequences(network: Network, params: Any, memory: PyTree, obs: jax.Array,
                       starts: Optional[jax.Array], actions: jax.Array,
                       ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Log-probs, entropies and values, each flat [T * B], of the taken actions [T, B, ...]
    at observations [T, B, ...]. A recurrent network replays the sequences from `memory` [B]
    (their state before step 0), resetting at `starts` [T, B]; a feed-forward one scores every
    step on its own.

    Args:
        network: the actor-critic, feed-forward or recurrent.
        params: its parameters.
        memory: the state [B, ...] before step 0 (ignored when feed-forward).
        obs: [T, B, ...] observations.
        starts: bool [T, B] (ignored when feed-forward).
        actions: [T, B] ints (discrete) or [T, B, A] floats (Box).

    Returns:
        log_probs: [T * B] log-probabilities of the actions.
        entropies: [T * B] policy entropies.
        values: [T * B] values.
    """
    flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
    if isinstance(network, ActorCritic):
        return evaluate_actions(network, params, flat(obs), flat(actions))
    _, (pi, value) = network.apply(params, memory, obs, starts)
    return scored_actions((jax.tree.map(flat, pi), flat(value)), network.discrete, flat(actions))


def sequence_values(network: Network, params: Any, memory: PyTree, obs: jax.Array) -> jax.Array:
    """Values [B] of observations [B, ...] that continue the episodes `memory` [B] holds
    (no reset): the bootstrap values of the observations that follow a step.

    Args:
        network: the actor-critic, feed-forward or recurrent.
        params: its parameters.
        memory: the state [B, ...] the observations continue from (ignored when feed-forward).
        obs: [B, ...] observations.

    Returns:
        [B] values.
    """
    if isinstance(network, ActorCritic):
        return state_values(network, params, obs)
    starts = jnp.zeros((1, obs.shape[0]), jnp.bool_)
    return network.apply(params, memory, obs[None], starts)[1][1][0]


def rollout_values(network: Network, params: Any, memory: PyTree, obs: jax.Array,
                   starts: Optional[jax.Array], next_obs: jax.Array,
                   ) -> tuple[jax.Array, jax.Array]:
    """Values [T, B] of a rollout's observations [T, B, ...] and of each step's next
    observation [T, B, ...]. A recurrent network replays the sequences from `memory` [B]
    (resetting at `starts` [T, B]) and values each next observation from the state after
    its step, as acting did.

    Args:
        network: the actor-critic, feed-forward or recurrent.
        params: its parameters.
        memory: the state [B, ...] before step 0 (ignored when feed-forward).
        obs: [T, B, ...] observations.
        starts: bool [T, B] (ignored when feed-forward).
        next_obs: [T, B, ...] each step's next observation.

    Returns:
        values: [T, B] values of `obs`.
        next_values: [T, B] values of `next_obs`.
    """
    steps, envs = obs.shape[:2]
    flat = lambda x: x.reshape(steps * envs, *x.shape[2:])  # noqa: E731
    if isinstance(network, ActorCritic):
        return (state_values(network, params, flat(obs)).reshape(steps, envs),
                state_values(network, params, flat(next_obs)).reshape(steps, envs))
    _, (_, values), carries = network.clone(per_step_carries=True).apply(
        params, memory, obs, starts)
    next_values = sequence_values(network, params, jax.tree.map(flat, carries), flat(next_obs))
    return values, next_values.reshape(steps, envs)


def evaluate_actions(network: ActorCritic, params: Any, obs: jax.Array,
                     actions: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Log-probabilities [N] of taken actions, policy entropies [N] and values [N] of
    observations [N, ...] under `params`: what the loss needs.

    Args:
        network: a feed-forward actor-critic.
        params: its parameters.
        obs: [N, ...] observations.
        actions: [N] ints (discrete) or [N, A] floats (Box).

    Returns:
        log_probs: [N] log-probabilities of the actions.
        entropies: [N] policy entropies.
        values: [N] values.
    """
    return scored_actions(network.apply(params, obs), network.discrete, actions)


def scored_actions(outputs: Any, discrete: bool,
                   actions: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(log-probs [N], entropies [N], values [N]) of actions [N] from a network's
    (policy, values [N]).

    Args:
        outputs: a network's (policy, values [N]): logits [N, A], or (mean, log_std) each [N, A].
        discrete: whether the policy is categorical.
        actions: [N] ints (discrete) or [N, A] floats (Box).

    Returns:
        log_probs: [N] log-probabilities of the actions.
        entropies: [N] policy entropies.
        values: [N] values, as given.
    """
    pi, value = outputs
    if discrete:
        return dist.categorical_log_prob(pi, actions), dist.categorical_entropy(pi), value
    mean, log_std = pi
    return dist.gaussian_log_prob(mean, log_std, actions), dist.gaussian_entropy(log_std), value


def state_values(network: ActorCritic, params: Any, obs: jax.Array) -> jax.Array:
    """Values [B] of observations [B, ...] (the critic alone).

    Args:
        network: a feed-forward actor-critic.
        params: its parameters.
        obs: [B, ...] observations.

    Returns:
        [B] values.
    """
    return network.apply(params, obs, method=ActorCritic.value)


def env_actions(spec: EnvSpec, action: jax.Array) -> jax.Array:
    """The actions [B, ...] the env is stepped with: Gaussian samples clipped to the Box's
    bounds (the trajectory keeps the unclipped ones, whose log-probabilities were taken).

    Args:
        spec: the env's spec.
        action: [B] ints (discrete) or [B, A] floats (Box).

    Returns:
        `action`, clipped to the bounds for a Box; `action`'s shape.
    """
    if not isinstance(spec.action_space, Box):
        return action
    low = jnp.asarray(spec.action_space.low, jnp.float32)
    high = jnp.asarray(spec.action_space.high, jnp.float32)
    return jnp.clip(action, low, high)
