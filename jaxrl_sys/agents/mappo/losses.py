"""MAPPO's maths as top-level functions: advantages of every agent from the team reward, and
PPO's clipped loss over (step, env, agent) rows with unavailable actions masked out."""

from __future__ import annotations

from typing import Optional

import jax

from jaxrl_sys.agents.families.policy_gradient_losses import ppo_loss
from jaxrl_sys.agents.mappo.networks import scored
from jaxrl_sys.core.returns import gae
from jaxrl_sys.core.types import Metrics


def team_advantages(rewards: jax.Array, values: jax.Array, next_values: jax.Array,
                    terminated: jax.Array, truncated: jax.Array, gamma: float,
                    lam: float) -> tuple[jax.Array, jax.Array]:
    """GAE (advantages, returns) [T, B, N] of each agent's values [T, B, N] (and of the state
    each step reached, `next_values`) under the team's rewards and episode ends [T, B]: every
    agent is credited with the whole team's reward (or, rewards [T, B, N], its own team's).

    Args:
        rewards: [T, B] team rewards, or [T, B, N] each agent's team's.
        values: [T, B, N] each agent's values.
        next_values: [T, B, N] each agent's values of the state reached after each step.
        terminated: bool [T, B].
        truncated: bool [T, B].
        gamma: the discount.
        lam: the GAE lambda.

    Returns:
        advantages: [T, B, N] advantages.
        returns: [T, B, N] value targets.
    """
    team = lambda x: jax.numpy.broadcast_to(x[..., None], values.shape)  # noqa: E731
    per_agent = rewards if rewards.ndim == values.ndim else team(rewards)
    return gae(per_agent, values, next_values, team(terminated), team(truncated), gamma, lam)


def mappo_loss(logits: jax.Array, legal: Optional[jax.Array], values: jax.Array, actions: jax.Array,
               old_log_probs: jax.Array, old_values: jax.Array, advantages: jax.Array,
               returns: jax.Array, *, clip_eps: float, vf_coef: float, ent_coef: float,
               clip_value: bool, normalize_advantages: bool,
               axis_name: Optional[str] = None) -> tuple[jax.Array, Metrics]:
    """`ppo_loss` over every row of logits [..., A] (masked by `legal` [..., A], so an
    unavailable action has neither probability nor entropy) and values, actions, acting
    log-probs and values, advantages and returns [...]; or of a continuous policy's means and
    log-stds [..., 2A] (`legal` None) and actions [..., A].

    Args:
        logits: [..., A] logits of every (step, env, agent) row under the current parameters
            (continuous: means and log-stds [..., 2A]).
        legal: bool [..., A] available actions, or None (continuous actions).
        values: [...] values under the current parameters.
        actions: [...] int taken actions, or [..., A] continuous ones.
        old_log_probs: [...] log-probabilities of the taken actions under the acting parameters.
        old_values: [...] values under the acting parameters.
        advantages: [...] advantages.
        returns: [...] value targets.
        clip_eps: the ratio's (and, with `clip_value`, the value's) clip.
        vf_coef: the value loss's weight.
        ent_coef: the entropy bonus's weight.
        clip_value: whether the value loss is clipped.
        normalize_advantages: whether advantages are standardised first.
        axis_name: the device axis the standardisation pools over, or None.

    Returns:
        loss: the scalar loss.
        metrics: `ppo_loss`'s scalar metrics.
    """
    log_probs, entropy = scored(logits, legal, actions)
    flat = lambda x: x.reshape(-1)  # noqa: E731
    return ppo_loss(
        flat(log_probs), flat(entropy), flat(values), flat(old_log_probs), flat(old_values),
        flat(advantages), flat(returns), clip_eps=clip_eps, vf_coef=vf_coef, ent_coef=ent_coef,
        clip_value=clip_value, normalize_advantages=normalize_advantages, axis_name=axis_name)
