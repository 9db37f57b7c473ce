"""The QR-free orthogonal initialiser: orthonormal, scaled, vmappable, keyed."""

import jax
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
