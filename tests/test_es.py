"""ES and ARS (the `es` and `ars` agents, evosax's strategies on device): the first episode's
return in a window and the members' fitness by hand, a generation on 8 devices as on one,
honest step counts, steps past the scored episode, ARS's observation statistics, and
refusals. Their learning tests are tests/test_learning.py's (their promises); the killed-run
resume is tests/test_checkpoint.py's."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import agents, envs
from jaxrl_sys.agents import es
from jaxrl_sys.commands import train as train_script
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import place, placement_fns


def test_first_episode_returns_by_hand():
    """Three envs over 5 steps: one ends at step 1 (later rewards are the next episode's),
    one truncated at step 4, one never ends (cut at the window)."""
    rewards = jnp.array([[1.0, 1.0, 2.0], [2.0, 1.0, 2.0], [4.0, 1.0, 2.0], [8.0, 1.0, 2.0],
                         [16.0, 1.0, 2.0]])
    done = jnp.zeros((5, 3), bool).at[1, 0].set(True).at[4, 1].set(True).at[3, 0].set(True)
    returns, lengths = es.first_episode_returns(rewards, done)
    np.testing.assert_allclose(returns, [3.0, 5.0, 10.0])
    assert lengths.tolist() == [2, 5, 5]


def test_member_fitness_averages_each_members_envs_in_id_order():
    returns = jnp.arange(6.0)  # members 0, 1, 2 with 2 episodes each
    np.testing.assert_allclose(es.member_fitness(returns, 2), [0.5, 2.5, 4.5])


def small_config(name: str = "es", **overrides) -> es.Config:
    config = agents.load(name).default_config("CartPole-v1")
    return dataclasses.replace(config, population=16, episodes_per_member=2, rollout_steps=40,
                               total_steps=16 * 2 * 40 * 4, **overrides)


def run_generations(num_devices: int, config: es.Config, iters: int = 2):
    agent = es.make(envs.make("CartPole-v1"), config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=num_devices,
                   iters_per_chunk=iters)
    carry, metrics = runner.run_chunk(runner.init(np.asarray([4])))
    return jax.device_get(carry.agent_state), jax.device_get(metrics)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["es", "ars"])
def test_eight_devices_equal_one_device(name):
    """The population from a key every device shares, the returns summed over devices: 8
    devices (2 members each) end the generations with the distribution 1 device ends with,
    ARS's observation statistics included."""
    config = small_config(name)
    state_1, metrics_1 = run_generations(1, config)
    state_8, metrics_8 = run_generations(8, config)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
                 state_8, state_1)
    np.testing.assert_allclose(metrics_8["fitness_mean"], metrics_1["fitness_mean"], rtol=1e-6)
    initial = es.make(envs.make("CartPole-v1"), config).init(jax.random.PRNGKey(0))
    assert not np.allclose(state_1.strategy.mean[0], initial.strategy.mean)
    assert state_1.iteration.tolist() == [2]
    if name == "ars":
        # every observation of the 2 generations: 32 envs x 40 steps each
        assert float(state_1.obs_stats.count[0]) == pytest.approx(2 * 32 * 40)


def test_a_generation_counts_every_env_step_and_the_episode_steps_apart():
    config = small_config()
    agent = es.make(envs.make("CartPole-v1"), config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(config.num_envs))
    _, _, metrics = jax.jit(agent.train_step)(state, env_state, jax.random.PRNGKey(2))
    assert config.steps_per_iteration == 16 * 2 * 40
    assert float(metrics["episode_count"]) == 32
    assert 0 < float(metrics["episode_steps"]) <= 32 * 40
    assert float(metrics["fitness_min"]) <= float(metrics["fitness_mean"]) <= \
        float(metrics["fitness_max"])


def test_steps_after_the_first_episode_do_not_change_a_generation():
    """Only each member's first episode is scored: Pendulum's 200-step episodes in rollouts
    of 500 or of 200 steps move the mean to the same bits over the same generations."""
    def means(rollout_steps: int):
        config = dataclasses.replace(agents.load("es").default_config("Pendulum-v1"),
                                     population=8, rollout_steps=rollout_steps,
                                     total_steps=8 * rollout_steps * 2)
        agent = es.make(envs.make("Pendulum-v1"), config, axis_name=None)
        state = agent.init(jax.random.PRNGKey(0))
        env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(8))
        step = jax.jit(agent.train_step)
        for generation in range(2):
            state, env_state, _ = step(state, env_state, jax.random.PRNGKey(10 + generation))
        return np.asarray(state.strategy.mean)

    longer, exact = means(500), means(200)
    np.testing.assert_array_equal(longer, exact)
    assert not np.array_equal(exact, means(150))  # a rollout cut short scores less


def test_an_annealed_rate_stops_the_mean_at_the_last_generation():
    """`anneal_lr` takes the rate linearly to `final_lr_fraction` of it over the generations:
    with 0, a generation past the budget leaves the mean where the last one put it, and the
    first generations still move it."""
    config = small_config(anneal_lr=True, final_lr_fraction=0.0)
    assert config.num_iterations == 4
    agent = es.make(envs.make("CartPole-v1"), config, axis_name=None)
    step = jax.jit(agent.train_step)
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(config.num_envs))
    means = [state.strategy.mean]
    for generation in range(config.num_iterations + 1):
        state, env_state, _ = step(state, env_state, jax.random.PRNGKey(2 + generation))
        means.append(state.strategy.mean)
    assert not np.allclose(means[1], means[0])
    np.testing.assert_array_equal(means[-1], means[-2])


@pytest.mark.parametrize("overrides, message", [
    (dict(population=15), "population must be even"),
    (dict(strategy="cma"), "strategy must be one of"),
    (dict(top_fraction=0.0), "top_fraction"),
    (dict(noise_std=0.0), "noise_std"),
    (dict(final_lr_fraction=1.5), "final_lr_fraction"),
])
def test_settings_that_cannot_work_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(small_config(), **overrides).validate()


def test_a_population_that_does_not_divide_over_the_devices_is_one_line_exit_2(tmp_path, capsys):
    code = train_script.main(["--agent", "es", "--devices", "8", "--set", "population=12",
                              "--set", "episodes_per_member=2", "--run-root", str(tmp_path),
                              "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "population=12 does not divide over 8 devices" in err
    assert list(tmp_path.iterdir()) == []


def test_pg_on_a_two_player_game_is_one_line_exit_2(tmp_path, capsys):
    code = train_script.main(["--agent", "pg", "--env", "TicTacToe-v0", "--run-root",
                              str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "two-player" in err
    assert list(tmp_path.iterdir()) == []
