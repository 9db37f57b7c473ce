"""pgx games through our env interface: seats, mover rewards, auto-reset, the arena."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.tools import arena
from jaxrl_sys.core.rollout import reset_envs, step_envs, legal_actions


@pytest.mark.parametrize("bad, message", [
    ("pgx:no_such_game", "unknown pgx game"),
    ("pgx:2048", "only two-player games"),
    ("pgx:backgammon", "several times in a row"),
])
def test_unsupported_games_are_one_line_errors(bad, message):
    with pytest.raises(envs.UnknownEnvError, match=message) as error:
        envs.make(bad)
    assert "\n" not in str(error.value)


def test_connect_four_alternates_seats_and_rewards_the_mover():
    env = envs.make("pgx:connect_four")
    assert env.spec.obs_shape == (6, 7, 2) and env.spec.num_players == 2
    vstate = reset_envs(env, jax.random.PRNGKey(0), jnp.arange(64))
    seats, ended = [], []
    step = jax.jit(lambda v, a, k: step_envs(env, v, a, k))
    for t in range(env.spec.max_episode_steps):
        seats.append(np.asarray(jax.vmap(env.player_to_move)(vstate.env_state)))
        legal = legal_actions(env, vstate.env_state)
        actions = arena.random_player(None, vstate.obs, jax.random.PRNGKey(t), legal)
        vstate, result = step(vstate, actions, jax.random.PRNGKey(100 + t))
        ended.append(np.asarray(result.terminated | result.truncated))
        reward = np.asarray(result.reward)
        # only a finishing move is rewarded: +1 for a win of the mover, never a loss
        assert np.all(reward[~ended[-1]] == 0) and np.all(np.isin(reward, [0.0, 1.0]))
    first_game = np.cumsum(np.stack(ended), 0) == 0  # steps before the first game ended
    seats = np.stack(seats)
    assert np.all(seats[0] == 0)
    assert np.all((seats[1:] != seats[:-1])[first_game[:-1]])  # seats alternate in a game
    assert np.all(np.stack(ended).any(0))  # every game ended within the bound


@pytest.mark.user_codegen  # its cost is running, which the tests' flags slow
@pytest.mark.slow
def test_mcts_beats_random_play_at_connect_four():
    env = envs.make("pgx:connect_four")
    games = 16
    play = jax.jit(lambda k: arena.play(env, arena.mcts_player(env, 32), None,
                                        arena.random_player, None, k, jnp.arange(games)))
    results = np.asarray(play(jax.random.PRNGKey(0)))
    assert np.mean(results > 0) > 0.8


def first_legal_move(params, obs, key, legal, env_state=None):
    """A deterministic player: the lowest-numbered legal move."""
    return jnp.argmax(legal, axis=-1).astype(jnp.int32)


def test_training_evaluates_a_game_against_an_opponent_in_both_seats():
    """Greedy self-play would repeat one game; evaluation plays a random opponent (the
    default), the agent opening the games of even ids, and reports its results."""
    from jaxrl_sys.core.evaluation import evaluate

    env = envs.make_eval("pgx:tic_tac_toe")
    assert env.opponent_name == "random" and env.spec.num_players == 2
    results, lengths = jax.jit(lambda k: evaluate(env, first_legal_move, None, k,
                                                  jnp.arange(64)))(jax.random.PRNGKey(0))
    results, lengths = np.asarray(results), np.asarray(lengths)
    assert set(np.unique(results)) <= {-1.0, 0.0, 1.0} and len(np.unique(results)) >= 2
    assert np.all((lengths >= 5) & (lengths <= 9))
    # opening, the same deterministic player wins in 7 plies against most random replies
    assert (results[0::2] > 0).mean() > (results[1::2] > 0).mean()


def test_an_evaluation_opponent_is_chosen_by_name():
    from jaxrl_sys.core.evaluation import evaluate

    perfect = envs.make_eval("TicTacToe-v0", against="perfect")
    assert perfect.spec.num_players == 2 and perfect.opponent_name == "perfect"
    results, _ = jax.jit(lambda k: evaluate(perfect, first_legal_move, None, k,
                                            jnp.arange(16)))(jax.random.PRNGKey(1))
    assert np.all(np.asarray(results) <= 0) and np.any(np.asarray(results) < 0)
    assert envs.make_eval("pgx:connect_four", against="mcts:8").opponent_name == "mcts:8"
    assert envs.make_eval("TicTacToe-v0").spec.num_players == 1  # its own variant, as before
    with pytest.raises(envs.EnvParamError, match="two-player game"):
        envs.make_eval("CartPole-v1", against="random")
