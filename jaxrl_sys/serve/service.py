"""What the server does, apart from HTTP: episodes, batched acting, logged experience and the
parameters it publishes to local-inference clients."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any, Callable, Optional

import jax
import numpy as np

from jaxrl_sys.serve.batcher import Batcher
from jaxrl_sys.serve.codec import RequestError, pack_array
from jaxrl_sys.serve.episodes import Episode, EpisodeTable, FinishedEpisode
from jaxrl_sys.serve.program import ServedRun
from jaxrl_sys.serve.stats import ServerStats


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """The server's limits: batching (at most `max_batch` requests per device call, gathered
    for at most `window_ms`), episodes (`max_episodes` open, dropped after `episode_timeout`
    idle seconds), request bodies (`max_body` bytes), the token every request must carry (None
    on a local bind without one) and the seed of acting's randomness."""

    max_batch: int = 64
    window_ms: float = 2.0
    episode_timeout: float = 60.0
    max_episodes: int = 10_000
    max_body: int = 1 << 20
    token: Optional[str] = None
    seed: int = 0

    def problem(self) -> Optional[str]:
        """One line naming a setting out of range, or None."""
        if self.max_batch < 1:
            return f"--max-batch must be >= 1, got {self.max_batch}"
        if not 0 <= self.window_ms <= 1000:
            return f"--batch-window-ms must be in [0, 1000], got {self.window_ms:g}"
        if self.episode_timeout <= 0:
            return f"--episode-timeout must be > 0, got {self.episode_timeout:g}"
        if self.max_episodes < 1:
            return f"--max-episodes must be >= 1, got {self.max_episodes}"
        if self.max_body < 1024:
            return f"--max-body must be >= 1024 bytes, got {self.max_body}"
        if self.token is not None and len(self.token) < 8:
            return "the token must be at least 8 characters"
        return None


class PolicyService:
    """The served run's policy behind episodes: `act` joins the current batch; experience
    (the server's and the application's own actions, rewards) is kept per episode and handed
    to `sink` when the episode ends."""

    def __init__(self, served: ServedRun, settings: ServeSettings,
                 sink: Optional[Callable[[FinishedEpisode], None]] = None, lanes: int = 1):
        self.served = served
        self.settings = settings
        self.program = served.program
        self.learning = sink is not None
        self.stats = ServerStats()
        self.episodes = EpisodeTable(lambda: self.program.row_memory, settings.episode_timeout,
                                     settings.max_episodes, sink, lanes=lanes,
                                     lane_for=self._next_lane)
        self.env_steps = 0  # actions taken so far (the exploration schedule's clock)
        self.learner = None  # a learning server's ClientLearner (its status in the metrics)
        self.batcher = Batcher(self._run_batch, settings.max_batch, settings.window_ms / 1e3)
        self._key = jax.random.PRNGKey(settings.seed)
        self._batches = 0
        self._lock = threading.Lock()  # leaves and version change together
        self._leaves = served.leaves
        self.version = 0

    def _next_lane(self) -> int:
        """A new episode's lane: in turn, or for a learner the lane with the fewest steps
        waiting, queued or in open episodes, so that lanes fill evenly and none runs far
        ahead of the others (its steps would wait, growing stale)."""
        if self.learner is None:
            return self.episodes.started % self.episodes.lanes
        backlog = self.learner.lane_backlog()
        for episode in self.episodes.open.values():
            backlog[episode.lane] += episode.length + 1
        return int(np.argmin(backlog))

    def publish(self, leaves: list) -> int:
        """New parameters (a learner's): the next batch acts with them; their version."""
        with self._lock:
            self._leaves = leaves
            self.version += 1
            return self.version

    def parameters(self, kind: str) -> dict[str, Any]:
        """The leaves the policy reads and their version, packed for a response."""
        with self._lock:
            leaves, version = self._leaves, self.version
        return {"version": version, "env_steps": self.env_steps,
                "leaves": [pack_array(np.asarray(x), kind) for x in jax.device_get(leaves)]}

    def describe(self) -> dict[str, Any]:
        """What a client needs to know of the served policy (and to rebuild it locally)."""
        served = self.served
        return {"record": served.record, "manifest": self.program.manifest.to_dict(),
                "obs_shape": list(served.obs_shape), "obs_dtype": served.obs_dtype,
                "discrete": served.discrete, "num_actions": served.num_actions,
                "action_shape": list(served.action_shape), "recurrent": self.program.recurrent,
                "version": self.version, "max_batch": self.settings.max_batch,
                "learning": self.learning,
                "extras": {k: [list(shape), dtype] for k, (shape, dtype) in
                           self.program.extras.items()},
                "episode_timeout": self.settings.episode_timeout,
                "max_body": self.settings.max_body}

    def _run_batch(self, items: list) -> list:
        """One device call on the gathered requests [(obs, starts, memory, lane)]."""
        with self._lock:
            leaves = self._leaves
        key = jax.random.fold_in(self._key, self._batches)
        self._batches += 1
        obs = np.stack([item[0] for item in items])
        starts = np.asarray([item[1] for item in items], bool)
        lanes = np.asarray([item[3] for item in items], np.int32)
        with self._lock:
            env_steps = self.env_steps
            self.env_steps += len(items)
        actions, extras, memory = self.program.act(leaves, obs, starts,
                                                   [item[2] for item in items], key,
                                                   env_steps, lanes)
        self.stats.batch(len(items))
        return list(zip(actions, extras, memory))

    def start(self, episode_id: Optional[str]) -> Episode:
        """Open an episode."""
        return self.episodes.start(episode_id)

    async def keep_pace(self) -> None:
        """Hold a request back while the learner is behind (a learning server), so that
        clients act with parameters at most about a rollout old."""
        while self.learner is not None and self.learner.behind:
            await asyncio.sleep(0.005)

    def _claim(self, episode_id: str) -> Episode:
        """The episode, marked busy (one request at a time; a busy episode never expires)."""
        episode = self.episodes.get(episode_id)
        if episode.busy:
            raise RequestError(409, f"episode {episode_id!r} has a request under way")
        episode.busy = True
        return episode

    async def act(self, episode_id: str, obs: np.ndarray, reward: float = 0.0) -> np.ndarray:
        """The policy's action on `obs` in episode `episode_id` (batched with concurrent
        requests), after crediting `reward` (earned since its last action); the episode's
        memory moves on."""
        episode = self._claim(episode_id)
        episode.add_reward(reward)
        try:
            await self.keep_pace()
            action, extras, memory = await self.batcher.submit(
                (obs, episode.starts, episode.memory, episode.lane))
        finally:
            episode.busy = False
            episode.last_seen = self.episodes.clock()
        episode.memory = memory
        episode.record(obs, action, extras)
        return action

    def log_action(self, episode_id: str, obs: np.ndarray, action: np.ndarray,
                   reward: float = 0.0) -> None:
        """An action the application chose itself, on `obs` (off-policy experience), after
        crediting `reward` (earned since the episode's last action)."""
        served = self.served
        if self.program.extras:
            raise RequestError(422, "log_action: this learner needs what its own policy records "
                                    f"({', '.join(self.program.extras)}); only an off-policy "
                                    "learner (dqn, sac) takes the application's actions")
        if served.discrete and not 0 <= int(action) < served.num_actions:
            raise RequestError(422, f"action: {int(action)} is not one of the "
                                    f"{served.num_actions} actions")
        episode = self.episodes.get(episode_id)
        if episode.busy:
            raise RequestError(409, f"episode {episode_id!r} has a request under way")
        episode.add_reward(reward)
        episode.record(obs, action)

    async def log_steps(self, episode_id: str, obs: np.ndarray, actions: np.ndarray,
                        rewards: np.ndarray, extras: dict) -> None:
        """Steps [T] a local-inference client acted on itself: observations, actions, the
        reward after each, and what its policy recorded (`extras`, name -> [T, ...]); held
        back while the learner is behind."""
        if self.served.discrete and not ((0 <= actions) & (actions < self.served.num_actions)).all():
            raise RequestError(422, f"actions: not all among the {self.served.num_actions} actions")
        episode = self._claim(episode_id)
        try:
            await self.keep_pace()
        finally:
            episode.busy = False
            episode.last_seen = self.episodes.clock()
        with self._lock:
            self.env_steps += len(actions)
        for t, (o, a, r) in enumerate(zip(obs, actions, rewards)):
            episode.record(o, a, {k: v[t] for k, v in extras.items()})
            episode.add_reward(float(r))

    def log_returns(self, episode_id: str, reward: float) -> Episode:
        """A reward earned since the episode's last action."""
        episode = self.episodes.get(episode_id)
        episode.add_reward(reward)
        return episode

    def end(self, episode_id: str, final_obs: Optional[np.ndarray], terminated: bool,
            reward: float = 0.0) -> Episode:
        """Close an episode after crediting `reward`; its experience goes to the sink."""
        episode = self.episodes.get(episode_id)
        if episode.busy:
            raise RequestError(409, f"episode {episode_id!r} has a request under way")
        episode.add_reward(reward)
        return self.episodes.end(episode_id, final_obs, terminated)
