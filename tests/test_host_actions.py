"""Host-loop actions reach a Box env inside its bounds: the adapters clip what they send, the
agent keeps its unclipped sample. The env below is registered on import, so worker processes
make it as `gymnasium:test_host_actions:StrictBox-v0` (spawn copies this process's sys.path).
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

LOW = np.array([-0.05, 0.5], np.float32)
HIGH = np.array([0.05, 1.0], np.float32)


class StrictBox(gymnasium.Env):
    """A 2-D Box env that raises on an action outside its bounds (or of another dtype);
    reward 1 per step, episodes of 8 steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = spaces.Box(LOW, HIGH, dtype=np.float32)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        action = np.asarray(action)
        if action.dtype != np.float32 or not self.action_space.contains(action):
            raise ValueError(f"action {action!r} outside {self.action_space}")
        self.t += 1
        obs = np.array([self.t / 8.0, *action], np.float32)
        return obs, 1.0, self.t >= 8, False, {}


gymnasium.register("StrictBox-v0", entry_point=StrictBox, max_episode_steps=8)
ENV = "gymnasium:test_host_actions:StrictBox-v0"


def test_gymnasium_box_actions_are_clipped_and_the_sample_is_kept():
    from jaxrl_sys import envs

    env = envs.make_host(ENV)
    sample = np.array([[3.0, -2.0], [0.01, 0.7], [-0.2, 1.5]], np.float32)
    kept = sample.copy()
    sent = env.decode_actions(sample)
    np.testing.assert_array_equal(sent, np.array([[0.05, 0.5], [0.01, 0.7], [-0.05, 1.0]], np.float32))
    assert sent.dtype == np.float32
    np.testing.assert_array_equal(sample, kept)  # the agent's own sample is not touched


def test_envpool_box_actions_are_clipped_and_discrete_ones_pass():
    from jaxrl_sys.core.types import Box, Discrete, EnvSpec
    from jaxrl_sys.envs.envpool_env import EnvpoolEnv

    def envpool_env(space):
        spec = EnvSpec("envpool:Test-v0", (3,), "float32", space, 10)
        return EnvpoolEnv("Test-v0", {}, spec, atari=False, reward_threshold=None,
                          clip_rewards=False, episodic_life=False)

    box = envpool_env(Box((2,), (-1.0, 0.0), (1.0, 2.0)))
    sent = box.decode_actions(np.array([[-4.0, 4.0], [0.5, 1.0]], np.float32))
    np.testing.assert_array_equal(sent, [[-1.0, 2.0], [0.5, 1.0]])
    assert sent.dtype == np.float32
    discrete = envpool_env(Discrete(4))
    np.testing.assert_array_equal(discrete.decode_actions(np.array([3, 0])), [3, 0])


@pytest.mark.slow
def test_ppo_through_the_host_loop_sends_actions_within_the_bounds(tmp_path, capsys):
    """PPO's Gaussian samples around 0 with std 1 fall outside [-0.05, 0.05] x [0.5, 1] at once;
    the env raises on one, which would end the run with exit code 1."""
    from jaxrl_sys.commands import train as train_script

    code = train_script.main([
        "--no-progress", "--agent", "ppo", "--env", ENV, "--total-steps", "256",
        "--chunks", "1", "--set", "num_envs=2", "--set", "rollout_steps=64",
        "--set", "num_minibatches=2", "--run-root", str(tmp_path),
    ])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "final mean return 8.0" in captured.out
