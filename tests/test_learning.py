"""Learning tests: each agent reaches a return threshold on its default env from scratch."""

import dataclasses

import numpy as np
import pytest

import envs
from agents import ppo
from jaxrl_sys.driver import train
from jaxrl_sys.execution import place


def train_ppo(env_name: str, seeds, num_devices: int = 1, chunks: int = 10, **overrides):
    config = dataclasses.replace(ppo.default_config(env_name), **overrides)
    env = envs.make(env_name, normalize_obs=config.normalize_obs)
    agent = ppo.make(env, config)
    iters = -(-config.num_iterations // chunks)
    runner = place(
        *ppo.placement_fns(agent), num_envs=config.num_envs, num_devices=num_devices,
        iters_per_chunk=iters,
    )
    return train(runner, np.asarray(seeds), -(-config.num_iterations // iters))


@pytest.mark.slow
def test_ppo_solves_cartpole_over_four_seeds():
    result = train_ppo("CartPole-v1", seeds=[0, 1, 2, 3])
    final = result.history[-1].returns
    assert np.all(np.isfinite(final))
    assert final.mean() >= 475, final


@pytest.mark.slow
def test_continuous_ppo_learns_pendulum():
    result = train_ppo("Pendulum-v1", seeds=[0, 1, 2, 3])
    final = result.history[-1].returns
    assert final.mean() >= -400, final
