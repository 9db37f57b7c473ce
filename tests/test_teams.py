"""Teams that compete (JaxMARL's predator-prey): each team's reward and return from the env, and
MAPPO/IPPO with a policy per team (`policies="by_team"`), a frozen team kept at its initial
policy, each team's loss on its own agents' rows."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import mappo
from jaxrl_sys.agents.families import teams
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.evaluation import evaluate, evaluate_teams
from jaxrl_sys.core.rollout import reset_envs, step_envs
from jaxrl_sys.runtime.execution import place, placement_fns

TAG = "jaxmarl:MPE_simple_tag_v3"
SMALL = dict(num_envs=16, rollout_steps=8, num_minibatches=2, update_epochs=2,
             total_steps=16 * 8 * 8, hidden=(16,), policies="by_team")


@pytest.fixture(scope="module")
def tag():
    return envs.make(TAG)


def test_predator_prey_declares_its_teams(tag):
    spec = tag.spec
    assert spec.teams == ("adversary",) * 3 + ("agent",)
    assert spec.team_names == ("adversary", "agent") and spec.agent_teams == (0, 0, 0, 1)
    assert envs.make("jaxmarl:MPE_simple_spread_v3").spec.team_names == ()
    assert teams.team_agents(spec.agent_teams) == ((0, 1, 2), (3,))


def test_each_teams_reward_and_return_are_its_agents_sums(tag):
    """Random play for three episodes: the scalar reward is the predators'; a catch pays each
    of the 3 predators 10; each team's episode return is its rewards since the reset."""
    steps, num_envs = 3 * tag.spec.max_episode_steps, 64
    state = reset_envs(tag, jax.random.PRNGKey(0), jnp.arange(num_envs))

    def body(state, key):
        action = jax.random.randint(key, (num_envs, 4), 0, 5)
        state, result = step_envs(tag, state, action, key)
        return state, result

    _, result = jax.lax.scan(body, state, jax.random.split(jax.random.PRNGKey(1), steps))
    team_rewards = np.asarray(result.info["team_rewards"])  # [T, B, 2]
    np.testing.assert_array_equal(np.asarray(result.reward), team_rewards[..., 0])
    predators = team_rewards[..., 0]
    assert predators.max() > 0 and np.all(predators >= 0)
    np.testing.assert_array_equal(predators % 30, 0)  # 3 predators x 10 per catch
    assert np.all(team_rewards[..., 1] <= 0)  # the prey: caught, or out of bounds
    done = np.asarray(result.info["episode_done"])
    assert done.sum() == 3 * num_envs
    per_episode = team_rewards.reshape(3, tag.spec.max_episode_steps, num_envs, 2).sum(axis=1)
    # every env's episodes end together (MPE's fixed length): ordered (episode, env)
    ended = np.asarray(result.info["team_episode_return"])[done].reshape(3, num_envs, 2)
    np.testing.assert_allclose(ended, per_episode, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(result.info["team_episode_return"])[~done], 0)


@pytest.mark.parametrize("env_name, policies, frozen, message", [
    (TAG, "shared", (), "set policies=by_team"),
    ("jaxmarl:MPE_simple_spread_v3", "by_team", (), "needs an env of competing teams"),
    (TAG, "by_team", ("prey",), "frozen_teams names prey"),
    (TAG, "by_team", ("adversary", "agent"), "none would learn"),
])
def test_competing_teams_need_a_policy_each(env_name, policies, frozen, message):
    with pytest.raises(ConfigError, match=message):
        teams.check_policies(envs.make(env_name).spec, policies, frozen)


def test_one_team_agents_refuse_competing_teams(tag):
    with pytest.raises(ConfigError, match="has teams that compete"):
        teams.check_team(tag.spec)
    teams.check_team(tag.spec, competing=True)


def small_agent(tag, **overrides):
    config = dataclasses.replace(mappo.default_config(TAG), **{**SMALL, **overrides})
    return config, mappo.make(tag, config)


def test_each_team_has_its_own_parameters_and_its_loss_reads_its_own_agents(tag):
    """Parameters stacked [2, ...]; changing the prey's advantages and returns moves the prey's
    gradient and leaves the predators' exactly as it was."""
    config, agent = small_agent(tag)
    state = agent.init(jax.random.PRNGKey(0))
    assert all(leaf.shape[0] == 2 for leaf in jax.tree.leaves(state.params))
    env_state = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(config.num_envs))
    _, traj, _ = mappo.collect(tag, agent.network, config, None, state.params, env_state,
                               jax.random.PRNGKey(2))
    assert traj.rewards.shape == (8, 16, 4)  # each agent credited with its own team's
    np.testing.assert_array_equal(traj.rewards[..., 0], traj.rewards[..., 2])
    advantages, returns = mappo.team_advantages(
        traj.rewards, traj.values, traj.next_values, traj.terminated, traj.truncated,
        config.gamma, config.gae_lambda)
    batch = mappo.agent.Batch(traj.obs, traj.critic_in, traj.legal, traj.actions,
                              traj.log_probs, traj.values, advantages, returns)
    grad = jax.jit(jax.grad(lambda p, b: mappo.agent.minibatch_loss(
        agent.network, config, None, p, b)[0]))
    before = grad(state.params, batch)
    prey = lambda x: x.at[..., 3].multiply(-2.0).at[..., 3].add(1.0)  # noqa: E731
    after = grad(state.params, batch._replace(advantages=prey(batch.advantages),
                                              returns=prey(batch.returns)))
    for b, a in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
        np.testing.assert_array_equal(a[0], b[0])
    assert max(float(jnp.abs(a[1] - b[1]).max())
               for b, a in zip(jax.tree.leaves(before), jax.tree.leaves(after))) > 1e-4


def run_placed(tag, num_devices: int, **overrides):
    config, agent = small_agent(tag, **overrides)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=num_devices,
                   iters_per_chunk=4)
    start = runner.init(np.asarray([4]))
    initial = jax.device_get(start.agent_state.params)  # the chunk donates its carry
    carry, metrics = runner.run_chunk(start)
    return (initial, *jax.device_get((carry.agent_state.params, metrics)))


def test_a_frozen_team_keeps_its_initial_policy_and_each_team_reports_its_return(tag):
    initial, trained, metrics = run_placed(tag, 1, frozen_teams=("agent",))
    moved = [float(np.abs(t - i).max()) for i, t in
             zip(jax.tree.leaves(initial), jax.tree.leaves(trained))]
    frozen = [float(np.abs(t[:, 1] - i[:, 1]).max()) for i, t in
              zip(jax.tree.leaves(initial), jax.tree.leaves(trained))]
    assert max(moved) > 1e-3 and max(frozen) == 0.0
    # 16 envs x 8 steps x 4 iterations: every env's first episode (26 steps) ends in the
    # fourth, and the returns of those episodes are each team's
    adversary, prey = metrics["return_adversary"][0], metrics["return_agent"][0]
    assert np.isnan(adversary[:3]).all() and np.isnan(prey[:3]).all()
    assert adversary[3] >= 0 and prey[3] <= 0 and metrics["episode_count"][0][3] == 16
    np.testing.assert_allclose(adversary[3] * 16, metrics["episode_return_sum"][0][3],
                               rtol=1e-5)


def test_greedy_evaluation_samples_a_frozen_team_and_reports_each_teams_return(tag):
    """Predators act greedily, the frozen prey samples from its (near-uniform) policy; the
    first team's returns are `evaluate`'s."""
    _, agent = small_agent(tag, frozen_teams=("agent",))
    state = agent.init(jax.random.PRNGKey(0))
    policy = mappo.greedy_action(agent)
    obs = jnp.zeros((64, 4, 16))
    actions = np.asarray(jnp.stack([
        policy.step(state, None, obs, None, jax.random.PRNGKey(k))[0] for k in range(2)]))
    np.testing.assert_array_equal(actions[0, :, :3], actions[1, :, :3])  # greedy: the same
    assert len(np.unique(actions[:, :, 3])) == 5  # sampled: every move
    ids = jnp.arange(8)
    returns, _ = evaluate(tag, policy, state, jax.random.PRNGKey(3), ids)
    team_returns = evaluate_teams(tag, policy, state, jax.random.PRNGKey(3), ids)
    assert team_returns.shape == (8, 2)
    np.testing.assert_allclose(team_returns[:, 0], returns, rtol=1e-6)


@pytest.mark.slow
def test_policies_by_team_on_eight_devices_equal_one_device(tag):
    _, params_1, metrics_1 = run_placed(tag, 1)
    _, params_8, metrics_8 = run_placed(tag, 8)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5),
                 params_8, params_1)
    for key in ("return_adversary", "return_agent", "episode_return_sum"):
        np.testing.assert_allclose(metrics_8[key], metrics_1[key], rtol=1e-5)


def test_a_per_team_module_gives_each_agent_its_own_teams_output():
    """Two teams' parameters of one dense layer on [B, N, D] inputs: agent n's output is its
    team's layer applied to its input, and each team's gradient comes from its agents only."""
    import flax.linen as nn

    layer = teams.PerTeam(nn.Dense(3), agent_teams=(0, 0, 1))
    x = jax.random.normal(jax.random.PRNGKey(0), (5, 3, 4))
    params = layer.init(jax.random.PRNGKey(1), x)
    assert jax.tree.leaves(params)[0].shape[0] == 2
    out = layer.apply(params, x)
    team = lambda k: jax.tree.map(lambda p: p[k], params)  # noqa: E731
    np.testing.assert_allclose(out[:, :2], nn.Dense(3).apply(team(0), x)[:, :2], rtol=1e-6)
    np.testing.assert_allclose(out[:, 2], nn.Dense(3).apply(team(1), x)[:, 2], rtol=1e-6)
    grads = jax.grad(lambda p: layer.apply(p, x)[:, 2].sum())(params)
    assert all(float(jnp.abs(g[0]).max()) == 0.0 and float(jnp.abs(g[1]).max()) > 0
               for g in jax.tree.leaves(grads))


def test_maddpg_learns_each_teams_critics_from_its_own_reward_and_keeps_a_frozen_team(tag):
    from jaxrl_sys.agents import maddpg

    config = dataclasses.replace(
        maddpg.default_config(TAG), num_envs=16, batch_size=64, buffer_size=1024,
        learning_starts=0, hidden=(16,), frozen_teams=("agent",))
    assert config.policies == "by_team"  # the shipped default on predator-prey
    agent = maddpg.make(tag, config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=1,
                   iters_per_chunk=4)
    start = runner.init(np.asarray([0]))
    initial = jax.device_get(start.agent_state.params)
    carry, metrics = runner.run_chunk(start)
    trained = jax.device_get(carry.agent_state.params)
    replayed = np.asarray(carry.env_state.replay.data["reward"])  # [seeds, envs, capacity, N]
    assert replayed.shape[-1] == 4
    np.testing.assert_array_equal(replayed[..., 0], replayed[..., 2])  # teammates' rewards
    for net in ("actor", "critic"):
        old, new = jax.tree.leaves(getattr(initial, net)), jax.tree.leaves(getattr(trained, net))
        assert max(float(np.abs(n[:, 0] - o[:, 0]).max()) for o, n in zip(old, new)) > 1e-4
        assert max(float(np.abs(n[:, 1] - o[:, 1]).max()) for o, n in zip(old, new)) == 0.0
    assert np.isfinite(metrics["return_adversary"][0][-1])


def test_the_predator_prey_benchmark_counts_catches_from_the_predators_return(tag):
    import importlib.util
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "predator_prey.py"
    spec = importlib.util.spec_from_file_location("predator_prey_script", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    returns = module.random_team_returns(tag, 32, seed=0)
    assert returns.shape == (32, 2)
    assert np.all(returns[:, 0] % 30 == 0) and np.all(returns[:, 1] <= 0)
    line = module.row("random", returns[None], tag.spec.team_names, predators=3)
    catches = returns[:, 0].mean() / 30
    assert line.startswith("| random | ") and line.endswith(
        f"| {catches:.2f} ({catches:.2f} to {catches:.2f}) |")
