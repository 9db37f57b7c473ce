"""SAC through the host loop: the policy (random before `learning_starts`) acts on worker
processes' envs with white noise; each rollout step goes into replay and is followed by the
same updates as on device."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp

from jaxrl_sys.agents.families.continuous_control import mean_over_learned, transition, white_noise
from jaxrl_sys.agents.sac.acting import policy_or_explore
from jaxrl_sys.agents.sac.agent import Agent, init_replay
from jaxrl_sys.agents.sac.config import Config
from jaxrl_sys.agents.sac.learner import absorb, init
from jaxrl_sys.agents.sac.types import Params, Setup, State
from jaxrl_sys.core import obs_norm, replay
from jaxrl_sys.core.types import HostFns, Metrics, Rollout


def host_init(setup: Setup, key: jax.Array) -> tuple[State, replay.ReplayState]:
    """The host loop's learner state and its replay over all `num_envs` envs."""
    return init(setup, key), init_replay(setup, setup.config.num_envs)


def host_actor_params(state: State) -> tuple[Params, Optional[obs_norm.RunningStats]]:
    """What the host loop's actors need: the parameters and the observation statistics."""
    return state.params, state.obs_stats


def host_act(setup: Setup, actor: tuple[Params, Optional[obs_norm.RunningStats]],
             obs: jax.Array, keys: jax.Array, env_steps: jax.Array,
             env_ids: jax.Array) -> tuple[jax.Array, dict]:
    """The host loop's actions [B, A] for observations [B, ...] (per-env keys [B]), with
    white noise (random before `learning_starts`), and no extras."""
    params, obs_stats = actor
    act_keys, explore_keys = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
    return policy_or_explore(setup, params, obs_norm.normalize(obs_stats, obs),
                             white_noise(act_keys, setup.action_dim), explore_keys,
                             env_steps), {}


def host_learn(setup: Setup, state: State, buffer: replay.ReplayState, rollout: Rollout,
               key: jax.Array) -> tuple[State, replay.ReplayState, Metrics]:
    """The host loop's learner: `absorb` each step of a rollout (leaves [T, envs, ...]), as
    `train_step` does."""
    obs_dtype = jnp.dtype(setup.env.spec.obs_dtype)

    def one_step(carry, t):
        state, buffer = carry
        step = jax.tree.map(lambda x: x[t], rollout)
        state, buffer, metrics, learned = absorb(
            setup, state, buffer,
            transition(obs_dtype, step.obs, step.action, step.reward, step.terminated,
                       step.next_obs),
            jax.random.fold_in(key, t), setup.config.batch_size,
        )
        return (state, buffer), (metrics, learned)

    steps = rollout.reward.shape[0]
    (state, buffer), (metrics, learned) = jax.lax.scan(
        one_step, (state, buffer), jnp.arange(steps)
    )
    return state, buffer, mean_over_learned(metrics, learned)


def host_config_problem(config: Config) -> Optional[str]:
    """What `config` asks of the host loop that it does not do (one line), or None."""
    if config.noise_correlation:
        return ("noise_correlation runs in the on-device loop only (gymnax and brax envs); "
                "the host loop explores with white noise")
    return None


def host_fns(agent: Agent) -> HostFns:
    """SAC for the host loop: the policy (random before `learning_starts`) acts; each rollout
    step is added to replay and followed by `updates_per_step` updates, as on device."""
    setup = agent.setup
    bind = functools.partial
    return HostFns(
        init=bind(host_init, setup),
        actor_params=host_actor_params,
        act=bind(host_act, setup),
        learn=bind(host_learn, setup),
        num_envs=setup.config.num_envs,
        rollout_steps=setup.config.rollout_steps,
    )
