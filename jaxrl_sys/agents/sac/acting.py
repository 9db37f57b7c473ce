"""How SAC acts: the squashed Gaussian policy's actions in env units, its exploration noise
(white or correlated), and uniform random actions before learning starts."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.sac.distributions import correlated_noise, tanh_gaussian_sample
from jaxrl_sys.agents.sac.types import Params, Setup


def to_env_units(a: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Actions [B, A] in [-1, 1] mapped onto the env's box [low, high] ([A] each)."""
    return low + 0.5 * (a + 1.0) * (high - low)


def to_unit_box(action: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Actions [B, A] in env units mapped into [-1, 1] (clipped), the squashed policy's range."""
    return jnp.clip(2.0 * (action - low) / (high - low) - 1.0, -1.0, 1.0)


def white_noise(keys: jax.Array, action_dim: int) -> jax.Array:
    """Standard normal noise [B, action_dim], one row per key of `keys` [B]."""
    return jax.vmap(lambda k: jax.random.normal(k, (action_dim,)))(keys)


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


def random_actions(setup: Setup, keys: jax.Array) -> jax.Array:
    """Uniform random actions [B, A] in env units, one row per key of `keys` [B]."""
    u = jax.vmap(
        lambda k: jax.random.uniform(k, (setup.action_dim,), minval=-1.0, maxval=1.0))(keys)
    return to_env_units(u, setup.low, setup.high)


def policy_or_explore(setup: Setup, params: Params, obs: jax.Array, noise: jax.Array,
                      explore_keys: jax.Array, env_steps: jax.Array) -> jax.Array:
    """The policy's actions [B, A] perturbed by `noise`, or uniform random ones (one key of
    `explore_keys` [B] per row) before `learning_starts` env steps."""
    policy_action = act_with_noise(setup, params, obs, noise)
    return jnp.where(env_steps < setup.config.learning_starts,
                     random_actions(setup, explore_keys), policy_action)
