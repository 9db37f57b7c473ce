"""IMPALA's targets and objective as functions of arrays: V-trace value targets and
policy-gradient advantages (Espeholt et al. 2018), and the actor-critic loss built on them.

Arrays are time-major trajectories [T, B]. Episode ends follow `jaxrl_sys.core.returns.gae`:
`next_values[t]` is the value of the state actually reached after step t (the pre-reset final
observation where an episode ended; `next_values[-1]` is the bootstrap value), terminated
steps do not bootstrap, truncated ones bootstrap from it, and no trace crosses an episode end.
V-trace itself is `jaxrl_sys.core.returns.vtrace` (rlax's recursion, with c_bar = 1),
shared with PPO's APPO option.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_sys.core.returns import importance_weights, vtrace
from jaxrl_sys.core.types import Metrics


def policy_gradient_loss(log_probs: jax.Array, pg_advantages: jax.Array) -> jax.Array:
    """-mean(A_t log pi(a_t|x_t)) over [T, B], a scalar: raises the log-probability of actions
    in proportion to their (clipped-rho V-trace) advantage.

    Args:
        log_probs: [T, B] log-probabilities of the taken actions under the learner's parameters.
        pg_advantages: [T, B] V-trace advantages (constants for the gradient).

    Returns:
        The scalar loss.
    """
    return -jnp.mean(pg_advantages * log_probs)


def value_loss(values: jax.Array, vs: jax.Array) -> jax.Array:
    """Half the mean squared error of values [T, B] against the V-trace targets vs [T, B].

    Args:
        values: [T, B] values under the learner's parameters.
        vs: [T, B] V-trace value targets.

    Returns:
        The scalar loss.
    """
    return 0.5 * jnp.mean((values - vs) ** 2)


def entropy_term(entropy: jax.Array) -> jax.Array:
    """Mean policy entropy over [T, B], a scalar; the loss subtracts `ent_coef` times it.

    Args:
        entropy: [T, B] policy entropies.

    Returns:
        The scalar mean entropy.
    """
    return jnp.mean(entropy)


def impala_loss(
    log_probs: jax.Array,
    entropy: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    behaviour_log_probs: jax.Array,
    rewards: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    *,
    gamma: float,
    lam: float,
    rho_bar: float,
    vf_coef: float,
    ent_coef: float,
) -> tuple[jax.Array, Metrics]:
    """IMPALA's loss, policy + vf_coef * value - ent_coef * entropy, and its parts as metrics.

    `log_probs`, `entropy`, `values` and `next_values` [T, B] come from the learner's
    parameters; `behaviour_log_probs` [T, B] from the ones that acted.

    Args:
        log_probs: [T, B] log pi(a_t|x_t) of the taken actions under the learner's parameters.
        entropy: [T, B] policy entropies under them.
        values: [T, B] values V(x_t) under them.
        next_values: [T, B] values of the states reached after each step.
        behaviour_log_probs: [T, B] log mu(a_t|x_t) under the acting parameters.
        rewards: [T, B] rewards.
        terminated: bool [T, B].
        truncated: bool [T, B].
        gamma: the discount.
        lam: V-trace's lambda.
        rho_bar: the clip of the importance ratios.
        vf_coef: the value loss's weight.
        ent_coef: the entropy bonus's weight.

    Returns:
        loss: the scalar loss.
        metrics: scalars `loss`, `policy_loss`, `value_loss`, `entropy` and `mean_rho`.
    """
    vs, pg_advantages = vtrace(
        behaviour_log_probs, log_probs, rewards, values, next_values, terminated, truncated,
        gamma=gamma, lam=lam, rho_bar=rho_bar,
    )
    policy = policy_gradient_loss(log_probs, pg_advantages)
    value = value_loss(values, vs)
    mean_entropy = entropy_term(entropy)
    total = policy + vf_coef * value - ent_coef * mean_entropy
    metrics = dict(loss=total, policy_loss=policy, value_loss=value, entropy=mean_entropy,
                   mean_rho=jnp.mean(importance_weights(log_probs, behaviour_log_probs)))
    return total, metrics
