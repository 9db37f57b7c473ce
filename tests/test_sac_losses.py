"""SAC's losses against NumPy references and hand-computed values, and their sum's gradient:
each loss reaches only its own parameters."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys.agents import sac
from jaxrl_sys.agents.families.continuous_control import (
    Critic, init_twin_critics, twin_q_values,
)


def test_soft_target_is_min_of_target_twins_minus_entropy_term_cut_only_at_termination():
    rng = np.random.default_rng(0)
    batch = 64
    reward = rng.normal(size=batch).astype(np.float32)
    next_q = rng.normal(size=(2, batch)).astype(np.float32)
    next_log_prob = rng.normal(size=batch).astype(np.float32)
    terminated = rng.random(batch) < 0.3  # the rest includes truncated steps: they bootstrap
    alpha, gamma, reward_scale = 0.2, 0.9, 5.0

    target = sac.soft_target(jnp.asarray(reward), jnp.asarray(terminated), jnp.asarray(next_q),
                             jnp.asarray(next_log_prob), jnp.float32(alpha), gamma, reward_scale)

    soft_value = np.minimum(next_q[0], next_q[1]) - alpha * next_log_prob
    reference = reward * reward_scale + gamma * np.where(terminated, 0.0, soft_value)
    np.testing.assert_allclose(np.asarray(target), reference, rtol=1e-6, atol=1e-6)
    # hand-computed: 1*5 + 0.9 * (min(2, 3) - 0.2 * -1) = 6.98 unless terminated, then 5
    one = functools.partial(sac.soft_target, jnp.ones(1), next_q=jnp.array([[2.0], [3.0]]),
                            next_log_prob=-jnp.ones(1), alpha=jnp.float32(alpha), gamma=gamma,
                            reward_scale=reward_scale)
    np.testing.assert_allclose(one(jnp.array([False])), [6.98], rtol=1e-6)
    np.testing.assert_allclose(one(jnp.array([True])), [5.0], rtol=1e-6)
    # no gradient reaches the target critics through the target
    grad = jax.grad(lambda q: jnp.sum(sac.soft_target(
        jnp.asarray(reward), jnp.asarray(terminated), q, jnp.asarray(next_log_prob),
        jnp.float32(alpha), gamma, reward_scale)))(jnp.asarray(next_q))
    assert not np.asarray(grad).any()


def test_critic_loss_is_half_the_squared_error_summed_over_twins_averaged_over_the_batch():
    q = jnp.array([[1.0, 2.0], [4.0, 0.0]])  # [twins, batch]
    target = jnp.array([2.0, 1.0])
    # errors: twin 0 (-1, 1), twin 1 (2, -1); per sample 1 + 4 = 5 and 1 + 1 = 2; mean 3.5
    np.testing.assert_allclose(sac.critic_loss(q, target), 1.75, rtol=1e-6)
    grad = jax.grad(sac.critic_loss)(q, target)
    np.testing.assert_allclose(grad, [[-0.5, 0.5], [1.0, -0.5]], rtol=1e-6)  # (q - target) / B


def test_actor_loss_is_alpha_log_prob_minus_the_smaller_q():
    log_prob = jnp.array([-1.0, 0.5, 2.0])
    q = jnp.array([[3.0, -1.0, 0.0], [2.0, 4.0, 1.0]])
    alpha = jnp.float32(0.5)
    # (0.5 * -1 - 2) + (0.5 * 0.5 - -1) + (0.5 * 2 - 0) = -2.5 + 1.25 + 1 = -0.25, mean / 3
    np.testing.assert_allclose(sac.actor_loss(log_prob, q, alpha), -0.25 / 3, rtol=1e-6)
    d_log_prob, d_q = jax.grad(sac.actor_loss, argnums=(0, 1))(log_prob, q, alpha)
    np.testing.assert_allclose(d_log_prob, np.full(3, 0.5 / 3), rtol=1e-6)
    np.testing.assert_allclose(d_q, [[0.0, -1 / 3, -1 / 3], [-1 / 3, 0.0, 0.0]], rtol=1e-6)


def test_alpha_loss_raises_alpha_while_entropy_is_below_target():
    target_entropy = -1.0
    low_entropy = jnp.array([2.0, 3.0])  # log-probs: entropy about -2.5 < -1
    high_entropy = jnp.array([-1.0, -2.0])  # entropy about 1.5 > -1
    log_alpha = jnp.float32(np.log(0.1))
    # hand-computed: -log_alpha * mean(log_prob + target_entropy) = -log(0.1) * 1.5
    np.testing.assert_allclose(sac.alpha_loss(log_alpha, low_entropy, target_entropy),
                               -np.log(0.1) * 1.5, rtol=1e-6)
    step = jax.grad(sac.alpha_loss)
    assert step(log_alpha, low_entropy, target_entropy) < 0  # descent raises log alpha
    assert step(log_alpha, high_entropy, target_entropy) > 0  # descent lowers it
    # the log-probabilities are constants here: no gradient reaches the policy
    d_log_prob = jax.grad(sac.alpha_loss, argnums=1)(log_alpha, low_entropy, target_entropy)
    assert not np.asarray(d_log_prob).any()


def _setup(batch: int = 16):
    """Small networks, their parameters and a batch whose actions lie in the box [-2, 2]."""
    actor, critic = sac.Actor(1, (8, 8)), sac.Critic((8, 8))
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    obs = jax.random.normal(keys[0], (batch, 3))
    critic_params = init_twin_critics(critic, keys[1], obs[:1], 1)
    trainable = sac.Trainable(actor.init(keys[2], obs[:1]), critic_params,
                              jnp.float32(np.log(0.3)))
    target_critic = init_twin_critics(critic, keys[3], obs[:1], 1)
    data = dict(obs=obs, action=jax.random.uniform(keys[4], (batch, 1), minval=-2, maxval=2),
                reward=jax.random.normal(keys[5], (batch,)),
                terminated=jnp.arange(batch) % 2 == 0,
                next_obs=jax.random.normal(keys[6], (batch, 3)))
    noise = jax.random.normal(keys[7], (2, batch, 1))
    loss = functools.partial(sac.sac_loss, actor=actor, critic=critic, low=jnp.full(1, -2.0),
                             high=jnp.full(1, 2.0), gamma=0.99, reward_scale=1.0,
                             target_entropy=-1.0)
    return loss, trainable, target_critic, data, noise


@pytest.mark.slow
def test_each_loss_of_the_sum_reaches_only_its_own_parameters():
    loss, trainable, target_critic, data, noise = _setup()

    def part(name):
        return jax.grad(lambda t: loss(t, target_critic, data, noise[0], noise[1])[1][name])(
            trainable)

    critic, actor, alpha = part("critic_loss"), part("actor_loss"), part("alpha_loss")
    total = jax.grad(lambda t: loss(t, target_critic, data, noise[0], noise[1])[0])(trainable)
    nonzero = lambda tree: any(np.asarray(x).any() for x in jax.tree.leaves(tree))  # noqa: E731
    assert nonzero(critic.critic) and not nonzero((critic.actor, critic.log_alpha))
    assert nonzero(actor.actor) and not nonzero((actor.critic, actor.log_alpha))
    assert nonzero(alpha.log_alpha) and not nonzero((alpha.actor, alpha.critic))
    jax.tree.map(lambda t, a, b, c: np.testing.assert_allclose(t, a + b + c, rtol=1e-5,
                                                               atol=1e-7),
                 total, critic, actor, alpha)


def test_critic_target_ignores_next_observations_after_termination_only():
    """Terminated rows (even ones) cut the bootstrap; the others, truncated steps stored with
    their pre-reset next observation included, bootstrap through it."""
    loss, trainable, target_critic, data, noise = _setup()

    def critic_loss(next_obs):
        return loss(trainable, target_critic, {**data, "next_obs": next_obs},
                    noise[0], noise[1])[1]["critic_loss"]

    base = critic_loss(data["next_obs"])
    moved_terminated = data["next_obs"].at[0::2].add(3.0)
    moved_running = data["next_obs"].at[1::2].add(3.0)
    np.testing.assert_array_equal(critic_loss(moved_terminated), base)
    assert abs(float(critic_loss(moved_running)) - float(base)) > 1e-4


def test_twins_applied_apart_give_the_vmapped_twins_values_and_gradients():
    """`apart=True` (continuous CQL's faster form on CPU) computes what the vmapped twins do:
    each twin's own Q, gradients equal to float32 rounding."""
    critic = Critic((16, 16))
    params = init_twin_critics(critic, jax.random.key(0), jnp.zeros((1, 3)), 2)
    obs = jax.random.normal(jax.random.key(1), (40, 3))
    actions = jax.random.uniform(jax.random.key(2), (40, 2), minval=-1.0, maxval=1.0)
    vmapped, apart = (twin_q_values(critic, params, obs, actions, apart=flag)
                      for flag in (False, True))
    assert apart.shape == (2, 40)
    np.testing.assert_allclose(apart, vmapped, rtol=1e-6)
    first = critic.apply(jax.tree.map(lambda leaf: leaf[0], params), obs, actions)
    np.testing.assert_allclose(apart[0], first, rtol=1e-6)
    assert not np.allclose(apart[0], apart[1])  # two critics, not one twice

    def grads(flag):
        return jax.grad(lambda p: jnp.sum(jnp.square(
            twin_q_values(critic, p, obs, actions, apart=flag))))(params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 grads(False), grads(True))
