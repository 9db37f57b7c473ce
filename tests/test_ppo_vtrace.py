"""PPO's V-trace option (APPO, `vtrace=True`): on-policy targets are GAE's, every minibatch step
takes V-trace with that step's parameters, bad values are one-line errors, it learns
CartPole-v1 on device, and it runs through the host loop with staleness. Its 8-devices-equal-1
test is tests/test_execution.py's (parametrised over `vtrace`)."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxrl_sys import agents, envs
from jaxrl_sys.agents import ppo
from jaxrl_sys.core.returns import vtrace
from jaxrl_sys.agents.families.policy_gradient import minibatch_indices
from jaxrl_sys.agents.ppo.agent import vtrace_targets
from jaxrl_sys.agents.ppo.networks import evaluate_actions
from jaxrl_sys.commands import train as train_script
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.returns import gae
from jaxrl_sys.tools import learning_check as lc

STEPS, ENVS = 16, 8


def small_config(**overrides) -> ppo.Config:
    """PPO's CartPole-v1 defaults on a [STEPS, ENVS] rollout, with V-trace on."""
    return dataclasses.replace(ppo.default_config("CartPole-v1"), num_envs=ENVS,
                               rollout_steps=STEPS, vtrace=True, **overrides)


def random_trajectory(key: jax.Array) -> ppo.Trajectory:
    """A CartPole-shaped rollout [T, B, ...] with random behaviour log-probabilities (not the
    learner's) and episode ends of both kinds."""
    ks = jax.random.split(key, 8)
    return ppo.Trajectory(
        obs=jax.random.normal(ks[0], (STEPS, ENVS, 4)),
        actions=jax.random.randint(ks[1], (STEPS, ENVS), 0, 2),
        log_probs=jnp.log(jax.random.uniform(ks[2], (STEPS, ENVS), minval=0.2, maxval=0.8)),
        values=jax.random.normal(ks[3], (STEPS, ENVS)),
        next_values=jax.random.normal(ks[4], (STEPS, ENVS)),
        rewards=jax.random.uniform(ks[5], (STEPS, ENVS)),
        terminated=jax.random.uniform(ks[6], (STEPS, ENVS)) < 0.1,
        truncated=jax.random.uniform(ks[7], (STEPS, ENVS)) < 0.05,
        env_ids=jnp.arange(ENVS),
    )


def own_log_probs(agent: ppo.Agent, params, traj: ppo.Trajectory) -> jax.Array:
    """Log-probabilities [T, B] of the rollout's actions under `params`."""
    log_probs, _, _ = evaluate_actions(agent.network, params, traj.obs.reshape(-1, 4),
                                       traj.actions.reshape(-1))
    return log_probs.reshape(STEPS, ENVS)


@pytest.mark.parametrize("lam", [1.0, 0.9])
@pytest.mark.slow
def test_on_policy_vtrace_targets_are_gaes_returns_at_the_same_lambda(lam):
    """Behaviour == target on a rollout whose next values are the next steps' values: vs is
    GAE(lambda)'s return for any lambda; the advantage is the one-step error bootstrapped from
    the next vs, which is GAE's advantage at lambda = 1."""
    config = small_config(gae_lambda=lam)
    agent = ppo.make(envs.make("CartPole-v1"), config, axis_name=None)
    params = agent.init(jax.random.PRNGKey(0)).params
    traj = random_trajectory(jax.random.PRNGKey(1))
    ended = traj.terminated | traj.truncated
    # one critic along each episode, as in a rollout: V(s'_t) is V(s_{t+1}) unless it ended
    next_values = jnp.where(ended, traj.next_values,
                            jnp.concatenate([traj.values[1:], traj.next_values[-1:]]))
    traj = traj._replace(log_probs=own_log_probs(agent, params, traj), next_values=next_values)
    advantages, returns = vtrace_targets(agent.network, config, params, traj.obs, traj)
    gae_advantages, gae_returns = gae(traj.rewards, traj.values, traj.next_values,
                                      traj.terminated, traj.truncated, config.gamma, lam)
    np.testing.assert_allclose(returns, gae_returns, rtol=1e-5, atol=1e-5)
    later = jnp.where(ended, traj.next_values,
                      jnp.concatenate([gae_returns[1:], traj.next_values[-1:]]))
    one_step = traj.rewards + config.gamma * (1.0 - traj.terminated) * later - traj.values
    np.testing.assert_allclose(advantages, one_step, rtol=1e-5, atol=1e-5)
    if lam == 1.0:
        np.testing.assert_allclose(advantages, gae_advantages, rtol=1e-5, atol=1e-5)
    else:
        assert not np.allclose(advantages, gae_advantages, atol=1e-3)


@pytest.mark.slow
def test_each_minibatch_step_takes_vtrace_with_its_own_parameters():
    """One epoch of two minibatches equals two hand-made Adam steps on `ppo_loss`, each with
    V-trace targets (constants for the gradient) from the parameters it starts from; the
    second step with the first step's targets would land elsewhere."""
    config = small_config(num_minibatches=2, update_epochs=1, learning_rate=0.05)
    agent = ppo.make(envs.make("CartPole-v1"), config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    traj = random_trajectory(jax.random.PRNGKey(1))
    key = jax.random.PRNGKey(2)
    updated, _ = jax.jit(agent.update)(state, traj, key)

    optimizer = ppo.build_optimizer(config)
    idx = minibatch_indices(traj.env_ids, jax.random.fold_in(key, 0), config)  # [2, M, B]

    def step(params, opt_state, target_params, m: int):
        """An Adam step on minibatch m with V-trace from `target_params`' log-probabilities."""
        vs, advantages = vtrace(traj.log_probs, own_log_probs(agent, target_params, traj),
                                traj.rewards, traj.values, traj.next_values, traj.terminated,
                                traj.truncated, gamma=config.gamma, lam=config.gae_lambda)
        pick = lambda x: jnp.take_along_axis(  # noqa: E731
            x, idx[m].reshape(idx[m].shape + (1,) * (x.ndim - 2)), axis=0
        ).reshape(-1, *x.shape[2:])

        def loss(p):
            log_probs, entropy, values = evaluate_actions(agent.network, p, pick(traj.obs),
                                                          pick(traj.actions))
            return ppo.ppo_loss(
                log_probs, entropy, values, pick(traj.log_probs), pick(traj.values),
                pick(advantages), pick(vs), clip_eps=config.clip_eps, vf_coef=config.vf_coef,
                ent_coef=config.ent_coef, clip_value=config.clip_value,
                normalize_advantages=config.normalize_advantages, axis_name=None,
            )[0]

        updates, opt_state = optimizer.update(jax.grad(loss)(params), opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    first, opt_state = step(state.params, state.opt_state, state.params, 0)
    second, _ = step(first, opt_state, first, 1)
    stale_second, _ = step(first, opt_state, state.params, 1)
    close = lambda a, b: jax.tree.map(  # noqa: E731
        lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6), a, b)
    close(updated.params, second)
    gap = jax.tree.map(lambda x, y: float(np.abs(x - y).max()), second, stale_second)
    assert max(jax.tree.leaves(gap)) > 1e-5


def test_bad_vtrace_values_are_one_line_errors(tmp_path, capsys):
    with pytest.raises(ConfigError, match="vtrace must be true or false, got 'false'") as error:
        dataclasses.replace(ppo.Config(), vtrace="false").validate()
    assert "\n" not in error.value.args[0]
    code = train_script.main(["--agent", "ppo", "--set", "vtrace=maybe", "--no-progress",
                              "--run-root", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "vtrace" in err[0] and "bool" in err[0], err


@pytest.mark.learning
@pytest.mark.two_codegens
@pytest.mark.slow
def test_vtrace_learns_cartpole_with_ppos_defaults():
    """PPO's shipped CartPole-v1 config plus `vtrace=true` on the device loop: the greedy
    policy of seed 0 reaches 475 (32 episodes) within PPO's budget, as the learning tests
    judge (tests/test_learning.py)."""
    case = lc.LearningCase("CartPole-v1", 475.0, agent="ppo", overrides=(("vtrace", True),))
    result = lc.run_case(case, agents.load("ppo"), envs, [0], stop_when_reached=True)
    assert lc.judge(result).reached.all(), f"greedy returns: {result.eval_returns.tolist()}"


@pytest.mark.slow
def test_vtrace_runs_through_the_host_loop_with_staleness_4(tmp_path):
    """Smoke test, not a learning test: `gymnasium:CartPole-v1 --set vtrace=true --staleness 4`
    trains 4096 steps through the CLI's host loop (worker processes) and logs finite losses."""
    code = train_script.main([
        "--agent", "ppo", "--env", "gymnasium:CartPole-v1", "--set", "vtrace=true",
        "--staleness", "4", "--total-steps", "4096", "--chunks", "2", "--no-progress",
        "--run-root", str(tmp_path)])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    assert json.loads((run_dir / "run.json").read_text())["config"]["vtrace"] is True
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["env_steps"] >= 4096
    for key in ("loss", "value_loss", "approx_kl"):
        assert np.isfinite(rows[-1][key]), (key, rows[-1])
