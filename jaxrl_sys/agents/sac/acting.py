"""How SAC acts: the squashed Gaussian policy's actions in env units, its exploration noise
(white or correlated), and uniform random actions before learning starts."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import correlated_noise, to_env_units, uniform_actions, white_noise
from jaxrl_sys.agents.sac.distributions import tanh_gaussian_sample
from jaxrl_sys.agents.sac.types import Params, Setup


def act_with_noise(setup: Setup, params: Params, obs: jax.Array, noise: jax.Array) -> jax.Array:
    """Actions [B, A] in env units for observations [B, ...], perturbed by `noise` [B, A]."""
    mean, log_std = setup.actor.apply(params.actor, obs.astype(jnp.float32))
    a, _ = tanh_gaussian_sample(mean, log_std, noise)
    return to_env_units(a, setup.low, setup.high)


def act(setup: Setup, params: Params, obs: jax.Array, key: jax.Array,
        greedy: bool = False) -> jax.Array:
    """Actions [B, A] in env units for observations [B, ...]; per-row keys [B] or one key.
    `greedy` takes the squashed mean."""
    if greedy:
        mean, _ = setup.actor.apply(params.actor, obs.astype(jnp.float32))
        return to_env_units(jnp.tanh(mean), setup.low, setup.high)
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    return act_with_noise(setup, params, obs, white_noise(keys, setup.action_dim))


def next_noise(setup: Setup, noise: jax.Array, keys: jax.Array) -> jax.Array:
    """The exploration noise [B, A] of this step from the last step's (`correlated_noise`)."""
    return correlated_noise(noise, white_noise(keys, setup.action_dim),
                            setup.config.noise_correlation)


def policy_or_explore(setup: Setup, params: Params, obs: jax.Array, noise: jax.Array,
                      explore_keys: jax.Array, env_steps: jax.Array) -> jax.Array:
    """The policy's actions [B, A] perturbed by `noise`, or uniform random ones (one key of
    `explore_keys` [B] per row) before `learning_starts` env steps."""
    policy_action = act_with_noise(setup, params, obs, noise)
    return jnp.where(env_steps < setup.config.learning_starts,
                     uniform_actions(explore_keys, setup.low, setup.high), policy_action)
