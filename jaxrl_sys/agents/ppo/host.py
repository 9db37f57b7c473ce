"""PPO through the host loop: the same `act` and `update`, on rollouts that worker processes
collect (Gymnasium, envpool)."""

from __future__ import annotations

import functools

import jax

from jaxrl_sys.agents.ppo.agent import Agent, State, Trajectory
from jaxrl_sys.agents.ppo.networks import rollout_values
from jaxrl_sys.core import obs_norm
from jaxrl_sys.core.networks import initial_memory
from jaxrl_sys.core.types import HostFns, Rollout, host_takes_any_config


def host_fns(agent: Agent) -> HostFns:
    """PPO for the host loop: the same `act` and `update`, on rollouts from worker processes.

    The values of both the steps' observations and their next observations (for GAE, for
    bootstrapping through truncation, and as the reference of value clipping) are taken with
    the learner's parameters: with staleness 1 the acting parameters are an update older, and
    mixing the two value functions in one advantage biases it.
    The log-probabilities stay the acting ones: the importance ratio (and, with `vtrace`,
    V-trace's rho, which corrects the targets for the staleness) is against the policy that
    chose the actions.

    A recurrent config's actors carry each env's state (`HostFns.initial_memory`); `act`
    records the state before each step and where episodes start, and the learner replays the
    rollout from the state before its first step, as the device loop does.
    """
    config = agent.config
    recurrent = config.memory != "none"

    def act(actor, obs, keys, env_steps, env_ids, memory=None, starts=None):
        """Sampled actions [B] for the workers' observations [B, ...] (per-env keys [B]),
        their log-probs, and (recurrent) the state before the step and the one after it."""
        params, obs_stats = actor
        new_memory, action, log_prob, _ = agent.step_policy(
            params, memory, obs_norm.normalize(obs_stats, obs), starts, keys)
        if not recurrent:
            return action, {"log_prob": log_prob}
        return action, {"log_prob": log_prob, "memory": memory, "starts": starts}, new_memory

    def learn(state: State, replay, rollout: Rollout, key):
        """`update` on a rollout [T, B, ...] from the workers, with the learner's values."""
        normalize = functools.partial(obs_norm.normalize, state.obs_stats)
        starts = rollout.extras["starts"] if recurrent else None
        memory = jax.tree.map(lambda m: m[0], rollout.extras["memory"]) if recurrent else None
        values, next_values = rollout_values(agent.network, state.params, memory,
                                             normalize(rollout.obs), starts,
                                             normalize(rollout.next_obs))
        trajectory = Trajectory(
            obs=rollout.obs, actions=rollout.action, log_probs=rollout.extras["log_prob"],
            values=values, next_values=next_values,
            rewards=rollout.reward * config.reward_scale, terminated=rollout.terminated,
            truncated=rollout.truncated, env_ids=rollout.env_ids, starts=starts, memory=memory,
        )
        state, metrics = agent.update(state, trajectory, key)
        return state, replay, metrics

    return HostFns(
        init=lambda key: (agent.init(key), None),
        actor_params=lambda state: (state.params, state.obs_stats),
        act=act,
        learn=learn,
        num_envs=config.num_envs,
        rollout_steps=config.rollout_steps,
        initial_memory=(functools.partial(initial_memory, config.memory, config.memory_size)
                        if recurrent else None),
    )


host_config_problem = host_takes_any_config  # every valid config runs in the host loop
