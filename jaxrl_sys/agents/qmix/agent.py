"""QMIX (Rashid et al. 2018) and VDN (Sunehag et al. 2018) for a cooperative team
(`EnvSpec.num_agents` > 1): value decomposition with shared per-agent Q-networks, learned from
replayed joint steps on device.

    init(key) -> State
    act(params, obs, key, greedy=False, epsilon=0.0, legal=None, memory=None, starts=None)
        -> (actions [B, N], memory after the step, Q-values [B, N, A])
    update(state, batch) -> (state, metrics)
    train_step(state, env_state, key) -> (state, env_state, metrics)

One set of Q-network parameters serves every agent (its one-hot id is appended to its
observation); acting is epsilon-greedy among each agent's legal actions (the family's
schedule). With `memory="gru"|"lstm"` the network is recurrent: the state is kept per (env,
agent) in the env carry, reset in the step its env ends, and stored with each replay item,
which is replayed from it after a burn-in (as R2D2 does). Every iteration steps each env
`rollout_steps` times and writes its steps into replay as items of `seq_length` steps (with the
`burn_in` steps before each). The replay buffer is env-major and lives in the per-env state, as
DQN's and R2D2's: under the execution layer each device keeps the items of its own envs,
samples its share of the global batch (randomness folded with the device index) and averages
gradients with `lax.pmean`. The targets and loss are in losses.py, the networks in networks.py.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.families import q_learning
from jaxrl_sys.agents.families.q_learning import epsilon_at, first_learning_iteration
from jaxrl_sys.agents.families.teams import check_team
from jaxrl_sys.agents.qmix import losses
from jaxrl_sys.agents.qmix.config import Config
from jaxrl_sys.agents.qmix.losses import Batch
from jaxrl_sys.agents.qmix.networks import (
    MonotonicMixer, TeamQNetwork, epsilon_greedy, masked_argmax, team_memory, team_q,
)
from jaxrl_sys.core import collectives, replay
from jaxrl_sys.core.learner import (
    TargetNetState, batch_placement_problem, device_key, gradient_step, init_target_net_state,
    learn_after_warmup, local_batch_size, replay_updates,
)
from jaxrl_sys.core.networks import reset_memory
from jaxrl_sys.core.rollout import (
    VecEnvState, episode_metrics, legal_actions, per_env_keys, reset_envs, step_envs,
)
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics, PyTree, RecurrentPolicy

State = TargetNetState  # online and target parameters {"agent", "mixer"}, optimiser, counters
DEFAULT_EVAL_EPISODES = 32  # training returns are epsilon-greedy; report the greedy policy
PLAYS = "team"  # what it learns (core.types.PLAYS)
MEMORY = "optional"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class EnvState:
    """Per-env state (every leaf has a leading env axis): the envs with their agents'
    recurrent state, the last `burn_in` steps [E, burn_in, ...] (the next item's burn-in; None
    without one) with the state before the first of them, and the envs' replay rows."""

    envs: VecEnvState
    window: Optional[dict]
    window_memory: PyTree
    replay: replay.ReplayState


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """QMIX's (or VDN's) pure functions bound to one team env and config; `collect(state,
    env_state, key)` is the acting half of an iteration."""

    network: TeamQNetwork
    mixer: Optional[MonotonicMixer]
    collect: Callable[..., Any]
    init_replay: Callable[[int], Any]


def build_network(spec: EnvSpec, config: Config) -> TeamQNetwork:
    """The agents' shared Q-network for a team spec."""
    return TeamQNetwork(spec.action_space.n, tuple(config.hidden), config.activation,
                        config.memory, config.memory_size)


def build_mixer(config: Config) -> Optional[MonotonicMixer]:
    """QMIX's mixer, or None for VDN's sum."""
    if config.mixer == "vdn":
        return None
    return MonotonicMixer(config.mixer_embedding, config.mixer_hypernet_hidden,
                          config.mixer_init_scale)


def build_optimizer(config: Config) -> optax.GradientTransformation:
    """RAdam (JaxMARL's) or Adam at the family's learning rate (annealed over the learner
    steps) on gradients clipped to `max_grad_norm`."""
    return q_learning.build_optimizer(
        config, optax.radam if config.optimizer == "radam" else optax.adam)


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh online/target parameters {"agent", "mixer"} (no "mixer" for VDN) and optimiser
    state."""
    agent_key, mixer_key = jax.random.split(key)
    agents, obs_dim = spec.obs_shape
    rows = jax.tree.map(lambda m: m[0],  # one env's agents as the network's rows [N, ...]
                        team_memory(config.memory, config.memory_size, 1, agents))
    params = {"agent": build_network(spec, config).init(
        agent_key, rows, jnp.zeros((1, agents, obs_dim + agents), jnp.float32),
        jnp.ones((1, agents), jnp.bool_))}
    mixer = build_mixer(config)
    if mixer is not None:
        params["mixer"] = mixer.init(mixer_key, jnp.zeros((1, agents), jnp.float32),
                                     jnp.zeros((1, *spec.state_shape), jnp.float32))
    return init_target_net_state(params, build_optimizer(config))


def act(network: TeamQNetwork, params: Any, obs: jax.Array, key: jax.Array,
        greedy: bool = False, epsilon: jax.Array | float = 0.0,
        legal: Optional[jax.Array] = None, memory: PyTree = None,
        starts: Optional[jax.Array] = None) -> tuple[jax.Array, PyTree, jax.Array]:
    """(team actions [B, N], memory after the step, Q-values [B, N, A]) for observations
    [B, N, D] under `params` {"agent", ...}, read with `memory` [B, N, ...] (reset first where
    `starts` [B]): each agent's best legal action (`legal` [B, N, A], all legal if None), or
    epsilon-greedy among its legal actions with per-env keys [B] or one key."""
    memory, q, _ = team_q(network, params["agent"], memory, obs[None],
                          None if starts is None else starts[None])
    q = q[0]
    if legal is None:
        legal = jnp.ones(q.shape, jnp.bool_)
    if greedy:
        return masked_argmax(q, legal), memory, q
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    return epsilon_greedy(q, legal, keys, epsilon), memory, q


def empty_steps(spec: EnvSpec, config: Config, shape: tuple[int, ...]) -> dict:
    """Stored steps of `shape` (e.g. [E, burn_in]) before any was taken: zeros, all actions
    legal, every one an episode start (so a burn-in over them leaves the initial state)."""
    agents, actions = spec.num_agents, spec.action_space.n
    obs = jnp.zeros((*shape, *spec.obs_shape), jnp.float32)
    flag = jnp.zeros(shape, jnp.bool_)
    steps = {"obs": obs, "action": jnp.zeros((*shape, agents), jnp.int32),
             "reward": jnp.zeros(shape, jnp.float32), "terminated": flag, "truncated": flag,
             "final_obs": obs, "final_legal": jnp.ones((*shape, agents, actions), jnp.bool_)}
    if config.mixer == "qmix":
        world = jnp.zeros((*shape, *spec.state_shape), jnp.float32)
        steps.update(world=world, final_world=world)
    if config.memory != "none":
        steps["starts"] = ~flag
    return steps


def init_replay(config: Config, spec: EnvSpec, num_envs: int) -> replay.ReplayState:
    """Empty replay rows for `num_envs` envs: buffer_size // num_envs items each, an item
    being `burn_in + seq_length` steps (and, recurrent, the state before the first)."""
    example = empty_steps(spec, config, (config.burn_in + config.seq_length,))
    if config.memory != "none":
        example["memory"] = jax.tree.map(
            lambda m: m[0], team_memory(config.memory, config.memory_size, 1, spec.num_agents))
    return replay.init(example, num_envs, config.buffer_size // config.num_envs)


def add_items(buffer: replay.ReplayState, items: dict) -> replay.ReplayState:
    """Write K items of every env (leaves [E, K, ...]) at the rings' write position, oldest
    first, overwriting the oldest stored ones."""
    count = jax.tree.leaves(items)[0].shape[1]
    capacity = jax.tree.leaves(buffer.data)[0].shape[1]
    rows = jnp.arange(buffer.position.shape[0])[:, None]
    slots = (buffer.position[:, None] + jnp.arange(count)[None, :]) % capacity
    data = jax.tree.map(lambda leaf, x: leaf.at[rows, slots].set(x.astype(leaf.dtype)),
                        buffer.data, items)
    return replay.ReplayState(data=data, position=(buffer.position + count) % capacity,
                              size=jnp.minimum(buffer.size + count, capacity))


def cut_items(config: Config, window: dict, steps: dict, window_memory: PyTree,
              memories: PyTree, memory_after: PyTree) -> tuple[dict, dict, PyTree]:
    """This iteration's items [E, K, burn_in + seq_length, ...] of its steps [E, T, ...] after
    the last `burn_in` steps before them (`window`), with the state before each item's first
    step; and the next window and its state. `memories` [T, E, ...] is the state before each
    step, `window_memory` the state before the window's first step, `memory_after` the state
    after the last step. No burn-in: no window (None)."""
    length, burn_in, count = config.seq_length, config.burn_in, config.items_per_iteration
    full = steps if window is None else jax.tree.map(
        lambda w, s: jnp.concatenate([w, s], axis=1), window, steps)
    index = (jnp.arange(count)[:, None] * length
             + jnp.arange(burn_in + length)[None, :])  # [K, burn_in + seq_length]
    items = jax.tree.map(lambda x: x[:, index], full)
    next_window = None if window is None else jax.tree.map(
        lambda x: x[:, x.shape[1] - burn_in:], full)
    if config.memory == "none":
        return items, next_window, None
    firsts = [window_memory] + [jax.tree.map(lambda m, j=j: m[j * length - burn_in], memories)
                                for j in range(1, count)]
    items["memory"] = jax.tree.map(lambda *m: jnp.stack(m, axis=1), *firsts)
    if burn_in == 0:
        return items, next_window, memory_after
    return items, next_window, jax.tree.map(lambda m: m[config.rollout_steps - burn_in],
                                            memories)


def collect(config: Config, env: Env, network: TeamQNetwork, axis_name: Optional[str],
            state: State, env_state: EnvState, key: jax.Array
            ) -> tuple[EnvState, dict, Metrics]:
    """Step every env `rollout_steps` times epsilon-greedily and write its items into replay.
    Returns (env state, the items written [E, K, L, ...], episode metrics summed over envs and
    devices with `epsilon`)."""
    env_steps = state.iteration * config.steps_per_iteration
    epsilon = epsilon_at(config, env_steps)
    world_state = jax.vmap(env.world_state) if config.mixer == "qmix" else None
    recurrent = config.memory != "none"

    def one_step(vstate: VecEnvState, t):
        """Every agent of every env acts; the envs step; the step as replay stores it."""
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        legal = legal_actions(env, vstate.env_state)
        actions, memory, _ = act(network, state.params, vstate.obs,
                                 per_env_keys(act_key, vstate.env_ids), epsilon=epsilon,
                                 legal=legal, memory=vstate.memory, starts=vstate.starts)
        next_vstate, result = step_envs(env, vstate, actions, env_key)
        info = result.info
        record = {"obs": vstate.obs, "action": actions.astype(jnp.int32),
                  "reward": result.reward * config.reward_scale,
                  "terminated": result.terminated, "truncated": result.truncated,
                  "final_obs": info["final_observation"],
                  "final_legal": info.get("final_legal_actions", jnp.ones_like(legal))}
        if world_state is not None:
            record.update(world=world_state(vstate.env_state),
                          final_world=info["final_world_state"])
        if recurrent:  # the next episode starts from scratch
            ended = result.terminated | result.truncated
            next_vstate = next_vstate.replace(memory=reset_memory(memory, ended), starts=ended)
            record["starts"] = vstate.starts
        return next_vstate, (record, vstate.memory, episode_metrics(info, None))

    vstate, (records, memories, episodes) = jax.lax.scan(
        one_step, env_state.envs, jnp.arange(config.rollout_steps))
    steps = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), records)  # [E, T, ...]
    items, window, window_memory = cut_items(config, env_state.window, steps,
                                             env_state.window_memory, memories, vstate.memory)
    episodes = collectives.psum(jax.tree.map(jnp.sum, episodes), axis_name)
    metrics = {**episodes, "epsilon": epsilon}
    return (EnvState(vstate, window, window_memory, add_items(env_state.replay, items)),
            items, metrics)


def update(config: Config, grad_fn: Callable, optimizer: optax.GradientTransformation,
           axis_name: Optional[str], state: State, batch: Batch) -> tuple[State, Metrics]:
    """One gradient step on a batch of replayed items [B, L, ...] (gradients averaged over
    `axis_name`); the target network follows every `target_update_period` steps."""
    (loss, aux), grads = grad_fn(state.params, state.target_params, batch)
    new_state = gradient_step(state, grads, optimizer, axis_name=axis_name, tau=config.tau,
                              target_update_period=config.target_update_period)
    return new_state, collectives.pmean({"loss": loss, **aux}, axis_name)


def learn(config: Config, update_fn: Callable, axis_name: Optional[str], state: State,
          buffer: replay.ReplayState, key: jax.Array) -> tuple[State, Any, Metrics]:
    """`updates_per_iteration` updates, each on a fresh uniform sample of this device's share
    of the batch."""
    local_batch = local_batch_size(config.batch_size, axis_name)

    def one_update(state, buffer, k):
        """Sample and learn."""
        items, _ = replay.sample(buffer, device_key(k, axis_name), local_batch)
        state, metrics = update_fn(state, Batch.from_items(items))
        return state, buffer, metrics

    return replay_updates(one_update, state, buffer, key, config.updates_per_iteration)


def train_step(config: Config, collect_fn: Callable, learn_fn: Callable, state: State,
               env_state: EnvState, key: jax.Array) -> tuple[State, EnvState, Metrics]:
    """Step every env `rollout_steps` times into replay, then (after the warm-up)
    `updates_per_iteration` updates."""
    collect_key, learn_key = jax.random.split(key)
    env_state, _, episodes = collect_fn(state, env_state, collect_key)
    ready = state.iteration >= first_learning_iteration(config)
    state, buffer, metrics = learn_after_warmup(ready, learn_fn, state, env_state.replay,
                                                learn_key)
    return state, env_state.replace(replay=buffer), {**metrics, **episodes}


def init_envs(env: Env, config: Config, init_replay_fn: Callable[[int], Any], key: jax.Array,
              env_ids: jax.Array) -> EnvState:
    """Reset the teams `env_ids` [E] (recurrent: each agent in the initial state, at an
    episode start), with an empty burn-in window and empty replay rows."""
    num_envs = env_ids.shape[0]
    envs = reset_envs(env, key, env_ids)
    memory = None
    if config.memory != "none":
        memory = team_memory(config.memory, config.memory_size, num_envs, env.spec.num_agents)
        envs = envs.replace(memory=memory, starts=jnp.ones(num_envs, jnp.bool_))
    window = None  # no burn-in: nothing to keep (orbax saves no zero-size arrays)
    if config.burn_in:
        window = empty_steps(env.spec, config, (num_envs, config.burn_in))
    return EnvState(envs, window, memory, init_replay_fn(num_envs))


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind QMIX (or VDN) to a team `env` and `config`; gradients average over `axis_name`."""
    config.validate()
    spec = env.spec
    check_team(spec)
    network, mixer = build_network(spec, config), build_mixer(config)
    loss = functools.partial(losses.qmix_loss, network=network, mixer=mixer,
                             burn_in=config.burn_in, n_step=config.n_step, gamma=config.gamma,
                             double_q=config.double_q)
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
        network=network, mixer=mixer, collect=collect_fn, init_replay=init_replay_fn)


def greedy_action(agent: Agent) -> RecurrentPolicy:
    """Masked-argmax team actions [B, N] for evaluation, carrying a recurrent network's state
    (a feed-forward one carries None); `legal` [B, N, A] from the evaluation's context."""
    config, spec = agent.config, agent.spec

    def step(state: State, memory: PyTree, obs: jax.Array, starts: jax.Array, key: jax.Array,
             legal=None, env_state=None):
        """Greedy team actions and the memory after them."""
        del env_state
        actions, memory, _ = agent.act(state.params, obs, key, greedy=True, legal=legal,
                                       memory=memory, starts=None if memory is None else starts)
        return actions, memory

    return RecurrentPolicy(
        initial=lambda batch: team_memory(config.memory, config.memory_size, batch,
                                          spec.num_agents),
        step=step)


placement_problem = batch_placement_problem  # each device samples its share of the batch
