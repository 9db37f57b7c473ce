"""R2D2 (Kapturowski et al. 2019): DQN with a recurrent core, learning from replayed
sequences that start from their stored recurrent state after a burn-in.

`make(env, config)` binds config, network and the top-level functions below into an `Agent`
of pure functions; the targets and loss are in losses.py, the network in networks.py.

Acting is epsilon-greedy (DQN's schedule, or Ape-X's per-env rates) with the recurrent state
kept per env in `VecEnvState.memory` and reset in the step its env ends (terminated or
truncated). Every iteration steps each env `seq_length` times and writes one replay item per
env: the `burn_in` steps before them (kept in the env carry as a window, with the state before
its first step), then the new steps, and that state. The replay buffer is env-major and lives
in the per-env state (as DQN's), so under the execution layer each device keeps the items of
its own envs, samples its share of the global batch (randomness folded with the device index)
and averages gradients with `lax.pmean`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.families.q_learning import (
    build_optimizer, exploration_epsilons, first_learning_iteration, mean_epsilon,
)
from jaxrl_sys.agents.r2d2 import losses
from jaxrl_sys.agents.r2d2.config import Config
from jaxrl_sys.agents.r2d2.losses import Batch
from jaxrl_sys.agents.r2d2.networks import RecurrentQNetwork, build_network, step_q
from jaxrl_sys.core import collectives, replay
from jaxrl_sys.core.learner import (
    TargetNetState, batch_placement_problem, device_key, gradient_step, init_target_net_state,
    learn_after_warmup, local_batch_size, priority_beta, replay_updates,
)
from jaxrl_sys.core.networks import initial_memory, reset_memory, scan_unroll
from jaxrl_sys.core.rollout import VecEnvState, episode_metrics, per_env_keys, reset_envs, step_envs
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics, PyTree, RecurrentPolicy

State = TargetNetState  # online and target parameters, optimiser state, counters
DEFAULT_EVAL_EPISODES = 32  # training returns are epsilon-greedy; report the greedy policy
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "always"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class EnvState:
    """Per-env state (every leaf has a leading env axis): the envs with their recurrent state,
    the last `burn_in` steps [E, burn_in, ...] (the next item's burn-in) with the state before
    the first of them, and the envs' replay rows."""

    envs: VecEnvState
    window: dict
    window_memory: PyTree
    replay: Any  # replay.ReplayState or replay.PrioritizedState


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """R2D2's pure functions bound to one env and config; `collect(state, env_state, key)`
    is the acting half of an iteration (`collect` below)."""

    network: RecurrentQNetwork
    collect: Callable[..., Any]
    init_replay: Callable[[int], Any]


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh online/target parameters and optimiser state."""
    params = build_network(spec, config).init(
        key, initial_memory(config.memory, config.memory_size, 1),
        jnp.zeros((1, 1, *spec.obs_shape), jnp.float32), jnp.ones((1, 1), jnp.bool_))
    return init_target_net_state(params, build_optimizer(config))


def act(network: RecurrentQNetwork, params: Any, memory: PyTree, obs: jax.Array,
        starts: jax.Array, key: jax.Array, greedy: bool = False,
        epsilon: jax.Array | float = 0.0) -> tuple[jax.Array, PyTree, jax.Array]:
    """(actions [B], memory after the step, Q-values [B, A]) for observations [B, ...] read
    with `memory` [B, ...] (reset first where `starts` [B]): greedy, or epsilon-greedy with
    per-row keys [B] or one key and one rate or one per row [B]."""
    memory, q = step_q(network, params, memory, obs, starts)
    greedy_actions = jnp.argmax(q, axis=-1)
    if greedy:
        return greedy_actions, memory, q
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    explore = jax.vmap(jax.random.uniform)(keys) < epsilon
    random_actions = jax.vmap(lambda k: jax.random.randint(k, (), 0, network.num_actions))(
        jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys))
    return jnp.where(explore, random_actions, greedy_actions), memory, q


def sequence_step(obs: jax.Array, action: jax.Array, reward: jax.Array, terminated: jax.Array,
                  truncated: jax.Array, final_obs: jax.Array, starts: jax.Array) -> dict:
    """One step as a replay item stores it (actions int32, flags bool)."""
    return {"obs": obs, "action": action.astype(jnp.int32), "reward": reward,
            "terminated": terminated, "truncated": truncated, "final_obs": final_obs,
            "starts": starts}


def empty_steps(spec: EnvSpec, shape: tuple[int, ...]) -> dict:
    """Steps of `shape` (e.g. [E, burn_in]) before any was taken: zeros, every one an episode
    start, so a burn-in over them leaves the initial state."""
    obs = jnp.zeros((*shape, *spec.obs_shape), spec.obs_dtype)
    zeros = jnp.zeros(shape, jnp.float32)
    starts = jnp.ones(shape, jnp.bool_)
    return sequence_step(obs, zeros, zeros, ~starts, ~starts, obs, starts)


def init_replay(config: Config, spec: EnvSpec, num_envs: int) -> Any:
    """Empty replay rows for `num_envs` envs: buffer_size // num_envs items each, an item
    being `burn_in + seq_length` steps and the state before the first."""
    example = empty_steps(spec, (config.burn_in + config.seq_length,))
    example["memory"] = jax.tree.map(lambda m: m[0],
                                     initial_memory(config.memory, config.memory_size, 1))
    make_buffer = replay.init_prioritized if config.prioritized else replay.init
    return make_buffer(example, num_envs, config.buffer_size // config.num_envs)


def collect(config: Config, env: Env, network: RecurrentQNetwork, axis_name: Optional[str],
            state: State, env_state: EnvState, key: jax.Array
            ) -> tuple[EnvState, dict, jax.Array, Metrics]:
    """Step every env `seq_length` times epsilon-greedily and write one item per env into
    replay. Returns (env state, the items written [E, L, ...], the acting Q-values
    [seq_length, E, A], episode metrics summed over envs and devices with `epsilon`)."""
    env_steps = state.iteration * config.steps_per_iteration
    epsilons = exploration_epsilons(config, env_steps, env_state.envs.env_ids)

    def one_step(vstate: VecEnvState, t):
        """Act on every env and step it; its record, the state it was read with, its Q."""
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        actions, memory, q = act(network, state.params, vstate.memory, vstate.obs,
                                 vstate.starts, per_env_keys(act_key, vstate.env_ids),
                                 epsilon=epsilons)
        next_vstate, result = step_envs(env, vstate, actions, env_key)
        ended = result.terminated | result.truncated  # the next episode starts from scratch
        next_vstate = next_vstate.replace(memory=reset_memory(memory, ended), starts=ended)
        record = sequence_step(vstate.obs, actions, result.reward, result.terminated,
                               result.truncated, result.info["final_observation"],
                               vstate.starts)
        return next_vstate, (record, vstate.memory, q, episode_metrics(result.info, None))

    vstate, (records, memories, q, episodes) = jax.lax.scan(
        one_step, env_state.envs, jnp.arange(config.seq_length))
    steps = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), records)  # [E, seq_length, ...]
    item = jax.tree.map(lambda w, s: jnp.concatenate([w, s], axis=1), env_state.window, steps)
    window = jax.tree.map(lambda x: x[:, config.seq_length:], item)  # the last burn_in steps
    start = config.seq_length - config.burn_in  # this iteration's step the window begins at
    window_memory = (vstate.memory if start == config.seq_length
                     else jax.tree.map(lambda m: m[start], memories))
    item = {**item, "memory": env_state.window_memory}
    add = replay.add_prioritized if config.prioritized else replay.add
    episodes = collectives.psum(jax.tree.map(jnp.sum, episodes), axis_name)
    metrics = {**episodes, "epsilon": mean_epsilon(config, env_steps)}
    return (EnvState(vstate, window, window_memory, add(env_state.replay, item)), item, q,
            metrics)


def update(config: Config, grad_fn: Callable, optimizer: optax.GradientTransformation,
           axis_name: Optional[str], state: State, batch: Batch
           ) -> tuple[State, Metrics, jax.Array]:
    """One gradient step on a batch of replayed items [B, L, ...]; returns the new state,
    metrics and the items' priorities [B] (`losses.sequence_priorities`)."""
    (loss, (td_error, q_mean)), grads = grad_fn(state.params, state.target_params, batch)
    new_state = gradient_step(state, grads, optimizer, axis_name=axis_name, tau=config.tau,
                              target_update_period=config.target_update_period)
    metrics = collectives.pmean({"loss": loss, "q_mean": q_mean}, axis_name)
    return new_state, metrics, losses.sequence_priorities(td_error, config.priority_eta)


def sample_batch(config: Config, axis_name: Optional[str], buffer: Any, key: jax.Array,
                 batch_size: int, beta: jax.Array) -> tuple[Batch, replay.Index]:
    """`batch_size` items from this device's replay (prioritised or uniform) and where they
    are, to update their priorities."""
    if config.prioritized:
        items, index, weights = replay.sample_prioritized(buffer, key, batch_size, beta,
                                                          axis_name)
    else:
        items, index = replay.sample(buffer, key, batch_size)
        weights = jnp.ones(batch_size, jnp.float32)
    return Batch.from_items(items, weights), index


def learn(config: Config, update_fn: Callable, axis_name: Optional[str], state: State,
          buffer: Any, key: jax.Array) -> tuple[State, Any, Metrics]:
    """`updates_per_iteration` updates, each on a fresh sample of this device's share of the
    batch; with prioritised replay each also rewrites its items' priorities."""
    local_batch = local_batch_size(config.batch_size, axis_name)
    beta = priority_beta(config.priority_beta_start, state.iteration, config.num_iterations)

    def one_update(state, buffer, k):
        """Sample, learn, and re-prioritise the sampled items."""
        batch, index = sample_batch(config, axis_name, buffer, device_key(k, axis_name),
                                    local_batch, beta)
        state, metrics, priorities = update_fn(state, batch)
        if config.prioritized:
            buffer = replay.update_priorities(buffer, index, priorities, config.priority_alpha)
        return state, buffer, metrics

    return replay_updates(one_update, state, buffer, key, config.updates_per_iteration,
                          unroll=scan_unroll(config.torso, config.updates_per_iteration))


def train_step(config: Config, collect_fn: Callable, learn_fn: Callable, state: State,
               env_state: EnvState, key: jax.Array) -> tuple[State, EnvState, Metrics]:
    """Step every env `seq_length` times into replay, then (after the warm-up)
    `updates_per_iteration` updates."""
    collect_key, learn_key = jax.random.split(key)
    env_state, _, _, episodes = collect_fn(state, env_state, collect_key)
    ready = state.iteration >= first_learning_iteration(config)
    state, buffer, metrics = learn_after_warmup(ready, learn_fn, state, env_state.replay,
                                                learn_key)
    return state, env_state.replace(replay=buffer), {**metrics, **episodes}


def init_envs(env: Env, config: Config, init_replay_fn: Callable[[int], Any], key: jax.Array,
              env_ids: jax.Array) -> EnvState:
    """Reset the envs `env_ids` [E] (each at an episode start with the initial state), with
    an empty burn-in window and empty replay rows."""
    num_envs = env_ids.shape[0]
    envs = reset_envs(env, key, env_ids).replace(
        memory=initial_memory(config.memory, config.memory_size, num_envs),
        starts=jnp.ones(env_ids.shape, jnp.bool_))
    return EnvState(envs, empty_steps(env.spec, (num_envs, config.burn_in)),
                    initial_memory(config.memory, config.memory_size, num_envs),
                    init_replay_fn(num_envs))


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind R2D2 to `env` and `config`; gradients average over `axis_name`."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)
    loss = functools.partial(
        losses.r2d2_loss, network=network, burn_in=config.burn_in, n_step=config.n_step,
        gamma=config.gamma, double_q=config.double_q, huber_delta=config.huber_delta)
    update_fn = functools.partial(update, config, jax.value_and_grad(loss, has_aux=True),
                                  build_optimizer(config), axis_name)
    learn_fn = functools.partial(learn, config, update_fn, axis_name)
    collect_fn = functools.partial(collect, config, env, network, axis_name)
    init_replay_fn = functools.partial(init_replay, config, spec)
    return Agent(
        config, spec, functools.partial(init, spec=spec, config=config),
        functools.partial(init_envs, env, config, init_replay_fn),
        functools.partial(act, network), update_fn,
        functools.partial(train_step, config, collect_fn, learn_fn),
        network=network, collect=collect_fn, init_replay=init_replay_fn,
    )


def greedy_action(agent: Agent) -> RecurrentPolicy:
    """The greedy (argmax Q) policy for evaluation, carrying the recurrent state."""
    config = agent.config

    def step(state: State, memory: PyTree, obs: jax.Array, starts: jax.Array, key: jax.Array,
             legal=None, env_state=None) -> tuple[jax.Array, PyTree]:
        """Greedy actions [B] and the memory after them."""
        del legal, env_state  # every action is legal; acting needs the observation only
        actions, memory, _ = agent.act(state.params, memory, obs, starts, key, greedy=True)
        return actions, memory

    return RecurrentPolicy(
        initial=lambda batch: initial_memory(config.memory, config.memory_size, batch),
        step=step)


placement_problem = batch_placement_problem  # each device samples its share of the batch
