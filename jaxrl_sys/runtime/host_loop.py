"""The host loop: envs not written in JAX run in worker processes while the device acts and learns.

Sebulba-style pipeline with the agents' own jitted functions:

    actor threads: params(version) -> act on the actor device -> step own workers -> ...
                   T steps later: the rollout's rows go to the learner devices -> queue
    learner (the calling thread): every thread's rollout -> learn, data-parallel over the
                   learner devices -> publish params(version + 1) to the actor devices

Rollout i is collected with exactly the parameters of version max(0, i - staleness), the
version made by learning from rollouts 0 .. i-staleness-1. Staleness 0 alternates acting and
learning (on-policy, like the on-device loop); staleness 1 collects rollout i while the learner
learns from rollout i-1. Because the version is fixed and not "the newest available", a run
does not depend on thread timing: the same seed gives the same run at any staleness.

With several actor threads (`HostLayout.actor_threads`) each steps its own batch of envs
(consecutive global ids) on its actor device, so that stepping one batch overlaps inference on
another; rollout i of every thread uses the same version, and the learner learns from their
rows together, data-parallel over the learner devices (`jaxrl_sys.runtime.host_placement`).
Actions are drawn from per-env keys of the envs' global ids, so the run is the same for any
number of threads, devices or processes.

This module knows neither agents nor envs: an agent supplies `HostFns`, an env a `HostEnv`.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import queue
import threading
import time
from typing import Any, Callable, Optional, Protocol, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.runtime.driver import ChunkSummary, EPISODE_KEYS, TrainResult, check_finite, summarize
from jaxrl_sys.runtime.execution import all_finite
from jaxrl_sys.core.networks import reset_memory
from jaxrl_sys.core.rollout import per_env_keys
from jaxrl_sys.core.evaluation import stateful
from jaxrl_sys.core.types import (  # noqa: F401  (EnvSpec re-exported)
    EnvSpec, HostFns, PyTree, RecurrentPolicy, Rollout,
)
from jaxrl_sys.runtime.host_placement import (
    ENV_AXIS_SPEC, REPLICATED, TIME_MAJOR_SPEC, HostLayout, HostPlacement, place_host,
)
from jaxrl_sys.runtime.waiting import check_interrupt, fetch, in_thread, wait_ready

_POLL_SECONDS = 0.05  # how often blocked threads look at the stop flag and the other's error


@dataclasses.dataclass(frozen=True)
class HostLoopConfig:
    """How the host loop runs (not what the agent learns)."""

    staleness: int = 1  # acting parameters may lag the learner by this many updates
    step_timeout: float = 60.0  # seconds a vector step may take before the run is stopped
    start_method: str = "spawn"  # worker processes; JAX is not fork-safe

    def validate(self) -> None:
        from jaxrl_sys.core.config import ConfigError

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


class HostLoopError(RuntimeError):
    """An env or worker failed; the message names the env and the error."""


class _Stopped(Exception):
    """Raised inside a thread that was asked to stop."""


class _ParamStore:
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
                    raise _Stopped
                self._cond.wait(_POLL_SECONDS)
            return self._versions[version]


def describe_env_error(env_name: str, envs: Any, error: BaseException, timeout: float) -> str:
    """One message naming the env, the failing workers and the error."""
    if isinstance(error, multiprocessing.TimeoutError):
        return f"env {env_name}: a worker gave no step result within {timeout:g} s; run stopped"
    failed = [i for i, pipe in enumerate(getattr(envs, "parent_pipes", [])) if pipe is None]
    processes = list(getattr(envs, "processes", []))
    if isinstance(error, (EOFError, BrokenPipeError, ConnectionResetError)):
        for process in processes:  # a closed pipe: give the dead worker a moment to be reaped
            process.join(timeout=0.2)
    dead = [(i, p.exitcode) for i, p in enumerate(processes) if p.exitcode is not None]
    if isinstance(error, (EOFError, BrokenPipeError, ConnectionResetError)) or (dead and not failed):
        if not dead:
            return f"env {env_name}: a worker died; run stopped"
        plural = "s" if len(dead) > 1 else ""
        ids = ", ".join(str(i) for i, _ in dead)
        codes = ", ".join(str(code) for _, code in dead)
        return f"env {env_name}: worker{plural} {ids} died (exit code{plural} {codes}); run stopped"
    which = (f"worker{'s' if len(failed) > 1 else ''} {', '.join(map(str, failed))}"
             if failed else "a worker")
    message = " ".join(str(error).split())
    return f"env {env_name}: {which} raised {type(error).__name__}: {message}"


class _Actor(threading.Thread):
    """One actor thread: steps its envs with the agent's `act` on its device and hands each
    rollout to the learner, already cut into the rows of the learner devices and sent there."""

    def __init__(self, index: int, env: HostEnv, envs: Any, first_obs: np.ndarray,
                 act: Callable, store: _ParamStore, key: jax.Array, env_ids: np.ndarray,
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
        except _Stopped:
            pass
        except BaseException as error:  # handed to the learner, which raises it
            self.error = error

    def _put(self, item: Any) -> None:
        while True:
            if self.stop.is_set():
                raise _Stopped
            try:
                self.rollouts.put(item, timeout=_POLL_SECONDS)
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
                    raise _Stopped
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
            rollout = host.rollout()._replace(extras=_stack_steps(extras))
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


@jax.jit
def _stack_steps(per_step: list) -> PyTree:
    """Per-step device pytrees stacked along a new leading time axis, on device."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *per_step)


_reset_memory = jax.jit(reset_memory)


def _act_fn(fns: HostFns) -> Callable:
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


def _initial_memory(fns: HostFns, num_envs: int) -> PyTree:
    """A recurrent agent's initial state of `num_envs` envs; None for a feed-forward one."""
    return None if fns.initial_memory is None else fns.initial_memory(num_envs)


def _rollout_shapes(fns: HostFns, env: HostEnv, params: PyTree, act: Callable,
                    placement: HostPlacement) -> Rollout:
    """Abstract shapes and shardings of one global rollout, to compile `learn` before the
    workers start stepping."""
    b, t = fns.num_envs, fns.rollout_steps
    rows = placement.layout.thread_envs
    obs = jax.ShapeDtypeStruct((rows, *env.spec.obs_shape), jnp.dtype(env.spec.obs_dtype))
    ids = jax.ShapeDtypeStruct((rows,), jnp.int32)
    action, extras, _ = jax.eval_shape(act, params, obs, jax.random.PRNGKey(0), np.int32(0), ids,
                                       _initial_memory(fns, rows), np.ones(rows, bool))
    sharding = placement.sharding(TIME_MAJOR_SPEC)

    def over_time(x):
        return jax.ShapeDtypeStruct((t, b, *x.shape[1:]), x.dtype, sharding=sharding)

    scalar = lambda dtype: jax.ShapeDtypeStruct((t, b), dtype, sharding=sharding)  # noqa: E731
    return Rollout(
        obs=over_time(obs), action=over_time(action), reward=scalar(jnp.float32),
        terminated=scalar(jnp.bool_), truncated=scalar(jnp.bool_), next_obs=over_time(obs),
        extras=jax.tree.map(over_time, extras),
        env_ids=jax.ShapeDtypeStruct((b,), jnp.int32,
                                     sharding=placement.sharding(ENV_AXIS_SPEC)),
    )


def _learn_fn(fns: HostFns, placement: HostPlacement) -> Callable:
    """`fns.learn` data-parallel over the learner mesh: rollout rows and replay rows split
    over it, agent state replicated (the agent `pmean`s its gradients over "device")."""
    rollout_spec = Rollout(*([TIME_MAJOR_SPEC] * 6), extras=TIME_MAJOR_SPEC,
                           env_ids=ENV_AXIS_SPEC)
    sharded = jax.shard_map(
        fns.learn, mesh=placement.mesh,
        in_specs=(REPLICATED, ENV_AXIS_SPEC, rollout_spec, REPLICATED),
        out_specs=(REPLICATED, ENV_AXIS_SPEC, REPLICATED),
        check_vma=False,  # see jaxrl_sys.runtime.execution: pmean of a replicated gradient
    )
    return jax.jit(sharded, donate_argnums=(1,))


def _global_rollout(parts: list[list[tuple[Any, Rollout]]], env_ids: jax.Array,
                    placement: HostPlacement) -> Rollout:
    """The threads' parts (already on their learner devices, in env order) as one rollout of
    global arrays [T, B, ...] split over the learner mesh."""
    by_device: dict[Any, list[Rollout]] = {}
    for thread_parts in parts:
        for device, part in thread_parts:
            by_device.setdefault(device, []).append(part)
    shards = [jax.tree.map(lambda *xs: xs[0] if len(xs) == 1 else jnp.concatenate(xs, axis=1),
                           *pieces) for pieces in by_device.values()]
    sharding = placement.sharding(TIME_MAJOR_SPEC)
    num_envs = placement.layout.num_envs

    def assemble(*leaves: jax.Array) -> jax.Array:
        shape = (leaves[0].shape[0], num_envs, *leaves[0].shape[2:])
        return jax.make_array_from_single_device_arrays(shape, sharding, list(leaves))

    return jax.tree.map(assemble, *shards)._replace(env_ids=env_ids)


def _global_env_ids(placement: HostPlacement) -> jax.Array:
    """Global env ids [B], split over the learner mesh like the rollout's rows."""
    sharding = placement.sharding(ENV_AXIS_SPEC)
    ids = np.arange(placement.layout.num_envs, dtype=np.int32)
    return jax.make_array_from_callback(ids.shape, sharding, lambda index: ids[index])


def _actor_params(fns: HostFns, agent_state: PyTree, devices: set) -> dict[Any, PyTree]:
    """The acting parameters on every actor device (from the learner's replicated state)."""
    params = jax.tree.map(lambda x: x.addressable_data(0), fns.actor_params(agent_state))
    return {device: jax.device_put(params, device) for device in devices}


def _stack_chunk(metrics: list[dict]) -> dict:
    """Per-iteration metrics of one chunk as [1 seed, K] arrays for `driver.summarize`; the
    episode sums are added up over processes."""
    host = fetch(metrics)
    stacked = {k: np.asarray([[float(m[k]) for m in host]]) for k in host[0]}
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        local = np.stack([stacked[k] for k in EPISODE_KEYS])
        total = np.asarray(multihost_utils.process_allgather(local)).sum(axis=0)
        stacked.update({k: total[i] for i, k in enumerate(EPISODE_KEYS)})
    return stacked


def _thread_pieces(placement: HostPlacement, thread: int) -> list[tuple[Any, int, int]]:
    """(learner device, first, last + 1) of the parts of thread `thread`'s rows that each
    learner device of this process holds, in the thread's own rows."""
    start = thread * placement.layout.thread_envs
    stop = start + placement.layout.thread_envs
    return [(device, max(first, start) - start, min(last, stop) - start)
            for device, first, last in placement.local_learner_rows()
            if first < stop and last > start]


def _start_envs(env: HostEnv, placement: HostPlacement, seed: int,
                config: HostLoopConfig) -> list[tuple[Any, np.ndarray]]:
    """Each actor thread's vector env, reset with the seeds of its envs' global ids (env i
    gets seed + i, as one vector of all envs gives it), and its first observations."""
    started: list[tuple[Any, np.ndarray]] = []
    try:
        for thread in range(placement.layout.actor_threads):
            envs = env.make_vector(placement.layout.thread_envs, config.start_method)
            started.append((envs, None))
            try:
                envs.reset_async(seed=seed + int(placement.thread_env_ids(thread)[0]))
                raw_obs, _ = envs.reset_wait(timeout=config.step_timeout)
            except Exception as error:
                raise HostLoopError(describe_env_error(
                    _thread_name(env, placement, thread), envs, error, config.step_timeout)
                ) from error
            started[-1] = (envs, env.encode_obs(raw_obs))
    except BaseException:
        for envs, _ in started:
            _shutdown(None, envs, terminate=True)
        raise
    return started


def _thread_name(env: HostEnv, placement: HostPlacement, thread: int) -> str:
    """The env's name, and the actor thread's where there are several."""
    if placement.layout.actor_threads == 1:
        return env.name
    return f"{env.name} (actor thread {thread})"


def train(
    env: HostEnv,
    fns: HostFns,
    *,
    seed: int,
    num_iterations: int,
    iters_per_chunk: int,
    config: HostLoopConfig = HostLoopConfig(),
    placement: Optional[HostPlacement] = None,
    on_chunk: Optional[Callable[[ChunkSummary, float], bool]] = None,
    checkpoint_every: int = 0,
    on_checkpoint: Optional[Callable[[int, PyTree], None]] = None,
    carry: Optional[PyTree] = None,
    start_chunk: int = 0,
) -> TrainResult:
    """Train one seed through the host loop; `on_chunk` as in `jaxrl_sys.runtime.driver.train`.

    `placement` (default: one actor thread and one device) says where actors and learner run.
    `on_checkpoint(chunk, carry)` is called after every `checkpoint_every`-th chunk and the
    last, with the learner's carry (`initial_carry`'s structure: agent state and replay).
    Given a restored `carry` and `start_chunk`, training continues with the iterations after
    that chunk's (their keys as in an uninterrupted run); the envs start afresh, as they
    live in the workers.

    Raises `HostLoopError` if an env raises, a worker dies or a step exceeds
    `config.step_timeout` (naming the actor thread where there are several), and
    `NonFiniteError` (before checkpointing) if the learner's state goes non-finite or a metric
    infinite. Worker processes are shut down on every exit path (errors and KeyboardInterrupt
    included).
    """
    config.validate()
    if placement is None:
        placement = place_host(HostLayout(fns.num_envs))
    start = time.perf_counter()
    key = jax.random.PRNGKey(seed)
    _, actor_key, learn_key = jax.random.split(key, 3)  # the first is initial_carry's
    started = _start_envs(env, placement, seed, config)
    actors: list[_Actor] = []
    failed = True
    try:
        if carry is None:
            carry = initial_carry(fns, seed, placement)
        agent_state, replay = carry["agent_state"], carry.get("replay")
        first_iteration = min(start_chunk * iters_per_chunk, num_iterations)
        act = _act_fn(fns)
        devices = placement.thread_devices()
        params = _actor_params(fns, agent_state, set(devices))
        example = params[devices[0]]
        learn = in_thread(lambda: _learn_fn(fns, placement).lower(
            agent_state, replay, _rollout_shapes(fns, env, example, act, placement), learn_key
        ).compile())
        for device in dict.fromkeys(devices):  # compile `act` once per actor device
            thread = devices.index(device)
            ids = placement.thread_env_ids(thread)
            _, extras, _ = in_thread(lambda: act(
                params[device], started[thread][1], actor_key, np.int32(0),
                jax.device_put(ids, device), _initial_memory(fns, len(ids)),
                np.ones(len(ids), bool)))
            wait_ready(_stack_steps([extras] * fns.rollout_steps))
        env_ids = _global_env_ids(placement)
        finite = in_thread(lambda: jax.jit(all_finite).lower(agent_state).compile())
        compile_seconds = time.perf_counter() - start

        store = _ParamStore(config.staleness)
        store.publish(first_iteration, params)
        actors = [
            _Actor(thread, env, envs, obs, act, store, actor_key,
                   placement.thread_env_ids(thread), devices[thread],
                   _thread_pieces(placement, thread), range(first_iteration, num_iterations),
                   fns.rollout_steps, config, _initial_memory(fns, obs.shape[0]))
            for thread, (envs, obs) in enumerate(started)
        ]
        train_start = time.perf_counter()
        for actor in actors:
            actor.start()

        history: list[ChunkSummary] = []
        chunk_metrics: list[dict] = []
        learner_wait = 0.0
        for iteration in range(first_iteration, num_iterations):
            clock = time.perf_counter()
            items = [_next_rollout(actor, actors, env, placement, config) for actor in actors]
            rollout = _global_rollout([parts for parts, _ in items], env_ids, placement)
            episodes = {k: sum(sums[k] for _, sums in items) for k in EPISODE_KEYS}
            learner_wait += time.perf_counter() - clock
            agent_state, replay, metrics = learn(
                agent_state, replay, rollout, jax.random.fold_in(learn_key, iteration)
            )
            store.publish(iteration + 1, _actor_params(fns, agent_state, set(devices)))
            chunk_metrics.append({**metrics, **episodes})
            if len(chunk_metrics) == iters_per_chunk or iteration == num_iterations - 1:
                chunk = start_chunk + len(history)
                summary = summarize(chunk, len(chunk_metrics), _stack_chunk(chunk_metrics))
                summary.state_finite = np.asarray([bool(finite(agent_state))])
                check_finite(summary)  # NonFiniteError before a bad state is checkpointed
                history.append(summary)
                chunk_metrics = []
                stop = on_chunk is not None and on_chunk(summary, time.perf_counter() - train_start)
                last = stop or iteration == num_iterations - 1
                if on_checkpoint is not None and (
                    last or (checkpoint_every > 0 and (chunk + 1) % checkpoint_every == 0)
                ):
                    on_checkpoint(chunk, _carry(agent_state, replay))
                if stop:
                    break
        wait_ready(agent_state)
        failed = False
        seconds = {f"actor_{k}": sum(a.seconds[k] for a in actors) / len(actors)
                   for k in actors[0].seconds}
        return TrainResult(_carry(agent_state, replay), history, compile_seconds,
                           time.perf_counter() - train_start,
                           {**seconds, "learner_rollout_wait": learner_wait})
    finally:
        _shutdown_all(actors, [envs for envs, _ in started], terminate=failed)


def initial_carry(fns: HostFns, seed: int, placement: Optional[HostPlacement] = None) -> PyTree:
    """A fresh learner carry for `seed`: {"agent_state", "replay"} (no replay if None), the
    state replicated over the learner mesh and the replay's env rows split over it."""
    if placement is None:
        placement = place_host(HostLayout(fns.num_envs))
    init_key = jax.random.split(jax.random.PRNGKey(seed), 3)[0]
    shardings = (placement.sharding(REPLICATED), placement.sharding(ENV_AXIS_SPEC))
    agent_state, replay = in_thread(lambda: jax.jit(fns.init, out_shardings=shardings)(init_key))
    return _carry(agent_state, replay)


def _carry(agent_state: PyTree, replay: PyTree) -> dict:
    return {"agent_state": agent_state} if replay is None else \
        {"agent_state": agent_state, "replay": replay}


def _next_rollout(actor: _Actor, actors: list[_Actor], env: HostEnv, placement: HostPlacement,
                  config: HostLoopConfig) -> tuple[list, dict]:
    """`actor`'s next rollout, or the first failed actor's error as a `HostLoopError`."""
    while True:
        check_interrupt()  # a Ctrl-C that Python dropped (see jaxrl_sys.waiting)
        try:
            return actor.rollouts.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            for other in actors:
                if isinstance(other.error, KeyboardInterrupt):  # Ctrl-C reached the workers
                    raise KeyboardInterrupt
            for other in actors:
                if other.error is not None:
                    name = _thread_name(env, placement, other.index)
                    raise HostLoopError(
                        describe_env_error(name, other.envs, other.error, config.step_timeout)
                    ) from other.error
            if not actor.is_alive() and actor.rollouts.empty():
                raise HostLoopError(f"env {_thread_name(env, placement, actor.index)}: the "
                                    "actor thread stopped early")


def _shutdown_all(actors: list[_Actor], all_envs: list[Any], terminate: bool) -> None:
    """Stop every actor thread, then reap every vector env's workers."""
    for actor in actors:
        actor.stop.set()
    threads = {id(a.envs): a for a in actors}
    for envs in all_envs:
        _shutdown(threads.get(id(envs)), envs, terminate)


def _shutdown(actor: Optional[_Actor], envs: Any, terminate: bool) -> None:
    """Stop the actor thread and reap every worker process.

    After a failure or an interrupt, Gymnasium's own `close` can block for ever: it may wait
    on its error queue for a message that a terminated worker never flushed. So then the
    workers are ended here directly, without touching the pipes the actor may still read.
    """
    if actor is not None:
        actor.stop.set()
        actor.join(timeout=1.0)
        terminate = terminate or actor.is_alive()
    if not envs.processes:  # an in-process backend (envpool): nothing to reap, close it
        if actor is None or not actor.is_alive():  # not while the actor may still step it
            envs.close()
        return
    if not terminate:
        try:
            envs.close()
            return
        except Exception:  # a worker broke while closing: end them all below
            pass
    for process in envs.processes:
        if process.is_alive():
            process.terminate()
    for process in envs.processes:
        process.join(timeout=5.0)
        if process.is_alive():
            process.kill()
            process.join(timeout=5.0)
    if actor is not None:
        actor.join(timeout=5.0)  # wakes on the closed pipes (a daemon thread either way)
    for pipe in envs.parent_pipes:
        if pipe is not None:
            pipe.close()
    envs.closed = True  # nothing left to close; keeps Gymnasium's __del__ from trying again


def evaluate(
    env: HostEnv,
    policy: Union[Callable[[PyTree, jax.Array, jax.Array], jax.Array], RecurrentPolicy],
    agent_state: PyTree,
    num_episodes: int,
    *,
    seed: int = 0,
    num_workers: int = 8,
    step_timeout: float = 60.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Returns and lengths of `num_episodes` episodes of `policy(agent_state, obs, key)` in
    worker processes. Worker i plays episodes i, i + W, ... so that the set does not favour
    short episodes; workers are reaped on every exit path. A `RecurrentPolicy` carries each
    worker's memory, reset where its episodes begin."""
    workers = max(1, min(num_workers, num_episodes))
    quota = [len(range(i, num_episodes, workers)) for i in range(workers)]
    policy = stateful(policy)
    act = jax.jit(lambda obs, key, memory, starts: policy.step(agent_state, memory, obs, starts,
                                                                key))
    memory, starts = policy.initial(workers), np.ones(workers, bool)
    key = jax.random.PRNGKey(seed)
    envs = env.make_vector(workers, "spawn")
    failed = True
    try:
        try:
            envs.reset_async(seed=seed)
            raw_obs, _ = envs.reset_wait(timeout=step_timeout)
            obs = env.encode_obs(raw_obs)
            tracker = EpisodeTracker(workers)
            results: list[list[tuple[float, int]]] = [[] for _ in range(workers)]
            step = 0
            while any(len(r) < q for r, q in zip(results, quota)):
                action, memory = act(obs, jax.random.fold_in(key, step), memory, starts)
                envs.step_async(env.decode_actions(np.asarray(action)))
                raw_obs, reward, terminated, truncated, _ = envs.step_wait(timeout=step_timeout)
                done = starts = np.logical_or(terminated, truncated)
                returns, lengths = tracker.episode_return.copy(), tracker.episode_length.copy()
                tracker.step(reward, done)
                for i in np.flatnonzero(done):
                    if len(results[i]) < quota[i]:
                        results[i].append((float(returns[i] + reward[i]), int(lengths[i] + 1)))
                obs = env.encode_obs(raw_obs)
                step += 1
        except (HostLoopError, KeyboardInterrupt):
            raise
        except Exception as error:
            raise HostLoopError(describe_env_error(env.name, envs, error, step_timeout)) \
                from error
        failed = False
    finally:
        _shutdown(None, envs, terminate=failed)
    flat = [item for worker in results for item in worker]
    return np.array([r for r, _ in flat]), np.array([n for _, n in flat])
