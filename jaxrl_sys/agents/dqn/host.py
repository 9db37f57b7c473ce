"""DQN through the host loop: epsilon-greedy acting on worker processes' envs, their rollouts
written into replay, then the same learner step as on device."""

from __future__ import annotations

import jax

from jaxrl_sys.agents.dqn.agent import Agent, State, add_to_replay, replay_row
from jaxrl_sys.agents.families.q_learning import exploration_epsilons, mean_epsilon
from jaxrl_sys.core import obs_norm
from jaxrl_sys.core.types import HostFns, Rollout, host_takes_any_config


def host_fns(agent: Agent) -> HostFns:
    """DQN for the host loop: epsilon-greedy `act` (the actor's env rows are the global env
    ids); rollouts go into replay, then `absorb`."""
    config = agent.config
    add = add_to_replay(config)

    def host_act(actor, obs, keys, env_steps, env_ids):
        params, obs_stats = actor
        epsilons = exploration_epsilons(config, env_steps, env_ids)
        return agent.act(params, obs_norm.normalize(obs_stats, obs), keys, epsilon=epsilons), {}

    def host_learn(state: State, buffer, rollout: Rollout, key):
        rows = replay_row(rollout.obs, rollout.action, rollout.reward, rollout.terminated,
                          rollout.truncated, rollout.next_obs)
        buffer, _ = jax.lax.scan(lambda b, step: (add(b, step), None), buffer, rows)
        state = state.replace(obs_stats=obs_norm.update(state.obs_stats, rollout.obs, None))
        epsilon = mean_epsilon(config, state.iteration * config.steps_per_iteration)
        state, buffer, metrics = agent.absorb(state, buffer, key)
        return state, buffer, {**metrics, "epsilon": epsilon}

    return HostFns(
        init=lambda key: (agent.init(key), agent.init_replay(config.num_envs)),
        actor_params=lambda state: (state.params, state.obs_stats),
        act=host_act,
        learn=host_learn,
        num_envs=config.num_envs,
        rollout_steps=config.rollout_steps,
    )


host_config_problem = host_takes_any_config  # every valid config runs in the host loop
