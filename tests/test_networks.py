"""The QR-free orthogonal initialiser (orthonormal, scaled, vmappable, keyed) and SameConv."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys.core.networks import orthogonal


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

    from jaxrl_sys.core.networks import SameConv

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


def test_grid_torso_convolves_neighbours_and_is_shared_by_both_ppo_heads():
    """The MinAtar torso: a 3x3 conv of 16 channels over [B, H, W, C] grids (bool cast to
    float), then the hidden layers; PPO shares it between actor and critic; DQN's Q-network
    takes it; non-image observations are refused with one line."""
    from jaxrl_sys.agents import dqn
    from jaxrl_sys.core.config import ConfigError
    from jaxrl_sys.core.networks import ActorCritic, GridCNN, check_torso_fits

    grid = jax.random.bernoulli(jax.random.PRNGKey(0), 0.2, (2, 10, 10, 4))
    torso = GridCNN(hidden=(32,))
    params = torso.init(jax.random.PRNGKey(1), grid)
    assert params["params"]["SameConv_0"]["kernel"].shape == (3, 3, 4, 16)
    assert params["params"]["MLP_0"]["Dense_0"]["kernel"].shape == (10 * 10 * 16, 32)
    features = torso.apply(params, grid)
    assert features.shape == (2, 32)
    np.testing.assert_allclose(features, torso.apply(params, grid.astype(jnp.float32)))

    net = ActorCritic(action_dim=3, discrete=True, hidden=(32,), activation="relu",
                      torso="grid_cnn")
    net_params = net.init(jax.random.PRNGKey(2), grid)
    assert set(net_params["params"]) == {"shared_torso", "actor_head", "critic_head"}
    logits, value = net.apply(net_params, grid)
    assert logits.shape == (2, 3) and value.shape == (2,)

    q_net = dqn.QNetwork(num_actions=5, hidden=(32,), activation="relu", dueling=False,
                         torso="grid_cnn")
    assert q_net.apply(q_net.init(jax.random.PRNGKey(3), grid), grid).shape == (2, 5)

    check_torso_fits("grid_cnn", (10, 10, 4), "Asterix-MinAtar")
    check_torso_fits("mlp", (4,), "CartPole-v1")
    with pytest.raises(ConfigError, match=r"torso=grid_cnn needs image observations .* \(4,\)"):
        check_torso_fits("grid_cnn", (4,), "CartPole-v1")
