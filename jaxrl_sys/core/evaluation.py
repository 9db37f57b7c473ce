"""Greedy evaluation on device: run N episodes in parallel, one per env, and return them.

A two-player self-play game evaluated against an opponent (an env with an `eval_opponent`
policy attached, `envs.opponents.AgainstOpponent`) is played in both seats instead, and its
returns are the agent's results (+1 win, 0 draw, -1 loss)."""

from __future__ import annotations

from typing import Any, Callable, Union

import jax
import jax.numpy as jnp

from jaxrl_sys.core import two_player
from jaxrl_sys.core.rollout import has_legal_actions, legal_actions, reset_envs, step_envs
from jaxrl_sys.core.types import Env, RecurrentPolicy

Policy = Callable[[Any, jax.Array, jax.Array], jax.Array]


def stateful(policy: Union[Policy, RecurrentPolicy]) -> RecurrentPolicy:
    """`policy` as a `RecurrentPolicy`: a plain function gets an empty memory (None), so the
    callers step every policy the same way.

    Args:
        policy: `policy(params, obs, key, **context) -> actions`, or a `RecurrentPolicy`.

    Returns:
        A `RecurrentPolicy`: `policy` itself where it is one.
    """
    if isinstance(policy, RecurrentPolicy):
        return policy

    def step(params, memory, obs, starts, key, **context):
        """The feed-forward policy's actions; no memory."""
        del starts
        return policy(params, obs, key, **context), memory

    return RecurrentPolicy(initial=lambda batch: None, step=step)


def evaluate(
    env: Env, policy: Union[Policy, RecurrentPolicy], params: Any, key: jax.Array, episode_ids: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Returns and lengths of the first episode of one env per id in `episode_ids` [N].

    `policy(params, obs, key, legal=masks, env_state=states) -> actions` acts on a batch; it
    gets `legal` only from an env with legal-action masks, and the env states for policies
    that search with the env as model (AlphaZero). A `RecurrentPolicy` carries its memory
    from step to step, reset where an episode begins. `env` must report episode
    statistics (envs.make does by default). Runs `max_episode_steps` steps, so every env's
    first episode ends (by termination or by the time limit). Episodes are keyed by id, so
    splitting the ids over devices gives the same episodes. Jittable and vmappable.

    An env with an `eval_opponent` attached (a two-player game): `policy` plays it, opening the
    games of even ids; returns are results (+1/0/-1) and lengths count both sides' moves.

    Args:
        env: the env, reporting episode statistics.
        policy: the policy, acting on observations [N, ...].
        params: what `policy` takes first (an agent's state).
        key: a PRNG key.
        episode_ids: [N] int32 ids, one episode each.

    Returns:
        returns: [N] float32 returns of the episodes (results for a game against an opponent).
        lengths: [N] float32 lengths in env steps.
    """
    opponent = getattr(env, "eval_opponent", None)
    if opponent is not None:
        return two_player.play_episodes(env, policy, params, opponent, None, key, episode_ids)
    ended = first_episodes(env, policy, params, key, episode_ids,
                           {"episode_return": (), "episode_length": ()})
    return ended["episode_return"], ended["episode_length"]


def evaluate_teams(env: Env, policy: Union[Policy, RecurrentPolicy], params: Any,
                   key: jax.Array, episode_ids: jax.Array) -> jax.Array:
    """Each team's return [N, K] of the episodes `evaluate` plays (an env of competing teams,
    `EnvSpec.teams`, reporting `info["team_episode_return"]` [K]).

    Args:
        env: an env of competing teams, reporting episode statistics.
        policy: the policy, acting on observations [N, ...].
        params: what `policy` takes first (an agent's state).
        key: a PRNG key.
        episode_ids: [N] int32 ids, one episode each.

    Returns:
        [N, K] float32 team returns.
    """
    teams = (len(env.spec.team_names),)
    return first_episodes(env, policy, params, key, episode_ids,
                          {"team_episode_return": teams})["team_episode_return"]


def first_episodes(env: Env, policy: Union[Policy, RecurrentPolicy], params: Any,
                   key: jax.Array, episode_ids: jax.Array,
                   fields: dict[str, tuple[int, ...]]) -> dict[str, jax.Array]:
    """The `info` values named by `fields` (name -> an env's value's shape) at the end of the
    first episode of one env per id [N], float32 [N, ...]: the loop `evaluate` and
    `evaluate_teams` run, `max_episode_steps` steps so that every first episode ends.

    Args:
        env: the env, reporting episode statistics.
        policy: the policy, acting on observations [N, ...].
        params: what `policy` takes first (an agent's state).
        key: a PRNG key.
        episode_ids: [N] int32 ids, one episode each.
        fields: info name -> the shape of one env's value.

    Returns:
        info name -> [N, ...] float32 values at each first episode's end.
    """
    num_episodes = episode_ids.shape[0]
    reset_key, run_key = jax.random.split(key)
    policy = stateful(policy)
    state = reset_envs(env, reset_key, episode_ids).replace(
        memory=policy.initial(num_episodes), starts=jnp.ones(num_episodes, jnp.bool_))
    zeros = {f: jnp.zeros((num_episodes, *shape), jnp.float32) for f, shape in fields.items()}

    def body(carry, t):
        vstate, values, finished = carry
        act_key, step_key = jax.random.split(jax.random.fold_in(run_key, t))
        context = {"env_state": vstate.env_state}
        if has_legal_actions(env):
            context["legal"] = legal_actions(env, vstate.env_state)
        actions, memory = policy.step(params, vstate.memory, vstate.obs, vstate.starts,
                                      act_key, **context)
        vstate, result = step_envs(env, vstate, actions, step_key)
        vstate = vstate.replace(memory=memory, starts=result.terminated | result.truncated)
        info = result.info
        first = info["episode_done"] & ~finished
        values = {f: jnp.where(first.reshape(-1, *([1] * (v.ndim - 1))),
                               info[f].astype(jnp.float32), v) for f, v in values.items()}
        return (vstate, values, finished | info["episode_done"]), None

    (_, values, _), _ = jax.lax.scan(
        body, (state, zeros, jnp.zeros(num_episodes, bool)),
        jnp.arange(env.spec.max_episode_steps),
    )
    return values


def make_eval_fn(env: Env, greedy_action: Union[Policy, RecurrentPolicy]):
    """An `eval_fn(agent_state, key, episode_ids)` for `execution.place` from an agent's
    `greedy_action(agent_state, obs, key) -> actions`.

    Args:
        env: the env to evaluate on.
        greedy_action: the agent's greedy policy, or a `RecurrentPolicy`.

    Returns:
        `eval_fn(agent_state, key, episode_ids [N]) -> (returns [N], lengths [N])`: `evaluate` with
            `greedy_action`.
    """

    def eval_fn(agent_state: Any, key: jax.Array, episode_ids: jax.Array):
        return evaluate(env, greedy_action, agent_state, key, episode_ids)

    return eval_fn
