"""PPO's objective: the policy-gradient family's clipped loss
(`jaxrl_sys.agents.families.policy_gradient_losses`), which PPO, APPO, MAPPO and IPPO share."""

from jaxrl_sys.agents.families.policy_gradient_losses import (
    ADVANTAGE_EPSILON, approx_kl, clipped_policy_loss, clipped_value_loss, entropy_term,
    importance_ratio, normalized_advantages, ppo_loss, value_loss,
)

__all__ = ["ADVANTAGE_EPSILON", "approx_kl", "clipped_policy_loss", "clipped_value_loss",
           "entropy_term", "importance_ratio", "normalized_advantages", "ppo_loss", "value_loss"]
