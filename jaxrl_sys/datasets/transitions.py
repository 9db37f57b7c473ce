"""A dataset's episodes as one flat table of transitions, in episode order: what an offline
agent holds on device and samples from, as an online agent samples its replay."""

from __future__ import annotations

from typing import Sequence

import jax
import numpy as np
from flax import struct

from jaxrl_sys.datasets.recording import Episode


@struct.dataclass
class Transitions:
    """M transitions (leaves [M, ...]); episodes lie one after another, each ending at a row
    whose `episode_end` is True."""

    obs: jax.Array  # [M, ...] the observation acted in
    actions: jax.Array  # [M, ...]
    rewards: jax.Array  # [M] float32
    next_obs: jax.Array  # [M, ...] the observation the step led to (the last one at an end)
    terminated: jax.Array  # [M] bool: the step ended the episode for good (no bootstrap)
    truncated: jax.Array  # [M] bool: the episode was cut off here (bootstrap from next_obs)

    @property
    def size(self) -> int:
        """The number of transitions M."""
        return int(self.rewards.shape[0])


def from_episodes(episodes: Sequence[Episode]) -> Transitions:
    """Concatenate episodes into transitions (host arrays). An episode's last step is marked
    `truncated` when it neither terminated nor was truncated in the data (a recording that
    stopped mid-episode), so that no return or target runs on into the next episode.

    Args:
        episodes: the episodes, each of T >= 1 steps.

    Returns:
        The transitions, M = the sum of the episodes' lengths.
    """
    def stacked(name: str, select) -> np.ndarray:
        return np.concatenate([np.asarray(select(getattr(e, name))) for e in episodes])

    truncated = []
    for e in episodes:
        cut = np.array(e.truncations, bool)
        cut[-1] |= not (e.terminations[-1] or e.truncations[-1])
        truncated.append(cut)
    return Transitions(
        obs=stacked("observations", lambda x: x[:-1]),
        actions=stacked("actions", lambda x: x),
        rewards=stacked("rewards", lambda x: x).astype(np.float32),
        next_obs=stacked("observations", lambda x: x[1:]),
        terminated=stacked("terminations", lambda x: x).astype(bool),
        truncated=np.concatenate(truncated))
