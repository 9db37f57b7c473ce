"""TD3's losses (Fujimoto et al. 2018) and DDPG's as their special case: the critics' target
with target policy smoothing and clipped double-Q, the critics' squared error, and the
deterministic policy gradient's actor loss; `td3_loss` sums them over one batch so that one
gradient reaches every parameter, each loss only its own.

Actions inside the losses are in [-1, 1] (the actor's range); stored actions are in env units
and mapped back (`families.continuous_control.to_unit_box`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import Critic, to_unit_box, twin_q_values
from jaxrl_sys.agents.td3.networks import DeterministicActor
from jaxrl_sys.core.types import Metrics


class Trainable(NamedTuple):
    """The parameters gradient descent moves, each with its own learning rate."""

    actor: Any
    critic: Any  # twin critics (leading axis 2); with one critic only the first is used


class Targets(NamedTuple):
    """The slowly moving copies the critics' target reads."""

    actor: Any
    critic: Any


def smoothed_actions(actions: jax.Array, noise: jax.Array, policy_noise: float,
                     noise_clip: float) -> jax.Array:
    """Target policy smoothing: the target actor's actions [B, A] plus clipped Gaussian noise,
    kept in [-1, 1].

    Args:
        actions: [B, A] the target actor's actions in [-1, 1].
        noise: [B, A] standard normal noise.
        policy_noise: the noise's scale (0: DDPG, no smoothing).
        noise_clip: the bound of the scaled noise.

    Returns:
        [B, A] actions in [-1, 1].
    """
    smoothing = jnp.clip(policy_noise * noise, -noise_clip, noise_clip)
    return jnp.clip(actions + smoothing, -1.0, 1.0)


def critic_target(reward: jax.Array, terminated: jax.Array, next_q: jax.Array,
                  gamma: float) -> jax.Array:
    """The critics' target [B]: r + gamma * (the smallest of `next_q` [K, B] over the K target
    critics; K = 2 is clipped double-Q, K = 1 DDPG's), not bootstrapped after termination.
    No gradient flows through it.

    Args:
        reward: [B] rewards.
        terminated: bool [B].
        next_q: [K, B] target critics' values of the next states and smoothed actions.
        gamma: the discount.

    Returns:
        [B] float32 targets.
    """
    not_terminated = 1.0 - terminated.astype(jnp.float32)
    target = reward.astype(jnp.float32) + gamma * not_terminated * jnp.min(next_q, axis=0)
    return jax.lax.stop_gradient(target)


def critic_loss(q: jax.Array, target: jax.Array) -> jax.Array:
    """The critics' loss: each critic's mean squared error to the shared target, summed.

    Args:
        q: [K, B] the critics' values of the taken actions.
        target: [B] the targets.

    Returns:
        The scalar loss.
    """
    return jnp.sum(jnp.mean(jnp.square(q - target[None]), axis=-1))


def actor_loss(q_first: jax.Array) -> jax.Array:
    """The deterministic policy gradient's loss: minus the first critic's mean value of the
    actor's actions (Silver et al. 2014).

    Args:
        q_first: [B] the first critic's values of the actor's actions.

    Returns:
        The scalar loss.
    """
    return -jnp.mean(q_first)


def td3_loss(trainable: Trainable, targets: Targets, batch: dict, target_noise: jax.Array, *,
             actor: DeterministicActor, critic: Critic, low: jax.Array, high: jax.Array,
             gamma: float, twin_critics: bool, policy_noise: float,
             noise_clip: float) -> tuple[jax.Array, Metrics]:
    """The critics' and the actor's losses on one batch, summed: (loss [], metrics). The
    critics' loss reaches only the critics; the actor's is taken through critics with no
    gradient, so it reaches only the actor.

    Args:
        trainable: the actor's and critics' parameters.
        targets: the target actor's and critics' parameters.
        batch: obs [B, ...], action [B, A] (env units), reward [B], terminated [B],
            next_obs [B, ...].
        target_noise: [B, A] standard normal noise for target policy smoothing.
        actor: the actor module.
        critic: the critic module.
        low: [A] the env's action bounds.
        high: [A] the env's action bounds.
        gamma: the discount.
        twin_critics: whether the target takes the smaller of two critics (TD3).
        policy_noise: target policy smoothing's scale (0 for DDPG).
        noise_clip: its clip.

    Returns:
        loss: the scalar sum of both losses.
        metrics: critic_loss, actor_loss, q_mean.
    """
    critics = slice(None) if twin_critics else slice(0, 1)
    next_actions = smoothed_actions(actor.apply(targets.actor, batch["next_obs"]), target_noise,
                                    policy_noise, noise_clip)
    next_q = twin_q_values(critic, targets.critic, batch["next_obs"], next_actions)[critics]
    target = critic_target(batch["reward"], batch["terminated"], next_q, gamma)
    taken = to_unit_box(batch["action"], low, high)
    q = twin_q_values(critic, trainable.critic, batch["obs"], taken)[critics]
    q_loss = critic_loss(q, target)
    fixed_critic = jax.lax.stop_gradient(trainable.critic)
    policy_q = twin_q_values(critic, fixed_critic, batch["obs"],
                             actor.apply(trainable.actor, batch["obs"]))[0]
    pi_loss = actor_loss(policy_q)
    metrics = {"critic_loss": q_loss, "actor_loss": pi_loss, "q_mean": jnp.mean(q[0])}
    return q_loss + pi_loss, metrics
