"""CQL on SAC for continuous actions (Kumar et al. 2020, CQL(H)): SAC's soft actor-critic
(the off-policy actor-critic family's actor and losses, twin critics with Polyak targets,
automatic entropy tuning) trained on the dataset, plus `cql_alpha` times the sampled
conservative penalty on each critic (`losses.sampled_conservative_penalty`, `cql_samples`
actions of each kind per state). The critics' target leaves out the entropy term unless
`backup_entropy` (CQL's reference code and CORL's default); the actor's, the critics' and
log alpha's gradients are clipped to `max_grad_norm` each."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.cql.config import Config
from jaxrl_sys.agents.cql.losses import sampled_conservative_penalty
from jaxrl_sys.agents.families.continuous_control import (
    Critic, global_noise, init_twin_critics, to_env_units, to_unit_box, twin_q_values,
    white_noise,
)
from jaxrl_sys.agents.families.offline import Rows, clip_per_network
from jaxrl_sys.agents.families.soft_actor import Actor, tanh_gaussian_sample
from jaxrl_sys.agents.families.soft_actor_losses import (
    actor_loss, alpha_loss, critic_loss, soft_target,
)
from jaxrl_sys.core import collectives
from jaxrl_sys.core.types import EnvSpec, Metrics


class Trainable(NamedTuple):
    """What the optimiser moves: the actor's and critics' parameters and log alpha."""

    actor: Any
    critic: Any
    log_alpha: jax.Array


@struct.dataclass
class ContinuousState:
    """The trainable parameters, the target critics, the optimiser state and the gradient
    steps taken."""

    params: Trainable
    target_critic: Any
    opt_state: Any
    updates: jax.Array


class Networks(NamedTuple):
    """The actor, the critic module and the action box."""

    actor: Actor
    critic: Critic
    low: jax.Array
    high: jax.Array

    @property
    def action_dim(self) -> int:
        """The number of action dimensions D."""
        return int(self.low.shape[0])


def build(spec: EnvSpec, config: Config) -> Networks:
    """The actor and critic for `spec`'s action box."""
    low = jnp.asarray(spec.action_space.low, jnp.float32).reshape(-1)
    high = jnp.asarray(spec.action_space.high, jnp.float32).reshape(-1)
    return Networks(Actor(low.shape[0], tuple(config.hidden), config.activation),
                    Critic(tuple(config.hidden), config.activation), low, high)


def init(key: jax.Array, spec: EnvSpec, networks: Networks,
         optimizer: optax.GradientTransformation) -> ContinuousState:
    """A fresh actor, twin critics (the targets as copies), alpha 1 and the optimiser."""
    actor_key, critic_key = jax.random.split(key)
    obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
    critic = init_twin_critics(networks.critic, critic_key, obs, networks.action_dim)
    params = Trainable(networks.actor.init(actor_key, obs), critic, jnp.zeros((), jnp.float32))
    return ContinuousState(params, critic, optimizer.init(params), jnp.zeros((), jnp.int32))


def repeat_rows(arrays: tuple[jax.Array, ...], times: int) -> tuple[jax.Array, ...]:
    """Each array's rows repeated `times` times in place ([B, ...] -> [B * times, ...]), as
    `jnp.repeat` lays out the repeated states."""
    return tuple(jnp.repeat(array, times, axis=0) for array in arrays)


def cql_sac_loss(networks: Networks, config: Config, axis_name: Optional[str],
                 params: Trainable, target_critic: Any, rows: Rows,
                 key: jax.Array) -> tuple[jax.Array, Metrics]:
    """SAC's three losses on the batch plus `cql_alpha` times the conservative penalty,
    summed (each term reaches its own parameters only, as in `sac.losses.sac_loss`). Every
    sampled action's noise is this device's slice of the global batch's, so N devices draw
    what one device draws."""
    actor, critic, dim = networks.actor, networks.critic, networks.action_dim
    alpha = jax.lax.stop_gradient(jnp.exp(params.log_alpha))
    obs, next_obs = rows.obs.astype(jnp.float32), rows.next_obs.astype(jnp.float32)
    batch, samples = obs.shape[0], config.cql_samples
    now_key, next_key, random_key, current_key, ahead_key = jax.random.split(key, 5)

    def q_values(critic_params: Any, states: jax.Array, actions: jax.Array) -> jax.Array:
        """The twins' Q [2, B'], applied apart (`twin_q_values`: faster here on CPU)."""
        return twin_q_values(critic, critic_params, states, actions, apart=True)

    def noise(noise_key: jax.Array, per_row: int = 1, draw=jax.random.normal) -> jax.Array:
        """This device's [B * per_row, D] of the global batch's noise."""
        drawn = global_noise(axis_name, noise_key, batch, (per_row, dim), draw)
        return drawn.reshape(batch * per_row, dim)

    policy_now = actor.apply(params.actor, obs)  # (mean, log_std), each [B, A]
    a_now, log_prob_now = tanh_gaussian_sample(*policy_now, noise(now_key))
    frozen_now = jax.lax.stop_gradient(policy_now)
    policy_next = actor.apply(jax.lax.stop_gradient(params.actor), next_obs)
    next_a, next_log_prob = tanh_gaussian_sample(*policy_next, noise(next_key))
    # CQL's reference code and CORL back up without the entropy term unless asked
    target = soft_target(rows.rewards, rows.terminated,
                         q_values(target_critic, next_obs, next_a),
                         next_log_prob, alpha * config.backup_entropy, config.gamma, 1.0)
    q_data = q_values(params.critic, obs,
                      to_unit_box(rows.actions.reshape(batch, dim), networks.low, networks.high))
    critic_term = critic_loss(q_data, target)

    repeated = jnp.repeat(obs, samples, axis=0)  # [B * N, ...]: each state N times
    random_a = noise(random_key, samples,
                     lambda k, s: jax.random.uniform(k, s, minval=-1.0, maxval=1.0))
    # the policy at s and at s' as computed above, each row repeated N times: the actor's
    # outputs on a repeated state are its outputs on the state
    current_a, current_log_pi = tanh_gaussian_sample(*repeat_rows(frozen_now, samples),
                                                     noise(current_key, samples))
    ahead_a, ahead_log_pi = tanh_gaussian_sample(*repeat_rows(policy_next, samples),
                                                 noise(ahead_key, samples))

    def q_at(actions: jax.Array) -> jax.Array:
        """Both critics' Q at the repeated states [2, B, N]."""
        return q_values(params.critic, repeated, actions).reshape(2, batch, samples)

    penalty = sampled_conservative_penalty(
        q_at(random_a), q_at(current_a), current_log_pi.reshape(batch, samples),
        q_at(ahead_a), ahead_log_pi.reshape(batch, samples), q_data, dim)

    q_pi = q_values(jax.lax.stop_gradient(params.critic), obs, a_now)
    actor_term = actor_loss(log_prob_now, q_pi, alpha)
    alpha_term = alpha_loss(params.log_alpha, log_prob_now, -float(dim))
    metrics = {"critic_loss": critic_term, "cql_penalty": penalty, "actor_loss": actor_term,
               "alpha": alpha, "entropy": -jnp.mean(log_prob_now), "q_mean": jnp.mean(q_data)}
    return critic_term + config.cql_alpha * penalty + actor_term + alpha_term, metrics


def update(networks: Networks, optimizer: optax.GradientTransformation, config: Config,
           axis_name: Optional[str], state: ContinuousState, rows: Rows,
           key: jax.Array) -> tuple[ContinuousState, Metrics]:
    """One gradient step on `rows` (this device's part of the batch), gradients averaged
    over devices; the target critics move by `tau`."""

    def loss(params: Trainable):
        return cql_sac_loss(networks, config, axis_name, params, state.target_critic, rows,
                            key)

    grads, metrics = jax.grad(loss, has_aux=True)(state.params)
    grads, metrics = collectives.pmean((grads, metrics), axis_name)
    grads = clip_per_network(grads, config.max_grad_norm)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    target = optax.incremental_update(params.critic, state.target_critic, config.tau)
    return ContinuousState(params, target, opt_state, state.updates + 1), metrics


def greedy_actions(networks: Networks, params: Trainable, obs: jax.Array) -> jax.Array:
    """The squashed mean's actions [B, D] in env units for observations [B, ...]."""
    mean, _ = networks.actor.apply(params.actor, obs.astype(jnp.float32))
    return to_env_units(jnp.tanh(mean), networks.low, networks.high)


def sampled_actions(networks: Networks, params: Trainable, obs: jax.Array,
                    keys: jax.Array) -> jax.Array:
    """The actor's squashed draws [B, D] in env units for observations [B, ...], one key per
    row [B] (online fine-tuning's exploration)."""
    mean, log_std = networks.actor.apply(params.actor, obs.astype(jnp.float32))
    unit, _ = tanh_gaussian_sample(mean, log_std, white_noise(keys, networks.action_dim))
    return to_env_units(unit, networks.low, networks.high)
