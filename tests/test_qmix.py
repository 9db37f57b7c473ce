"""QMIX and VDN: the mixer is monotonic and VDN's mix is the sum, acting never picks an
unavailable action, the double-Q team target on hand-made numbers and the loss against a NumPy
computation, items replayed from their stored state reproduce acting, 8 devices equal one, a
vmapped seed equals its single run. Their learning on MPE: the promises' tests
(tests/test_learning.py)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import qmix
from jaxrl_sys.agents.qmix import vdn
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh, place, placement_fns

MPE = "jaxmarl:MPE_simple_spread_v3"
SMALL = dict(num_envs=16, rollout_steps=8, seq_length=4, batch_size=16, buffer_size=128,
             updates_per_iteration=1,
             learning_starts=128, hidden=(16,), memory_size=8, mixer_embedding=8,
             mixer_hypernet_hidden=16, target_update_period=2, total_steps=16 * 8 * 8)


def small_agent(module=qmix, axis_name=None, **overrides):
    """A small QMIX (or VDN) on MPE simple_spread and its env."""
    env = envs.make(MPE)
    config = dataclasses.replace(module.default_config(MPE), **{**SMALL, **overrides})
    return env, module.make(env, config, axis_name=axis_name)


@pytest.mark.parametrize("env_name", ["jaxmarl:MPE_simple_spread_v3", "jaxmarl:SMAX:3m"])
def test_vdn_ships_qmix_defaults_with_the_sum_for_a_mixer(env_name):
    ours, base = vdn.default_config(env_name), qmix.default_config(env_name)
    assert (ours.mixer, base.mixer) == ("vdn", "qmix")
    assert dataclasses.replace(ours, mixer="qmix") == base


@pytest.mark.slow
def test_the_mixer_is_monotonic_in_every_agent_q_and_vdn_mixes_by_summing():
    mixer = qmix.MonotonicMixer(embedding=8, hypernet_hidden=16, init_scale=1.0)
    qs = jax.random.normal(jax.random.PRNGKey(0), (64, 3)) * 5.0
    states = jax.random.normal(jax.random.PRNGKey(1), (64, 10)) * 3.0
    params = mixer.init(jax.random.PRNGKey(2), qs, states)
    # any parameters, not only fresh ones: the weights' signs come from abs()
    params = jax.tree.map(lambda p: p + jax.random.normal(jax.random.PRNGKey(3), p.shape),
                          params)
    grads = jax.vmap(jax.grad(lambda q, s: qmix.mix(mixer, params, q, s)))(qs, states)
    assert np.all(np.asarray(grads) >= 0.0) and np.asarray(grads).max() > 0.0
    q_tot = qmix.mix(mixer, params, qs, states)
    assert q_tot.shape == (64,) and np.unique(np.asarray(q_tot)).size > 1  # it reads the state
    np.testing.assert_allclose(qmix.mix(None, None, qs, None), np.asarray(qs).sum(axis=-1),
                               rtol=1e-6)


def random_masks(key, shape):
    """Random legal masks [..., A] with at least one legal action in every row."""
    masks = jax.random.bernoulli(key, 0.4, shape)
    first = jax.nn.one_hot(jax.random.randint(jax.random.fold_in(key, 1), shape[:-1], 0,
                                              shape[-1]), shape[-1], dtype=jnp.bool_)
    return masks | first


def test_acting_never_picks_an_unavailable_action():
    shape = (256, 3, 6)
    legal = random_masks(jax.random.PRNGKey(0), shape)
    # the illegal actions hold the highest Q-values
    q = jax.random.normal(jax.random.PRNGKey(1), shape) + jnp.where(legal, 0.0, 10.0)
    greedy = qmix.masked_argmax(q, legal)
    best = np.where(np.asarray(legal), np.asarray(q), -np.inf).argmax(-1)
    np.testing.assert_array_equal(greedy, best)
    keys = jax.random.split(jax.random.PRNGKey(2), shape[0])
    explored = qmix.epsilon_greedy(q, legal, keys, 1.0)
    picked = np.take_along_axis(np.asarray(legal), np.asarray(explored)[..., None], -1)
    assert picked.all()
    # exploration is uniform over the legal actions: every legal action of a row with all
    # actions legal turns up
    all_legal = jnp.ones((2000, 1, 6), jnp.bool_)
    draws = qmix.epsilon_greedy(jnp.zeros((2000, 1, 6)), all_legal,
                                jax.random.split(jax.random.PRNGKey(3), 2000), 1.0)
    counts = np.bincount(np.asarray(draws).ravel(), minlength=6)
    assert counts.min() > 250
    np.testing.assert_array_equal(qmix.epsilon_greedy(q, legal, keys, 0.0), greedy)


def test_the_double_q_target_on_hand_made_numbers():
    # two agents, three actions, steps [T=3, B=1]
    q_online_next = jnp.array([[[1.0, 5.0, 2.0], [0.0, 1.0, 3.0]],
                               [[4.0, 0.0, 9.0], [2.0, 1.0, 0.0]],
                               [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])[:, None]
    q_target_next = jnp.array([[[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]],
                               [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
                               [[7.0, 8.0, 9.0], [1.0, 1.0, 1.0]]])[:, None]
    legal = jnp.array([[[1, 1, 1], [1, 1, 0]],  # agent 1's best (action 2) is unavailable
                       [[1, 1, 0], [1, 1, 1]],  # agent 0's best (action 2) is unavailable
                       [[1, 1, 1], [1, 1, 1]]], bool)[:, None]
    values = qmix.double_q_next_values(q_target_next, q_online_next, legal)
    # online picks (1, 1), (0, 0), (2, 0); the target network values them
    np.testing.assert_array_equal(values[:, 0], [[20.0, 50.0], [1.0, 4.0], [9.0, 1.0]])
    # without double Q the target network picks its own best legal action
    np.testing.assert_array_equal(qmix.double_q_next_values(q_target_next, None, legal)[:, 0],
                                  [[30.0, 50.0], [2.0, 6.0], [9.0, 1.0]])
    next_q_tot = qmix.mix(None, None, values, None)  # VDN: 70, 5, 10
    rewards = jnp.array([[1.0], [2.0], [3.0]])
    gamma = 0.5
    # step 0 goes on, step 1 is truncated (bootstraps), step 2 terminated (does not)
    terminated = jnp.array([[False], [False], [True]])
    truncated = jnp.array([[False], [True], [False]])
    one_step = qmix.team_targets(next_q_tot, rewards, terminated, truncated, 1, gamma)
    np.testing.assert_allclose(one_step[:, 0], [1 + 0.5 * 70, 2 + 0.5 * 5, 3.0])
    two_step = qmix.team_targets(next_q_tot, rewards, terminated, truncated, 2, gamma)
    np.testing.assert_allclose(two_step[:, 0], [1 + 0.5 * 2 + 0.25 * 5, 2 + 0.5 * 5, 3.0])


@pytest.mark.parametrize("module", [vdn, qmix], ids=["vdn", "qmix"])
@pytest.mark.slow
def test_the_loss_is_the_squared_error_of_mixed_q_against_double_q_targets(module):
    """The whole loss against the same numbers put together by hand in NumPy, for one-step
    items from two collects (episodes of 26 steps end inside them by truncation)."""
    env, agent = small_agent(module, seq_length=1, rollout_steps=32, buffer_size=512)
    state = agent.init(jax.random.PRNGKey(0))
    target = jax.tree.map(lambda p: p * 1.1, state.params)
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(16))
    _, items, _ = jax.jit(agent.collect)(state, env_state, jax.random.PRNGKey(2))
    batch = qmix.Batch.from_items(jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), items))
    assert np.asarray(batch.truncated).any()
    loss, _ = qmix.qmix_loss(state.params, target, batch, network=agent.network,
                             mixer=agent.mixer, burn_in=0, n_step=1, gamma=0.9, double_q=True)

    def q_of(params, obs):
        return np.asarray(qmix.team_q(agent.network, params["agent"], None, obs, None)[1][0])

    obs, final_obs = batch.obs[:, 0][None], batch.final_obs[:, 0][None]
    legal = np.asarray(batch.final_legal[:, 0])
    online_next = np.where(legal, q_of(state.params, final_obs), -np.inf).argmax(-1)
    next_values = np.take_along_axis(q_of(target, final_obs), online_next[..., None], -1)[..., 0]
    chosen = np.take_along_axis(q_of(state.params, obs),
                                np.asarray(batch.action[:, 0])[..., None], -1)[..., 0]
    world = None if batch.world is None else batch.world[:, 0]
    final_world = None if batch.final_world is None else batch.final_world[:, 0]
    q_tot = qmix.mix(agent.mixer, state.params.get("mixer"), jnp.asarray(chosen), world)
    next_tot = qmix.mix(agent.mixer, target.get("mixer"), jnp.asarray(next_values), final_world)
    alive = 1.0 - np.asarray(batch.terminated[:, 0], np.float32)
    targets = np.asarray(batch.reward[:, 0]) + 0.9 * alive * np.asarray(next_tot)
    np.testing.assert_allclose(loss, np.mean((np.asarray(q_tot) - targets) ** 2), rtol=1e-5)


@pytest.mark.slow
def test_replaying_a_stored_item_from_its_stored_state_reproduces_acting():
    """Recurrent items (4 steps after a 2-step burn-in, cut from 8-step rollouts) replayed
    from their stored state give the Q-values the agents acted with."""
    env, agent = small_agent(memory="gru", burn_in=2, mixer="vdn")
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(16))
    collect = jax.jit(agent.collect)
    for i in range(4):  # 32 steps: every env has ended an episode (26 steps) inside an item
        env_state, items, _ = collect(state, env_state, jax.random.PRNGKey(2 + i))
    assert items["starts"][:, :, 2:].any()
    for k in range(items["obs"].shape[1]):
        item = jax.tree.map(lambda x: x[:, k], items)
        batch = qmix.Batch.from_items(item)
        tm = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
        replayed, _ = qmix.unroll(agent.network, state.params["agent"], batch.memory,
                                  tm(batch.obs), tm(batch.starts), 2)
        # act step by step from the stored state for comparison
        memory, acted = batch.memory, []
        for t in range(6):
            memory, q, _ = qmix.team_q(agent.network, state.params["agent"], memory,
                                       tm(batch.obs)[t:t + 1], tm(batch.starts)[t:t + 1])
            acted.append(q[0])
        np.testing.assert_allclose(replayed, jnp.stack(acted[2:]), atol=1e-5)
    # the replay rows hold the items in write order
    np.testing.assert_array_equal(env_state.replay.data["obs"][:, 6:8], items["obs"])


@pytest.mark.slow
def test_one_update_on_eight_devices_equals_one_device():
    env, agent = small_agent(axis_name=DEVICE_AXIS, memory="gru", burn_in=2)
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(16))
    for i in range(2):
        env_state, items, _ = jax.jit(agent.collect)(state, env_state, jax.random.PRNGKey(2 + i))
    batch = qmix.Batch.from_items(jax.tree.map(lambda x: x[:, 1], items))

    def run(num_devices: int):
        mapped = jax.shard_map(lambda s, b: agent.update(s, b), mesh=make_mesh(num_devices),
                               in_specs=(P(), P(DEVICE_AXIS)), out_specs=P(), check_vma=False)
        return jax.device_get(jax.jit(mapped)(state, batch))

    (state_1, metrics_1), (state_8, metrics_8) = run(1), run(8)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 state_8.params, state_1.params)
    np.testing.assert_allclose(metrics_8["loss"], metrics_1["loss"], rtol=1e-5)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), state_1.params, state.params)
    assert max(jax.tree.leaves(moved)) > 1e-4


def assert_close(a, b):
    """Floats to rounding (matmuls over 1 and 8 devices' envs round differently), the rest
    exactly."""
    if np.issubdtype(np.asarray(a).dtype, np.floating):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(a, b)


def run_placed(num_devices: int, seeds, iters: int, **overrides):
    """A placed run of `iters` iterations: (agent state, env state, metrics), leading seeds."""
    _, agent = small_agent(axis_name=DEVICE_AXIS, **overrides)
    runner = place(*placement_fns(agent), num_envs=agent.config.num_envs,
                   num_devices=num_devices, iters_per_chunk=iters)
    carry, metrics = runner.run_chunk(runner.init(np.asarray(seeds)))
    return jax.device_get((carry.agent_state, carry.env_state, metrics))


@pytest.mark.slow
def test_collecting_on_eight_devices_equals_one_device():
    """Acting, the burn-in windows and the replay rows do not depend on the envs' split."""
    _, env_1, metrics_1 = run_placed(1, [3], iters=2, learning_starts=10_000, memory="gru",
                                     burn_in=2)
    _, env_8, metrics_8 = run_placed(8, [3], iters=2, learning_starts=10_000, memory="gru",
                                     burn_in=2)
    jax.tree.map(assert_close, env_8, env_1)
    np.testing.assert_array_equal(metrics_8["epsilon"], metrics_1["epsilon"])
    assert np.asarray(env_1.replay.size).min() == 4


@pytest.mark.slow
def test_vmapped_seed_equals_single_run_with_that_seed():
    many, _, metrics_many = run_placed(1, [5, 6, 7], iters=4, learning_starts=256)
    one, _, metrics_one = run_placed(1, [6], iters=4, learning_starts=256)
    assert int(one.updates[0]) == 3  # it learned
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a[1], b[0], rtol=1e-5, atol=1e-5),
                 many.params, one.params)
    np.testing.assert_allclose(metrics_many["loss"][1], metrics_one["loss"][0], rtol=1e-4)
    apart = jax.tree.map(lambda x: np.abs(x[0] - x[1]).max(), many.params)
    assert max(jax.tree.leaves(apart)) > 1e-2  # different seeds really are different runs


def test_bad_config_values_are_one_line_errors():
    config = qmix.default_config(MPE)
    for change, match in [
        (dict(seq_length=3), "seq_length=3 must divide rollout_steps=16"),
        (dict(burn_in=2), "burn_in=2 must be <= seq_length=1"),
        (dict(burn_in=2, seq_length=4), "memory=none has no state to warm"),
        (dict(n_step=3), "n_step=3 must be <= seq_length=1"),
        (dict(buffer_size=100), "must hold one iteration's items"),
        (dict(mixer="sum"), "mixer must be one of"),
    ]:
        with pytest.raises(ConfigError, match=match):
            dataclasses.replace(config, **change).validate()
    with pytest.raises(ConfigError, match="not a multi-agent env"):
        qmix.make(envs.make("CartPole-v1"), config)
    assert qmix.placement_problem(config, 8) is None
    assert "batch_size=128 does not divide over 3 devices" in qmix.placement_problem(config, 3)
