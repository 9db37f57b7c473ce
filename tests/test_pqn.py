"""PQN: its Q(lambda) targets by hand, its refusals, and N devices giving one device's run
(its learning promise is tests/test_learning.py's)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import pqn
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import place, placement_fns


def _targets(rewards, next_q, terminated, truncated, gamma=0.9, lam=0.5):
    as_column = lambda x, dtype=jnp.float32: jnp.asarray(x, dtype)[:, None]  # noqa: E731
    return np.asarray(pqn.q_lambda_targets(
        as_column(rewards), as_column(next_q), as_column(terminated, bool),
        as_column(truncated, bool), gamma, lam))[:, 0]


def test_lambda_zero_is_one_step_q_learning():
    got = _targets([1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [0, 1, 0], [0, 0, 0], lam=0.0)
    np.testing.assert_allclose(got, [1 + 0.9 * 10, 2.0, 3 + 0.9 * 30], rtol=1e-6)


def test_targets_by_hand_through_a_truncation_and_a_termination():
    # steps: 0 goes on, 1 truncated (bootstraps from its own reached state), 2 goes on,
    # 3 terminated (no bootstrap), 4 the rollout's last (bootstraps from its reached state)
    rewards = [1.0, 1.0, 1.0, 1.0, 1.0]
    next_q = [4.0, 6.0, 8.0, 5.0, 2.0]
    terminated, truncated = [0, 0, 0, 1, 0], [0, 1, 0, 0, 0]
    g4 = 1 + 0.9 * 2.0
    g3 = 1.0
    g2 = 1 + 0.9 * (0.5 * 8.0 + 0.5 * g3)
    g1 = 1 + 0.9 * 6.0
    g0 = 1 + 0.9 * (0.5 * 4.0 + 0.5 * g1)
    np.testing.assert_allclose(_targets(rewards, next_q, terminated, truncated),
                               [g0, g1, g2, g3, g4], rtol=1e-6)


def test_lambda_one_without_ends_is_the_discounted_return_to_the_last_bootstrap():
    rewards, next_q = [1.0, 2.0, 3.0], [100.0, 100.0, 7.0]
    expected = 1 + 0.9 * (2 + 0.9 * (3 + 0.9 * 7.0))
    assert _targets(rewards, next_q, [0, 0, 0], [0, 0, 0], lam=1.0)[0] == pytest.approx(expected)


@pytest.mark.parametrize("env_name, overrides, says", [
    ("Pendulum-v1", {}, "pqn needs discrete actions"),
    ("CartPole-v1", {"torso": "nature_cnn"}, "torso must be one of"),
    ("CartPole-v1", {"rollout_steps": 30, "num_minibatches": 4}, "must be divisible"),
])
def test_refuses_what_it_cannot_train_in_one_line(env_name, overrides, says):
    config = dataclasses.replace(pqn.default_config(env_name), **overrides)
    with pytest.raises(ConfigError, match=says):
        pqn.make(envs.make(env_name), config)


def _run(num_devices: int):
    config = dataclasses.replace(pqn.default_config("CartPole-v1"), num_envs=16,
                                 rollout_steps=8, num_minibatches=2, update_epochs=2,
                                 total_steps=16 * 8 * 4)
    agent = pqn.make(envs.make("CartPole-v1"), config)
    runner = place(*placement_fns(agent), num_envs=16, num_devices=num_devices,
                   iters_per_chunk=4)
    carry, metrics = runner.run_chunk(runner.init(np.asarray([3])))
    return jax.device_get(carry.agent_state.params), jax.device_get(metrics)


@pytest.mark.slow
def test_four_devices_equal_one_device():
    params_1, metrics_1 = _run(1)
    params_4, metrics_4 = _run(4)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 params_4, params_1)
    np.testing.assert_array_equal(metrics_4["episode_count"], metrics_1["episode_count"])
    assert float(np.abs(metrics_1["loss"]).sum()) > 0.0
