"""A run's replay buffer as episodes (D4RL's "replay" datasets: everything an agent saw while
it learned, up to a checkpoint).

Replay rings keep one transition per env step, {obs, action, reward, terminated, next_obs}
(and `truncated` where the agent stores it), `next_obs` the observation before any auto-reset.
Read oldest first, an env's rows split into episodes where a step terminated, was truncated,
or its `next_obs` is not the next row's `obs` (the env reset in between); the ring's last row
ends an episode too (cut off there: truncated unless it terminated).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from jaxrl_sys.core.replay import PrioritizedState, ReplayState
from jaxrl_sys.datasets.recording import Episode

TRANSITION_KEYS = ("obs", "action", "reward", "terminated", "next_obs")


def replay_of(env_state: Any) -> Optional[ReplayState]:
    """The replay ring of an agent's env state (its `replay`, or a prioritised replay's
    ring), or None when it keeps none or its rows are not transitions."""
    found = getattr(env_state, "replay", None)
    if isinstance(found, PrioritizedState):
        found = found.replay
    if not isinstance(found, ReplayState) or not isinstance(found.data, dict):
        return None
    return found if set(TRANSITION_KEYS) <= set(found.data) else None


def ring_order(position: int, size: int, capacity: int) -> np.ndarray:
    """An env ring's filled slots, oldest first."""
    if size < capacity:
        return np.arange(size)
    return (position + np.arange(capacity)) % capacity


def replay_episodes(data: dict, position: np.ndarray, size: np.ndarray) -> list[Episode]:
    """Every env ring's rows as episodes, env by env, oldest first.

    Args:
        data: one seed's replay data, host arrays {key: [num_envs, capacity, ...]}.
        position: [num_envs] the next slot each ring writes.
        size: [num_envs] each ring's filled slots.

    Returns:
        The episodes (the first of a full ring may begin mid-episode).
    """
    capacity = np.asarray(data["reward"]).shape[1]
    episodes = []
    for env in range(np.asarray(size).shape[0]):
        order = ring_order(int(position[env]), int(size[env]), capacity)
        if order.size == 0:
            continue
        rows = {key: np.asarray(value[env])[order] for key, value in data.items()}
        obs, next_obs = rows["obs"], rows["next_obs"]
        terminated = rows["terminated"].astype(bool)
        ends = terminated | rows.get("truncated", np.zeros_like(terminated)).astype(bool)
        same = (next_obs[:-1] == obs[1:]).reshape(obs.shape[0] - 1, -1).all(axis=1)
        ends[:-1] |= ~same
        ends[-1] = True
        starts = np.concatenate([[0], np.flatnonzero(ends[:-1]) + 1])
        for first, last in zip(starts, np.flatnonzero(ends)):
            span = slice(first, last + 1)
            truncations = np.zeros(last + 1 - first, bool)
            truncations[-1] = not terminated[last]
            episodes.append(Episode(
                observations=np.concatenate([obs[span], next_obs[last:last + 1]]),
                actions=rows["action"][span], rewards=rows["reward"][span].astype(np.float32),
                terminations=terminated[span], truncations=truncations))
    return episodes
