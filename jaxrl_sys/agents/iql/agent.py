"""Implicit Q-learning on a recorded dataset held on device (the offline family's shards).

Every gradient step trains three networks on one batch, each on its own loss (one Adam over
all three, each network's gradient clipped on its own): V(s) towards the `expectile` of the
target critics' min Q(s, a) over the data's actions; twin critics towards
r + gamma * V(s'); and the policy by advantage-weighted regression with weights
exp(temperature * (min target Q - V)). The target critics follow by Polyak averaging.

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
    Rows, clip_per_network, init_shards, load_transitions, online_train_step,
    shards_placement_problem,
)
from jaxrl_sys.agents.families.offline_networks import (
    action_log_probs, policy_mode, policy_sample,
)
from jaxrl_sys.agents.iql.config import Config
from jaxrl_sys.agents.iql.losses import (
    awr_policy_loss, critic_targets, expectile_loss, twin_critic_loss,
)
from jaxrl_sys.agents.iql.networks import PolicyNetwork, TwinCritics, ValueNetwork, build
from jaxrl_sys.core import collectives
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics
from jaxrl_sys.datasets.transitions import Transitions

DEFAULT_ENV = "Pendulum-v1"
DEFAULT_EVAL_EPISODES = 16  # no episodes are played in training: evaluate greedily
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class State:
    """The networks' parameters ({"policy", "value", "q"}), the target critics, the
    optimiser state and the gradient steps taken."""

    params: Any
    target_q: Any
    opt_state: Any
    updates: jax.Array


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """IQL's functions bound to one env, config and dataset, with its networks."""

    policy_network: PolicyNetwork
    value_network: ValueNetwork
    critics: TwinCritics
    data: Transitions  # the whole dataset, host arrays


def init(key: jax.Array, spec: EnvSpec, policy_network: PolicyNetwork,
         value_network: ValueNetwork, critics: TwinCritics,
         optimizer: optax.GradientTransformation) -> State:
    """Fresh networks, the target critics as copies, and the optimiser state."""
    policy_key, value_key, q_key = jax.random.split(key, 3)
    obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
    params = {"policy": policy_network.init(policy_key, obs),
              "value": value_network.init(value_key, obs), "q": critics.init(q_key, obs)}
    return State(params=params, target_q=params["q"], opt_state=optimizer.init(params),
                 updates=jnp.zeros((), jnp.int32))


def iql_loss(policy_network: PolicyNetwork, value_network: ValueNetwork,
             critics: TwinCritics, config: Config, continuous: bool, params: Any,
             target_q: Any, rows: Rows) -> tuple[jax.Array, Metrics]:
    """The three losses on one batch, summed (each reaches its own network only)."""
    q_data = jnp.min(critics.values(target_q, rows.obs, rows.actions), axis=0)  # [B]
    values = value_network.apply(params["value"], rows.obs)
    value_loss = expectile_loss(q_data - values, config.expectile)
    next_values = value_network.apply(params["value"], rows.next_obs)
    targets = critic_targets(rows.rewards, rows.terminated.astype(jnp.float32), next_values,
                             config.gamma)
    critic_loss = twin_critic_loss(critics.values(params["q"], rows.obs, rows.actions), targets)
    out, log_std = policy_network.apply(params["policy"], rows.obs)
    log_probs = action_log_probs(out, log_std, rows.actions, continuous)
    policy_loss, weights = awr_policy_loss(log_probs, q_data - jax.lax.stop_gradient(values),
                                           config.temperature, config.max_weight)
    metrics = {"value_loss": value_loss, "critic_loss": critic_loss, "policy_loss": policy_loss,
               "q_mean": jnp.mean(q_data), "weight_mean": jnp.mean(weights)}
    return value_loss + critic_loss + policy_loss, metrics


def update(loss: Callable, optimizer: optax.GradientTransformation, config: Config,
           axis_name: Optional[str], state: State, rows: Rows,
           key: jax.Array) -> tuple[State, Metrics]:
    """One gradient step on `rows` (this device's part of the batch), gradients averaged
    over devices; the target critics move by `tau`."""
    del key
    grads, metrics = jax.grad(loss, has_aux=True)(state.params, state.target_q, rows)
    grads, metrics = collectives.pmean((grads, metrics), axis_name)
    grads = clip_per_network(grads, config.max_grad_norm)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    target_q = optax.incremental_update(params["q"], state.target_q, config.tau)
    return State(params, target_q, opt_state, state.updates + 1), metrics


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind IQL to `env`, `config` and the dataset it names; `axis_name` is the device axis
    gradients average over."""
    config.validate()
    spec = env.spec
    data = load_transitions(config, spec)
    policy_network, value_network, critics = build(spec, config)
    optimizer = optax.adam(config.learning_rate)
    loss = functools.partial(iql_loss, policy_network, value_network, critics, config,
                             critics.continuous)
    bound_update = functools.partial(update, loss, optimizer, config, axis_name)

    def act(params: Any, obs: jax.Array, key: jax.Array, greedy: bool = True) -> jax.Array:
        """The policy's mode for observations [B, ...]; `key` and `greedy` are unused."""
        del key, greedy
        return policy_mode(policy_network, spec, params["policy"], obs)

    def explore(state: State, obs: jax.Array, keys: jax.Array) -> jax.Array:
        """Online, the shards' envs act by the policy's draws (one key per env [S])."""
        return policy_sample(policy_network, spec, state.params["policy"], obs, keys)

    return Agent(
        config, spec,
        functools.partial(init, spec=spec, policy_network=policy_network,
                          value_network=value_network, critics=critics, optimizer=optimizer),
        functools.partial(init_shards, data, config, online_env=env), act, bound_update,
        online_train_step(bound_update, config, env, explore, axis_name),
        policy_network=policy_network, value_network=value_network, critics=critics, data=data)


def greedy_action(agent: Agent) -> Callable[..., jax.Array]:
    """The policy's mode for evaluation: actions [B] (or [B, D]) for observations [B, ...]."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(state.params, obs, key)


def placement_problem(config: Config, devices: int) -> Optional[str]:
    """Each device samples from whole shards: the shards must divide over the devices."""
    return shards_placement_problem(config, devices)
