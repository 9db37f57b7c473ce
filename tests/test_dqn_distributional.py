"""DQN's distributional heads (`distributional=c51|qr|iqn`) and noisy heads: Q-values are the
distributions' means, the losses on hand-made sequences are the ones the papers define, noise
is the factorised form and only where asked, and a placed run with prioritised replay and a
dueling head trains and ranks replay by the per-item loss."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn
from jaxrl_sys.agents.dqn import rainbow
from jaxrl_sys.agents.dqn import losses
from jaxrl_sys.agents.dqn.networks import (
    QNetwork, build_network, q_values, sampled_distribution,
)
from jaxrl_sys.core.networks import NoisyDense
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import place, placement_fns


def config_for(kind: str, **changes) -> dqn.Config:
    changes = {"num_atoms": 5, "v_min": -2.0, "v_max": 2.0, **changes}
    return dataclasses.replace(dqn.default_config("CartPole-v1"), distributional=kind,
                               **changes)


@pytest.mark.parametrize("dueling", [False, True])
@pytest.mark.parametrize("kind", ["c51", "qr"])
def test_q_values_are_the_means_of_the_distributions(kind, dueling):
    config = config_for(kind, dueling=dueling)
    network = build_network(envs.make("CartPole-v1").spec, config)
    obs = jax.random.normal(jax.random.PRNGKey(0), (3, 4))
    params = network.init(jax.random.PRNGKey(1), obs)
    dist = network.apply(params, obs, method=QNetwork.distribution)
    assert dist.shape == (3, 2, 5)
    if kind == "c51":
        want = (jax.nn.softmax(dist, axis=-1) * jnp.array([-2.0, -1.0, 0.0, 1.0, 2.0])).sum(-1)
    else:
        want = dist.mean(-1)
    np.testing.assert_allclose(np.asarray(network.apply(params, obs)), np.asarray(want),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(q_values(dist, kind, config.support)),
                               np.asarray(want), rtol=1e-6)


def test_support_and_checks():
    assert config_for("c51").support == (-2.0, -1.0, 0.0, 1.0, 2.0)
    assert config_for("qr").support == () and dqn.Config().support == ()
    config_for("iqn").validate()
    with pytest.raises(ConfigError, match="distributional"):
        config_for("mog").validate()
    with pytest.raises(ConfigError, match="noisy=True explores by its noise"):
        config_for("none", noisy=True).validate()
    config_for("none", noisy=True, epsilon_start=0.0, epsilon_end=0.0).validate()
    with pytest.raises(ConfigError, match="noisy"):
        config_for("none", noisy=True, epsilon_start=0.0, epsilon_end=0.0,
                   exploration="apex").validate()
    with pytest.raises(ConfigError, match="v_max"):
        config_for("c51", v_max=-3.0).validate()
    with pytest.raises(ConfigError, match="advantage_learning"):
        config_for("c51", advantage_learning=0.5).validate()


def hand_batch(reward: float, terminated: bool) -> dqn.Batch:
    """Two one-step sequences from the same state, action 1, one reward; the next state
    terminates or not."""
    ones = jnp.ones((2, 1))
    return dqn.Batch(obs=jnp.zeros((2, 1, 4)), action=jnp.ones((2, 1), jnp.int32),
                     reward=reward * ones, terminated=jnp.full((2, 1), terminated),
                     truncated=jnp.zeros((2, 1), bool), next_obs=jnp.ones((2, 1, 4)),
                     valid=jnp.ones((2, 1), bool), weights=jnp.ones(2))


def fixed_distribution(now: np.ndarray, after: np.ndarray):
    """A stand-in network: distributions [A, N] at the zero state and at the ones state."""
    def apply(params, obs, draw=None):
        at_zero = (obs.sum(-1) == 0)[:, None, None]
        return params * jnp.where(at_zero, jnp.asarray(now), jnp.asarray(after)), None
    return apply


def test_c51_loss_is_the_cross_entropy_to_the_projected_target():
    """Reward 0.5 and a next distribution all on atom 1.0 with gamma 0.5: the target lands on
    0.5 + 0.5 = 1.0 (that atom alone); terminated, it is the reward 0.5 split between the
    atoms 0 and 1 equally."""
    support = jnp.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    now = np.log(np.array([[0.2] * 5, [0.1, 0.1, 0.2, 0.3, 0.3]]))
    after = np.log(np.array([[0.2] * 5, [1e-9, 1e-9, 1e-9, 1.0, 1e-9]]))
    after[0] = -50.0  # action 0's Q is far below action 1's: the next action is 1
    kwargs = dict(distribution_fn=fixed_distribution(now, after),
                  q_fn=lambda d: q_values(d, "c51", tuple(support.tolist())), kind="c51",
                  support=support, gamma=0.5, double_q=False, kappa=1.0)
    _, (item, _) = losses.distributional_q_loss(1.0, 1.0, hand_batch(0.5, False), **kwargs)
    np.testing.assert_allclose(np.asarray(item), -np.log(0.3), rtol=1e-5)
    _, (item, _) = losses.distributional_q_loss(1.0, 1.0, hand_batch(0.5, True), **kwargs)
    want = -(0.5 * np.log(0.2) + 0.5 * np.log(0.3))
    np.testing.assert_allclose(np.asarray(item), want, rtol=1e-5)


def test_qr_loss_against_a_point_target_is_the_quantile_huber_loss():
    """Terminated with reward 0.3: every target sample is 0.3, and the loss of quantiles q_i at
    fractions tau_i is the sum over i (QR-DQN, eq. 10) of |tau_i - 1{0.3 < q_i}| * huber(0.3 - q_i)."""
    quantiles = np.array([[0.0] * 4, [-1.0, 0.0, 0.5, 2.0]])
    kwargs = dict(distribution_fn=fixed_distribution(quantiles, quantiles),
                  q_fn=lambda d: q_values(d, "qr", ()), kind="qr", support=jnp.zeros(0),
                  gamma=0.9, double_q=True, kappa=1.0)
    _, (item, q_mean) = losses.distributional_q_loss(1.0, 1.0, hand_batch(0.3, True), **kwargs)
    taus = (np.arange(4) + 0.5) / 4
    u = 0.3 - quantiles[1]
    huber = np.where(np.abs(u) <= 1.0, 0.5 * u ** 2, np.abs(u) - 0.5)
    want = np.sum(np.abs(taus - (u < 0)) * huber)
    np.testing.assert_allclose(np.asarray(item), want, rtol=1e-5)
    assert float(q_mean) == pytest.approx(0.375)


def test_iqn_loss_regresses_each_quantile_at_its_own_sampled_fraction():
    """IQN: the online pass's quantiles are at the fractions it drew, so against a point
    target (terminated, reward 0.3) the loss is QR's formula at those fractions; the draw
    changes them, and the same draw gives the same loss."""
    config = config_for("iqn", num_atoms=4, dueling=True)
    network = build_network(envs.make("CartPole-v1").spec, config)
    params = network.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))
    dist_fn = functools.partial(sampled_distribution, network, num_taus=4)
    kwargs = dict(distribution_fn=dist_fn, q_fn=lambda d: q_values(d, "iqn", ()), kind="iqn",
                  support=jnp.zeros(0), gamma=0.9, double_q=True, kappa=1.0)
    draw = losses.Draw(jax.random.PRNGKey(3), jax.random.split(jax.random.PRNGKey(4), 2))
    batch = hand_batch(0.3, True)
    _, (item, _) = losses.distributional_q_loss(params, params, batch, draw, **kwargs)
    quantiles, taus = dist_fn(params, batch.obs[:, 0], losses.independent_draw(draw, 2))
    assert taus.shape == (2, 4) and not np.allclose(taus[0], taus[1])
    u = 0.3 - np.asarray(quantiles[:, 1])
    huber = np.where(np.abs(u) <= 1.0, 0.5 * u ** 2, np.abs(u) - 0.5)
    want = np.sum(np.abs(np.asarray(taus) - (u < 0)) * huber, axis=-1)
    np.testing.assert_allclose(np.asarray(item), want, rtol=1e-5)
    again = losses.distributional_q_loss(params, params, batch, draw, **kwargs)[1][0]
    np.testing.assert_array_equal(np.asarray(again), np.asarray(item))
    other = losses.Draw(jax.random.PRNGKey(5), jax.random.split(jax.random.PRNGKey(6), 2))
    moved = losses.distributional_q_loss(params, params, batch, other, **kwargs)[1][0]
    assert not np.allclose(np.asarray(moved), np.asarray(item))


def test_iqn_q_values_average_the_quantiles_at_midpoint_fractions():
    config = config_for("iqn", num_atoms=4)
    network = build_network(envs.make("CartPole-v1").spec, config)
    obs = jax.random.normal(jax.random.PRNGKey(0), (3, 4))
    params = network.init(jax.random.PRNGKey(1), obs)
    midpoints = jnp.broadcast_to(losses.quantile_fractions(4), (3, 4))
    at_midpoints = network.apply(params, obs, midpoints, method=QNetwork.distribution)
    np.testing.assert_allclose(np.asarray(network.apply(params, obs)),
                               np.asarray(at_midpoints.mean(-1)), rtol=1e-6)
    lower = network.apply(params, obs, jnp.full((3, 4), 0.1), method=QNetwork.distribution)
    assert not np.allclose(np.asarray(lower), np.asarray(at_midpoints))


def test_noisy_layer_is_the_mean_without_noise_and_factorised_with_it():
    layer = NoisyDense(3)
    x = jax.random.normal(jax.random.PRNGKey(0), (5, 4))
    params = layer.init(jax.random.PRNGKey(1), x)["params"]
    mean = x @ params["mu_kernel"] + params["mu_bias"]
    np.testing.assert_allclose(np.asarray(layer.apply({"params": params}, x)), np.asarray(mean),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(params["sigma_kernel"]), 0.5 / 2.0)  # sigma0 / sqrt(4)
    # one draw per call: rows 0 (zeros) and e_i show the bias noise and the weight noise
    rows = jnp.concatenate([jnp.zeros((1, 4)), jnp.eye(4)])
    out = np.asarray(layer.apply({"params": params}, rows, rngs={"noise": jax.random.PRNGKey(2)}))
    p = {k: np.asarray(v) for k, v in params.items()}
    eps_out = (out[0] - p["mu_bias"]) / p["sigma_bias"]
    weight_noise = (out[1:] - out[0] - p["mu_kernel"]) / p["sigma_kernel"]  # [in, out]
    eps_in = weight_noise / eps_out  # factorised: the same in every column
    np.testing.assert_allclose(eps_in, np.broadcast_to(eps_in[:, :1], eps_in.shape), rtol=1e-4)
    assert np.abs(eps_out).min() > 0 and np.abs(eps_in).min() > 0
    again = layer.apply({"params": params}, rows, rngs={"noise": jax.random.PRNGKey(3)})
    assert not np.allclose(np.asarray(again), out)


def test_noisy_acting_explores_per_env_and_greedy_takes_the_mean():
    config = dataclasses.replace(rainbow.default_config("CartPole-v1"), num_atoms=5)
    agent = dqn.make(envs.make("CartPole-v1"), config)
    state = agent.init(jax.random.PRNGKey(0))
    obs = jnp.broadcast_to(jax.random.normal(jax.random.PRNGKey(1), (4,)), (64, 4))
    keys = jax.random.split(jax.random.PRNGKey(2), 64)
    greedy = agent.act(state.params, obs, keys, greedy=True)
    assert np.unique(np.asarray(greedy)).size == 1  # one state, the mean network
    # sigma raised so that the noise outweighs the initial Q-value gaps
    loud = jax.tree_util.tree_map_with_path(
        lambda path, p: p * 50.0 if "sigma" in str(path) else p, state.params)
    explored = np.asarray(agent.act(loud, obs, keys))
    assert np.unique(explored).size == 2  # the envs' own noise picks both actions
    np.testing.assert_array_equal(explored[:8], np.asarray(agent.act(loud, obs[:8], keys[:8])))


@pytest.mark.parametrize("env", ["Breakout-MinAtar", "Asterix-MinAtar", "Freeway-MinAtar"])
def test_rainbow_on_minatar_spreads_c51_over_a_hundred_either_way(env):
    config = rainbow.default_config(env)
    assert (config.v_min, config.v_max) == (-100.0, 100.0)
    # Asterix keeps DQN's 1-step targets, Freeway drops advantage learning (C51 cannot take
    # it); otherwise only the support differs from DQN's
    own = {"Asterix-MinAtar": {"n_step": 1},
           "Freeway-MinAtar": {"advantage_learning": 0.0}}.get(env, {})
    assert dataclasses.replace(config, v_min=-10.0, v_max=10.0) == dataclasses.replace(
        dqn.default_config(env), **{**dqn.defaults.RAINBOW, **own})
    assert (dqn.default_config(env).v_min, dqn.default_config(env).v_max) == (-10.0, 10.0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["c51", "qr", "iqn", "rainbow"])
def test_a_placed_run_trains_and_ranks_replay_by_the_loss(kind):
    base = (rainbow.default_config("CartPole-v1") if kind == "rainbow" else
            dataclasses.replace(dqn.default_config("CartPole-v1"), distributional=kind))
    config = dataclasses.replace(
        base, v_min=0.0, v_max=100.0, prioritized=True, dueling=True, total_steps=4096,
        num_envs=8, learning_starts=256, buffer_size=2048,
    )
    agent = dqn.make(envs.make("CartPole-v1"), config)
    runner = place(*placement_fns(agent), num_envs=8, num_devices=2, iters_per_chunk=64)
    carry = runner.init(np.arange(1))
    initial = jax.device_get(carry.agent_state.params)
    carry, metrics = runner.run_chunk(carry)
    assert np.isfinite(np.asarray(metrics["loss"])[0][-10:]).all()
    tree = np.asarray(carry.env_state.replay.tree)[0]
    filled = tree[:, tree.shape[1] // 2:]
    assert np.unique(filled[filled > 0]).size > 10  # priorities moved off their max
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), jax.device_get(
        carry.agent_state.params), initial)
    assert min(jax.tree.leaves(moved)) > 0
