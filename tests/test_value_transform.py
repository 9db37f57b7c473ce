"""The h(x) transform, two-hot projection and their inverses."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys.core.value_transform import (
    Support, expectation, h, h_inverse, logits_to_scalar, scalar_to_probs, symmetric_support,
    two_hot,
)


def test_h_matches_its_definition_and_round_trips():
    x = np.concatenate([np.linspace(-1000, 1000, 2001), [-1e5, -0.5, 0.0, 1e-4, 0.5, 1e5]])
    y = np.asarray(h(jnp.asarray(x, jnp.float32)))
    expected = np.sign(x) * (np.sqrt(np.abs(x) + 1) - 1) + 1e-3 * x
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    back = np.asarray(h_inverse(jnp.asarray(y)))
    np.testing.assert_allclose(back, x, rtol=1e-4, atol=1e-3)


def test_h_is_odd_and_increasing():
    x = jnp.linspace(-500, 500, 10_001)
    y = h(x)
    assert np.all(np.diff(np.asarray(y)) > 0)
    np.testing.assert_allclose(np.asarray(h(-x)), -np.asarray(y), atol=1e-6)


def test_two_hot_puts_mass_on_the_two_neighbours_with_the_right_mean():
    support = Support(-2.0, 3.0, 11)  # step 0.5
    x = jnp.asarray([-2.0, -1.9, 0.0, 0.26, 2.75, 3.0])
    probs = np.asarray(two_hot(x, support))
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    assert np.all((probs > 0).sum(-1) <= 2)
    np.testing.assert_allclose(np.asarray(expectation(probs, support)), x, atol=1e-6)
    # 0.26 lies between points 0.0 (index 4) and 0.5 (index 5), 52% of the way
    np.testing.assert_allclose(probs[3, 4:6], [0.48, 0.52], atol=1e-6)


def test_two_hot_clips_outside_the_support():
    support = symmetric_support(5)
    probs = np.asarray(two_hot(jnp.asarray([-100.0, 100.0]), support))
    assert probs[0, 0] == pytest.approx(1.0) and probs[1, -1] == pytest.approx(1.0)


def test_scalar_encoding_and_logit_decoding_are_inverse():
    support = symmetric_support(20)
    x = jax.random.uniform(jax.random.PRNGKey(0), (1000,), minval=-400, maxval=400)
    logits = jnp.log(scalar_to_probs(x, support) + 1e-30)
    np.testing.assert_allclose(np.asarray(logits_to_scalar(logits, support)), np.asarray(x),
                               rtol=1e-3, atol=1e-2)


def test_support_rejects_degenerate_shapes():
    with pytest.raises(ValueError):
        Support(1.0, 1.0, 5)
    with pytest.raises(ValueError):
        Support(0.0, 1.0, 1)
