"""PPO's actor-critic: building it from an env spec, and the three ways the agent reads it
(sampling actions, scoring taken actions, values)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl_sys.core import distributions as dist
from jaxrl_sys.core.networks import ActorCritic, check_torso_fits
from jaxrl_sys.core.types import Box, EnvSpec


def build_network(spec: EnvSpec, config: Any) -> ActorCritic:
    """The actor-critic network for an env spec: a categorical head for discrete actions, a
    Gaussian one for a Box; `config` gives `hidden`, `activation` and `torso`."""
    if isinstance(spec.action_space, Box):
        action_dim, discrete = int(spec.action_space.shape[0]), False
    else:
        action_dim, discrete = spec.action_space.n, True
    check_torso_fits(config.torso, spec.obs_shape, spec.name)
    return ActorCritic(action_dim=action_dim, discrete=discrete, hidden=config.hidden,
                       activation=config.activation, torso=config.torso)


def sample_actions(network: ActorCritic, params: Any, obs: jax.Array, key: jax.Array,
                   greedy: bool = False) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Actions for observations [B, ...] with their log-probabilities [B] and values [B];
    `key` is one key or per-row keys [B]. Greedy: argmax, or the Gaussian's mean."""
    pi, value = network.apply(params, obs)
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    if network.discrete:
        if greedy:
            action = jnp.argmax(pi, axis=-1)
        else:
            action = jax.vmap(dist.categorical_sample)(keys, pi)
        return action, dist.categorical_log_prob(pi, action), value
    mean, log_std = pi
    action = mean if greedy else jax.vmap(dist.gaussian_sample)(keys, mean, log_std)
    return action, dist.gaussian_log_prob(mean, log_std, action), value


def evaluate_actions(network: ActorCritic, params: Any, obs: jax.Array,
                     actions: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Log-probabilities [N] of taken actions, policy entropies [N] and values [N] of
    observations [N, ...] under `params`: what the loss needs."""
    pi, value = network.apply(params, obs)
    if network.discrete:
        return dist.categorical_log_prob(pi, actions), dist.categorical_entropy(pi), value
    mean, log_std = pi
    return dist.gaussian_log_prob(mean, log_std, actions), dist.gaussian_entropy(log_std), value


def state_values(network: ActorCritic, params: Any, obs: jax.Array) -> jax.Array:
    """Values [B] of observations [B, ...] (the critic alone)."""
    return network.apply(params, obs, method=ActorCritic.value)


def env_actions(spec: EnvSpec, action: jax.Array) -> jax.Array:
    """The actions [B, ...] the env is stepped with: Gaussian samples clipped to the Box's
    bounds (the trajectory keeps the unclipped ones, whose log-probabilities were taken)."""
    if not isinstance(spec.action_space, Box):
        return action
    low = jnp.asarray(spec.action_space.low, jnp.float32)
    high = jnp.asarray(spec.action_space.high, jnp.float32)
    return jnp.clip(action, low, high)
