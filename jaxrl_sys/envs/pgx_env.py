"""pgx board games (`pgx:<game>`) as our two-player self-play envs.

pgx (the JAX ecosystem's board-game library) keeps per-player rewards, the player to move
and a legal-action mask in its `State`, and picks at random which player id opens. This
adapter gives the interface our agents and the arena use: observations from the mover's view
(pgx's own), float32; the reward of the side that just moved; `player_to_move` as a seat
(0 for whoever opened this game); gymnax-style auto-reset with `final_observation`; and a
step bound per game, past which an episode is truncated so evaluation always ends.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.envs.errors import UnknownEnvError
from jaxrl_sys.core.types import Discrete, EnvSpec

Info = dict[str, jax.Array]

PREFIX = "pgx:"
# moves a game can last: pgx's own limits (go: 2 * cells, chess 512, shogi variants 256)
# or the board's size; games that are not listed are truncated at DEFAULT_MAX_STEPS
MAX_STEPS = {
    "tic_tac_toe": 9, "connect_four": 42, "othello": 130, "hex": 122, "go_9x9": 162,
    "go_19x19": 722, "chess": 512, "gardner_chess": 256, "animal_shogi": 256,
}
DEFAULT_MAX_STEPS = 1024
# games in which one player can move several times in a row (our two-player agents assume
# the mover alternates: the next state's value is the opponent's)
NOT_ALTERNATING = ("backgammon",)
# games whose board mirrored along these observation axes, with the moves' order reversed,
# is the same game: connect four's columns left to right; tic-tac-toe's cells (row-major
# move ids) turned half a circle
MIRROR_AXES = {"connect_four": (1,), "tic_tac_toe": (0, 1)}


@struct.dataclass
class PgxEnvState:
    """pgx's game state plus the player id that opened the game and the moves made."""

    game: object  # pgx.State
    opener: jax.Array  # int32 player id that moved first
    steps: jax.Array  # int32


class PgxEnv:
    """A two-player pgx game with auto-reset; a static object of pure jittable functions."""

    def __init__(self, game: str) -> None:
        import pgx  # lazy: only runs that name a pgx game pay for the import

        if game not in pgx.available_envs():
            raise UnknownEnvError(f"unknown pgx game {game!r}; pgx has: "
                                  f"{', '.join(pgx.available_envs())}")
        self.game = game
        self.pgx_env = pgx.make(game)
        if self.pgx_env.num_players != 2:
            raise UnknownEnvError(f"{PREFIX}{game} has {self.pgx_env.num_players} player(s); "
                                  "only two-player games are supported")
        if game in NOT_ALTERNATING:
            raise UnknownEnvError(f"{PREFIX}{game}: one player moves several times in a row, "
                                  "which self-play here does not support yet")
        self.spec = EnvSpec(
            name=f"{PREFIX}{game}",
            obs_shape=tuple(self.pgx_env.observation_shape),
            obs_dtype="float32",
            action_space=Discrete(self.pgx_env.num_actions),
            max_episode_steps=MAX_STEPS.get(game, DEFAULT_MAX_STEPS),
            num_players=2,
            mirror_axes=MIRROR_AXES.get(game, ()),
        )

    @property
    def unwrapped(self) -> "PgxEnv":
        return self

    def __repr__(self) -> str:
        return f"PgxEnv({self.game!r})"

    def reset(self, key: jax.Array) -> tuple[jax.Array, PgxEnvState]:
        """A fresh game (pgx draws which player id opens)."""
        game = self.pgx_env.init(key)
        state = PgxEnvState(game, game.current_player.astype(jnp.int32), jnp.zeros((), jnp.int32))
        return self._observe(game), state

    def step(self, key: jax.Array, state: PgxEnvState, action: jax.Array):
        """The mover plays `action`; reward is the mover's; auto-reset when the game ends."""
        step_key, reset_key = jax.random.split(key)
        mover = state.game.current_player
        game = self.pgx_env.step(state.game, jnp.asarray(action, jnp.int32), step_key)
        steps = state.steps + 1
        terminated = game.terminated
        truncated = (game.truncated | (steps >= self.spec.max_episode_steps)) & ~terminated
        final_obs = self._observe(game)
        fresh_obs, fresh = self.reset(reset_key)
        done = terminated | truncated
        after = PgxEnvState(game, state.opener, steps)
        next_state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, after)
        return (
            jnp.where(done, fresh_obs, final_obs),
            next_state,
            game.rewards[mover].astype(jnp.float32),
            terminated,
            truncated,
            {"final_observation": final_obs},
        )

    def legal_actions(self, state: PgxEnvState) -> jax.Array:
        """bool [num_actions]: the mover's legal moves (none once the game is over)."""
        over = state.game.terminated | state.game.truncated
        return state.game.legal_action_mask & ~over

    def player_to_move(self, state: PgxEnvState) -> jax.Array:
        """int32 seat to move: 0 for the player who opened this game, 1 for the other."""
        return (state.game.current_player != state.opener).astype(jnp.int32)

    def _observe(self, game) -> jax.Array:
        return game.observation.astype(jnp.float32)


def make(name: str) -> PgxEnv:
    """`pgx:<game>` -> PgxEnv; one-line errors for a missing game or player count."""
    game = name[len(PREFIX):]
    if not game:
        raise UnknownEnvError(f"{name!r} names no pgx game")
    return PgxEnv(game)
