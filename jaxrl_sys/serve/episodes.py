"""The open episodes: their ids, recurrent memory, experience, returns and idle time.

Clients interleave many episodes, and a client can die mid-episode: an episode not heard
from for `timeout` seconds is dropped (`expire`), so no state outlives its client.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any, Callable, Optional

import numpy as np

from jaxrl_sys.serve.codec import RequestError


@dataclasses.dataclass
class Episode:
    """One episode's state on the server.

    `observations`/`actions`: one per step, in order; `rewards[t]`: the rewards logged after
    action t (before action t+1). `starts`: the next action begins the episode (the
    recurrent memory resets). One act request per episode at a time (`busy`).
    """

    episode_id: str
    memory: Any
    last_seen: float
    lane: int = 0  # the learner's lane its steps go to (the exploration's env id)
    starts: bool = True
    busy: bool = False  # an act request is waiting for its batch
    total_reward: float = 0.0
    observations: list = dataclasses.field(default_factory=list)
    actions: list = dataclasses.field(default_factory=list)
    rewards: list = dataclasses.field(default_factory=list)
    extras: list = dataclasses.field(default_factory=list)

    def record(self, obs: np.ndarray, action: np.ndarray, extras: Optional[dict] = None) -> None:
        """One step: the observation, the action taken on it (the server's or the
        application's own) and what the learner needs besides (log-probs)."""
        self.observations.append(obs)
        self.actions.append(action)
        self.extras.append(extras or {})
        self.rewards.append(0.0)
        self.starts = False

    def add_reward(self, reward: float) -> None:
        """A reward earned since the last action (before the first action it is kept in the
        return only)."""
        self.total_reward += reward
        if self.rewards:
            self.rewards[-1] += reward

    @property
    def length(self) -> int:
        """Actions taken so far."""
        return len(self.actions)


@dataclasses.dataclass(frozen=True)
class FinishedEpisode:
    """What an ended episode hands to the experience sink: its steps [T, ...] and how it
    ended (`final_obs` after the last action; `terminated` False means cut short)."""

    episode_id: str
    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    final_obs: Optional[np.ndarray]
    terminated: bool
    extras: dict  # name -> [T, ...]
    lane: int = 0


class EpisodeTable:
    """Episodes by id, at most `max_episodes` open at once, each dropped `timeout` seconds
    after it was last heard from. `sink` receives every ended episode's experience."""

    def __init__(self, initial_memory: Callable[[], Any], timeout: float, max_episodes: int,
                 sink: Optional[Callable[[FinishedEpisode], None]] = None,
                 clock: Callable[[], float] = time.monotonic, lanes: int = 1,
                 lane_for: Optional[Callable[[], int]] = None):
        self.initial_memory = initial_memory
        self.lanes = lanes
        self.lane_for = lane_for  # the lane a new episode goes to (default: in turn)
        self.timeout = timeout
        self.max_episodes = max_episodes
        self.sink = sink
        self.clock = clock
        self.open: dict[str, Episode] = {}
        self.started = self.ended = self.expired = 0
        self.steps_logged = 0  # steps of ended episodes handed to the sink

    def start(self, episode_id: Optional[str] = None) -> Episode:
        """A new episode (a fresh id when none is given)."""
        episode_id = episode_id or uuid.uuid4().hex
        if episode_id in self.open:
            raise RequestError(409, f"episode {episode_id!r} is already open")
        if len(self.open) >= self.max_episodes:
            raise RequestError(429, f"{self.max_episodes} episodes are open: end some first")
        lane = self.lane_for() if self.lane_for is not None else self.started % self.lanes
        episode = Episode(episode_id, self.initial_memory(), self.clock(), lane=lane)
        self.open[episode_id] = episode
        self.started += 1
        return episode

    def get(self, episode_id: str) -> Episode:
        """The open episode `episode_id`, marked as heard from now."""
        episode = self.open.get(episode_id)
        if episode is None:
            raise RequestError(404, f"no open episode {episode_id!r} (never started, ended, or "
                                    f"idle for over {self.timeout:g} s)")
        episode.last_seen = self.clock()
        return episode

    def end(self, episode_id: str, final_obs: Optional[np.ndarray], terminated: bool) -> Episode:
        """Close `episode_id` and hand its experience to the sink."""
        episode = self.get(episode_id)
        if episode.busy:
            raise RequestError(409, f"episode {episode_id!r} has a request under way")
        del self.open[episode_id]
        self.ended += 1
        if self.sink is not None and episode.length:
            extras = {k: np.stack([e[k] for e in episode.extras]) for k in episode.extras[0]}
            self.sink(FinishedEpisode(episode_id, np.stack(episode.observations),
                                      np.stack(episode.actions),
                                      np.asarray(episode.rewards, np.float32), final_obs,
                                      terminated, extras, episode.lane))
        self.steps_logged += episode.length
        return episode

    def expire(self) -> int:
        """Drop the episodes idle for longer than the timeout (not one whose act request is
        waiting for its batch); how many were dropped."""
        cutoff = self.clock() - self.timeout
        idle = [i for i, e in self.open.items() if e.last_seen < cutoff and not e.busy]
        for episode_id in idle:
            del self.open[episode_id]
        self.expired += len(idle)
        return len(idle)
