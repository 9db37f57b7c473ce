"""TD3 and DDPG (the `td3` package; `ddpg` is the registered agent): the losses by hand, the
actor and targets moving every `policy_delay` steps, one update on 8 devices equal to one on
1, Ape-X's noise scales by env id, greedy play by the actor or its target, TD3's LayerNorm
critics, and refusals. Learning:
tests/test_learning.py's `ddpg:Pendulum-v1` (its PROMISES); the host loop:
tests/test_host_loop.py."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import agents, envs
from jaxrl_sys.agents import td3
from jaxrl_sys.agents.families.continuous_control import Critic
from jaxrl_sys.agents.td3 import losses
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh


def random_batch(key, batch_size: int):
    ks = jax.random.split(key, 5)
    return dict(
        obs=jax.random.normal(ks[0], (batch_size, 3)),
        action=jax.random.uniform(ks[1], (batch_size, 1), minval=-2.0, maxval=2.0),
        reward=-jax.random.uniform(ks[2], (batch_size,), maxval=16.0),
        terminated=jax.random.uniform(ks[3], (batch_size,)) < 0.2,
        next_obs=jax.random.normal(ks[4], (batch_size, 3)),
    )


def test_target_smoothing_clips_the_noise_then_the_action():
    actions = jnp.array([[0.0, 0.9, -0.95]])
    noise = jnp.array([[10.0, 0.5, -0.1]])  # scaled by 0.2: 2.0 (clipped to 0.5), 0.1, -0.02
    smoothed = losses.smoothed_actions(actions, noise, policy_noise=0.2, noise_clip=0.5)
    np.testing.assert_allclose(np.asarray(smoothed), [[0.5, 1.0, -0.97]], rtol=1e-6)
    same = losses.smoothed_actions(actions, noise, policy_noise=0.0, noise_clip=0.5)
    np.testing.assert_array_equal(np.asarray(same), np.asarray(actions))  # DDPG: none


def test_the_target_takes_the_smaller_critic_and_stops_at_termination():
    next_q = jnp.array([[1.0, 5.0, 3.0], [2.0, 4.0, -1.0]])
    target = losses.critic_target(jnp.array([1.0, 1.0, 1.0]), jnp.array([False, False, True]),
                                  next_q, gamma=0.5)
    np.testing.assert_allclose(np.asarray(target), [1.5, 3.0, 1.0])
    one = losses.critic_target(jnp.ones(3), jnp.zeros(3, bool), next_q[:1], gamma=0.5)
    np.testing.assert_allclose(np.asarray(one), [1.5, 3.5, 2.5])  # DDPG: its one critic
    q = jnp.array([[1.0, 2.0], [0.0, 0.0]])
    assert float(losses.critic_loss(q, jnp.array([0.0, 1.0]))) == pytest.approx(0.5 * 2 + 0.5)
    assert float(losses.actor_loss(jnp.array([1.0, 3.0]))) == -2.0


def test_each_loss_moves_only_its_own_parameters():
    """The actor's gradient is the deterministic policy gradient through a fixed critic; the
    critics' gradient does not depend on the actor's loss."""
    agent = td3.make(envs.make("Pendulum-v1"), td3.default_config("Pendulum-v1"), axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    params, setup = state.params, agent.setup
    batch = random_batch(jax.random.PRNGKey(1), 16)
    noise = jax.random.normal(jax.random.PRNGKey(2), (16, 1))
    trainable = losses.Trainable(params.actor, params.critic)
    targets = losses.Targets(params.target_actor, params.target_critic)
    grads, _ = jax.grad(setup.loss, has_aux=True)(trainable, targets, batch, noise)

    def policy_value(actor):
        a = setup.actor.apply(actor, batch["obs"])
        return losses.actor_loss(setup.critic.apply(
            jax.tree.map(lambda x: x[0], params.critic), batch["obs"], a))

    want = jax.grad(policy_value)(params.actor)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7),
                 grads.actor, want)

    def critic_only(critic):
        return setup.loss(losses.Trainable(params.actor, critic), targets, batch, noise)[1][
            "critic_loss"]

    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7),
                 grads.critic, jax.grad(critic_only)(params.critic))


@pytest.mark.parametrize("name, delay", [("td3", 2), ("ddpg", 1)])
def test_the_actor_and_targets_move_every_policy_delay_steps(name, delay):
    module = td3 if name == "td3" else agents.load(name)
    agent = module.make(envs.make("Pendulum-v1"), module.default_config("Pendulum-v1"),
                        axis_name=None)
    assert agent.config.policy_delay == delay
    update = jax.jit(agent.update)
    state = agent.init(jax.random.PRNGKey(0))
    changed = []
    for i in range(2):
        new, _ = update(state, random_batch(jax.random.PRNGKey(i), 32), jax.random.PRNGKey(9))
        moved = lambda a, b: max(jax.tree.leaves(jax.tree.map(  # noqa: E731
            lambda x, y: float(np.abs(x - y).max()), a, b)))
        changed.append((moved(new.params.critic, state.params.critic) > 0,
                        moved(new.params.actor, state.params.actor) > 0,
                        moved(new.params.target_critic, state.params.target_critic) > 0))
        state = new
    if delay == 2:
        assert changed == [(True, False, False), (True, True, True)]
    else:
        assert changed == [(True, True, True), (True, True, True)]


@pytest.mark.slow
def test_one_update_on_eight_devices_equals_one_device_with_the_same_global_batch():
    env = envs.make("Pendulum-v1")
    config = td3.default_config("Pendulum-v1")
    batches = jax.tree.map(lambda *xs: jnp.stack(xs),
                           *[random_batch(jax.random.PRNGKey(i), config.batch_size)
                             for i in range(2)])
    keys = jax.random.split(jax.random.PRNGKey(7), 2)

    def run(num_devices: int):
        agent = td3.make(env, config)
        state = agent.init(jax.random.PRNGKey(1))

        def updates(state, batches, keys):  # two updates: the second moves the actor too
            return jax.lax.scan(lambda s, inputs: agent.update(s, *inputs), state,
                                (batches, keys))

        mapped = jax.shard_map(updates, mesh=make_mesh(num_devices),
                               in_specs=(P(), P(None, DEVICE_AXIS), P()), out_specs=P(),
                               check_vma=False)
        return jax.device_get(jax.jit(mapped)(state, batches, keys)), state

    (state_1, metrics_1), initial = run(1)
    (state_8, metrics_8), _ = run(8)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 state_8.params, state_1.params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5),
                 metrics_8, metrics_1)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), state_1.params, initial.params)
    assert min(jax.tree.leaves(moved)) > 1e-6  # actor, critics and targets all moved


def test_apex_noise_scales_follow_the_global_env_id():
    config = dataclasses.replace(td3.default_config("Pendulum-v1"), exploration="apex",
                                 num_envs=8)
    scales = np.asarray(td3.exploration_scales(config, jnp.arange(8)))
    np.testing.assert_allclose(scales, 0.4 ** (1 + 7 * np.arange(8) / 7), rtol=1e-6)
    halves = np.asarray(td3.exploration_scales(config, jnp.arange(4, 8)))
    np.testing.assert_array_equal(halves, scales[4:])  # a device's share: the same rates
    fixed = td3.exploration_scales(td3.default_config("Pendulum-v1"), jnp.arange(3))
    np.testing.assert_allclose(np.asarray(fixed), 0.1)


def test_greedy_actions_are_the_policys_in_the_box_and_noise_moves_them():
    agent = td3.make(envs.make("Pendulum-v1"), td3.default_config("Pendulum-v1"), axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    obs = jax.random.normal(jax.random.PRNGKey(1), (64, 3))
    greedy = np.asarray(agent.act(state.params, obs, jax.random.PRNGKey(2), greedy=True))
    want = 2.0 * np.asarray(agent.setup.actor.apply(state.params.actor, obs))  # [-1, 1] to [-2, 2]
    np.testing.assert_allclose(greedy, np.clip(want, -2, 2), rtol=1e-5, atol=1e-6)
    noisy = np.asarray(agent.act(state.params, obs, jax.random.PRNGKey(2)))
    assert np.abs(noisy).max() <= 2.0 and not np.allclose(noisy, greedy)


@pytest.mark.parametrize("target_actor", [False, True])
def test_greedy_play_acts_with_the_actor_or_the_target_actor(target_actor):
    """`greedy_target_actor` makes evaluation (and serving, recording) play the Polyak-averaged
    target actor; the exploring policy keeps the actor either way."""
    config = dataclasses.replace(td3.default_config("Pendulum-v1"),
                                 greedy_target_actor=target_actor)
    agent = td3.make(envs.make("Pendulum-v1"), config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    other = agent.init(jax.random.PRNGKey(5)).params.actor
    state = state.replace(params=state.params.replace(target_actor=other))
    obs = jax.random.normal(jax.random.PRNGKey(1), (16, 3))
    played = np.asarray(td3.greedy_action(agent)(state, obs, jax.random.PRNGKey(2)))
    actor = state.params.target_actor if target_actor else state.params.actor
    want = np.clip(2.0 * np.asarray(agent.setup.actor.apply(actor, obs)), -2, 2)
    np.testing.assert_allclose(played, want, rtol=1e-5, atol=1e-6)
    online = np.clip(2.0 * np.asarray(agent.setup.actor.apply(state.params.actor, obs)), -2, 2)
    assert np.allclose(played, online) != target_actor


def test_td3_plays_greedily_with_its_target_actor_and_ddpg_with_its_actor():
    """TD3 ships greedy play with the target actor (its Pendulum check passed only so); DDPG
    keeps its actor, the policy its own checks passed with."""
    for env_name in ("Pendulum-v1", "MountainCarContinuous-v0"):
        assert agents.load("td3").default_config(env_name).greedy_target_actor
        assert not agents.load("ddpg").default_config(env_name).greedy_target_actor


def test_td3s_critics_normalise_their_layers_and_ddpgs_do_not():
    """TD3 ships LayerNorm before each hidden activation of both critics (its learning check
    collapsed without); DDPG keeps plain critics; a normalised layer's features have mean 0."""
    for config, normalised in ((td3.default_config("Pendulum-v1"), True),
                               (agents.load("ddpg").default_config("Pendulum-v1"), False)):
        assert config.critic_layer_norm is normalised
        agent = td3.make(envs.make("Pendulum-v1"), config, axis_name=None)
        critic_params = agent.init(jax.random.PRNGKey(0)).params.critic["params"]
        norms = [k for k in critic_params if k.startswith("LayerNorm")]
        assert len(norms) == (len(config.hidden) if normalised else 0), list(critic_params)
    critic = Critic((8,), "relu", layer_norm=True)
    obs, action = jnp.ones((2, 3)), jnp.zeros((2, 1))
    params = critic.init(jax.random.PRNGKey(0), obs, action)
    _, inner = critic.apply(params, obs, action, capture_intermediates=True, mutable=True)
    normed = np.asarray(inner["intermediates"]["LayerNorm_0"]["__call__"][0])
    np.testing.assert_allclose(normed.mean(-1), 0.0, atol=1e-5)


def test_bad_configs_and_discrete_envs_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="continuous"):
        td3.make(envs.make("CartPole-v1"), td3.Config())
    with pytest.raises(ConfigError, match="policy_delay"):
        dataclasses.replace(td3.Config(), policy_delay=0).validate()
    with pytest.raises(ConfigError, match="exploration"):
        dataclasses.replace(td3.Config(), exploration="ou").validate()
