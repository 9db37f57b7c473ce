"""Recorded data and the offline agents: episodes recorded on device as evaluation plays
them, Minari's format read back by Minari itself, transitions and returns-to-go, MARWIL's and
BC's losses on hand-made numbers, N devices equal one, and the commands' refusals."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import cql, iql, marwil
from jaxrl_sys.agents.families import offline
from jaxrl_sys.commands import record as record_command
from jaxrl_sys.commands import train as train_command
from jaxrl_sys.core.evaluation import evaluate
from jaxrl_sys.datasets import minari_format, recording
from jaxrl_sys.datasets.recording import Episode, RecordedSteps
from jaxrl_sys.datasets.transitions import Transitions, from_episodes
from jaxrl_sys.runtime.execution import place, placement_fns


def lean_right(params, obs, key, **context):
    """A scripted CartPole policy: push the way the pole leans."""
    del params, key, context
    return (obs[:, 2] > 0).astype(jnp.int32)


@pytest.fixture(scope="module")
def cartpole():
    return envs.make("CartPole-v1")


@pytest.fixture(scope="module")
def scripted_dataset(tmp_path_factory, cartpole):
    """12 episodes of the scripted policy with epsilon 0.2, as a Minari dataset."""
    policy = recording.with_epsilon(lean_right, cartpole.spec, 0.2)
    episodes = recording.record_episodes(cartpole, policy, None, jax.random.PRNGKey(1), 12, 6)
    root = tmp_path_factory.mktemp("datasets")
    path = minari_format.write_dataset(root, "cartpole-scripted-v0", episodes, cartpole.spec,
                                       "CartPole-v1", {"agent": "scripted"}, "a test's data")
    return path, episodes


def test_first_episodes_cut_each_env_at_its_first_end():
    """Env 0 terminates at step 1, env 1 is truncated at step 2, env 2 never ends (cut at
    the last step, truncated); each keeps the observation it ended in last."""
    obs = np.arange(2 * 3 * 1, dtype=np.float32).reshape(2, 3, 1).swapaxes(0, 1)  # [N=3, T=2]
    obs = np.concatenate([obs, obs + 100], axis=1)[:, :3]  # [3, 3, 1]
    terminated = np.array([[False, True, False], [False, False, False], [False, False, False]])
    truncated = np.array([[False, False, False], [False, False, True], [False, False, False]])
    steps = RecordedSteps(observations=obs, actions=np.arange(9).reshape(3, 3),
                          rewards=np.ones((3, 3), np.float32), terminations=terminated,
                          truncations=truncated, final_observations=obs - 50)
    first, second, third = recording.first_episodes(steps)
    assert len(first) == 2 and first.terminations.tolist() == [False, True]
    assert first.truncations.tolist() == [False, False]
    np.testing.assert_array_equal(first.observations, np.concatenate([obs[0, :2], obs[0, 1:2] - 50]))
    assert first.actions.tolist() == [0, 1]
    assert len(second) == 3 and second.truncations.tolist() == [False, False, True]
    assert len(third) == 3 and third.truncations.tolist() == [False, False, True]
    assert not third.terminations.any()
    assert first.total_return == 2.0


def test_recorded_episodes_are_the_episodes_evaluation_plays(cartpole):
    """The same policy, key and ids: each recorded episode has the return and length that
    greedy evaluation reports for it."""
    ids = jnp.arange(6, dtype=jnp.int32)
    key = jax.random.PRNGKey(3)
    policy = recording.with_epsilon(lean_right, cartpole.spec, 0.3)
    episodes = recording.record_episodes(cartpole, policy, None, key, 6, batch=6)
    returns, lengths = jax.jit(lambda: evaluate(cartpole, policy, None, key, ids))()
    np.testing.assert_allclose([e.total_return for e in episodes], returns)
    assert [len(e) for e in episodes] == np.asarray(lengths).astype(int).tolist()
    for e in episodes:
        assert e.observations.shape == (len(e) + 1, 4)
        assert e.terminations[-1] or e.truncations[-1]
        assert not (e.terminations[:-1].any() or e.truncations[:-1].any())


def test_an_episode_is_the_same_in_whatever_batch_it_is_played(cartpole):
    """Recorded with epsilon noise in batches of 2 or all 6 at once, episode i is the same;
    and the episodes differ from one another (their noise follows their ids)."""
    policy = recording.with_epsilon(lean_right, cartpole.spec, 0.5)
    key = jax.random.PRNGKey(4)
    apart = recording.record_episodes(cartpole, policy, None, key, 6, batch=2)
    together = recording.record_episodes(cartpole, policy, None, key, 6, batch=6)
    for a, b in zip(apart, together):
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.observations, b.observations)
    first_steps = [tuple(e.actions[:8]) for e in together]
    assert len(set(first_steps)) == len(first_steps)


def test_iql_bootstraps_truncated_rows_and_not_terminated_ones(cartpole):
    """The critic loss of one row with its terminated flag flipped: different, since a
    terminated row's target leaves out gamma V(s') and a truncated one keeps it."""
    config = iql.Config(dataset="unused", hidden=(8,))
    policy, value, critics = iql.build(cartpole.spec, config)
    obs = jax.random.normal(jax.random.PRNGKey(0), (1, 4))
    params = {"policy": policy.init(jax.random.PRNGKey(1), obs),
              "value": value.init(jax.random.PRNGKey(2), obs),
              "q": critics.init(jax.random.PRNGKey(3), obs)}

    def critic_loss(terminated: bool) -> float:
        rows = offline.Rows(obs, jnp.array([1]), jnp.array([1.0]), obs + 1.0,
                            jnp.array([terminated]), jnp.array([0.0]))
        _, metrics = iql.iql_loss(policy, value, critics, config, False, params, params["q"],
                                  rows)
        return float(metrics["critic_loss"])

    q = np.asarray(critics.values(params["q"], obs, jnp.array([1])))[:, 0]
    next_v = float(value.apply(params["value"], obs + 1.0)[0])
    np.testing.assert_allclose(critic_loss(True), np.sum((q - 1.0) ** 2), rtol=1e-5)
    np.testing.assert_allclose(critic_loss(False), np.sum((q - 1.0 - 0.99 * next_v) ** 2),
                               rtol=1e-5)


def test_epsilon_noise_is_uniform_over_legal_actions_and_clipped_for_boxes(cartpole):
    obs = jnp.zeros((4000, 4))
    always = recording.with_epsilon(lean_right, cartpole.spec, 1.0)
    actions, _ = always.step(None, None, obs, jnp.ones(4000, bool), jax.random.PRNGKey(0),
                             legal=jnp.tile(jnp.array([True, False]), (4000, 1)))
    assert np.all(np.asarray(actions) == 0)  # only action 0 is legal
    actions, _ = always.step(None, None, obs, jnp.ones(4000, bool), jax.random.PRNGKey(0))
    assert abs(float(np.mean(actions)) - 0.5) < 0.05
    never = recording.with_epsilon(lean_right, cartpole.spec, 0.0)
    actions, _ = never.step(None, None, obs + 1, jnp.ones(4000, bool), jax.random.PRNGKey(0))
    assert np.all(np.asarray(actions) == 1)
    pendulum = envs.make("Pendulum-v1").spec  # actions in [-2, 2]
    for centre in (0.0, 1.9):
        noisy = recording.with_epsilon(lambda p, o, k, **c: jnp.full((o.shape[0], 1), centre),
                                       pendulum, 0.5)
        actions, _ = noisy.step(None, None, jnp.zeros((4000, 3)), jnp.ones(4000, bool),
                                jax.random.PRNGKey(0))
        actions = np.asarray(actions)
        assert actions.max() <= 2.0 and actions.min() >= -2.0
    assert actions.max() == 2.0  # clipped
    noisy = recording.with_epsilon(lambda p, o, k, **c: jnp.zeros((o.shape[0], 1)), pendulum,
                                   0.5)
    actions, _ = noisy.step(None, None, jnp.zeros((4000, 3)), jnp.ones(4000, bool),
                            jax.random.PRNGKey(0))
    assert 0.85 < np.std(actions) < 1.05  # 0.5 x the half-range (2), a few clipped


def test_a_dataset_reads_back_with_minaris_own_reader(scripted_dataset):
    import minari

    path, episodes = scripted_dataset
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(path.parent)
    try:
        theirs = list(minari.load_dataset("cartpole-scripted-v0").iterate_episodes())
    finally:
        if before is None:
            os.environ.pop("MINARI_DATASETS_PATH")
        else:
            os.environ["MINARI_DATASETS_PATH"] = before
    ours = minari_format.read_dataset(path)
    assert ours.env_name == "CartPole-v1" and ours.metadata["jaxrl_sys"]["agent"] == "scripted"
    assert len(theirs) == len(ours.episodes) == len(episodes) == 12
    for written, read, mine in zip(episodes, theirs, ours.episodes):
        for field in ("observations", "actions", "rewards", "terminations", "truncations"):
            np.testing.assert_array_equal(getattr(written, field), getattr(read, field))
            np.testing.assert_array_equal(getattr(written, field), getattr(mine, field))


def test_reading_refuses_what_is_not_a_dataset(tmp_path):
    with pytest.raises(minari_format.DatasetError, match="no Minari dataset"):
        minari_format.read_dataset(tmp_path / "missing")
    with pytest.raises(minari_format.DatasetError, match="Minari's form"):
        minari_format.check_dataset_id("no version")


def test_a_replay_ring_reads_back_as_episodes_oldest_first():
    """A full ring of 6 slots written up to slot 2 (oldest first: slots 2..5, 0, 1): an
    episode that ends by termination, one the env reset after a truncation (next_obs is not
    the next row's obs), and the ring's last row, cut off (truncated)."""
    from jaxrl_sys.datasets.replay_export import replay_episodes

    # time order: obs 0 1 2 | 10 11 | 20, next_obs 1 2 3(terminal) | 11 12(reset) | 21
    obs_t = np.array([0, 1, 2, 10, 11, 20], np.float32)
    next_t = np.array([1, 2, 3, 11, 12, 21], np.float32)
    terminated_t = np.array([False, False, True, False, False, False])
    slots = (2 + np.arange(6)) % 6  # where time step t was written
    columns = dict(obs=obs_t[:, None], next_obs=next_t[:, None],
                   action=np.arange(6, dtype=np.int32), reward=np.ones(6, np.float32),
                   terminated=terminated_t)
    data = {key: np.zeros((1, *value.shape), value.dtype) for key, value in columns.items()}
    for key, value in columns.items():
        data[key][0, slots] = value
    first, second, third = replay_episodes(data, np.array([2]), np.array([6]))
    assert first.observations[:, 0].tolist() == [0, 1, 2, 3]
    assert first.terminations.tolist() == [False, False, True] and not first.truncations.any()
    assert second.observations[:, 0].tolist() == [10, 11, 12]
    assert second.truncations.tolist() == [False, True] and second.actions.tolist() == [3, 4]
    assert third.observations[:, 0].tolist() == [20, 21] and third.truncations.tolist() == [True]
    half = replay_episodes({k: v.copy() for k, v in data.items()}, np.array([3]), np.array([3]))
    assert sum(len(e) for e in half) == 3  # a ring not yet full: slots 0..2 only


def _episode(obs, actions, rewards, terminated, truncated) -> Episode:
    return Episode(np.asarray(obs, np.float32)[:, None], np.asarray(actions, np.int32),
                   np.asarray(rewards, np.float32), np.asarray(terminated, bool),
                   np.asarray(truncated, bool))


def test_transitions_pair_each_step_with_the_observation_it_led_to():
    """A terminated episode, a truncated one, and a recording cut mid-episode (marked
    truncated, so that nothing runs on into the next episode)."""
    data = from_episodes([
        _episode([0, 1, 2], [0, 1], [1, 2], [False, True], [False, False]),
        _episode([10, 11], [1], [3], [False], [True]),
        _episode([20, 21, 22], [0, 0], [4, 5], [False, False], [False, False]),
    ])
    assert data.obs[:, 0].tolist() == [0, 1, 10, 20, 21]
    assert data.next_obs[:, 0].tolist() == [1, 2, 11, 21, 22]
    assert data.terminated.tolist() == [False, True, False, False, False]
    assert data.truncated.tolist() == [False, False, True, False, True]
    assert data.rewards.tolist() == [1, 2, 3, 4, 5] and data.size == 5


def test_rows_carry_returns_to_go_and_are_dealt_round_robin():
    data = from_episodes([
        _episode([0, 1, 2, 3], [0, 1, 0], [1, 1, 1], [False, False, True], [False] * 3),
        _episode([10, 11, 12], [1, 1], [2, 4], [False, False], [False, True]),
    ])
    rows = offline.dealt_rows(data, gamma=0.5, shards=2)
    # returns-to-go of rows 0-4: 1 + 0.5 + 0.25, 1 + 0.5, 1 | 2 + 0.5 * 4, 4; five rows over
    # two shards: rows 0, 2, 4 and 1, 3, then row 0 again (none left out)
    assert np.asarray(rows.returns).tolist() == [[1.75, 1.0, 4.0], [1.5, 4.0, 1.75]]
    assert np.asarray(rows.obs)[..., 0].tolist() == [[0, 2, 11], [1, 10, 0]]
    assert np.asarray(rows.actions).tolist() == [[0, 0, 1], [1, 1, 0]]


def test_shards_draw_the_same_rows_however_they_are_split():
    """Each shard samples with the key of its global id: shards 0-3 and 4-7 sampled apart
    (two devices) give the rows all eight sampled together give (one device)."""
    size, shards = 40, 8
    data = Transitions(obs=np.arange(size, dtype=np.float32)[:, None],
                       actions=np.zeros(size, np.int32), rewards=np.ones(size, np.float32),
                       next_obs=np.zeros((size, 1), np.float32),
                       terminated=np.arange(size) % 5 == 4, truncated=np.zeros(size, bool))
    config = marwil.Config(dataset="unused", shards=shards)
    key = jax.random.PRNGKey(7)
    ids = jnp.arange(shards, dtype=jnp.int32)
    whole = offline.sample_rows(offline.init_shards(data, config, key, ids), key, 3)
    halves = [offline.sample_rows(offline.init_shards(data, config, key, part), key, 3)
              for part in (ids[:4], ids[4:])]
    np.testing.assert_array_equal(whole.obs, np.concatenate([h.obs for h in halves]))
    # shard s holds rows s, s + 8, ...: every row it draws is its own
    assert np.all(np.asarray(whole.obs)[:, 0].reshape(shards, 3) % shards
                  == np.arange(shards)[:, None])


def test_advantage_weights_and_their_norm():
    advantages = jnp.array([-2.0, 0.0, 3.0, 100.0])
    weights = marwil.advantage_weights(advantages, jnp.float32(4.0), beta=1.0, max_weight=20.0)
    np.testing.assert_allclose(weights, [np.exp(-1.0), 1.0, np.exp(1.5), 20.0], rtol=1e-6)
    np.testing.assert_array_equal(
        marwil.advantage_weights(advantages, jnp.float32(4.0), beta=0.0, max_weight=20.0),
        np.ones(4))
    np.testing.assert_allclose(marwil.updated_adv_norm(jnp.float32(100.0), 20.0, 0.25), 80.0)


@pytest.mark.parametrize("continuous", [False, True])
def test_the_loss_is_weighted_log_likelihood_and_bc_leaves_the_value_alone(continuous):
    spec = envs.make("Pendulum-v1" if continuous else "CartPole-v1").spec
    policy_net, value_net = marwil.build_networks(spec, marwil.Config(hidden=(8,)))
    obs = jax.random.normal(jax.random.PRNGKey(0), (5, *spec.obs_shape))
    actions = (jax.random.uniform(jax.random.PRNGKey(1), (5, 1), minval=-2, maxval=2)
               if continuous else jnp.array([0, 1, 1, 0, 1]))
    zeros = jnp.zeros(5)
    rows = offline.Rows(obs, actions, zeros, obs, zeros.astype(bool),
                        jnp.array([1.0, 2.0, 0.0, -1.0, 3.0]))
    params = {"policy": policy_net.init(jax.random.PRNGKey(2), obs),
              "value": value_net.init(jax.random.PRNGKey(3), obs)}
    out, log_std = policy_net.apply(params["policy"], obs)
    if continuous:
        std = np.exp(np.asarray(log_std))
        z = (np.asarray(actions) - np.asarray(out)) / std
        log_probs = np.sum(-0.5 * z ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi), axis=-1)
    else:
        log_probs = np.asarray(jax.nn.log_softmax(out))[np.arange(5), np.asarray(actions)]
    values = np.asarray(value_net.apply(params["value"], obs))
    advantages = np.asarray(rows.returns) - values

    def loss(p, beta):
        return marwil.marwil_loss(policy_net.apply, value_net.apply, p, rows, jnp.float32(4.0),
                                  beta=beta, value_loss_weight=0.5, max_weight=20.0,
                                  continuous=continuous)

    bc_loss, (metrics, _) = loss(params, 0.0)
    np.testing.assert_allclose(bc_loss, -log_probs.mean(), rtol=1e-5)
    bc_grads = jax.grad(lambda p: loss(p, 0.0)[0])(params)
    assert all(np.all(np.asarray(g) == 0) for g in jax.tree.leaves(bc_grads["value"]))
    weights = np.minimum(np.exp(advantages / 2.0), 20.0)
    expected = -(weights * log_probs).mean() + 0.5 * 0.5 * (advantages ** 2).mean()
    np.testing.assert_allclose(loss(params, 1.0)[0], expected, rtol=1e-5)
    assert any(np.any(np.asarray(g) != 0)
               for g in jax.tree.leaves(jax.grad(lambda p: loss(p, 1.0)[0])(params)["value"]))
    np.testing.assert_allclose(metrics["log_likelihood"], log_probs.mean(), rtol=1e-5)


def test_iql_losses_on_hand_made_numbers():
    np.testing.assert_allclose(iql.expectile_loss(jnp.array([-2.0, 1.0]), 0.7),
                               (0.3 * 4 + 0.7 * 1) / 2)
    np.testing.assert_allclose(iql.expectile_loss(jnp.array([-2.0, 1.0]), 0.5), 1.25)
    targets = iql.critic_targets(jnp.array([1.0, 1.0]), jnp.array([0.0, 1.0]),
                                 jnp.array([10.0, 10.0]), 0.5)
    np.testing.assert_allclose(targets, [6.0, 1.0])
    q = jnp.array([[6.0, 2.0], [4.0, 1.0]])  # [2 critics, B]
    np.testing.assert_allclose(iql.twin_critic_loss(q, targets), (0 + 1) / 2 + (4 + 0) / 2)
    loss, weights = iql.awr_policy_loss(jnp.array([-1.0, -2.0, -3.0]),
                                        jnp.array([0.0, 1.0, 10.0]), 2.0, 50.0)
    np.testing.assert_allclose(weights, [1.0, np.exp(2.0), 50.0], rtol=1e-6)
    np.testing.assert_allclose(loss, (1.0 + 2 * np.exp(2.0) + 150.0) / 3, rtol=1e-6)


@pytest.mark.parametrize("env_name", ["CartPole-v1", "Pendulum-v1"])
def test_iql_critics_value_the_taken_actions(env_name):
    spec = envs.make(env_name).spec
    critics = iql.TwinCritics(spec, (8,), "relu")
    obs = jax.random.normal(jax.random.PRNGKey(0), (3, *spec.obs_shape))
    params = critics.init(jax.random.PRNGKey(1), obs[:1])
    if critics.continuous:
        actions = jnp.array([[-2.0], [0.0], [2.0]])
        values = critics.values(params, obs, actions)
        one = jax.tree.map(lambda x: x[1], params)
        np.testing.assert_allclose(values[1], critics.module.apply(one, obs, actions / 2.0),
                                   rtol=1e-6)  # Pendulum's [-2, 2] in the unit box
    else:
        actions = jnp.array([0, 1, 1])
        values = critics.values(params, obs, actions)
        every = jax.vmap(critics.module.apply, in_axes=(0, None))(params, obs)
        np.testing.assert_allclose(values, every[:, np.arange(3), actions])
    assert values.shape == (2, 3) and not np.allclose(values[0], values[1])


def test_cql_targets_and_penalty_on_hand_made_numbers():
    next_target = jnp.array([[1.0, 5.0], [3.0, 2.0]])
    next_online = jnp.array([[9.0, 0.0], [0.0, 9.0]])
    rewards, terminated = jnp.array([1.0, 1.0]), jnp.array([0.0, 1.0])
    np.testing.assert_allclose(
        cql.q_targets(rewards, terminated, next_target, next_online, 0.5, double_q=True),
        [1.0 + 0.5 * 1.0, 1.0])
    np.testing.assert_allclose(
        cql.q_targets(rewards, terminated, next_target, next_online, 0.5, double_q=False),
        [1.0 + 0.5 * 5.0, 1.0])
    q = jnp.array([[1.0, 1.0], [0.0, 10.0]])
    actions = jnp.array([0, 1])
    expected = ((np.log(2 * np.e) - 1.0) + (np.log(1 + np.exp(10.0)) - 10.0)) / 2
    np.testing.assert_allclose(cql.conservative_penalty(q, actions), expected, rtol=1e-6)
    # the penalty's gradient raises the data's action and lowers the others
    grad = jax.grad(lambda q: cql.cql_loss(q, actions, jnp.array([1.0, 10.0]), 1.0)[0])(q)
    assert grad[0, 0] < 0 < grad[0, 1] and grad[1, 1] < 0 < grad[1, 0]


def test_the_sampled_penalty_is_an_importance_sampled_logsumexp():
    """With every sample's Q minus its log-density equal to c, logsumexp over 3N samples is
    c + log(3N); the penalty is that minus Q(s, a_data), summed over the twins."""
    batch, samples, dim = 2, 4, 3
    uniform = dim * np.log(0.5)
    q_random = jnp.full((2, batch, samples), 1.0 + uniform)
    log_pi = jnp.full((batch, samples), -0.5)
    q_policy = jnp.full((2, batch, samples), 0.5)
    q_data = jnp.array([[0.0, 2.0], [1.0, 1.0]])
    penalty = cql.sampled_conservative_penalty(q_random, q_policy, log_pi, q_policy, log_pi,
                                               q_data, dim)
    lse = 1.0 + np.log(3 * samples)
    np.testing.assert_allclose(penalty, (lse - 1.0) + (lse - 1.0), rtol=1e-6)
    grad = jax.grad(lambda q: cql.sampled_conservative_penalty(
        q_random, q_policy, log_pi, q_policy, log_pi, q, dim))(q_data)
    np.testing.assert_allclose(grad, -np.ones((2, batch)) / batch)


@pytest.fixture(scope="module")
def pendulum_dataset(tmp_path_factory):
    """6 episodes of a random Pendulum policy, as a Minari dataset."""
    env = envs.make("Pendulum-v1")
    policy = recording.with_epsilon(lambda p, o, k, **c: jnp.zeros((o.shape[0], 1)),
                                    env.spec, 0.5)
    episodes = recording.record_episodes(env, policy, None, jax.random.PRNGKey(2), 6, 6)
    root = tmp_path_factory.mktemp("pendulum")
    return minari_format.write_dataset(root, "pendulum-noise-v0", episodes, env.spec,
                                       "Pendulum-v1", {"agent": "scripted"}, "a test's data")


@pytest.mark.parametrize("name, env_name, online_rollout", [
    ("marwil", "CartPole-v1", 0), ("bc", "CartPole-v1", 0), ("iql", "CartPole-v1", 0),
    ("cql", "CartPole-v1", 0), ("iql", "Pendulum-v1", 0), ("cql", "Pendulum-v1", 0),
    ("iql", "Pendulum-v1", 3), ("cql", "CartPole-v1", 3)])
def test_eight_devices_equal_one_device(name, env_name, online_rollout, scripted_dataset,
                                        pendulum_dataset):
    """A chunk of gradient steps on 8 devices (one shard each) ends with the parameters of
    the same chunk on one device; online, with the same envs and rings too."""
    from jaxrl_sys import agents

    module = agents.load(name)
    dataset = scripted_dataset[0] if env_name == "CartPole-v1" else pendulum_dataset
    config = dataclasses.replace(module.default_config(env_name), dataset=str(dataset),
                                 hidden=(32,), updates_per_iteration=5, batch_size=64,
                                 online_rollout=online_rollout, online_buffer=64)
    if name == "cql":  # the target network copied within the chunk, twice
        config = dataclasses.replace(config, cql_samples=2, target_update_period=4,
                                     online_epsilon=0.5)
    agent = module.make(envs.make(env_name), config)
    results = []
    for devices in (1, 8):
        runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=devices,
                       iters_per_chunk=2)
        carry = runner.init(np.asarray([0]))
        carry, metrics = runner.run_chunk(carry)
        results.append(jax.device_get((carry.agent_state, carry.env_state.online, metrics)))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=5e-5, atol=5e-6), *results)
    assert int(results[0][0].updates[0]) == 10
    if online_rollout:  # every shard stepped its env twice `online_rollout` times
        assert np.asarray(results[0][1].ring.size).tolist() == [[2 * online_rollout] * 8]


def test_online_draws_are_uniform_over_the_dataset_and_the_filled_ring():
    """A shard with 6 dataset rows and 2 of its ring's 4 rows filled draws each of those 8
    rows an eighth of the time, and never an unfilled ring row."""
    from jaxrl_sys.agents.families.online_tuning import draw_with_ring
    from jaxrl_sys.core import replay

    dataset_rows = {"obs": jnp.arange(6, dtype=jnp.float32)[:, None]}
    ring = replay.init({"obs": jnp.zeros((1,), jnp.float32)}, 1, 4)
    for value in (100.0, 101.0):
        ring = replay.add(ring, {"obs": jnp.full((1, 1), value)})
    one_ring = jax.tree.map(lambda x: x[0], ring)
    drawn = np.asarray(draw_with_ring(dataset_rows, one_ring, jax.random.PRNGKey(0),
                                      40_000)["obs"][:, 0])
    values, counts = np.unique(drawn, return_counts=True)
    assert values.tolist() == [0, 1, 2, 3, 4, 5, 100, 101]
    np.testing.assert_allclose(counts / drawn.size, 1 / 8, atol=5 * np.sqrt(1 / 8 / 40_000))


def test_online_rings_hold_the_steps_with_the_observations_they_reached(cartpole,
                                                                         scripted_dataset):
    """Each shard's ring row t is its env's step t: the observation acted on is the one the
    previous row reached unless that step ended an episode (then a reset one), and a
    CartPole step pays 1."""
    config = dataclasses.replace(iql.default_config("CartPole-v1"),
                                 dataset=str(scripted_dataset[0]), online_rollout=40,
                                 online_buffer=8 * 64, hidden=(8,))
    agent = iql.make(cartpole, config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    shards = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(8, dtype=jnp.int32))
    _, shards, metrics = jax.jit(agent.train_step)(state, shards, jax.random.PRNGKey(2))
    ring = jax.device_get(shards.online.ring)
    assert ring.size.tolist() == [40] * 8
    rows = jax.tree.map(lambda x: x[:, :40], ring.data)
    ended = rows.terminated[:, :-1] | (np.abs(rows.next_obs[:, :-1, 0]) > 2.4)
    ended |= np.abs(rows.next_obs[:, :-1, 2]) > 0.2095
    same = np.all(rows.obs[:, 1:] == rows.next_obs[:, :-1], axis=-1)
    assert np.all(same | ended) and not np.all(same)
    assert np.all(rows.rewards == 1.0) and rows.terminated.any()
    assert float(metrics["episode_count"]) == rows.terminated.sum()


def test_an_offline_run_is_refused_in_one_line_without_its_dataset(capsys, tmp_path,
                                                                   scripted_dataset):
    for args, expected in [
        ([], "this agent learns from a recorded dataset: --set dataset=PATH"),
        (["--set", f"dataset={tmp_path / 'none'}"], "no Minari dataset at"),
        (["--env", "Acrobot-v1", "--set", f"dataset={scripted_dataset[0]}"],
         "was recorded in CartPole-v1; the run names Acrobot-v1"),
        (["--set", f"dataset={scripted_dataset[0]}", "--set", "batch_size=100"],
         "batch_size=100 does not divide over shards=8"),
        (["--agent", "cql", "--set", f"dataset={scripted_dataset[0]}", "--set",
          "cql_samples=0"], "cql_samples must be >= 1"),
        (["--agent", "iql", "--set", f"dataset={scripted_dataset[0]}", "--set",
          "expectile=1"], "expectile must be in (0, 1)"),
    ]:
        code = train_command.main(["--agent", "bc", "--no-progress", "--run-root",
                                   str(tmp_path / "runs"), *args])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and expected in err, (args, err)
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_fine_tuning_run_starts_from_the_offline_runs_learner(capsys, tmp_path,
                                                                  scripted_dataset):
    """iql offline (2 x 100 gradient steps), then `--init-from` it online: the new run goes
    on from the saved learner (its step counters continue), plays episodes, and keeps its own
    checkpoints; what does not fit is refused in one line before anything is created."""
    from jaxrl_sys.runtime.checkpoint import Checkpointer

    common = ["--agent", "iql", "--env", "CartPole-v1", "--set",
              f"dataset={scripted_dataset[0]}", "--set", "hidden=16", "--chunks", "2",
              "--eval-episodes", "0", "--no-progress"]
    assert train_command.main([*common, "--total-steps", "200", "--run-root",
                               str(tmp_path / "offline")]) == 0
    (source,) = (tmp_path / "offline").iterdir()
    tuned_root = tmp_path / "online"
    assert train_command.main([*common, "--total-steps", "400", "--run-root", str(tuned_root),
                               "--set", "online_rollout=5", "--init-from", str(source)]) == 0
    (tuned,) = tuned_root.iterdir()

    def saved(run_dir):
        checkpointer = Checkpointer(run_dir, create=False)
        try:
            return checkpointer.read_raw()["agent_state"]
        finally:
            checkpointer.close()

    before, after = saved(source), saved(tuned)
    assert int(before["updates"][0]) == 200 and int(after["updates"][0]) == 600
    assert int(after["opt_state"][0]["count"][0]) == 600  # Adam's own count went on too
    records = [json.loads(line) for line in (tuned / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["mean_return"] is not None  # the shards' envs finished episodes
    capsys.readouterr()

    refused_root = tmp_path / "refused"
    for args, expected in [
        (["--init-from", str(tmp_path / "none")], "no run directory at"),
        (["--init-from", str(source), "--agent", "cql"], "is a iql run; this run is cql"),
        (["--init-from", str(source), "--env", "Acrobot-v1"],
         "trained on CartPole-v1; this run names Acrobot-v1"),
        (["--init-from", str(source), "--set", "hidden=32"], "the two runs' networks differ"),
        (["--init-from", str(source), "--seeds", "2"], "trained 1 seed(s); this run has 2"),
        (["--agent", "marwil", "--set", "online_rollout=4"],
         "offline-to-online fine-tuning is iql's and cql's"),
    ]:
        code = train_command.main([*common, "--total-steps", "100", "--run-root",
                                   str(refused_root), *args])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and expected in err, (args, err)
    assert not refused_root.exists()


def test_record_refuses_bad_input_before_writing(capsys, tmp_path):
    for args, expected in [
        (["--episodes", "0"], "--episodes must be >= 1"),
        (["--name", "no_version"], "is not of Minari's form"),
        (["--policy", "epsilon:2"], "expected greedy, sampled or epsilon:E"),
        (["--policy", "boltzmann"], "expected greedy, sampled or epsilon:E"),
    ]:
        code = record_command.main([str(tmp_path / "run"), "--out", str(tmp_path / "out"),
                                    *args])
        err = capsys.readouterr().err.strip()
        assert code == 2 and expected in err and len(err.splitlines()) == 1, (args, err)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_run_is_recorded_and_cloned_from_the_command_line(capsys, tmp_path):
    """train (PPO, a short run) -> jaxrl-record with each policy -> bc on the dataset: the
    files Minari reads, the metadata naming the run, and an offline run checkpointing
    without its dataset that resumes exactly."""
    runs = tmp_path / "runs"
    assert train_command.main(["--agent", "ppo", "--total-steps", "8192", "--chunks", "2",
                               "--no-progress", "--run-root", str(runs)]) == 0
    (run_dir,) = runs.iterdir()
    out = tmp_path / "datasets"
    for policy in ("greedy", "sampled", "epsilon:0.5"):
        assert record_command.main([str(run_dir), "--episodes", "3", "--out", str(out),
                                    "--policy", policy, "--batch", "2"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("wrote ") == 3 and "3 episodes" in printed
    names = sorted(p.name for p in out.iterdir())
    assert names == ["cartpole-v1-ppo-epsilon0_5-v0", "cartpole-v1-ppo-greedy-v0",
                     "cartpole-v1-ppo-sampled-v0"]
    greedy = minari_format.read_dataset(out / names[1])
    assert greedy.metadata["jaxrl_sys"]["run"] == str(run_dir.absolute())
    assert greedy.metadata["jaxrl_sys"]["policy"] == "greedy" and len(greedy.episodes) == 3
    assert record_command.main([str(run_dir), "--episodes", "3", "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert record_command.main([str(run_dir), "--from-replay", "--out", str(out)]) == 2
    assert "keeps no replay of transitions" in capsys.readouterr().err
    # a DQN run's replay (every step it stored: 2 chunks of 32 envs x 32 steps) as episodes
    assert train_command.main(["--agent", "dqn", "--total-steps", "2048", "--chunks", "2",
                               "--set", "learning_starts=512", "--no-progress",
                               "--run-root", str(tmp_path / "dqn")]) == 0
    (dqn_run,) = (tmp_path / "dqn").iterdir()
    assert record_command.main([str(dqn_run), "--from-replay", "--out", str(out),
                                "--name", "dqn-replay-v0"]) == 0
    replayed = minari_format.read_dataset(out / "dqn-replay-v0")
    assert sum(len(e) for e in replayed.episodes) == 2048
    assert replayed.metadata["jaxrl_sys"]["policy"] == "replay"
    capsys.readouterr()

    offline = tmp_path / "offline"
    args = ["--agent", "bc", "--set", f"dataset={out / names[1]}", "--total-steps", "400",
            "--chunks", "2", "--no-progress", "--run-root", str(offline),
            "--checkpoint-every", "1", "--no-save-replay"]
    assert train_command.main(args) == 0
    assert "done: 400 steps/seed" in capsys.readouterr().out
    (offline_run,) = offline.iterdir()
    assert sorted(p.name for p in (offline_run / "checkpoints").iterdir()) == ["0", "1"]
    # resumed after chunk 0 (the dataset read again, not restored), it ends where it ended
    uninterrupted = _saved(offline_run)
    shutil.rmtree(offline_run / "checkpoints" / "1")
    assert train_command.main(["--resume", str(offline_run), "--no-progress"]) == 0
    assert f"resuming {offline_run} after chunk 0" in capsys.readouterr().err
    jax.tree.map(np.testing.assert_array_equal, uninterrupted, _saved(offline_run))


def _saved(run_dir):
    """The latest checkpoint's arrays of `run_dir`."""
    from jaxrl_sys.runtime.checkpoint import Checkpointer

    checkpointer = Checkpointer(run_dir, create=False)
    try:
        return checkpointer.read_raw()
    finally:
        checkpointer.close()
