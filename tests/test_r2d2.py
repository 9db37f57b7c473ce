"""R2D2: the recurrent state is reset where episodes end, no gradient crosses an episode start
or reaches the burn-in, replaying a stored item from its stored state reproduces acting,
n-step targets inside sequences match a NumPy loop, 8 devices equal one, a vmapped seed
equals its single run, and it learns MemoryChain (which needs its memory)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import r2d2
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.evaluation import evaluate
from jaxrl_sys.core.networks import initial_memory
from jaxrl_sys.core.returns import n_step_sequence_targets
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh, place, placement_fns

from test_memory import assert_reset_exactly_at_ends  # tests/ is on pytest's path

SMALL = dict(num_envs=8, seq_length=8, burn_in=4, n_step=3, batch_size=8, buffer_size=64,
             learning_starts=64, updates_per_iteration=1, memory_size=16, hidden=(16,),
             total_steps=8 * 8 * 6)


def small_agent(env_name: str = "MemoryChain-bsuite", axis_name=None, env_params=None,
                **overrides):
    """A small R2D2 on `env_name` and its env."""
    env = envs.make(env_name, **(env_params or {}))
    config = dataclasses.replace(r2d2.default_config(env_name), **{**SMALL, **overrides})
    return env, r2d2.make(env, config, axis_name=axis_name)


def flat_memory(memory) -> np.ndarray:
    """A memory pytree [B, ...] as one array [B, -1]."""
    return np.concatenate([np.asarray(m).reshape(m.shape[0], -1)
                           for m in jax.tree.leaves(memory)], axis=1)


def memories_after_each_step(env_name: str, memory: str, **env_params):
    """(memory after every step [T, B, -1], ended [T, B], starts [T, B]) of a fresh agent
    acting epsilon-greedily, one step per collect."""
    env, agent = small_agent(env_name, memory=memory, seq_length=1, burn_in=0, n_step=1,
                             env_params=env_params)
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(8))

    def step(env_state, t):
        env_state, item, _, _ = agent.collect(state, env_state, jax.random.PRNGKey(t))
        ended = item["terminated"][:, 0] | item["truncated"][:, 0]
        return env_state, (env_state.envs.memory, ended, env_state.envs.starts)

    _, (memories, ended, starts) = jax.jit(
        lambda s: jax.lax.scan(step, s, jnp.arange(40)))(env_state)
    flat = np.stack([flat_memory(jax.tree.map(lambda m: m[t], memories)) for t in range(40)])
    return flat, np.asarray(ended), np.asarray(starts)


@pytest.mark.parametrize("memory", ["gru", "lstm"])
def test_the_state_after_a_terminated_end_is_the_initial_state(memory):
    # MemoryChain at memory_length 3 terminates after 4 steps: every env ends many times.
    assert_reset_exactly_at_ends(
        *memories_after_each_step("MemoryChain-bsuite", memory, memory_length=3))


def test_the_state_after_a_truncated_end_is_the_initial_state():
    # CartPole cut at 5 steps: episodes end by truncation (random play rarely falls in 5).
    flat, ended, _ = memories_after_each_step("CartPole-v1", "gru", max_steps_in_episode=5)
    assert_reset_exactly_at_ends(flat, ended)


def network_and_inputs(memory: str, steps: int = 7, batch: int = 2):
    """A small network, observations [T, B, 5], a non-zero state and its parameters."""
    network = r2d2.RecurrentQNetwork(3, hidden=(8,), memory=memory, memory_size=8, dueling=True)
    obs = jax.random.normal(jax.random.PRNGKey(0), (steps, batch, 5))
    memory0 = jax.tree.map(lambda m: m + 0.3, initial_memory(memory, 8, batch))
    params = network.init(jax.random.PRNGKey(1), memory0, obs, jnp.zeros((steps, batch), bool))
    return network, obs, memory0, params


@pytest.mark.parametrize("memory", ["gru", "lstm"])
def test_no_gradient_crosses_an_episode_start(memory):
    network, obs, memory0, params = network_and_inputs(memory)
    steps, start = obs.shape[0], 4
    starts = jnp.zeros(obs.shape[:2], bool).at[start, 0].set(True)

    def q_at(t, obs, memory0):
        """Env 0's Q-values at step t, summed."""
        return network.apply(params, memory0, obs, starts)[1][t, 0].sum()

    for t in range(start, steps):
        grad_obs, grad_memory = jax.grad(q_at, argnums=(1, 2))(t, obs, memory0)
        np.testing.assert_array_equal(grad_obs[:start, 0], 0.0)
        jax.tree.map(lambda g: np.testing.assert_array_equal(g[0], 0.0), grad_memory)
        assert np.abs(grad_obs[start:t + 1, 0]).max() > 0
    # Env 1 has no episode start: its Q at the last step does reach its first input.
    grad_obs = jax.grad(lambda o: network.apply(params, memory0, o, starts)[1][-1, 1].sum())(obs)
    assert np.abs(grad_obs[0, 1]).max() > 0


@pytest.mark.parametrize("memory", ["gru", "lstm"])
@pytest.mark.slow
def test_no_gradient_flows_into_the_burn_in(memory):
    network, obs, memory0, params = network_and_inputs(memory)
    burn_in = 3
    starts = jnp.zeros(obs.shape[:2], bool)

    def learned_q(params, obs, memory0):
        return r2d2.unroll(network, params, memory0, obs, starts, burn_in)[0].sum()

    grad_params, grad_obs, grad_memory = jax.grad(learned_q, argnums=(0, 1, 2))(
        params, obs, memory0)
    np.testing.assert_array_equal(grad_obs[:burn_in], 0.0)
    assert np.abs(grad_obs[burn_in]).max() > 0
    jax.tree.map(lambda g: np.testing.assert_array_equal(g, 0.0), grad_memory)
    # The parameters' gradient is that of the learned part from a constant warmed state.
    warmed, _, _ = network.apply(params, memory0, obs[:burn_in], starts[:burn_in])
    expected = jax.grad(lambda p: network.apply(p, warmed, obs[burn_in:],
                                                starts[burn_in:])[1].sum())(params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 grad_params, expected)
    # ... and the values are those of one unroll over the whole sequence.
    whole = network.apply(params, memory0, obs, starts)[1][burn_in:]
    np.testing.assert_allclose(r2d2.unroll(network, params, memory0, obs, starts, burn_in)[0],
                               whole, atol=1e-6)


@pytest.mark.parametrize("memory", ["gru", "lstm"])
@pytest.mark.slow
def test_replaying_a_stored_item_from_its_stored_state_reproduces_acting(memory):
    # Episodes of 5 steps, items of 4 burn-in + 8 steps: the second item starts mid-episode.
    env, agent = small_agent(memory=memory, env_params=dict(memory_length=4))
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(8))
    collect = jax.jit(agent.collect)
    env_state, first, first_q, _ = collect(state, env_state, jax.random.PRNGKey(2))
    env_state, item, q, _ = collect(state, env_state, jax.random.PRNGKey(3))
    assert np.abs(flat_memory(item["memory"])).max() > 0 and item["starts"].any()
    # The second item's burn-in is the first's last 4 steps; its replay state is stored.
    np.testing.assert_array_equal(item["obs"][:, :4], first["obs"][:, -4:])
    np.testing.assert_array_equal(env_state.replay.data["obs"][:, 1], item["obs"])
    time_major = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    obs, starts = time_major(item["obs"]), time_major(item["starts"])
    replayed, carries = r2d2.unroll(agent.network, state.params, item["memory"], obs, starts, 4)
    np.testing.assert_allclose(replayed, q, atol=1e-6)
    # Replayed whole (no burn-in), the burn-in steps give the first rollout's acting values.
    whole, _ = r2d2.unroll(agent.network, state.params, item["memory"], obs, starts, 0)
    np.testing.assert_allclose(whole[:4], first_q[-4:], atol=1e-6)
    # The next observation's value from the state a step left behind is the next step's
    # value wherever the episode goes on.
    next_values = r2d2.next_q(agent.network, state.params, carries,
                              time_major(item["final_obs"])[4:])
    goes_on = ~np.asarray(starts[5:])
    np.testing.assert_allclose(np.asarray(next_values[:-1])[goes_on],
                               np.asarray(replayed[1:])[goes_on], atol=1e-6)


def numpy_sequence_targets(rewards, next_values, terminated, truncated, n, gamma):
    """The n-step target of every step, by the definition: sum rewards from t until an
    episode end or the sequence end (at most n steps), then bootstrap unless terminated."""
    steps, batch = rewards.shape
    targets = np.zeros((steps, batch))
    for b in range(batch):
        for t in range(steps):
            total, discount, k = 0.0, 1.0, t
            while True:
                total += discount * rewards[k, b]
                discount *= gamma
                if terminated[k, b]:
                    break
                if truncated[k, b] or k == steps - 1 or k == t + n - 1:
                    total += discount * next_values[k, b]
                    break
                k += 1
            targets[t, b] = total
    return targets


@pytest.mark.parametrize("n", [1, 3, 5])
def test_n_step_sequence_targets_match_a_numpy_loop(n):
    rng = np.random.default_rng(0)
    steps, batch = 9, 6
    rewards = rng.normal(size=(steps, batch)).astype(np.float32)
    next_values = rng.normal(size=(steps, batch)).astype(np.float32)
    terminated = rng.random((steps, batch)) < 0.15
    truncated = (rng.random((steps, batch)) < 0.15) & ~terminated
    assert terminated.any() and truncated.any()
    got = n_step_sequence_targets(jnp.asarray(rewards), jnp.asarray(next_values),
                                  jnp.asarray(terminated), jnp.asarray(truncated), n, 0.9)
    want = numpy_sequence_targets(rewards, next_values, terminated, truncated, n, 0.9)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def replayed_batch(agent, num_envs: int):
    """A batch of the items of `num_envs` envs after two collects (the second's items start
    mid-episode from stored states)."""
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(num_envs))
    for i in range(2):
        env_state, item, _, _ = jax.jit(agent.collect)(state, env_state, jax.random.PRNGKey(2 + i))
    return state, r2d2.Batch.from_items(item, jnp.ones(num_envs))


@pytest.mark.slow
def test_one_update_on_eight_devices_equals_one_device():
    env, agent = small_agent(num_envs=16, batch_size=16, axis_name=DEVICE_AXIS,
                             env_params=dict(memory_length=4))
    state, batch = replayed_batch(agent, 16)

    def run(num_devices: int):
        mapped = jax.shard_map(lambda s, b: agent.update(s, b)[:2], mesh=make_mesh(num_devices),
                               in_specs=(P(), P(DEVICE_AXIS)), out_specs=P(), check_vma=False)
        return jax.device_get(jax.jit(mapped)(state, batch))

    (state_1, metrics_1), (state_8, metrics_8) = run(1), run(8)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                 state_8.params, state_1.params)
    np.testing.assert_allclose(metrics_8["loss"], metrics_1["loss"], rtol=1e-5)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), state_1.params, state.params)
    assert max(jax.tree.leaves(moved)) > 1e-4


def assert_close(a, b):
    """Floats to rounding (matmuls over 1 and 8 envs round differently), the rest exactly."""
    if np.issubdtype(np.asarray(a).dtype, np.floating):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(a, b)


def run_placed(num_devices: int, seeds, iters: int, **overrides):
    """A placed run of `iters` iterations: (agent state, env state, metrics), leading seeds."""
    _, agent = small_agent(axis_name=DEVICE_AXIS, env_params=dict(memory_length=4), **overrides)
    runner = place(*placement_fns(agent), num_envs=agent.config.num_envs,
                   num_devices=num_devices, iters_per_chunk=iters)
    carry, metrics = runner.run_chunk(runner.init(np.asarray(seeds)))
    return jax.device_get((carry.agent_state, carry.env_state, metrics))


@pytest.mark.slow
def test_collecting_on_eight_devices_equals_one_device():
    """Acting, the burn-in windows and the replay rows do not depend on the envs' split."""
    _, env_1, metrics_1 = run_placed(1, [3], iters=2, learning_starts=10_000)
    _, env_8, metrics_8 = run_placed(8, [3], iters=2, learning_starts=10_000)
    jax.tree.map(assert_close, env_8, env_1)  # the recurrent states round differently
    np.testing.assert_array_equal(metrics_8["episode_count"], metrics_1["episode_count"])
    assert np.asarray(env_1.replay.size).min() == 2


@pytest.mark.slow
def test_vmapped_seed_equals_single_run_with_that_seed():
    many, _, metrics_many = run_placed(1, [5, 6, 7], iters=4, learning_starts=128)
    one, _, metrics_one = run_placed(1, [6], iters=4, learning_starts=128)
    assert int(one.updates[0]) == 3  # it learned
    # A batch of 3 seeds runs other matmul kernels than a batch of 1, which round differently
    # in the last bits.
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a[1], b[0], rtol=1e-5, atol=1e-5),
                 many.params, one.params)
    np.testing.assert_allclose(metrics_many["loss"][1], metrics_one["loss"][0], rtol=1e-4)
    a, b = (jax.tree.leaves(many.params)[0][i] for i in (0, 1))
    assert not np.allclose(a, b)


@pytest.mark.slow
def test_prioritized_sequences_train_and_update_priorities():
    _, _, metrics = run_placed(2, [0], iters=6, prioritized=True, learning_starts=64)
    assert np.isfinite(np.asarray(metrics["loss"])[0, -4:]).all()


@pytest.mark.slow
def test_it_learns_memory_chain_which_needs_its_memory():
    """The shipped defaults on MemoryChain (the answer is shown 5 steps before it is asked
    for; a policy without memory scores about 0) for a short budget: greedy >= 0.9."""
    env = envs.make("MemoryChain-bsuite")
    config = dataclasses.replace(r2d2.default_config("MemoryChain-bsuite"), total_steps=20_480)
    agent = r2d2.make(env, config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(config.num_envs))

    @jax.jit
    def train(state, env_state):
        def body(carry, key):
            state, env_state, _ = agent.train_step(*carry, key)
            return (state, env_state), None

        keys = jax.random.split(jax.random.PRNGKey(2), config.num_iterations)
        return jax.lax.scan(body, (state, env_state), keys)[0][0]

    state = train(state, env_state)
    returns, _ = jax.jit(lambda s: evaluate(env, r2d2.greedy_action(agent), s,
                                            jax.random.PRNGKey(7), jnp.arange(64)))(state)
    assert float(returns.mean()) >= 0.9


def test_bad_config_values_are_one_line_errors():
    config = r2d2.default_config("MemoryChain-bsuite")
    for change, match in [
        (dict(burn_in=17), "burn_in=17 must be <= seq_length=16"),
        (dict(burn_in=-1), "burn_in must be >= 0"),
        (dict(seq_length=2, burn_in=0), "n_step=3 must be <= seq_length=2"),
        (dict(memory="none"), "memory must be one of"),
        (dict(buffer_size=16), "at least one sequence"),
        (dict(priority_eta=1.5), "priority_eta must be in"),
    ]:
        with pytest.raises(ConfigError, match=match):
            dataclasses.replace(config, **change).validate()
    with pytest.raises(ConfigError, match="r2d2 needs discrete actions"):
        r2d2.make(envs.make("Pendulum-v1"), config)
