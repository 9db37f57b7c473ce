"""Every device draws its own random numbers: search noise and replay sample positions.

Two devices are given identical shards (the same envs, env ids and replay rows) and the same
replicated parameters and key. Whatever still differs between the shards after a few train
steps can only come from randomness that is folded with the device index. MuZero's search
noise follows each env's global id instead (so a run does not depend on the device count):
shards that differ only in their env ids search differently.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn, muzero
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh

DEVICES = 2
LOCAL_ENVS = 4


def run_identical_shards(agent, steps: int, own_ids: tuple[bool, ...] = (False,)):
    """`steps` train steps on 2 devices whose env shards start identical; leaves [2, ...].
    `own_ids`: one run per entry, True where each shard then carries its own global env ids
    (and nothing else differs); the runs share one compiled program."""
    state = agent.init(jax.random.PRNGKey(0))
    ids = jnp.arange(LOCAL_ENVS, dtype=jnp.int32)
    shard = agent.init_envs(jax.random.PRNGKey(1), ids)
    env_state = jax.tree.map(lambda x: jnp.concatenate([x] * DEVICES), shard)

    def body(state, env_state, key):
        def one_step(carry, step_key):
            state, env_state, _ = agent.train_step(*carry, step_key)
            return (state, env_state), None

        (_, env_state), _ = jax.lax.scan(one_step, (state, env_state), jax.random.split(key, steps))
        return env_state

    mapped = jax.jit(jax.shard_map(body, mesh=make_mesh(DEVICES),
                                   in_specs=(P(), P(DEVICE_AXIS), P()),
                                   out_specs=P(DEVICE_AXIS), check_vma=False))
    outs = []
    for own in own_ids:
        start = env_state
        if own:
            start = env_state.replace(envs=env_state.envs.replace(
                env_ids=jnp.arange(DEVICES * LOCAL_ENVS, dtype=jnp.int32)))
        out = jax.device_get(mapped(state, start, jax.random.PRNGKey(2)))
        outs.append(jax.tree.map(lambda x: x.reshape(DEVICES, LOCAL_ENVS, *x.shape[1:]), out))
    return outs if len(own_ids) > 1 else outs[0]


def muzero_agent(temperature: float):
    config = dataclasses.replace(
        muzero.default_config("CartPole-v1"), num_envs=DEVICES * LOCAL_ENVS, batch_size=8,
        num_simulations=4, learning_starts=6 * DEVICES * LOCAL_ENVS, buffer_size=512,
        temperatures=(temperature,), temperature_milestones=(),
        priority_alpha=0.5,  # sampled positions show in the sum-trees (uniform at alpha 0)
    )
    return muzero.make(envs.make("CartPole-v1"), config)


@pytest.fixture(scope="module")
def muzero_runs():
    """MuZero with search noise (temperature 1) on identical shards: with the same env ids,
    then with each shard's own ids (one compiled program for both)."""
    same_ids, own_ids = run_identical_shards(muzero_agent(temperature=1.0), steps=8,
                                             own_ids=(False, True))
    return same_ids, own_ids


@pytest.mark.slow
def test_muzero_search_noise_follows_the_env_id_not_the_device(muzero_runs):
    same_ids, own_ids = (run.replay.replay.data["action"][:, :, :8] for run in muzero_runs)
    np.testing.assert_array_equal(same_ids[0], same_ids[1])
    assert not np.array_equal(own_ids[0], own_ids[1])


def test_muzero_replay_samples_differ_between_devices(muzero_runs):
    # the same env ids: both shards search alike (the noise follows the env id, not the
    # device) and hold the same data; only sampling differs
    out = muzero_runs[0].replay
    np.testing.assert_array_equal(out.replay.data["action"][0], out.replay.data["action"][1])
    assert not np.array_equal(out.tree[0], out.tree[1])


@pytest.mark.slow
def test_dqn_replay_samples_differ_between_devices():
    config = dataclasses.replace(
        dqn.Config(), num_envs=DEVICES * LOCAL_ENVS, batch_size=8, buffer_size=512,
        learning_starts=6 * DEVICES * LOCAL_ENVS, prioritized=True, n_step=3,
    )
    out = run_identical_shards(dqn.make(envs.make("CartPole-v1"), config), steps=8).replay
    np.testing.assert_array_equal(out.replay.data["action"][0], out.replay.data["action"][1])
    assert not np.array_equal(out.tree[0], out.tree[1])
