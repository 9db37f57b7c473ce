"""Proximal Policy Optimisation (clip, GAE or V-trace), discrete and Gaussian actions.

Pure functions over explicit state. `make(env, config)` binds the static parts (network,
optimiser, env) to the functions below and returns an `Agent` whose functions follow the
agent contract:

    init(key) -> State
    act(params, obs, key, greedy=False) -> (action, log_prob, value)
    update(state, trajectory, key) -> (state, metrics)
    train_step(state, env_state, key) -> (state, env_state, metrics)

The loss is in losses.py, the network's uses in networks.py, the per-env configs in
defaults.py. Gradients are averaged with `lax.pmean` over `axis_name` (the execution layer's
device axis). Minibatches are drawn by permuting time steps independently inside each env,
keyed by the env's global id: the global minibatch is then the same whether the envs sit on
one device or are split over many, which makes N-device training equal to 1-device training.

With `vtrace=True` (APPO) the advantages and value targets are V-trace's (`core.returns.vtrace`:
rho_bar = c_bar = 1, the traces' lambda is `gae_lambda`; the advantage carries the clipped rho,
as in RLlib's APPO and Sample Factory) instead of GAE's, and the clipped ratio stays against
the acting policy. V-trace is recomputed before every minibatch step with the current
parameters' log-probabilities over the whole rollout (as Sample Factory does), so its rho is
the pi/mu that the clipped ratio uses: computed once per rollout, rho would be 1 on the device
loop and would correct the host loop's lag but never the policy's drift over the epochs. The
values stay the rollout's (PPO's fixed value targets and clipping reference for the update).

With `objective="vanilla"` the loss is the unclipped policy gradient's
(`losses.actor_critic_loss`): the `a2c` agent takes it with one epoch of one minibatch per
short rollout, and the `pg` agent (REINFORCE) with `targets="episode"` too, each step's
whole-episode return as its target and weight 0 where the episode runs past the rollout.

With `memory="gru"` or `"lstm"` the network is recurrent (`core.networks.RecurrentActorCritic`):
its state is kept per env in the env carry and reset in the step the env auto-resets
(terminated or truncated alike); the trajectory stores the state at the rollout's start and
where episodes start, and the update replays whole env sequences from it (truncated
back-propagation over the rollout), so minibatches are sets of envs, never single steps.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.families.policy_gradient import (
    build_optimizer, minibatch_indices, minibatch_step, recurrent_placement_problem,
    rollout_unroll_for, sgd_epochs, shuffled_minibatches, take_minibatches,
)
from jaxrl_sys.agents.ppo.config import Config
from jaxrl_sys.agents.ppo.losses import actor_critic_loss, ppo_loss
from jaxrl_sys.agents.ppo.networks import (
    Network, build_network, env_actions, evaluate_sequences, sample_actions, sequence_values,
    state_values, step_policy,
)
from jaxrl_sys.core import collectives, obs_norm
from jaxrl_sys.core.networks import initial_memory, reset_memory, scan_unroll
from jaxrl_sys.core.returns import episode_returns, gae, vtrace
from jaxrl_sys.core.rollout import (
    VecEnvState, empty_tally, episode_tally, episode_totals, per_env_keys, reset_envs, step_envs,
)
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics, RecurrentPolicy

DEFAULT_ENV = "CartPole-v1"


@struct.dataclass
class State:
    """Learner state: parameters, optimiser state, iteration counter, and the observation
    statistics when `normalize_obs` (None otherwise)."""

    params: Any
    opt_state: Any
    iteration: jax.Array
    obs_stats: Optional[obs_norm.RunningStats] = None


class Trajectory(NamedTuple):
    """One rollout, time-major [T, B, ...]."""

    obs: jax.Array
    actions: jax.Array
    log_probs: jax.Array
    values: jax.Array
    next_values: jax.Array
    rewards: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    env_ids: jax.Array  # [B]
    starts: Optional[jax.Array] = None  # [T, B] obs[t] begins an episode (recurrent only)
    memory: Any = None  # [B, ...] the recurrent state before step 0 (recurrent only)


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """PPO's pure functions bound to one env and config; `step_policy(params, memory, obs,
    starts, key, greedy)` acts with a recurrent network's state as well (`networks.py`)."""

    network: Network
    step_policy: Callable[..., Any]


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh parameters and optimiser state."""
    network = build_network(spec, config)
    obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
    if config.memory == "none":
        params = network.init(key, obs)
    else:
        params = network.init(key, initial_memory(config.memory, config.memory_size, 1),
                              obs[None], jnp.ones((1, 1), jnp.bool_))
    opt_state = build_optimizer(config).init(params)
    return State(params=params, opt_state=opt_state, iteration=jnp.zeros((), jnp.int32),
                 obs_stats=obs_norm.init_stats(config.normalize_obs, spec.obs_shape))


class Batch(NamedTuple):
    """What one minibatch's gradient step learns from, [M, B, ...]: M time steps of B envs
    (recurrent: [T, B/num_minibatches, ...], whole sequences of some envs)."""

    obs: jax.Array  # normalised with the statistics the actions were chosen with
    actions: jax.Array
    log_probs: jax.Array  # of the acting policy
    values: jax.Array  # of the acting critic: value clipping's reference
    advantages: jax.Array
    returns: jax.Array
    starts: Optional[jax.Array] = None  # recurrent: [T, b] where episodes begin
    memory: Any = None  # recurrent: [b, ...] the state before step 0
    weights: Optional[jax.Array] = None  # targets="episode": 1 where the step's return is known


def collect(env: Env, network: Network, config: Config, axis_name: Optional[str],
            params: Any, obs_stats: Optional[obs_norm.RunningStats], env_state: VecEnvState,
            key: jax.Array) -> tuple[VecEnvState, Trajectory, Metrics]:
    """`rollout_steps` on every env: (env state after them, Trajectory [T, B, ...], episode
    metrics summed over envs and devices). The trajectory keeps the raw observations
    (`update` normalises them with the same `obs_stats` the actions were chosen with).
    A recurrent network's state is reset in the step its env ends, terminated or truncated.

    The loop body acts and steps only: episode metrics are tallied per env in the carry and
    reduced after the loop, and a feed-forward critic values the reached states after it
    (`bootstrap_values`), in one pass over the rollout rather than one per step. A recurrent
    critic values them in the step, from the memory after it."""
    recurrent = env_state.starts is not None

    def one_step(carry: tuple[VecEnvState, Metrics], t):
        """Act on every env [B] and step it; the step's record, its episodes tallied."""
        vstate, tally = carry
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        memory, action, log_prob, value = step_policy(
            network, params, vstate.memory, obs_norm.normalize(obs_stats, vstate.obs),
            vstate.starts, per_env_keys(act_key, vstate.env_ids),
        )
        next_vstate, result = step_envs(env, vstate, env_actions(env.spec, action), env_key)
        reached = result.info["final_observation"]
        if recurrent:  # valued now, from the memory after the step; the next episode restarts
            reached = sequence_values(network, params, memory,
                                      obs_norm.normalize(obs_stats, reached))
            ended = result.terminated | result.truncated
            next_vstate = next_vstate.replace(memory=reset_memory(memory, ended), starts=ended)
        record = (
            vstate.obs, action, log_prob, value, reached,
            result.reward * config.reward_scale, result.terminated, result.truncated,
        )
        tally = jax.tree.map(jnp.add, tally, episode_tally(result.info))
        return (next_vstate, tally), (record, vstate.starts)

    (vstate, tally), (records, starts) = jax.lax.scan(
        one_step, (env_state, empty_tally(env_state.env_ids.shape[0])),
        jnp.arange(config.rollout_steps), unroll=rollout_unroll_for(config),
    )
    obs, actions, log_probs, values, reached, rewards, terminated, truncated = records
    if not recurrent:
        reached = bootstrap_values(network, params, obs_stats, values, reached,
                                   terminated | truncated, vstate.obs)
    trajectory = Trajectory(obs, actions, log_probs, values, reached, rewards, terminated,
                            truncated, env_ids=env_state.env_ids, starts=starts,
                            memory=env_state.memory)
    return vstate, trajectory, episode_totals(tally, axis_name)


def bootstrap_values(network: Network, params: Any, obs_stats: Optional[obs_norm.RunningStats],
                     values: jax.Array, reached: jax.Array, ended: jax.Array,
                     last_obs: jax.Array) -> jax.Array:
    """A feed-forward critic's values [T, B] of the states each step reached, given the
    rollout's values [T, B], the reached raw observations [T, B, ...] (the pre-reset
    `final_observation`), where episodes ended [T, B], and the observations after the last
    step [B, ...]. Where no episode ended, the reached state is the next step's, whose value
    acting already took; where one ended, the critic values it here, in one batched pass over
    the rollout. Equal to valuing every reached state in its step up to float32 rounding
    (the batched matrix product may round differently on some CPUs; tested)."""
    steps, envs = values.shape
    flat = reached.reshape(steps * envs, *reached.shape[2:])
    at_ends = state_values(network, params, obs_norm.normalize(obs_stats, flat))
    last = state_values(network, params, obs_norm.normalize(obs_stats, last_obs))
    following = jnp.concatenate([values[1:], last[None]], axis=0)
    return jnp.where(ended, at_ends.reshape(steps, envs), following)


def minibatch_loss(network: Network, config: Config, axis_name: Optional[str],
                   params: Any, batch: Batch) -> tuple[jax.Array, Metrics]:
    """`losses.ppo_loss` (objective "vanilla": `losses.actor_critic_loss`) of a minibatch
    [M, B, ...] under `params`, flattened to [M * B] (recurrent: its sequences replayed from
    their stored state)."""
    flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
    log_probs, entropy, values = evaluate_sequences(network, params, batch.memory, batch.obs,
                                                    batch.starts, batch.actions)
    advantages, returns = flat(batch.advantages), flat(batch.returns)
    if config.objective == "vanilla":
        weights = None if batch.weights is None else flat(batch.weights)
        return actor_critic_loss(
            log_probs, entropy, values, advantages, returns, weights, vf_coef=config.vf_coef,
            ent_coef=config.ent_coef, normalize_advantages=config.normalize_advantages,
            axis_name=axis_name)
    old_log_probs, old_values = flat(batch.log_probs), flat(batch.values)
    return ppo_loss(
        log_probs, entropy, values, old_log_probs, old_values, advantages, returns,
        clip_eps=config.clip_eps, vf_coef=config.vf_coef, ent_coef=config.ent_coef,
        clip_value=config.clip_value, normalize_advantages=config.normalize_advantages,
        axis_name=axis_name,
    )


def whole_episode_targets(traj: Trajectory,
                          gamma: float) -> tuple[jax.Array, jax.Array, jax.Array]:
    """REINFORCE's targets for a rollout [T, B]: advantages G_t - V(s_t), value targets G_t
    and weights 1 for the steps whose episode ends inside the rollout (their discounted
    reward-to-go G_t is whole, `core.returns.episode_returns`); 0 for the rest, whose targets
    are then the rollout's values (nothing to learn)."""
    returns, complete = episode_returns(traj.rewards, traj.terminated, traj.truncated, gamma)
    returns = jnp.where(complete, returns, traj.values)
    return returns - traj.values, returns, complete.astype(traj.values.dtype)


def vtrace_targets(network: Network, config: Config, params: Any, obs: jax.Array,
                   traj: Trajectory) -> tuple[jax.Array, jax.Array]:
    """V-trace's (pg advantages [T, B], value targets vs [T, B]) for the whole rollout under
    the current `params`' log-probabilities against the acting ones, with the rollout's
    values: APPO's targets. `obs` [T, B, ...] are the rollout's, normalised."""
    steps, envs = traj.actions.shape[:2]
    log_probs, _, _ = evaluate_sequences(network, params, traj.memory, obs, traj.starts,
                                         traj.actions)
    vs, advantages = vtrace(
        traj.log_probs, log_probs.reshape(steps, envs), traj.rewards, traj.values,
        traj.next_values, traj.terminated, traj.truncated,
        gamma=config.gamma, lam=config.gae_lambda,
    )
    return advantages, vs


def update(network: Network, optimizer: optax.GradientTransformation, config: Config,
           axis_name: Optional[str], state: State, traj: Trajectory,
           key: jax.Array) -> tuple[State, Metrics]:
    """PPO epochs over one trajectory [T, B, ...]: GAE (or, with `vtrace`, V-trace before each
    minibatch step), then shuffled minibatch gradient steps (gradients averaged over
    `axis_name`). Its raw observations are normalised with `state.obs_stats` (those it was
    collected with), whose statistics then take them in, pooled over envs and devices.
    Metrics: means over the epochs' minibatches."""
    obs = obs_norm.normalize(state.obs_stats, traj.obs)
    weights = None
    if config.vtrace:
        advantages = returns = jnp.zeros_like(traj.values)  # replaced before every step
    elif config.targets == "episode":
        advantages, returns, weights = whole_episode_targets(traj, config.gamma)
    else:
        advantages, returns = gae(
            traj.rewards, traj.values, traj.next_values, traj.terminated, traj.truncated,
            config.gamma, config.gae_lambda,
        )
    data = Batch(obs, traj.actions, traj.log_probs, traj.values, advantages, returns,
                 traj.starts, traj.memory, weights)
    grad_fn = jax.grad(functools.partial(minibatch_loss, network, config, axis_name),
                       has_aux=True)
    step = functools.partial(minibatch_step, grad_fn, optimizer, axis_name)

    def vtrace_step(carry, idx: jax.Array):
        """`step` on the steps `idx` [M, B] with V-trace targets of the current parameters."""
        advantages, returns = vtrace_targets(network, config, carry[0], obs, traj)
        batch = take_minibatches(data._replace(advantages=advantages, returns=returns), idx,
                                 config)
        return step(carry, batch)

    def epoch_minibatches(epoch_index: jax.Array):
        """The epoch's freshly shuffled minibatches (V-trace: their indices)."""
        epoch_key = jax.random.fold_in(key, epoch_index)
        if config.vtrace:
            return minibatch_indices(traj.env_ids, epoch_key, config)
        return shuffled_minibatches(data, traj.env_ids, epoch_key, config)

    (params, opt_state), metrics = sgd_epochs(
        vtrace_step if config.vtrace else step, (state.params, state.opt_state),
        config.update_epochs, epoch_minibatches,
        epoch_unroll=scan_unroll(config.torso, config.update_epochs),
        minibatch_unroll=scan_unroll(config.torso, config.num_minibatches))
    metrics = collectives.pmean(jax.tree.map(jnp.mean, metrics), axis_name)
    new_state = State(params=params, opt_state=opt_state, iteration=state.iteration + 1,
                      obs_stats=obs_norm.update(state.obs_stats, traj.obs, axis_name))
    return new_state, metrics


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind PPO to `env` and `config`; `axis_name` is the device axis gradients average over."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)
    bound_update = functools.partial(update, network, build_optimizer(config), config, axis_name)
    rollout = functools.partial(collect, env, network, config, axis_name)

    def train_step(state: State, env_state: VecEnvState, key: jax.Array):
        """Collect `rollout_steps` on every env, then learn from it."""
        rollout_key, update_key = jax.random.split(key)
        state = state.replace(
            obs_stats=obs_norm.update_if_empty(state.obs_stats, env_state.obs, axis_name)
        )
        env_state, traj, episodes = rollout(state.params, state.obs_stats, env_state, rollout_key)
        state, metrics = bound_update(state, traj, update_key)
        return state, env_state, {**metrics, **episodes}

    def init_envs(key: jax.Array, env_ids: jax.Array) -> VecEnvState:
        """Freshly reset envs of the global ids `env_ids` [B] (and a recurrent network's
        initial state for each, every one at an episode start)."""
        envs = reset_envs(env, key, env_ids)
        if config.memory == "none":
            return envs
        return envs.replace(
            memory=initial_memory(config.memory, config.memory_size, env_ids.shape[0]),
            starts=jnp.ones(env_ids.shape, jnp.bool_))

    return Agent(config, spec, functools.partial(init, spec=spec, config=config), init_envs,
                 functools.partial(sample_actions, network), bound_update, train_step,
                 network=network, step_policy=functools.partial(step_policy, network))

def greedy_action(agent: Agent) -> Union[Callable[[State, jax.Array, jax.Array], jax.Array],
                                         RecurrentPolicy]:
    """Deterministic actions [B] (argmax / Gaussian mean clipped to the bounds) for
    evaluation, from observations [B, ...] normalised with the trained statistics; a
    `RecurrentPolicy` carrying the network's state for a recurrent config."""
    config = agent.config
    if config.memory != "none":
        def step(state: State, memory, obs: jax.Array, starts: jax.Array, key: jax.Array,
                 legal=None, env_state=None):
            """Greedy actions [B] and the memory after them."""
            del legal, env_state  # every action is legal; acting needs the observation only
            memory, action, _, _ = agent.step_policy(
                state.params, memory, obs_norm.normalize(state.obs_stats, obs), starts, key,
                greedy=True)
            return env_actions(agent.spec, action), memory

        return RecurrentPolicy(
            initial=lambda batch: initial_memory(config.memory, config.memory_size, batch),
            step=step)

    def policy(state: State, obs: jax.Array, key: jax.Array, legal=None,
               env_state=None) -> jax.Array:
        """Greedy actions [B] for observations [B, ...] (`key` unused by a greedy policy)."""
        del legal, env_state  # every action is legal; acting needs the observation only
        action = agent.act(state.params, obs_norm.normalize(state.obs_stats, obs), key,
                           greedy=True)[0]
        return env_actions(agent.spec, action)

    return policy


DEFAULT_EVAL_EPISODES = 0  # PPO's training returns already measure its (stochastic) policy
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "optional"  # whether its network is recurrent (core.types.MEMORY)


placement_problem = recurrent_placement_problem  # the family's check of recurrent minibatches
