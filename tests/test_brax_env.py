"""brax:<task> envs through our env interface: spec, truncation at the episode bound, a fall
as termination, auto-reset, one-line errors, and PPO and SAC runs from train.py."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from test_cli import train_script

if importlib.util.find_spec("brax") is None:  # not imported here: envs.brax_env imports it
    pytest.skip("the brax extra is not installed (pip install -e '.[brax]'; CI installs it)",
                allow_module_level=True)


@pytest.mark.slow
def test_inverted_pendulum_spec_and_truncation_with_auto_reset():
    env = envs.make("brax:inverted_pendulum", episode_length=3, episode_stats=False)
    assert env.spec.obs_shape == (4,) and env.spec.max_episode_steps == 3
    assert env.spec.action_space.shape == (1,) and env.spec.action_space.low == (-1.0,)
    step = jax.jit(env.step)
    obs, state = env.reset(jax.random.PRNGKey(0))
    for t in range(3):
        obs, state, reward, terminated, truncated, info = step(
            jax.random.PRNGKey(t + 1), state, jnp.zeros(1))
        assert float(reward) == 1.0 and not bool(terminated)
        assert bool(truncated) == (t == 2)
    # the bound was reached: a new episode has begun, the old one's last obs is in info
    assert int(state.steps) == 0
    assert not np.allclose(obs, info["final_observation"])
    np.testing.assert_allclose(obs, env.reset(jax.random.PRNGKey(3))[0])


@pytest.mark.slow
def test_a_fall_terminates_the_episode():
    env = envs.make("brax:inverted_pendulum", episode_stats=False)
    step = jax.jit(env.step)
    _, state = env.reset(jax.random.PRNGKey(0))
    for t in range(200):  # full force one way tips the pole past its limit
        _, state, _, terminated, truncated, _ = step(jax.random.PRNGKey(t), state, jnp.ones(1))
        if bool(terminated):
            break
    assert bool(terminated) and not bool(truncated) and t < 199


@pytest.mark.parametrize("bad, params, message", [
    ("brax:hoper", {}, "unknown brax env 'hoper'"),
    ("brax:hopper", {"backend": "bullet"}, "backend='bullet'"),
    ("brax:hopper", {"gravity": 1}, "unknown param(s) gravity"),
    ("brax:", {}, "names no brax env"),
])
def test_bad_names_and_params_are_one_line_errors(bad, params, message):
    with pytest.raises((envs.UnknownEnvError, envs.EnvParamError)) as error:
        envs.make(bad, **params)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("agent, extra", [
    ("ppo", ["--set", "num_envs=16", "--set", "rollout_steps=16"]),
    ("sac", ["--set", "num_envs=16", "--set", "rollout_steps=4", "--set", "learning_starts=64",
             "--set", "batch_size=32"]),
])
@pytest.mark.slow
def test_ppo_and_sac_train_on_a_brax_task(tmp_path, capsys, agent, extra):
    code = train_script.main(["--no-progress", "--agent", agent, "--env", "brax:inverted_pendulum",
                              "--total-steps", "512", "--chunks", "2", "--seeds", "2",
                              "--run-root", str(tmp_path), *extra])
    out = capsys.readouterr().out
    assert code == 0 and "final mean return" in out, out


def test_brax_renderer_draws_a_state():
    from jaxrl_sys.envs.render import BraxRenderer, RenderError, can_render

    env = envs.make("brax:inverted_pendulum")
    assert can_render("brax:inverted_pendulum")
    _, state = env.reset(jax.random.PRNGKey(0))
    try:
        frame = BraxRenderer(env.unwrapped).frame(state)
    except RenderError as error:  # MuJoCo found no OpenGL platform (EGL) on this machine
        pytest.skip(str(error))
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8 and frame.max() > 0
