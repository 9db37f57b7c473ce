"""Tic-tac-toe as a pure-JAX env: two-player self-play for MuZero, or one agent vs a fixed opponent.

Cells are numbered 0..8 row-major and the action is the cell to play. Board values: 0 empty,
1 X (moves first), 2 O. Observations are canonical (from one player's view), float32 (27,):
[own stones (9), opponent stones (9), empty cells (9)], so one network plays both sides.

The perfect opponent reads a negamax table over all 3**9 canonical boards, computed once in
NumPy on first use.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl_sys.envs.errors import EnvParamError
from jaxrl_sys.core.types import Discrete, EnvSpec, PyTree

Info = dict[str, jax.Array]
StepOut = tuple[jax.Array, "TicTacToeState", jax.Array, jax.Array, jax.Array, Info]

NUM_CELLS = 9
OPPONENTS = ("self", "perfect", "random")
# The 8 winning lines: rows, columns, diagonals.
LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]],
    dtype=np.int32,
)
_POW3 = 3 ** np.arange(NUM_CELLS, dtype=np.int32)


@struct.dataclass
class TicTacToeState:
    """A position: the board, the side to move (0 X, 1 O) and the agent's side (0 in self-play)."""

    board: jax.Array  # int8 [9]: 0 empty, 1 X, 2 O
    player: jax.Array  # int32: side to move
    agent: jax.Array  # int32: the agent's side against an opponent; unused in self-play


# ------------------------------------------------------------------------------ board helpers


def has_line(board: jax.Array, stone: jax.Array | int) -> jax.Array:
    """Whether `stone` (1 or 2) holds one of the 8 lines of `board` [9]."""
    return jnp.any(jnp.all(board[LINES] == stone, axis=-1))


def winner(board: jax.Array) -> jax.Array:
    """The winning stone of `board` (1 X, 2 O), or 0 if no line is complete."""
    return jnp.where(has_line(board, 1), 1, jnp.where(has_line(board, 2), 2, 0)).astype(jnp.int32)


def game_over(board: jax.Array) -> jax.Array:
    """Whether the game on `board` has ended (a completed line or a full board)."""
    return (winner(board) != 0) | jnp.all(board != 0)


def empty_cells(board: jax.Array) -> jax.Array:
    """bool [9]: the empty cells (legal moves unless the game is over)."""
    return board == 0


def observe(board: jax.Array, viewer: jax.Array) -> jax.Array:
    """The canonical float32 (27,) observation of `board` from side `viewer`'s view."""
    own = board == viewer + 1
    opp = (board != 0) & ~own
    return jnp.concatenate([own, opp, board == 0]).astype(jnp.float32)


def canonical_code(board: jax.Array, player_to_move: jax.Array) -> jax.Array:
    """Base-3 code of `board` as seen by the mover: digit 1 its stones, 2 the opponent's."""
    own = board == player_to_move + 1
    digits = jnp.where(board == 0, 0, jnp.where(own, 1, 2)).astype(jnp.int32)
    return jnp.sum(digits * jnp.asarray(_POW3))


# ------------------------------------------------------------------------------ perfect player


def _lines_held(held: np.ndarray) -> np.ndarray:
    """bool [N]: which of the boards, given as a bool [N, 9] stone mask, hold a full line."""
    return held[:, LINES].all(axis=-1).any(axis=-1)


@functools.cache
def perfect_tables() -> tuple[np.ndarray, np.ndarray]:
    """Negamax value (int8 [3**9], for the mover) and optimal-move mask (bool [3**9, 9]).

    Indexed by `canonical_code`. A terminal board has value -1 if the opponent holds a line,
    +1 if only the mover does (unreachable), 0 for a full-board draw, and no optimal moves.
    Solved backwards by stone count: a board's children have one stone more.
    """
    n = 3**NUM_CELLS
    codes = np.arange(n)
    digits = (codes[:, None] // _POW3) % 3
    empty = digits == 0
    swapped = (np.where(empty, 0, 3 - digits) * _POW3).sum(axis=1)  # the other side's view
    mover_line, opp_line = _lines_held(digits == 1), _lines_held(digits == 2)
    value = np.where(opp_line, -1, np.where(mover_line, 1, 0)).astype(np.int8)
    terminal = mover_line | opp_line | ~empty.any(axis=1)
    optimal = np.zeros((n, NUM_CELLS), dtype=bool)
    stones = (~empty).sum(axis=1)
    for count in range(NUM_CELLS - 1, -1, -1):
        idx = np.nonzero((stones == count) & ~terminal)[0]
        open_ = empty[idx]
        child = np.where(open_, codes[idx, None] + _POW3, 0)  # mover's stone at each open cell
        child_value = np.where(open_, -value[swapped[child]], -2)
        best = child_value.max(axis=1)
        value[idx] = best
        optimal[idx] = child_value == best[:, None]
    return value, optimal


def minimax_value(board: jax.Array, player_to_move: jax.Array) -> jax.Array:
    """Game-theoretic value (int32: +1 win, 0 draw, -1 loss) of `board` for the side to move."""
    value, _ = perfect_tables()
    return jnp.asarray(value)[canonical_code(board, player_to_move)].astype(jnp.int32)


def optimal_actions(board: jax.Array, player_to_move: jax.Array) -> jax.Array:
    """bool [9]: the moves that keep the side to move's game-theoretic value (none if over)."""
    bits = jnp.asarray(_optimal_bits())[canonical_code(board, player_to_move)]
    return (jnp.right_shift(bits, jnp.arange(NUM_CELLS, dtype=jnp.uint16)) & 1).astype(jnp.bool_)


def perfect_action(board: jax.Array, player_to_move: jax.Array, key: jax.Array) -> jax.Array:
    """A perfect move, uniformly random among the optimal ones (so every optimal line is played).

    On a finished board (no optimal move) it falls back to any empty cell, or cell 0.
    """
    return _perfect_move(board, player_to_move, jax.random.uniform(key))


def perfect_player(env) -> Callable[..., jax.Array]:
    """The perfect player as an arena policy for `env` (TicTacToe-v0, wrapped or not):
    `policy(params, obs, key, legal=, env_state=) -> actions` over a batch of games."""
    innermost = getattr(env, "innermost_state", lambda s: s)

    def policy(params, obs, key, legal=None, env_state=None) -> jax.Array:
        del params, obs, legal
        state = innermost(env_state)
        keys = jax.random.split(key, state.board.shape[0])
        return jax.vmap(perfect_action)(state.board, state.player, keys)

    return policy


def uniform_choice(mask: jax.Array, u: jax.Array) -> jax.Array:
    """Index of the floor(u * count)-th True entry of `mask` [9] for u ~ U[0, 1): a uniform pick.

    One scalar draw per choice, because XLA:CPU compiles vector draws of 9 slowly. Index 0 if
    `mask` is all False.
    """
    count = jnp.sum(mask)
    rank = jnp.minimum(jnp.floor(u * count).astype(jnp.int32), count - 1)
    return jnp.argmax(mask & (jnp.cumsum(mask) > rank)).astype(jnp.int32)


@functools.cache
def _optimal_bits() -> np.ndarray:
    """The optimal-move masks of `perfect_tables` packed into uint16 [3**9] (bit i: cell i)."""
    _, optimal = perfect_tables()
    return (optimal * (1 << np.arange(NUM_CELLS))).sum(axis=1).astype(np.uint16)


def _perfect_move(board: jax.Array, player_to_move: jax.Array, u: jax.Array) -> jax.Array:
    """`perfect_action` driven by one uniform draw `u`."""
    mask = optimal_actions(board, player_to_move)
    mask = jnp.where(jnp.any(mask), mask, empty_cells(board))
    return uniform_choice(mask, u)


# -------------------------------------------------------------------------------------- env


class TicTacToe:
    """Tic-tac-toe with gymnax-style auto-reset, as a static object of pure jittable functions.

    `opponent="self"`: two-player self-play (`spec.num_players == 2`): the agent picks the moves
    of both sides in turn; obs is from the mover's view and the reward is for the side that just
    moved: +1 when its move wins, else 0; at most 9 steps. `opponent="perfect"|"random"`: one
    agent against the minimax player or a uniformly random legal mover, who replies inside the
    same step; the agent plays side `agent_player` (0 X first, 1 O second, -1 random per
    episode); reward +1 win, -1 loss, 0 otherwise, at the step ending the game; at most 5 steps.
    An illegal move (occupied cell) ends the game as a loss (-1) for the mover.
    `info` is always `{"final_observation": obs of the position just played}`; truncated is
    always False. The object hashes by identity.
    """

    def __init__(self, opponent: str = "self", agent_player: int = -1) -> None:
        if opponent not in OPPONENTS:
            raise EnvParamError(
                f"TicTacToe-v0: unknown opponent {opponent!r}; valid: {', '.join(OPPONENTS)}"
            )
        if agent_player not in (-1, 0, 1):
            raise EnvParamError(
                "TicTacToe-v0: agent_player must be -1 (random), 0 (X) or 1 (O), "
                f"got {agent_player!r}"
            )
        if opponent == "self" and agent_player != -1:
            raise EnvParamError(
                "TicTacToe-v0: agent_player applies only with opponent 'perfect' or 'random'"
            )
        self.opponent = opponent
        self.agent_player = int(agent_player)
        self_play = opponent == "self"
        self.spec = EnvSpec(
            name="TicTacToe-v0",
            obs_shape=(3 * NUM_CELLS,),
            obs_dtype="float32",
            action_space=Discrete(NUM_CELLS),
            max_episode_steps=NUM_CELLS if self_play else 5,
            num_players=2 if self_play else 1,
        )

    @property
    def unwrapped(self) -> "TicTacToe":
        """This env itself (wrappers forward `unwrapped` to their innermost env)."""
        return self

    def __repr__(self) -> str:
        return f"TicTacToe(opponent={self.opponent!r}, agent_player={self.agent_player})"

    # ------------------------------------------------------------------------- public functions

    def reset(self, key: jax.Array) -> tuple[jax.Array, TicTacToeState]:
        """A fresh game; against an opponent playing X, its first move is already made."""
        return self._new_game(self._draws(key, 2))

    def step(self, key: jax.Array, state: TicTacToeState, action: jax.Array) -> StepOut:
        """Play `action` for the side to move (then the opponent replies); auto-reset at the end."""
        u = self._draws(key, 3)
        after, reward, done = self._play(state, action)
        if self.opponent != "self":
            after, reward, done = self._reply(u[0], after, reward, done)
        final_obs = self._observe(after)
        fresh_obs, fresh = self._new_game(u[1:])
        return (
            jnp.where(done, fresh_obs, final_obs),
            _select(done, fresh, after),
            reward,
            done,
            jnp.zeros((), jnp.bool_),
            {"final_observation": final_obs},
        )

    def legal_actions(self, state: TicTacToeState) -> jax.Array:
        """bool [9]: the legal moves of the side to move (none once the game is over)."""
        return empty_cells(state.board) & ~game_over(state.board)

    def player_to_move(self, state: TicTacToeState) -> jax.Array:
        """int32: the seat to move, 0 for the side that opened the game (X), 1 for O."""
        return state.player

    # ------------------------------------------------------------------------------ internals

    def _draws(self, key: jax.Array, n: int) -> jax.Array:
        """`n` uniform draws, or zeros in self-play, which needs no randomness."""
        if self.opponent == "self":
            return jnp.zeros(n, jnp.float32)
        return jax.random.uniform(key, (n,))

    def _new_game(self, u: jax.Array) -> tuple[jax.Array, TicTacToeState]:
        """A fresh game from 2 uniform draws: the agent's side, then the opponent's opening."""
        state = TicTacToeState(
            board=jnp.zeros(NUM_CELLS, jnp.int8),
            player=jnp.zeros((), jnp.int32),
            agent=self._agent_side(u[0]),
        )
        if self.opponent != "self":
            opened, _, _ = self._play(state, self._opponent_action(u[1], state))
            state = _select(state.agent == 1, opened, state)
        return self._observe(state), state

    def _agent_side(self, u: jax.Array) -> jax.Array:
        """The agent's side for a new episode: fixed, or a fair coin when `agent_player` is -1."""
        if self.opponent == "self" or self.agent_player >= 0:
            return jnp.asarray(max(self.agent_player, 0), jnp.int32)
        return (u < 0.5).astype(jnp.int32)

    def _observe(self, state: TicTacToeState) -> jax.Array:
        """Obs from the mover's view in self-play, from the agent's view against an opponent."""
        viewer = state.player if self.opponent == "self" else state.agent
        return observe(state.board, viewer)

    def _play(
        self, state: TicTacToeState, action: jax.Array
    ) -> tuple[TicTacToeState, jax.Array, jax.Array]:
        """The side to move plays `action`: (next state, reward for the mover, game over)."""
        action = jnp.asarray(action, jnp.int32)
        cell = jnp.clip(action, 0, NUM_CELLS - 1)
        legal = (action == cell) & (state.board[cell] == 0)
        stone = (state.player + 1).astype(jnp.int8)
        board = jnp.where(legal, state.board.at[cell].set(stone), state.board)
        won = legal & has_line(board, stone)
        reward = jnp.where(legal, jnp.where(won, 1.0, 0.0), -1.0).astype(jnp.float32)
        done = ~legal | won | jnp.all(board != 0)
        return state.replace(board=board, player=1 - state.player), reward, done

    def _opponent_action(self, u: jax.Array, state: TicTacToeState) -> jax.Array:
        """The opponent's move in `state` (it is the side to move), from one uniform draw `u`."""
        if self.opponent == "perfect":
            return _perfect_move(state.board, state.player, u)
        return uniform_choice(empty_cells(state.board), u)

    def _reply(
        self, u: jax.Array, state: TicTacToeState, reward: jax.Array, done: jax.Array
    ) -> tuple[TicTacToeState, jax.Array, jax.Array]:
        """The opponent answers unless the agent's move ended the game; reward stays the agent's."""
        replied, opp_reward, opp_done = self._play(state, self._opponent_action(u, state))
        return (
            _select(done, state, replied),
            jnp.where(done, reward, -opp_reward),
            done | opp_done,
        )


def _select(pred: jax.Array, on_true: PyTree, on_false: PyTree) -> PyTree:
    """Leaf-wise `where(pred, on_true, on_false)` over two pytrees of the same structure."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)
