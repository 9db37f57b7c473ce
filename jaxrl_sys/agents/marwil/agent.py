"""MARWIL and behaviour cloning on a recorded dataset held on device.

The dataset (a Minari dataset, `config.dataset`) is read once when the agent is made and held
on device as the offline family's shards (`families.offline`: rows with discounted
returns-to-go, split over devices like envs, each drawing its share of every batch by its
global id, so N devices draw the batch one device draws).

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
import optax
from flax import struct

from jaxrl_sys.agents.families.offline import (
    Rows, clip_per_network, gradient_steps, init_shards, load_transitions,
    shards_placement_problem,
)
from jaxrl_sys.agents.families.offline_networks import policy_mode
from jaxrl_sys.agents.marwil.config import Config
from jaxrl_sys.agents.marwil.losses import marwil_loss, updated_adv_norm
from jaxrl_sys.agents.marwil.networks import PolicyNetwork, ValueNetwork, build_networks
from jaxrl_sys.core import collectives
from jaxrl_sys.core.types import Box, BoundAgent, Env, EnvSpec, Metrics
from jaxrl_sys.datasets.transitions import Transitions

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


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """MARWIL's functions bound to one env, config and dataset, with its networks."""

    policy_network: PolicyNetwork
    value_network: ValueNetwork
    data: Transitions  # the whole dataset, host arrays


def build_optimizer(config: Config) -> optax.GradientTransformation:
    """Adam (each network's gradient is clipped on its own before it, `update`)."""
    return optax.adam(config.learning_rate)


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
    grads = clip_per_network(grads, config.max_grad_norm)
    batch_mean_sq = collectives.pmean(jnp.mean(jnp.square(advantages)), axis_name)
    adv_norm_sq = updated_adv_norm(state.adv_norm_sq, batch_mean_sq, config.adv_norm_rate)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {**metrics, "adv_norm": jnp.sqrt(adv_norm_sq)}
    return State(params, opt_state, adv_norm_sq, state.updates + 1), metrics


def policy_action(policy_network: PolicyNetwork, spec: EnvSpec, params: Any, obs: jax.Array,
                  key: jax.Array, greedy: bool = True) -> jax.Array:
    """The policy's mode for observations [B, ...] (`families.offline_networks.policy_mode`);
    `key` and `greedy` are unused."""
    del key, greedy
    return policy_mode(policy_network, spec, params["policy"], obs)


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
        functools.partial(gradient_steps, bound_update, config),
        policy_network=policy_network, value_network=value_network, data=data)


def greedy_action(agent: Agent) -> Callable[..., jax.Array]:
    """The policy's mode for evaluation: actions [B] (or [B, D]) for observations [B, ...]."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(state.params, obs, key)


def placement_problem(config: Config, devices: int) -> Optional[str]:
    """Each device samples from whole shards: the shards must divide over the devices."""
    return shards_placement_problem(config, devices)
