"""Two-player games between two policies, on device: self-play envs refereed move by move,
and opponents that need no training (a uniformly random player, and a pure Monte-Carlo tree
search with random rollouts that uses the env itself as its model, so it plays any pure-JAX
game). Training evaluates board-game agents against them; the arena scores them.

A policy here has the evaluation signature `policy(params, obs, key, legal=, env_state=)`
over a batch of games (every agent's `greedy_action` has it). Games run in a two-player
self-play env (`spec.num_players == 2`, `player_to_move(state)` 0 for the opening seat,
reward for the side that just moved). Game-specific opponents (the perfect tic-tac-toe
player) live with their env.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import mctx
from flax import struct

from jaxrl_sys.core.rollout import legal_actions, reset_envs, step_envs
from jaxrl_sys.core.types import Env, PyTree

Policy = Callable[..., jax.Array]
NO_PRIOR = -1e9  # logit of an illegal move


def check_game(env: Env) -> None:
    """ValueError unless `env` is a two-player game the arena can referee.

    Args:
        env: the env.
    """
    if env.spec.num_players != 2 or not hasattr(env, "player_to_move"):
        raise ValueError(f"{env.spec.name} is not a two-player game (self-play env with "
                         "player_to_move)")


def play(
    env: Env,
    player: Policy,
    player_params: Any,
    opponent: Policy,
    opponent_params: Any,
    key: jax.Array,
    game_ids: jax.Array,
) -> jax.Array:
    """Results for `player` (+1 win, 0 draw, -1 loss) of one game per id in `game_ids` [N].

    `player` opens the even-numbered games, `opponent` the odd ones (see `play_episodes`).

    Args:
        env: a two-player self-play env.
        player: the policy whose results are returned.
        player_params: what `player` takes first.
        opponent: the other policy.
        opponent_params: what `opponent` takes first.
        key: a PRNG key.
        game_ids: [N] int32 ids, one game each.

    Returns:
        [N] float32 results.
    """
    results, _ = play_episodes(env, player, player_params, opponent, opponent_params, key,
                               game_ids)
    return results


def play_episodes(
    env: Env,
    player: Policy,
    player_params: Any,
    opponent: Policy,
    opponent_params: Any,
    key: jax.Array,
    game_ids: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Results for `player` (+1 win, 0 draw, -1 loss) and lengths in plies [N] of one game
    per id in `game_ids` [N].

    `player` opens the even-numbered games, `opponent` the odd ones. Both policies act on
    every position and the mover's action is kept, which keeps one batched program. Games are
    keyed by id, so they split over devices like evaluation episodes. Jittable.

    Args:
        env: a two-player self-play env.
        player: the policy whose results are returned.
        player_params: what `player` takes first.
        opponent: the other policy.
        opponent_params: what `opponent` takes first.
        key: a PRNG key.
        game_ids: [N] int32 ids, one game each.

    Returns:
        results: [N] float32 results (0 for a game unfinished after `max_episode_steps`).
        lengths: [N] float32 lengths in plies.
    """
    check_game(env)
    player_opens = game_ids % 2 == 0
    reset_key, run_key = jax.random.split(key)
    vstate = reset_envs(env, reset_key, game_ids)
    num_games = game_ids.shape[0]

    def body(carry, t):
        vstate, results, lengths, finished = carry
        player_key, opponent_key, step_key = jax.random.split(jax.random.fold_in(run_key, t), 3)
        legal = legal_actions(env, vstate.env_state)
        mine = player(player_params, vstate.obs, player_key, legal=legal,
                      env_state=vstate.env_state)
        theirs = opponent(opponent_params, vstate.obs, opponent_key, legal=legal,
                          env_state=vstate.env_state)
        opening_seat_moves = jax.vmap(env.player_to_move)(vstate.env_state) == 0
        player_moves = opening_seat_moves == player_opens
        vstate, result = step_envs(env, vstate, jnp.where(player_moves, mine, theirs), step_key)
        done = result.terminated | result.truncated
        mover_result = jnp.sign(result.reward)  # the reward is the mover's
        new = done & ~finished
        results = jnp.where(new, jnp.where(player_moves, mover_result, -mover_result), results)
        lengths = jnp.where(new, (t + 1).astype(jnp.float32), lengths)
        return (vstate, results, lengths, finished | done), None

    zeros = jnp.zeros(num_games, jnp.float32)
    init = (vstate, zeros, zeros, jnp.zeros(num_games, bool))
    (_, results, lengths, finished), _ = jax.lax.scan(
        body, init, jnp.arange(env.spec.max_episode_steps))
    return jnp.where(finished, results, 0.0), lengths


def random_player(params: Any, obs: jax.Array, key: jax.Array, legal: jax.Array,
                  env_state: PyTree = None) -> jax.Array:
    """Uniformly random legal moves for a batch of positions.

    Args:
        params: ignored.
        obs: ignored.
        key: a PRNG key.
        legal: bool [N, A] legal-move masks.
        env_state: ignored.

    Returns:
        [N] int32 moves.
    """
    del params, obs, env_state
    logits = jnp.where(legal, 0.0, -jnp.inf)
    return jax.random.categorical(key, logits).astype(jnp.int32)


@struct.dataclass
class _Node:
    """A node of the rollout search: the env state and whether the game ended before it."""

    state: PyTree
    ended: jax.Array


ROLLOUTS_PER_NODE = 8  # random games averaged into each new node's value


def mcts_player(env: Env, num_simulations: int) -> Policy:
    """Pure Monte-Carlo tree search: the real env as model, uniform priors over legal moves,
    and the mean result of `ROLLOUTS_PER_NODE` uniformly random games to the end as each new
    node's value.

    Plays the most visited move (mctx's PUCT search with no root noise). Any pure-JAX
    two-player game with `legal_actions`.

    Args:
        env: a two-player self-play env with `legal_actions`.
        num_simulations: simulations per move.

    Returns:
        `policy(params, obs, key, legal=None, env_state=...) -> [N] int32 moves` from env states
            (leaves [N, ...]); `params` and `obs` are ignored.
    """
    check_game(env)
    horizon = env.spec.max_episode_steps

    def rollout_value(key: jax.Array, state: PyTree, ended: jax.Array) -> jax.Array:
        """The mean result of random games from `state` for the side to move (0 if ended)."""
        keys = jax.random.split(key, ROLLOUTS_PER_NODE)
        return jnp.mean(jax.vmap(random_game, in_axes=(0, None, None))(keys, state, ended))

    def random_game(key: jax.Array, state: PyTree, ended: jax.Array) -> jax.Array:
        """The result of one random game from `state` for the side to move there."""

        def body(carry, k):
            state, value, sign, over = carry
            legal = env.legal_actions(state)
            action = jax.random.categorical(k, jnp.where(legal, 0.0, -jnp.inf))
            _, state, reward, terminated, truncated, _ = env.step(k, state, action)
            value = value + jnp.where(over, 0.0, sign * reward)
            return (state, value, -sign, over | terminated | truncated), None

        init = (state, jnp.zeros(()), jnp.ones(()), ended)
        (_, value, _, _), _ = jax.lax.scan(body, init, jax.random.split(key, horizon))
        return value

    def recurrent_fn(params, key, action, node: _Node):
        del params
        step_key, rollout_key = jax.random.split(key)
        batch = action.shape[0]
        _, state, reward, terminated, truncated, _ = jax.vmap(env.step)(
            jax.random.split(step_key, batch), node.state, action)
        ended = node.ended | terminated | truncated
        value = jax.vmap(rollout_value)(jax.random.split(rollout_key, batch), state, ended)
        legal = legal_actions(env, state)
        output = mctx.RecurrentFnOutput(
            reward=jnp.where(node.ended, 0.0, reward),
            discount=jnp.where(ended, 0.0, -1.0),
            prior_logits=jnp.where(legal, 0.0, NO_PRIOR),
            value=value,
        )
        return output, _Node(state, ended)

    def policy(params, obs, key, legal=None, env_state=None) -> jax.Array:
        del obs
        batch = jax.tree.leaves(env_state)[0].shape[0]
        legal = legal_actions(env, env_state) if legal is None else legal
        root_key, search_key = jax.random.split(key)
        root = mctx.RootFnOutput(
            prior_logits=jnp.where(legal, 0.0, NO_PRIOR),
            value=jax.vmap(rollout_value)(jax.random.split(root_key, batch), env_state,
                                          jnp.zeros(batch, bool)),
            embedding=_Node(env_state, jnp.zeros(batch, bool)),
        )
        out = mctx.muzero_policy(
            params, search_key, root, recurrent_fn, num_simulations, invalid_actions=~legal,
            dirichlet_fraction=0.0, temperature=0.0,
        )
        return out.action.astype(jnp.int32)

    return policy
