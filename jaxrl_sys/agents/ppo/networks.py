"""PPO's network: the policy-gradient family's actor-critic (`jaxrl_sys.agents.families.
actor_critic`), feed-forward or recurrent, and the ways the agent reads it."""

from jaxrl_sys.agents.families.actor_critic import (
    Network, actions_of, build_network, env_actions, evaluate_actions, evaluate_sequences,
    rollout_values, sample_actions, scored_actions, sequence_values, state_values, step_policy,
)

__all__ = ["Network", "actions_of", "build_network", "env_actions", "evaluate_actions",
           "evaluate_sequences", "rollout_values", "sample_actions", "scored_actions",
           "sequence_values", "state_values", "step_policy"]
