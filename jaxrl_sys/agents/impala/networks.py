"""IMPALA's actor-critic: the policy-gradient family's network and its readers (one torso, a policy head and a value
head), plus reading it over a whole trajectory [T, B, ...] as the V-trace loss needs."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.actor_critic import (
    build_network, env_actions, evaluate_actions, sample_actions, state_values,
)
from jaxrl_sys.core.networks import ActorCritic

__all__ = ["build_network", "env_actions", "evaluate_actions", "sample_actions",
           "sequence_outputs", "state_values"]


def sequence_outputs(network: ActorCritic, params: Any, obs: jax.Array, actions: jax.Array,
                     next_obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Log-probabilities of the taken actions, policy entropies, values and next values, each
    [T, B], of a trajectory's observations, actions and next observations [T, B, ...] under
    `params`; one forward pass over obs and next_obs together."""
    steps, envs = obs.shape[:2]
    n = steps * envs
    flat = lambda x: x.reshape(n, *x.shape[2:])  # noqa: E731
    log_probs, entropy, values = evaluate_actions(
        network, params, jnp.concatenate([flat(obs), flat(next_obs)]),
        jnp.concatenate([flat(actions), flat(actions)]),
    )
    as_steps = lambda x: x.reshape(steps, envs)  # noqa: E731
    return (as_steps(log_probs[:n]), as_steps(entropy[:n]), as_steps(values[:n]),
            as_steps(values[n:]))
