"""MuZero's targets and loss against hand-computed values and small NumPy references."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import muzero
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.value_transform import Support

REWARDS = np.array([1.0, 2.0, 4.0, 8.0, 16.0], np.float32)


def hand_batch(terminated, truncated, valid, obs_dim=1, num_actions=2):
    """Rows [B, 5] with rewards 1, 2, 4, 8, 16, next observations whose first feature is
    10 * (t + 1), the value `first_feature` reads at step t, and stored root values
    100 * (t + 1) at step t."""
    terminated, truncated, valid = (np.asarray(x, bool) for x in (terminated, truncated, valid))
    b, length = terminated.shape
    next_obs = np.zeros((b, length, obs_dim), np.float32)
    next_obs[..., 0] = 10.0 * (np.arange(length) + 1)
    return muzero.Batch(
        obs=jnp.zeros((b, length, obs_dim)), action=jnp.zeros((b, length), jnp.int32),
        reward=jnp.asarray(np.tile(REWARDS, (b, 1))), terminated=jnp.asarray(terminated),
        truncated=jnp.asarray(truncated), next_obs=jnp.asarray(next_obs),
        policy=jnp.full((b, length, num_actions), 1.0 / num_actions),
        legal=jnp.ones((b, length, num_actions), bool), valid=jnp.asarray(valid),
        weights=jnp.ones(b),
        root_value=jnp.asarray(np.tile(100.0 * (np.arange(length) + 1), (b, 1)), jnp.float32),
    )


def first_feature(obs):
    """A stand-in target network: the value of an observation [N, 1] is its feature."""
    return obs[:, 0]


def test_value_targets_stop_at_a_termination_inside_the_window():
    # K = 2, n = 3, discount 0.5; the episode terminates at step 2
    batch = hand_batch([[0, 0, 1, 0, 0]], np.zeros((1, 5)), np.ones((1, 5)))
    z = muzero.bootstrapped_value_targets(batch, first_feature, 2, 3, 0.5)
    # k=0: 1 + 0.5*2 + 0.25*4 (no bootstrap past the end); k=1: 2 + 0.5*4; k=2: 4
    np.testing.assert_allclose(np.asarray(z), [[3.0, 4.0, 4.0]])


def test_value_targets_of_a_two_player_game_flip_sign_every_ply():
    # discount -1: every reward and the bootstrapped value belong to the player who moves
    batch = hand_batch([[0] * 5, [0] * 5], [[0, 0, 0, 1, 0], [0] * 5],
                       [[1] * 5, [1, 1, 1, 1, 0]])
    z = muzero.bootstrapped_value_targets(batch, first_feature, 2, 3, -1.0)
    # k=0: 1 - 2 + 4 - v(after step 2)=30; k=1: 2 - 4 + 8 - v(after step 3)=40;
    # k=2: 4 - 8, then +v(after step 3) = 40: the truncation (row 0) and the replay's write
    # head (row 1) both stop the window at step 3 and bootstrap there
    np.testing.assert_allclose(np.asarray(z), [[-27.0, -34.0, 36.0], [-27.0, -34.0, 36.0]])


def search_targets(batch, unroll_steps, n_step, discount):
    return muzero.search_value_targets(batch.reward, batch.root_value, batch.terminated,
                                       batch.truncated, batch.valid, unroll_steps, n_step,
                                       discount)


def test_search_value_targets_bootstrap_from_the_stored_root_value_n_steps_on():
    # K = 2, n = 2, discount 0.5; rows of 5 = K + n + 1 steps; root values 100 * (t + 1)
    batch = hand_batch(np.zeros((1, 5)), np.zeros((1, 5)), np.ones((1, 5)))
    z = search_targets(batch, 2, 2, 0.5)
    # k: r_k + 0.5 r_{k+1} + 0.25 v_{k+2}
    np.testing.assert_allclose(np.asarray(z), [[1 + 1 + 75, 2 + 2 + 100, 4 + 4 + 125]])


def test_search_value_targets_stop_at_a_termination_without_bootstrap():
    batch = hand_batch([[0, 1, 0, 0, 0]], np.zeros((1, 5)), np.ones((1, 5)))
    z = search_targets(batch, 2, 2, 0.5)
    # k=0: 1 + 0.5 * 2, the end; k=1: 2; k=2 lies past the end (masked by unroll_masks)
    np.testing.assert_allclose(np.asarray(z)[:, :2], [[2.0, 2.0]])


def test_search_value_targets_end_at_the_last_searched_state_before_a_reset_or_the_head():
    # row 0 truncated at step 1 (the env reset: the state after it was never searched);
    # row 1's step 2 is not yet written (the replay's write head): both stop at step 1's value
    batch = hand_batch(np.zeros((2, 5)), [[0, 1, 0, 0, 0], [0] * 5],
                       [[1] * 5, [1, 1, 0, 0, 0]])
    z = search_targets(batch, 1, 2, -0.5)
    # k=0: 1 - 0.5 * v_1; k=1: v_1 itself, the window's first state
    np.testing.assert_allclose(np.asarray(z), [[1 - 100.0, 200.0], [1 - 100.0, 200.0]])


@pytest.mark.slow
def test_search_bootstrap_needs_no_target_network():
    loss, params, target, batch, _, network, config = loss_setup("learned")
    config = dataclasses.replace(config, value_bootstrap="search")
    length = config.sequence_length
    batch = jax.tree.map(lambda x: jnp.concatenate([x, x[:, -1:]], 1) if x.ndim > 1 else x,
                         batch)
    assert batch.reward.shape[1] == length
    search_loss = functools.partial(loss, config=config)
    alive, _ = muzero.unroll_masks(batch.terminated, batch.truncated, batch.valid, K)
    z = search_targets(batch, K, N_STEP, config.gamma)
    mean = float(jnp.mean(jnp.where(alive, z, 0.0)[:, 0]))
    for source in (target, params):
        value, (_, aux) = search_loss(params, source, batch)
        assert np.isclose(float(aux["value_target_mean"]), mean, rtol=1e-6)
    assert float(search_loss(params, target, batch)[0]) == float(search_loss(params, params,
                                                                             batch)[0])


def numpy_h(x, eps=1e-3):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + eps * x


def numpy_categorical_ce(logits, x, support: Support):
    """-sum p log softmax(logits), p the two-hot of h(x) on the support's points."""
    points = np.linspace(support.low, support.high, support.num_bins)
    y = np.clip(numpy_h(x), support.low, support.high)
    probs = np.zeros(support.num_bins)
    i = min(int(np.searchsorted(points, y, side="right")) - 1, support.num_bins - 2)
    upper = (y - points[i]) / (points[i + 1] - points[i])
    probs[i], probs[i + 1] = 1.0 - upper, upper
    log_softmax = logits - np.log(np.sum(np.exp(logits - logits.max()))) - logits.max()
    return -np.sum(probs * log_softmax)


def test_categorical_loss_of_a_scalar_goes_through_h_and_the_support():
    support = Support(-2.0, 2.0, 5)  # points -2, -1, 0, 1, 2
    logits = np.array([0.3, -1.0, 0.5, 2.0, -0.2], np.float32)
    # h(3) = sqrt(4) - 1 + 0.003 = 1.003: 0.997 on point 1, 0.003 on point 2
    log_softmax = logits - np.log(np.sum(np.exp(logits)))
    by_hand = -(0.997 * log_softmax[3] + 0.003 * log_softmax[4])
    got = muzero.categorical_cross_entropy(jnp.asarray(logits), jnp.float32(3.0), support)
    np.testing.assert_allclose(float(got), by_hand, rtol=1e-5)
    # beyond the support's edge (h(-100) = -9.15) all mass is on the lowest point
    got = muzero.categorical_cross_entropy(jnp.asarray(logits), jnp.float32(-100.0), support)
    np.testing.assert_allclose(float(got), -log_softmax[0], rtol=1e-5)
    # the value support of a config, random logits and scalars
    value_support, _ = muzero.supports(muzero.Config(value_max=50.0, support_bins=21))
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(64, 21)).astype(np.float32)
    scalars = rng.uniform(-60, 60, size=64).astype(np.float32)
    got = muzero.categorical_cross_entropy(jnp.asarray(logits), jnp.asarray(scalars),
                                           value_support)
    want = [numpy_categorical_ce(l, x, value_support) for l, x in zip(logits, scalars)]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


K, N_STEP = 3, 2


def loss_setup(model: str):
    """A small CartPole network and a batch [4, K + n] whose episodes end inside the unroll:
    terminated at step 0, 1 and 2 of rows 0-2, truncated at step 1 of row 3."""
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(
        muzero.Config(), unroll_steps=K, n_step=N_STEP, latent_dim=8, hidden=(16,),
        support_bins=11, rule_heads=True, model=model, value_max=20.0,
    )
    network = muzero.build_network(env.spec, config)
    params = muzero.init(jax.random.PRNGKey(0), env.spec, config).params
    target = muzero.init(jax.random.PRNGKey(1), env.spec, config).params
    length = K + N_STEP
    ends = [0, 1, 2, 1]
    terminated = np.zeros((4, length), bool)
    truncated = np.zeros((4, length), bool)
    for row, end in enumerate(ends[:3]):
        terminated[row, end] = True
    truncated[3, ends[3]] = True
    keys = jax.random.split(jax.random.PRNGKey(2), 6)
    batch = muzero.Batch(
        obs=jax.random.normal(keys[0], (4, length, 4)),
        action=jax.random.randint(keys[1], (4, length), 0, 2),
        reward=jax.random.normal(keys[2], (4, length)),
        terminated=jnp.asarray(terminated), truncated=jnp.asarray(truncated),
        next_obs=jax.random.normal(keys[3], (4, length, 4)),
        policy=jax.nn.softmax(jax.random.normal(keys[4], (4, length, 2))),
        legal=jax.random.bernoulli(keys[5], 0.7, (4, length, 2)),
        valid=jnp.ones((4, length), bool), weights=jnp.array([1.0, 0.5, 0.8, 0.3]),
        root_value=jax.random.normal(keys[0], (4, length)) * 5.0,
    )
    value_support, reward_support = muzero.supports(config)
    loss = functools.partial(
        muzero.muzero_loss, network=network, config=config, value_support=value_support,
        reward_support=reward_support, discount=config.gamma)
    return loss, params, target, batch, ends, network, config


@pytest.mark.parametrize("model", ["learned", "env"])
def test_data_past_an_episode_end_changes_neither_loss_nor_gradient(model):
    loss, params, target, batch, ends, _, _ = loss_setup(model)
    grad = jax.jit(jax.value_and_grad(loss, has_aux=True))
    (value, _), grads = grad(params, target, batch)
    past = np.arange(K + N_STEP)[None, :] > np.asarray(ends)[:, None]  # [B, L]
    garbage = jax.random.normal(jax.random.PRNGKey(9), batch.obs.shape) * 100.0
    changed = batch.replace(
        obs=jnp.where(past[..., None], garbage, batch.obs),
        next_obs=jnp.where(past[..., None], -garbage, batch.next_obs),
        reward=jnp.where(past, 50.0, batch.reward),
        policy=jnp.where(past[..., None], jnp.array([1.0, 0.0]), batch.policy),
        legal=jnp.where(past[..., None], ~batch.legal, batch.legal),
    )
    (value_changed, _), grads_changed = grad(params, target, changed)
    np.testing.assert_allclose(float(value_changed), float(value), rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                 grads_changed, grads)
    # the same change before the end does move the loss (the check above can fail)
    before = batch.replace(reward=jnp.where(past, batch.reward, 50.0))
    (value_before, _), _ = grad(params, target, before)
    assert abs(float(value_before) - float(value)) > 1e-3


@pytest.mark.slow
def test_predictions_past_the_end_get_no_gradient():
    """Policy logits past the episode end, and value and reward logits past a truncation,
    get zero gradient; value and reward after a termination are trained (towards 0)."""
    _, _, _, batch, _, _, config = loss_setup("learned")
    value_support, reward_support = muzero.supports(config)
    alive, absorbing = muzero.unroll_masks(batch.terminated, batch.truncated, batch.valid, K)
    policy_mask = alive.astype(jnp.float32)
    value_mask = (alive | absorbing).astype(jnp.float32)
    z = jnp.where(alive, 3.0, 0.0)
    reward_targets = jnp.where(alive[:, :K], 1.0, 0.0)
    logits = tuple(jax.random.normal(k, shape) for k, shape in zip(
        jax.random.split(jax.random.PRNGKey(3), 3),
        [(4, K + 1, 2), (4, K + 1, 11), (4, K, 11)]))

    def total(policy_logits, value_logits, reward_logits):
        terms = muzero.prediction_losses(
            policy_logits, value_logits, reward_logits, batch.policy[:, : K + 1], z,
            reward_targets, policy_mask, value_mask, value_mask[:, :K],
            muzero.unroll_step_weights(K), value_support, reward_support)
        return jnp.sum(terms.value + terms.policy + terms.reward)

    grads = jax.grad(total, argnums=(0, 1, 2))(*logits)
    touched = [np.abs(np.asarray(g)).max(-1) > 0 for g in grads]  # [B, K+1] / [B, K]
    np.testing.assert_array_equal(touched[0], np.asarray(alive))
    np.testing.assert_array_equal(touched[1], np.asarray(alive | absorbing))
    np.testing.assert_array_equal(touched[2], np.asarray(alive | absorbing)[:, :K])
    # rows 0-2 terminated inside the unroll, row 3 was truncated: both cases are exercised
    assert np.asarray(absorbing).sum() == 6 and not np.asarray(alive)[3, 2:].any()


def test_value_targets_come_from_the_target_network():
    loss, params, target, batch, _, network, config = loss_setup("learned")
    value_support, _ = muzero.supports(config)
    alive, _ = muzero.unroll_masks(batch.terminated, batch.truncated, batch.valid, K)
    _, (_, aux) = loss(params, target, batch)
    for source, should_match in ((target, True), (params, False)):
        z = muzero.bootstrapped_value_targets(
            batch, lambda obs: muzero.observation_values(network, value_support, source, obs),
            K, N_STEP, config.gamma)
        mean = float(jnp.mean(jnp.where(alive, z, 0.0)[:, 0]))
        assert np.isclose(mean, float(aux["value_target_mean"]), rtol=1e-6) == should_match


def test_mixed_value_targets_move_z_towards_the_stored_root_value():
    """(1 - mix) z + mix q, by hand: 0 keeps the returns, 1 gives the root values."""
    z = jnp.array([[1.0, -1.0, 0.0]])
    q = jnp.array([[0.5, 0.25, -0.5]])
    np.testing.assert_array_equal(muzero.mixed_value_targets(z, q, 0.0), z)
    np.testing.assert_allclose(muzero.mixed_value_targets(z, q, 0.5), [[0.75, -0.375, -0.25]])
    np.testing.assert_allclose(muzero.mixed_value_targets(z, q, 1.0), q)


def test_value_target_mix_reaches_the_loss_through_the_stored_root_values():
    """With `value_target_mix` 0.5 the loss's mean target at each row's first step is the
    mean of the bootstrapped return and the stored root value there (alive rows)."""
    loss, params, target, batch, _, network, config = loss_setup("env")
    value_support, _ = muzero.supports(config)
    mixed = dataclasses.replace(config, value_target_mix=0.5)
    mixed_loss = functools.partial(
        muzero.muzero_loss, network=network, config=mixed, value_support=value_support,
        reward_support=muzero.supports(config)[1], discount=config.gamma)
    alive, _ = muzero.unroll_masks(batch.terminated, batch.truncated, batch.valid, K)
    z = muzero.bootstrapped_value_targets(
        batch, lambda obs: muzero.observation_values(network, value_support, target, obs),
        K, N_STEP, config.gamma)
    expected = jnp.where(alive, 0.5 * z + 0.5 * batch.root_value[:, : K + 1], 0.0)[:, 0]
    _, (_, aux) = mixed_loss(params, target, batch)
    np.testing.assert_allclose(float(aux["value_target_mean"]), float(jnp.mean(expected)),
                               rtol=1e-5)
    _, (_, plain) = loss(params, target, batch)
    assert not np.isclose(float(aux["value_target_mean"]), float(plain["value_target_mean"]))


def test_later_unroll_steps_weigh_one_over_k():
    np.testing.assert_allclose(muzero.unroll_step_weights(4), [1.0, 0.25, 0.25, 0.25, 0.25])


def unrolled_value_grads(unroll_steps: int, scale: float, step: int):
    """Gradients of the summed value logits at unroll step `step` of a small CartPole model
    unrolled `unroll_steps` steps with the latent's gradient scaled by `scale`."""
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(muzero.Config(), unroll_steps=unroll_steps, latent_dim=8,
                                 hidden=(16,), support_bins=11)
    network = muzero.build_network(env.spec, config)
    params = muzero.init(jax.random.PRNGKey(0), env.spec, config).params
    obs = jax.random.normal(jax.random.PRNGKey(1), (3, 4))
    actions = jax.random.randint(jax.random.PRNGKey(2), (3, unroll_steps), 0, 2)

    def value_at_step(params):
        unrolled = muzero.unroll_model(network, params, obs, actions, scale)
        return jnp.sum(unrolled.value[:, step] * jnp.arange(11.0))

    return jax.grad(value_at_step)(params)["params"]


@pytest.mark.slow
def test_each_unroll_step_trains_the_dynamics_at_full_strength():
    """The paper's gradient scaling: a step's own prediction reaches the dynamics unscaled
    (K=1), and only what flows back through the latent passed on to the next dynamics step
    is scaled (K=2: the representation gets exactly half of step 2's gradient)."""
    scaled, unscaled = unrolled_value_grads(1, 0.5, 1), unrolled_value_grads(1, 1.0, 1)
    for part in ("dynamics_mlp", "next_latent"):
        jax.tree.map(np.testing.assert_array_equal, scaled[part], unscaled[part])
        assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(scaled[part])) > 0
    scaled, unscaled = unrolled_value_grads(2, 0.5, 2), unrolled_value_grads(2, 1.0, 2)
    for part in ("torso", "to_latent"):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, 0.5 * b, rtol=1e-6, atol=1e-9),
                     scaled[part], unscaled[part])
        assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(scaled[part])) > 0


@pytest.mark.slow
def test_consistency_loss_pulls_predicted_latents_towards_the_reached_observation():
    """EfficientZero's loss: -1 per alive unroll step (weighed 1/K) when the predictor maps each
    predicted latent onto the projection of the observation reached; the reached side gets
    no gradient; and the loss is on only when its weight is positive."""
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(muzero.Config(), unroll_steps=2, latent_dim=8, hidden=(16,),
                                 support_bins=11, consistency_loss_weight=2.0)
    network = muzero.build_network(env.spec, config)
    params = muzero.init(jax.random.PRNGKey(0), env.spec, config).params
    obs = jax.random.normal(jax.random.PRNGKey(1), (3, 2, 4))
    reached = jax.vmap(lambda o: network.apply(params, o, method=muzero.MuZeroNetwork.represent),
                       1, 1)(obs)  # the reached observations' own latents [B, K, D]
    alive = jnp.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    weights = muzero.unroll_step_weights(2)

    def loss_of(params, predicted):
        return muzero.consistency_loss(network, params, predicted, obs, alive, weights)

    loss = loss_of(params, reached)
    assert loss.shape == (3,) and np.all(np.asarray(loss) <= 0.5 * np.asarray(alive.sum(1)))
    assert np.asarray(loss)[2] == 0.0  # no alive step, no loss
    # the reached side is a stop-gradient target: changing the representation only through it
    # leaves the gradient of the predicted side's parameters alone
    grads = jax.grad(lambda p: loss_of(p, jax.lax.stop_gradient(reached)).sum())(params)
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(grads["params"]["torso"])) == 0
    assert max(float(jnp.abs(g).max())
               for g in jax.tree.leaves(grads["params"]["predictor_mlp"])) > 0
    off = dataclasses.replace(config, consistency_loss_weight=0.0)
    assert "projection_mlp" not in muzero.init(jax.random.PRNGKey(0), env.spec, off).params[
        "params"]


def test_reconstruction_loss_decodes_every_latent_against_its_observation():
    """The decoder's mean squared error per alive unroll step (step 0 weighs 1, later steps
    1/K), equal to decoding each latent by hand; masked steps add nothing; the gradient
    reaches the dynamics only through the later steps; and the decoder exists only when the
    loss's weight is positive."""
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(muzero.Config(), unroll_steps=2, latent_dim=8, hidden=(16,),
                                 support_bins=11, reconstruction_loss_weight=1.0)
    network = muzero.build_network(env.spec, config)
    params = muzero.init(jax.random.PRNGKey(0), env.spec, config).params
    first_obs = jax.random.normal(jax.random.PRNGKey(1), (3, 4))
    observations = jax.random.normal(jax.random.PRNGKey(2), (3, 3, 4))
    actions = jnp.array([[0, 1], [1, 1], [0, 0]])
    alive = jnp.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    weights = muzero.unroll_step_weights(2)

    def loss_of(params):
        unrolled = muzero.unroll_model(network, params, first_obs, actions, 0.5)
        return muzero.reconstruction_loss(network, params, unrolled, observations, alive,
                                          weights)

    unrolled = muzero.unroll_model(network, params, first_obs, actions, 0.5)
    latents = np.concatenate([np.asarray(unrolled.first_latent)[:, None],
                              np.asarray(unrolled.latent)], 1)
    decode = lambda x: np.asarray(network.apply(  # noqa: E731
        params, jnp.asarray(x), method=muzero.MuZeroNetwork.decode))
    errors = np.stack([np.mean((decode(latents[:, t]) - np.asarray(observations[:, t])) ** 2, -1)
                       for t in range(3)], 1)  # [B, K+1]
    expected = np.sum(errors * np.asarray(alive) * weights, 1)
    np.testing.assert_allclose(np.asarray(loss_of(params)), expected, rtol=1e-5)

    only_first = lambda p: muzero.reconstruction_loss(  # noqa: E731
        network, p, muzero.unroll_model(network, p, first_obs, actions, 0.5), observations,
        alive.at[:, 1:].set(0.0), weights).sum()
    largest = lambda g, part: max(float(jnp.abs(x).max())  # noqa: E731
                                  for x in jax.tree.leaves(g["params"][part]))
    assert largest(jax.grad(only_first)(params), "dynamics_mlp") == 0
    assert largest(jax.grad(lambda p: loss_of(p).sum())(params), "dynamics_mlp") > 0
    off = dataclasses.replace(config, reconstruction_loss_weight=0.0)
    assert "decoder_mlp" not in muzero.init(jax.random.PRNGKey(0), env.spec, off).params["params"]
    with pytest.raises(ConfigError, match="reconstruction_loss_weight needs model='learned'"):
        dataclasses.replace(config, model="env").validate()


def test_decoder_takes_the_hidden_widths_by_default_and_can_be_one_linear_map():
    """decoder_hidden None copies `hidden`; () decodes the latent [B, D] with one linear map
    straight to the observation [B, F]; without the reconstruction loss it is refused."""
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(muzero.Config(), latent_dim=8, hidden=(16, 12),
                                 support_bins=11, reconstruction_loss_weight=1.0)
    kernels = lambda c: {(part, name): layer["kernel"].shape  # noqa: E731
                         for part in ("decoder_mlp", "decoder_out")
                         for name, layer in muzero.init(jax.random.PRNGKey(0), env.spec, c)
                         .params["params"].get(part, {}).items()}
    assert sorted(kernels(config).values()) == [(8, 16), (12, 4), (16, 12)]
    linear = dataclasses.replace(config, decoder_hidden=())
    assert list(kernels(linear).values()) == [(8, 4)]
    assert sorted(kernels(dataclasses.replace(config, decoder_hidden=(5,))).values()) == [
        (5, 4), (8, 5)]
    with pytest.raises(ConfigError, match="decoder_hidden needs reconstruction_loss_weight"):
        dataclasses.replace(linear, reconstruction_loss_weight=0.0).validate()
    with pytest.raises(ConfigError, match="decoder_hidden must be positive layer widths"):
        dataclasses.replace(config, decoder_hidden=(0,)).validate()
