"""Greedy evaluation on device: run N episodes in parallel, one per env, and return them.

A two-player self-play game evaluated against an opponent (an env with an `eval_opponent`
policy attached, `envs.opponents.AgainstOpponent`) is played in both seats instead, and its
returns are the agent's results (+1 win, 0 draw, -1 loss)."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxrl_sys.core import two_player
from jaxrl_sys.core.rollout import legal_actions, reset_envs, step_envs
from jaxrl_sys.core.types import Env

Policy = Callable[[Any, jax.Array, jax.Array], jax.Array]


def evaluate(
    env: Env, policy: Policy, params: Any, key: jax.Array, episode_ids: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Returns and lengths of the first episode of one env per id in `episode_ids` [N].

    `policy(params, obs, key, legal=masks, env_state=states) -> actions` acts on a batch; it
    gets `legal` only from an env with legal-action masks, and the env states for policies
    that search with the env as model (AlphaZero). `env` must report episode
    statistics (envs.make does by default). Runs `max_episode_steps` steps, so every env's
    first episode ends (by termination or by the time limit). Episodes are keyed by id, so
    splitting the ids over devices gives the same episodes. Jittable and vmappable.

    An env with an `eval_opponent` attached (a two-player game): `policy` plays it, opening the
    games of even ids; returns are results (+1/0/-1) and lengths count both sides' moves.
    """
    opponent = getattr(env, "eval_opponent", None)
    if opponent is not None:
        return two_player.play_episodes(env, policy, params, opponent, None, key, episode_ids)
    num_episodes = episode_ids.shape[0]
    reset_key, run_key = jax.random.split(key)
    state = reset_envs(env, reset_key, episode_ids)
    zeros = jnp.zeros(num_episodes, jnp.float32)

    def body(carry, t):
        vstate, returns, lengths, finished = carry
        act_key, step_key = jax.random.split(jax.random.fold_in(run_key, t))
        if hasattr(env, "legal_actions"):
            legal = legal_actions(env, vstate.env_state)
            actions = policy(params, vstate.obs, act_key, legal=legal, env_state=vstate.env_state)
        else:
            actions = policy(params, vstate.obs, act_key, env_state=vstate.env_state)
        vstate, result = step_envs(env, vstate, actions, step_key)
        info = result.info
        first = info["episode_done"] & ~finished
        returns = jnp.where(first, info["episode_return"], returns)
        lengths = jnp.where(first, info["episode_length"].astype(jnp.float32), lengths)
        return (vstate, returns, lengths, finished | info["episode_done"]), None

    (_, returns, lengths, _), _ = jax.lax.scan(
        body, (state, zeros, zeros, jnp.zeros(num_episodes, bool)),
        jnp.arange(env.spec.max_episode_steps),
    )
    return returns, lengths


def make_eval_fn(env: Env, greedy_action: Callable[[Any, jax.Array, jax.Array], jax.Array]):
    """An `eval_fn(agent_state, key, episode_ids)` for `execution.place` from an agent's
    `greedy_action(agent_state, obs, key) -> actions`."""

    def eval_fn(agent_state: Any, key: jax.Array, episode_ids: jax.Array):
        return evaluate(env, greedy_action, agent_state, key, episode_ids)

    return eval_fn
