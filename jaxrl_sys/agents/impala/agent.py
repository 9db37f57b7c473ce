"""IMPALA: an actor-critic learning from V-trace targets (Espeholt et al. 2018), discrete and
Gaussian actions.

Pure functions over explicit state. `make(env, config)` binds the static parts (network,
optimiser, env) to the functions below and returns an `Agent` whose functions follow the
agent contract:

    init(key) -> State
    act(params, obs, key, greedy=False) -> (action, log_prob, value)
    update(state, trajectory, key) -> (state, metrics)
    train_step(state, env_state, key) -> (state, env_state, metrics)

A trajectory keeps the acting (behaviour) policy's log-probabilities; the learner re-reads
values and log-probabilities with its own parameters, and V-trace (losses.py) corrects for
the difference: none on the device loop's first pass (rho = 1), a parameter version or more
in later epochs and minibatches and under the host loop's staleness. Minibatches are whole
trajectories of a subset of envs (V-trace needs the sequence): minibatch m holds the envs
whose index on their device is m modulo `num_minibatches`, which, with every device holding
a contiguous block of ids, is the envs of global id m modulo `num_minibatches` whatever the
split over devices. Gradients are averaged with `lax.pmean` over `axis_name`, so N-device
training equals 1-device training with the same global batch.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.families.policy_gradient import (
    build_optimizer, collect_then_update, minibatch_step, rollout_unroll_for, sgd_epochs,
)
from jaxrl_sys.agents.impala.config import Config
from jaxrl_sys.agents.impala.losses import impala_loss
from jaxrl_sys.agents.impala.networks import (
    build_network, env_actions, sample_actions, sequence_outputs,
)
from jaxrl_sys.core import collectives
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.networks import ActorCritic, scan_unroll
from jaxrl_sys.core.rollout import (
    VecEnvState, empty_tally, episode_tally, episode_totals, per_env_keys, reset_envs, step_envs,
)
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics

DEFAULT_ENV = "CartPole-v1"


@struct.dataclass
class State:
    """Learner state: parameters, optimiser state and the iteration counter."""

    params: Any
    opt_state: Any
    iteration: jax.Array


class Trajectory(NamedTuple):
    """One rollout, time-major [T, B, ...], with the behaviour policy's log-probabilities."""

    obs: jax.Array
    actions: jax.Array
    log_probs: jax.Array  # of the acting (behaviour) policy
    rewards: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    next_obs: jax.Array  # the observation reached: the pre-reset one where an episode ended


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """IMPALA's pure functions bound to one env and config."""

    network: ActorCritic


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh parameters and optimiser state."""
    network = build_network(spec, config)
    params = network.init(key, jnp.zeros((1, *spec.obs_shape), jnp.float32))
    opt_state = build_optimizer(config).init(params)
    return State(params=params, opt_state=opt_state, iteration=jnp.zeros((), jnp.int32))


def collect(env: Env, network: ActorCritic, config: Config, axis_name: Optional[str],
            params: Any, env_state: VecEnvState,
            key: jax.Array) -> tuple[VecEnvState, Trajectory, Metrics]:
    """`rollout_steps` on every env with the policy of `params`: (env state after them,
    Trajectory [T, B, ...], episode metrics summed over envs and devices)."""
    def one_step(carry: tuple[VecEnvState, Metrics], t):
        """Act on every env [B] and step it; the step's record, its episodes tallied per env."""
        vstate, tally = carry
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        action, log_prob, _ = sample_actions(network, params, vstate.obs,
                                             per_env_keys(act_key, vstate.env_ids))
        next_vstate, result = step_envs(env, vstate, env_actions(env.spec, action), env_key)
        record = Trajectory(
            vstate.obs, action, log_prob, result.reward * config.reward_scale,
            result.terminated, result.truncated, result.info["final_observation"],
        )
        tally = jax.tree.map(jnp.add, tally, episode_tally(result.info))
        return (next_vstate, tally), record

    (vstate, tally), trajectory = jax.lax.scan(
        one_step, (env_state, empty_tally(env_state.env_ids.shape[0])),
        jnp.arange(config.rollout_steps), unroll=rollout_unroll_for(config))
    return vstate, trajectory, episode_totals(tally, axis_name)


def minibatch_loss(network: ActorCritic, config: Config, params: Any,
                   traj: Trajectory) -> tuple[jax.Array, Metrics]:
    """`losses.impala_loss` of a minibatch of whole trajectories [T, B_m, ...] under `params`."""
    log_probs, entropy, values, next_values = sequence_outputs(
        network, params, traj.obs, traj.actions, traj.next_obs
    )
    return impala_loss(
        log_probs, entropy, values, next_values, traj.log_probs, traj.rewards, traj.terminated,
        traj.truncated, gamma=config.gamma, lam=config.vtrace_lambda, rho_bar=config.rho_bar,
        vf_coef=config.vf_coef, ent_coef=config.ent_coef,
    )


def env_minibatches(traj: Trajectory, num_minibatches: int) -> Trajectory:
    """`traj` [T, B, ...] as [num_minibatches, T, B / num_minibatches, ...]: minibatch m holds
    the envs of local index m modulo num_minibatches."""
    envs = traj.obs.shape[1]
    if envs % num_minibatches:
        raise ConfigError(f"{envs} envs per device do not divide into "
                          f"num_minibatches={num_minibatches}")

    def split(x):
        """One leaf [T, B, ...] cut into the minibatches' envs."""
        x = x.reshape(x.shape[0], envs // num_minibatches, num_minibatches, *x.shape[2:])
        return jnp.moveaxis(x, 2, 0)

    return jax.tree.map(split, traj)


def update(network: ActorCritic, optimizer: optax.GradientTransformation, config: Config,
           axis_name: Optional[str], state: State, traj: Trajectory,
           key: jax.Array) -> tuple[State, Metrics]:
    """`update_epochs` passes over one trajectory [T, B, ...], each `num_minibatches` gradient
    steps on V-trace targets (gradients averaged over `axis_name`). Metrics: means over the
    steps. `key` is unused (the minibatches are fixed), kept for the contract's signature."""
    del key
    grad_fn = jax.grad(functools.partial(minibatch_loss, network, config), has_aux=True)
    minibatches = env_minibatches(traj, config.num_minibatches)
    (params, opt_state), metrics = sgd_epochs(
        functools.partial(minibatch_step, grad_fn, optimizer, axis_name),
        (state.params, state.opt_state), config.update_epochs, lambda _: minibatches,
        epoch_unroll=scan_unroll(config.torso, config.update_epochs),
        minibatch_unroll=scan_unroll(config.torso, config.num_minibatches))
    metrics = collectives.pmean(jax.tree.map(jnp.mean, metrics), axis_name)
    return State(params=params, opt_state=opt_state, iteration=state.iteration + 1), metrics


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind IMPALA to `env` and `config`; `axis_name` is the device axis gradients average over."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)
    bound_update = functools.partial(update, network, build_optimizer(config), config, axis_name)
    rollout = functools.partial(collect, env, network, config, axis_name)

    def init_envs(key: jax.Array, env_ids: jax.Array) -> VecEnvState:
        """Freshly reset envs of the global ids `env_ids` [B]."""
        return reset_envs(env, key, env_ids)

    return Agent(config, spec, functools.partial(init, spec=spec, config=config), init_envs,
                 functools.partial(sample_actions, network), bound_update,
                 functools.partial(collect_then_update, rollout, bound_update),
                 network=network)


def greedy_action(agent: Agent) -> Callable[[State, jax.Array, jax.Array], jax.Array]:
    """Deterministic actions [B] (argmax / Gaussian mean clipped to the bounds) for
    evaluation, from observations [B, ...]."""

    def policy(state: State, obs: jax.Array, key: jax.Array, legal=None,
               env_state=None) -> jax.Array:
        """Greedy actions [B] for observations [B, ...] (`key` unused by a greedy policy)."""
        del legal, env_state  # every action is legal; acting needs the observation only
        return env_actions(agent.spec, agent.act(state.params, obs, key, greedy=True)[0])

    return policy


DEFAULT_EVAL_EPISODES = 0  # the training returns already measure its (stochastic) policy
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


def placement_problem(config: Config, devices: int) -> Optional[str]:
    """None: minibatches are env subsets of each device's own envs, which `Config.validate`
    and the placement's even split already guarantee."""
    del config, devices
    return None
