"""MADDPG's maths (Lowe et al. 2017): Gumbel-max sampling and the straight-through
Gumbel-softmax action of the actor's gradient (discrete actions), each agent's view of the
joint action, the centralised critics' target and regression, and the combined losses for
discrete and continuous actions."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import linen as nn

from jaxrl_sys.core.types import Metrics

ILLEGAL_LOGIT = -1e9  # an illegal action's logit: never sampled, no weight in the softmax


class Trainable(NamedTuple):
    """The parameters a gradient step moves: the actor and the critics."""

    actor: Any
    critic: Any


class Targets(NamedTuple):
    """Their Polyak-averaged copies, which give the critics' targets."""

    actor: Any
    critic: Any


def masked_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Logits [..., A] with the illegal actions' set to `ILLEGAL_LOGIT`.

    Args:
        logits: [..., A] action logits.
        legal: bool [..., A] legal actions.

    Returns:
        [..., A] logits.
    """
    return jnp.where(legal, logits, ILLEGAL_LOGIT)


def gumbel_max_actions(logits: jax.Array, legal: jax.Array, gumbel: jax.Array) -> jax.Array:
    """Actions [...] sampled from the policy softmax(logits) over the legal actions, by the
    Gumbel-max trick: argmax(logits + g) with g standard Gumbel noise.

    Args:
        logits: [..., A] action logits.
        legal: bool [..., A] legal actions.
        gumbel: [..., A] standard Gumbel noise (zero: the greedy action).

    Returns:
        int32 [...] actions.
    """
    return jnp.argmax(masked_logits(logits, legal) + gumbel, axis=-1).astype(jnp.int32)


def straight_through_gumbel_softmax(logits: jax.Array, legal: jax.Array, gumbel: jax.Array,
                                    temperature: float) -> jax.Array:
    """A sampled action [..., A] as a one-hot vector whose gradient is that of its relaxation
    softmax((logits + g) / temperature) (Jang et al. 2017), so a critic's gradient reaches the
    logits through an action the critic was trained on.

    Args:
        logits: [..., A] action logits.
        legal: bool [..., A] legal actions.
        gumbel: [..., A] standard Gumbel noise.
        temperature: the relaxation's temperature.

    Returns:
        [..., A] float32: the one-hot of `gumbel_max_actions` in value.
    """
    scores = masked_logits(logits, legal) + gumbel
    soft = jax.nn.softmax(scores / temperature, axis=-1)
    hard = jax.nn.one_hot(jnp.argmax(scores, axis=-1), logits.shape[-1], dtype=soft.dtype)
    return soft + jax.lax.stop_gradient(hard - soft)


def each_agents_joint(taken: jax.Array, own: jax.Array) -> jax.Array:
    """What each agent's critic reads in the actor's loss: row i is the joint action taken
    with agent i's action replaced by its policy's.

    Args:
        taken: [B, N, A] the joint action taken (one-hot).
        own: [B, N, A] each agent's action from its policy.

    Returns:
        [B, N, N, A]: row i, column j is own[:, j] where i == j, else taken[:, j].
    """
    agents = taken.shape[1]
    diagonal = jnp.eye(agents, dtype=jnp.bool_)[None, :, :, None]
    return jnp.where(diagonal, own[:, None], taken[:, None])


def shared_joint(joint: jax.Array) -> jax.Array:
    """The same joint action [B, N, A] for every agent's critic: [B, N, N, A].

    Args:
        joint: [B, N, A] one joint action per row.

    Returns:
        [B, N, N, A].
    """
    return jnp.broadcast_to(joint[:, None], (joint.shape[0], *joint.shape[1:2], *joint.shape[1:]))


def critic_target(reward: jax.Array, terminated: jax.Array, next_q: jax.Array,
                  gamma: float) -> jax.Array:
    """Each agent's one-step target r + gamma (1 - terminated) Q'_i(s', a').

    Args:
        reward: [B] the team reward, or [B, N] each agent's (its team's, teams competing).
        terminated: bool [B] episodes that ended (truncated ones bootstrap).
        next_q: [B, N] the target critics' values at the next state.
        gamma: the discount.

    Returns:
        [B, N] targets.
    """
    alive = 1.0 - terminated.astype(jnp.float32)
    per_agent = reward if reward.ndim == next_q.ndim else reward[:, None]
    return per_agent + gamma * alive[:, None] * next_q


def critic_regression(critic: nn.Module, trainable: Any, target: Any, batch: dict,
                      taken: jax.Array, next_actions: jax.Array,
                      gamma: float) -> tuple[jax.Array, jax.Array]:
    """The centralised critics' squared TD error: Q_i(s, a) regressed on `critic_target`,
    with the next joint action `next_actions` (the target actors').

    Args:
        critic: the centralised critics module.
        trainable: the critics' parameters.
        target: their target copy.
        batch: world [B, S], reward [B] (or [B, N]), terminated bool [B], next_world [B, S].
        taken: [B, N, A] the joint action taken (one-hot, or continuous in [-1, 1]).
        next_actions: [B, N, A] the target actors' joint action at the next state.
        gamma: the discount.

    Returns:
        loss: scalar, the mean squared error over rows and agents.
        q: [B, N] the critics' values of the taken joint action.
    """
    next_q = critic.apply(target, batch["next_world"], shared_joint(next_actions))
    td_target = jax.lax.stop_gradient(
        critic_target(batch["reward"], batch["terminated"], next_q, gamma))
    q = critic.apply(trainable, batch["world"], shared_joint(taken))
    return jnp.mean((q - td_target) ** 2), q


def maddpg_loss(trainable: Trainable, targets: Targets, batch: dict, gumbel: jax.Array, *,
                actor: nn.Module, critic: nn.Module, gamma: float, temperature: float,
                logit_penalty: float) -> tuple[jax.Array, Metrics]:
    """Discrete actions: the critics' squared TD error plus the actors' loss, each reaching its
    own network only.

    The critics regress Q_i(s, a) on `critic_target`, the next joint action sampled from the
    target actors. Each actor maximises its critic's Q_i with its own action from the
    straight-through Gumbel-softmax and the other agents' taken actions, plus
    `logit_penalty` times its mean squared legal logit.

    Args:
        trainable: the actor's and critics' parameters.
        targets: their target copies.
        batch: obs [B, N, D], world [B, S], legal bool [B, N, A], action int [B, N], reward [B]
            (or [B, N]),
            terminated bool [B], next_obs [B, N, D], next_world [B, S], next_legal [B, N, A].
        gumbel: [2, B, N, A] standard Gumbel noise: the next actions', then the actors'.
        actor: the team actor module.
        critic: the centralised critics module.
        gamma: the discount.
        temperature: the Gumbel-softmax's temperature.
        logit_penalty: the logits' regulariser.

    Returns:
        loss: scalar.
        metrics: critic_loss, actor_loss, q_mean.
    """
    num_actions = batch["legal"].shape[-1]
    taken = jax.nn.one_hot(batch["action"], num_actions, dtype=jnp.float32)
    next_logits = actor.apply(targets.actor, batch["next_obs"])
    next_actions = jax.nn.one_hot(gumbel_max_actions(next_logits, batch["next_legal"], gumbel[0]),
                                  num_actions, dtype=jnp.float32)
    critic_loss, q = critic_regression(critic, trainable.critic, targets.critic, batch, taken,
                                       next_actions, gamma)

    logits = actor.apply(trainable.actor, batch["obs"])
    own = straight_through_gumbel_softmax(logits, batch["legal"], gumbel[1], temperature)
    q_own = critic.apply(jax.lax.stop_gradient(trainable.critic), batch["world"],
                         each_agents_joint(taken, own))
    legal = batch["legal"].astype(jnp.float32)
    penalty = jnp.sum(legal * logits**2) / jnp.maximum(jnp.sum(legal), 1.0)
    actor_loss = -jnp.mean(q_own) + logit_penalty * penalty
    metrics = {"critic_loss": critic_loss, "actor_loss": actor_loss, "q_mean": jnp.mean(q)}
    return critic_loss + actor_loss, metrics


def deterministic_maddpg_loss(trainable: Trainable, targets: Targets, batch: dict, *,
                              actor: nn.Module, critic: nn.Module, gamma: float,
                              action_penalty: float) -> tuple[jax.Array, Metrics]:
    """Continuous actions (MADDPG's deterministic policy gradient): the critics' squared TD
    error plus the actors' loss, each reaching its own network only.

    The critics regress Q_i(s, a) on `critic_target`, the next joint action the target
    actors'. Each actor maximises its critic's Q_i with its own action from its policy and
    the other agents' taken actions, plus `action_penalty` times its mean squared action.

    Args:
        trainable: the actor's and critics' parameters.
        targets: their target copies.
        batch: obs [B, N, D], world [B, S], action [B, N, A] in [-1, 1], reward [B] (or
            [B, N]), terminated bool [B], next_obs [B, N, D], next_world [B, S].
        actor: the team actor module (continuous).
        critic: the centralised critics module.
        gamma: the discount.
        action_penalty: the actions' regulariser.

    Returns:
        loss: scalar.
        metrics: critic_loss, actor_loss, q_mean.
    """
    next_actions = actor.apply(targets.actor, batch["next_obs"])
    critic_loss, q = critic_regression(critic, trainable.critic, targets.critic, batch,
                                       batch["action"], next_actions, gamma)
    own = actor.apply(trainable.actor, batch["obs"])
    q_own = critic.apply(jax.lax.stop_gradient(trainable.critic), batch["world"],
                         each_agents_joint(batch["action"], own))
    actor_loss = -jnp.mean(q_own) + action_penalty * jnp.mean(own**2)
    metrics = {"critic_loss": critic_loss, "actor_loss": actor_loss, "q_mean": jnp.mean(q)}
    return critic_loss + actor_loss, metrics
