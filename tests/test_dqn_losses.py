"""DQN's targets and loss (agents/dqn/losses.py) against hand-computed values and a NumPy
reference: where n-step targets stop and bootstrap, double Q's choice of network, advantage
learning's gap term and the weighted Huber loss."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.agents import dqn

GAMMA = 0.9


def sequences(reward, terminated, truncated, valid, obs=None, next_obs=None, action=None,
              weights=None) -> dqn.Batch:
    """A batch [B, n] from nested lists; observations [B, n, 1] default to zeros."""
    reward = np.asarray(reward, np.float32)
    shape = reward.shape
    zeros_obs = np.zeros((*shape, 1), np.float32)
    return dqn.Batch(
        obs=jnp.asarray(zeros_obs if obs is None else obs, jnp.float32),
        action=jnp.asarray(np.zeros(shape, np.int32) if action is None else action, jnp.int32),
        reward=jnp.asarray(reward),
        terminated=jnp.asarray(terminated, bool),
        truncated=jnp.asarray(truncated, bool),
        next_obs=jnp.asarray(zeros_obs if next_obs is None else next_obs, jnp.float32),
        valid=jnp.asarray(valid, bool),
        weights=jnp.asarray(np.ones(shape[0]) if weights is None else weights, jnp.float32),
    )


def test_n_step_target_stops_at_a_termination_and_bootstraps_at_a_truncation():
    """Rows: terminated at step 1, truncated at step 1, no episode end, cut short by the
    replay's write head after step 0. Rewards 1, 2, 4; each row's bootstrap value is 10."""
    f, t = False, True
    batch = sequences(
        reward=[[1, 2, 4]] * 4,
        terminated=[[f, t, f], [f, f, f], [f, f, f], [f, f, f]],
        truncated=[[f, f, f], [f, t, f], [f, f, f], [f, f, f]],
        valid=[[t, t, t], [t, t, t], [t, t, t], [t, f, f]],
        next_obs=np.arange(12, dtype=np.float32).reshape(4, 3, 1),
    )
    targets = dqn.q_targets(batch, jnp.full(4, 10.0), GAMMA)
    g = GAMMA
    expected = [1 + g * 2,  # the termination ends the sum: no bootstrap
                1 + g * 2 + g * g * 10,  # the truncation bootstraps from the state reached
                1 + g * 2 + g * g * 4 + g ** 3 * 10,  # the full window
                1 + g * 10]  # only step 0 is valid: bootstrap after it
    np.testing.assert_allclose(targets, expected, rtol=1e-6)
    # the networks see the next state of exactly those steps: 1, 1, 2 and 0 of each row
    boot = dqn.bootstrap_observations(batch)
    np.testing.assert_array_equal(np.asarray(boot)[:, 0], [1.0, 4.0, 8.0, 9.0])


def test_double_q_picks_the_online_argmax_and_values_it_with_the_target_network():
    q_online = jnp.array([[1.0, 5.0, 0.0], [0.0, 0.0, 3.0]])
    q_target = jnp.array([[9.0, 2.0, 3.0], [4.0, 7.0, -1.0]])
    np.testing.assert_array_equal(dqn.bootstrap_values(q_target, q_online), [2.0, -1.0])
    np.testing.assert_array_equal(dqn.bootstrap_values(q_target, None), [9.0, 7.0])


def test_advantage_learning_lowers_each_target_by_its_action_gap():
    q_target_now = jnp.array([[1.0, 4.0, 2.0], [3.0, 0.0, 3.0]])
    actions = jnp.array([[2], [0]], jnp.int32)
    np.testing.assert_array_equal(dqn.action_gap(q_target_now, actions), [2.0, 0.0])
    lowered = dqn.advantage_learning_targets(jnp.array([10.0, 5.0]), q_target_now, actions, 0.5)
    np.testing.assert_allclose(lowered, [10.0 - 0.5 * 2.0, 5.0])
    np.testing.assert_array_equal(dqn.taken_values(q_target_now, actions), [2.0, 3.0])


def test_td_loss_is_the_weighted_mean_huber_loss():
    td_error = jnp.array([0.5, -3.0, 12.0, -0.1])
    weights = jnp.array([1.0, 0.5, 2.0, 0.0])
    delta = 2.0
    abs_err = np.abs(np.asarray(td_error))
    huber = np.where(abs_err <= delta, 0.5 * abs_err ** 2, delta * (abs_err - 0.5 * delta))
    np.testing.assert_allclose(dqn.td_loss(td_error, weights, delta),
                               np.mean(np.asarray(weights) * huber), rtol=1e-6)
    np.testing.assert_allclose(dqn.td_loss(td_error, None, delta), np.mean(huber), rtol=1e-6)


def reference_loss(w_online, w_target, batch, double_q, advantage_learning, delta):
    """q_learning_loss for the linear Q-network obs @ w, step by step in NumPy."""
    b = {k: np.asarray(v) for k, v in vars(batch).items()}
    losses, td_errors = [], []
    for i in range(b["reward"].shape[0]):
        target, discount, step = 0.0, 1.0, 0
        while True:
            target += discount * b["reward"][i, step]
            ends = b["terminated"][i, step] or b["truncated"][i, step]
            last = step + 1 == b["reward"].shape[1] or not b["valid"][i, step + 1]
            if ends or last:
                break
            discount *= GAMMA
            step += 1
        if not b["terminated"][i, step]:
            q_next_target = b["next_obs"][i, step] @ w_target
            chooser = b["next_obs"][i, step] @ w_online if double_q else q_next_target
            target += discount * GAMMA * q_next_target[np.argmax(chooser)]
        a = b["action"][i, 0]
        q_now_target = b["obs"][i, 0] @ w_target
        target -= advantage_learning * (q_now_target.max() - q_now_target[a])
        td = (b["obs"][i, 0] @ w_online)[a] - target
        huber = 0.5 * td ** 2 if abs(td) <= delta else delta * (abs(td) - 0.5 * delta)
        losses.append(b["weights"][i] * huber)
        td_errors.append(td)
    return np.mean(losses), np.asarray(td_errors)


def test_q_learning_loss_matches_a_numpy_reference_and_trains_only_the_taken_action():
    rng = np.random.default_rng(0)
    B, n, obs_dim, A = 16, 3, 5, 4
    batch = sequences(
        reward=rng.normal(size=(B, n)), terminated=rng.random((B, n)) < 0.2,
        truncated=rng.random((B, n)) < 0.2, valid=np.cumprod(rng.random((B, n)) < 0.9, axis=1)
        | (np.arange(n) == 0), obs=rng.normal(size=(B, n, obs_dim)),
        next_obs=rng.normal(size=(B, n, obs_dim)), action=rng.integers(0, A, (B, n)),
        weights=rng.random(B),
    )
    w_online = rng.normal(size=(obs_dim, A)).astype(np.float32)
    w_target = rng.normal(size=(obs_dim, A)).astype(np.float32)
    apply_fn = lambda w, obs, draw=None: obs @ w  # noqa: E731
    for double_q, advantage_learning in ((True, 0.0), (False, 0.0), (True, 0.7)):
        loss_fn = functools.partial(dqn.q_learning_loss, apply_fn=apply_fn, gamma=GAMMA,
                                    double_q=double_q, advantage_learning=advantage_learning,
                                    huber_delta=1.5)
        loss, (td_error, q_mean) = loss_fn(jnp.asarray(w_online), jnp.asarray(w_target), batch)
        ref_loss, ref_td = reference_loss(w_online, w_target, batch, double_q,
                                          advantage_learning, 1.5)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
        np.testing.assert_allclose(td_error, ref_td, rtol=1e-5, atol=1e-5)
        q_taken = (np.asarray(batch.obs)[:, 0] @ w_online)[np.arange(B),
                                                           np.asarray(batch.action)[:, 0]]
        np.testing.assert_allclose(q_mean, q_taken.mean(), rtol=1e-5)
    # the gradient flows through Q(s_0, a_0) alone: d/dw[:, a] = mean(weight * huber'(td) * s_0)
    grad = jax.grad(lambda w: loss_fn(w, jnp.asarray(w_target), batch)[0])(jnp.asarray(w_online))
    huber_grad = np.clip(ref_td, -1.5, 1.5) * np.asarray(batch.weights)
    expected = np.zeros((obs_dim, A))
    for i in range(B):
        expected[:, int(batch.action[i, 0])] += huber_grad[i] * np.asarray(batch.obs)[i, 0] / B
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-6)
