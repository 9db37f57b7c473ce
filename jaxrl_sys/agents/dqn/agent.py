"""DQN with double Q-learning, n-step returns, target network, optional dueling head and
prioritised replay, on vectorised envs with an on-device replay buffer.

`make(env, config)` binds config, network and the top-level functions below into an `Agent`
of pure functions; the targets and loss are in losses.py. The replay buffer is env-major and
lives in the per-env state, so under the execution layer each device keeps the transitions of
its own envs; each device samples its share of the global batch and gradients are averaged
with `lax.pmean`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.dqn import losses
from jaxrl_sys.agents.families.q_learning import (
    build_optimizer, epsilon_greedy, exploration_epsilons, first_learning_iteration, mean_epsilon,
)
from jaxrl_sys.agents.dqn.config import Config
from jaxrl_sys.agents.dqn.losses import Batch, Draw
from jaxrl_sys.agents.dqn.networks import (
    QNetwork, build_network, noisy_q_values, q_values, sampled_distribution,
)
from jaxrl_sys.core import collectives, obs_norm, replay
from jaxrl_sys.core.learner import (
    TargetNetState, batch_placement_problem, device_key, gradient_step, init_target_net_state,
    learn_after_warmup, local_batch_size, priority_beta, replay_updates,
)
from jaxrl_sys.core.networks import scan_unroll
from jaxrl_sys.core.rollout import VecEnvState, episode_metrics, per_env_keys, reset_envs, step_envs
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics

State = TargetNetState  # online and target parameters, optimiser state, counters
DEFAULT_EVAL_EPISODES = 32  # training returns are epsilon-greedy; report the greedy policy
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class EnvState:
    """Per-env state: the envs and their replay rows (every leaf has a leading env axis)."""

    envs: VecEnvState
    replay: Any  # replay.ReplayState or replay.PrioritizedState


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """DQN's pure functions bound to one env and config."""

    network: QNetwork
    absorb: Callable[[State, Any, jax.Array], tuple[State, Any, Metrics]]
    init_replay: Callable[[int], Any]


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh online/target parameters and optimiser state."""
    params = build_network(spec, config).init(key, jnp.zeros((1, *spec.obs_shape), jnp.float32))
    return init_target_net_state(params, build_optimizer(config)).replace(
        obs_stats=obs_norm.init_stats(config.normalize_obs, spec.obs_shape)
    )


def act(network: QNetwork, params: Any, obs: jax.Array, key: jax.Array, greedy: bool = False,
        epsilon: jax.Array | float = 0.0) -> jax.Array:
    """Actions [B] for observations [B, ...]: the Q family's epsilon-greedy acting
    (`epsilon_greedy`), or, with noisy layers and not greedy, the argmax of Q-values under
    each row's own noise, drawn from its key (per-row keys [B], or one key split).
    Greedy acting and evaluation take the mean layers."""
    if not network.noisy or greedy:
        return epsilon_greedy(network, params, obs, key, greedy, epsilon)
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    return jnp.argmax(noisy_q_values(network, params, obs, keys), axis=-1)


def draws_noise(config: Config) -> bool:
    """Whether the loss draws randomness per row: noisy layers' noise or IQN's fractions."""
    return config.noisy or config.distributional == "iqn"


def batch_draw(key: jax.Array, num_rows: int, axis_name: Optional[str]) -> Draw:
    """The loss's randomness for this device's `num_rows` rows of a global batch: `key` (the
    same on every device) for the noise, and one key per row from its global index."""
    first = collectives.axis_index(axis_name) * num_rows
    return Draw(key, per_env_keys(key, first + jnp.arange(num_rows)))


def replay_row(obs: jax.Array, action: jax.Array, reward: jax.Array, terminated: jax.Array,
               truncated: jax.Array, next_obs: jax.Array) -> dict[str, jax.Array]:
    """One step of every env as replay stores it (leading axes as given, actions int32)."""
    return {"obs": obs, "action": action.astype(jnp.int32), "reward": reward,
            "terminated": terminated, "truncated": truncated, "next_obs": next_obs}


def add_to_replay(config: Config) -> Callable[[Any, dict[str, jax.Array]], Any]:
    """The replay writer `config` asks for: prioritised or uniform."""
    return replay.add_prioritized if config.prioritized else replay.add


def init_replay(config: Config, spec: EnvSpec, num_envs: int) -> Any:
    """Empty replay rows for `num_envs` envs (env-major, buffer_size // num_envs steps each)."""
    obs = jnp.zeros(spec.obs_shape, spec.obs_dtype)  # uint8 frames stay uint8 in replay
    zero = jnp.zeros((), jnp.float32)
    example = replay_row(obs, jnp.zeros((), jnp.int32), zero, jnp.zeros((), bool),
                         jnp.zeros((), bool), obs)
    make_buffer = replay.init_prioritized if config.prioritized else replay.init
    return make_buffer(example, num_envs, config.buffer_size // config.num_envs)


def update(config: Config, grad_fn: Callable, optimizer: optax.GradientTransformation,
           axis_name: Optional[str], state: State, batch: Batch,
           key: Optional[jax.Array] = None) -> tuple[State, Metrics, jax.Array]:
    """One gradient step on a batch [B, n, ...] of stored (raw) steps, normalised with the
    state's observation statistics; returns the new state, metrics and TD errors [B]. `key`
    (the same on every device) draws noisy layers' noise and IQN's fractions per global row;
    without it they take the mean layers and midpoint fractions."""
    batch = batch.replace(obs=obs_norm.normalize(state.obs_stats, batch.obs),
                          next_obs=obs_norm.normalize(state.obs_stats, batch.next_obs))
    draw = (batch_draw(key, batch.reward.shape[0], axis_name)
            if key is not None and draws_noise(config) else None)
    grads, (td_error, q_mean) = grad_fn(state.params, state.target_params, batch, draw)
    new_state = gradient_step(state, grads, optimizer, axis_name=axis_name, tau=config.tau,
                              target_update_period=config.target_update_period)
    # distributional losses hand back their per-item losses in place of TD errors
    loss = (losses.td_loss(td_error, None, config.huber_delta)
            if config.distributional == "none" else jnp.mean(td_error))
    metrics = collectives.pmean({"loss": loss, "q_mean": q_mean}, axis_name)
    return new_state, metrics, td_error


def sample_batch(config: Config, axis_name: Optional[str], buffer: Any, key: jax.Array,
                 batch_size: int, beta: jax.Array) -> tuple[Batch, jax.Array]:
    """`batch_size` n-step sequences [B, n, ...] from this device's replay (prioritised or
    uniform) and where they start, to update their priorities."""
    if config.prioritized:
        _, index, weights = replay.sample_prioritized(buffer, key, batch_size, beta, axis_name)
        data, valid = replay.gather_sequences(buffer.replay, index, config.n_step)
    else:
        data, valid, index = replay.sample_sequences(buffer, key, batch_size, config.n_step)
        weights = jnp.ones(batch_size, jnp.float32)
    return Batch.from_rows(data, valid, weights), index


def collect(config: Config, env: Env, act_fn: Callable, axis_name: Optional[str], state: State,
            env_state: EnvState, key: jax.Array) -> tuple[State, EnvState, Metrics, jax.Array]:
    """Step every env `rollout_steps` times epsilon-greedily into replay; returns the state
    (observation statistics updated), the envs and replay, episode metrics and epsilon."""
    env_steps = state.iteration * config.steps_per_iteration
    epsilons = exploration_epsilons(config, env_steps, env_state.envs.env_ids)
    add = add_to_replay(config)

    def one_step(carry, t):
        vstate, buffer = carry
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        actions = act_fn(state.params, obs_norm.normalize(state.obs_stats, vstate.obs),
                         per_env_keys(act_key, vstate.env_ids), epsilon=epsilons)
        next_vstate, result = step_envs(env, vstate, actions, env_key)
        row = replay_row(vstate.obs, actions, result.reward, result.terminated,
                         result.truncated, result.info["final_observation"])
        seen = None if state.obs_stats is None else vstate.obs  # no stacking when unused
        return (next_vstate, add(buffer, row)), (episode_metrics(result.info, None), seen)

    (vstate, buffer), (episodes, seen) = jax.lax.scan(
        one_step, (env_state.envs, env_state.replay), jnp.arange(config.rollout_steps)
    )
    episodes = collectives.psum(jax.tree.map(jnp.sum, episodes), axis_name)
    state = state.replace(obs_stats=obs_norm.update(state.obs_stats, seen, axis_name))
    return state, EnvState(vstate, buffer), episodes, mean_epsilon(config, env_steps)


def learn(config: Config, update_fn: Callable, axis_name: Optional[str], state: State,
          buffer: Any, key: jax.Array) -> tuple[State, Any, Metrics]:
    """`updates_per_iteration` updates, each on a fresh sample of this device's share of the
    batch; with prioritised replay each also rewrites its items' priorities."""
    local_batch = local_batch_size(config.batch_size, axis_name)
    beta = priority_beta(config.priority_beta_start, state.iteration, config.num_iterations)

    def one_update(state, buffer, k):
        batch, index = sample_batch(config, axis_name, buffer, device_key(k, axis_name),
                                    local_batch, beta)
        noise_key = jax.random.split(k)[1] if draws_noise(config) else None
        state, metrics, td_error = update_fn(state, batch, noise_key)
        if config.prioritized:
            buffer = replay.update_priorities(buffer, index, jnp.abs(td_error),
                                              config.priority_alpha)
        return state, buffer, metrics

    return replay_updates(one_update, state, buffer, key, config.updates_per_iteration,
                          unroll=scan_unroll(config.torso, config.updates_per_iteration))


def absorb(config: Config, learn_fn: Callable, state: State, buffer: Any, key: jax.Array
           ) -> tuple[State, Any, Metrics]:
    """The learning half of an iteration, after its transitions are in `buffer`: learn
    (once the warm-up is over) and count the iteration. Shared with the host loop."""
    ready = state.iteration >= first_learning_iteration(config)
    return learn_after_warmup(ready, learn_fn, state, buffer, key)


def train_step(collect_fn: Callable, absorb_fn: Callable, axis_name: Optional[str],
               state: State, env_state: EnvState, key: jax.Array
               ) -> tuple[State, EnvState, Metrics]:
    """Step every env `rollout_steps` times into replay, then `updates_per_iteration` updates."""
    collect_key, learn_key = jax.random.split(key)
    state = state.replace(
        obs_stats=obs_norm.update_if_empty(state.obs_stats, env_state.envs.obs, axis_name)
    )
    state, env_state, episodes, epsilon = collect_fn(state, env_state, collect_key)
    state, buffer, metrics = absorb_fn(state, env_state.replay, learn_key)
    return state, EnvState(env_state.envs, buffer), {**metrics, "epsilon": epsilon, **episodes}


def init_envs(env: Env, init_replay_fn: Callable[[int], Any], key: jax.Array,
              env_ids: jax.Array) -> EnvState:
    """Reset the envs `env_ids` [E] and give them empty replay rows."""
    return EnvState(reset_envs(env, key, env_ids), init_replay_fn(env_ids.shape[0]))


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind DQN to `env` and `config`; gradients average over `axis_name`."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)

    def q_under(params, obs, draw):
        if draw is None:
            return network.apply(params, obs)
        return sampled_distribution(network, params, obs, draw, config.num_atoms)[0]

    loss = functools.partial(
        losses.q_learning_loss, apply_fn=q_under, gamma=config.gamma,
        double_q=config.double_q, advantage_learning=config.advantage_learning,
        huber_delta=config.huber_delta,
    ) if config.distributional == "none" else functools.partial(
        losses.distributional_q_loss,
        distribution_fn=functools.partial(sampled_distribution, network,
                                          num_taus=config.num_atoms),
        q_fn=functools.partial(q_values, distributional=config.distributional,
                               support=config.support),
        kind=config.distributional, support=jnp.asarray(config.support, jnp.float32),
        gamma=config.gamma, double_q=config.double_q, kappa=config.quantile_kappa,
    )
    act_fn = functools.partial(act, network)
    update_fn = functools.partial(update, config, jax.grad(loss, has_aux=True),
                                  build_optimizer(config), axis_name)
    learn_fn = functools.partial(learn, config, update_fn, axis_name)
    absorb_fn = functools.partial(absorb, config, learn_fn)
    collect_fn = functools.partial(collect, config, env, act_fn, axis_name)
    init_replay_fn = functools.partial(init_replay, config, spec)
    return Agent(
        config, spec, functools.partial(init, spec=spec, config=config),
        functools.partial(init_envs, env, init_replay_fn), act_fn, update_fn,
        functools.partial(train_step, collect_fn, absorb_fn, axis_name),
        network=network, absorb=absorb_fn, init_replay=init_replay_fn,
    )


def greedy_params(config: Config, state: State) -> Any:
    """The parameters greedy play acts with: the online ones, or with `greedy_target_network`
    the target network's."""
    return state.target_params if config.greedy_target_network else state.params


def greedy_action(agent: Agent) -> Callable[[State, jax.Array, jax.Array], jax.Array]:
    """Greedy (argmax Q) actions for evaluation, serving and recording (from the observation
    alone), by the online or the target network (`greedy_params`)."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(
        greedy_params(agent.config, state), obs_norm.normalize(state.obs_stats, obs), key,
        greedy=True)


placement_problem = batch_placement_problem  # each device samples its share of the batch
