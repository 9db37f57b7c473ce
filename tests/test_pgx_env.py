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


def test_mcts_beats_random_play_at_connect_four():
    env = envs.make("pgx:connect_four")
    games = 32
    play = jax.jit(lambda k: arena.play(env, arena.mcts_player(env, 32), None,
                                        arena.random_player, None, k, jnp.arange(games)))
    results = np.asarray(play(jax.random.PRNGKey(0)))
    assert np.mean(results > 0) > 0.8
