"""PPO's rollout loop carries no work it can leave to after the loop: the reached states
valued after the rollout equal valuing each in its step (to float32 rounding: one batched
matrix product may round differently from many small ones, as it does on AVX-512 Xeons),
unrolling changes nothing, episode metrics tallied per env equal the per-step sums, and the
log-probability as a masked sum equals the gather (issue 51)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import ppo
from jaxrl_sys.agents.ppo.agent import collect
from jaxrl_sys.agents.ppo.networks import env_actions, sequence_values, step_policy
from jaxrl_sys.core import distributions as dist
from jaxrl_sys.core import obs_norm
from jaxrl_sys.core.returns import gae
from jaxrl_sys.core.rollout import episode_metrics, per_env_keys, step_envs


def _rollout(env_name: str, unroll: int = 1, steps: int = 64, num_envs: int = 8):
    """(agent, params, env state before, trajectory, env state after, metrics) of one
    collect: short episodes (Acrobot truncates at 500, CartPole ends often) end inside it."""
    env = envs.make(env_name)
    config = dataclasses.replace(ppo.default_config(env_name), num_envs=num_envs,
                                 rollout_steps=steps, rollout_unroll=unroll)
    agent = ppo.make(env, config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    start = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(num_envs))
    run = jax.jit(lambda params, vstate, key: collect(env, agent.network, config, None, params,
                                                      state.obs_stats, vstate, key))
    after, traj, metrics = run(state.params, start, jax.random.PRNGKey(2))
    return env, agent, state, start, traj, after, metrics


def _per_step_reference(env, agent, state, start, steps: int):
    """The reached states' values and episode metrics as the loop took them before: the
    critic on each step's `final_observation` inside the step, metrics summed per step (the
    loop body PPO had, written out)."""
    network, config, key = agent.network, agent.config, jax.random.PRNGKey(2)

    def one_step(params, vstate, t):
        act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
        memory, action, log_prob, value = step_policy(
            network, params, vstate.memory, obs_norm.normalize(state.obs_stats, vstate.obs),
            vstate.starts, per_env_keys(act_key, vstate.env_ids))
        next_vstate, result = step_envs(env, vstate, env_actions(env.spec, action), env_key)
        next_value = sequence_values(
            network, params, memory,
            obs_norm.normalize(state.obs_stats, result.info["final_observation"]))
        record = (vstate.obs, action, log_prob, value, next_value,
                  result.reward * config.reward_scale, result.terminated, result.truncated)
        return next_vstate, ((record, vstate.starts), episode_metrics(result.info, None))

    # the parameters an argument, as in training (closed over, XLA would fold them in)
    _, ((records, _), metrics) = jax.jit(lambda params, v: jax.lax.scan(
        functools.partial(one_step, params), v, jnp.arange(steps)))(state.params, start)
    return records[4], jax.tree.map(jnp.sum, metrics)


@pytest.mark.slow
def test_reached_values_after_the_loop_equal_valuing_each_step():
    """To float32 rounding, which holds whatever code XLA generates: the tests' own flags."""
    env, agent, state, start, traj, _, metrics = _rollout("CartPole-v1")
    assert bool(traj.terminated.any()), "the test needs episode ends inside the rollout"
    values, reference_metrics = _per_step_reference(env, agent, state, start, 64)
    np.testing.assert_allclose(np.asarray(traj.next_values), np.asarray(values),
                               rtol=4e-6, atol=4e-7)
    for name, total in reference_metrics.items():
        assert float(metrics[name]) == float(total), name


@pytest.mark.user_codegen
@pytest.mark.slow
def test_unrolled_rollout_gives_the_same_bits():
    _, _, _, _, traj, after, metrics = _rollout("Acrobot-v1", unroll=1, steps=40)
    for unroll in (8,):
        _, _, _, _, traj_u, after_u, metrics_u = _rollout("Acrobot-v1", unroll=unroll, steps=40)
        for a, b in zip(jax.tree.leaves((traj, after, metrics)),
                        jax.tree.leaves((traj_u, after_u, metrics_u))):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.user_codegen
def test_gae_unrolled_equals_a_plain_loop():
    rewards, values, next_values = jax.random.normal(jax.random.PRNGKey(3), (3, 37, 5))
    terminated = jax.random.bernoulli(jax.random.PRNGKey(4), 0.1, (37, 5))
    truncated = jax.random.bernoulli(jax.random.PRNGKey(5), 0.05, (37, 5))
    args = (rewards, values, next_values, terminated, truncated)

    def plain(rewards, values, next_values, terminated, truncated):
        """GAE as one loop iteration per step, no unroll."""
        not_terminated = 1.0 - terminated.astype(jnp.float32)
        not_done = 1.0 - (terminated | truncated).astype(jnp.float32)
        deltas = rewards + 0.99 * not_terminated * next_values - values

        def backward(carry, x):
            delta, continues = x
            advantage = delta + 0.99 * 0.95 * continues * carry
            return advantage, advantage

        _, advantages = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, not_done),
                                     reverse=True)
        return advantages, advantages + values

    got = jax.jit(lambda *a: gae(*a, 0.99, 0.95))(*args)
    for a, b in zip(got, jax.jit(plain)(*args)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_categorical_log_prob_equals_the_gather_with_masked_actions():
    logits = jax.random.normal(jax.random.PRNGKey(6), (64, 7))
    logits = logits.at[:, 3].set(-jnp.inf)  # an illegal action
    actions = jax.random.randint(jax.random.PRNGKey(7), (64,), 0, 7)
    actions = jnp.where(actions == 3, 2, actions)
    gathered = jnp.take_along_axis(jax.nn.log_softmax(logits), actions[:, None], axis=-1)[:, 0]
    np.testing.assert_array_equal(np.asarray(dist.categorical_log_prob(logits, actions)),
                                  np.asarray(gathered))
    grad = jax.grad(lambda x: dist.categorical_log_prob(x, actions).sum())(logits)
    grad_gather = jax.grad(lambda x: jnp.take_along_axis(
        jax.nn.log_softmax(x), actions[:, None], axis=-1).sum())(logits)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(grad_gather))


def test_rollout_unroll_is_the_backends_unless_given():
    """0 (the default) unrolls by the backend: 1 on CPU, where unrolling made the rollout
    slower, 32 on an accelerator (results/gpu.md); a given value is kept, at most the
    rollout's length."""
    from jaxrl_sys.agents.families import policy_gradient as pg

    config = ppo.default_config("CartPole-v1")
    assert config.rollout_unroll == 0 and pg.rollout_unroll_for(config) == 1
    assert pg.rollout_unroll_for(dataclasses.replace(config, rollout_unroll=8)) == 8
    assert pg.rollout_unroll_for(dataclasses.replace(config, rollout_unroll=999)) == \
        config.rollout_steps
