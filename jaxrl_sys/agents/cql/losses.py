"""CQL's maths for discrete actions (Kumar et al. 2020, "Conservative Q-Learning for Offline
Reinforcement Learning", CQL(H)): the Q-learning error plus alpha times
E[logsumexp_a Q(s, a) - Q(s, a_data)], which lowers the Q of actions outside the data and
raises the data's own, so the greedy policy stays where the data has support."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def q_targets(rewards: jax.Array, terminated: jax.Array, next_q_target: jax.Array,
              next_q_online: jax.Array, gamma: float, double_q: bool) -> jax.Array:
    """r + gamma * (1 - terminated) * Q_target(s', a'), a' the argmax of the online network
    (double Q) or of the target itself.

    Args:
        rewards: [B] rewards.
        terminated: [B] bool.
        next_q_target: [B, A] the target network's Q of the next observations.
        next_q_online: [B, A] the online network's.
        gamma: the discount.
        double_q: whether the online network picks a'.

    Returns:
        [B] targets (no gradient flows through them).
    """
    picker = next_q_online if double_q else next_q_target
    best = jax.nn.one_hot(jnp.argmax(picker, axis=-1), next_q_target.shape[-1])
    next_value = jnp.sum(next_q_target * best, axis=-1)
    return jax.lax.stop_gradient(rewards + gamma * (1.0 - terminated) * next_value)


def conservative_penalty(q: jax.Array, actions: jax.Array) -> jax.Array:
    """E[logsumexp_a Q(s, a) - Q(s, a_data)]: at least 0, and 0 only where the data's action
    takes all the softmax mass.

    Args:
        q: [B, A] Q-values.
        actions: [B] the data's actions.

    Returns:
        The penalty (a scalar).
    """
    taken = jnp.sum(q * jax.nn.one_hot(actions, q.shape[-1]), axis=-1)
    return jnp.mean(jax.nn.logsumexp(q, axis=-1) - taken)


def cql_loss(q: jax.Array, actions: jax.Array, targets: jax.Array,
             cql_alpha: float) -> tuple[jax.Array, dict]:
    """0.5 * E[(Q(s, a_data) - target)^2] + alpha * the conservative penalty.

    Args:
        q: [B, A] the online Q-values.
        actions: [B] the data's actions.
        targets: [B] the Q-learning targets.
        cql_alpha: the penalty's weight.

    Returns:
        The loss and its parts.
    """
    taken = jnp.sum(q * jax.nn.one_hot(actions, q.shape[-1]), axis=-1)
    td = 0.5 * jnp.mean(jnp.square(taken - targets))
    penalty = conservative_penalty(q, actions)
    return td + cql_alpha * penalty, {"td_loss": td, "cql_penalty": penalty,
                                      "q_mean": jnp.mean(taken)}


def sampled_conservative_penalty(q_random: jax.Array, q_current: jax.Array,
                                 log_pi_current: jax.Array, q_next: jax.Array,
                                 log_pi_next: jax.Array, q_data: jax.Array,
                                 action_dim: int) -> jax.Array:
    """CQL(H) for continuous actions: logsumexp_a Q(s, a) estimated by importance sampling
    from N uniform actions in [-1, 1]^D (density 0.5^D) and N actions of the policy at s and at
    s' (densities pi), each sample's Q minus its log-density; minus Q(s, a_data); averaged
    over the batch, summed over the twins.

    Args:
        q_random: [2, B, N] Q of uniform random actions at s.
        q_current: [2, B, N] Q of the policy's actions at s.
        log_pi_current: [B, N] their log-densities (no gradient flows through them).
        q_next: [2, B, N] Q at s of the policy's actions at s'.
        log_pi_next: [B, N] their log-densities.
        q_data: [2, B] Q of the data's actions.
        action_dim: D.

    Returns:
        The penalty (a scalar).
    """
    uniform_log_density = action_dim * jnp.log(0.5)
    samples = jnp.concatenate([
        q_random - uniform_log_density,
        q_current - jax.lax.stop_gradient(log_pi_current)[None],
        q_next - jax.lax.stop_gradient(log_pi_next)[None]], axis=-1)
    return jnp.sum(jnp.mean(jax.nn.logsumexp(samples, axis=-1) - q_data, axis=-1))
