"""MADDPG (Lowe et al. 2017) for a team with discrete or continuous actions: decentralised
actors, one centralised critic per agent over the world state and the joint action, learned
off-policy from replayed joint steps on device.

`make(env, config)` binds config, networks and the functions below into an `Agent` of pure
functions following the agent contract; the losses are in losses.py. One set of actor
parameters serves every agent, and one set of critic parameters every agent's critic (each
network reads the agent's one-hot id). Acting samples each agent's policy (Gumbel-max), or
uniformly among the legal actions before `learning_starts`; the actors learn through the
straight-through Gumbel-softmax. With continuous actions (a `Box`, such as MPE's
`action_type="Continuous"`) the actors are deterministic (tanh into [-1, 1], mapped onto the
env's box), explore with Gaussian noise of `exploration_noise` (uniform actions before
`learning_starts`), and learn by the deterministic policy gradient through their critics;
replay keeps actions in [-1, 1]. Replay is the continuous-control family's: env-major and per
device, each device sampling its share of the global batch; the Gumbel noise of an update is
drawn for the global batch and sliced, and gradients are averaged over `axis_name`, so one
update on N devices equals one on 1 device.

Teams that compete (`EnvSpec.teams`, predator-prey) take `policies="by_team"`: an actor and
critics per team, parameters stacked [K, ...] (`teams.PerTeam`: every team's networks read
the whole team, each agent keeps its own team's output), each team with its own optimisers;
each agent's critic learns from its own team's reward (replayed per agent, [N]).
`frozen_teams` keeps the named teams at their initial policy, which they sample in greedy
evaluation too (a random opponent). Each team's episode return is a metric (`return_<team>`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.families.continuous_control import (
    ActorCriticOptState, ActorCriticParams, ActorCriticState,
    absorb, global_noise, local_batch_size, mean_over_learned, to_env_units, to_unit_box,
    uniform_actions,
)
from jaxrl_sys.agents.families.teams import (
    PerTeam, check_policies, check_team, greedy_agents, learning_teams, per_team_optimizer,
    team_return_metrics,
)
from jaxrl_sys.agents.maddpg import losses
from jaxrl_sys.agents.maddpg.config import Config
from jaxrl_sys.agents.maddpg.losses import Targets, Trainable, gumbel_max_actions
from jaxrl_sys.agents.maddpg.networks import CentralCritics, TeamActor
from jaxrl_sys.core import collectives, replay
from jaxrl_sys.core.learner import batch_placement_problem
from jaxrl_sys.core.rollout import (
    VecEnvState, episode_metrics, legal_actions, per_env_keys, reset_envs, step_envs,
)
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics

DEFAULT_EVAL_EPISODES = 32  # greedy: each agent's most likely legal action, or its policy's
PLAYS = "team"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


# the family's learner state: an actor, critics, their targets, optimiser states
Params = ActorCriticParams
OptState = ActorCriticOptState
State = ActorCriticState


@struct.dataclass
class EnvState:
    """Per-env state: the teams' envs and their replay rows (leading env axis)."""

    envs: VecEnvState
    replay: replay.ReplayState


@dataclasses.dataclass(frozen=True, eq=False)
class Setup:
    """The static parts `make` binds: config, env, networks, optimisers and loss."""

    config: Config
    env: Env
    actor: "TeamActor | PerTeam"
    critic: "CentralCritics | PerTeam"
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation
    loss: Callable[..., tuple[jax.Array, Metrics]]  # `losses.maddpg_loss` (or deterministic)
    axis_name: Optional[str]

    @property
    def continuous(self) -> bool:
        """Whether the team's actions are continuous (a `Box`)."""
        return not self.env.spec.discrete


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """MADDPG's pure functions bound to one team env and config."""

    setup: Setup


def action_width(spec: EnvSpec) -> int:
    """A: the discrete actions' count, or the continuous action's size."""
    return spec.action_space.n if spec.discrete else spec.action_space.shape[0]


def joint_step(spec: EnvSpec, agents_rewards: bool = False) -> dict:
    """One env's replay row, zeros: the team's observations, world state and (discrete) legal
    actions before and after the step, its actions (int [N], or [N, A] in [-1, 1]), the team
    reward (by team: each agent's team's [N]) and the termination."""
    agents = spec.num_agents
    obs = jnp.zeros(spec.obs_shape, jnp.float32)
    world = jnp.zeros(spec.state_shape, jnp.float32)
    row = dict(obs=obs, world=world,
               reward=jnp.zeros((agents,) if agents_rewards else (), jnp.float32),
               terminated=jnp.zeros((), jnp.bool_), next_obs=obs, next_world=world)
    if not spec.discrete:
        return dict(row, action=jnp.zeros((agents, action_width(spec)), jnp.float32))
    legal = jnp.ones((agents, spec.action_space.n), jnp.bool_)
    return dict(row, legal=legal, action=jnp.zeros((agents,), jnp.int32), next_legal=legal)


def init(setup: Setup, key: jax.Array) -> State:
    """Fresh actor and critics, targets equal to them, optimiser states and counters."""
    spec = setup.env.spec
    row = jax.tree.map(lambda x: x[None], joint_step(spec, by_team(setup)))
    joints = jnp.zeros((1, spec.num_agents, spec.num_agents, action_width(spec)), jnp.float32)
    actor_key, critic_key = jax.random.split(key)
    actor = setup.actor.init(actor_key, row["obs"])
    critic = setup.critic.init(critic_key, row["world"], joints)
    zero = jnp.zeros((), jnp.int32)
    return State(params=Params(actor, critic, actor, critic),
                 opt_state=OptState(setup.actor_optimizer.init(actor),
                                    setup.critic_optimizer.init(critic)),
                 env_steps=zero, updates=zero)


def act(setup: Setup, params: Params, obs: jax.Array, key: jax.Array,
        greedy: "bool | tuple[bool, ...]" = False,
        legal: Optional[jax.Array] = None) -> jax.Array:
    """Team actions [B, N] for observations [B, N, D]: each agent's most likely legal action
    (`greedy`; a tuple [N] chooses per agent), or a sample of its policy under per-env keys
    [B] or one key; `legal` [B, N, A] (all legal if None). Continuous: [B, N, A] in the env's
    box, the policy's action plus Gaussian noise unless greedy."""
    if setup.continuous:
        return continuous_actions(setup, params, obs, key, greedy)
    logits = setup.actor.apply(params.actor, obs.astype(jnp.float32))
    if legal is None:
        legal = jnp.ones(logits.shape, jnp.bool_)
    if greedy is True:
        return gumbel_max_actions(logits, legal, jnp.zeros_like(logits))
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    gumbel = jax.vmap(lambda k: jax.random.gumbel(k, logits.shape[1:]))(keys)
    if greedy is not False:  # bool [N]: greedy agents, the others sample
        gumbel = jnp.where(jnp.asarray(greedy)[:, None], 0.0, gumbel)
    return gumbel_max_actions(logits, legal, gumbel)


def continuous_actions(setup: Setup, params: Params, obs: jax.Array, key: jax.Array,
                       greedy: "bool | tuple[bool, ...]" = False) -> jax.Array:
    """Continuous team actions [B, N, A] in the env's box: the policy's, with
    `exploration_noise` times standard normal noise (per-env keys [B] or one key) for the
    agents that are not `greedy` (a tuple [N] chooses per agent), clipped to the box."""
    space = setup.env.spec.action_space
    actions = setup.actor.apply(params.actor, obs.astype(jnp.float32))
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    if greedy is True:  # no noise to draw
        return to_env_units(actions, low, high)
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    noise = jax.vmap(lambda k: jax.random.normal(k, actions.shape[1:]))(keys)
    exploring = jnp.logical_not(jnp.broadcast_to(jnp.asarray(greedy), actions.shape[1:2]))
    scale = setup.config.exploration_noise * exploring.astype(jnp.float32)[:, None]
    return to_env_units(jnp.clip(actions + scale * noise, -1.0, 1.0), low, high)


def explore(setup: Setup, params: Params, obs: jax.Array, legal: Optional[jax.Array],
            keys: jax.Array, env_steps: jax.Array) -> jax.Array:
    """Each env's team actions [B, N] (continuous: [B, N, A]): samples of the policy, or
    uniform among the legal actions (in the box) from each env's key in `keys` [B] before
    `learning_starts` env steps."""
    if setup.continuous:
        space = setup.env.spec.action_space
        random_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
        agents = obs.shape[1]
        uniform = jax.vmap(lambda k: uniform_actions(
            jax.random.split(k, agents), jnp.asarray(space.low), jnp.asarray(space.high))
        )(random_keys)
        return jnp.where(env_steps < setup.config.learning_starts, uniform,
                         continuous_actions(setup, params, obs, keys))
    policy = act(setup, params, obs, keys, legal=legal)
    random_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    uniform = gumbel_max_actions(
        jnp.zeros(legal.shape), legal,
        jax.vmap(lambda k: jax.random.gumbel(k, legal.shape[1:]))(random_keys))
    return jnp.where(env_steps < setup.config.learning_starts, uniform, policy)


def update(setup: Setup, state: State, batch: dict, key: jax.Array) -> tuple[State, Metrics]:
    """One gradient step on the critics and the actor from this device's share of the global
    batch, then the targets move towards both by `tau` (Polyak)."""
    config, params = setup.config, state.params
    trainable = Trainable(params.actor, params.critic)
    targets = Targets(params.target_actor, params.target_critic)
    if setup.continuous:  # deterministic targets and policy gradient: no noise
        grads, metrics = jax.grad(setup.loss, has_aux=True)(trainable, targets, batch)
    else:
        local, agents, actions = batch["legal"].shape[:3]
        noise = global_noise(setup.axis_name, key, local, (2, agents, actions),
                             draw=jax.random.gumbel)
        grads, metrics = jax.grad(setup.loss, has_aux=True)(trainable, targets, batch,
                                                            jnp.moveaxis(noise, 1, 0))
    grads = collectives.pmean(grads, setup.axis_name)
    actor_step, actor_opt = setup.actor_optimizer.update(grads.actor, state.opt_state.actor)
    critic_step, critic_opt = setup.critic_optimizer.update(grads.critic,
                                                            state.opt_state.critic)
    actor = optax.apply_updates(params.actor, actor_step)
    critic = optax.apply_updates(params.critic, critic_step)
    new_params = Params(actor, critic,
                        optax.incremental_update(actor, params.target_actor, config.tau),
                        optax.incremental_update(critic, params.target_critic, config.tau))
    new_state = state.replace(params=new_params, opt_state=OptState(actor_opt, critic_opt),
                              updates=state.updates + 1)
    return new_state, collectives.pmean(metrics, setup.axis_name)


def init_envs(setup: Setup, key: jax.Array, env_ids: jax.Array) -> EnvState:
    """Reset the teams `env_ids` [E] and give them empty replay rows."""
    return EnvState(reset_envs(setup.env, key, env_ids),
                    replay.init(joint_step(setup.env.spec, by_team(setup)), env_ids.shape[0],
                                setup.config.capacity_per_env))


def train_step(setup: Setup, state: State, env_state: EnvState, key: jax.Array
               ) -> tuple[State, EnvState, Metrics]:
    """`rollout_steps` vectorised team steps, each into replay and followed by
    `updates_per_step` updates once past the warm-up."""
    config, env = setup.config, setup.env
    world_state = jax.vmap(env.world_state)
    local_batch = local_batch_size(config.batch_size, config.num_envs,
                                   env_state.envs.obs.shape[0])

    def env_step(carry, t):
        state, es = carry
        act_key, env_key, update_key = jax.random.split(jax.random.fold_in(key, t), 3)
        vstate = es.envs
        legal = None if setup.continuous else legal_actions(env, vstate.env_state)
        action = explore(setup, state.params, vstate.obs, legal,
                         per_env_keys(act_key, vstate.env_ids), state.env_steps)
        next_vstate, result = step_envs(env, vstate, action, env_key)
        reward = (result.info["team_rewards"][:, jnp.asarray(setup.actor.agent_teams)]
                  if by_team(setup) else result.reward)  # by team: each agent's team's
        row = dict(obs=vstate.obs.astype(jnp.float32), world=world_state(vstate.env_state),
                   reward=reward.astype(jnp.float32), terminated=result.terminated,
                   next_obs=result.info["final_observation"].astype(jnp.float32),
                   next_world=result.info["final_world_state"])
        if setup.continuous:  # replayed in the policy's units, [-1, 1]
            space = env.spec.action_space
            row["action"] = to_unit_box(action, jnp.asarray(space.low), jnp.asarray(space.high))
        else:
            row.update(legal=legal, action=action,
                       next_legal=result.info["final_legal_actions"])
        state, buffer, metrics, learned = absorb(config, setup.axis_name,
                                                 functools.partial(update, setup), state,
                                                 es.replay, row, update_key, local_batch)
        episodes = episode_metrics(result.info, None)
        team_sums = result.info["team_episode_return"] if by_team(setup) else None
        return (state, EnvState(next_vstate, buffer)), (metrics, learned, episodes, team_sums)

    (state, env_state), (metrics, learned, episodes, team_sums) = jax.lax.scan(
        env_step, (state, env_state), jnp.arange(config.rollout_steps))
    episodes = collectives.psum(jax.tree.map(jnp.sum, episodes), setup.axis_name)
    if by_team(setup):
        episodes.update(team_return_metrics(team_sums, episodes["episode_count"],
                                            env.spec.team_names, setup.axis_name))
    return state, env_state, {**mean_over_learned(metrics, learned), **episodes}


def build_optimizer(config: Config, learning_rate: float) -> optax.GradientTransformation:
    """Adam at `learning_rate` on gradients clipped to `max_grad_norm`."""
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.adam(learning_rate))


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind MADDPG to a team env and `config`; gradients average over `axis_name`.
    ConfigError for an env that is not a team of agents."""
    config.validate()
    spec = env.spec
    check_team(spec, competing=True, continuous=True)
    check_policies(spec, config.policies, config.frozen_teams)
    actor = TeamActor(action_width(spec), tuple(config.hidden), config.activation,
                      continuous=not spec.discrete)
    critic = CentralCritics(tuple(config.hidden), config.activation)
    optimizers = (build_optimizer(config, config.actor_learning_rate),
                  build_optimizer(config, config.critic_learning_rate))
    if config.policies == "by_team":
        actor, critic = PerTeam(actor, spec.agent_teams), PerTeam(critic, spec.agent_teams)
        learning = learning_teams(spec, config.frozen_teams)
        optimizers = tuple(per_team_optimizer(o, learning) for o in optimizers)
    if spec.discrete:
        loss = functools.partial(losses.maddpg_loss, actor=actor, critic=critic,
                                 gamma=config.gamma, temperature=config.gumbel_temperature,
                                 logit_penalty=config.logit_penalty)
    else:
        loss = functools.partial(losses.deterministic_maddpg_loss, actor=actor, critic=critic,
                                 gamma=config.gamma, action_penalty=config.logit_penalty)
    setup = Setup(config, env, actor, critic, *optimizers, loss, axis_name)
    bind = functools.partial
    return Agent(config, spec, bind(init, setup), bind(init_envs, setup), bind(act, setup),
                 bind(update, setup), bind(train_step, setup), setup=setup)


def greedy_action(agent: Agent) -> Callable[..., jax.Array]:
    """Each agent's most likely legal action (continuous: its policy's action, no noise), for
    evaluation (a frozen team's agents sample their initial policy: a random opponent);
    `legal` [B, N, A] from the evaluation's context."""
    greedy = greedy_agents(agent.spec, agent.config.frozen_teams)
    return lambda state, obs, key, legal=None, env_state=None: agent.act(
        state.params, obs, key, greedy=greedy, legal=legal)


def by_team(setup: Setup) -> bool:
    """Whether each competing team has its own actor and critics."""
    return isinstance(setup.actor, PerTeam)


placement_problem = batch_placement_problem  # each device samples its share of the batch
