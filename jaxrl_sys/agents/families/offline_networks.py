"""The offline agents' shared networks: a policy (logits for discrete actions; a Gaussian's
mean and state-independent log standard deviation for continuous ones, in env units) with its
log-likelihood of the data's actions and its mode, a state-value network, and per-action
Q-values for discrete actions."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.core.distributions import (
    categorical_log_prob, categorical_sample, gaussian_log_prob, gaussian_sample,
)
from jaxrl_sys.core.networks import MLP, Head
from jaxrl_sys.core.types import Box, EnvSpec


class PolicyNetwork(nn.Module):
    """Logits [B, A] and an empty log std, or a Gaussian's mean [B, D] and log standard
    deviation [D], for observations [B, ...]."""

    action_size: int
    hidden: tuple[int, ...]
    activation: str
    continuous: bool

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = MLP(self.hidden, self.activation)(obs.astype(jnp.float32))
        out = Head(self.action_size, scale=0.01)(x)
        log_std = self.param("log_std", nn.initializers.zeros, (self.action_size,))
        return out, log_std if self.continuous else jnp.zeros((0,))


class ActionValues(nn.Module):
    """Q-values [B, A] of every discrete action for observations [B, ...] (IQL's critics and
    CQL's Q-network for discrete actions)."""

    num_actions: int
    hidden: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return Head(self.num_actions)(MLP(self.hidden, self.activation)(obs.astype(jnp.float32)))


class ValueNetwork(nn.Module):
    """State values [B] for observations [B, ...]."""

    hidden: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = MLP(self.hidden, self.activation)(obs.astype(jnp.float32))
        return Head(1)(x)[:, 0]


def build_networks(spec: EnvSpec, config) -> tuple[PolicyNetwork, ValueNetwork]:
    """The policy and value networks `config` asks for on `spec`.

    Args:
        spec: the env's spec (its action space).
        config: a config with `hidden` and `activation`.

    Returns:
        (policy network, value network).
    """
    continuous = isinstance(spec.action_space, Box)
    size = (int(np.prod(spec.action_space.shape)) if continuous else spec.action_space.n)
    return (PolicyNetwork(size, tuple(config.hidden), config.activation, continuous),
            ValueNetwork(tuple(config.hidden), config.activation))


def action_log_probs(policy_out: jax.Array, log_std: jax.Array, actions: jax.Array,
                     continuous: bool) -> jax.Array:
    """Log-likelihoods [B] of the data's actions under the policy.

    Args:
        policy_out: [B, A] logits, or [B, D] Gaussian means.
        log_std: [D] log standard deviations (continuous actions; unused otherwise).
        actions: [B] integer actions, or [B, D].
        continuous: whether the actions are continuous.

    Returns:
        [B] log-probabilities (log-densities for continuous actions).
    """
    if continuous:
        return gaussian_log_prob(policy_out, log_std, actions.reshape(policy_out.shape))
    return categorical_log_prob(policy_out, actions)


def policy_mode(policy_network: PolicyNetwork, spec: EnvSpec, policy_params,
                obs: jax.Array) -> jax.Array:
    """The policy's mode for observations [B, ...]: the most likely action [B], or the
    Gaussian's mean clipped to the action bounds [B, *shape].

    Args:
        policy_network: the policy.
        spec: the env's spec (its action space).
        policy_params: the policy's parameters.
        obs: [B, ...] observations.

    Returns:
        The actions.
    """
    out, _ = policy_network.apply(policy_params, obs)
    if isinstance(spec.action_space, Box):
        low = jnp.asarray(spec.action_space.low, jnp.float32)
        high = jnp.asarray(spec.action_space.high, jnp.float32)
        return jnp.clip(out.reshape(out.shape[0], *spec.action_space.shape), low, high)
    return jnp.argmax(out, axis=-1).astype(jnp.int32)


def policy_sample(policy_network: PolicyNetwork, spec: EnvSpec, policy_params,
                  obs: jax.Array, keys: jax.Array) -> jax.Array:
    """Actions drawn from the policy for observations [B, ...], one key per row [B]: a
    categorical draw [B], or the Gaussian's draw clipped to the action bounds [B, *shape]
    (the exploring policy of offline-to-online fine-tuning).

    Args:
        policy_network: the policy.
        spec: the env's spec (its action space).
        policy_params: the policy's parameters.
        obs: [B, ...] observations.
        keys: [B] PRNG keys.

    Returns:
        The actions.
    """
    out, log_std = policy_network.apply(policy_params, obs)
    if isinstance(spec.action_space, Box):
        drawn = jax.vmap(gaussian_sample, in_axes=(0, 0, None))(keys, out, log_std)
        low = jnp.asarray(spec.action_space.low, jnp.float32)
        high = jnp.asarray(spec.action_space.high, jnp.float32)
        return jnp.clip(drawn.reshape(out.shape[0], *spec.action_space.shape), low, high)
    return jax.vmap(categorical_sample)(keys, out).astype(jnp.int32)
