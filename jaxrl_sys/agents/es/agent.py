"""Evolution strategies (OpenAI-ES, Salimans et al. 2017; ARS, Mania et al. 2018) on device,
with evosax's strategies.

One iteration is one generation. evosax asks for a population of parameter vectors around
the search distribution's mean (antithetic pairs), every member plays `episodes_per_member`
episodes of at most `rollout_steps` steps, each in an env of its own (member m plays the envs
of global ids m*E .. m*E + E - 1), and evosax is told the members' mean returns. All of it is
one program: the envs, each acting with its own member's parameters, are vmapped, and over
devices each device plays the members of its envs. The population comes from a key that is
the same on every device, and the returns are summed into one vector over devices, so every
device tells evosax the same fitness and holds the same distribution: N devices equal one.

    init(key) -> State
    act(params, obs, key, greedy=True) -> actions        the mean's deterministic policy
    update(state, population, fitness, key) -> (state, metrics)   evosax's tell
    train_step(state, env_state, key) -> (state, env_state, metrics)   one generation

Every env steps `rollout_steps` times a generation, also after its episode ended (those
steps are counted, `episode_steps` reports the ones inside episodes). ARS's observation
statistics (`normalize_obs`) take in every observation the population saw, pooled over envs
and devices, after the generation that used the statistics before them.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.agents.es.config import Config
from jaxrl_sys.agents.es.losses import first_episode_returns, member_fitness
from jaxrl_sys.agents.es.networks import (
    Policy, build_network, member_actions, policy_actions,
)
from jaxrl_sys.core import collectives, obs_norm
from jaxrl_sys.core.learner import learning_rate
from jaxrl_sys.core.rollout import VecEnvState, reset_envs, step_envs
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics

DEFAULT_ENV = "CartPole-v1"
DEFAULT_EVAL_EPISODES = 16  # the mean is never played in training: evaluate it greedily
PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class State:
    """The search distribution (evosax's state: mean, noise scale, optimiser), its mean as
    network parameters (what evaluation plays), the generation counter, and ARS's observation
    statistics (None without `normalize_obs`)."""

    params: Any
    strategy: Any
    iteration: jax.Array
    obs_stats: Optional[obs_norm.RunningStats] = None


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """ES's pure functions bound to one env and config, with its network and evosax
    strategy."""

    network: Policy
    strategy: Any


def build_strategy(config: Config, template: Any) -> Any:
    """evosax's strategy for `config` over parameter trees shaped like `template`:
    OpenAI-ES (antithetic sampling, centred-rank fitness shaping) or ARS (antithetic
    directions, the top `top_fraction` pairs by their better return, steps scaled by their
    returns' standard deviation), each with a constant noise scale and Adam or SGD at a
    constant or linearly annealed rate."""
    # lazy: importing evosax computes with JAX, which would fix the process's device count
    # before a run's `--devices` is requested (loading the agent registry must not)
    from evosax.algorithms import ARS, Open_ES
    from evosax.core.fitness_shaping import (
        add_weight_decay, centered_rank_fitness_shaping_fn, identity_fitness_shaping_fn,
    )

    rate = learning_rate(config.learning_rate, config.anneal_lr, config.num_iterations,
                         config.final_lr_fraction)
    descent = (optax.adam if config.optimizer == "adam" else optax.sgd)(rate)
    noise = optax.constant_schedule(config.noise_std)
    if config.strategy == "ars":
        shaping = identity_fitness_shaping_fn
    else:
        shaping = centered_rank_fitness_shaping_fn
    if config.weight_decay:
        shaping = add_weight_decay(shaping, config.weight_decay)
    if config.strategy == "ars":
        strategy = ARS(config.population, template, optimizer=descent, std_schedule=noise,
                       fitness_shaping_fn=shaping)
        strategy.elite_ratio = config.top_fraction
        return strategy
    return Open_ES(config.population, template, use_antithetic_sampling=True,
                   optimizer=descent, std_schedule=noise, fitness_shaping_fn=shaping)


def init(key: jax.Array, spec: EnvSpec, config: Config, network: Policy,
         strategy: Any) -> State:
    """The network's initial parameters as the search distribution's mean."""
    params = network.init(key, jnp.zeros((1, *spec.obs_shape), jnp.float32))
    es_state = strategy.init(key, params, strategy.default_params)
    return State(params=params, strategy=es_state, iteration=jnp.zeros((), jnp.int32),
                 obs_stats=obs_norm.init_stats(config.normalize_obs, spec.obs_shape))


def play_members(env: Env, network: Policy, config: Config, params: Any,
                 obs_stats: Optional[obs_norm.RunningStats], env_state: VecEnvState,
                 key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`rollout_steps` steps of every env [B], each acting with its own parameters (`params`
    leaves [B, ...]): the first episode's return [B] and length [B] of each, and the raw
    observations [T, B, ...] seen."""

    def one_step(vstate: VecEnvState, t):
        """Every env acts with its member's policy and steps."""
        actions = member_actions(network, env.spec, params,
                                 obs_norm.normalize(obs_stats, vstate.obs))
        next_vstate, result = step_envs(env, vstate, actions, jax.random.fold_in(key, t))
        done = jnp.logical_or(result.terminated, result.truncated)
        return next_vstate, (vstate.obs, result.reward, done)

    _, (obs, rewards, done) = jax.lax.scan(one_step, env_state,
                                           jnp.arange(config.rollout_steps))
    returns, lengths = first_episode_returns(rewards, done)
    return returns, lengths, obs


def update(strategy: Any, state: State, population: Any, fitness: jax.Array,
           key: jax.Array) -> tuple[State, Metrics]:
    """evosax's tell: the distribution moves towards the members of higher `fitness` [P]
    (mean returns; evosax minimises, so it is told their negatives), and the new mean
    becomes the parameters."""
    es_state, _ = strategy.tell(key, population, -fitness, state.strategy,
                                strategy.default_params)
    params = strategy.get_mean(es_state)
    metrics = {"fitness_mean": jnp.mean(fitness), "fitness_max": jnp.max(fitness),
               "fitness_min": jnp.min(fitness)}
    return state.replace(params=params, strategy=es_state, iteration=state.iteration + 1), \
        metrics


def generation(env: Env, network: Policy, strategy: Any, config: Config,
               axis_name: Optional[str], state: State, env_state: VecEnvState,
               key: jax.Array) -> tuple[State, VecEnvState, Metrics]:
    """One generation: ask for the population, play every member's episodes on fresh envs,
    gather the returns of every env over devices, tell the strategy."""
    ask_key, reset_key, play_key, tell_key = jax.random.split(key, 4)
    population, es_state = strategy.ask(ask_key, state.strategy, strategy.default_params)
    members = env_state.env_ids // config.episodes_per_member
    own = jax.tree.map(lambda leaf: leaf[members], population)
    fresh = reset_envs(env, reset_key, env_state.env_ids)
    returns, lengths, obs = play_members(env, network, config, own, state.obs_stats, fresh,
                                         play_key)
    every_env = jnp.zeros((config.num_envs,), returns.dtype).at[env_state.env_ids].set(returns)
    fitness = member_fitness(collectives.psum(every_env, axis_name), config.episodes_per_member)
    state = state.replace(strategy=es_state,
                          obs_stats=obs_norm.update(state.obs_stats, obs, axis_name))
    state, metrics = update(strategy, state, population, fitness, tell_key)
    episodes = collectives.psum({
        "episode_return_sum": jnp.sum(returns), "episode_length_sum": jnp.sum(lengths),
        "episode_count": jnp.asarray(returns.shape[0], jnp.float32)}, axis_name)
    metrics = {**metrics, **episodes, "episode_steps": episodes["episode_length_sum"]}
    return state, fresh, metrics


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind ES to `env` and `config`; `axis_name` is the device axis the returns sum over."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)
    # evosax reads only the template's shapes: zeros of the traced init's shapes, with no
    # eager initialisation (a second or so of small compiles per agent built)
    shapes = jax.eval_shape(network.init, jax.random.PRNGKey(0),
                            jnp.zeros((1, *spec.obs_shape), jnp.float32))
    template = jax.tree.map(lambda leaf: jnp.zeros(leaf.shape, leaf.dtype), shapes)
    strategy = build_strategy(config, template)

    def act(params: Any, obs: jax.Array, key: jax.Array, greedy: bool = True) -> jax.Array:
        """The deterministic policy's actions [B] for observations [B, ...] (already
        normalised); `key` and `greedy` are unused, ES's policies have no noise."""
        del key, greedy
        return policy_actions(network, spec, params, obs)

    return Agent(
        config, spec,
        functools.partial(init, spec=spec, config=config, network=network, strategy=strategy),
        functools.partial(reset_envs, env), act,
        functools.partial(update, strategy),
        functools.partial(generation, env, network, strategy, config, axis_name),
        network=network, strategy=strategy)


def greedy_action(agent: Agent) -> Callable[..., jax.Array]:
    """The mean's deterministic actions [B] for observations [B, ...], normalised with the
    trained statistics, for evaluation."""

    def policy(state: State, obs: jax.Array, key: jax.Array, legal=None,
               env_state=None) -> jax.Array:
        """Actions [B] (or [B, A]) for observations [B, ...]."""
        del legal, env_state  # every action is legal; acting needs the observation only
        return agent.act(state.params, obs_norm.normalize(state.obs_stats, obs), key)

    return policy


def placement_problem(config: Config, devices: int) -> Optional[str]:
    """Each device plays whole members, so the population must divide over the devices;
    None when it does."""
    if config.population % devices:
        return (f"population={config.population} does not divide over {devices} devices: each "
                "device plays whole members")
    return None
