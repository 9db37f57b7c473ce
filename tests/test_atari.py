"""Atari through the host loop: both backends (Gymnasium ALE workers, envpool threads) give the
same preprocessed frames and semantics, training signals (clipped rewards, lives) stay out of
the logged returns, the Nature torso, the per-env defaults, and PPO runs from train.py."""

import importlib.util
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn, ppo
from jaxrl_sys.envs.atari import AtariSignals
from jaxrl_sys.envs.envpool_env import EnvpoolVector
from jaxrl_sys.runtime.host import workers
from jaxrl_sys.core.networks import ActorCritic, NatureCNN, scan_unroll
from test_cli import train_script

if importlib.util.find_spec("ale_py") is None or importlib.util.find_spec("envpool") is None:
    pytest.skip("the atari extra is not installed (pip install -e '.[atari]'; CI installs it)",
                allow_module_level=True)


@pytest.mark.parametrize("name", ["gymnasium:ALE/Breakout-v5", "envpool:Breakout-v5"])
def test_both_backends_describe_the_same_preprocessed_game(name):
    env = envs.make_host(name)
    assert env.spec.obs_shape == (4, 84, 84) and env.spec.obs_dtype == "uint8"
    assert env.spec.action_space.n == 4 and env.spec.max_episode_steps == 27_000
    assert env.clip_rewards and env.episodic_life
    assert env.encode_obs(np.full((1, 4, 84, 84), 7)).dtype == np.uint8


def test_training_signals_clip_rewards_and_end_lives_for_the_learner_only():
    signals = AtariSignals()
    signals.clip_rewards, signals.episodic_life = True, True
    reward, terminated = signals.learning_signals(
        np.array([0.0, 4.0, -2.0]), np.array([False, False, True]),
        {"life_lost": np.array([True, False, False])})
    np.testing.assert_array_equal(reward, [0.0, 1.0, -1.0])
    np.testing.assert_array_equal(terminated, [True, False, True])
    signals.clip_rewards, signals.episodic_life = False, False
    reward, terminated = signals.learning_signals(
        np.array([4.0]), np.array([False]), {"life_lost": np.array([True])})
    assert reward.tolist() == [4.0] and terminated.tolist() == [False]


def _play_until_a_game_ends(vector, num_envs, max_steps=5000):
    """Random play; returns (step index, ended env, infos, observations) at the first end."""
    rng = np.random.default_rng(0)
    vector.reset_async(seed=1)
    obs, _ = vector.reset_wait()
    lives_lost = np.zeros(num_envs, int)
    for t in range(max_steps):
        vector.step_async(rng.integers(0, 4, num_envs))
        next_obs, reward, terminated, truncated, info = vector.step_wait()
        lives_lost += np.asarray(info["life_lost"], int)
        done = terminated | truncated
        if done.any():
            return t, int(np.flatnonzero(done)[0]), info, obs, next_obs, lives_lost
        obs = next_obs
    raise AssertionError("no game ended")


def test_envpool_vector_resets_in_the_step_that_ends_a_game():
    num_envs = 2
    vector = envs.make_host("envpool:Breakout-v5").make_vector(num_envs)
    assert isinstance(vector, EnvpoolVector)
    try:
        t, ended, info, obs, next_obs, lives_lost = _play_until_a_game_ends(vector, num_envs)
        # Breakout has 5 lives: the four before the last were reported as lost lives
        assert lives_lost[ended] == 4 and not info["life_lost"][ended]
        final = info["final_obs"][ended]
        # the last frame of the ended game continues the stack it came from ...
        np.testing.assert_array_equal(final[:3], obs[ended][1:])
        # ... and the returned observation is a new game's first stack
        assert not np.array_equal(next_obs[ended], final)
        vector.step_async(np.zeros(num_envs, int))
        _, _, terminated, truncated, info = vector.step_wait()
        assert not terminated[ended] and int(info["elapsed_step"][ended]) == 1
    finally:
        vector.close()


def test_a_failed_run_closes_the_envpool_pool():
    vector = envs.make_host("envpool:Breakout-v5").make_vector(2)
    vector.reset_async(seed=0)
    vector.reset_wait()
    workers.shutdown(None, vector, terminate=True)  # as after a failure
    assert vector.closed and vector._pool is None


def test_gymnasium_workers_report_lost_lives_and_whole_games():
    num_envs = 2
    vector = envs.make_host("gymnasium:ALE/Breakout-v5").make_vector(num_envs, "spawn")
    try:
        _, ended, info, _, _, lives_lost = _play_until_a_game_ends(vector, num_envs)
        assert lives_lost[ended] == 4
        assert info["final_obs"][ended].shape == (4, 84, 84)
    finally:
        vector.close()


@pytest.mark.slow
def test_nature_torso_scales_frames_and_is_shared_by_both_heads():
    frames = np.random.default_rng(0).integers(0, 256, (2, 4, 84, 84)).astype(np.uint8)
    torso = NatureCNN()
    params = torso.init(jax.random.PRNGKey(0), jnp.asarray(frames))
    features = torso.apply(params, jnp.asarray(frames))
    assert features.shape == (2, 512) and bool(jnp.all(features >= 0))
    np.testing.assert_allclose(features, torso.apply(params, jnp.asarray(frames, jnp.float32)))
    net = ActorCritic(action_dim=4, discrete=True, torso="nature_cnn")
    net_params = net.init(jax.random.PRNGKey(0), jnp.asarray(frames))
    assert set(net_params["params"]) == {"shared_torso", "actor_head", "critic_head"}
    (logits, value) = net.apply(net_params, jnp.asarray(frames))
    assert logits.shape == (2, 4) and value.shape == (2,)
    np.testing.assert_allclose(value, net.apply(net_params, jnp.asarray(frames),
                                                method=ActorCritic.value), rtol=1e-6)
    # on CPU a conv inside a scan is slow: gradient loops through the torso are unrolled
    assert scan_unroll("nature_cnn", 4) == (4 if jax.default_backend() == "cpu" else 1)
    assert scan_unroll("mlp", 4) == 1


@pytest.mark.parametrize("name, torso", [
    ("envpool:Breakout-v5", "nature_cnn"), ("gymnasium:ALE/Pong-v5", "nature_cnn"),
    ("envpool:CartPole-v1", "mlp"), ("gymnasium:CartPole-v1", "mlp"),
])
def test_atari_defaults_are_found_by_family(name, torso):
    config = ppo.default_config(name)
    assert config.torso == torso
    if torso == "nature_cnn":
        assert (config.num_envs, config.rollout_steps, config.clip_eps) == (8, 128, 0.1)


@pytest.mark.user_codegen  # its cost is running, which the tests' flags slow
@pytest.mark.parametrize("name", ["envpool:Breakout-v5", "gymnasium:ALE/Breakout-v5"])
@pytest.mark.slow
def test_ppo_trains_on_atari_from_train_py(tmp_path, capsys, name):
    code = train_script.main([
        "--no-progress", "--agent", "ppo", "--env", name, "--total-steps", "64",
        "--chunks", "2", "--run-root", str(tmp_path), "--set", "num_envs=2",
        "--set", "rollout_steps=16", "--set", "num_minibatches=2", "--set", "update_epochs=1"])
    out = capsys.readouterr().out
    assert code == 0 and "Traceback" not in out, out
    (run_dir,) = tmp_path.iterdir()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(np.isfinite(row["loss"]) for row in rows)


def test_dqn_keeps_frames_uint8_in_replay():
    env = envs.make_host("envpool:Breakout-v5")
    config = dqn.Config(torso="nature_cnn", num_envs=2, buffer_size=64, n_step=3)
    agent = dqn.make(env, config, axis_name=None)
    buffer = agent.init_replay(2)
    assert buffer.data["obs"].dtype == jnp.uint8 and buffer.data["next_obs"].dtype == jnp.uint8


@pytest.mark.parametrize("argv, message", [
    (["--env", "envpool:Breakout-v7"], "envpool has no task 'Breakout-v7'"),
    (["--env", "envpool:Breakout-v5", "--set", "env.num_envs=4"], "num_envs are set by the run"),
    (["--env", "envpool:Breakout-v5", "--set", "env.gravity=1"], "unknown setting(s) gravity"),
    (["--env", "envpool:IntersectionMultiAgent-v0"], "2 players per env is not vectorisable"),
    (["--env", "gymnasium:ALE/Breakoutt-v5"], "unknown env 'gymnasium:ALE/Breakoutt-v5'"),
    (["--env", "gymnasium:ALE/Breakout-v5", "--set", "env.frameskip=2"], "frameskip"),
])
def test_bad_atari_names_and_params_are_one_line_errors(tmp_path, capsys, argv, message):
    code = train_script.main(["--no-progress", "--agent", "ppo", "--run-root", str(tmp_path),
                              *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["envpool:Breakout-v5", "gymnasium:ALE/Breakout-v5"])
def test_an_episode_is_drawn_in_colour_for_either_backend(name):
    from jaxrl_sys.envs.render import can_render, gymnasium_episode_frames

    env = envs.make_host(name)
    assert can_render(name)
    seen = []

    def fire(obs, step):  # launches the ball and never moves: a short game
        seen.append(obs)
        return np.array([1])

    frames = gymnasium_episode_frames(env, fire, seed=0)
    assert 10 < len(frames) < 5_000 and frames[0].shape == (210, 160, 3)
    assert seen[0].shape == (1, 4, 84, 84) and seen[0].dtype == np.uint8
