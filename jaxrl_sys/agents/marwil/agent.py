"""MARWIL and behaviour cloning on a recorded dataset held on device.

The dataset (a Minari dataset, `config.dataset`) is read once when the agent is made, its
discounted returns-to-go computed on device, and its rows dealt round-robin to `shards` shards
that stand where an online agent's envs are: split over devices, each sampling its share of
every batch from its own rows with a key of its global id, so N devices draw the same batch as
one. The shards live in the env state's `replay` (`--no-save-replay` leaves them out of the
checkpoints: they are the dataset, read again on resume).

    init(key) -> State
    init_envs(key, shard_ids) -> DatasetShards
    act(params, obs, key, greedy=True) -> actions          the policy's mode
    update(state, rows, key) -> (state, metrics)            one gradient step
    train_step(state, shards, key) -> (state, shards, metrics)   `updates_per_iteration` steps
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from jaxrl_sys.agents.marwil.config import Config
from jaxrl_sys.agents.marwil.losses import marwil_loss, updated_adv_norm
from jaxrl_sys.agents.marwil.networks import PolicyNetwork, ValueNetwork, build_networks
from jaxrl_sys.core import collectives
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.returns import episode_returns
from jaxrl_sys.core.rollout import per_env_keys
from jaxrl_sys.core.types import Box, BoundAgent, Env, EnvSpec, Metrics
from jaxrl_sys.datasets.minari_format import DatasetError, read_dataset
from jaxrl_sys.datasets.transitions import Transitions, from_episodes

DEFAULT_ENV = "CartPole-v1"
DEFAULT_EVAL_EPISODES = 16  # no episodes are played in training: evaluate greedily
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class State:
    """Both networks' parameters ({"policy", "value"}), the optimiser state, c^2 (the moving
    average of the squared advantage) and the gradient steps taken."""

    params: Any
    opt_state: Any
    adv_norm_sq: jax.Array
    updates: jax.Array


@struct.dataclass
class Rows:
    """Dataset rows: observations [..., *obs], actions and discounted returns-to-go."""

    obs: jax.Array
    actions: jax.Array
    returns: jax.Array


@struct.dataclass
class DatasetShards:
    """This device's shards: rows [S, R, ...] and the shards' global ids [S]."""

    replay: Rows
    env_ids: jax.Array


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """MARWIL's functions bound to one env, config and dataset, with its networks."""

    policy_network: PolicyNetwork
    value_network: ValueNetwork
    data: Transitions  # the whole dataset, host arrays


def load_transitions(config: Config, spec: EnvSpec) -> Transitions:
    """The dataset `config` names as transitions, or ConfigError (one line) when it cannot be
    read, was recorded in another env, or does not fit `spec`'s observations and actions."""
    if not config.dataset:
        raise ConfigError("this agent learns from a recorded dataset: --set dataset=PATH "
                          "(a Minari dataset, which jaxrl-record writes from a run)")
    try:
        dataset = read_dataset(config.dataset)
    except DatasetError as error:
        raise ConfigError(str(error)) from None
    if dataset.env_name is not None and dataset.env_name != spec.name:
        raise ConfigError(f"{config.dataset} was recorded in {dataset.env_name}; the run names "
                          f"{spec.name} (--env {dataset.env_name})")
    data = from_episodes(dataset.episodes)
    if tuple(data.obs.shape[1:]) != tuple(spec.obs_shape):
        raise ConfigError(f"{config.dataset}: observations of shape {data.obs.shape[1:]}, "
                          f"{spec.name}'s are {spec.obs_shape}")
    if isinstance(spec.action_space, Box):
        if tuple(data.actions.shape[1:]) != tuple(spec.action_space.shape):
            raise ConfigError(f"{config.dataset}: actions of shape {data.actions.shape[1:]}, "
                              f"{spec.name}'s are {spec.action_space.shape}")
        actions = data.actions.astype(np.float32)
    else:
        if data.actions.ndim != 1 or not np.issubdtype(data.actions.dtype, np.integer):
            raise ConfigError(f"{config.dataset}: {spec.name} takes one integer action per step")
        if data.actions.min() < 0 or data.actions.max() >= spec.action_space.n:
            raise ConfigError(f"{config.dataset}: actions outside 0..{spec.action_space.n - 1}")
        actions = data.actions.astype(np.int32)
    if data.size < config.shards:
        raise ConfigError(f"{config.dataset}: {data.size} transitions, fewer than "
                          f"shards={config.shards}")
    return data.replace(actions=actions)


def dealt_rows(data: Transitions, gamma: float, shards: int) -> Rows:
    """The dataset's rows with their discounted returns-to-go (episodes end where they
    terminate or are truncated; nothing is bootstrapped), dealt round-robin: row i goes to
    shard i % shards. The last M % shards rows are left out. Leaves [shards, M // shards, ...]."""
    returns, _ = episode_returns(jnp.asarray(data.rewards), jnp.asarray(data.terminated),
                                 jnp.asarray(data.truncated), gamma)
    rows = Rows(jnp.asarray(data.obs), jnp.asarray(data.actions), returns)
    per_shard = data.size // shards

    def deal(x: jax.Array) -> jax.Array:
        x = x[:per_shard * shards].reshape(per_shard, shards, *x.shape[1:])
        return jnp.swapaxes(x, 0, 1)

    return jax.tree.map(deal, rows)


def init_shards(data: Transitions, config: Config, key: jax.Array,
                env_ids: jax.Array) -> DatasetShards:
    """The shards of global ids `env_ids` [S]."""
    del key
    rows = dealt_rows(data, config.gamma, config.shards)
    return DatasetShards(replay=jax.tree.map(lambda x: x[env_ids], rows), env_ids=env_ids)


def sample_rows(shards: DatasetShards, key: jax.Array, per_shard: int) -> Rows:
    """`per_shard` rows drawn uniformly (with replacement) from each shard, with the shard's
    key (of its global id): [S * per_shard, ...]."""
    size = shards.replay.returns.shape[1]

    def one_shard(rows: Rows, shard_key: jax.Array) -> Rows:
        picks = jax.random.randint(shard_key, (per_shard,), 0, size)
        return jax.tree.map(lambda x: x[picks], rows)

    sampled = jax.vmap(one_shard)(shards.replay, per_env_keys(key, shards.env_ids))
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), sampled)


def build_optimizer(config: Config) -> optax.GradientTransformation:
    """Adam with the gradient's global norm clipped."""
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.adam(config.learning_rate))


def init(key: jax.Array, spec: EnvSpec, config: Config, policy_network: PolicyNetwork,
         value_network: ValueNetwork, optimizer: optax.GradientTransformation) -> State:
    """Fresh networks, optimiser state and c^2 at `adv_norm_start`."""
    policy_key, value_key = jax.random.split(key)
    obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
    params = {"policy": policy_network.init(policy_key, obs),
              "value": value_network.init(value_key, obs)}
    return State(params=params, opt_state=optimizer.init(params),
                 adv_norm_sq=jnp.asarray(config.adv_norm_start, jnp.float32),
                 updates=jnp.zeros((), jnp.int32))


def update(policy_network: PolicyNetwork, value_network: ValueNetwork,
           optimizer: optax.GradientTransformation, config: Config, continuous: bool,
           axis_name: Optional[str], state: State, rows: Rows,
           key: jax.Array) -> tuple[State, Metrics]:
    """One gradient step on `rows` (this device's part of the batch): gradients and c^2's
    batch statistics averaged over devices."""
    del key
    loss_fn = functools.partial(marwil_loss, policy_network.apply, value_network.apply,
                                beta=config.beta, value_loss_weight=config.value_loss_weight,
                                max_weight=config.max_weight, continuous=continuous)
    grads, (metrics, advantages) = jax.grad(loss_fn, has_aux=True)(
        state.params, rows, state.adv_norm_sq)
    grads, metrics = collectives.pmean((grads, metrics), axis_name)
    batch_mean_sq = collectives.pmean(jnp.mean(jnp.square(advantages)), axis_name)
    adv_norm_sq = updated_adv_norm(state.adv_norm_sq, batch_mean_sq, config.adv_norm_rate)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return State(params, opt_state, adv_norm_sq, state.updates + 1), metrics


def train_step(bound_update: Callable, config: Config, axis_name: Optional[str],
               state: State, shards: DatasetShards,
               key: jax.Array) -> tuple[State, DatasetShards, Metrics]:
    """`updates_per_iteration` gradient steps, each on a fresh batch; no env steps, so no
    episodes (the driver's greedy evaluation reports the return)."""
    per_shard = config.batch_size // config.shards

    def one_update(state: State, step_key: jax.Array):
        sample_key, update_key = jax.random.split(step_key)
        rows = sample_rows(shards, sample_key, per_shard)
        return bound_update(state, rows, update_key)

    state, metrics = jax.lax.scan(one_update, state,
                                  jax.random.split(key, config.updates_per_iteration))
    metrics = jax.tree.map(jnp.mean, metrics)
    zero = jnp.zeros((), jnp.float32)
    metrics.update(episode_return_sum=zero, episode_length_sum=zero, episode_count=zero,
                   adv_norm=jnp.sqrt(state.adv_norm_sq))
    del axis_name
    return state, shards, metrics


def policy_action(policy_network: PolicyNetwork, spec: EnvSpec, params: Any, obs: jax.Array,
                  key: jax.Array, greedy: bool = True) -> jax.Array:
    """The policy's mode for observations [B, ...]: the most likely action [B], or the
    Gaussian's mean clipped to the action bounds [B, D]; `key` and `greedy` are unused."""
    del key, greedy
    out, _ = policy_network.apply(params["policy"], obs)
    if isinstance(spec.action_space, Box):
        low = jnp.asarray(spec.action_space.low, jnp.float32)
        high = jnp.asarray(spec.action_space.high, jnp.float32)
        return jnp.clip(out.reshape(out.shape[0], *spec.action_space.shape), low, high)
    return jnp.argmax(out, axis=-1).astype(jnp.int32)


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind MARWIL to `env`, `config` and the dataset it names; `axis_name` is the device axis
    gradients average over."""
    config.validate()
    spec = env.spec
    data = load_transitions(config, spec)
    policy_network, value_network = build_networks(spec, config)
    optimizer = build_optimizer(config)
    bound_update = functools.partial(update, policy_network, value_network, optimizer, config,
                                     isinstance(spec.action_space, Box), axis_name)
    return Agent(
        config, spec,
        functools.partial(init, spec=spec, config=config, policy_network=policy_network,
                          value_network=value_network, optimizer=optimizer),
        functools.partial(init_shards, data, config),
        functools.partial(policy_action, policy_network, spec),
        bound_update,
        functools.partial(train_step, bound_update, config, axis_name),
        policy_network=policy_network, value_network=value_network, data=data)


def greedy_action(agent: Agent) -> Callable[..., jax.Array]:
    """The policy's mode for evaluation: actions [B] (or [B, D]) for observations [B, ...]."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(state.params, obs, key)


def placement_problem(config: Config, devices: int) -> Optional[str]:
    """Each device samples from whole shards: the shards must divide over the devices."""
    if config.shards % devices:
        return (f"shards={config.shards} does not divide over {devices} devices: each device "
                "samples from whole shards of the dataset")
    return None
