"""IMPALA through the host loop: the same `act` and `update`, on rollouts that worker
processes collect (Gymnasium, envpool)."""

from __future__ import annotations

from jaxrl_sys.agents.impala.agent import Agent, State, Trajectory
from jaxrl_sys.core.types import HostFns, Rollout, host_takes_any_config


def host_fns(agent: Agent) -> HostFns:
    """IMPALA for the host loop: the same `act` and `update`, on rollouts from worker
    processes. The actors' parameters lag the learner's by the loop's staleness; the
    rollout keeps their log-probabilities, against which V-trace weighs the learner's."""
    config = agent.config

    def act(params, obs, keys, env_steps, env_ids):
        """Sampled actions [B] for the workers' observations [B, ...] (per-env keys [B]),
        and their log-probs."""
        action, log_prob, _ = agent.act(params, obs, keys)
        return action, {"log_prob": log_prob}

    def learn(state: State, replay, rollout: Rollout, key):
        """`update` on a rollout [T, B, ...] from the workers."""
        trajectory = Trajectory(
            obs=rollout.obs, actions=rollout.action, log_probs=rollout.extras["log_prob"],
            rewards=rollout.reward * config.reward_scale, terminated=rollout.terminated,
            truncated=rollout.truncated, next_obs=rollout.next_obs,
        )
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
