"""The host loop's actor side: threads that step their own batch of envs with the agent's
jitted `act` on their actor device, acting with the parameter version a fixed staleness behind
the learner (`ParamStore`), so a seed gives the same run whatever the thread timing."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from typing import Any, Callable, Optional, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.networks import reset_memory
from jaxrl_sys.core.rollout import per_env_keys
from jaxrl_sys.core.types import EnvSpec, HostFns, PyTree, Rollout
from jaxrl_sys.runtime.host.episodes import EpisodeTracker

POLL_SECONDS = 0.05  # how often blocked threads look at the stop flag and the other's error


@dataclasses.dataclass(frozen=True)
class HostLoopConfig:
    """How the host loop runs (not what the agent learns)."""

    staleness: int = 1  # acting parameters may lag the learner by this many updates
    step_timeout: float = 60.0  # seconds a vector step may take before the run is stopped
    start_method: str = "spawn"  # worker processes; JAX is not fork-safe

    def validate(self) -> None:
        if self.staleness < 0:
            raise ConfigError(f"staleness must be >= 0, got {self.staleness}")
        if not self.step_timeout > 0:
            raise ConfigError(f"step_timeout must be > 0, got {self.step_timeout}")


class HostEnv(Protocol):
    """An env run outside JAX (envs.gymnasium_env.GymnasiumEnv in worker processes,
    envs.envpool_env.EnvpoolEnv in envpool's threads)."""

    name: str
    spec: EnvSpec

    def make_vector(self, num_envs: int, start_method: str) -> Any: ...

    def encode_obs(self, obs: np.ndarray) -> np.ndarray: ...

    def decode_actions(self, actions: np.ndarray) -> np.ndarray: ...

    def learning_signals(self, reward: np.ndarray, terminated: np.ndarray,
                         info: dict) -> tuple[np.ndarray, np.ndarray]: ...


class Stopped(Exception):
    """Raised inside a thread that was asked to stop."""


class ParamStore:
    """Parameter versions published by the learner and awaited by the actor."""

    def __init__(self, staleness: int) -> None:
        self._staleness = staleness
        self._versions: dict[int, PyTree] = {}
        self._cond = threading.Condition()

    def publish(self, version: int, params: PyTree) -> None:
        with self._cond:
            self._versions[version] = params
            # the actor's next rollout needs a version >= version - staleness
            for old in [v for v in self._versions if v < version - self._staleness]:
                del self._versions[old]
            self._cond.notify_all()

    def get(self, version: int, stop: threading.Event) -> PyTree:
        with self._cond:
            while version not in self._versions:
                if stop.is_set():
                    raise Stopped
                self._cond.wait(POLL_SECONDS)
            return self._versions[version]


class Actor(threading.Thread):
    """One actor thread: steps its envs with the agent's `act` on its device and hands each
    rollout to the learner, already cut into the rows of the learner devices and sent there."""

    def __init__(self, index: int, env: HostEnv, envs: Any, first_obs: np.ndarray,
                 act: Callable, store: ParamStore, key: jax.Array, env_ids: np.ndarray,
                 device: Any, pieces: list[tuple[Any, int, int]], iterations: range,
                 steps: int, config: HostLoopConfig, memory: PyTree = None) -> None:
        super().__init__(name=f"host-loop-actor-{index}", daemon=True)
        self.index, self.env, self.envs, self.obs = index, env, envs, first_obs
        self.act, self.store, self.key, self.device = act, store, key, device
        self.env_ids = jax.device_put(env_ids, device)
        # a recurrent agent's state of each env (None otherwise) and where episodes begin
        self.memory = jax.device_put(memory, device)
        self.starts = np.ones(first_obs.shape[0], bool)
        # (learner device, first, last + 1) in this thread's rows: where each part goes
        self.pieces = pieces
        self.iterations, self.steps, self.config = iterations, steps, config
        self.rollouts: queue.Queue = queue.Queue(maxsize=config.staleness + 1)
        self.stop = threading.Event()
        self.error: Optional[BaseException] = None
        # seconds spent waiting for parameters, in `act`, in env steps (for diagnosing the pipeline)
        self.seconds = {"param_wait": 0.0, "act": 0.0, "env": 0.0, "host": 0.0}

    def run(self) -> None:
        try:
            self._run()
        except Stopped:
            pass
        except BaseException as error:  # handed to the learner, which raises it
            self.error = error

    def _put(self, item: Any) -> None:
        while True:
            if self.stop.is_set():
                raise Stopped
            try:
                self.rollouts.put(item, timeout=POLL_SECONDS)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        num_envs = self.obs.shape[0]
        episodes = EpisodeTracker(num_envs)
        first = self.iterations.start
        for iteration in self.iterations:
            clock = time.perf_counter()
            params = self.store.get(max(first, iteration - self.config.staleness), self.stop)
            params = params[self.device]
            now = time.perf_counter()
            self.seconds["param_wait"] += now - clock
            clock = now
            host = _HostRollout(self.steps, self.obs)
            extras = []
            for t in range(self.steps):
                if self.stop.is_set():
                    raise Stopped
                action, step_extras, self.memory = self.act(
                    params, self.obs, self.key, np.int32(iteration * self.steps + t),
                    self.env_ids, self.memory, self.starts)
                action = np.asarray(action)  # the only device-to-host copy of a step
                extras.append(step_extras)
                now = time.perf_counter()
                self.seconds["act"] += now - clock
                clock = now
                self.envs.step_async(self.env.decode_actions(action))
                raw_obs, reward, terminated, truncated, info = self.envs.step_wait(
                    timeout=self.config.step_timeout
                )
                now = time.perf_counter()
                self.seconds["env"] += now - clock
                clock = now
                next_obs = self.env.encode_obs(raw_obs)
                # the learner's rewards and terminals (e.g. Atari's clipped rewards and lost
                # lives); episodes, their returns and autoreset follow the env's own
                train_reward, train_terminated = self.env.learning_signals(reward, terminated,
                                                                           info)
                host.record(t, self.obs, action, train_reward, train_terminated, truncated,
                            next_obs)
                done = np.logical_or(terminated, truncated)
                if done.any():  # SAME_STEP autoreset: the ended episodes' last obs are in info
                    for i in np.flatnonzero(done):
                        host.next_obs[t, i] = self.env.encode_obs(
                            np.asarray(info["final_obs"][i])[None]
                        )[0]
                episodes.step(reward, done)
                self.obs, self.starts = next_obs, done
                if self.memory is not None and done.any():  # the next episode from scratch
                    self.memory = _reset_memory(self.memory, done)
                now = time.perf_counter()
                self.seconds["host"] += now - clock
                clock = now
            # host data straight to the learner devices; `act`'s extras go device to device
            rollout = host.rollout()._replace(extras=stack_steps(extras))
            parts = [(device, jax.device_put(
                jax.tree.map(lambda x, a=first_row, b=last_row: x[:, a:b], rollout), device))
                for device, first_row, last_row in self.pieces]
            self.seconds["host"] += time.perf_counter() - clock
            self._put((parts, episodes.take_sums()))


class _HostRollout:
    """Preallocated host buffers for one rollout, filled step by step."""

    def __init__(self, steps: int, example_obs: np.ndarray) -> None:
        num_envs = example_obs.shape[0]
        self.obs = np.empty((steps, *example_obs.shape), example_obs.dtype)
        self.next_obs = np.empty_like(self.obs)
        self.action: Optional[np.ndarray] = None
        self.reward = np.empty((steps, num_envs), np.float32)
        self.terminated = np.empty((steps, num_envs), bool)
        self.truncated = np.empty((steps, num_envs), bool)

    def record(self, t: int, obs, action, reward, terminated, truncated, next_obs) -> None:
        """Store step t."""
        if self.action is None:
            self.action = np.empty((self.obs.shape[0], *action.shape), action.dtype)
        self.obs[t], self.action[t], self.reward[t] = obs, action, reward
        self.terminated[t], self.truncated[t], self.next_obs[t] = terminated, truncated, next_obs

    def rollout(self) -> Rollout:
        return Rollout(self.obs, self.action, self.reward, self.terminated, self.truncated,
                       self.next_obs, extras={})


@jax.jit
def stack_steps(per_step: list) -> PyTree:
    """Per-step device pytrees stacked along a new leading time axis, on device."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *per_step)


_reset_memory = jax.jit(reset_memory)


def act_fn(fns: HostFns) -> Callable:
    """`fns.act` with per-env keys of the envs' global ids [B] and the env-step count (over
    all envs) derived on device from the step's index, as one signature for every agent:
    `act(params, obs, key, step, env_ids, memory, starts) -> (action, extras, memory)` (a
    feed-forward agent's memory stays None)."""

    def act(params, obs, key, step, env_ids, memory, starts):
        keys = per_env_keys(jax.random.fold_in(key, step), env_ids)
        if fns.initial_memory is None:
            action, extras = fns.act(params, obs, keys, step * fns.num_envs, env_ids)
            return action, extras, memory
        return fns.act(params, obs, keys, step * fns.num_envs, env_ids, memory, starts)

    return jax.jit(act)


def initial_memory(fns: HostFns, num_envs: int) -> PyTree:
    """A recurrent agent's initial state of `num_envs` envs; None for a feed-forward one."""
    return None if fns.initial_memory is None else fns.initial_memory(num_envs)
