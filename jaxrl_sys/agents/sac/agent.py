"""Soft Actor-Critic: tanh-squashed Gaussian policy, twin critics, automatic entropy tuning.

`make(env, config)` binds the static parts (networks, optimiser, loss, env) to SAC's
functions and returns an `Agent` whose functions follow the agent contract:

    init(key) -> State
    init_envs(key, env_ids) -> EnvState            (envs + their replay, env-leading leaves)
    act(params, obs, key, greedy=False) -> action  (in the env's Box bounds)
    update(state, batch, key) -> (state, metrics)  (one gradient step on every loss)
    train_step(state, env_state, key) -> (state, env_state, metrics)

The losses are in losses.py, the learner step in learner.py, acting in acting.py.

Replay is env-major (`jaxrl_sys.core.replay`): it lives in the per-env state, so under the
execution layer every device keeps the transitions of its own envs. Each device samples
`batch_size / num_devices` of them (uniform over its shard, every shard holding the same
number of transitions), and gradients are `lax.pmean`-ed over `axis_name`, so the global
batch is `batch_size` uniform transitions whatever the number of devices. The policy noise of
an update is drawn for the global batch and each device takes its slice, which makes one
`update` on N devices equal to one `update` on 1 device with the same global batch.

Stored transitions are `{obs, action, reward, terminated, next_obs}` with `action` in env
units and `next_obs` the pre-reset observation (`info["final_observation"]`); targets
bootstrap through truncation and never through termination.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax

from jaxrl_sys.agents.families.continuous_control import (
    Critic, local_batch_size, mean_over_learned, transition,
)
from jaxrl_sys.agents.families.continuous_control import init_replay as init_transition_replay
from jaxrl_sys.agents.sac import losses
from jaxrl_sys.agents.sac.acting import act, next_noise, policy_or_explore
from jaxrl_sys.agents.sac.config import Config
from jaxrl_sys.agents.sac.learner import absorb, init, update
from jaxrl_sys.agents.sac.networks import Actor
from jaxrl_sys.agents.sac.types import EnvState, Setup, State
from jaxrl_sys.core import collectives, obs_norm, replay
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.learner import batch_placement_problem
from jaxrl_sys.core.rollout import episode_metrics, per_env_keys, reset_envs, step_envs
from jaxrl_sys.core.types import BoundAgent, Box, Env, Metrics


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """SAC's pure functions bound to one env and config."""

    actor: Actor
    critic: Critic
    setup: Setup  # what the functions are bound to (the host loop's functions bind it too)


def init_replay(setup: Setup, num_envs: int) -> replay.ReplayState:
    """Empty replay for `num_envs` envs, `capacity_per_env` transitions each."""
    return init_transition_replay(setup.env.spec, num_envs, setup.config.capacity_per_env)


def init_envs(setup: Setup, key: jax.Array, env_ids: jax.Array) -> EnvState:
    """Reset the envs `env_ids` [E]; empty replay and zero exploration noise for each."""
    return EnvState(envs=reset_envs(setup.env, key, env_ids),
                    replay=init_replay(setup, env_ids.shape[0]),
                    noise=jnp.zeros((env_ids.shape[0], setup.action_dim), jnp.float32))


def train_step(setup: Setup, state: State, env_state: EnvState, key: jax.Array
               ) -> tuple[State, EnvState, Metrics]:
    """`rollout_steps` vectorised env steps, each followed by `updates_per_step` updates."""
    config, env = setup.config, setup.env
    obs_dtype = jnp.dtype(env.spec.obs_dtype)
    state = state.replace(
        obs_stats=obs_norm.update_if_empty(state.obs_stats, env_state.envs.obs, setup.axis_name)
    )
    local_envs = env_state.envs.obs.shape[0]
    local_batch = local_batch_size(config.batch_size, config.num_envs, local_envs)

    def env_step(carry, t):
        state, es = carry
        step_key = jax.random.fold_in(key, t)
        act_key, explore_key, env_key, update_key = jax.random.split(step_key, 4)
        vstate = es.envs
        noise = next_noise(setup, es.noise, per_env_keys(act_key, vstate.env_ids))
        action = policy_or_explore(
            setup, state.params, obs_norm.normalize(state.obs_stats, vstate.obs), noise,
            per_env_keys(explore_key, vstate.env_ids), state.env_steps,
        )
        vstate, result = step_envs(env, vstate, action, env_key)
        state, buffer, metrics, learned = absorb(
            setup, state, es.replay,
            transition(obs_dtype, es.envs.obs, action, result.reward, result.terminated,
                       result.info["final_observation"]),
            update_key, local_batch,
        )
        records = (metrics, learned, episode_metrics(result.info, None))
        return (state, EnvState(vstate, buffer, noise)), records

    (state, env_state), (metrics, learned, episodes) = jax.lax.scan(
        env_step, (state, env_state), jnp.arange(config.rollout_steps)
    )
    episodes = jax.tree.map(jnp.sum, episodes)
    episodes = collectives.psum(episodes, setup.axis_name)
    return state, env_state, {**mean_over_learned(metrics, learned), **episodes}


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind SAC to `env` and `config`; `axis_name` is the device axis gradients average over.

    With `axis_name` set, `update` and `train_step` must run inside a mapped axis of that
    name (the execution layer's shard_map); with `axis_name=None` they run as is.
    """
    config.validate()
    spec = env.spec
    if not isinstance(spec.action_space, Box):
        raise ConfigError(f"SAC needs a continuous (Box) action space; {spec.name} is discrete")
    action_shape = tuple(spec.action_space.shape)
    action_dim = int(math.prod(action_shape))
    if len(action_shape) != 1:
        raise ConfigError(f"SAC needs a 1-D Box action space, got shape {action_shape}")
    low = jnp.asarray(spec.action_space.low, jnp.float32)
    high = jnp.asarray(spec.action_space.high, jnp.float32)
    target_entropy = (
        -float(action_dim) if config.target_entropy is None else float(config.target_entropy)
    )
    actor = Actor(action_dim, tuple(config.hidden), config.activation)
    critic = Critic(tuple(config.hidden), config.activation, config.critic_layer_norm)
    loss = functools.partial(
        losses.sac_loss, actor=actor, critic=critic, low=low, high=high, gamma=config.gamma,
        reward_scale=config.reward_scale, target_entropy=target_entropy,
    )
    setup = Setup(config, env, actor, critic, optax.scale_by_adam(), loss, low, high,
                  action_dim, axis_name)
    bind = functools.partial
    return Agent(
        config, spec, bind(init, setup), bind(init_envs, setup), bind(act, setup),
        bind(update, setup), bind(train_step, setup), actor=actor, critic=critic, setup=setup,
    )


def greedy_action(agent: Agent) -> Callable[[State, jax.Array, jax.Array], jax.Array]:
    """Deterministic actions (the squashed mean, in env units) for evaluation."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(
        state.params, obs_norm.normalize(state.obs_stats, obs), key, greedy=True
    )


placement_problem = batch_placement_problem  # each device samples its share of the batch
