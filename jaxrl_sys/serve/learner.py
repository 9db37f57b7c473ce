"""Learning from the episodes that clients finish (`jaxrl-serve --learn`).

The agent's host-loop functions learn here exactly as in the host loop, on rollouts [T, B]
assembled from clients' episodes instead of worker processes' envs: each episode's steps go to
its lane (one of the agent's `num_envs`, given when the episode started, which is also the
env id its exploration used), and whenever every lane holds `rollout_steps` steps those are
one rollout. An episode may span rollouts, as an env's does in the host loop; its last step
is terminated or truncated as the client said, with the observation after it.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Callable, Optional

import jax
import numpy as np

from jaxrl_sys.core.types import HostFns, PyTree, Rollout
from jaxrl_sys.runtime.driver import NonFiniteError
from jaxrl_sys.runtime.execution import all_finite
from jaxrl_sys.runtime.host.learner import learn_fn
from jaxrl_sys.runtime.host.loop import initial_carry
from jaxrl_sys.runtime.host.placement import HostLayout, place_host
from jaxrl_sys.serve.episodes import FinishedEpisode
from jaxrl_sys.serve.program import PolicyProgram


def episode_steps(episode: FinishedEpisode) -> list[dict]:
    """An episode's steps as rollout rows: obs, action, reward, terminated, truncated,
    next_obs and extras per step. A truncated episode without a final observation bootstraps
    its last step from that step's own observation."""
    obs = episode.observations
    final = episode.final_obs if episode.final_obs is not None else obs[-1]
    next_obs = np.concatenate([obs[1:], final[None].astype(obs.dtype)])
    steps = len(obs)
    ended = np.arange(steps) == steps - 1
    terminated = ended & episode.terminated  # its next observation is never used
    truncated = ended & ~terminated
    return [{"obs": obs[t], "action": episode.actions[t], "reward": episode.rewards[t],
             "terminated": terminated[t], "truncated": truncated[t], "next_obs": next_obs[t],
             "extras": {k: v[t] for k, v in episode.extras.items()}} for t in range(steps)]


def rollout_of(lanes: list[list[dict]], steps: int) -> Rollout:
    """The first `steps` rows of every lane as one rollout [T, B, ...] (numpy)."""
    def stack(pick):
        return np.stack([np.stack([pick(row) for row in lane[:steps]]) for lane in lanes], axis=1)

    extras = {k: stack(lambda row, k=k: row["extras"][k]) for k in lanes[0][0]["extras"]}
    return Rollout(obs=stack(lambda r: r["obs"]), action=stack(lambda r: r["action"]),
                   reward=stack(lambda r: r["reward"]).astype(np.float32),
                   terminated=stack(lambda r: r["terminated"]),
                   truncated=stack(lambda r: r["truncated"]),
                   next_obs=stack(lambda r: r["next_obs"]), extras=extras,
                   env_ids=np.arange(len(lanes), dtype=np.int32))


def example_rollout(program: PolicyProgram, steps: int, lanes: int) -> Rollout:
    """A rollout [T, B, ...] of zeros with the shapes and dtypes `program`'s steps give."""
    def zeros(shape, dtype):
        return np.zeros((steps, lanes, *shape), dtype)

    obs = zeros(program.obs_shape, program.obs_dtype)
    return Rollout(obs=obs, action=zeros(*program.action), reward=zeros((), np.float32),
                   terminated=zeros((), bool), truncated=zeros((), bool), next_obs=obs,
                   extras={k: zeros(*v) for k, v in program.extras.items()},
                   env_ids=np.arange(lanes, dtype=np.int32))


@dataclasses.dataclass
class LearnerStatus:
    """What the metrics endpoint, the run's metrics file and its checkpoints say of the
    learner. `lanes[l]`: where lane l's waiting steps begin, [episode index, steps of that
    episode already learned] (an empty lane: [next_episode, 0]); with `next_episode` (the
    index of the next episode to arrive) it says which logged steps a checkpoint has not
    learned from."""

    updates: int = 0
    steps_learned: int = 0
    steps_waiting: int = 0  # in the lanes, not yet learned
    episodes: int = 0
    next_episode: int = 0
    done: bool = False
    lanes: list = dataclasses.field(default_factory=list)
    recent_returns: list = dataclasses.field(default_factory=list)  # since the last update

    def record(self) -> dict:
        """The checkpoint's record of it."""
        return {"steps_learned": self.steps_learned, "episodes": self.episodes,
                "next_episode": self.next_episode, "done": self.done, "lanes": self.lanes}

    @classmethod
    def from_record(cls, record: dict) -> "LearnerStatus":
        """The status a checkpoint's record saved (`record()`), after `chunk` updates."""
        return cls(updates=int(record["chunk"]), steps_learned=int(record["steps_learned"]),
                   episodes=int(record["episodes"]), next_episode=int(record["next_episode"]),
                   done=bool(record["done"]), lanes=[list(x) for x in record["lanes"]])

    def unlearned(self, index: int, lane: int) -> Optional[int]:
        """How many leading steps of logged episode `index` (in `lane`) a checkpoint with
        this status has learned from already: None for all of them, else 0 or more."""
        if index >= self.next_episode:
            return 0
        first, offset = self.lanes[lane]
        if index < first:
            return None
        return offset if index == first else 0


class ClientLearner:
    """Learns `fns` from finished episodes (`add`, from any thread) in a thread of its own
    (`start`), until `total_steps` steps have been learned from.

    After every update `on_update(carry, metrics, status)` runs in the learner's thread (the
    caller publishes the new parameters, writes metrics and checkpoints there).
    """

    def __init__(self, fns: HostFns, seed: int, total_steps: int,
                 on_update: Callable[[PyTree, dict, LearnerStatus], None],
                 carry: Optional[PyTree] = None):
        self.fns = fns
        self.total_steps = total_steps
        self.on_update = on_update
        placement = place_host(HostLayout(fns.num_envs))
        self.carry = carry if carry is not None else initial_carry(fns, seed, placement)
        self._learn = learn_fn(fns, placement)
        self._finite = jax.jit(all_finite)
        self._key = jax.random.split(jax.random.PRNGKey(seed), 3)[2]
        self._lanes: list[list[dict]] = [[] for _ in range(fns.num_envs)]
        # per lane, the episodes its waiting steps come from: [index, first step, count]
        self._segments: list[list[list[int]]] = [[] for _ in range(fns.num_envs)]
        self._episodes: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jaxrl-serve-learner", daemon=True)
        self.status = LearnerStatus(lanes=[[0, 0] for _ in range(fns.num_envs)])
        self.error: Optional[BaseException] = None
        self.queued_steps = 0  # in episodes added but not yet put in lanes
        self._queued_by_lane = [0] * fns.num_envs
        self._queued_lock = threading.Lock()
        self._taken = 0  # the index after the last episode put in a lane (they come in order)

    def compile(self, rollout: Rollout) -> None:
        """Compile the update now, on a rollout of the shapes and dtypes clients' will have,
        so that the first rollout does not wait for it (as the host loop does)."""
        self._learn = self._learn.lower(self.carry["agent_state"], self.carry.get("replay"),
                                        rollout, self._key).compile()

    def add(self, index: int, episode: FinishedEpisode, skip: int = 0) -> None:
        """Finished episode number `index` (its place in the experience log) to learn from,
        less its first `skip` steps (learned before a restart)."""
        with self._queued_lock:
            self.queued_steps += len(episode.actions) - skip
            self._queued_by_lane[episode.lane % len(self._lanes)] += len(episode.actions) - skip
        self._episodes.put((index, episode, skip))

    def lane_backlog(self) -> list[int]:
        """Steps per lane not yet learned (waiting in it or queued for it)."""
        with self._queued_lock:
            return [len(lane) + queued for lane, queued in zip(self._lanes, self._queued_by_lane)]

    @property
    def behind(self) -> bool:
        """Whether a rollout's worth of steps waits for the learner to take it in (the
        server then holds its clients back, as the host loop's fixed staleness does)."""
        return (self.queued_steps > self.fns.rollout_steps * self.fns.num_envs
                and self.error is None and not self.status.done and self._thread.is_alive())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> bool:
        """Stop after the update under way; whether the thread has stopped (it has not when
        an update outlasts a minute)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and not self.status.done:
                try:
                    index, episode, skip = self._episodes.get(timeout=0.2)
                except queue.Empty:
                    continue
                self._take(index, episode, skip)
                while all(len(lane) >= self.fns.rollout_steps for lane in self._lanes):
                    self._update()
                    if self.status.done:
                        break
        except BaseException as error:  # the server stops on it (exit code 1)
            self.error = error

    def _take(self, index: int, episode: FinishedEpisode, skip: int) -> None:
        """Put an episode's steps (from step `skip`) in its lane."""
        status, lane = self.status, episode.lane % len(self._lanes)
        rows = episode_steps(episode)[skip:]
        with self._queued_lock:
            self.queued_steps -= len(rows)
            self._queued_by_lane[lane] -= len(rows)
        self._taken = index + 1
        if index >= status.next_episode:  # not counted before a restart
            status.episodes += 1
            status.recent_returns.append(float(episode.rewards.sum()))
        if rows:
            self._lanes[lane].extend(rows)
            self._segments[lane].append([index, skip, len(rows)])
        status.steps_waiting += len(rows)
        status.next_episode = max(status.next_episode, index + 1)
        self._mark_lanes()

    def _mark_lanes(self) -> None:
        """`status.lanes` from the segments."""
        self.status.lanes = [[seg[0][0], seg[0][1]] if seg else [self._taken, 0]
                             for seg in self._segments]

    def _update(self) -> None:
        """One learner step on the next rollout of every lane."""
        steps = self.fns.rollout_steps
        rollout = rollout_of(self._lanes, steps)
        for lane, segments in zip(self._lanes, self._segments):
            del lane[:steps]
            left = steps
            while left:
                take = min(left, segments[0][2])
                segments[0][1] += take
                segments[0][2] -= take
                left -= take
                if segments[0][2] == 0:
                    segments.pop(0)
        self.status.steps_waiting -= steps * len(self._lanes)
        self._mark_lanes()
        key = jax.random.fold_in(self._key, self.status.updates)
        agent_state, replay, metrics = self._learn(self.carry["agent_state"],
                                                   self.carry.get("replay"), rollout, key)
        if not bool(self._finite(agent_state)):  # stop; the last checkpoint stays the last good
            raise NonFiniteError(f"the learner's state went non-finite in update "
                                 f"{self.status.updates + 1}")
        self.carry = {"agent_state": agent_state} if replay is None else \
            {"agent_state": agent_state, "replay": replay}
        status = self.status
        status.updates += 1
        status.steps_learned += steps * len(self._lanes)
        status.done = status.steps_learned >= self.total_steps
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items() if np.ndim(v) == 0}
        self.on_update(self.carry, metrics, status)
        status.recent_returns = []
