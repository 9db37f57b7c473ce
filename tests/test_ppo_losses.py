"""PPO's loss functions (jaxrl_sys/agents/ppo/losses.py) against hand-computed values and a
NumPy reference, and the minibatch shuffle's per-env permutations."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys.agents.ppo import agent as ppo_agent
from jaxrl_sys.agents.ppo import losses

EPS = 0.2


def _reference_loss(log_probs, entropy, values, old_log_probs, old_values, advantages, returns,
                    clip_eps, vf_coef, ent_coef, clip_value, normalize):
    """PPO's loss written out in NumPy (float64), for comparison."""
    if normalize:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    ratio = np.exp(log_probs - old_log_probs)
    surrogate = np.minimum(ratio * advantages,
                           np.clip(ratio, 1 - clip_eps, 1 + clip_eps) * advantages)
    policy = -surrogate.mean()
    error = (values - returns) ** 2
    if clip_value:
        moved = old_values + np.clip(values - old_values, -clip_eps, clip_eps)
        error = np.maximum(error, (moved - returns) ** 2)
    value = 0.5 * error.mean()
    return policy + vf_coef * value - ent_coef * entropy.mean(), policy, value


def _random_batch(n: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    """Arrays [n] shaped like one flattened minibatch."""
    rng = np.random.default_rng(seed)
    old_log_probs = rng.normal(-1.0, 0.3, n)
    return dict(
        log_probs=old_log_probs + rng.normal(0.0, 0.4, n), entropy=rng.uniform(0.5, 1.5, n),
        values=rng.normal(0.0, 2.0, n), old_log_probs=old_log_probs,
        old_values=rng.normal(0.0, 2.0, n), advantages=rng.normal(0.5, 2.0, n),
        returns=rng.normal(0.0, 2.0, n),
    )


def _f32(batch: dict[str, np.ndarray]) -> dict[str, jax.Array]:
    return {k: jnp.asarray(v, jnp.float32) for k, v in batch.items()}


def test_normalized_advantages_have_mean_zero_and_unit_std():
    advantages = np.random.default_rng(1).normal(3.0, 5.0, 100)
    out = np.asarray(losses.normalized_advantages(jnp.asarray(advantages, jnp.float32), None))
    np.testing.assert_allclose(out, (advantages - advantages.mean()) / advantages.std(),
                               rtol=1e-4, atol=1e-5)


def test_normalized_advantages_pool_their_statistics_over_the_device_axis():
    """Each device's share is scaled by the whole minibatch's mean and std, not its own."""
    advantages = jnp.asarray(np.random.default_rng(2).normal(0.0, 1.0, (4, 8)) +
                             np.arange(4)[:, None], jnp.float32)  # devices differ in mean
    per_device = jax.vmap(lambda a: losses.normalized_advantages(a, "device"),
                          axis_name="device")(advantages)
    whole = losses.normalized_advantages(advantages.reshape(-1), None).reshape(4, 8)
    np.testing.assert_allclose(per_device, whole, rtol=1e-5, atol=1e-5)


def test_importance_ratio_is_the_probability_ratio():
    ratio = losses.importance_ratio(jnp.log(jnp.asarray([0.5, 0.2])),
                                    jnp.log(jnp.asarray([0.25, 0.4])))
    np.testing.assert_allclose(ratio, [2.0, 0.5], rtol=1e-6)


@pytest.mark.parametrize("ratio, advantage, expected", [
    (1.5, 2.0, -(1.0 + EPS) * 2.0),  # A > 0: clipped above 1 + eps
    (1.1, 2.0, -1.1 * 2.0),  # inside the interval: unclipped
    (0.5, 2.0, -0.5 * 2.0),  # A > 0 below 1 - eps: no clipping (the min keeps r A)
    (0.5, -2.0, (1.0 - EPS) * 2.0),  # A < 0: clipped below 1 - eps
    (0.9, -2.0, 0.9 * 2.0),  # inside: unclipped
    (1.5, -2.0, 1.5 * 2.0),  # A < 0 above 1 + eps: no clipping (pessimistic r A)
])
def test_policy_clipping_engages_only_beyond_the_interval_in_the_advantages_direction(
        ratio, advantage, expected):
    loss = losses.clipped_policy_loss(jnp.asarray([ratio]), jnp.asarray([advantage]), EPS)
    np.testing.assert_allclose(loss, expected, rtol=1e-6)


@pytest.mark.parametrize("ratio, advantage, moves", [
    (1.5, 2.0, False), (1.1, 2.0, True), (0.5, 2.0, True),
    (0.5, -2.0, False), (0.9, -2.0, True), (1.5, -2.0, True),
])
def test_clipped_ratios_get_no_gradient(ratio, advantage, moves):
    """Once the ratio has moved past 1 +- eps in the advantage's direction, the loss stops
    pushing it; elsewhere its gradient is -A."""
    grad = jax.grad(lambda r: losses.clipped_policy_loss(r, jnp.asarray([advantage]), EPS))(
        jnp.asarray([ratio]))
    np.testing.assert_allclose(grad, [-advantage if moves else 0.0], rtol=1e-6)


def test_value_loss_is_half_the_mean_squared_error():
    loss = losses.value_loss(jnp.asarray([1.0, 2.0, 0.0]), jnp.asarray([0.0, 0.0, 3.0]))
    np.testing.assert_allclose(loss, 0.5 * (1.0 + 4.0 + 9.0) / 3.0, rtol=1e-6)


def test_value_clipping_takes_the_worse_of_the_moved_and_the_clipped_value():
    returns = jnp.asarray([0.0, 0.0, 0.0])
    old = jnp.asarray([1.0, 1.0, 1.0])
    # within eps of the old value: both terms equal; moved away from the return by 2: the
    # clipped value (1.2) is nearer, so the unclipped error counts; moved towards the return
    # past eps (0.0): the clipped value (0.8) is farther and its error counts
    values = jnp.asarray([1.1, 3.0, 0.0])
    loss = losses.clipped_value_loss(values, old, returns, EPS)
    np.testing.assert_allclose(loss, 0.5 * (1.1 ** 2 + 3.0 ** 2 + 0.8 ** 2) / 3.0, rtol=1e-6)
    # no value moved more than eps: the same as the unclipped loss
    near = jnp.asarray([1.1, 0.9, 1.0])
    np.testing.assert_allclose(losses.clipped_value_loss(near, old, returns, EPS),
                               losses.value_loss(near, returns), rtol=1e-6)


def test_entropy_term_is_the_mean_and_lowers_the_loss():
    np.testing.assert_allclose(losses.entropy_term(jnp.asarray([0.5, 1.5])), 1.0, rtol=1e-6)
    batch = _f32(_random_batch())
    args = dict(clip_eps=EPS, vf_coef=0.5, ent_coef=0.01, clip_value=False,
                normalize_advantages=True, axis_name=None)
    grad = jax.grad(lambda e: losses.ppo_loss(**{**batch, "entropy": e}, **args)[0])(
        batch["entropy"])
    np.testing.assert_allclose(grad, np.full(grad.shape, -0.01 / grad.shape[0]), rtol=1e-5)


def test_approx_kl_is_zero_for_the_same_policy_and_positive_otherwise():
    log_probs = jnp.log(jnp.asarray([0.5, 0.2, 0.3]))
    same = losses.approx_kl(jnp.ones(3), log_probs, log_probs)
    assert float(same) == 0.0
    old = jnp.log(jnp.asarray([0.4, 0.4, 0.2]))
    ratio = losses.importance_ratio(log_probs, old)
    kl = losses.approx_kl(ratio, log_probs, old)
    r = np.exp(np.log([0.5, 0.2, 0.3]) - np.log([0.4, 0.4, 0.2]))
    np.testing.assert_allclose(kl, np.mean(r - 1 - np.log(r)), rtol=1e-5)
    assert float(kl) > 0.0


@pytest.mark.parametrize("clip_value", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_ppo_loss_matches_the_numpy_reference(clip_value, normalize):
    batch = _random_batch(seed=3)
    total, metrics = losses.ppo_loss(
        **_f32(batch), clip_eps=EPS, vf_coef=0.5, ent_coef=0.01, clip_value=clip_value,
        normalize_advantages=normalize, axis_name=None)
    expected, policy, value = _reference_loss(**batch, clip_eps=EPS, vf_coef=0.5, ent_coef=0.01,
                                              clip_value=clip_value, normalize=normalize)
    np.testing.assert_allclose(total, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics["policy_loss"], policy, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics["value_loss"], value, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics["entropy"], batch["entropy"].mean(), rtol=1e-5)
    assert float(metrics["loss"]) == float(total)


def test_minibatches_permute_each_envs_steps_by_its_global_id():
    """Every minibatch slot holds one step of each env; the steps of an env are a permutation
    that depends on its id alone, so an env gets the same minibatches on any device."""
    config = dataclasses.replace(ppo_agent.Config(), rollout_steps=8, num_minibatches=2)
    steps = jnp.arange(8, dtype=jnp.float32)[:, None] * jnp.ones((1, 3))  # [T, B]: the step
    data = ppo_agent.Batch(*(steps,) * 6)
    key = jax.random.PRNGKey(0)
    out = ppo_agent.shuffled_minibatches(data, jnp.asarray([0, 1, 2]), key, config)
    assert out.obs.shape == (2, 4, 3)
    per_env = np.asarray(out.obs).reshape(8, 3)
    for b in range(3):
        assert sorted(per_env[:, b]) == list(range(8))
    alone = ppo_agent.shuffled_minibatches(
        ppo_agent.Batch(*(steps[:, 2:],) * 6), jnp.asarray([2]), key, config)
    np.testing.assert_array_equal(np.asarray(alone.obs).reshape(8), per_env[:, 2])
    assert not np.array_equal(per_env[:, 0], per_env[:, 1])
