"""The QR-free orthogonal initialiser (orthonormal, scaled, vmappable, keyed) and SameConv."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys.networks import orthogonal


@pytest.mark.parametrize("shape", [(4, 64), (64, 64), (64, 2), (3, 5, 8)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    w = np.asarray(orthogonal(2.0)(jax.random.PRNGKey(0), shape)).reshape(-1, shape[-1])
    gram = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(w.shape)), atol=1e-5)


def test_orthogonal_under_vmap_matches_single_calls_and_differs_by_key():
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    init = orthogonal(1.0)
    batched = np.asarray(jax.jit(jax.vmap(lambda k: init(k, (8, 8))))(keys))
    for i, key in enumerate(keys):
        np.testing.assert_allclose(batched[i], np.asarray(init(key, (8, 8))), atol=1e-6)
    assert not np.allclose(batched[0], batched[1])


def test_same_conv_equals_flax_conv_in_values_and_gradients():
    """SameConv (gradients written as canonical convolutions, fast in loops on CPU) is
    nn.Conv with stride 1 and SAME padding: same initial parameters, outputs and gradients."""
    import flax.linen as nn

    from jaxrl_sys.networks import SameConv

    x = jax.random.normal(jax.random.PRNGKey(1), (3, 7, 9, 5))
    ours, flax_conv = SameConv(4, (3, 5)), nn.Conv(4, (3, 5))
    params = ours.init(jax.random.PRNGKey(0), x)
    flax_params = flax_conv.init(jax.random.PRNGKey(0), x)
    chex.assert_trees_all_equal(params, flax_params)

    def grads(module):
        return jax.grad(lambda p, x: jnp.sum(jnp.sin(module.apply(p, x))), argnums=(0, 1))(
            params, x)

    np.testing.assert_allclose(ours.apply(params, x), flax_conv.apply(params, x), atol=1e-5)
    chex.assert_trees_all_close(grads(ours), grads(flax_conv), atol=1e-5)
    with pytest.raises(ValueError, match="odd kernel sizes"):
        SameConv(4, (2, 2)).init(jax.random.PRNGKey(0), x)
