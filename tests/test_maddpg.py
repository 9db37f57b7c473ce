"""MADDPG: Gumbel-max sampling follows the policy and never picks an illegal action, the
straight-through action is the sample in value and the relaxation in gradient, each agent's
critic sees its own action in the joint one, the critics' target on hand-made numbers, the
loss (discrete and continuous) moves each network by its own term only, one update on 8
devices equals one device, continuous actions stay in the env's box, and what it cannot
train is refused in one line."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import maddpg
from jaxrl_sys.commands import train as train_script
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh

MPE = "jaxmarl:MPE_simple_spread_v3"
CONTINUOUS = {"action_type": "Continuous"}  # MPE's continuous actions: a box [0, 1]^5


def test_gumbel_max_samples_the_softmax_over_the_legal_actions():
    logits = jnp.array([1.0, 0.0, -1.0, 3.0])
    legal = jnp.array([True, True, True, False])
    draws = 40_000
    gumbel = jax.random.gumbel(jax.random.PRNGKey(0), (draws, 4))
    actions = np.asarray(maddpg.gumbel_max_actions(jnp.broadcast_to(logits, (draws, 4)),
                                                   jnp.broadcast_to(legal, (draws, 4)), gumbel))
    assert not np.any(actions == 3)
    expected = np.exp([1.0, 0.0, -1.0]) / np.exp([1.0, 0.0, -1.0]).sum()
    counts = np.bincount(actions, minlength=4)[:3]
    sigma = np.sqrt(draws * expected * (1 - expected))
    assert np.all(np.abs(counts - draws * expected) < 5 * sigma), (counts, draws * expected)
    # no noise: the most likely legal action
    assert int(maddpg.gumbel_max_actions(logits, legal, jnp.zeros(4))) == 0


def test_the_straight_through_action_is_the_sample_in_value_and_the_relaxation_in_gradient():
    logits = jnp.array([[0.3, -1.2, 2.0], [1.5, 0.1, -0.4]])
    legal = jnp.array([[True, True, False], [True, True, True]])
    gumbel = jax.random.gumbel(jax.random.PRNGKey(1), (2, 3))
    weights = jnp.array([[1.0, -2.0, 0.5], [0.2, 3.0, -1.0]])
    action = maddpg.straight_through_gumbel_softmax(logits, legal, gumbel, 0.7)
    sample = maddpg.gumbel_max_actions(logits, legal, gumbel)
    np.testing.assert_array_equal(action, jax.nn.one_hot(sample, 3))

    def relaxed(x):
        return jax.nn.softmax((jnp.where(legal, x, -1e9) + gumbel) / 0.7, axis=-1)

    through = jax.grad(lambda x: jnp.sum(
        weights * maddpg.straight_through_gumbel_softmax(x, legal, gumbel, 0.7)))(logits)
    soft = jax.grad(lambda x: jnp.sum(weights * relaxed(x)))(logits)
    np.testing.assert_allclose(through, soft, rtol=1e-6, atol=1e-7)
    assert float(jnp.abs(through).max()) > 1e-3


def test_each_agent_reads_its_own_action_and_the_others_taken_ones():
    taken = jax.nn.one_hot(jnp.array([[0, 1, 2]]), 4)  # [1, 3, 4]
    own = jax.nn.one_hot(jnp.array([[3, 3, 3]]), 4)
    joints = np.asarray(maddpg.each_agents_joint(taken, own))[0]  # [3, 3, 4]
    for i in range(3):
        for j in range(3):
            expected = 3 if i == j else j
            np.testing.assert_array_equal(joints[i, j], np.eye(4)[expected])


def test_the_critics_target_on_hand_made_numbers():
    target = maddpg.critic_target(jnp.array([1.0, -2.0]), jnp.array([False, True]),
                                  jnp.array([[10.0, 20.0], [30.0, 40.0]]), 0.9)
    np.testing.assert_allclose(target, [[1.0 + 9.0, 1.0 + 18.0], [-2.0, -2.0]])


def random_batch(key, size: int, spec) -> dict:
    agents = spec.num_agents
    keys = jax.random.split(key, 6)
    obs = lambda k: jax.random.normal(k, (size, *spec.obs_shape))  # noqa: E731
    world = lambda k: jax.random.normal(k, (size, *spec.state_shape))  # noqa: E731
    batch = dict(obs=obs(keys[0]), world=world(keys[1]),
                 reward=jax.random.normal(keys[3], (size,)),
                 terminated=jax.random.bernoulli(keys[4], 0.1, (size,)),
                 next_obs=obs(keys[5]), next_world=world(keys[5]))
    if not spec.discrete:
        return dict(batch, action=jax.random.uniform(
            keys[2], (size, agents, spec.action_space.shape[0]), minval=-1.0, maxval=1.0))
    legal = jnp.ones((size, agents, spec.action_space.n), jnp.bool_)
    return dict(batch, legal=legal, next_legal=legal,
                action=jax.random.randint(keys[2], (size, agents), 0, spec.action_space.n))


def small_agent(env_params=None, **overrides):
    env = envs.make(MPE, **(env_params or {}))
    config = dataclasses.replace(maddpg.default_config(MPE), num_envs=16, batch_size=64,
                                 buffer_size=1024, learning_starts=0, hidden=(32,),
                                 **overrides)
    return env, maddpg.make(env, config)


@pytest.mark.parametrize("env_params", [{}, CONTINUOUS], ids=["discrete", "continuous"])
def test_the_loss_moves_each_network_by_its_own_term_only(env_params):
    env, agent = small_agent(env_params)
    state = agent.init(jax.random.PRNGKey(0))
    params = state.params
    trainable = maddpg.Trainable(params.actor, params.critic)
    targets = maddpg.Targets(params.target_actor, params.target_critic)
    batch = random_batch(jax.random.PRNGKey(1), 32, env.spec)
    noise = ()
    if env.spec.discrete:
        noise = (jax.random.gumbel(jax.random.PRNGKey(2), (2, 32, *env.spec.obs_shape[:1],
                                                           env.spec.action_space.n)),)
    loss = agent.setup.loss
    grad = lambda term: jax.grad(lambda t: loss(t, targets, batch, *noise)[1][term])(trainable)  # noqa: E731
    total = jax.grad(lambda t: loss(t, targets, batch, *noise)[0])(trainable)
    critic_term, actor_term = grad("critic_loss"), grad("actor_loss")
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(critic_term.actor)) == 0.0
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(actor_term.critic)) == 0.0
    jax.tree.map(np.testing.assert_allclose, total.critic, critic_term.critic)
    jax.tree.map(np.testing.assert_allclose, total.actor, actor_term.actor)
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(total.actor)) > 0.0


def test_the_continuous_actor_climbs_its_critics_gradient_in_the_action():
    """The deterministic policy gradient: the actor's loss has the gradient in each agent's
    own action of minus the mean of its critic's Q (plus the action penalty), the other
    agents' actions held at the taken ones."""
    env, agent = small_agent(CONTINUOUS, logit_penalty=0.0)
    params = agent.init(jax.random.PRNGKey(0)).params
    batch = random_batch(jax.random.PRNGKey(1), 8, env.spec)
    critic = agent.setup.critic
    own = agent.setup.actor.apply(params.actor, batch["obs"])  # [B, N, A]

    def actor_loss_of(actions):
        q = critic.apply(params.critic, batch["world"],
                         maddpg.each_agents_joint(batch["action"], actions))
        return -jnp.mean(q)

    expected = jax.grad(actor_loss_of)(own)
    through_actor = jax.vjp(lambda p: agent.setup.actor.apply(p, batch["obs"]), params.actor)[1]
    (expected_grad,) = through_actor(expected)
    trainable = maddpg.Trainable(params.actor, params.critic)
    targets = maddpg.Targets(params.target_actor, params.target_critic)
    actor_grad = jax.grad(lambda t: agent.setup.loss(t, targets, batch)[1]["actor_loss"])(
        trainable).actor
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                 actor_grad, expected_grad)


def test_continuous_actions_stay_in_the_box_and_greedy_is_the_policy():
    env, agent = small_agent(CONTINUOUS, exploration_noise=0.5)
    space = env.spec.action_space
    assert space.shape == (5,) and space.low == (0.0,) * 5 and space.high == (1.0,) * 5
    state = agent.init(jax.random.PRNGKey(0))
    obs = 3.0 * jax.random.normal(jax.random.PRNGKey(1), (64, *env.spec.obs_shape))
    noisy = np.asarray(agent.act(state.params, obs, jax.random.PRNGKey(3)))
    greedy = np.asarray(agent.act(state.params, obs, jax.random.PRNGKey(3), greedy=True))
    assert noisy.shape == greedy.shape == (64, 3, 5)
    assert noisy.min() >= 0.0 and noisy.max() <= 1.0 and noisy.std() > 0.1
    policy = agent.setup.actor.apply(state.params.actor, obs)
    np.testing.assert_allclose(greedy, 0.5 * (np.asarray(policy) + 1.0), rtol=1e-6)
    # an agent that acts greedily keeps its policy's action while the others explore
    mixed = np.asarray(agent.act(state.params, obs, jax.random.PRNGKey(3),
                                 greedy=(True, False, False)))
    np.testing.assert_allclose(mixed[:, 0], greedy[:, 0], rtol=1e-6)
    np.testing.assert_allclose(mixed[:, 1:], noisy[:, 1:], rtol=1e-6)


def test_continuous_mpe_steps_box_actions_without_legal_masks():
    env = envs.make(MPE, **CONTINUOUS).unwrapped
    obs, state = env.reset(jax.random.PRNGKey(0))
    # all 0.5: no push in either direction (MPE decodes u = (a2 - a1, a4 - a3))
    _, moved, reward, _, _, info = env.step(jax.random.PRNGKey(1), state, jnp.full((3, 5), 0.5))
    assert "final_legal_actions" not in info and np.isfinite(float(reward))
    np.testing.assert_allclose(moved.inner.p_vel, state.inner.p_vel, atol=1e-6)
    _, pushed, _, _, _, _ = env.step(jax.random.PRNGKey(1), state,
                                     jnp.zeros((3, 5)).at[:, 2].set(1.0))
    assert float(jnp.min(pushed.inner.p_vel[:3, 0] - state.inner.p_vel[:3, 0])) > 0.0


@pytest.mark.slow
@pytest.mark.parametrize("env_params", [{}, CONTINUOUS], ids=["discrete", "continuous"])
def test_one_update_on_eight_devices_equals_one_device_with_the_same_global_batch(env_params):
    env, agent = small_agent(env_params)
    state = agent.init(jax.random.PRNGKey(0))
    batch = random_batch(jax.random.PRNGKey(1), 64, env.spec)

    def run(num_devices: int):
        mapped = jax.shard_map(lambda s, b: agent.update(s, b, jax.random.PRNGKey(3)),
                               mesh=make_mesh(num_devices), in_specs=(P(), P(DEVICE_AXIS)),
                               out_specs=P(), check_vma=False)
        return jax.device_get(jax.jit(mapped)(state, batch))

    (state_1, metrics_1), (state_8, metrics_8) = run(1), run(8)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 state_8.params, state_1.params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 metrics_8, metrics_1)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), state_1.params, state.params)
    assert min(jax.tree.leaves(moved)) > 1e-7  # actor, critics and targets all moved


@pytest.mark.slow
def test_acting_samples_legal_actions_and_greedy_takes_the_most_likely():
    env, agent = small_agent()
    state = agent.init(jax.random.PRNGKey(0))
    obs = jax.random.normal(jax.random.PRNGKey(1), (64, *env.spec.obs_shape))
    legal = jax.random.bernoulli(jax.random.PRNGKey(2), 0.6, (64, 3, 5)).at[..., 0].set(True)
    actions = agent.act(state.params, obs, jax.random.PRNGKey(3), legal=legal)
    assert actions.shape == (64, 3)
    assert bool(jnp.all(jnp.take_along_axis(legal, actions[..., None], -1)))
    greedy = agent.act(state.params, obs, jax.random.PRNGKey(3), greedy=True, legal=legal)
    logits = agent.setup.actor.apply(state.params.actor, obs)
    np.testing.assert_array_equal(greedy, jnp.argmax(jnp.where(legal, logits, -jnp.inf), -1))


@pytest.mark.parametrize("overrides, message", [
    (dict(noise_correlation=0.5), "noise_correlation"),
    (dict(normalize_obs=True), "normalize_obs"),
    (dict(gumbel_temperature=0.0), "gumbel_temperature"),
    (dict(max_grad_norm=0.0), "max_grad_norm"),
])
def test_settings_that_cannot_work_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(maddpg.default_config(MPE), **overrides).validate()


@pytest.mark.parametrize("agent", ["qmix", "vdn"])
def test_continuous_team_actions_are_refused_by_the_discrete_agents(agent, tmp_path, capsys):
    code = train_script.main(["--agent", agent, "--env", MPE, "--set",
                              "env.action_type=Continuous", "--run-root", str(tmp_path),
                              "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "continuous actions" in err and "maddpg, mappo or ippo" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_single_agent_env_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys):
    code = train_script.main(["--agent", "maddpg", "--env", "CartPole-v1", "--run-root",
                              str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "maddpg" in err or "multi-agent" in err or "team" in err, err
    assert list(tmp_path.iterdir()) == []
