"""Every device draws its own random numbers: search noise and replay sample positions.

Two devices are given identical shards (the same envs, env ids and replay rows) and the same
replicated parameters and key. Whatever still differs between the shards after a few train
steps can only come from randomness that is folded with the device index.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn, muzero
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh

DEVICES = 2
LOCAL_ENVS = 4


def run_identical_shards(agent, steps: int):
    """`steps` train steps on 2 devices whose env shards start identical; leaves [2, ...]."""
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

    mapped = jax.shard_map(body, mesh=make_mesh(DEVICES), in_specs=(P(), P(DEVICE_AXIS), P()),
                           out_specs=P(DEVICE_AXIS), check_vma=False)
    out = jax.device_get(jax.jit(mapped)(state, env_state, jax.random.PRNGKey(2)))
    return jax.tree.map(lambda x: x.reshape(DEVICES, LOCAL_ENVS, *x.shape[1:]), out)


def muzero_agent(temperature: float):
    config = dataclasses.replace(
        muzero.default_config("CartPole-v1"), num_envs=DEVICES * LOCAL_ENVS, batch_size=8,
        num_simulations=4, learning_starts=6 * DEVICES * LOCAL_ENVS, buffer_size=512,
        temperatures=(temperature,), temperature_milestones=(),
        priority_alpha=0.5,  # sampled positions show in the sum-trees (uniform at alpha 0)
    )
    return muzero.make(envs.make("CartPole-v1"), config)


def test_muzero_search_noise_differs_between_devices():
    stored = run_identical_shards(muzero_agent(temperature=1.0), steps=8).replay.replay.data
    actions = stored["action"][:, :, :8]
    assert not np.array_equal(actions[0], actions[1])


def test_muzero_replay_samples_differ_between_devices():
    # no search noise: both shards act alike and hold the same data; only sampling differs
    out = run_identical_shards(muzero_agent(temperature=0.0), steps=8).replay
    np.testing.assert_array_equal(out.replay.data["action"][0], out.replay.data["action"][1])
    assert not np.array_equal(out.tree[0], out.tree[1])


def test_dqn_replay_samples_differ_between_devices():
    config = dataclasses.replace(
        dqn.Config(), num_envs=DEVICES * LOCAL_ENVS, batch_size=8, buffer_size=512,
        learning_starts=6 * DEVICES * LOCAL_ENVS, prioritized=True, n_step=3,
    )
    out = run_identical_shards(dqn.make(envs.make("CartPole-v1"), config), steps=8).replay
    np.testing.assert_array_equal(out.replay.data["action"][0], out.replay.data["action"][1])
    assert not np.array_equal(out.tree[0], out.tree[1])
