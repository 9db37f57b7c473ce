"""SAC: the squashed-Gaussian density, N-device = 1-device updates, replay contents, learning."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import sac
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh, place, placement_fns


def gaussian_log_pdf(u, mean, std):
    return -0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


# ------------------------------------------------------------------- tanh-Gaussian density


def test_tanh_gaussian_log_prob_matches_change_of_variables_with_finite_differences():
    """log p(a) = log N(u) - log |d tanh(u)/du|, the Jacobian by float64 central differences,
    out to |u| = 12 where 1 - a is ~1e-10 (a itself rounds to 1 in float32)."""
    u = np.concatenate([np.linspace(-3, 3, 13), [-12.0, -9.0, -6.0, 4.5, 6.0, 9.0, 12.0]])
    mean = np.tile([0.3, -1.0, 2.0, 8.0], len(u))[: len(u)]
    log_std = np.tile([0.0, -1.5, 1.0], len(u))[: len(u)]
    h = np.where(np.abs(u) > 3, 1e-2, 1e-5)
    jacobian = (np.tanh(u + h) - np.tanh(u - h)) / (2 * h)
    reference = gaussian_log_pdf(u, mean, np.exp(log_std)) - np.log(jacobian)

    ours = sac.tanh_gaussian_log_prob(
        jnp.asarray(mean[:, None], jnp.float32),
        jnp.asarray(log_std[:, None], jnp.float32),
        jnp.asarray(u[:, None], jnp.float32),
    )
    np.testing.assert_allclose(np.asarray(ours), reference, rtol=1e-5, atol=2e-4)
    # The naive form log(1 - tanh(u)^2) is -inf there in float32; ours is finite, also in grad.
    with np.errstate(divide="ignore"):
        assert np.isinf(np.log1p(-np.tanh(np.float32(12.0)) ** 2))
    grads = jax.grad(lambda m: sac.tanh_gaussian_log_prob(m, jnp.zeros(1), jnp.full(1, 20.0)))(
        jnp.zeros(1)
    )
    assert np.all(np.isfinite(np.asarray(grads)))


def test_tanh_gaussian_samples_follow_the_density_near_the_bound():
    """Monte-Carlo: the fraction of samples in each action bin equals the density integrated
    over that bin in action space (most of the mass sits within 1e-2 of a = +1)."""
    mean, log_std, n = 2.5, 0.0, 400_000
    noise = jax.random.normal(jax.random.PRNGKey(0), (n, 1))
    actions, log_probs = sac.tanh_gaussian_sample(
        jnp.full((n, 1), mean), jnp.full((n, 1), log_std), noise
    )
    # the returned log-prob is the density at the returned sample
    u = mean + np.asarray(noise[:, 0], np.float64)
    np.testing.assert_allclose(
        np.asarray(log_probs[:1000]),
        gaussian_log_pdf(u[:1000], mean, 1.0) - np.log1p(-np.tanh(u[:1000]) ** 2),
        rtol=1e-4, atol=1e-3,
    )
    # bins in action space, fine towards +1 (edges at tanh of a grid in u)
    edges = np.tanh(np.linspace(-1.0, 5.0, 25))
    counts, _ = np.histogram(np.tanh(u), bins=edges)
    for lo, hi, count in zip(edges[:-1], edges[1:], counts):
        a = np.linspace(lo, hi, 2001)  # quadrature in a, the density evaluated at u = atanh(a)
        density = np.exp(np.asarray(sac.tanh_gaussian_log_prob(
            jnp.full((a.size, 1), mean), jnp.full((a.size, 1), log_std),
            jnp.asarray(np.arctanh(a)[:, None], jnp.float32),
        ), np.float64))
        mass = np.trapezoid(density, a)
        sigma = np.sqrt(mass * (1 - mass) / n)
        assert abs(count / n - mass) < 5 * sigma + 1e-4, (lo, hi, count / n, mass)
    np.testing.assert_array_less(np.abs(np.asarray(actions)), 1.0 + 1e-6)


# ------------------------------------------------------------------------------- the agent


def random_batch(key, batch_size: int):
    ks = jax.random.split(key, 5)
    return dict(
        obs=jax.random.normal(ks[0], (batch_size, 3)),
        action=jax.random.uniform(ks[1], (batch_size, 1), minval=-2.0, maxval=2.0),
        reward=-jax.random.uniform(ks[2], (batch_size,), maxval=16.0),
        terminated=jax.random.uniform(ks[3], (batch_size,)) < 0.2,
        next_obs=jax.random.normal(ks[4], (batch_size, 3)),
    )


@pytest.mark.slow
def test_one_update_on_eight_devices_equals_one_device_with_the_same_global_batch():
    env = envs.make("Pendulum-v1")
    config = sac.default_config("Pendulum-v1")
    batches = jax.tree.map(  # three global batches, stacked: leaves [3, batch_size, ...]
        lambda *xs: jnp.stack(xs),
        *[random_batch(jax.random.PRNGKey(i), config.batch_size) for i in range(3)],
    )
    keys = jax.random.split(jax.random.PRNGKey(7), 3)

    def run(num_devices: int):
        agent = sac.make(env, config)
        state = agent.init(jax.random.PRNGKey(1))

        def updates(state, batches, keys):  # three updates, each a step on every loss
            def body(state, inputs):
                state, metrics = agent.update(state, *inputs)
                return state, metrics

            return jax.lax.scan(body, state, (batches, keys))

        mapped = jax.shard_map(
            updates, mesh=make_mesh(num_devices),
            in_specs=(P(), P(None, DEVICE_AXIS), P()), out_specs=P(), check_vma=False,
        )
        return jax.device_get(jax.jit(mapped)(state, batches, keys)), state

    (state_1, metrics_1), initial = run(1)
    (state_8, metrics_8), _ = run(8)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                 state_8.params, state_1.params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 metrics_8, metrics_1)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), state_1.params, initial.params)
    assert min(jax.tree.leaves(moved)) > 1e-5  # actor, critics, targets and alpha all moved
    assert int(state_1.updates) == 3


def test_actions_are_scaled_to_the_box_bounds():
    env = envs.make("Pendulum-v1")
    agent = sac.make(env, sac.default_config("Pendulum-v1"), axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    obs = 5.0 * jax.random.normal(jax.random.PRNGKey(1), (512, 3))
    actions = agent.act(state.params, obs, jax.random.PRNGKey(2))
    assert actions.shape == (512, 1)
    assert np.all(np.abs(np.asarray(actions)) <= 2.0) and np.abs(np.asarray(actions)).max() > 1.0
    mean, _ = agent.actor.apply(state.params.actor, obs)
    greedy = sac.greedy_action(agent)(state, obs, jax.random.PRNGKey(3))
    np.testing.assert_allclose(greedy, 2.0 * np.tanh(np.asarray(mean)), rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_train_step_on_two_devices_stores_pre_reset_next_observations():
    """Through `place` on 2 devices: replay holds next_obs = obs of the next step except at
    the time limit, where it is the final (pre-reset) observation; nothing terminates."""
    config = dataclasses.replace(
        sac.default_config("Pendulum-v1"), num_envs=4, rollout_steps=8, batch_size=8,
        buffer_size=4 * 256, learning_starts=64, updates_per_step=1,
    )
    env = envs.make("Pendulum-v1")
    agent = sac.make(env, config)
    runner = place(*placement_fns(agent), num_envs=4, num_devices=2, iters_per_chunk=26)
    carry, metrics = jax.device_get(runner.run_chunk(runner.init(np.asarray([0]))))
    data = jax.tree.map(lambda x: x[0], carry.env_state.replay.data)  # [envs, capacity, ...]
    assert int(carry.env_state.replay.size[0, 0]) == 26 * 8
    assert not data["terminated"][:, :208].any()
    same = np.all(np.isclose(data["next_obs"][:, :207], data["obs"][:, 1:208]), axis=-1)
    assert not same[:, 199].any()  # step 200 ended the episode; the env was reset after it
    assert same[:, np.arange(207) != 199].all()
    assert np.abs(data["action"][:, :208]).max() <= 2.0
    assert metrics["episode_count"].sum() == 4  # one time-limit episode per env
    learned = np.isfinite(metrics["critic_loss"][0])
    assert not learned[0] and learned[-1]  # random actions first, then learning
    assert int(carry.agent_state.updates[0]) == (26 * 8 * 4 - 64) // 4 + 1
    assert int(carry.agent_state.env_steps[0]) == 26 * 8 * 4


def test_invalid_configs_are_one_line_errors():
    config = sac.default_config("Pendulum-v1")
    for change, message in [
        (dict(buffer_size=1001), "buffer_size"),
        (dict(tau=0.0), "tau"),
        (dict(batch_size=0), "batch_size"),
        (dict(initial_alpha=-1.0), "initial_alpha"),
    ]:
        with pytest.raises(ConfigError, match=message):
            dataclasses.replace(config, **change).validate()
    with pytest.raises(ConfigError, match="Box"):
        sac.make(envs.make("CartPole-v1"), config)



# ------------------------------------------------------------------ correlated exploration

def test_correlated_noise_keeps_unit_variance_and_the_asked_correlation():
    def series(correlation):
        def step(last, key):
            noise = sac.correlated_noise(last, jax.random.normal(key, (256,)), correlation)
            return noise, noise
        first = jax.random.normal(jax.random.PRNGKey(0), (256,))
        return np.asarray(jax.lax.scan(step, first, jax.random.split(jax.random.PRNGKey(1),
                                                                      4000))[1])
    for correlation in (0.0, 0.95):
        x = series(correlation)
        lag1 = np.mean(x[1:] * x[:-1]) / np.mean(x * x)
        assert abs(np.var(x) - 1.0) < 0.05 and abs(lag1 - correlation) < 0.02, correlation
    fresh = jax.random.normal(jax.random.PRNGKey(2), (8,))
    assert sac.correlated_noise(jnp.ones(8), fresh, 0.0) is fresh  # white: untouched


def _exploration_noise_lag1(noise_correlation: float) -> float:
    """Lag-1 correlation of the noise behind the actions one train_step took: the policy acts
    from step 0 and (learning rate ~0) stays at its initial parameters, so the noise is
    recovered exactly from the stored actions and observations."""
    config = dataclasses.replace(
        sac.default_config("Pendulum-v1"), num_envs=4, rollout_steps=400, batch_size=8,
        buffer_size=4 * 512, learning_starts=0, actor_learning_rate=1e-12,
        noise_correlation=noise_correlation,
    )
    agent = sac.make(envs.make("Pendulum-v1"), config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(4))
    state, env_state, _ = jax.jit(agent.train_step)(state, env_state, jax.random.PRNGKey(2))
    data = jax.tree.map(lambda x: np.asarray(x[:, 100:400]), env_state.replay.data)
    mean, log_std = agent.actor.apply(state.params.actor, data["obs"].reshape(-1, 3))
    u = np.arctanh(np.clip(data["action"].reshape(-1, 1) / 2.0, -0.999999, 0.999999))
    noise = ((u - mean) / np.exp(log_std)).reshape(4, 300)  # [envs, steps]
    return float(np.mean(noise[:, 1:] * noise[:, :-1]) / np.mean(noise * noise))


@pytest.mark.slow
def test_train_step_explores_with_the_configured_noise_correlation():
    assert abs(_exploration_noise_lag1(0.0)) < 0.1
    assert abs(_exploration_noise_lag1(0.95) - 0.95) < 0.05


# ------------------------------------------------------------------------- shipped defaults


def test_every_tuned_entry_is_a_valid_config_and_every_promise_is_tuned():
    for entry in sac.TUNED:
        env_name = entry.env.replace("*", "hopper")
        config = sac.default_config(env_name)
        config.validate()
        assert all(getattr(config, key) == value for key, value in entry.overrides.items())
        assert entry.reached, entry.env
    tuned = {entry.env for entry in sac.TUNED}
    assert all(promise.env in tuned for promise in sac.PROMISES)
    assert [(p.env, p.threshold) for p in sac.PROMISES] == [
        ("Pendulum-v1", -200.0), ("MountainCarContinuous-v0", 90.0)]
