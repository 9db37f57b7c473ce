"""TD3 and DDPG through the host loop: the policy (random before `learning_starts`) acts on
worker processes' envs with each env's noise scale (Ape-X's per env id with
`exploration="apex"`); each rollout step goes into replay and is followed by the same updates
as on device."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import (
    init_replay, mean_over_learned, transition, white_noise,
)
from jaxrl_sys.agents.td3.agent import Agent, Params, Setup, State, absorb_step, init
from jaxrl_sys.agents.td3.agent import policy_or_explore
from jaxrl_sys.agents.td3.config import Config
from jaxrl_sys.core import obs_norm, replay
from jaxrl_sys.core.types import HostFns, Metrics, Rollout


def host_act(setup: Setup, actor: tuple[Params, Optional[obs_norm.RunningStats]],
             obs: jax.Array, keys: jax.Array, env_steps: jax.Array,
             env_ids: jax.Array) -> tuple[jax.Array, dict]:
    """Actions [B, A] for the actor's envs (global ids `env_ids` [B], keys [B]), and no
    extras."""
    params, obs_stats = actor
    noise = white_noise(jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys), setup.action_dim)
    return policy_or_explore(setup, params, obs_norm.normalize(obs_stats, obs), noise, keys,
                             env_ids, env_steps), {}


def host_learn(setup: Setup, state: State, buffer: replay.ReplayState, rollout: Rollout,
               key: jax.Array) -> tuple[State, replay.ReplayState, Metrics]:
    """Absorb each step of a rollout (leaves [T, envs, ...]) as `train_step` does."""
    obs_dtype = jnp.dtype(setup.env.spec.obs_dtype)

    def one_step(carry, t):
        state, buffer = carry
        step = jax.tree.map(lambda x: x[t], rollout)
        row = transition(obs_dtype, step.obs, step.action, step.reward, step.terminated,
                         step.next_obs)
        state, buffer, metrics, learned = absorb_step(setup, state, buffer, row,
                                                      jax.random.fold_in(key, t),
                                                      setup.config.batch_size)
        return (state, buffer), (metrics, learned)

    (state, buffer), (metrics, learned) = jax.lax.scan(
        one_step, (state, buffer), jnp.arange(rollout.reward.shape[0]))
    return state, buffer, mean_over_learned(metrics, learned)


def host_fns(agent: Agent) -> HostFns:
    """TD3 for the host loop: the policy acts with each env's noise; rollouts go into replay
    step by step, each followed by `updates_per_step` updates."""
    setup, config = agent.setup, agent.config
    return HostFns(
        init=lambda key: (init(setup, key),
                          init_replay(setup.env.spec, config.num_envs, config.capacity_per_env)),
        actor_params=lambda state: (state.params, state.obs_stats),
        act=functools.partial(host_act, setup),
        learn=functools.partial(host_learn, setup),
        num_envs=config.num_envs,
        rollout_steps=config.rollout_steps,
    )


def host_config_problem(config: Config) -> Optional[str]:
    """What `config` asks of the host loop that it does not do (one line), or None."""
    if config.noise_correlation:
        return ("noise_correlation runs in the on-device loop only (gymnax and brax envs); "
                "the host loop explores with white noise")
    return None
