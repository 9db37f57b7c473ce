"""SAC's learner: the initial state, one gradient step on every loss, and absorbing a vector
step's transitions into replay followed by `updates_per_step` such steps."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import optax

from jaxrl_sys.agents.sac.config import Config
from jaxrl_sys.agents.sac.networks import init_twin_critics
from jaxrl_sys.agents.sac.types import Params, Setup, State, Trainable
from jaxrl_sys.core import collectives, obs_norm, replay
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.learner import device_key, when_ready
from jaxrl_sys.core.types import Metrics


def init(setup: Setup, key: jax.Array) -> State:
    """Fresh actor, twin critics (targets equal to them), log alpha, Adam moments, counters."""
    config, spec = setup.config, setup.env.spec
    actor_key, critic_key = jax.random.split(key)
    obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
    actor_params = setup.actor.init(actor_key, obs)
    critic_params = init_twin_critics(setup.critic, critic_key, obs, setup.action_dim)
    params = Params(
        actor=actor_params,
        critic=critic_params,
        target_critic=critic_params,
        log_alpha=jnp.asarray(math.log(config.initial_alpha), jnp.float32),
    )
    trainable = Trainable(params.actor, params.critic, params.log_alpha)
    opt_state = setup.optimizer.init(trainable)
    zero = jnp.zeros((), jnp.int32)
    return State(params=params, opt_state=opt_state, env_steps=zero, updates=zero,
                 obs_stats=obs_norm.init_stats(config.normalize_obs, spec.obs_shape))


def global_noise(setup: Setup, key: jax.Array, local_batch: int) -> jax.Array:
    """This device's slice [local_batch, A] of the policy noise drawn for the global batch,
    so that N devices draw what 1 device would."""
    devices = collectives.axis_size(setup.axis_name)
    if devices == 1:
        return jax.random.normal(key, (local_batch, setup.action_dim))
    noise = jax.random.normal(key, (devices * local_batch, setup.action_dim))
    start = collectives.axis_index(setup.axis_name) * local_batch
    return jax.lax.dynamic_slice_in_dim(noise, start, local_batch)


def update(setup: Setup, state: State, batch: dict, key: jax.Array) -> tuple[State, Metrics]:
    """One Adam step on the critics, the actor and alpha, then Polyak-average the targets.

    `batch` holds this device's share of the global batch (leaves [B_local, ...]); keys
    obs, action (env units), reward, terminated, next_obs. The three losses are taken from
    the same parameters (the actor's Q is the critics' before this step). Each trainable part
    takes its own learning rate on its own Adam moments.
    """
    config, params = setup.config, state.params
    batch = {  # stored raw: normalised with the statistics of now
        **batch,
        "obs": obs_norm.normalize(state.obs_stats, batch["obs"].astype(jnp.float32)),
        "next_obs": obs_norm.normalize(state.obs_stats, batch["next_obs"].astype(jnp.float32)),
    }
    local_batch = batch["obs"].shape[0]
    now_key, next_key = jax.random.split(key)
    trainable = Trainable(params.actor, params.critic, params.log_alpha)
    grads, metrics = jax.grad(setup.loss, has_aux=True)(
        trainable, params.target_critic, batch,
        global_noise(setup, now_key, local_batch), global_noise(setup, next_key, local_batch),
    )
    grads = collectives.pmean(grads, setup.axis_name)
    steps, opt_state = setup.optimizer.update(grads, state.opt_state)
    learning_rates = Trainable(config.actor_learning_rate, config.critic_learning_rate,
                               config.alpha_learning_rate)
    new = Trainable(*[
        jax.tree.map(lambda p, u, lr=lr: p - lr * u, part, step)
        for part, step, lr in zip(trainable, steps, learning_rates)
    ])
    target_critic = optax.incremental_update(new.critic, params.target_critic, config.tau)
    new_state = state.replace(
        params=Params(new.actor, new.critic, target_critic, new.log_alpha),
        opt_state=opt_state,
        updates=state.updates + 1,
    )
    return new_state, collectives.pmean(metrics, setup.axis_name)


def local_batch_size(config: Config, local_envs: int) -> int:
    """This device's share of the global batch: batch_size * local_envs / num_envs."""
    share = config.batch_size * local_envs
    if share % config.num_envs:
        devices = config.num_envs // local_envs
        raise ConfigError(
            f"batch_size={config.batch_size} does not divide over {devices} devices"
        )
    return share // config.num_envs


def mean_over_learned(metrics: Metrics, learned: jax.Array) -> Metrics:
    """Per-step metrics [T] averaged over the steps that learned ([T], 0 or 1); NaN if none
    did (the driver averages with nanmean)."""
    count = jnp.sum(learned)
    return jax.tree.map(
        lambda m: jnp.where(count > 0, jnp.sum(m) / jnp.maximum(count, 1.0), jnp.nan), metrics
    )


def absorb(setup: Setup, state: State, buffer: replay.ReplayState, transition: dict,
           key: jax.Array, local_batch: int
           ) -> tuple[State, replay.ReplayState, Metrics, jax.Array]:
    """Add one vector step's transitions (leaves [local envs, ...]) to `buffer`, then take
    `updates_per_step` updates once past `learning_starts`. Shared with the host loop.

    Returns (state, buffer, metrics averaged over the updates or 0, whether it learned).
    """
    config = setup.config
    buffer = replay.add(buffer, transition)
    state = state.replace(
        env_steps=state.env_steps + config.num_envs,
        obs_stats=obs_norm.update(state.obs_stats, transition["obs"], setup.axis_name),
    )
    learn = state.env_steps >= config.learning_starts

    def updates(state, buffer, key):
        sample_key, grad_key = jax.random.split(key)
        # every update's batch in one draw: [updates, local batch, ...]
        batches, _ = replay.sample(buffer, device_key(sample_key, setup.axis_name),
                                   config.updates_per_step * local_batch)
        batches = jax.tree.map(
            lambda x: x.reshape(config.updates_per_step, local_batch, *x.shape[1:]), batches)

        def one_update(state, batch_and_u):
            batch, u = batch_and_u
            return update(setup, state, batch, jax.random.fold_in(grad_key, u))

        state, metrics = jax.lax.scan(
            one_update, state, (batches, jnp.arange(config.updates_per_step)))
        return state, buffer, jax.tree.map(jnp.mean, metrics)

    state, buffer, metrics = when_ready(learn, updates, state, buffer, key)
    metrics = jax.tree.map(lambda m: jnp.where(learn, m, 0.0), metrics)
    return state, buffer, metrics, learn.astype(jnp.float32)
