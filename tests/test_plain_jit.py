"""An agent's functions in a user's own JAX code: plain `jit` and `vmap`, no device axis
(the collectives over the execution layer's axis become no-ops), as README shows."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import agents
from jaxrl_sys import envs
from jaxrl_sys.runtime.execution import place, placement_fns

CASES = [
    ("ppo", "CartPole-v1", dict(num_envs=4, rollout_steps=8, num_minibatches=2)),
    ("dqn", "CartPole-v1", dict(num_envs=4, batch_size=8, learning_starts=0)),
    ("sac", "Pendulum-v1", dict(num_envs=4, batch_size=8, learning_starts=0)),
    ("muzero", "CartPole-v1", dict(num_envs=4, batch_size=8, num_simulations=4,
                                   learning_starts=0)),
]


def _agent(agent_name, env_name, overrides):
    module = agents.load(agent_name)
    config = dataclasses.replace(module.default_config(env_name), **overrides)
    agent = module.make(envs.make(env_name), config)  # the default device axis name
    return config, placement_fns(agent)


@pytest.mark.parametrize("agent_name, env_name, overrides", CASES)
@pytest.mark.slow
def test_train_step_runs_under_plain_jit(agent_name, env_name, overrides):
    config, (init_fn, step_fn) = _agent(agent_name, env_name, overrides)
    key = jax.random.PRNGKey(0)
    state, env_state = jax.jit(init_fn)(key, jnp.arange(config.num_envs))
    train_step = jax.jit(step_fn)
    for i in range(2):
        state, env_state, metrics = train_step(state, env_state, jax.random.fold_in(key, i))
    assert metrics and all(not np.isinf(np.asarray(v)).any() for v in jax.tree.leaves(metrics))
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state)
               if jnp.issubdtype(x.dtype, jnp.floating))


@pytest.mark.slow
def test_plain_vmap_over_seeds_computes_what_one_placed_device_does():
    """A user's sweep (vmap over seeds) and the execution layer on one device agree."""
    config, (init_fn, step_fn) = _agent(*CASES[0])
    seeds = np.asarray([0, 1])
    runner = place(init_fn, step_fn, num_envs=config.num_envs, num_devices=1,
                   iters_per_chunk=1)
    placed, _ = runner.run_chunk(runner.init(seeds))

    def one_seed(seed):  # what `place` does per seed, written as a user would
        init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
        state, env_state = init_fn(init_key, jnp.arange(config.num_envs))
        state, _, _ = step_fn(state, env_state, jax.random.split(run_key)[1])
        return state

    plain = jax.jit(jax.vmap(one_seed))(jnp.asarray(seeds))
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(placed.agent_state)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
