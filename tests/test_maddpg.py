"""MADDPG: Gumbel-max sampling follows the policy and never picks an illegal action, the
straight-through action is the sample in value and the relaxation in gradient, each agent's
critic sees its own action in the joint one, the critics' target on hand-made numbers, the
loss moves each network by its own term only, one update on 8 devices equals one device, and
what it cannot train is refused in one line."""

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
    agents, actions = spec.num_agents, spec.action_space.n
    keys = jax.random.split(key, 6)
    obs = lambda k: jax.random.normal(k, (size, *spec.obs_shape))  # noqa: E731
    world = lambda k: jax.random.normal(k, (size, *spec.state_shape))  # noqa: E731
    legal = jnp.ones((size, agents, actions), jnp.bool_)
    return dict(obs=obs(keys[0]), world=world(keys[1]), legal=legal,
                action=jax.random.randint(keys[2], (size, agents), 0, actions),
                reward=jax.random.normal(keys[3], (size,)),
                terminated=jax.random.bernoulli(keys[4], 0.1, (size,)),
                next_obs=obs(keys[5]), next_world=world(keys[5]), next_legal=legal)


def small_agent(**overrides):
    env = envs.make(MPE)
    config = dataclasses.replace(maddpg.default_config(MPE), num_envs=16, batch_size=64,
                                 buffer_size=1024, learning_starts=0, hidden=(32,),
                                 **overrides)
    return env, maddpg.make(env, config)


def test_the_loss_moves_each_network_by_its_own_term_only():
    env, agent = small_agent()
    state = agent.init(jax.random.PRNGKey(0))
    params = state.params
    trainable = maddpg.Trainable(params.actor, params.critic)
    targets = maddpg.Targets(params.target_actor, params.target_critic)
    batch = random_batch(jax.random.PRNGKey(1), 32, env.spec)
    gumbel = jax.random.gumbel(jax.random.PRNGKey(2), (2, 32, *env.spec.obs_shape[:1],
                                                       env.spec.action_space.n))
    loss = agent.setup.loss
    grad = lambda term: jax.grad(lambda t: loss(t, targets, batch, gumbel)[1][term])(trainable)  # noqa: E731
    total = jax.grad(lambda t: loss(t, targets, batch, gumbel)[0])(trainable)
    critic_term, actor_term = grad("critic_loss"), grad("actor_loss")
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(critic_term.actor)) == 0.0
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(actor_term.critic)) == 0.0
    jax.tree.map(np.testing.assert_allclose, total.critic, critic_term.critic)
    jax.tree.map(np.testing.assert_allclose, total.actor, actor_term.actor)
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(total.actor)) > 0.0


@pytest.mark.slow
def test_one_update_on_eight_devices_equals_one_device_with_the_same_global_batch():
    env, agent = small_agent()
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


def test_a_single_agent_env_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys):
    code = train_script.main(["--agent", "maddpg", "--env", "CartPole-v1", "--run-root",
                              str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "maddpg" in err or "multi-agent" in err or "team" in err, err
    assert list(tmp_path.iterdir()) == []
