"""SAC's three losses (twin critics, actor, temperature) and their sum over one batch.

The single-loss functions (the family's, `families.soft_actor_losses`) work on arrays and are
what the unit tests check; `sac_loss`
applies the networks and sums the three so that one gradient reaches every parameter, each
loss only its own (see its docstring).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import Critic, to_unit_box, twin_q_values
from jaxrl_sys.agents.families.soft_actor_losses import (  # noqa: F401  (SAC's losses)
    actor_loss, alpha_loss, critic_loss, soft_target,
)
from jaxrl_sys.agents.sac.distributions import tanh_gaussian_sample
from jaxrl_sys.agents.sac.networks import Actor
from jaxrl_sys.agents.sac.types import Trainable
from jaxrl_sys.core.types import Metrics


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
