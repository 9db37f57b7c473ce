"""The arena referees two-player games: seats, results, and its opponents' strength."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.envs.tictactoe import TicTacToeState, perfect_player
from jaxrl_sys.envs.wrappers import EpisodeStatsState
from jaxrl_sys.tools import arena

GAMES = 100


@pytest.fixture(scope="module")
def game():
    return envs.make("TicTacToe-v0")


def results(env, player, opponent, games=GAMES, seed=0):
    play = jax.jit(lambda k: arena.play(env, player, None, opponent, None, k,
                                        jnp.arange(games)))
    return np.asarray(play(jax.random.PRNGKey(seed)))


def test_perfect_play_against_itself_is_always_a_draw(game):
    perfect = perfect_player(game)
    np.testing.assert_array_equal(results(game, perfect, perfect), 0)


def test_perfect_player_never_loses_and_wins_most_games_against_random(game):
    perfect = perfect_player(game)
    as_player = results(game, perfect, arena.random_player)
    as_opponent = results(game, arena.random_player, perfect)
    assert np.all(as_player >= 0) and np.all(as_opponent <= 0)
    assert np.mean(as_player > 0) > 0.75 and np.mean(as_opponent < 0) > 0.75


def test_seats_alternate_and_the_opening_seat_wins_more_random_games(game):
    """Random play: X (who opens) wins about 58% and O about 29% of games; the player opens
    the even-numbered games, so its wins split by parity that way."""
    r = results(game, arena.random_player, arena.random_player, games=400)
    assert np.mean(r[0::2] > 0) > np.mean(r[1::2] > 0) + 0.15
    assert np.mean(r[1::2] < 0) > np.mean(r[0::2] < 0) + 0.15


def one_position(board, player, batch=4):
    """A batch of `batch` copies of a position of the wrapped self-play env."""
    state = EpisodeStatsState(
        TicTacToeState(jnp.asarray(board, jnp.int8), jnp.int32(player), jnp.int32(0)),
        jnp.float32(0), jnp.int32(int(np.count_nonzero(board))))
    return jax.tree.map(lambda x: jnp.stack([x] * batch), state)


def test_mcts_player_takes_a_win_and_blocks_a_loss(game):
    mcts = jax.jit(arena.mcts_player(game, 100))
    legal = lambda s: jax.vmap(game.legal_actions)(s)  # noqa: E731
    win = one_position([1, 1, 0, 2, 2, 0, 0, 0, 0], player=0)  # X plays 2 and wins
    block = one_position([1, 1, 0, 0, 2, 0, 0, 0, 0], player=1)  # O must play 2
    for state in (win, block):
        actions = mcts(None, None, jax.random.PRNGKey(0), legal=legal(state), env_state=state)
        np.testing.assert_array_equal(actions, 2)


@pytest.mark.slow
def test_mcts_player_beats_random_play(game):
    r = results(game, arena.mcts_player(game, 32), arena.random_player, games=64)
    assert np.mean(r > 0) > 0.7 and np.mean(r < 0) < 0.1


def test_outcomes_count_and_score():
    o = arena.Outcomes.from_results([1.0, 0.0, -1.0, 1.0])
    assert (o.wins, o.draws, o.losses, o.games) == (2, 1, 1, 4)
    assert o.score == pytest.approx(0.625)
    assert o.as_dict() == {"wins": 2, "draws": 1, "losses": 1, "games": 4}


def test_single_player_envs_are_refused():
    with pytest.raises(ValueError, match="two-player"):
        arena.mcts_player(envs.make("CartPole-v1"), 8)
