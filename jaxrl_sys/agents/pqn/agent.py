"""PQN (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning"): Q-learning
with no replay and no target network. Many envs act epsilon-greedily for `rollout_steps`;
Q(lambda) targets are computed backwards over the rollout with the acting parameters; then a
few epochs of minibatch gradient steps on the squared error, gradients averaged over
`axis_name`. LayerNorm in the Q-network keeps this stable.

The rollout, minibatching (each env's steps permuted with a key of its global id, so N devices
equal one) and the epoch loop are the policy-gradient family's; epsilon-greedy acting and its
schedule are the Q-learning family's.

    init(key) -> State
    act(params, obs, key, greedy=False, epsilon=0.0) -> actions
    update(state, trajectory, key) -> (state, metrics)
    train_step(state, env_state, key) -> (state, env_state, metrics)
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
    build_optimizer, minibatch_step, rollout_unroll_for, sgd_epochs, shuffled_minibatches,
)
from jaxrl_sys.agents.families.q_learning import epsilon_at, epsilon_greedy
from jaxrl_sys.agents.pqn.config import Config
from jaxrl_sys.agents.pqn.losses import q_lambda_targets, q_loss
from jaxrl_sys.agents.pqn.networks import NormedQNetwork, build_network
from jaxrl_sys.core import collectives
from jaxrl_sys.core.networks import scan_unroll
from jaxrl_sys.core.rollout import (
    VecEnvState, empty_tally, episode_tally, episode_totals, per_env_keys, reset_envs, step_envs,
)
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics

DEFAULT_EVAL_EPISODES = 32  # training returns are epsilon-greedy; report the greedy policy
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class State:
    """Learner state: parameters, optimiser state, iterations done (the epsilon schedule's
    clock)."""

    params: Any
    opt_state: Any
    iteration: jax.Array


class Trajectory(NamedTuple):
    """One rollout, time-major [T, B, ...], with the targets' inputs."""

    obs: jax.Array
    actions: jax.Array
    rewards: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    next_q: jax.Array  # [T, B] max_a Q of the reached state, under the acting parameters
    env_ids: jax.Array  # [B]


class Batch(NamedTuple):
    """What a gradient step learns from, [M, B, ...]: observations, actions, targets."""

    obs: jax.Array
    actions: jax.Array
    targets: jax.Array


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """PQN's pure functions bound to one env and config."""

    network: NormedQNetwork


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh parameters and optimiser state."""
    params = build_network(spec, config).init(key, jnp.zeros((1, *spec.obs_shape), jnp.float32))
    return State(params=params, opt_state=build_optimizer(config).init(params),
                 iteration=jnp.zeros((), jnp.int32))


def max_q(network: NormedQNetwork, params: Any, obs: jax.Array) -> jax.Array:
    """max_a Q(obs, a) [T, B] of observations [T, B, ...], in one batched pass."""
    steps, envs = obs.shape[:2]
    q = network.apply(params, obs.reshape(steps * envs, *obs.shape[2:]))
    return q.max(axis=-1).reshape(steps, envs)


def collect(env: Env, network: NormedQNetwork, config: Config, axis_name: Optional[str],
            params: Any, epsilon: jax.Array, env_state: VecEnvState,
            key: jax.Array) -> tuple[VecEnvState, Trajectory, Metrics]:
    """`rollout_steps` epsilon-greedy steps on every env: (env state after them, Trajectory
    [T, B, ...], episode metrics summed over envs and devices). The loop acts and steps only;
    the reached states are valued after it."""
    def one_step(carry: tuple[VecEnvState, Metrics], t):
        """Act on every env [B] and step it; the step's record, its episodes tallied per env."""
        vstate, tally = carry
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        action = epsilon_greedy(network, params, vstate.obs,
                                per_env_keys(act_key, vstate.env_ids), epsilon=epsilon)
        next_vstate, result = step_envs(env, vstate, action, env_key)
        record = (vstate.obs, action, result.reward * config.reward_scale, result.terminated,
                  result.truncated, result.info["final_observation"])
        tally = jax.tree.map(jnp.add, tally, episode_tally(result.info))
        return (next_vstate, tally), record

    (vstate, tally), records = jax.lax.scan(
        one_step, (env_state, empty_tally(env_state.env_ids.shape[0])),
        jnp.arange(config.rollout_steps), unroll=rollout_unroll_for(config))
    obs, actions, rewards, terminated, truncated, reached = records
    trajectory = Trajectory(obs, actions, rewards, terminated, truncated,
                            max_q(network, params, reached), env_state.env_ids)
    return vstate, trajectory, episode_totals(tally, axis_name)


def minibatch_loss(network: NormedQNetwork, params: Any,
                   batch: Batch) -> tuple[jax.Array, Metrics]:
    """`losses.q_loss` of a minibatch [M, B, ...] under `params`, and the mean taken Q."""
    obs = batch.obs.reshape(-1, *batch.obs.shape[2:])
    q = network.apply(params, obs)
    taken = jnp.take_along_axis(q, batch.actions.reshape(-1, 1).astype(jnp.int32), axis=-1)[:, 0]
    loss = q_loss(taken, batch.targets.reshape(-1))
    return loss, {"loss": loss, "q_mean": jnp.mean(taken)}


def update(network: NormedQNetwork, optimizer: optax.GradientTransformation, config: Config,
           axis_name: Optional[str], state: State, traj: Trajectory,
           key: jax.Array) -> tuple[State, Metrics]:
    """Q(lambda) targets of one rollout [T, B, ...], then `update_epochs` passes of shuffled
    minibatch gradient steps (gradients averaged over `axis_name`). Metrics: means over the
    steps."""
    targets = q_lambda_targets(traj.rewards, traj.next_q, traj.terminated, traj.truncated,
                               config.gamma, config.q_lambda)
    data = Batch(traj.obs, traj.actions, targets)
    grad_fn = jax.grad(functools.partial(minibatch_loss, network), has_aux=True)
    step = functools.partial(minibatch_step, grad_fn, optimizer, axis_name)
    (params, opt_state), metrics = sgd_epochs(
        step, (state.params, state.opt_state), config.update_epochs,
        lambda epoch: shuffled_minibatches(data, traj.env_ids, jax.random.fold_in(key, epoch),
                                           config),
        epoch_unroll=scan_unroll(config.torso, config.update_epochs),
        minibatch_unroll=scan_unroll(config.torso, config.num_minibatches))
    metrics = collectives.pmean(jax.tree.map(jnp.mean, metrics), axis_name)
    return State(params=params, opt_state=opt_state, iteration=state.iteration + 1), metrics


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind PQN to `env` and `config`; `axis_name` is the device axis gradients average over."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)
    bound_update = functools.partial(update, network, build_optimizer(config), config, axis_name)
    rollout = functools.partial(collect, env, network, config, axis_name)

    def train_step(state: State, env_state: VecEnvState, key: jax.Array):
        """Collect `rollout_steps` on every env at the schedule's epsilon, then learn."""
        rollout_key, update_key = jax.random.split(key)
        epsilon = epsilon_at(config, state.iteration * config.steps_per_iteration)
        env_state, traj, episodes = rollout(state.params, epsilon, env_state, rollout_key)
        state, metrics = bound_update(state, traj, update_key)
        return state, env_state, {**metrics, **episodes, "epsilon": epsilon}

    return Agent(config, spec, functools.partial(init, spec=spec, config=config),
                 functools.partial(reset_envs, env), functools.partial(epsilon_greedy, network),
                 bound_update, train_step, network=network)


def greedy_action(agent: Agent) -> Callable[[State, jax.Array, jax.Array], jax.Array]:
    """Greedy (argmax Q) actions [B] for evaluation, from observations [B, ...]."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(
        state.params, obs, key, greedy=True)


def placement_problem(config: Config, devices: int) -> Optional[str]:
    """None: minibatches are time steps of every env, so any split of the envs works."""
    del config, devices
    return None
