"""MuZero with batched MCTS (mctx), for single-player envs and two-player zero-sum self-play.

Same shape as the other agents: `make(env, config)` returns an `Agent` of pure functions.
Every step, one search per env (batched over all envs of the device) picks the action and
gives the policy target; transitions go to a prioritised env-major replay; the learner
unrolls the model K steps from sampled starts against n-step value targets bootstrapped
from a target network, reward targets and the stored (or reanalysed) search policies.

Two-player games (`spec.num_players == 2`) are played by one network for both sides: the
env gives observations and rewards from the view of the player who moves, so the value of
the next state is the opponent's and the search and the n-step targets use discount -gamma.

The algorithm lives in top-level functions (networks.py, search.py, targets.py, losses.py);
this module binds them to an env and a config and runs collection and the learner.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import mctx
import optax
from flax import struct

from jaxrl_sys.agents.muzero.config import Config, temperature_at
from jaxrl_sys.agents.muzero.losses import muzero_loss
from jaxrl_sys.agents.muzero.networks import MuZeroNetwork, build_network, supports
from jaxrl_sys.agents.muzero.search import (
    SearchOutput, bind_recurrent_fn, run_search, search_actions, search_rows,
)
from jaxrl_sys.agents.muzero.targets import Batch, mirrored_rows, reanalysed_policies
from jaxrl_sys.core import collectives, replay
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.learner import (
    TargetNetState, batch_placement_problem, gradient_step, init_target_net_state, learn_after_warmup,
    learning_rate, local_batch_size, priority_beta, replay_updates,
)
from jaxrl_sys.core.rollout import (
    VecEnvState, episode_metrics, legal_actions, per_env_keys, reset_envs, step_envs,
)
from jaxrl_sys.core.types import BoundAgent, Env, EnvSpec, Metrics

State = TargetNetState  # online and target parameters, optimiser state, counters

DEFAULT_EVAL_EPISODES = 32  # training acts with exploration noise; report the greedy policy
PLAYS = "self_play"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)


@struct.dataclass
class EnvState:
    """Per-env state: the envs, their plies into the current episode and their prioritised
    replay rows (leading env axis)."""

    envs: VecEnvState
    ply: jax.Array  # int32 [envs]
    replay: replay.PrioritizedState


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """MuZero's pure functions bound to one env and config."""

    network: MuZeroNetwork
    search: Callable[..., SearchOutput]
    # the tree's model step (mctx's recurrent_fn): learned, learned with rules, or the env
    recurrent_fn: Callable[..., tuple[mctx.RecurrentFnOutput, Any]]


def build_optimizer(config: Config) -> optax.GradientTransformation:
    """AdamW after global-norm clipping. With `anneal_lr` its rate falls linearly from
    `learning_rate` at the first learner step to `final_lr_fraction` of it at the last; the
    optimiser counts learner steps only, so the warm-up's iterations are not in the count."""
    lr = learning_rate(config.learning_rate, config.anneal_lr,
                       max(1, config.learner_steps - 1), config.final_lr_fraction)
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adamw(lr, weight_decay=config.weight_decay),
    )


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh online/target parameters and optimiser state."""
    network = build_network(spec, config)
    obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
    params = network.init(key, obs, jnp.zeros((1,), jnp.int32))
    return init_target_net_state(params, build_optimizer(config))


def random_legal_actions(key: jax.Array, legal: jax.Array) -> jax.Array:
    """One uniformly random legal action per row of masks [B, A] (any action if none is)."""
    logits = jnp.where(legal.any(-1, keepdims=True) & ~legal, -jnp.inf, 0.0)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def init_env_state(key: jax.Array, env_ids: jax.Array, *, env: Env, capacity: int) -> EnvState:
    """Envs of ids [E] reset, their plies 0 and empty replay rows of `capacity` steps each."""
    spec = env.spec
    num_actions = spec.action_space.n
    vstate = reset_envs(env, key, env_ids)
    obs = jnp.zeros(spec.obs_shape, jnp.float32)
    example = {
        "obs": obs, "action": jnp.zeros((), jnp.int32), "reward": jnp.zeros((), jnp.float32),
        "terminated": jnp.zeros((), bool), "truncated": jnp.zeros((), bool),
        "next_obs": obs, "policy": jnp.zeros((num_actions,), jnp.float32),
        "legal": jnp.zeros((num_actions,), bool), "root_value": jnp.zeros((), jnp.float32),
    }
    ply = jnp.zeros(env_ids.shape[0], jnp.int32)
    return EnvState(vstate, ply, replay.init_prioritized(example, env_ids.shape[0], capacity))


def collect(state: State, env_state: EnvState, key: jax.Array, *, env: Env, config: Config,
            search: Callable[..., SearchOutput], axis_name: Optional[str]
            ) -> tuple[EnvState, Metrics]:
    """Search from every env's observation [E, ...], step the envs once with the actions [E]
    (uniform random legal moves in the first `opening_plies` plies) and store the steps.
    Each env's search noise and opening moves draw from keys of its global id, so the run
    is the same however the envs are split over devices."""
    progress = state.iteration / config.num_iterations
    temperature = temperature_at(config, progress)
    search_key, env_key, opening_key = jax.random.split(key, 3)
    vstate = env_state.envs
    legal = legal_actions(env, vstate.env_state)
    out = search_rows(search, state.params, vstate.obs, legal,
                      per_env_keys(search_key, vstate.env_ids), temperature,
                      env_state=vstate.env_state)
    action = out.action
    if config.opening_plies > 0:  # no extra draw in the hot loop when openings are off
        random_moves = jax.vmap(random_legal_actions)(
            per_env_keys(opening_key, vstate.env_ids), legal[:, None])[:, 0]
        action = jnp.where(env_state.ply < config.opening_plies, random_moves, action)
    next_vstate, result = step_envs(env, vstate, action, env_key)
    episode_over = result.terminated | result.truncated
    ply = jnp.where(episode_over, 0, env_state.ply + 1)
    transition = {
        "obs": vstate.obs, "action": action, "reward": result.reward,
        "terminated": result.terminated, "truncated": result.truncated,
        "next_obs": result.info["final_observation"], "policy": out.policy,
        "legal": legal, "root_value": out.value,
    }
    buffer = replay.add_prioritized(env_state.replay, transition)
    episodes = episode_metrics(result.info, axis_name)
    metrics = {**episodes, "temperature": temperature, "search_value": jnp.mean(out.value)}
    metrics["search_value"] = collectives.pmean(metrics["search_value"], axis_name)
    return EnvState(next_vstate, ply, buffer), metrics


def update(state: State, batch: Batch, key: jax.Array, *, grad_fn: Callable,
           reanalyse: Callable[..., jax.Array], augment: Callable[[Batch], Batch],
           optimizer: optax.GradientTransformation, config: Config,
           axis_name: Optional[str]) -> tuple[State, Metrics, jax.Array]:
    """One gradient step on sequences [B, L, ...]; returns the new state, metrics and new
    priorities [B] (the absolute value error at each row's first step). `key` drives
    reanalyse; `augment` maps the batch to the rows trained on (mirror images, or itself)."""
    batch = augment(batch.replace(policy=reanalyse(state.target_params, batch, key)))
    grads, (value_error, aux) = grad_fn(state.params, state.target_params, batch)
    new_state = gradient_step(state, grads, optimizer, axis_name=axis_name, tau=1.0,
                              target_update_period=config.target_update_period)
    metrics = {**aux, "loss": sum(aux[k] for k in ("value_loss", "policy_loss",
                                                   "reward_loss", "rules_loss")
                                  if k in aux)}
    return new_state, collectives.pmean(metrics, axis_name), value_error


def sample(buffer: replay.PrioritizedState, key: jax.Array, batch_size: int, beta: jax.Array,
           *, sequence_length: int, axis_name: Optional[str]) -> tuple[Batch, jax.Array]:
    """`batch_size` prioritised sequences [B, L, ...] and their replay indices [B]; the draws
    are this device's slice of the global batch's (`key` the same on every device)."""
    draws = replay.global_segment_draws(key, batch_size, axis_name)
    _, index, weights = replay.sample_prioritized(buffer, key, batch_size, beta, axis_name,
                                                  draws=draws)
    data, valid = replay.gather_sequences(buffer.replay, index, sequence_length)
    return Batch.from_rows(data, valid, weights), index


def learn(state: State, buffer: replay.PrioritizedState, key: jax.Array, *,
          update_fn: Callable[..., tuple[State, Metrics, jax.Array]], config: Config,
          axis_name: Optional[str]) -> tuple[State, replay.PrioritizedState, Metrics]:
    """`updates_per_iteration` sample-update-reprioritise rounds on the replay."""
    local_batch = local_batch_size(config.batch_size, axis_name)
    beta = priority_beta(config.priority_beta_start, state.iteration, config.num_iterations)

    def one_update(state, buffer, k):
        """Sample, update on the batch, write its new priorities back."""
        sample_key, reanalyse_key = jax.random.split(k)
        batch, index = sample(buffer, sample_key, local_batch, beta,
                              sequence_length=config.sequence_length, axis_name=axis_name)
        state, metrics, value_error = update_fn(state, batch, reanalyse_key)
        buffer = replay.update_priorities(buffer, index, value_error, config.priority_alpha)
        return state, buffer, metrics

    return replay_updates(one_update, state, buffer, key, config.updates_per_iteration)


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind MuZero to `env` and `config`; gradients average over `axis_name`."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)
    optimizer = build_optimizer(config)
    value_support, reward_support = supports(config)
    two_player = getattr(spec, "num_players", 1) == 2
    # the value after a move belongs to the opponent in a two-player zero-sum game
    step_discount = -config.gamma if two_player else config.gamma
    recurrent_fn = bind_recurrent_fn(env, network, config, value_support, reward_support,
                                     step_discount)
    search = functools.partial(run_search, network=network, recurrent_fn=recurrent_fn,
                               config=config, value_support=value_support)
    act = functools.partial(search_actions, search=search, num_actions=spec.action_space.n)
    loss = functools.partial(muzero_loss, network=network, config=config,
                             value_support=value_support, reward_support=reward_support,
                             discount=step_discount)
    reanalyse = functools.partial(reanalysed_policies, search=search,
                                  reanalyse_fraction=config.reanalyse_fraction,
                                  unroll_steps=config.unroll_steps)
    if config.mirror_augment:
        if not spec.mirror_axes:
            raise ConfigError(f"mirror_augment needs a game with a declared mirror image "
                              f"(EnvSpec.mirror_axes); {spec.name} declares none")
        augment = functools.partial(mirrored_rows, mirror_axes=spec.mirror_axes)
    else:
        augment = lambda batch: batch  # noqa: E731
    update_fn = functools.partial(update, grad_fn=jax.grad(loss, has_aux=True),
                                  reanalyse=reanalyse, augment=augment, optimizer=optimizer,
                                  config=config, axis_name=axis_name)
    learn_fn = functools.partial(learn, update_fn=update_fn, config=config, axis_name=axis_name)

    def train_step(state: State, env_state: EnvState, key: jax.Array
                   ) -> tuple[State, EnvState, Metrics]:
        """Search and step every env once into replay, then `updates_per_iteration` updates."""
        collect_key, learn_key = jax.random.split(key)
        env_state, collect_metrics = collect(state, env_state, collect_key, env=env,
                                             config=config, search=search, axis_name=axis_name)
        ready = state.iteration >= config.warmup_iterations
        state, buffer, metrics = learn_after_warmup(ready, learn_fn, state, env_state.replay,
                                                    learn_key)
        return state, env_state.replace(replay=buffer), {**metrics, **collect_metrics}

    init_envs = functools.partial(init_env_state, env=env,
                                  capacity=config.buffer_size // config.num_envs)
    return Agent(config, spec, lambda key: init(key, spec, config), init_envs, act, update_fn,
                 train_step, network=network, search=search, recurrent_fn=recurrent_fn)


def greedy_action(agent: Agent) -> Callable[..., jax.Array]:
    """Greedy search actions for evaluation (the env model searches from `env_state`)."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(
        state.params, obs, key, greedy=True, legal=legal, env_state=env_state
    )


placement_problem = batch_placement_problem  # each device samples its share of the batch
