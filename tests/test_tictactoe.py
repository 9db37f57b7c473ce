"""Tests for envs/tictactoe.py: exhaustive rules against a pure-Python reference, auto-reset,
the perfect player, legal-action masks through wrappers, and the registry entry."""

from __future__ import annotations

import functools
import subprocess
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.envs import registry
from jaxrl_sys.envs.tictactoe import (
    TicTacToe,
    TicTacToeState,
    minimax_value,
    optimal_actions,
    perfect_action,
    uniform_choice,
)
from jaxrl_sys.core import rollout
from jaxrl_sys.core.types import Discrete, EnvSpec

Board = tuple[int, ...]
EMPTY: Board = (0,) * 9

# --------------------------------------------------------------- pure-Python reference rules

REF_LINES = [(r, r + 1, r + 2) for r in (0, 3, 6)] + [(c, c + 3, c + 6) for c in range(3)]
REF_LINES += [(0, 4, 8), (2, 4, 6)]


def ref_winner(board: Board) -> int:
    """The stone (1 X, 2 O) holding a full line, or 0."""
    for a, b, c in REF_LINES:
        if board[a] != 0 and board[a] == board[b] == board[c]:
            return board[a]
    return 0


def ref_over(board: Board) -> bool:
    """A line is complete or the board is full."""
    return ref_winner(board) != 0 or 0 not in board


def ref_player(board: Board) -> int:
    """Side to move (0 X, 1 O) from the stone counts; X moves first."""
    return 0 if board.count(1) == board.count(2) else 1


def ref_play(board: Board, cell: int) -> Board:
    """The board after the side to move plays `cell`."""
    child = list(board)
    child[cell] = ref_player(board) + 1
    return tuple(child)


def ref_legal(board: Board) -> list[bool]:
    """Legal moves: empty cells of an unfinished game."""
    return [not ref_over(board) and v == 0 for v in board]


def ref_obs(board: Board, viewer: int) -> np.ndarray:
    """[own, opponent, empty] one-hot planes from side `viewer`'s view."""
    own = [v == viewer + 1 for v in board]
    opp = [v != 0 and v != viewer + 1 for v in board]
    return np.array(own + opp + [v == 0 for v in board], np.float32)


@functools.cache
def reachable() -> tuple[Board, ...]:
    """Every position reachable from the empty board by legal play (the empty board included)."""
    seen, frontier = {EMPTY}, [EMPTY]
    while frontier:
        board = frontier.pop()
        if ref_over(board):
            continue
        for cell in range(9):
            if board[cell] == 0:
                child = ref_play(board, cell)
                if child not in seen:
                    seen.add(child)
                    frontier.append(child)
    return tuple(sorted(seen))


@functools.cache
def ref_negamax(board: Board) -> int:
    """Game value for the side to move: +1 win, 0 draw, -1 loss."""
    if ref_winner(board):
        return -1  # the side that just moved completed a line
    if 0 not in board:
        return 0
    return max(-ref_negamax(ref_play(board, c)) for c in range(9) if board[c] == 0)


def states_of(boards: list[Board]) -> TicTacToeState:
    """A batch of self-play states built directly from boards."""
    return TicTacToeState(
        board=jnp.array(boards, jnp.int8),
        player=jnp.array([ref_player(b) for b in boards], jnp.int32),
        agent=jnp.zeros(len(boards), jnp.int32),
    )


@functools.cache
def compiled(opponent: str = "self", agent_player: int = -1) -> tuple[Callable, Callable]:
    """Jitted (reset, step) of one shared TicTacToe per configuration, so tests share compiles."""
    env = TicTacToe(opponent=opponent, agent_player=agent_player)
    return jax.jit(env.reset), jax.jit(env.step)


# ------------------------------------------------------------------------------ rules


def test_reference_enumeration_counts():
    positions = reachable()
    terminal = [b for b in positions if ref_over(b)]
    assert len(positions) == 5478
    assert len(terminal) == 958
    wins = [ref_winner(b) for b in terminal]
    assert (wins.count(1), wins.count(2), wins.count(0)) == (626, 316, 16)


def test_every_move_of_every_position_matches_reference():
    env = TicTacToe()
    pairs = [(b, c) for b in reachable() if not ref_over(b) for c in range(9) if b[c] == 0]
    boards = [b for b, _ in pairs]
    actions = jnp.array([c for _, c in pairs], jnp.int32)
    keys = jax.random.split(jax.random.key(0), len(pairs))
    obs, state, reward, term, trunc, info = jax.jit(jax.vmap(env.step))(
        keys, states_of(boards), actions
    )
    children = [ref_play(b, c) for b, c in pairs]
    movers = np.array([ref_player(b) for b in boards])
    done = np.array([ref_over(ch) for ch in children])
    won = np.array([ref_winner(ch) == m + 1 for ch, m in zip(children, movers)])
    np.testing.assert_array_equal(term, done)
    assert not np.any(trunc) and trunc.dtype == jnp.bool_ and term.dtype == jnp.bool_
    assert reward.dtype == jnp.float32
    np.testing.assert_array_equal(reward, won.astype(np.float32))  # draws and moves give 0
    draws = np.array([ref_winner(ch) == 0 and 0 not in ch for ch in children])
    np.testing.assert_array_equal(done & ~won, draws)  # a game ends by the mover's win or a draw
    assert won.any() and draws.any()
    final = np.stack([ref_obs(ch, 1 - m) for ch, m in zip(children, movers)])
    np.testing.assert_array_equal(info["final_observation"], final)
    np.testing.assert_array_equal(obs, np.where(done[:, None], ref_obs(EMPTY, 0), final))
    next_boards = np.where(done[:, None], 0, np.array(children))
    np.testing.assert_array_equal(state.board, next_boards)
    np.testing.assert_array_equal(state.player, np.where(done, 0, 1 - movers))


def test_legal_masks_of_all_positions():
    env = envs.make("TicTacToe-v0")  # through EpisodeStatistics
    positions = list(reachable())
    zeros = jnp.zeros(len(positions))
    wrapped = envs.EpisodeStatsState(states_of(positions), zeros, zeros.astype(jnp.int32))
    masks = jax.jit(functools.partial(rollout.legal_actions, env))(wrapped)
    assert masks.shape == (len(positions), 9) and masks.dtype == jnp.bool_
    np.testing.assert_array_equal(masks, [ref_legal(b) for b in positions])


def test_illegal_moves_lose_for_the_mover():
    reset, step = compiled()
    key = jax.random.key(0)
    _, state = reset(key)
    _, state, *_ = step(key, state, 4)
    for bad in (4, 9, -1):  # occupied, then out of range
        _, after, reward, term, _, info = step(key, state, bad)
        assert float(reward) == -1.0 and bool(term) and not np.any(after.board)
        centre = (0,) * 4 + (1,) + (0,) * 4  # the illegal stone is not placed
        np.testing.assert_array_equal(info["final_observation"], ref_obs(centre, 0))
    reset, step = compiled("random", 0)
    _, state = reset(key)
    _, state, *_ = step(key, state, 0)
    taken = int(np.flatnonzero(np.asarray(state.board) == 2)[0])  # the opponent's reply
    _, _, reward, term, _, _ = step(key, state, taken)
    assert float(reward) == -1.0 and bool(term)


# ------------------------------------------------------------------------------ auto-reset


def test_auto_reset_after_a_win_in_self_play():
    reset, step = compiled()
    obs, state = reset(jax.random.key(1))
    np.testing.assert_array_equal(obs, ref_obs(EMPTY, 0))
    rewards, terms = [], []
    for t, cell in enumerate([0, 3, 1, 4, 2]):  # X completes the top row
        obs, state, reward, term, trunc, info = step(jax.random.key(t), state, cell)
        rewards.append(float(reward))
        terms.append(bool(term))
        assert set(info) == {"final_observation"} and not bool(trunc)
    assert rewards == [0, 0, 0, 0, 1] and terms == [False] * 4 + [True]
    np.testing.assert_array_equal(obs, ref_obs(EMPTY, 0))
    assert not np.any(state.board) and int(state.player) == 0
    won = (1, 1, 1, 2, 2, 0, 0, 0, 0)
    np.testing.assert_array_equal(info["final_observation"], ref_obs(won, 1))  # O's view


def test_opponent_reply_inside_the_step_and_reset_opening():
    reset, step = compiled("perfect", 1)
    obs, state = reset(jax.random.key(0))
    assert obs[9:18].sum() == 1 and obs[:9].sum() == 0 and int(state.player) == 1
    # X (the opponent) holds 0, 1 and 6; the agent (O) holds 3 and 4 and is to move.
    board = (1, 1, 0, 2, 2, 0, 1, 0, 0)
    state = TicTacToeState(jnp.array(board, jnp.int8), jnp.int32(1), jnp.int32(1))
    obs, _, reward, term, _, info = step(jax.random.key(1), state, 5)  # the agent wins
    assert float(reward) == 1.0 and bool(term)
    np.testing.assert_array_equal(info["final_observation"], ref_obs(ref_play(board, 5), 1))
    assert obs[9:18].sum() == 1 and obs[:9].sum() == 0  # a fresh game, X opened again
    _, _, reward, term, _, info = step(jax.random.key(1), state, 8)  # X answers at 2 and wins
    assert float(reward) == -1.0 and bool(term)
    lost = ref_play(ref_play(board, 8), 2)
    np.testing.assert_array_equal(info["final_observation"], ref_obs(lost, 1))


# ------------------------------------------------------------------------ perfect player


def test_perfect_table_matches_reference_negamax():
    positions = list(reachable())
    boards = jnp.array(positions, jnp.int8)
    players = jnp.array([ref_player(b) for b in positions], jnp.int32)
    keys = jax.random.split(jax.random.key(0), len(positions))
    values, masks, picks = jax.jit(jax.vmap(lambda b, p, k: (
        minimax_value(b, p), optimal_actions(b, p), perfect_action(b, p, k)
    )))(boards, players, keys)
    np.testing.assert_array_equal(values, [ref_negamax(b) for b in positions])
    assert int(values[positions.index(EMPTY)]) == 0
    masks, picks = np.asarray(masks), np.asarray(picks)
    for i, board in enumerate(positions):
        if ref_over(board):
            assert not masks[i].any()
            continue
        best = ref_negamax(board)
        want = [board[c] == 0 and -ref_negamax(ref_play(board, c)) == best for c in range(9)]
        np.testing.assert_array_equal(masks[i], want)
        assert masks[i, picks[i]]


def perfect_policy(params: Any, obs: jax.Array, key: jax.Array) -> jax.Array:
    """Perfect moves from canonical observations: own stones as X, X to move."""
    boards = (obs[:, :9] + 2 * obs[:, 9:18]).astype(jnp.int8)
    keys = jax.random.split(key, obs.shape[0])
    return jax.vmap(perfect_action, in_axes=(0, None, 0))(boards, jnp.int32(0), keys)


def random_policy(params: Any, obs: jax.Array, key: jax.Array) -> jax.Array:
    """Uniformly random empty cells from canonical observations."""
    u = jax.random.uniform(key, (obs.shape[0],))
    return jax.vmap(uniform_choice)(obs[:, 18:] > 0, u)


def perfect_then_random(params: Any, obs: jax.Array, key: jax.Array) -> jax.Array:
    """Perfect moves in the first half of the batch, random ones in the second (one compile)."""
    half = obs.shape[0] // 2
    perfect_key, random_key = jax.random.split(key)
    return jnp.concatenate([
        perfect_policy(params, obs[:half], perfect_key),
        random_policy(params, obs[half:], random_key),
    ])


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def first_games(env: Any, policy: Callable, num_games: int, key: jax.Array) -> tuple[Any, ...]:
    """Reset obs, the agent's side, return and whether it finished, of the first game in each
    of `num_games` envs (made by `envs.make`, so EpisodeStatistics reports the returns)."""
    reset_key, run_key = jax.random.split(key)
    obs0, state = jax.vmap(env.reset)(jax.random.split(reset_key, num_games))

    def body(carry, step_key):
        obs, state, returns, finished = carry
        act_key, env_key = jax.random.split(step_key)
        actions = policy(None, obs, act_key)
        env_keys = jax.random.split(env_key, num_games)
        obs, state, _, _, _, info = jax.vmap(env.step)(env_keys, state, actions)
        first = info["episode_done"] & ~finished
        returns = jnp.where(first, info["episode_return"], returns)
        return (obs, state, returns, finished | info["episode_done"]), None

    init = (obs0, state, jnp.zeros(num_games), jnp.zeros(num_games, bool))
    steps = jax.random.split(run_key, env.spec.max_episode_steps)
    (_, _, returns, finished), _ = jax.lax.scan(body, init, steps)
    return obs0, state.env_state.agent, returns, finished


def outcomes(env: Any, policy: Callable, num_games: int) -> tuple[np.ndarray, np.ndarray]:
    """The agent's returns and sides in `num_games` first games, checking the openings."""
    obs0, sides, returns, finished = first_games(env, policy, num_games, jax.random.key(7))
    sides, returns = np.asarray(sides), np.asarray(returns)
    assert np.all(finished)
    np.testing.assert_array_equal(np.asarray(obs0)[:, 9:18].sum(1), sides)  # O faces one X
    np.testing.assert_array_equal(np.asarray(obs0)[:, :9].sum(1), 0)
    return returns, sides


def both_sides(sides: np.ndarray) -> bool:
    """Whether the agent played X and O (agent_player -1 picks a side per episode)."""
    return min(np.sum(sides == 0), np.sum(sides == 1)) >= len(sides) // 4


def test_perfect_and_random_agents_against_perfect_opponent():
    returns, sides = outcomes(envs.make_eval("TicTacToe-v0"), perfect_then_random, 256)
    perfect, random = returns[:128], returns[128:]
    assert both_sides(sides[:128]) and both_sides(sides[128:])
    assert np.all(perfect == 0.0)  # perfect play on both sides always draws
    assert np.all(random <= 0.0) and np.mean(random) < -0.5  # random never wins
    for side in (0, 1):
        assert np.any(random[sides[128:] == side] < 0.0)


def test_perfect_agent_never_loses_to_random_opponent():
    returns, sides = outcomes(envs.make("TicTacToe-v0", opponent="random"), perfect_policy, 200)
    assert both_sides(sides)
    assert np.all(returns >= 0.0) and np.mean(returns) > 0.5


# ------------------------------------------------------------------------------- registry


def test_registry_entry_spec_and_forwarding():
    env = envs.make("TicTacToe-v0")
    assert isinstance(env, envs.EpisodeStatistics) and isinstance(env.unwrapped, TicTacToe)
    assert env.spec == EnvSpec("TicTacToe-v0", (27,), "float32", Discrete(9), 9, num_players=2)
    assert hasattr(env, "legal_actions") and hasattr(env.env, "legal_actions")
    board = jnp.zeros(9, jnp.int8).at[4].set(1)
    inner = TicTacToeState(board, jnp.int32(1), jnp.int32(0))
    state = envs.EpisodeStatsState(inner, 0.0, 0)
    np.testing.assert_array_equal(env.legal_actions(state), np.arange(9) != 4)
    assert envs.reward_threshold("TicTacToe-v0") == 0.0
    assert "TicTacToe-v0" in envs.names()


def test_bad_params_are_one_line_env_param_errors():
    bad = [{"size": 4}, {"opponent": "expert"}, {"opponent": "random", "agent_player": 2},
           {"agent_player": 0}]
    for params in bad:
        with pytest.raises(envs.EnvParamError) as err:
            envs.make("TicTacToe-v0", **params)
        assert "\n" not in str(err.value) and "TicTacToe-v0" in str(err.value)


def test_make_eval_uses_the_perfect_opponent():
    env = envs.make_eval("TicTacToe-v0", agent_player=1)
    assert isinstance(env, envs.EpisodeStatistics)
    assert env.unwrapped.opponent == "perfect" and env.unwrapped.agent_player == 1
    assert env.spec.num_players == 1 and env.spec.max_episode_steps == 5
    assert envs.make_eval("TicTacToe-v0", opponent="random").unwrapped.opponent == "perfect"
    # a training env against a fixed opponent is evaluated against its perfect player too;
    # a named evaluation opponent plays the self-play game instead
    assert envs.make_eval("TicTacToe-v0", against="random").opponent_name == "random"


class _Plain:
    """A one-step env with no legal-action mask."""

    spec = EnvSpec("Plain-test", (1,), "float32", Discrete(3), 1)

    def reset(self, key):
        return jnp.zeros((1,), jnp.float32), jnp.zeros((), jnp.int32)

    def step(self, key, state, action):
        obs = jnp.zeros((1,), jnp.float32)
        info = {"final_observation": obs}
        return obs, state, jnp.float32(0.0), jnp.bool_(True), jnp.bool_(False), info


def test_envs_without_legal_actions_and_eval_variant():
    envs.register("Plain-test", _Plain)
    try:
        env = envs.make_eval("Plain-test")  # no eval params: the same as make
        assert isinstance(env, envs.EpisodeStatistics) and isinstance(env.unwrapped, _Plain)
        assert not hasattr(env, "legal_actions")
        states = envs.EpisodeStatsState(jnp.zeros(5, jnp.int32), jnp.zeros(5), jnp.zeros(5))
        np.testing.assert_array_equal(rollout.legal_actions(env, states), np.ones((5, 3), bool))
    finally:
        registry._OWN.pop("Plain-test", None)


def test_registry_import_stays_lazy():
    code = (
        "from jaxrl_sys import envs; import sys; "
        "assert 'jaxrl_sys.envs.tictactoe' not in sys.modules and 'gymnax' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
