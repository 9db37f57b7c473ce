"""Episodes as they finish in the host loop's envs: undiscounted returns and lengths, summed
like `jaxrl_sys.core.rollout.episode_metrics` so that both loops report the same quantities."""

from __future__ import annotations

import numpy as np

from jaxrl_sys.runtime.driver import EPISODE_KEYS


class EpisodeTracker:
    """Returns (undiscounted, unscaled rewards) and lengths of episodes as they finish, summed
    like `jaxrl_sys.core.rollout.episode_metrics` so that both loops report the same quantities."""

    def __init__(self, num_envs: int) -> None:
        self.episode_return = np.zeros(num_envs, np.float64)
        self.episode_length = np.zeros(num_envs, np.int64)
        self.sums = dict.fromkeys(EPISODE_KEYS, 0.0)

    def step(self, reward: np.ndarray, done: np.ndarray) -> None:
        self.episode_return += reward
        self.episode_length += 1
        if done.any():
            self.sums["episode_return_sum"] += float(self.episode_return[done].sum())
            self.sums["episode_length_sum"] += float(self.episode_length[done].sum())
            self.sums["episode_count"] += float(done.sum())
            self.episode_return[done] = 0.0
            self.episode_length[done] = 0

    def take_sums(self) -> dict[str, float]:
        """The sums since the last call (then reset)."""
        sums, self.sums = self.sums, dict.fromkeys(EPISODE_KEYS, 0.0)
        return sums
