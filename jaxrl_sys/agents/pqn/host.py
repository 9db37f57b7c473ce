"""PQN through the host loop: epsilon-greedy acting on worker processes' envs, then the same
update on the rollouts they return."""

from __future__ import annotations

import jax.numpy as jnp

from jaxrl_sys.agents.families.q_learning import epsilon_at
from jaxrl_sys.agents.pqn.agent import Agent, State, Trajectory, max_q
from jaxrl_sys.core.types import HostFns, Rollout, host_takes_any_config


def host_fns(agent: Agent) -> HostFns:
    """PQN for the host loop: the same epsilon schedule (by env steps) and update; the reached
    states of a rollout are valued by the learner's parameters when it arrives."""
    config = agent.config

    def act(params, obs, keys, env_steps, env_ids):
        """Epsilon-greedy actions [B] for the workers' observations [B, ...]."""
        del env_ids  # one rate for every env
        return agent.act(params, obs, keys, epsilon=epsilon_at(config, env_steps)), {}

    def learn(state: State, replay, rollout: Rollout, key):
        """`update` on a rollout [T, B, ...] from the workers."""
        trajectory = Trajectory(
            obs=rollout.obs, actions=rollout.action, rewards=rollout.reward * config.reward_scale,
            terminated=rollout.terminated, truncated=rollout.truncated,
            next_q=max_q(agent.network, state.params, rollout.next_obs),
            env_ids=(rollout.env_ids if rollout.env_ids is not None
                     else jnp.arange(rollout.reward.shape[1])))
        state, metrics = agent.update(state, trajectory, key)
        return state, replay, metrics

    return HostFns(
        init=lambda key: (agent.init(key), None),
        actor_params=lambda state: state.params,
        act=act,
        learn=learn,
        num_envs=config.num_envs,
        rollout_steps=config.rollout_steps,
    )


host_config_problem = host_takes_any_config  # every valid config runs in the host loop
