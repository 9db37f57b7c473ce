"""Recurrent PPO (`--set memory=gru|lstm`): the hidden state is reset where episodes end, no
gradient crosses an episode start, replay reproduces acting, and evaluation carries the state.
These are the checks that catch the published reset bugs (PureJaxRL issues 3 and 29, JaxMARL
pull request 127)."""

import dataclasses

import flax.linen as flax_nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import ppo
from jaxrl_sys.agents.families.policy_gradient import env_minibatch_indices
from jaxrl_sys.agents.ppo.agent import collect
from jaxrl_sys.agents.ppo.networks import evaluate_sequences
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.evaluation import evaluate
from jaxrl_sys.core.networks import RecurrentActorCritic, initial_memory

SMALL = dict(num_envs=8, rollout_steps=24, num_minibatches=2, update_epochs=1, total_steps=8 * 24)


def recurrent_agent(env_name: str, memory: str = "gru", **env_params):
    """A small recurrent PPO on `env_name` and its env."""
    env = envs.make(env_name, **env_params)
    config = dataclasses.replace(ppo.default_config(env_name), **SMALL, memory=memory,
                                 memory_size=16, hidden=(16,))
    return env, ppo.make(env, config)


def memories_after_each_step(env_name: str, memory: str, **env_params):
    """(memory after every step [T, B, ...] as a flat array, ended [T, B], starts [T, B]) of a
    random-policy rollout of a fresh recurrent agent."""
    env, agent = recurrent_agent(env_name, memory, **env_params)
    state = agent.init(jax.random.PRNGKey(0))
    vstate = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(8))
    one_step = dataclasses.replace(agent.config, rollout_steps=1)

    def step(vstate, t):
        next_vstate, traj, _ = collect(env, agent.network, one_step, None, state.params, None,
                                       vstate, jax.random.PRNGKey(t))
        ended = traj.terminated[0] | traj.truncated[0]
        flat = jnp.concatenate([m.reshape(8, -1) for m in jax.tree.leaves(next_vstate.memory)],
                               axis=1)
        return next_vstate, (flat, ended, next_vstate.starts)

    _, (flat, ended, starts) = jax.lax.scan(step, vstate, jnp.arange(40))
    return np.asarray(flat), np.asarray(ended), np.asarray(starts)


def assert_reset_exactly_at_ends(flat, ended, starts=None) -> None:
    """The state after every step [T, B, -1] is the initial one (zeros) exactly where the step
    ended an episode ([T, B]; many ends), a carried state elsewhere, and `starts` follows."""
    assert ended.sum() >= 8 * 5
    np.testing.assert_array_equal(flat[ended], 0.0)
    assert np.all(np.abs(flat[~ended]).max(axis=-1) > 0)  # other steps do carry a state
    if starts is not None:
        np.testing.assert_array_equal(starts, ended)


@pytest.mark.parametrize("memory", ["gru", "lstm"])
@pytest.mark.slow
def test_the_state_after_a_terminated_end_is_the_initial_state(memory):
    # MemoryChain at memory_length 3 terminates after 4 steps: every env ends many times.
    assert_reset_exactly_at_ends(
        *memories_after_each_step("MemoryChain-bsuite", memory, memory_length=3))


def test_the_state_after_a_truncated_end_is_the_initial_state():
    # CartPole cut at 5 steps: episodes end by truncation (random play rarely falls in 5).
    flat, ended, _ = memories_after_each_step("CartPole-v1", "gru", max_steps_in_episode=5)
    assert_reset_exactly_at_ends(flat, ended)


@pytest.mark.parametrize("memory", ["gru", "lstm"])
def test_no_gradient_crosses_an_episode_start(memory):
    network = RecurrentActorCritic(action_dim=3, discrete=True, hidden=(8,), memory=memory,
                                   memory_size=8)
    steps, batch, start = 7, 2, 4
    obs = jax.random.normal(jax.random.PRNGKey(0), (steps, batch, 5))
    starts = jnp.zeros((steps, batch), bool).at[start, 0].set(True)
    memory0 = jax.tree.map(lambda m: m + 0.3, initial_memory(memory, 8, batch))
    params = network.init(jax.random.PRNGKey(1), memory0, obs, starts)

    def loss_at(t, obs, memory0):
        """Env 0's logits and value at step t, summed."""
        _, (logits, values) = network.apply(params, memory0, obs, starts)
        return logits[t, 0].sum() + values[t, 0]

    for t in range(start, steps):
        grad_obs, grad_memory = jax.grad(loss_at, argnums=(1, 2))(t, obs, memory0)
        np.testing.assert_array_equal(grad_obs[:start, 0], 0.0)
        jax.tree.map(lambda g: np.testing.assert_array_equal(g[0], 0.0), grad_memory)
        assert np.abs(grad_obs[start:t + 1, 0]).max() > 0
    # Env 1 has no episode start: its loss at the last step does reach its first input.
    grad_obs = jax.grad(lambda o: network.apply(params, memory0, o, starts)[1][1][-1, 1])(obs)
    assert np.abs(grad_obs[0, 1]).max() > 0


@pytest.mark.parametrize("memory", ["gru", "lstm"])
def test_replaying_a_rollout_from_its_stored_state_reproduces_acting(memory):
    # Episodes of 5 steps in rollouts of 24: the second rollout starts mid-episode.
    env, agent = recurrent_agent("MemoryChain-bsuite", memory, memory_length=4)
    state = agent.init(jax.random.PRNGKey(0))
    vstate = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(8))
    # A first rollout, so that the second starts mid-episode from a stored non-zero state.
    vstate, _, _ = collect(env, agent.network, agent.config, None, state.params, None, vstate,
                           jax.random.PRNGKey(2))
    _, traj, _ = collect(env, agent.network, agent.config, None, state.params, None, vstate,
                         jax.random.PRNGKey(3))
    assert np.abs(jax.tree.leaves(traj.memory)[0]).max() > 0 and traj.starts.any()
    log_probs, _, values = evaluate_sequences(agent.network, state.params, traj.memory, traj.obs,
                                              traj.starts, traj.actions)
    np.testing.assert_allclose(log_probs.reshape(traj.log_probs.shape), traj.log_probs, atol=1e-6)
    np.testing.assert_allclose(values.reshape(traj.values.shape), traj.values, atol=1e-6)


def test_minibatches_are_whole_env_sequences_independent_of_the_device_split():
    ids = jnp.arange(16)
    whole = np.asarray(env_minibatch_indices(ids, jax.random.PRNGKey(0), 4))  # [4, 4]
    assert sorted(whole.ravel()) == list(range(16))
    assert all(sorted(row // 4) == [0, 1, 2, 3] for row in whole)  # one env of each block
    # Two devices of 8 envs each deal their own blocks into the same minibatches.
    halves = [np.asarray(env_minibatch_indices(ids[i * 8:(i + 1) * 8], jax.random.PRNGKey(0), 4))
              + 8 * i for i in (0, 1)]
    np.testing.assert_array_equal(np.concatenate(halves, axis=1), whole)


@pytest.mark.slow
def test_evaluation_carries_the_state():
    """A recurrent policy that learned MemoryChain answers from memory: its greedy episodes
    are correct, so the state reached the last step (a reset every step would score 0)."""
    env, agent = recurrent_agent("MemoryChain-bsuite", memory_length=3)
    config = dataclasses.replace(agent.config, num_envs=32, rollout_steps=32, num_minibatches=4,
                                 update_epochs=4, total_steps=32 * 32 * 60, learning_rate=3e-3)
    agent = ppo.make(env, config)
    state = agent.init(jax.random.PRNGKey(0))
    vstate = agent.init_envs(jax.random.PRNGKey(1), jnp.arange(32))
    step = jax.jit(agent.train_step)
    for i in range(60):
        state, vstate, _ = step(state, vstate, jax.random.PRNGKey(100 + i))
    returns, _ = jax.jit(lambda s: evaluate(envs.make("MemoryChain-bsuite", memory_length=3),
                                            ppo.greedy_action(agent), s, jax.random.PRNGKey(7),
                                            jnp.arange(64)))(state)
    assert float(returns.mean()) > 0.9


def test_bad_memory_settings_are_one_line_errors():
    config = ppo.default_config("CartPole-v1")
    for change, match in [(dict(memory="rnn"), "memory must be one of"),
                          (dict(memory="gru", memory_size=0), "memory_size must be >= 1"),
                          (dict(memory="gru", num_envs=6, num_minibatches=4), "sets of envs")]:
        with pytest.raises(ConfigError, match=match):
            dataclasses.replace(config, **change).validate()



@pytest.mark.slow
def test_train_then_evaluate_a_recurrent_run_from_the_command_line(tmp_path, capsys):
    """The shipped commands end to end: a recurrent run learns MemoryChain, and evaluate.py,
    which plays greedy episodes from its checkpoint, carries the state to the answer."""
    from jaxrl_sys.commands import evaluate as evaluate_script, train as train_script

    assert train_script.main(["--no-progress", "--env", "MemoryChain-bsuite", "--set",
                              "memory=gru", "--total-steps", "40960", "--run-root",
                              str(tmp_path)]) == 0
    (run_dir,) = tmp_path.iterdir()
    capsys.readouterr()
    assert evaluate_script.main([str(run_dir), "--episodes", "32"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert float(last.split()[1]) > 0.9, last  # "return 1.0 +- 0.0, ..."; no memory: ~0


def test_rendering_steps_a_recurrent_policy_with_its_memory():
    from jaxrl_sys.commands.evaluate import render_episode

    env, agent = recurrent_agent("CartPole-v1")
    state = agent.init(jax.random.PRNGKey(0))
    seen = []

    class Frames:
        """A renderer that records how many frames it drew."""

        def frame(self, env_state):
            seen.append(1)
            return np.zeros((2, 2, 3), np.uint8)

        def close(self):
            pass

    frames = render_episode(env, ppo.greedy_action(agent), state, jax.random.PRNGKey(1), Frames())
    assert len(frames) == len(seen) >= 5


@pytest.mark.slow
def test_the_host_loop_resets_the_state_where_episodes_end():
    """Through the host loop (worker processes): the state each step starts from is exactly
    the initial one wherever an episode begins, after terminated and truncated ends alike
    (Counter terminates at 4 on action 1, else its time limit truncates at 5), and nowhere
    else; and the learner's replay of the rollout from the state before its first step gives
    back the acting log-probabilities (no staleness: the same parameters)."""
    import sys
    from pathlib import Path

    from jaxrl_sys.runtime import host
    from jaxrl_sys.runtime.host import HostLoopConfig

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # workers import host_envs
    env = envs.make_host("gymnasium:host_envs:Counter-v0", terminate_at=4)
    config = dataclasses.replace(ppo.default_config("CartPole-v1"), num_envs=4, rollout_steps=16,
                                 num_minibatches=2, memory="gru", memory_size=8, hidden=(8,),
                                 total_steps=4 * 16 * 3)
    fns = ppo.host_fns(ppo.make(env, config))

    def learn(state, replay, rollout, key):
        """PPO's learn, plus what the rollout says of the states at episode starts."""
        memory, starts = rollout.extras["memory"], rollout.extras["starts"]  # [T, B, H], [T, B]
        size = jnp.max(jnp.abs(memory), axis=-1)
        log_probs, _, _ = evaluate_sequences(fns_agent.network, state.params, memory[0],
                                             rollout.obs, starts, rollout.action)
        new_state, replay, metrics = fns.learn(state, replay, rollout, key)
        ended = rollout.terminated | rollout.truncated
        return new_state, replay, {
            **metrics,
            "at_starts": jnp.max(jnp.where(starts, size, 0.0)),
            # two steps into an episode (Counter's first observation, 0, leaves a fresh
            # network's state at 0): a state is carried
            "elsewhere": jnp.min(jnp.where(starts[1:] | starts[:-1], jnp.inf, size[1:])),
            "starts_after_ends": jnp.all(starts[1:] == ended[:-1]).astype(jnp.float32),
            "terminated": jnp.sum(rollout.terminated).astype(jnp.float32),
            "truncated": jnp.sum(rollout.truncated).astype(jnp.float32),
            "replay_error": jnp.max(jnp.abs(log_probs.reshape(starts.shape)
                                            - rollout.extras["log_prob"])),
        }

    fns_agent = ppo.make(env, config)
    result = host.train(env, fns._replace(learn=learn), seed=0, num_iterations=3,
                        iters_per_chunk=1, config=HostLoopConfig(staleness=0))
    for summary in result.history:
        values = summary.final_values
        assert float(values["terminated"][0]) > 0 and float(values["truncated"][0]) > 0
        assert float(values["at_starts"][0]) == 0.0
        assert float(values["elsewhere"][0]) > 0.0
        assert float(values["starts_after_ends"][0]) == 1.0
        assert float(values["replay_error"][0]) < 1e-6


@pytest.mark.parametrize("memory", ["gru", "lstm"])
def test_the_fused_sequence_memory_computes_flax_s_cells(memory):
    """`SequenceMemory` projects all inputs before its loop; with flax's cell's weights laid out
    in its blocks, it gives flax's `GRUCell` / `OptimizedLSTMCell` step for step."""
    from jaxrl_sys.core.networks import SequenceMemory

    steps, batch, features, size = 5, 3, 4, 6
    x = jax.random.normal(jax.random.PRNGKey(0), (steps, batch, features))
    starts = jnp.zeros((steps, batch), bool).at[2, 1].set(True)
    carry0 = jax.tree.map(lambda m: m + 0.5, initial_memory(memory, size, batch))
    if memory == "gru":
        cell = flax_nn.GRUCell(size)
        in_names, h_names = ("ir", "iz", "in"), ("hr", "hz", "hn")
    else:
        cell = flax_nn.OptimizedLSTMCell(size)
        in_names, h_names = ("ii", "if", "ig", "io"), ("hi", "hf", "hg", "ho")
    cell_params = cell.init(jax.random.PRNGKey(1), carry0, x[0])["params"]
    cell_params = jax.tree.map(lambda p: p + 0.1 * jax.random.normal(jax.random.PRNGKey(2),
                                                                     p.shape), cell_params)
    cat = lambda names, leaf: jnp.concatenate(  # noqa: E731
        [cell_params[n].get(leaf, jnp.zeros(size)) for n in names], axis=-1)
    params = {"input": {"kernel": cat(in_names, "kernel"),
                        "bias": cat(in_names, "bias") + (0 if memory == "gru"
                                                         else cat(h_names, "bias"))},
              "recurrent_kernel": cat(h_names, "kernel")}
    if memory == "gru":
        params["recurrent_bias"] = cell_params["hn"]["bias"]
    _, (carries, outputs) = SequenceMemory(memory, size).apply({"params": params}, carry0,
                                                               (x, starts))
    carry, want = carry0, []
    for t in range(steps):
        carry = jax.tree.map(lambda c: jnp.where(starts[t][:, None], 0.0, c), carry)
        carry, out = cell.apply({"params": cell_params}, carry, x[t])
        want.append(out)
    np.testing.assert_allclose(outputs, jnp.stack(want), atol=1e-5)
