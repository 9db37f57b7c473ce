"""DQN's Ape-X exploration: fixed per-env epsilons by global env id, on device and on the host."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn
from jaxrl_sys.agents.families import q_learning
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import place, placement_fns


def apex_config(num_envs: int, **overrides) -> dqn.Config:
    """CartPole's DQN defaults with Ape-X exploration over `num_envs` envs."""
    return dataclasses.replace(dqn.default_config("CartPole-v1"), exploration="apex",
                               num_envs=num_envs, **overrides)


def test_apex_epsilons_follow_the_formula_and_ignore_the_step():
    config = apex_config(8)
    ids = np.arange(8)
    expected = 0.4 ** (1.0 + 7.0 * ids / 7.0)
    for env_steps in (0, 10**6):
        epsilons = np.asarray(q_learning.exploration_epsilons(config, jnp.asarray(env_steps),
                                                       jnp.arange(8)))
        np.testing.assert_allclose(epsilons, expected, rtol=1e-6)
    assert epsilons[0] == pytest.approx(0.4) and epsilons[-1] == pytest.approx(0.4 ** 8)
    single = q_learning.exploration_epsilons(apex_config(1), jnp.asarray(0), jnp.arange(1))
    np.testing.assert_allclose(np.asarray(single), [0.4], rtol=1e-6)
    scheduled = dataclasses.replace(config, exploration="schedule")
    np.testing.assert_allclose(
        np.asarray(q_learning.exploration_epsilons(scheduled, jnp.asarray(0), jnp.arange(8))),
        np.full(8, scheduled.epsilon_start))


@pytest.mark.slow
def test_device_loop_gives_each_global_env_its_epsilon_on_one_and_eight_devices():
    """Before learning starts, the 8 envs' replayed actions are the same on 1 device and split
    over 8 (epsilons by global id, not by a device's row); env 0 (epsilon 0.4) takes about
    20% non-greedy actions, envs 5-7 (epsilon <= 0.004) almost none."""
    config = apex_config(8, total_steps=4096, learning_starts=4096, buffer_size=2048)
    agent = dqn.make(envs.make("CartPole-v1"), config)

    def replayed(num_devices: int):
        runner = place(*placement_fns(agent), num_envs=8, num_devices=num_devices,
                       iters_per_chunk=256)
        carry, _ = runner.run_chunk(runner.init(np.arange(1)))
        data = jax.device_get(carry.env_state.replay.data)
        params = jax.device_get(jax.tree.map(lambda x: x[0], carry.agent_state.params))
        return data, params

    (data_1, params), (data_8, _) = replayed(1), replayed(8)
    np.testing.assert_array_equal(data_1["action"], data_8["action"])
    obs, actions = data_1["obs"][0], data_1["action"][0]  # [8 envs, 256 steps, ...]
    q_values = agent.network.apply(params, jnp.asarray(obs.reshape(-1, *obs.shape[2:])))
    greedy = np.asarray(jnp.argmax(q_values, axis=-1)).reshape(actions.shape)
    non_greedy = (actions != greedy).mean(axis=1)
    assert 0.12 < non_greedy[0] < 0.28, non_greedy
    assert non_greedy[5:].mean() < 0.02, non_greedy


def test_host_act_explores_each_env_at_its_epsilon():
    """With a fixed Q-network, the host loop's `act` takes a non-greedy action in env i with
    probability eps_i / 2 (two actions); 40000 draws per env pin every rate within 4 sigma,
    where neighbouring envs' rates differ by a factor 2.5."""
    num_envs, draws = 8, 40_000
    agent = dqn.make(envs.make("CartPole-v1"), apex_config(num_envs))
    fns = dqn.host_fns(agent)
    state, _ = fns.init(jax.random.PRNGKey(0))
    actor = fns.actor_params(state)
    obs = jax.random.normal(jax.random.PRNGKey(1), (num_envs, 4))
    keys = jax.random.split(jax.random.PRNGKey(2), draws)
    env_ids = jnp.arange(num_envs)
    actions = jax.jit(jax.vmap(lambda k: fns.act(actor, obs, jax.random.split(k, num_envs),
                                                 jnp.asarray(0), env_ids)[0]))(keys)
    greedy = agent.act(state.params, obs, keys[0], greedy=True)
    rate = np.asarray((actions != greedy[None]).mean(axis=0))
    expected = 0.5 * 0.4 ** (1.0 + np.arange(num_envs))
    tolerance = 4.0 * np.sqrt(expected * (1.0 - expected) / draws) + 1.0 / draws
    assert np.all(np.abs(rate - expected) < tolerance), (rate, expected)


@pytest.mark.parametrize("field, value, message", [
    ("exploration", "boltzmann", "exploration must be one of"),
    ("apex_base", 0.0, r"apex_base must be in \(0, 1\)"),
    ("apex_base", 1.0, r"apex_base must be in \(0, 1\)"),
    ("apex_alpha", -1.0, "apex_alpha must be >= 0"),
])
def test_bad_exploration_settings_are_rejected_in_one_line(field, value, message):
    config = dataclasses.replace(dqn.Config(), **{field: value})
    with pytest.raises(ConfigError, match=message) as info:
        config.validate()
    assert "\n" not in str(info.value)
