"""The Q family's distributional losses (issue 52): C51's projection by hand, mass beyond the
support going to its ends, and quantile regression recovering a known distribution."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.agents.dqn import losses

SUPPORT = jnp.array([-2.0, -1.0, 0.0, 1.0, 2.0])


def _target(next_probs, returns, discounts):
    return np.asarray(losses.c51_target(SUPPORT, jnp.asarray(next_probs, jnp.float32),
                                        jnp.asarray(returns, jnp.float32),
                                        jnp.asarray(discounts, jnp.float32)))


def test_c51_projection_splits_mass_between_neighbouring_atoms():
    one_hot = [[0.0, 1.0, 0.0, 0.0, 0.0]]  # all mass at -1
    # -1 moved by +0.5 lands halfway between -1 and 0
    np.testing.assert_allclose(_target(one_hot, [0.5], [1.0]), [[0, 0.5, 0.5, 0, 0]],
                               atol=1e-6)
    # discount 0 (terminated): the return alone, 0.25, is 3/4 at 0 and 1/4 at 1
    np.testing.assert_allclose(_target(one_hot, [0.25], [0.0]), [[0, 0, 0.75, 0.25, 0]],
                               atol=1e-6)
    # discount 0.5 halves the atoms' values before the shift: -1 -> -0.5 + 1.0 = 0.5
    np.testing.assert_allclose(_target(one_hot, [1.0], [0.5]), [[0, 0, 0.5, 0.5, 0]],
                               atol=1e-6)


def test_c51_projection_puts_mass_beyond_the_support_on_its_ends():
    uniform = [[0.2] * 5, [0.2] * 5]
    np.testing.assert_allclose(_target(uniform, [10.0, -10.0], [1.0, 1.0]),
                               [[0, 0, 0, 0, 1], [1, 0, 0, 0, 0]], atol=1e-6)
    target = _target([[0.1, 0.2, 0.3, 0.2, 0.2]], [0.7], [0.9])
    assert abs(target.sum() - 1.0) < 1e-6  # a distribution still


def test_c51_loss_is_the_cross_entropy_and_leaves_the_target_alone():
    target = jnp.array([[0.0, 0.25, 0.5, 0.25, 0.0]])
    logits = jnp.log(jnp.array([[0.1, 0.2, 0.4, 0.2, 0.1]]))
    expected = -(0.25 * np.log(0.2) + 0.5 * np.log(0.4) + 0.25 * np.log(0.2))
    np.testing.assert_allclose(np.asarray(losses.c51_loss(logits, target)), [expected],
                               rtol=1e-6)
    grad_target = jax.grad(lambda t: losses.c51_loss(logits, t).sum())(target)
    assert not np.any(np.asarray(grad_target))


def test_quantile_regression_recovers_a_known_distribution():
    """Descending the quantile loss against samples of U(0, 1) moves N quantiles to their
    fractions' midpoints (1/8, 3/8, 5/8, 7/8): the uniform's quantile function."""
    taus = (jnp.arange(4) + 0.5) / 4
    samples = ((jnp.arange(400) + 0.5) / 400)[None]
    loss = lambda q: losses.quantile_huber_loss(q, taus[None], samples, kappa=0.0).sum()  # noqa: E731
    step = jax.jit(lambda q: q - 0.05 * jax.grad(loss)(q))
    quantiles = jnp.zeros((1, 4))
    for _ in range(400):
        quantiles = step(quantiles)
    np.testing.assert_allclose(np.asarray(quantiles)[0], np.asarray(taus), atol=0.02)
    # with a Huber threshold the same fixed point holds for a symmetric spread of samples
    huber = lambda q: losses.quantile_huber_loss(q, taus[None], samples, kappa=0.01).sum()  # noqa: E731
    assert float(huber(jnp.asarray(taus)[None])) < float(huber(jnp.zeros((1, 4))))
