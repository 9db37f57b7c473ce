"""IMPALA's targets and objective as functions of arrays: V-trace value targets and
policy-gradient advantages (Espeholt et al. 2018), and the actor-critic loss built on them.

Arrays are time-major trajectories [T, B]. Episode ends follow `jaxrl_sys.core.returns.gae`:
`next_values[t]` is the value of the state actually reached after step t (the pre-reset final
observation where an episode ended; `next_values[-1]` is the bootstrap value), terminated
steps do not bootstrap, truncated ones bootstrap from it, and no trace crosses an episode end.
The V-trace recursion itself is rlax's (`rlax.vtrace`, with c_bar = 1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import rlax

from jaxrl_sys.core.types import Metrics


def importance_weights(target_log_probs: jax.Array, behaviour_log_probs: jax.Array) -> jax.Array:
    """rho_t = pi(a_t|x_t) / mu(a_t|x_t), [T, B], from the taken actions' log-probabilities
    under the learner's policy pi and the acting policy mu; no gradient flows through it."""
    return jax.lax.stop_gradient(jnp.exp(target_log_probs - behaviour_log_probs))


def vtrace(
    behaviour_log_probs: jax.Array,
    target_log_probs: jax.Array,
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    *,
    gamma: float,
    lam: float = 1.0,
    rho_bar: float = 1.0,
) -> tuple[jax.Array, jax.Array]:
    """V-trace value targets vs [T, B] and policy-gradient advantages [T, B].

    With discount_t = gamma (1 - terminated_t), rho_t = min(rho_bar, pi/mu) and
    c_t = lam min(1, pi/mu) (0 where the episode ended at t):
        delta_t = rho_t (r_t + discount_t next_values_t - values_t)
        vs_t    = values_t + delta_t + discount_t c_t (vs_{t+1} - values_{t+1})
        A_t     = rho_t (r_t + discount_t vs'_t - values_t)
    where vs'_t = vs_{t+1}, or next_values_t at an episode end and at t = T-1 (the paper's
    pg advantage; pg rho clipped at rho_bar). Both are constants for the gradient.
    """
    values = jax.lax.stop_gradient(values)
    next_values = jax.lax.stop_gradient(next_values)
    rhos = importance_weights(target_log_probs, behaviour_log_probs)
    discounts = gamma * (1.0 - terminated.astype(values.dtype))
    episode_ended = jnp.logical_or(terminated, truncated)
    trace_lambda = lam * (1.0 - episode_ended.astype(values.dtype))
    # rlax takes one trajectory [T]: its values at t-1 are ours at t, its v_t our next_values
    errors = jax.vmap(rlax.vtrace, in_axes=(1, 1, 1, 1, 1, 1, None), out_axes=1)(
        values, next_values, rewards, discounts, rhos, trace_lambda, rho_bar,
    )
    vs = values + errors
    later_vs = jnp.concatenate([vs[1:], next_values[-1:]], axis=0)
    vs_next = jnp.where(episode_ended, next_values, later_vs)
    pg_advantages = jnp.minimum(rho_bar, rhos) * (rewards + discounts * vs_next - values)
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(pg_advantages)


def policy_gradient_loss(log_probs: jax.Array, pg_advantages: jax.Array) -> jax.Array:
    """-mean(A_t log pi(a_t|x_t)) over [T, B], a scalar: raises the log-probability of actions
    in proportion to their (clipped-rho V-trace) advantage."""
    return -jnp.mean(pg_advantages * log_probs)


def value_loss(values: jax.Array, vs: jax.Array) -> jax.Array:
    """Half the mean squared error of values [T, B] against the V-trace targets vs [T, B]."""
    return 0.5 * jnp.mean((values - vs) ** 2)


def entropy_term(entropy: jax.Array) -> jax.Array:
    """Mean policy entropy over [T, B], a scalar; the loss subtracts `ent_coef` times it."""
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
