"""Multi-agent PPO for a cooperative team (`EnvSpec.num_agents` > 1): MAPPO, whose critic
reads the env's world state, or IPPO (`critic="local"`), whose critic reads each agent's own
observation. One set of actor and critic parameters serves every agent (an agent's one-hot id
is appended to its inputs); unavailable actions are never sampled. Continuous actions (a
`Box`, MPE's `action_type="Continuous"`) are a diagonal Gaussian, stepped clipped to the box as
PPO's (`env_actions`).

    init(key) -> State
    act(params, obs, key, greedy=False) -> (actions [B, N], log-probs [B, N])   (feed-forward)
    update(state, trajectory, key) -> (state, metrics)
    train_step(state, env_state, key) -> (state, env_state, metrics)

It is PPO over (env, agent) rows: every agent learns from the team reward with its own value
and advantage (`losses.team_advantages`); PPO's clipped loss averages over all rows with the
unavailable actions masked (`losses.mappo_loss`). The
minibatches are PPO's (`agents.ppo.agent.minibatch_indices`, keyed by global env id, an env's
agents always together), so N devices equal one.

Teams that compete (`EnvSpec.teams`, predator-prey) take `policies="by_team"`: a policy per
team, its parameters stacked on a team axis [K, ...] with its own optimiser, every agent
credited with its own team's reward, the loss summed over teams (each team's rows its own
PPO loss). `frozen_teams` keeps the named teams at their initial, near-uniform policy: a
random opponent to learn against. Each team's episode return is a metric (`return_<team>`).

With `memory="gru"|"lstm"` the actor and the critic each have a recurrent core whose state is
kept per (env, agent) in the env carry, reset in the step the env ends, and replayed over
whole env sequences in the update, as PPO's.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.families.actor_critic import env_actions
from jaxrl_sys.agents.families.policy_gradient import (
    build_optimizer, collect_then_update, minibatch_indices, minibatch_step,
    recurrent_placement_problem, rollout_unroll_for, sgd_epochs, take_minibatches,
)
from jaxrl_sys.agents.families.teams import (
    check_policies, check_team, greedy_agents, init_per_team, learning_teams, per_team_optimizer,
    team_agents, team_return_metrics, with_agent_ids,
)
from jaxrl_sys.agents.mappo.config import Config
from jaxrl_sys.agents.mappo.losses import mappo_loss, team_advantages
from jaxrl_sys.agents.mappo.networks import (
    TeamActorCritic, apply_sequences, critic_inputs, sample, sequence_values, team_memory,
)
from jaxrl_sys.core import collectives
from jaxrl_sys.core.networks import reset_memory
from jaxrl_sys.core.rollout import (
    VecEnvState, episode_metrics, legal_actions, per_env_keys, reset_envs, step_envs,
)
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics, PyTree, RecurrentPolicy

DEFAULT_ENV = "jaxmarl:MPE_simple_spread_v3"


@struct.dataclass
class State:
    """Learner state: parameters, optimiser state, iteration counter."""

    params: Any
    opt_state: Any
    iteration: jax.Array


class Trajectory(NamedTuple):
    """One rollout of B teams of N agents, time-major [T, B, ...]."""

    obs: jax.Array  # [T, B, N, D]
    critic_in: jax.Array  # [T, B, N, C] what the critic read
    legal: Optional[jax.Array]  # [T, B, N, A]; None: continuous actions
    actions: jax.Array  # [T, B, N], or continuous [T, B, N, A] (unclipped)
    log_probs: jax.Array  # [T, B, N]
    values: jax.Array  # [T, B, N]
    next_values: jax.Array  # [T, B, N] of the state reached (pre-reset)
    rewards: jax.Array  # [T, B] the team's, or (by_team) [T, B, N] each agent's team's
    terminated: jax.Array  # [T, B]
    truncated: jax.Array  # [T, B]
    env_ids: jax.Array  # [B]
    starts: Optional[jax.Array] = None  # [T, B] recurrent: obs[t] begins an episode
    memory: PyTree = None  # recurrent: (actor, critic) [B, N, ...] before step 0


class Batch(NamedTuple):
    """One minibatch's data: [M, B, N, ...] steps, or (recurrent) [T, b, N, ...] sequences."""

    obs: jax.Array
    critic_in: jax.Array
    legal: Optional[jax.Array]
    actions: jax.Array
    log_probs: jax.Array
    values: jax.Array
    advantages: jax.Array
    returns: jax.Array
    starts: Optional[jax.Array] = None
    memory: PyTree = None


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """MAPPO's functions bound to an env and a config; `network` for evaluation."""

    network: TeamActorCritic


def build_network(spec: EnvSpec, config: Config) -> TeamActorCritic:
    """The shared actor and critic for a team spec (per team, with `policies="by_team"`)."""
    width = spec.action_space.n if spec.discrete else spec.action_space.shape[0]
    return TeamActorCritic(action_dim=width, hidden=config.hidden,
                           activation=config.activation, memory=config.memory,
                           memory_size=config.memory_size,
                           agent_teams=spec.agent_teams if config.policies == "by_team" else (),
                           continuous=not spec.discrete)


def build_team_optimizer(spec: EnvSpec, config: Config) -> optax.GradientTransformation:
    """The family's optimiser; with a policy per team, one per team, frozen teams' updates
    zeroed."""
    optimizer = build_optimizer(config)
    if config.policies != "by_team":
        return optimizer
    return per_team_optimizer(optimizer, learning_teams(spec, config.frozen_teams))


def inputs_of(spec: EnvSpec, config: Config, obs: jax.Array,
              world_state: Optional[jax.Array]) -> tuple[jax.Array, jax.Array]:
    """(actor inputs [..., N, D + N], critic inputs [..., N, C]) of observations and world
    states (None for a local critic, which does not read them)."""
    del spec
    return with_agent_ids(obs), critic_inputs(obs, world_state, config.critic == "central")


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh parameters and optimiser state."""
    network = build_network(spec, config)
    obs = jnp.zeros((1, 1, *spec.obs_shape), jnp.float32)
    world = jnp.zeros((1, 1, *spec.state_shape), jnp.float32)
    actor_in, critic_in = inputs_of(spec, config, obs, world)
    rows = jax.tree.map(lambda m: m[0],  # one env's agents as the network's rows [N, ...]
                        team_memory(config.memory, config.memory_size, 1, spec.num_agents))
    init_one = functools.partial(
        network.init, memory=rows,
        actor_in=actor_in.reshape(1, spec.num_agents, -1),
        critic_in=critic_in.reshape(1, spec.num_agents, -1),
        starts=jnp.ones((1, spec.num_agents), jnp.bool_))
    params = (init_per_team(init_one, key, len(spec.team_names)) if network.agent_teams
              else init_one(key))
    opt_state = build_team_optimizer(spec, config).init(params)
    return State(params=params, opt_state=opt_state, iteration=jnp.zeros((), jnp.int32))


def team_step(network: TeamActorCritic, params: Any, memory: PyTree, actor_in: jax.Array,
              critic_in: jax.Array, starts: Optional[jax.Array], legal: jax.Array,
              key: jax.Array, greedy: "bool | jax.Array" = False):
    """One acting step of B teams: (memory after it, actions [B, N], log-probs [B, N], values
    [B, N]); a recurrent network resets the envs whose `starts` [B] is True first."""
    memory, (logits, values) = apply_sequences(
        network, params, memory, actor_in[None], critic_in[None],
        None if starts is None else starts[None])
    action, log_prob = sample(logits[0], legal, key, greedy)
    return memory, action, log_prob, values[0]


def collect(env: Env, network: TeamActorCritic, config: Config, axis_name: Optional[str],
            params: Any, env_state: VecEnvState,
            key: jax.Array) -> tuple[VecEnvState, Trajectory, Metrics]:
    """`rollout_steps` on every team: (env state after them, Trajectory [T, B, ...], episode
    metrics summed over envs and devices). Recurrent state resets in the step its env ends."""
    central = config.critic == "central"
    world_state = jax.vmap(env.world_state)
    by_team = network.agent_teams

    def one_step(vstate: VecEnvState, t):
        """Every agent of every env [B, N] acts; the envs step."""
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        legal = legal_actions(env, vstate.env_state) if env.spec.discrete else None
        actor_in, critic_in = inputs_of(env.spec, config, vstate.obs,
                                        world_state(vstate.env_state) if central else None)
        # one key per env, as PPO draws them, so a split over devices draws the same actions
        keys = per_env_keys(act_key, vstate.env_ids)
        memory, (logits, values) = apply_sequences(
            network, params, vstate.memory, actor_in[None], critic_in[None],
            None if vstate.starts is None else vstate.starts[None])
        action, log_prob = jax.vmap(sample)(logits[0], legal, keys)
        next_vstate, result = step_envs(env, vstate, env_actions(env.spec, action), env_key)
        _, final_critic_in = inputs_of(
            env.spec, config, result.info["final_observation"],
            result.info["final_world_state"] if central else None)
        if memory is None:  # valued after the rollout, every step in one batch
            reached = final_critic_in
        else:  # the state reached, valued from the critic's memory after the step
            reached = sequence_values(network, params, memory[1], final_critic_in[None],
                                      jnp.zeros_like(vstate.starts)[None])[0]
            ended = result.terminated | result.truncated  # the next episode starts afresh
            next_vstate = next_vstate.replace(
                memory=jax.tree.map(lambda m: reset_memory(m, ended), memory), starts=ended)
        # by team: each agent's reward is its team's [B, N]
        reward = (result.info["team_rewards"][:, jnp.asarray(by_team)] if by_team
                  else result.reward)
        record = (vstate.obs, critic_in, legal, action, log_prob, values[0], reached,
                  reward * config.reward_scale, result.terminated, result.truncated)
        episodes = episode_metrics(result.info, None)
        if by_team:  # each team's returns of the episodes that ended [K]
            episodes["team_return_sum"] = jnp.sum(result.info["team_episode_return"], axis=0)
        return next_vstate, ((record, vstate.starts), episodes)

    vstate, ((records, starts), episodes) = jax.lax.scan(
        one_step, env_state, jnp.arange(config.rollout_steps), unroll=rollout_unroll_for(config))
    if env_state.memory is None:  # the reached states' critic inputs [T, B, N, C] -> values
        records = (*records[:6], sequence_values(network, params, None, records[6], None),
                   *records[7:])
    trajectory = Trajectory(*records, env_ids=env_state.env_ids, starts=starts,
                            memory=env_state.memory)
    team_sums = episodes.pop("team_return_sum", None)  # [T, K] by team
    episodes = collectives.psum(jax.tree.map(jnp.sum, episodes), axis_name)
    if by_team:
        episodes.update(team_return_metrics(team_sums, episodes["episode_count"],
                                            env.spec.team_names, axis_name))
    return vstate, trajectory, episodes


def minibatch_loss(network: TeamActorCritic, config: Config, axis_name: Optional[str],
                   params: Any, batch: Batch) -> tuple[jax.Array, Metrics]:
    """PPO's clipped loss over every (step, env, agent) row of a minibatch under `params`
    (recurrent: its env sequences replayed from their stored state); with a policy per team,
    the sum of each team's loss over its own agents' rows (metrics averaged over teams)."""
    _, (logits, values) = apply_sequences(network, params, batch.memory, with_agent_ids(batch.obs),
                                          batch.critic_in, batch.starts)
    loss = functools.partial(
        mappo_loss, clip_eps=config.clip_eps, vf_coef=config.vf_coef, ent_coef=config.ent_coef,
        clip_value=config.clip_value, normalize_advantages=config.normalize_advantages,
        axis_name=axis_name)
    rows = (logits, batch.legal, values, batch.actions, batch.log_probs, batch.values,
            batch.advantages, batch.returns)
    if not network.agent_teams:
        return loss(*rows)
    teams = [loss(*(None if x is None else x[:, :, jnp.asarray(agents)]  # agents: axis 2
                    for x in rows))
             for agents in team_agents(network.agent_teams)]
    return (sum(total for total, _ in teams),
            jax.tree.map(lambda *m: sum(m) / len(m), *(metrics for _, metrics in teams)))


def update(network: TeamActorCritic, optimizer: optax.GradientTransformation, config: Config,
           axis_name: Optional[str], state: State, traj: Trajectory,
           key: jax.Array) -> tuple[State, Metrics]:
    """PPO epochs over one team trajectory: GAE per agent on the team reward, then shuffled
    minibatch gradient steps (gradients averaged over `axis_name`)."""
    advantages, returns = team_advantages(traj.rewards, traj.values, traj.next_values,
                                          traj.terminated, traj.truncated, config.gamma,
                                          config.gae_lambda)
    data = Batch(traj.obs, traj.critic_in, traj.legal, traj.actions, traj.log_probs,
                 traj.values, advantages, returns, traj.starts, traj.memory)
    grad_fn = jax.grad(functools.partial(minibatch_loss, network, config, axis_name),
                       has_aux=True)

    def epoch_minibatches(epoch_index: jax.Array) -> Batch:
        """The epoch's freshly shuffled minibatches."""
        idx = minibatch_indices(traj.env_ids, jax.random.fold_in(key, epoch_index), config)
        return take_minibatches(data, idx, config)

    (params, opt_state), metrics = sgd_epochs(
        functools.partial(minibatch_step, grad_fn, optimizer, axis_name),
        (state.params, state.opt_state), config.update_epochs, epoch_minibatches)
    metrics = collectives.pmean(jax.tree.map(jnp.mean, metrics), axis_name)
    return State(params=params, opt_state=opt_state, iteration=state.iteration + 1), metrics


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind MAPPO to a team env and `config`; `axis_name` is the device axis gradients average
    over."""
    config.validate()
    spec = env.spec
    check_team(spec, competing=True, continuous=True)
    check_policies(spec, config.policies, config.frozen_teams)
    network = build_network(spec, config)
    bound_update = functools.partial(update, network, build_team_optimizer(spec, config), config,
                                     axis_name)
    rollout = functools.partial(collect, env, network, config, axis_name)

    def init_envs(key: jax.Array, env_ids: jax.Array) -> VecEnvState:
        """Freshly reset teams of the global ids `env_ids` [B] (and a recurrent network's
        initial state for each agent)."""
        envs = reset_envs(env, key, env_ids)
        if config.memory == "none":
            return envs
        return envs.replace(
            memory=team_memory(config.memory, config.memory_size, env_ids.shape[0],
                               spec.num_agents),
            starts=jnp.ones(env_ids.shape, jnp.bool_))

    def act(params: Any, obs: jax.Array, key: jax.Array, greedy: bool = False,
            world_state: Optional[jax.Array] = None, legal: Optional[jax.Array] = None):
        """Feed-forward actions [B, N] (continuous: [B, N, A] in the box) and log-probs (of
        the unclipped sample) for observations [B, N, D] (the world state [B, S] for a central
        critic; all actions legal unless `legal` [B, N, A])."""
        if world_state is None:
            world_state = jnp.zeros((obs.shape[0], *spec.state_shape), jnp.float32)
        if legal is None and spec.discrete:
            legal = jnp.ones((*obs.shape[:2], spec.action_space.n), jnp.bool_)
        actor_in, critic_in = inputs_of(spec, config, obs, world_state)
        _, action, log_prob, _ = team_step(network, params, None, actor_in, critic_in, None,
                                           legal, key, greedy)
        return env_actions(spec, action), log_prob

    return Agent(config, spec, functools.partial(init, spec=spec, config=config), init_envs,
                 act, bound_update, functools.partial(collect_then_update, rollout, bound_update),
                 network=network)


def greedy_action(agent: Agent) -> RecurrentPolicy:
    """Masked-argmax actions [B, N] for evaluation, carrying a recurrent network's state (a
    feed-forward one carries None); `legal` [B, N, A] from the evaluation's context. A frozen
    team's agents sample from their policy (a near-uniform one: a random opponent)."""
    config, spec = agent.config, agent.spec
    greedy = greedy_agents(spec, config.frozen_teams)
    greedy = greedy if greedy is True else jnp.asarray(greedy)

    def step(state: State, memory: PyTree, obs: jax.Array, starts: jax.Array, key: jax.Array,
             legal=None, env_state=None):
        """Greedy team actions [B, N] (continuous: the means, clipped to the box) and the memory
        after them (the critic, which acting does not read, sees a blank world state)."""
        del env_state
        world_state = jnp.zeros((obs.shape[0], *spec.state_shape), jnp.float32)
        if legal is None and spec.discrete:
            legal = jnp.ones((*obs.shape[:2], spec.action_space.n), jnp.bool_)
        actor_in, critic_in = inputs_of(spec, config, obs, world_state)
        memory, action, _, _ = team_step(agent.network, state.params, memory, actor_in,
                                         critic_in, None if memory is None else starts, legal,
                                         key, greedy=greedy)
        return env_actions(spec, action), memory

    return RecurrentPolicy(
        initial=lambda batch: team_memory(config.memory, config.memory_size, batch,
                                          spec.num_agents),
        step=step)


DEFAULT_EVAL_EPISODES = 32  # greedy episodes per evaluation (SMAX's: the win rate)
PLAYS = "team"  # what it learns (core.types.PLAYS)
MEMORY = "optional"  # whether its network is recurrent (core.types.MEMORY)


placement_problem = recurrent_placement_problem  # the family's check of recurrent minibatches
