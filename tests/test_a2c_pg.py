"""A2C and REINFORCE with a baseline (the `a2c` and `pg` agents, PPO's contract with the
unclipped objective): whole-episode returns by hand, the policy gradient's surrogate against
the clipped one at ratio 1, steps of weight 0 that change nothing, A2C's step as PPO's first,
REINFORCE on 8 devices as on one, and refusals of settings that cannot work. Their learning
tests are tests/test_learning.py's (their promises)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import agents, envs
from jaxrl_sys.agents import ppo
from jaxrl_sys.agents.families.policy_gradient_losses import (
    actor_critic_loss, clipped_policy_loss, normalized_advantages, policy_gradient_loss,
    weighted_normalized_advantages,
)
from jaxrl_sys.agents.ppo.networks import evaluate_actions
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.returns import episode_returns
from jaxrl_sys.runtime.execution import place, placement_fns


def test_episode_returns_by_hand():
    """One env, 6 steps: an episode that ends by termination at step 1, one truncated at
    step 3, and one still running at the rollout's end (its steps incomplete)."""
    rewards = jnp.array([[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]])
    terminated = jnp.array([[False], [True], [False], [False], [False], [False]])
    truncated = jnp.array([[False], [False], [False], [True], [False], [False]])
    returns, complete = episode_returns(rewards, terminated, truncated, gamma=0.5)
    np.testing.assert_allclose(returns[:4, 0], [1 + 0.5 * 2, 2, 3 + 0.5 * 4, 4])
    np.testing.assert_allclose(returns[4:, 0], [5 + 0.5 * 6, 6])  # partial: never used
    assert complete[:, 0].tolist() == [True, True, True, True, False, False]


def test_policy_gradient_surrogate_has_the_clipped_surrogates_gradient_at_ratio_one():
    """On the data's own policy every ratio is 1, where the clip is inactive: A2C's step is
    the first step of a PPO epoch."""
    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    log_probs = jnp.log(jax.random.uniform(key_a, (32,), minval=0.1, maxval=0.9))
    advantages = jax.random.normal(key_b, (32,))
    vanilla = jax.grad(lambda lp: policy_gradient_loss(lp, advantages))(log_probs)
    clipped = jax.grad(lambda lp: clipped_policy_loss(
        jnp.exp(lp - jax.lax.stop_gradient(lp)), advantages, 0.2))(log_probs)
    np.testing.assert_allclose(vanilla, clipped, rtol=1e-6)
    np.testing.assert_allclose(vanilla, -advantages / 32, rtol=1e-6)


def test_steps_of_weight_zero_change_nothing():
    keys = jax.random.split(jax.random.PRNGKey(1), 5)
    log_probs, entropy, values, advantages, returns = (
        jax.random.normal(k, (16,)) for k in keys)
    weights = (jnp.arange(16) % 3 != 0).astype(jnp.float32)
    noise = jnp.where(weights == 0, 100.0, 0.0)

    def loss(lp, v, adv):
        return actor_critic_loss(lp, entropy + noise, v, adv, returns + noise, weights,
                                 vf_coef=0.5, ent_coef=0.01, normalize_advantages=True,
                                 axis_name=None)[0]

    base = jax.grad(loss, argnums=(0, 1))(log_probs, values, advantages)
    moved = jax.grad(loss, argnums=(0, 1))(log_probs + noise, values + noise, advantages + noise)
    for a, b in zip(base, moved):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        assert np.all(np.asarray(a)[weights == 0] == 0)
    kept = weights == 1
    np.testing.assert_allclose(
        weighted_normalized_advantages(advantages, weights, None)[kept],
        normalized_advantages(advantages[kept], None), rtol=1e-5, atol=1e-6)


def small_config(name: str, **overrides) -> ppo.Config:
    config = agents.load(name).default_config("CartPole-v1")
    return dataclasses.replace(config, num_envs=16, rollout_steps=64,
                               total_steps=16 * 64 * 8, **overrides)


def random_trajectory(key: jax.Array, steps: int = 64, num_envs: int = 16) -> ppo.Trajectory:
    """A CartPole-shaped rollout [T, B, ...] with episode ends of both kinds."""
    ks = jax.random.split(key, 8)
    return ppo.Trajectory(
        obs=jax.random.normal(ks[0], (steps, num_envs, 4)),
        actions=jax.random.randint(ks[1], (steps, num_envs), 0, 2),
        log_probs=jnp.full((steps, num_envs), jnp.log(0.5)),
        values=jax.random.normal(ks[3], (steps, num_envs)),
        next_values=jax.random.normal(ks[4], (steps, num_envs)),
        rewards=jax.random.uniform(ks[5], (steps, num_envs)),
        terminated=jax.random.uniform(ks[6], (steps, num_envs)) < 0.1,
        truncated=jax.random.uniform(ks[7], (steps, num_envs)) < 0.05,
        env_ids=jnp.arange(num_envs),
    )


def test_a2c_update_is_ppos_first_step_on_its_own_data():
    """With the acting log-probabilities the learner's own, A2C's unclipped update and PPO's
    clipped one (one epoch, one minibatch, the same optimiser) move the parameters alike."""
    env = envs.make("CartPole-v1")
    a2c_config = small_config("a2c", optimizer="adam")
    a2c = ppo.make(env, a2c_config, axis_name=None)
    clip = ppo.make(env, dataclasses.replace(a2c_config, objective="clip"), axis_name=None)
    state = a2c.init(jax.random.PRNGKey(2))
    traj = random_trajectory(jax.random.PRNGKey(3))
    own, _, _ = evaluate_actions(a2c.network, state.params, traj.obs.reshape(-1, 4),
                                 traj.actions.reshape(-1))
    traj = traj._replace(log_probs=own.reshape(traj.actions.shape))
    after_a2c, _ = jax.jit(a2c.update)(state, traj, jax.random.PRNGKey(4))
    after_clip, _ = jax.jit(clip.update)(state, traj, jax.random.PRNGKey(4))
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
                 after_a2c.params, after_clip.params)
    moved = jax.tree.map(lambda x, y: float(jnp.abs(x - y).max()), state.params,
                         after_a2c.params)
    assert max(jax.tree.leaves(moved)) > 1e-4


def test_pg_weights_leave_out_the_steps_whose_episode_runs_past_the_rollout():
    traj = random_trajectory(jax.random.PRNGKey(5))
    advantages, returns, weights = ppo.agent.whole_episode_targets(traj, 0.99)
    done = np.asarray(traj.terminated | traj.truncated)
    for env in range(done.shape[1]):
        last_end = np.max(np.nonzero(done[:, env])[0], initial=-1)
        assert np.all(weights[:last_end + 1, env] == 1) and np.all(weights[last_end + 1:, env] == 0)
    np.testing.assert_array_equal(np.asarray(returns)[np.asarray(weights) == 0],
                                  np.asarray(traj.values)[np.asarray(weights) == 0])
    np.testing.assert_allclose(advantages, returns - traj.values)


def run_pg(num_devices: int, iters: int = 2):
    config = small_config("pg")
    agent = ppo.make(envs.make("CartPole-v1"), config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=num_devices,
                   iters_per_chunk=iters)
    carry, metrics = runner.run_chunk(runner.init(np.asarray([3])))
    return jax.device_get(carry.agent_state.params), jax.device_get(metrics)


@pytest.mark.slow
def test_pg_on_eight_devices_equals_one_device():
    """REINFORCE's weighted advantage statistics pool over devices: 8 devices, 2 envs each,
    take the steps 1 device does."""
    params_1, metrics_1 = run_pg(1)
    params_8, metrics_8 = run_pg(8)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
                 params_8, params_1)
    np.testing.assert_allclose(metrics_8["loss"], metrics_1["loss"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("overrides, message", [
    (dict(targets="episode", vtrace=True), "targets=episode"),
    (dict(targets="episode", memory="gru"), "targets=episode"),
    (dict(objective="trust"), "objective must be one of"),
    (dict(optimizer="sgd"), "optimizer must be one of"),
])
def test_settings_that_cannot_work_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(small_config("pg"), **overrides).validate()


def test_a2c_and_pg_are_ppo_with_their_own_defaults():
    a2c, pg = agents.load("a2c"), agents.load("pg")
    assert a2c.make is ppo.make and pg.make is ppo.make
    assert (a2c.default_config("CartPole-v1").objective,
            a2c.default_config("CartPole-v1").optimizer) == ("vanilla", "rmsprop")
    assert pg.default_config("CartPole-v1").targets == "episode"
    assert ppo.default_config("CartPole-v1").objective == "clip"
