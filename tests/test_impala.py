"""IMPALA (jaxrl_sys/agents/impala): N-device updates equal 1-device ones, on-policy
collection gives rho = 1, bad configs are one-line errors, and the shipped defaults are valid.
Its learning test is tests/test_learning.py's case `impala:CartPole-v1` (its PROMISES)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import impala
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh

STEPS, ENVS = 12, 16


def random_trajectory(key: jax.Array) -> impala.Trajectory:
    """A CartPole-shaped trajectory [T, B, ...] whose behaviour log-probabilities are not the
    learner's (rho != 1), with episode ends of both kinds."""
    ks = jax.random.split(key, 7)
    return impala.Trajectory(
        obs=jax.random.normal(ks[0], (STEPS, ENVS, 4)),
        actions=jax.random.randint(ks[1], (STEPS, ENVS), 0, 2),
        log_probs=jnp.log(jax.random.uniform(ks[2], (STEPS, ENVS), minval=0.2, maxval=0.8)),
        rewards=jax.random.uniform(ks[3], (STEPS, ENVS)),
        terminated=jax.random.uniform(ks[4], (STEPS, ENVS)) < 0.1,
        truncated=jax.random.uniform(ks[5], (STEPS, ENVS)) < 0.05,
        next_obs=jax.random.normal(ks[6], (STEPS, ENVS, 4)),
    )


@pytest.mark.slow
def test_one_update_on_eight_devices_equals_one_device_with_the_same_global_batch():
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(impala.default_config("CartPole-v1"), num_envs=ENVS,
                                 rollout_steps=STEPS, num_minibatches=2, update_epochs=2)
    traj = random_trajectory(jax.random.PRNGKey(0))

    def run(num_devices: int):
        agent = impala.make(env, config)
        state = agent.init(jax.random.PRNGKey(1))
        mapped = jax.shard_map(
            agent.update, mesh=make_mesh(num_devices),
            in_specs=(P(), P(None, DEVICE_AXIS), P()), out_specs=P(), check_vma=False,
        )
        return jax.device_get(jax.jit(mapped)(state, traj, jax.random.PRNGKey(2))), state

    (state_1, metrics_1), initial = run(1)
    (state_8, metrics_8), _ = run(8)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                 state_8.params, state_1.params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 metrics_8, metrics_1)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), state_1.params, initial.params)
    assert min(jax.tree.leaves(moved)) > 1e-4  # four gradient steps moved every parameter
    assert abs(float(metrics_1["mean_rho"]) - 1.0) > 0.05  # the data was off-policy
    assert int(state_1.iteration) == 1


def test_a_split_that_breaks_the_minibatches_is_refused_in_one_line():
    config = dataclasses.replace(impala.default_config("CartPole-v1"), num_envs=ENVS,
                                 rollout_steps=STEPS, num_minibatches=4)
    agent = impala.make(envs.make("CartPole-v1"), config)
    mapped = jax.shard_map(agent.update, mesh=make_mesh(8),
                           in_specs=(P(), P(None, DEVICE_AXIS), P()), out_specs=P(),
                           check_vma=False)
    with pytest.raises(ConfigError) as error:
        jax.jit(mapped)(agent.init(jax.random.PRNGKey(0)),
                        random_trajectory(jax.random.PRNGKey(1)), jax.random.PRNGKey(2))
    assert error.value.args[0] == "2 envs per device do not divide into num_minibatches=4"


@pytest.mark.slow
def test_the_first_pass_over_a_fresh_rollout_is_on_policy():
    """The stored behaviour log-probabilities are the learner's own: rho = 1 on one pass in one
    minibatch; a second minibatch learns from parameters one step newer (rho != 1)."""
    env = envs.make("CartPole-v1")

    def mean_rho(**overrides) -> float:
        config = dataclasses.replace(impala.default_config("CartPole-v1"), num_envs=8,
                                     rollout_steps=16, **overrides)
        agent = impala.make(env, config, axis_name=None)
        state = agent.init(jax.random.PRNGKey(0))
        env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(8))
        _, _, metrics = jax.jit(agent.train_step)(state, env_state, jax.random.PRNGKey(2))
        return float(metrics["mean_rho"])

    assert abs(mean_rho(num_minibatches=1) - 1.0) < 1e-5
    assert abs(mean_rho(num_minibatches=2, learning_rate=0.05) - 1.0) > 1e-3


def test_invalid_configs_are_one_line_errors():
    config = impala.default_config("CartPole-v1")
    for change, message in [
        (dict(num_envs=30), "num_envs=30 must be divisible by num_minibatches=4"),
        (dict(rho_bar=0.0), "rho_bar must be > 0"),
        (dict(vtrace_lambda=1.5), r"vtrace_lambda must be in \[0, 1\]"),
        (dict(gamma=-0.1), "gamma must be in"),
        (dict(update_epochs=0), "update_epochs must be >= 1"),
        (dict(ent_coef=-0.01), "ent_coef must be >= 0"),
        (dict(torso="resnet"), "torso must be one of"),
        (dict(hidden=()), "hidden must be positive layer widths"),
    ]:
        with pytest.raises(ConfigError, match=message) as error:
            dataclasses.replace(config, **change).validate()
        assert "\n" not in error.value.args[0]


def test_every_tuned_entry_is_a_valid_config_and_every_promise_is_tuned():
    for entry in impala.TUNED:
        config = impala.default_config(entry.env)
        config.validate()
        assert all(getattr(config, key) == value for key, value in entry.overrides.items())
        assert entry.reached, entry.env
    tuned = {entry.env for entry in impala.TUNED}
    assert all(promise.env in tuned for promise in impala.PROMISES)
    assert [(p.env, p.threshold) for p in impala.PROMISES] == [("CartPole-v1", 475.0)]
