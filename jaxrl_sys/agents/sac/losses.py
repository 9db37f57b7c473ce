"""SAC's three losses (twin critics, actor, temperature) and their sum over one batch.

The single-loss functions work on arrays and are what the unit tests check; `sac_loss`
applies the networks and sums the three so that one gradient reaches every parameter, each
loss only its own (see its docstring).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import Critic, to_unit_box, twin_q_values
from jaxrl_sys.agents.sac.distributions import tanh_gaussian_sample
from jaxrl_sys.agents.sac.networks import Actor
from jaxrl_sys.agents.sac.types import Trainable
from jaxrl_sys.core.types import Metrics


def soft_target(
    reward: jax.Array, terminated: jax.Array, next_q: jax.Array, next_log_prob: jax.Array,
    alpha: jax.Array, gamma: float, reward_scale: float,
) -> jax.Array:
    """The critics' soft target [B]: r * reward_scale + gamma * (min of the target twins'
    `next_q` [2, B] - alpha * log pi(a'|s')), not bootstrapped after termination.

    A truncated step is stored with terminated False and its pre-reset next observation, so
    it bootstraps. reward, terminated, next_log_prob: [B]. No gradient flows through it.

    Args:
        reward: [B] rewards.
        terminated: bool [B].
        next_q: [2, B] the target twins' Q-values at the next states and sampled next actions.
        next_log_prob: [B] log pi(a'|s') of those actions.
        alpha: scalar temperature.
        gamma: the discount.
        reward_scale: the rewards' factor.

    Returns:
        [B] float32 targets.
    """
    next_q = jnp.min(next_q, axis=0)
    not_terminated = 1.0 - terminated.astype(jnp.float32)
    target = reward.astype(jnp.float32) * reward_scale + (
        gamma * not_terminated * (next_q - alpha * next_log_prob)
    )
    return jax.lax.stop_gradient(target)


def critic_loss(q: jax.Array, target: jax.Array) -> jax.Array:
    """Twin-critic loss: half the squared error of each critic's Q [2, B] against the shared
    target [B], summed over the twins and averaged over the batch.

    Args:
        q: [2, B] each twin's Q-values of the batch's actions.
        target: [B] soft targets.

    Returns:
        The scalar loss.
    """
    return 0.5 * jnp.mean(jnp.sum((q - target) ** 2, axis=0))


def actor_loss(log_prob: jax.Array, q: jax.Array, alpha: jax.Array) -> jax.Array:
    """Actor loss: mean of alpha * log pi(a|s) [B] - min of the twins' Q(s, a) [2, B], for
    actions a freshly sampled from the policy.

    Args:
        log_prob: [B] log pi(a|s) of freshly sampled actions.
        q: [2, B] the twins' Q-values of those actions.
        alpha: scalar temperature.

    Returns:
        The scalar loss.
    """
    q_pi = jnp.min(q, axis=0)
    return jnp.mean(alpha * log_prob - q_pi)


def alpha_loss(log_alpha: jax.Array, log_prob: jax.Array, target_entropy: float) -> jax.Array:
    """Temperature loss: -log_alpha * mean(log pi + target_entropy) over log_prob [B]; its
    gradient raises alpha while the policy's entropy is below `target_entropy`.

    Args:
        log_alpha: scalar log temperature.
        log_prob: [B] log pi(a|s) of freshly sampled actions.
        target_entropy: the entropy the temperature aims at.

    Returns:
        The scalar loss.
    """
    entropy_gap = jnp.mean(jax.lax.stop_gradient(log_prob) + target_entropy)
    return -log_alpha * entropy_gap


def sac_loss(
    trainable: Trainable, target_critic: Any, batch: dict, noise_now: jax.Array,
    noise_next: jax.Array, *, actor: Actor, critic: Critic, low: jax.Array, high: jax.Array,
    gamma: float, reward_scale: float, target_entropy: float,
) -> tuple[jax.Array, Metrics]:
    """Critic, actor and alpha losses on one batch, summed, with their metrics.

    `batch` leaves are [B, ...]: obs, action (env units, bounds `low`/`high` [A]), reward,
    terminated, next_obs; `noise_now` / `noise_next` [B, A] are the policy's standard normal
    noise at obs and next_obs. The critic target and the actor's Q use `stop_gradient`,
    alpha enters the critic and actor losses as a constant and the log-probabilities enter
    the alpha loss as constants, so the gradient of the sum is the three separate gradients.

    Args:
        trainable: the actor's and critics' parameters and the scalar log_alpha.
        target_critic: the target critics' parameters.
        batch: `obs` [B, ...], `action` [B, A], `reward` [B], `terminated` [B], `next_obs` [B, ...].
        noise_now: [B, A] standard normal noise of the actions at `obs`.
        noise_next: [B, A] standard normal noise of the actions at `next_obs`.
        actor: the actor network.
        critic: the twin critic network.
        low: [A] the action space's lower bounds.
        high: [A] its upper bounds.
        gamma: the discount.
        reward_scale: the rewards' factor.
        target_entropy: the entropy the temperature aims at.

    Returns:
        loss: the scalar sum of the three losses.
        metrics: scalars `critic_loss`, `actor_loss`, `alpha_loss`, `alpha`, `entropy` and `q`.
    """
    actor_params, critic_params, log_alpha = trainable
    alpha = jax.lax.stop_gradient(jnp.exp(log_alpha))
    obs, next_obs = batch["obs"], batch["next_obs"]
    a_now, log_prob_now = tanh_gaussian_sample(*actor.apply(actor_params, obs), noise_now)
    # the next actions feed only the critic's target: no gradient through the actor there
    next_a, next_log_prob = tanh_gaussian_sample(
        *actor.apply(jax.lax.stop_gradient(actor_params), next_obs), noise_next)

    target = soft_target(batch["reward"], batch["terminated"],
                         twin_q_values(critic, target_critic, next_obs, next_a),
                         next_log_prob, alpha, gamma, reward_scale)
    q = twin_q_values(critic, critic_params, obs, to_unit_box(batch["action"], low, high))
    critic_term = critic_loss(q, target)

    q_pi = twin_q_values(critic, jax.lax.stop_gradient(critic_params), obs, a_now)
    actor_term = actor_loss(log_prob_now, q_pi, alpha)
    alpha_term = alpha_loss(log_alpha, log_prob_now, target_entropy)
    metrics = dict(
        critic_loss=critic_term, actor_loss=actor_term, alpha_loss=alpha_term, alpha=alpha,
        entropy=-jnp.mean(log_prob_now), q=jnp.mean(q),
    )
    return critic_term + actor_term + alpha_term, metrics
