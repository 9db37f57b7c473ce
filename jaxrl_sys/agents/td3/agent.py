"""TD3 (Fujimoto et al. 2018) and DDPG: a deterministic tanh policy explored with Gaussian
noise, critics learned off-policy from replay, the actor by the deterministic policy gradient.

`make(env, config)` binds config, networks and the functions below into an `Agent` of pure
functions following the agent contract; the losses are in losses.py, and the action box,
twin critics, replay rows and the absorb-then-update step are the continuous-control family's
(shared with SAC). Replay is env-major and per device; each device samples its share of the
global batch, the smoothing noise is drawn for the global batch and sliced, and gradients are
averaged over `axis_name`, so one update on N devices equals one on 1 device.

Exploration: every env adds N(0, s^2) noise to the policy's action in [-1, 1] (clipped), with
s = `exploration_noise`, or Ape-X's fixed scale per global env id (`exploration="apex"`);
uniform random actions before `learning_starts`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.families.continuous_control import (
    ActorCriticOptState, ActorCriticParams, ActorCriticState,
    Critic, absorb, correlated_noise, global_noise, init_replay, init_twin_critics,
    local_batch_size, mean_over_learned, to_env_units, transition, uniform_actions, white_noise,
)
from jaxrl_sys.agents.td3 import losses
from jaxrl_sys.agents.td3.config import Config
from jaxrl_sys.agents.td3.losses import Targets, Trainable
from jaxrl_sys.agents.td3.networks import DeterministicActor
from jaxrl_sys.core import collectives, obs_norm, replay
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.learner import apex_rates, batch_placement_problem
from jaxrl_sys.core.rollout import VecEnvState, episode_metrics, per_env_keys, reset_envs, step_envs
from jaxrl_sys.core.types import BoundAgent, Box, Env, Metrics

DEFAULT_EVAL_EPISODES = 8  # greedy: the policy without its exploration noise
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


# the family's learner state: an actor, critics, their targets, optimiser states
Params = ActorCriticParams
OptState = ActorCriticOptState
State = ActorCriticState


@struct.dataclass
class EnvState:
    """Per-env state: the envs and their replay rows (every leaf has a leading env axis)."""

    envs: VecEnvState
    replay: replay.ReplayState
    noise: jax.Array  # [envs, A]: the last step's standard normal acting noise, from 0


@dataclasses.dataclass(frozen=True, eq=False)
class Setup:
    """The static parts `make` binds: config, env, networks, optimiser, loss, action box."""

    config: Config
    env: Env
    actor: DeterministicActor
    critic: Critic
    optimizer: optax.GradientTransformation  # Adam's scaling; each part its own learning rate
    loss: Callable[..., tuple[jax.Array, Metrics]]  # `losses.td3_loss` with networks bound
    low: jax.Array  # [A] the env's action bounds
    high: jax.Array  # [A]
    action_dim: int
    axis_name: Optional[str]


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """TD3's pure functions bound to one env and config."""

    setup: Setup


def init(setup: Setup, key: jax.Array) -> State:
    """Fresh actor and twin critics, targets equal to them, Adam moments and counters."""
    config, spec = setup.config, setup.env.spec
    actor_key, critic_key = jax.random.split(key)
    obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
    actor = setup.actor.init(actor_key, obs)
    critic = init_twin_critics(setup.critic, critic_key, obs, setup.action_dim)
    zero = jnp.zeros((), jnp.int32)
    return State(params=Params(actor, critic, actor, critic),
                 opt_state=OptState(setup.optimizer.init(actor), setup.optimizer.init(critic)),
                 env_steps=zero, updates=zero,
                 obs_stats=obs_norm.init_stats(config.normalize_obs, spec.obs_shape))


def exploration_scales(config: Config, env_ids: jax.Array) -> jax.Array:
    """Each env's noise scale [E] by global env id [E]: `exploration_noise` for all, or
    Ape-X's fixed scale per env (`core.learner.apex_rates`)."""
    if config.exploration == "apex":
        return apex_rates(config.apex_base, config.apex_alpha, env_ids, config.num_envs)
    return jnp.full(env_ids.shape, config.exploration_noise, jnp.float32)


def noisy_actions(setup: Setup, params: Params, obs: jax.Array, noise: jax.Array,
                  scales: jax.Array) -> jax.Array:
    """The policy's actions [B, A] for observations [B, ...] plus `noise` [B, A] times each
    row's scale [B], clipped to [-1, 1], in env units."""
    a = setup.actor.apply(params.actor, obs.astype(jnp.float32))
    return to_env_units(jnp.clip(a + scales[:, None] * noise, -1.0, 1.0), setup.low, setup.high)


def act(setup: Setup, params: Params, obs: jax.Array, key: jax.Array,
        greedy: bool = False) -> jax.Array:
    """Actions [B, A] in env units for observations [B, ...]: the policy's, with
    `exploration_noise` unless `greedy`; per-row keys [B] or one key."""
    scales = jnp.full(obs.shape[:1], 0.0 if greedy else setup.config.exploration_noise)
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    return noisy_actions(setup, params, obs, white_noise(keys, setup.action_dim), scales)


def policy_or_explore(setup: Setup, params: Params, obs: jax.Array, noise: jax.Array,
                      keys: jax.Array, env_ids: jax.Array, env_steps: jax.Array) -> jax.Array:
    """Each env's exploring action [B, A]: the policy's plus `noise` [B, A] at the env's own
    scale, or a uniform random one (from its key in `keys` [B]) before `learning_starts`
    env steps."""
    random_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    policy = noisy_actions(setup, params, obs, noise, exploration_scales(setup.config, env_ids))
    return jnp.where(env_steps < setup.config.learning_starts,
                     uniform_actions(random_keys, setup.low, setup.high), policy)


def update(setup: Setup, state: State, batch: dict, key: jax.Array) -> tuple[State, Metrics]:
    """One Adam step on the critics; on every `policy_delay`-th step also on the actor, and
    the targets move towards both by `tau` (Polyak). `batch` is this device's share of the
    global batch (obs, action in env units, reward, terminated, next_obs)."""
    config, params = setup.config, state.params
    batch = {**batch,
             "obs": obs_norm.normalize(state.obs_stats, batch["obs"].astype(jnp.float32)),
             "next_obs": obs_norm.normalize(state.obs_stats,
                                            batch["next_obs"].astype(jnp.float32))}
    noise = global_noise(setup.axis_name, key, batch["obs"].shape[0], setup.action_dim)
    grads, metrics = jax.grad(setup.loss, has_aux=True)(
        Trainable(params.actor, params.critic), Targets(params.target_actor, params.target_critic),
        batch, noise)
    grads = collectives.pmean(grads, setup.axis_name)
    critic_step, critic_opt = setup.optimizer.update(grads.critic, state.opt_state.critic)
    actor_step, actor_opt = setup.optimizer.update(grads.actor, state.opt_state.actor)
    critic = jax.tree.map(lambda p, u: p - config.critic_learning_rate * u, params.critic,
                          critic_step)
    delayed = (state.updates + 1) % config.policy_delay == 0

    def when_delayed(new, old):
        return jax.tree.map(lambda n, o: jnp.where(delayed, n, o), new, old)

    actor = when_delayed(jax.tree.map(lambda p, u: p - config.actor_learning_rate * u,
                                      params.actor, actor_step), params.actor)
    targets = when_delayed(
        (optax.incremental_update(actor, params.target_actor, config.tau),
         optax.incremental_update(critic, params.target_critic, config.tau)),
        (params.target_actor, params.target_critic))
    new_state = state.replace(
        params=Params(actor, critic, *targets),
        opt_state=OptState(when_delayed(actor_opt, state.opt_state.actor), critic_opt),
        updates=state.updates + 1,
    )
    return new_state, collectives.pmean(metrics, setup.axis_name)


def init_envs(setup: Setup, key: jax.Array, env_ids: jax.Array) -> EnvState:
    """Reset the envs `env_ids` [E] and give them empty replay rows."""
    return EnvState(reset_envs(setup.env, key, env_ids),
                    init_replay(setup.env.spec, env_ids.shape[0], setup.config.capacity_per_env),
                    jnp.zeros((env_ids.shape[0], setup.action_dim), jnp.float32))


def absorb_step(setup: Setup, state: State, buffer: replay.ReplayState, row: dict,
                key: jax.Array, local_batch: int
                ) -> tuple[State, replay.ReplayState, Metrics, jax.Array]:
    """One vector step's transitions into replay, then `updates_per_step` updates once past
    `learning_starts` (the family's `absorb`). Shared with the host loop."""
    return absorb(setup.config, setup.axis_name, functools.partial(update, setup), state,
                  buffer, row, key, local_batch)


def train_step(setup: Setup, state: State, env_state: EnvState, key: jax.Array
               ) -> tuple[State, EnvState, Metrics]:
    """`rollout_steps` vectorised env steps, each followed by `updates_per_step` updates."""
    config, env = setup.config, setup.env
    obs_dtype = jnp.dtype(env.spec.obs_dtype)
    state = state.replace(
        obs_stats=obs_norm.update_if_empty(state.obs_stats, env_state.envs.obs, setup.axis_name)
    )
    local_batch = local_batch_size(config.batch_size, config.num_envs,
                                   env_state.envs.obs.shape[0])

    def env_step(carry, t):
        state, es = carry
        act_key, env_key, update_key = jax.random.split(jax.random.fold_in(key, t), 3)
        vstate = es.envs
        keys = per_env_keys(act_key, vstate.env_ids)
        noise = correlated_noise(es.noise, white_noise(keys, setup.action_dim),
                                 config.noise_correlation)
        action = policy_or_explore(setup, state.params,
                                   obs_norm.normalize(state.obs_stats, vstate.obs), noise, keys,
                                   vstate.env_ids, state.env_steps)
        vstate, result = step_envs(env, vstate, action, env_key)
        row = transition(obs_dtype, es.envs.obs, action, result.reward, result.terminated,
                         result.info["final_observation"])
        state, buffer, metrics, learned = absorb_step(setup, state, es.replay, row, update_key,
                                                      local_batch)
        return (state, EnvState(vstate, buffer, noise)), (metrics, learned,
                                                   episode_metrics(result.info, None))

    (state, env_state), (metrics, learned, episodes) = jax.lax.scan(
        env_step, (state, env_state), jnp.arange(config.rollout_steps))
    episodes = collectives.psum(jax.tree.map(jnp.sum, episodes), setup.axis_name)
    return state, env_state, {**mean_over_learned(metrics, learned), **episodes}


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind TD3 (or DDPG, by its config) to `env` and `config`; gradients average over
    `axis_name`. ConfigError for a discrete or multi-axis action space."""
    config.validate()
    spec = env.spec
    if not isinstance(spec.action_space, Box):
        raise ConfigError(f"td3 and ddpg need a continuous (Box) action space; {spec.name} is "
                          "discrete")
    action_shape = tuple(spec.action_space.shape)
    if len(action_shape) != 1:
        raise ConfigError(f"td3 and ddpg need a 1-D Box action space, got shape {action_shape}")
    action_dim = int(math.prod(action_shape))
    low = jnp.asarray(spec.action_space.low, jnp.float32)
    high = jnp.asarray(spec.action_space.high, jnp.float32)
    actor = DeterministicActor(action_dim, tuple(config.hidden), config.activation)
    critic = Critic(tuple(config.hidden), config.activation, config.critic_layer_norm)
    loss = functools.partial(
        losses.td3_loss, actor=actor, critic=critic, low=low, high=high, gamma=config.gamma,
        twin_critics=config.twin_critics, policy_noise=config.policy_noise,
        noise_clip=config.noise_clip)
    setup = Setup(config, env, actor, critic, optax.scale_by_adam(), loss, low, high,
                  action_dim, axis_name)
    bind = functools.partial
    return Agent(config, spec, bind(init, setup), bind(init_envs, setup), bind(act, setup),
                 bind(update, setup), bind(train_step, setup), setup=setup)


def greedy_params(config: Config, params: Params) -> Params:
    """The parameters greedy play acts with: `params`, or with `greedy_target_actor` the
    target actor in the actor's place."""
    return params.replace(actor=params.target_actor) if config.greedy_target_actor else params


def greedy_action(agent: Agent) -> Callable[[State, jax.Array, jax.Array], jax.Array]:
    """The policy's actions without noise (the actor's, or the target actor's), for
    evaluation, serving and recording."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(
        greedy_params(agent.config, state.params), obs_norm.normalize(state.obs_stats, obs),
        key, greedy=True)


placement_problem = batch_placement_problem  # each device samples its share of the batch
