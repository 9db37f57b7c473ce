"""DQN: one update is the same on 8 devices as on 1; it learns CartPole (greedy evaluation)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn
from jaxrl_sys.agents.dqn import rainbow
from jaxrl_sys.agents.families import q_learning
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh, place, placement_fns


def random_batch(key, batch_size: int, n: int, obs_dim: int) -> dqn.Batch:
    ks = jax.random.split(key, 6)
    return dqn.Batch(
        obs=jax.random.normal(ks[0], (batch_size, n, obs_dim)),
        action=jax.random.randint(ks[1], (batch_size, n), 0, 2),
        reward=jax.random.uniform(ks[2], (batch_size, n)),
        terminated=jax.random.uniform(ks[3], (batch_size, n)) < 0.1,
        truncated=jax.random.uniform(ks[4], (batch_size, n)) < 0.1,
        next_obs=jax.random.normal(ks[5], (batch_size, n, obs_dim)),
        valid=jnp.ones((batch_size, n), bool),
        weights=jnp.ones(batch_size),
    )


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["dqn", "rainbow", "iqn"])
def test_one_update_on_eight_devices_equals_one_device(variant):
    """The same global batch on 8 devices as on 1; Rainbow's noise and IQN's fractions are
    drawn by global row, so they too are the same."""
    env = envs.make("CartPole-v1")
    config = {"dqn": dqn.default_config("CartPole-v1"),
              "rainbow": rainbow.default_config("CartPole-v1"),
              "iqn": dataclasses.replace(dqn.default_config("CartPole-v1"),
                                         distributional="iqn", num_atoms=8)}[variant]
    batch = random_batch(jax.random.PRNGKey(0), 64, config.n_step, 4)

    def run(num_devices: int, seed: int = 2):
        agent = dqn.make(env, config)
        state = agent.init(jax.random.PRNGKey(1))
        mapped = jax.shard_map(
            lambda s, b: agent.update(s, b, jax.random.PRNGKey(seed))[:2],
            mesh=make_mesh(num_devices),
            in_specs=(P(), P(DEVICE_AXIS)), out_specs=P(), check_vma=False,
        )
        return jax.device_get(jax.jit(mapped)(state, batch))

    (state_1, metrics_1), (state_8, metrics_8) = run(1), run(8)
    # 8 devices sum the gradient in another order; Adam divides each by its own scale, so a
    # near-zero gradient's last bits move its parameter by up to about 1e-6 (AMD EPYC: 3e-7)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 state_8.params, state_1.params)
    np.testing.assert_allclose(metrics_8["loss"], metrics_1["loss"], rtol=1e-5)
    initial = dqn.make(env, config).init(jax.random.PRNGKey(1)).params
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), state_1.params, initial)
    assert max(jax.tree.leaves(moved)) > 1e-4
    if variant != "dqn":  # the key draws the noise or fractions: another key, another step
        other_loss = run(1, seed=3)[1]["loss"]
        assert not np.allclose(other_loss, metrics_1["loss"])


@pytest.mark.slow
def test_prioritized_dueling_variant_trains_and_updates_priorities():
    config = dataclasses.replace(
        dqn.default_config("CartPole-v1"), prioritized=True, dueling=True, total_steps=4096,
        num_envs=8, learning_starts=256, n_step=3, buffer_size=2048,
    )
    agent = dqn.make(envs.make("CartPole-v1"), config)
    runner = place(*placement_fns(agent), num_envs=8, num_devices=2, iters_per_chunk=64)
    carry = runner.init(np.arange(1))
    carry, metrics = runner.run_chunk(carry)
    losses = np.asarray(metrics["loss"])[0]
    assert np.isfinite(losses[-10:]).all()
    tree = np.asarray(carry.env_state.replay.tree)[0]  # [envs, 2 * capacity]
    leaves = tree[:, tree.shape[1] // 2:]
    filled = leaves[leaves > 0]
    assert filled.size == 64 * 8 and np.unique(filled).size > 10  # priorities moved off max


@pytest.mark.slow
def test_minatar_conv_defaults_train_on_two_devices():
    """The per-game MinAtar defaults that name the conv torso (Asterix, Freeway) build it on
    the [10, 10, C] frames, run placed over two devices and move every parameter."""
    config = dqn.default_config("Asterix-MinAtar")
    assert config.torso == "grid_cnn" and dqn.default_config("Breakout-MinAtar").torso == "mlp"
    config = dataclasses.replace(config, total_steps=2048, num_envs=8, learning_starts=256,
                                 buffer_size=1024)
    agent = dqn.make(envs.make("Asterix-MinAtar"), config)
    runner = place(*placement_fns(agent), num_envs=8, num_devices=2, iters_per_chunk=64)
    carry = runner.init(np.arange(1))
    initial = jax.device_get(carry.agent_state.params)
    carry, metrics = runner.run_chunk(carry)
    assert np.isfinite(np.asarray(metrics["loss"])[0][-10:]).all()
    params = jax.device_get(carry.agent_state.params)  # leading seed axis
    assert params["params"]["GridCNN_0"]["SameConv_0"]["kernel"].shape[-4:] == (3, 3, 4, 16)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), params, initial)
    assert min(jax.tree.leaves(moved)) > 0


def test_advantage_learning_lowers_the_target_by_the_action_gap():
    """With `advantage_learning` a, every TD error grows by a * (max_b Q'(s, b) - Q'(s, a)),
    Q' the target network (at init, the online one)."""
    env = envs.make("CartPole-v1")
    plain = dqn.default_config("CartPole-v1")
    batch = random_batch(jax.random.PRNGKey(0), 32, plain.n_step, 4)

    def td_errors(config):
        agent = dqn.make(env, config, axis_name=None)
        state = agent.init(jax.random.PRNGKey(1))
        return state, np.asarray(jax.jit(agent.update)(state, batch)[2])

    state, plain_td = td_errors(plain)
    _, al_td = td_errors(dataclasses.replace(plain, advantage_learning=0.5))
    q = np.asarray(dqn.build_network(env.spec, plain).apply(state.target_params, batch.obs[:, 0]))
    gap = q.max(axis=-1) - q[np.arange(32), np.asarray(batch.action[:, 0])]
    assert gap.max() > 1e-3  # the case is not trivial
    np.testing.assert_allclose(al_td - plain_td, 0.5 * gap, rtol=1e-4, atol=1e-5)


def _short_run(**overrides) -> tuple[dqn.Config, list]:
    """A short CartPole run, one update per iteration; the learner state after every
    iteration (index 0: before the first)."""
    config = dataclasses.replace(
        dqn.default_config("CartPole-v1"), total_steps=160, num_envs=4, batch_size=8,
        buffer_size=160, learning_starts=64, updates_per_iteration=1, **overrides,
    )
    agent = dqn.make(envs.make("CartPole-v1"), config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(config.num_envs))
    step = jax.jit(agent.train_step)
    states = [state]
    for i in range(config.num_iterations):
        state, env_state, _ = step(state, env_state, jax.random.PRNGKey(2 + i))
        states.append(state)
    return config, jax.device_get(states)


def _moved(a, b) -> float:
    return max(jax.tree.leaves(jax.tree.map(lambda x, y: np.abs(x - y).max(), a, b)))


def test_learning_rate_anneals_over_the_learner_steps_alone():
    """The schedule counts learner steps, not the warm-up's iterations: the first update takes
    the full rate (Adam's first step moves each parameter by the rate) and the last the final
    rate, here 0, so the last update leaves the parameters where they were."""
    config, states = _short_run(final_lr_fraction=0.0)
    learner_steps = int(states[-1].updates)
    first = next(i for i, s in enumerate(states) if s.updates == 1)
    assert 0 < learner_steps < config.num_iterations  # the warm-up took iterations
    assert learner_steps == q_learning.learner_steps(config)
    assert _moved(states[first - 1].params, states[first - 2].params) == 0.0  # warm-up
    np.testing.assert_allclose(_moved(states[first].params, states[first - 1].params),
                               config.learning_rate, rtol=1e-3)
    assert _moved(states[-2].params, states[-3].params) > 0.0
    assert _moved(states[-1].params, states[-2].params) == 0.0


def test_learning_rate_schedule_ends_at_the_final_fraction():
    """The rate at the first learner step is `learning_rate` and at the last (as many steps
    as a run takes) `learning_rate * final_lr_fraction`."""
    config, states = _short_run(final_lr_fraction=0.25)
    schedule = jax.jit(q_learning.learning_rate_schedule(config))  # as the optimiser runs it
    last = int(states[-1].updates) - 1  # optax counts from 0
    assert int(states[-1].opt_state[1][-1].count) == last + 1  # the schedule's own counter
    assert schedule(0) == np.float32(config.learning_rate)
    assert schedule(last) == np.float32(config.learning_rate * 0.25)
    assert schedule(last - 1) > np.float32(config.learning_rate * 0.25)


@pytest.mark.parametrize("target_network", [False, True])
def test_greedy_play_acts_with_the_online_or_the_target_network(target_network):
    """`greedy_target_network` makes greedy play (evaluation, serving, recording) take the
    target network's parameters; acting while training keeps the online ones either way."""
    config = dataclasses.replace(rainbow.default_config("CartPole-v1"),
                                 greedy_target_network=target_network)
    agent = dqn.make(envs.make("CartPole-v1"), config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    state = state.replace(target_params=agent.init(jax.random.PRNGKey(7)).params)
    obs = jax.random.normal(jax.random.PRNGKey(1), (64, 4))
    played = np.asarray(dqn.greedy_action(agent)(state, obs, jax.random.PRNGKey(2)))
    chosen = state.target_params if target_network else state.params
    want = np.asarray(agent.act(chosen, obs, jax.random.PRNGKey(2), greedy=True))
    online = np.asarray(agent.act(state.params, obs, jax.random.PRNGKey(2), greedy=True))
    np.testing.assert_array_equal(played, want)
    assert (played == online).all() != target_network  # the two networks differ somewhere
