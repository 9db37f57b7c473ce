"""GAE against a plain NumPy reference, with truncated and terminated episode ends."""

import numpy as np
import jax.numpy as jnp

from jaxrl_sys.core.returns import gae


def reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Loop over episodes explicitly: a truncated end bootstraps, a terminated one does not."""
    T, B = rewards.shape
    advantages = np.zeros((T, B))
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if terminated[t, b]:
                bootstrap, running = 0.0, 0.0
            elif truncated[t, b]:
                bootstrap, running = next_values[t, b], 0.0
            else:
                bootstrap = next_values[t, b]
            delta = rewards[t, b] + gamma * bootstrap - values[t, b]
            running = delta + gamma * lam * running
            advantages[t, b] = running
    return advantages, advantages + values


def test_gae_matches_reference_with_both_kinds_of_episode_end():
    rng = np.random.default_rng(0)
    T, B = 37, 6
    rewards = rng.normal(size=(T, B))
    values = rng.normal(size=(T, B))
    next_values = rng.normal(size=(T, B))
    terminated = rng.random((T, B)) < 0.1
    truncated = (rng.random((T, B)) < 0.1) & ~terminated
    truncated[5, 0] = terminated[5, 0] = True  # both at once: termination wins
    assert terminated.any() and truncated.any()

    adv, ret = gae(
        jnp.asarray(rewards, jnp.float32), jnp.asarray(values, jnp.float32),
        jnp.asarray(next_values, jnp.float32), jnp.asarray(terminated),
        jnp.asarray(truncated), 0.97, 0.9,
    )
    ref_adv, ref_ret = reference_gae(rewards, values, next_values, terminated, truncated, 0.97, 0.9)
    np.testing.assert_allclose(np.asarray(adv), ref_adv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(ret), ref_ret, rtol=1e-4, atol=1e-4)


def test_truncation_bootstraps_and_termination_does_not():
    ones = jnp.ones((1, 2))
    rewards, values, next_values = ones, jnp.zeros((1, 2)), 10.0 * ones
    terminated = jnp.array([[True, False]])
    truncated = jnp.array([[False, True]])
    adv, _ = gae(rewards, values, next_values, terminated, truncated, 0.5, 1.0)
    np.testing.assert_allclose(np.asarray(adv), [[1.0, 1.0 + 0.5 * 10.0]])


def reference_n_step(rewards, next_values, terminated, truncated, valid, gamma):
    """Plain loop: accumulate until an episode end or the last valid step, then bootstrap."""
    B, n = rewards.shape
    out = np.zeros(B)
    for b in range(B):
        total, discount = 0.0, 1.0
        for k in range(n):
            total += discount * rewards[b, k]
            discount *= gamma
            last = k == n - 1 or not valid[b, k + 1]
            if terminated[b, k]:
                break
            if truncated[b, k] or last:
                total += discount * next_values[b, k]
                break
        out[b] = total
    return out


def test_n_step_targets_match_reference_with_episode_ends_and_cut_sequences():
    from jaxrl_sys.core.returns import n_step_targets

    rng = np.random.default_rng(1)
    B, n = 400, 5
    rewards = rng.normal(size=(B, n))
    next_values = rng.normal(size=(B, n))
    terminated = rng.random((B, n)) < 0.15
    truncated = rng.random((B, n)) < 0.15
    cut = rng.integers(1, n + 1, size=B)  # number of valid steps in each sequence
    valid = np.arange(n)[None, :] < cut[:, None]
    got = n_step_targets(
        jnp.asarray(rewards, jnp.float32), jnp.asarray(next_values, jnp.float32),
        jnp.asarray(terminated), jnp.asarray(truncated), jnp.asarray(valid), 0.9,
    )
    want = reference_n_step(rewards, next_values, terminated, truncated, valid, 0.9)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    assert (terminated[:, 0]).any() and (truncated[:, 0] & ~terminated[:, 0]).any()


def test_n_step_return_and_discount_rebuild_the_targets_of_the_bootstrap_value():
    """return + discount * value is `n_step_targets` with that value at the bootstrap step: the
    discount is gamma ** k for a bootstrap k steps on and 0 after a termination."""
    from jaxrl_sys.core.returns import bootstrap_step, n_step_return_and_discount, n_step_targets

    rng = np.random.default_rng(3)
    B, n = 400, 5
    rewards = jnp.asarray(rng.normal(size=(B, n)), jnp.float32)
    terminated = jnp.asarray(rng.random((B, n)) < 0.15)
    truncated = jnp.asarray(rng.random((B, n)) < 0.15)
    valid = jnp.asarray(np.arange(n)[None, :] < rng.integers(1, n + 1, size=B)[:, None])
    value = jnp.asarray(rng.normal(size=B), jnp.float32)
    returns, discounts = n_step_return_and_discount(rewards, terminated, truncated, valid, 0.9)
    targets = n_step_targets(rewards, jnp.broadcast_to(value[:, None], (B, n)), terminated,
                             truncated, valid, 0.9)
    np.testing.assert_allclose(np.asarray(returns + discounts * value), np.asarray(targets),
                               rtol=1e-5, atol=1e-5)
    stop = np.asarray(bootstrap_step(terminated, truncated, valid))
    ended = np.asarray(terminated)[np.arange(B), stop]
    want = np.where(ended, 0.0, 0.9 ** (stop + 1))
    np.testing.assert_allclose(np.asarray(discounts), want, rtol=1e-6)
    assert ended.any() and (~ended).any()


def test_n_step_targets_read_next_values_at_the_bootstrap_step_only():
    """Learners evaluate their target network at `bootstrap_step` alone: the targets must not
    change when every other next value is zeroed."""
    from jaxrl_sys.core.returns import bootstrap_step, n_step_targets

    rng = np.random.default_rng(2)
    B, n = 400, 6
    rewards = jnp.asarray(rng.normal(size=(B, n)), jnp.float32)
    next_values = rng.normal(size=(B, n)).astype(np.float32)
    terminated = jnp.asarray(rng.random((B, n)) < 0.15)
    truncated = jnp.asarray(rng.random((B, n)) < 0.15)
    valid = jnp.asarray(np.arange(n)[None, :] < rng.integers(1, n + 1, size=B)[:, None])
    stop = np.asarray(bootstrap_step(terminated, truncated, valid))
    only_stop = np.zeros_like(next_values)
    only_stop[np.arange(B), stop] = next_values[np.arange(B), stop]
    full = n_step_targets(rewards, jnp.asarray(next_values), terminated, truncated, valid, -0.9)
    sparse = n_step_targets(rewards, jnp.asarray(only_stop), terminated, truncated, valid, -0.9)
    np.testing.assert_array_equal(np.asarray(full), np.asarray(sparse))
    assert len(set(stop.tolist())) == n  # every stop position occurs
