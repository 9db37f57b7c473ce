"""Conservative Q-learning on a recorded dataset held on device (the offline family's
shards). Discrete actions: DQN's Q-learning with a target network copied every
`target_update_period` steps (double Q by default), plus CQL(H)'s penalty over every action.
Continuous actions: SAC with CQL(H)'s sampled penalty (continuous.py).

    init(key) -> State
    init_envs(key, shard_ids) -> DatasetShards
    act(params, obs, key, greedy=True) -> actions          argmax Q
    update(state, rows, key) -> (state, metrics)            one gradient step
    train_step(state, shards, key) -> (state, shards, metrics)   `updates_per_iteration` steps
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.cql import continuous
from jaxrl_sys.agents.cql.config import Config
from jaxrl_sys.agents.cql.losses import cql_loss, q_targets
from jaxrl_sys.agents.cql.networks import QNetwork, build_network
from jaxrl_sys.agents.families.offline import (
    Rows, init_shards, load_transitions, online_train_step, shards_placement_problem,
)
from jaxrl_sys.agents.families.q_learning import epsilon_greedy
from jaxrl_sys.core import collectives
from jaxrl_sys.core.types import BoundAgent, Box, Env, EnvSpec, Metrics
from jaxrl_sys.datasets.transitions import Transitions

DEFAULT_ENV = "CartPole-v1"
DEFAULT_EVAL_EPISODES = 16  # no episodes are played in training: evaluate greedily
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class State:
    """The Q-network's and target network's parameters, the optimiser state and the
    gradient steps taken."""

    params: Any
    target_params: Any
    opt_state: Any
    updates: jax.Array


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """CQL's functions bound to one env, config and dataset, with its network."""

    network: Any  # the QNetwork, or continuous.Networks
    data: Transitions  # the whole dataset, host arrays


def init(key: jax.Array, spec: EnvSpec, network: QNetwork,
         optimizer: optax.GradientTransformation) -> State:
    """A fresh Q-network, its target as a copy, and the optimiser state."""
    params = network.init(key, jnp.zeros((1, *spec.obs_shape), jnp.float32))
    return State(params=params, target_params=params, opt_state=optimizer.init(params),
                 updates=jnp.zeros((), jnp.int32))


def update(network: QNetwork, optimizer: optax.GradientTransformation, config: Config,
           axis_name: Optional[str], state: State, rows: Rows,
           key: jax.Array) -> tuple[State, Metrics]:
    """One gradient step on `rows` (this device's part of the batch), gradients averaged
    over devices; the target network is copied every `target_update_period` steps."""
    del key
    next_q_target = network.apply(state.target_params, rows.next_obs)
    next_q_online = network.apply(state.params, rows.next_obs)
    targets = q_targets(rows.rewards, rows.terminated.astype(jnp.float32), next_q_target,
                        next_q_online, config.gamma, config.double_q)

    def loss(params):
        return cql_loss(network.apply(params, rows.obs), rows.actions, targets,
                        config.cql_alpha)

    grads, metrics = jax.grad(loss, has_aux=True)(state.params)
    grads, metrics = collectives.pmean((grads, metrics), axis_name)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    count = state.updates + 1
    copy = count % config.target_update_period == 0
    target = jax.tree.map(lambda new, old: jnp.where(copy, new, old), params,
                          state.target_params)
    return State(params, target, opt_state, count), metrics


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind CQL to `env`, `config` and the dataset it names (discrete or continuous actions);
    `axis_name` is the device axis gradients average over."""
    config.validate()
    spec = env.spec
    data = load_transitions(config, spec)
    if isinstance(spec.action_space, Box):
        networks = continuous.build(spec, config)
        optimizer = optax.adam(config.learning_rate)
        bound_update = functools.partial(continuous.update, networks, optimizer, config,
                                         axis_name)
        init_fn = functools.partial(continuous.init, spec=spec, networks=networks,
                                    optimizer=optimizer)

        def act(params: Any, obs: jax.Array, key: jax.Array, greedy: bool = True) -> jax.Array:
            """The squashed mean's actions [B, D]; `key` and `greedy` are unused."""
            del key, greedy
            return continuous.greedy_actions(networks, params, obs)

        def explore(state: continuous.ContinuousState, obs: jax.Array,
                    keys: jax.Array) -> jax.Array:
            """Online, the shards' envs act by the actor's squashed draws (a key per env)."""
            return continuous.sampled_actions(networks, state.params, obs, keys)

        return Agent(config, spec, init_fn,
                     functools.partial(init_shards, data, config, online_env=env), act,
                     bound_update, online_train_step(bound_update, config, env, explore, axis_name),
                     network=networks, data=data)
    network = build_network(spec, config)
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                            optax.adam(config.learning_rate))
    bound_update = functools.partial(update, network, optimizer, config, axis_name)

    def greedy_q(params: Any, obs: jax.Array, key: jax.Array, greedy: bool = True) -> jax.Array:
        """argmax Q [B] for observations [B, ...]; `key` and `greedy` are unused."""
        del key, greedy
        return jnp.argmax(network.apply(params, obs), axis=-1).astype(jnp.int32)

    def explore(state: State, obs: jax.Array, keys: jax.Array) -> jax.Array:
        """Online, the shards' envs act epsilon-greedily (`online_epsilon`, a key per env)."""
        return epsilon_greedy(network, state.params, obs, keys, epsilon=config.online_epsilon)

    return Agent(
        config, spec,
        functools.partial(init, spec=spec, network=network, optimizer=optimizer),
        functools.partial(init_shards, data, config, online_env=env), greedy_q, bound_update,
        online_train_step(bound_update, config, env, explore, axis_name), network=network,
        data=data)


def greedy_action(agent: Agent) -> Callable[..., jax.Array]:
    """The greedy policy for evaluation: argmax Q [B], or the actor's squashed mean [B, D],
    for observations [B, ...]."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(state.params, obs, key)


def placement_problem(config: Config, devices: int) -> Optional[str]:
    """Each device samples from whole shards: the shards must divide over the devices."""
    return shards_placement_problem(config, devices)
