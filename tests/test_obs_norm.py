"""Observation normalisation in the agent state: exact pooled statistics (over envs and
devices), what the agents act and learn with, and evaluation using the trained statistics."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn, ppo, sac
from jaxrl_sys.core import obs_norm
from jaxrl_sys.runtime.execution import place, placement_fns

ROOT = Path(__file__).resolve().parent.parent


def test_batches_merge_to_the_statistics_of_everything_seen():
    batches = [np.random.default_rng(i).normal(3.0 * i, 1.0 + i, (5, 7, 3)) for i in range(4)]
    stats = obs_norm.init_stats(True, (3,))
    for batch in batches:
        stats = obs_norm.update(stats, jnp.asarray(batch, jnp.float32), None)
    seen = np.concatenate([b.reshape(-1, 3) for b in batches])
    assert float(stats.count) == len(seen)
    np.testing.assert_allclose(stats.mean, seen.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.var, seen.var(0), rtol=1e-4)


def test_first_observations_are_counted_once():
    """Statistics started from the envs' first observations (so the first rollout is
    normalised), then updated with the rollout, which begins with those observations again,
    are the rollout's statistics: each observation counted once."""
    rollout = np.random.default_rng(5).normal(2.0, 3.0, (6, 4, 3)).astype(np.float32)  # [T, B]
    rollout[0] += 10.0  # first observations far from the rest: counted twice, they pull
    started = obs_norm.update_if_empty(obs_norm.init_stats(True, (3,)), jnp.asarray(rollout[0]),
                                       None)
    first = rollout[0]
    np.testing.assert_allclose(obs_norm.normalize(started, jnp.asarray(first)),
                               (first - first.mean(0)) / first.std(0), rtol=1e-4, atol=1e-4)
    stats = obs_norm.update(started, jnp.asarray(rollout), None)
    seen = rollout.reshape(-1, 3)
    assert float(stats.count) == len(seen)
    np.testing.assert_allclose(stats.mean, seen.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.var, seen.var(0), rtol=1e-4)


def test_update_if_empty_leaves_started_statistics_alone():
    obs = jnp.asarray(np.random.default_rng(6).normal(size=(4, 2)), jnp.float32)
    empty = obs_norm.init_stats(True, (2,))
    for stats in (obs_norm.update(empty, obs, None), obs_norm.update_if_empty(empty, obs, None)):
        again = obs_norm.update_if_empty(stats, obs + 5.0, None)
        for field in ("mean", "var", "count"):
            np.testing.assert_array_equal(getattr(again, field), getattr(stats, field))


def test_statistics_are_pooled_over_the_device_axis():
    """Each device folds in its own envs' observations; all end with the statistics of all."""
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(4, 6, 2)), jnp.float32)  # 4 devices
    per_device = jax.vmap(lambda x: obs_norm.update(obs_norm.init_stats(True, (2,)), x, "device"),
                          axis_name="device")(obs)
    whole = obs_norm.update(obs_norm.init_stats(True, (2,)), obs, None)
    for field in ("mean", "var", "count"):
        leaf = np.asarray(getattr(per_device, field))
        np.testing.assert_allclose(leaf, np.broadcast_to(getattr(whole, field), leaf.shape),
                                   rtol=1e-5, atol=1e-6)


def test_normalize_standardises_and_clips_and_leaves_raw_obs_until_stats_exist():
    obs = jnp.asarray([[1.0, 50.0], [3.0, -50.0]])
    assert obs_norm.normalize(None, obs) is obs
    empty = obs_norm.init_stats(True, (2,))
    np.testing.assert_array_equal(obs_norm.normalize(empty, obs), obs)
    stats = obs_norm.RunningStats(mean=jnp.asarray([2.0, 0.0]), var=jnp.asarray([1.0, 1.0]),
                                  count=jnp.asarray(10.0))
    np.testing.assert_allclose(obs_norm.normalize(stats, obs), [[-1.0, 10.0], [1.0, -10.0]],
                               atol=1e-6)
    assert obs_norm.init_stats(False, (2,)) is None


def _trained_state(module, env_name: str, devices: int, **changes):
    config = dataclasses.replace(module.default_config(env_name), normalize_obs=True, **changes)
    agent = module.make(envs.make(env_name), config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=devices,
                   iters_per_chunk=2)
    carry, _ = runner.run_chunk(runner.init(np.asarray([0])))
    return jax.device_get(carry.agent_state), config


@pytest.mark.parametrize("module, env_name, changes", [
    (ppo, "Pendulum-v1", dict(num_envs=8, rollout_steps=16, num_minibatches=2)),
    (dqn, "CartPole-v1", dict(num_envs=8, rollout_steps=4, learning_starts=0, batch_size=16,
                             buffer_size=512)),
    (sac, "Pendulum-v1", dict(num_envs=8, rollout_steps=4, learning_starts=0, batch_size=16)),
])
@pytest.mark.slow
def test_agents_pool_statistics_over_all_envs_and_devices(module, env_name, changes):
    """On 2 devices the statistics count every observation acted on, of every env on both
    devices, once (the first ones too, which start them): each device's share alone would be
    half."""
    state, config = _trained_state(module, env_name, 2, **changes)
    stats = state.obs_stats
    acted = 2 * config.rollout_steps * config.num_envs  # 2 iterations
    assert float(np.ravel(stats.count)[0]) == acted
    assert np.all(np.asarray(stats.var) > 0) and np.all(np.isfinite(np.asarray(stats.mean)))


def test_greedy_evaluation_uses_the_trained_statistics():
    config = dataclasses.replace(ppo.default_config("Pendulum-v1"), normalize_obs=True)
    agent = ppo.make(envs.make("Pendulum-v1"), config)
    state = agent.init(jax.random.key(0))
    stats = obs_norm.RunningStats(mean=jnp.asarray([0.5, -0.5, 2.0]),
                                  var=jnp.asarray([4.0, 0.25, 9.0]), count=jnp.asarray(100.0))
    state = state.replace(obs_stats=stats)
    obs, key = jnp.asarray([[1.0, 0.0, 3.0], [-1.0, 0.5, -2.0]]), jax.random.key(1)
    expected = agent.act(state.params, obs_norm.normalize(stats, obs), key, greedy=True)[0]
    np.testing.assert_allclose(ppo.greedy_action(agent)(state, obs, key), expected, rtol=1e-6)


@pytest.mark.slow
def test_normalised_run_evaluates_and_resumes_from_the_command_line(tmp_path):
    """Greedy evaluation during training and evaluate.py afterwards (both refused when the
    statistics lived in the training envs); the statistics are in the checkpoint."""
    train = [sys.executable, str(ROOT / "scripts" / "train.py"), "--agent", "ppo", "--env",
             "Pendulum-v1", "--set", "normalize_obs=true", "--set", "num_envs=8", "--set",
             "rollout_steps=16", "--total-steps", "1024", "--chunks", "2", "--eval-episodes",
             "2", "--no-progress", "--run-root", str(tmp_path)]
    done = subprocess.run(train, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = tmp_path.iterdir()
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(np.isfinite(line["eval_return"]) for line in lines if "eval_return" in line)
    evaluate = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"),
                               str(run_dir), "--episodes", "2"], capture_output=True, text=True)
    assert evaluate.returncode == 0, evaluate.stderr[-2000:]
    assert "return" in evaluate.stdout
