"""Gymnasium envs for the host-loop tests, importable by worker processes as `host_envs`.

Registered on import, so `gymnasium.make("host_envs:Counter-v0")` works in any process whose
`sys.path` holds the tests directory (spawned workers inherit the parent's path).
"""

from __future__ import annotations

import os
import time

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv


class Counter(gymnasium.Env):
    """obs = steps taken in the episode; reward = that count. Action 1 terminates at count
    `terminate_at`; the registered TimeLimit truncates at 5 steps."""

    def __init__(self, terminate_at: int = 4) -> None:
        self.observation_space = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.terminate_at = terminate_at
        self.count = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.count += 1
        terminated = bool(action == 1 and self.count >= self.terminate_at)
        return np.array([self.count], np.float32), float(self.count), terminated, False, {}


class FailingCartPole(CartPoleEnv):
    """CartPole that fails at its `fail_at`-th step: raises, exits its process, or hangs;
    with `only_seed`, only the env first reset with that seed (the env of that global id in
    a run of seed 0) fails."""

    def __init__(self, fail_at: int = 50, how: str = "raise", only_seed: int = -1,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.fail_at, self.how, self.steps = fail_at, how, 0
        self.only_seed, self.first_seed = only_seed, None

    def reset(self, *, seed=None, options=None):
        if self.first_seed is None:
            self.first_seed = seed
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at and self.only_seed in (-1, self.first_seed):
            if self.how == "raise":
                raise RuntimeError(f"injected failure at step {self.fail_at}")
            if self.how == "exit":
                os._exit(3)
            if self.how == "hang":
                time.sleep(3600)
        return super().step(action)


class SlowToStartCartPole(CartPoleEnv):
    """CartPole that takes `seconds` to make in a worker process (as an import under a heavy
    load may), and none in the main process, where the vector env reads its spaces."""

    def __init__(self, seconds: float = 60.0, **kwargs) -> None:
        import multiprocessing

        if multiprocessing.parent_process() is not None:
            time.sleep(seconds)
        super().__init__(**kwargs)


gymnasium.register("Counter-v0", entry_point=Counter, max_episode_steps=5)
gymnasium.register("FailingCartPole-v0", entry_point=FailingCartPole, max_episode_steps=500)
gymnasium.register("SlowToStartCartPole-v0", entry_point=SlowToStartCartPole, max_episode_steps=500)
