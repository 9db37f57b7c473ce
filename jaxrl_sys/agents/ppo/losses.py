"""PPO's objectives: the policy-gradient family's clipped loss
(`jaxrl_sys.agents.families.policy_gradient_losses`), which PPO, APPO, MAPPO and IPPO share,
and its unclipped actor-critic loss, which the `a2c` and `pg` variants train with."""

from jaxrl_sys.agents.families.policy_gradient_losses import (
    ADVANTAGE_EPSILON, actor_critic_loss, approx_kl, clipped_policy_loss, clipped_value_loss,
    entropy_term, importance_ratio, normalized_advantages, policy_gradient_loss, ppo_loss,
    value_loss, weighted_mean, weighted_normalized_advantages,
)

__all__ = ["ADVANTAGE_EPSILON", "actor_critic_loss", "approx_kl", "clipped_policy_loss",
           "clipped_value_loss", "entropy_term", "importance_ratio", "normalized_advantages",
           "policy_gradient_loss", "ppo_loss", "value_loss", "weighted_mean",
           "weighted_normalized_advantages"]
