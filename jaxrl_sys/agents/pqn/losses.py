"""PQN's targets and loss: Peng's Q(lambda) returns over a rollout, and the squared error of
the taken actions' Q-values against them."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def q_lambda_targets(rewards: jax.Array, next_q: jax.Array, terminated: jax.Array,
                     truncated: jax.Array, gamma: float, lam: float) -> jax.Array:
    """Q(lambda) returns [T, ...] of a rollout, computed backwards as PQN does:

        G_t = r_t + gamma * (1 - terminated_t) * ((1 - lam) * q'_t + lam * G_{t+1})

    where the episode goes on after step t, and G_t = r_t + gamma * (1 - terminated_t) * q'_t
    where it ended at t (terminated or truncated) or t is the rollout's last step; q'_t is
    max_a Q(s'_t, a) of the state step t reached (its pre-reset final observation), so a
    truncated episode bootstraps from where it stopped and no return crosses two episodes.

    Args:
        rewards: [T, ...] rewards.
        next_q: [T, ...] max_a Q of the state reached after each step.
        terminated: bool [T, ...].
        truncated: bool [T, ...].
        gamma: the discount.
        lam: lambda; 0 gives one-step targets r + gamma * q'.

    Returns:
        [T, ...] targets.
    """
    not_terminated = 1.0 - terminated.astype(next_q.dtype)
    continues = 1.0 - jnp.logical_or(terminated, truncated).astype(next_q.dtype)

    def backward(later: jax.Array, x: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
        reward, q, alive, goes_on = x
        bootstrap = q + goes_on * lam * (later - q)
        target = reward + gamma * alive * bootstrap
        return target, target

    _, targets = jax.lax.scan(backward, next_q[-1], (rewards, next_q, not_terminated, continues),
                              reverse=True, unroll=16)
    return targets


def q_loss(q_taken: jax.Array, targets: jax.Array) -> jax.Array:
    """Half the mean squared error [] of the taken actions' Q-values [N] against fixed
    targets [N] (no gradient through the targets).

    Args:
        q_taken: [N] Q-values of the taken actions.
        targets: [N] targets.

    Returns:
        The scalar loss.
    """
    return 0.5 * jnp.mean(jnp.square(q_taken - jax.lax.stop_gradient(targets)))
