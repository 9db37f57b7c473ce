"""Multi-agent: the JaxMARL adapter (agents on axis 0, masks, world state, auto-reset, the win
reward) and MAPPO/IPPO (masked sampling, Gaussian policies for continuous actions, the team's
recurrent state, placements)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import agents, envs
from jaxrl_sys.agents import mappo
from jaxrl_sys.core.rollout import legal_actions, reset_envs, step_envs
from jaxrl_sys.runtime.execution import place, placement_fns

MPE = "jaxmarl:MPE_simple_spread_v3"
SMAX = "jaxmarl:SMAX:3m"
SMALL = dict(num_envs=16, rollout_steps=8, num_minibatches=2, update_epochs=2,
             total_steps=16 * 8 * 8, hidden=(16,), memory_size=8)


def random_rollout(env, steps: int, envs_: int = 8, seed: int = 0):
    """`steps` steps of uniformly random legal actions on `envs_` envs: per-step results."""
    state = reset_envs(env, jax.random.PRNGKey(seed), jnp.arange(envs_))

    def body(state, key):
        legal = legal_actions(env, state.env_state)
        action = jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))
        after, result = step_envs(env, state, action, key)
        return after, (state.obs, action, legal, result)

    return jax.lax.scan(body, state, jax.random.split(jax.random.PRNGKey(seed + 1), steps))[1]


def test_the_adapter_stacks_agents_on_axis_0_with_the_world_state():
    env = envs.make(MPE)
    assert env.spec.obs_shape == (3, 18) and env.spec.num_agents == 3
    assert env.spec.state_shape == (54,)  # MPE has none: every agent's observation
    obs, state = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(env.world_state(state), obs.reshape(-1))
    assert envs.make(SMAX).spec.state_shape == (72,)  # SMAX's own world_state


def test_the_team_reward_is_the_sum_of_the_agents_rewards():
    env = envs.make(MPE)
    obs, state = env.reset(jax.random.PRNGKey(0))
    actions = jnp.array([1, 2, 3])
    _, _, reward, *_ = env.step(jax.random.PRNGKey(1), state, actions)
    inner = env.unwrapped.inner
    key = jax.random.split(jax.random.PRNGKey(1))[0]
    _, _, rewards, _, _ = inner.step_env(key, state.env_state.inner,
                                         {a: actions[i] for i, a in enumerate(inner.agents)})
    np.testing.assert_allclose(reward, sum(rewards.values()), rtol=1e-6)


def test_mpe_episodes_are_truncated_at_the_limit_with_the_final_observation():
    env = envs.make(MPE)
    limit = env.spec.max_episode_steps
    obs, _, _, result = random_rollout(env, limit + 3)
    ends = np.asarray(result.truncated)
    assert ends[limit - 1].all() and ends.sum() == ends.shape[1]  # every env once, at the limit
    assert not np.asarray(result.terminated).any()
    # the step after the end observes a fresh episode; the final observation is the old one's
    final = np.asarray(result.info["final_observation"][limit - 1])
    assert not np.allclose(final, np.asarray(obs[limit]))
    np.testing.assert_array_equal(np.asarray(result.info["final_observation"][3]),
                                  np.asarray(obs[4]))


@pytest.fixture(scope="module")
def smax_collect():
    """A fresh MAPPO's masked-sampling rollout of 24 steps on 16 SMAX:3m battles (random play
    ends the first of them after 11 steps): (config, trajectory). One compiled collect, which
    the termination and the masking tests share."""
    env = envs.make(SMAX)
    config = dataclasses.replace(mappo.default_config(SMAX), **{**SMALL, "rollout_steps": 24})
    agent = mappo.make(env, config, axis_name=None)

    @jax.jit  # one program (eagerly, every op of the initialisations compiles on its own)
    def rollout():
        state = agent.init(jax.random.PRNGKey(0))
        env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(config.num_envs))
        return mappo.collect(env, agent.network, config, None, state.params, env_state,
                             jax.random.PRNGKey(2))[1]

    return config, jax.device_get(rollout())


@pytest.mark.slow
def test_smax_battles_terminate_and_the_evaluation_env_rewards_wins_only(smax_collect):
    _, traj = smax_collect  # the training env, played by a fresh policy over the legal actions
    assert np.asarray(traj.terminated).any()
    legal = np.asarray(traj.legal)
    assert not legal.all() and legal.any(axis=-1).all()
    _, _, _, win = random_rollout(envs.make_eval(SMAX), 120, envs_=16)
    rewards = np.asarray(win.reward)
    assert set(np.unique(rewards)) <= {0.0, 1.0}
    ended = np.asarray(win.terminated | win.truncated)
    assert ended.any() and not rewards[~ended].any()


def test_heterogeneous_agents_are_padded_and_masked():
    env = envs.make("jaxmarl:MPE_simple_speaker_listener_v4")
    assert env.spec.obs_shape == (2, 11)
    _, state = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(env.legal_actions(state),
                                  [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])


@pytest.mark.parametrize("name, message", [
    ("jaxmarl:SMAX:9z", "unknown SMAX map '9z'"),
    ("jaxmarl:MPE_simple_sprad_v3", "closest: MPE_simple_spread_v3"),
    ("jaxmarl:", "names no JaxMARL env"),
])
def test_unknown_envs_and_maps_are_one_line_errors(name, message):
    with pytest.raises(envs.UnknownEnvError, match=message) as error:
        envs.make(name)
    assert "\n" not in str(error.value)


def test_unknown_env_params_are_one_line_errors():
    with pytest.raises(envs.EnvParamError, match="has no param foo"):
        envs.make(MPE, foo=1)


def test_masked_sampling_never_picks_an_unavailable_action(smax_collect):
    _, traj = smax_collect
    legal = np.asarray(traj.legal)
    taken = np.take_along_axis(legal, np.asarray(traj.actions)[..., None], axis=-1)
    assert taken.all() and not legal.all()
    assert np.isfinite(np.asarray(traj.log_probs)).all()


@pytest.mark.slow
def test_the_team_state_resets_in_the_step_its_env_ends():
    env = envs.make(MPE)
    config = dataclasses.replace(mappo.default_config(MPE),
                                 **{**SMALL, "memory": "gru", "rollout_steps": 30})
    agent = mappo.make(env, config, axis_name=None)

    @jax.jit  # one program (eagerly, every op of the initialisations compiles on its own)
    def rollout_and_replay():
        state = agent.init(jax.random.PRNGKey(0))
        env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(config.num_envs))
        _, traj, _ = mappo.collect(env, agent.network, config, None, state.params, env_state,
                                   jax.random.PRNGKey(2))
        # the rollout replayed from its stored state
        _, (logits, _) = mappo.agent.apply_sequences(
            agent.network, state.params, traj.memory, mappo.with_agent_ids(traj.obs),
            traj.critic_in, traj.starts)
        return traj, mappo.networks.scored(logits, traj.legal, traj.actions)[0]

    traj, log_probs = jax.device_get(rollout_and_replay())
    ended = np.asarray(traj.terminated | traj.truncated)
    starts = np.asarray(traj.starts)
    np.testing.assert_array_equal(starts[1:], ended[:-1])  # the step after an end starts one
    assert ended.any()
    # replaying the rollout from its stored state gives the acting log-probs
    np.testing.assert_allclose(log_probs, traj.log_probs, atol=1e-5)


def run_mappo(num_devices: int, seeds, iters: int = 2, env_name: str = MPE, **overrides):
    """(initial params, params after `iters` iterations, metrics) of a placed MAPPO run; the
    same call twice in a session runs once (the tests below share their single-seed run)."""
    key = (num_devices, tuple(seeds), iters, env_name, tuple(sorted(overrides.items())))
    if key not in _RUNS:
        _RUNS[key] = _run_mappo(num_devices, seeds, iters, env_name, **overrides)
    return _RUNS[key]


_RUNS: dict = {}


def _run_mappo(num_devices: int, seeds, iters: int, env_name: str, env_params=(),
               **overrides):
    env = envs.make(env_name, **dict(env_params))
    config = dataclasses.replace(mappo.default_config(env_name), **{**SMALL, **overrides})
    agent = mappo.make(env, config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=num_devices,
                   iters_per_chunk=iters)
    start = runner.init(np.asarray(seeds))
    initial = jax.device_get(start.agent_state.params)
    carry, metrics = runner.run_chunk(start)
    return initial, jax.device_get(carry.agent_state.params), jax.device_get(metrics)


def assert_trees_close(a, b, atol):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=atol), a, b)


# IPPO's local critic feed-forward with continuous actions, MAPPO's central one recurrent with
# discrete actions: each critic, network kind and action kind is placed on 8 devices; the
# feed-forward single run is also the vmapped test's.
VARIANTS = {"feed-forward-continuous": {"critic": "local",
                                        "env_params": (("action_type", "Continuous"),)},
            "gru": {"memory": "gru"}}


@pytest.mark.parametrize("variant", list(VARIANTS.values()), ids=list(VARIANTS))
@pytest.mark.slow
def test_mappo_on_eight_devices_equals_one_device(variant):
    params_0, params_1, metrics_1 = run_mappo(1, [6], **variant)
    _, params_8, metrics_8 = run_mappo(8, [6], **variant)
    assert_trees_close(params_8, params_1, atol=1e-5)
    np.testing.assert_allclose(metrics_8["episode_return_sum"], metrics_1["episode_return_sum"],
                               rtol=1e-5)
    moved = jax.tree.map(lambda x, y: np.abs(x - y).max(), params_1, params_0)
    assert max(jax.tree.leaves(moved)) > 1e-3


@pytest.mark.slow
def test_a_vmapped_seed_equals_its_single_run():
    _, params_many, _ = run_mappo(1, [5, 6], **VARIANTS["feed-forward-continuous"])
    _, params_one, _ = run_mappo(1, [6], **VARIANTS["feed-forward-continuous"])
    assert_trees_close(jax.tree.map(lambda x: x[1], params_many),
                       jax.tree.map(lambda x: x[0], params_one), atol=1e-5)
    apart = jax.tree.map(lambda x: np.abs(x[0] - x[1]).max(), params_many)
    assert max(jax.tree.leaves(apart)) > 1e-3  # different seeds really are different runs


def test_a_gaussian_team_policy_samples_scores_and_acts_greedily_by_its_means():
    mean = jnp.array([[0.2, -0.4], [1.0, 0.0], [-0.3, 0.5]])  # [N, A]
    log_std = jnp.array([[-1.0, 0.5]] * 3)
    policy = jnp.concatenate([mean, log_std], axis=-1)  # [N, 2A]
    action, log_prob = mappo.sample(policy, None, jax.random.PRNGKey(0))
    assert action.shape == (3, 2) and log_prob.shape == (3,)
    scored, entropy = mappo.scored(policy, None, action)
    np.testing.assert_allclose(scored, log_prob, rtol=1e-6)
    z = (np.asarray(action) - np.asarray(mean)) / np.exp(np.asarray(log_std))
    by_hand = np.sum(-0.5 * z**2 - np.asarray(log_std) - 0.5 * np.log(2 * np.pi), axis=-1)
    np.testing.assert_allclose(log_prob, by_hand, rtol=1e-5)
    np.testing.assert_allclose(entropy, [np.sum(np.array([-1.0, 0.5]) + 0.5 * np.log(2 * np.pi * np.e))] * 3,
                               rtol=1e-6)
    greedy, _ = mappo.sample(policy, None, jax.random.PRNGKey(0), greedy=True)
    np.testing.assert_array_equal(greedy, mean)
    # per agent: the first greedy, the others sampled
    mixed, _ = mappo.sample(policy, None, jax.random.PRNGKey(0),
                            greedy=jnp.array([True, False, False]))
    np.testing.assert_array_equal(mixed[0], mean[0])
    np.testing.assert_array_equal(mixed[1:], action[1:])


def test_ippo_steps_a_continuous_team_inside_its_box():
    name = "jaxmarl:MPE_simple_spread_v3"
    env = envs.make(name, action_type="Continuous")
    agent = mappo.make(env, dataclasses.replace(agents.load("ippo").default_config(name),
                                                **SMALL))
    state = agent.init(jax.random.PRNGKey(0))
    obs = jax.random.normal(jax.random.PRNGKey(1), (64, *env.spec.obs_shape))
    actions, log_probs = agent.act(state.params, obs, jax.random.PRNGKey(2))
    actions = np.asarray(actions)
    assert actions.shape == (64, 3, 5) and log_probs.shape == (64, 3)
    assert actions.min() >= 0.0 and actions.max() <= 1.0
    assert 0.2 < np.mean((actions > 0.0) & (actions < 1.0)) < 0.8  # std 1: some clipped


def test_ippo_reads_no_world_state_and_mappo_does():
    ippo = agents.load("ippo")
    assert ippo.default_config(MPE).critic == "local"
    assert agents.load("mappo").default_config(MPE).critic == "central"
    obs = jnp.zeros((4, 3, 18))
    world = jnp.ones((4, 54))
    assert mappo.critic_inputs(obs, world, central=False).shape == (4, 3, 21)
    central = mappo.critic_inputs(obs, world, central=True)
    assert central.shape == (4, 3, 57)
    np.testing.assert_array_equal(central[:, :, 54:], np.broadcast_to(np.eye(3), (4, 3, 3)))


@pytest.mark.parametrize("name", [MPE, SMAX])
def test_mpe_and_smax_states_are_drawn(name):
    from jaxrl_sys.envs.render import can_render, make_renderer

    env = envs.make(name)
    assert can_render(name)
    renderer = make_renderer(name, env)
    reset = jax.jit(env.reset)
    first, second = reset(jax.random.PRNGKey(0))[1], reset(jax.random.PRNGKey(1))[1]
    a, b = renderer.frame(first), renderer.frame(second)
    renderer.close()
    assert a.shape == b.shape and a.shape[-1] == 3 and a.dtype == np.uint8
    assert (a != b).any()  # the units stand elsewhere in another episode
