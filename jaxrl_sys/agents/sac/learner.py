"""SAC's learner: the initial state, one gradient step on every loss, and absorbing a vector
step's transitions into replay followed by `updates_per_step` such steps."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import optax

from jaxrl_sys.agents.families.continuous_control import absorb as absorb_transitions
from jaxrl_sys.agents.families.continuous_control import global_noise, init_twin_critics
from jaxrl_sys.agents.sac.types import Params, Setup, State, Trainable
from jaxrl_sys.core import collectives, obs_norm, replay
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
        global_noise(setup.axis_name, now_key, local_batch, setup.action_dim),
        global_noise(setup.axis_name, next_key, local_batch, setup.action_dim),
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


def absorb(setup: Setup, state: State, buffer: replay.ReplayState, transition: dict,
           key: jax.Array, local_batch: int
           ) -> tuple[State, replay.ReplayState, Metrics, jax.Array]:
    """Add one vector step's transitions (leaves [local envs, ...]) to `buffer`, then take
    `updates_per_step` SAC updates once past `learning_starts` (the family's `absorb`).
    Shared with the host loop.

    Returns (state, buffer, metrics averaged over the updates or 0, whether it learned).
    """
    return absorb_transitions(setup.config, setup.axis_name, functools.partial(update, setup),
                              state, buffer, transition, key, local_batch)
