"""DQN's distributional heads (`distributional=c51|qr`): Q-values are the distributions'
means, the losses on hand-made sequences are the ones the papers define, and a placed run
with prioritised replay and a dueling head trains and ranks replay by the per-item loss."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn
from jaxrl_sys.agents.dqn import losses
from jaxrl_sys.agents.dqn.networks import QNetwork, build_network, q_values
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
    with pytest.raises(ConfigError, match="distributional"):
        config_for("iqn").validate()
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
    def apply(params, obs):
        at_zero = (obs.sum(-1) == 0)[:, None, None]
        return params * jnp.where(at_zero, jnp.asarray(now), jnp.asarray(after))
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


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["c51", "qr"])
def test_a_placed_run_trains_and_ranks_replay_by_the_loss(kind):
    config = dataclasses.replace(
        dqn.default_config("CartPole-v1"), distributional=kind, v_min=0.0, v_max=100.0,
        prioritized=True, dueling=True, total_steps=4096, num_envs=8, learning_starts=256,
        buffer_size=2048,
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
