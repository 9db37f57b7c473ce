"""The host loop's `train`: one seed with its envs in worker processes, actor threads acting
while the calling thread learns, chunk summaries, checkpoints and the non-finite guard as in
the device loop (`jaxrl_sys.runtime.driver.train`), workers shut down on every exit path."""

from __future__ import annotations

import queue
import time
from typing import Callable, Optional

import jax
import numpy as np

from jaxrl_sys.core.types import HostFns, PyTree
from jaxrl_sys.runtime.driver import (
    EPISODE_KEYS, ChunkSummary, TrainResult, check_finite, summarize,
)
from jaxrl_sys.runtime.execution import all_finite
from jaxrl_sys.runtime.host.actors import (
    POLL_SECONDS, Actor, HostEnv, HostLoopConfig, ParamStore, act_fn, initial_memory, stack_steps,
)
from jaxrl_sys.runtime.host.learner import (
    actor_params, global_env_ids, global_rollout, learn_fn, rollout_shapes, stack_chunk,
    thread_pieces,
)
from jaxrl_sys.runtime.host.placement import (
    ENV_AXIS_SPEC, REPLICATED, HostLayout, HostPlacement, place_host,
)
from jaxrl_sys.runtime.host.workers import (
    HostLoopError, describe_env_error, shutdown_all, start_envs, thread_name,
)
from jaxrl_sys.runtime.waiting import check_interrupt, in_thread, wait_ready


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
    live in the workers. Each summary's `seconds` runs from the previous chunk's end (after
    its checkpoint) to its own, so checkpoint writes count in no chunk, as on device.

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
    started = start_envs(env, placement, seed, config)
    actors: list[Actor] = []
    failed = True
    try:
        if carry is None:
            carry = initial_carry(fns, seed, placement)
        agent_state, replay = carry["agent_state"], carry.get("replay")
        first_iteration = min(start_chunk * iters_per_chunk, num_iterations)
        act = act_fn(fns)
        devices = placement.thread_devices()
        params = actor_params(fns, agent_state, set(devices))
        example = params[devices[0]]
        learn = in_thread(lambda: learn_fn(fns, placement).lower(
            agent_state, replay, rollout_shapes(fns, env, example, act, placement), learn_key
        ).compile())
        for device in dict.fromkeys(devices):  # compile `act` once per actor device
            thread = devices.index(device)
            ids = placement.thread_env_ids(thread)
            _, extras, _ = in_thread(lambda: act(
                params[device], started[thread][1], actor_key, np.int32(0),
                jax.device_put(ids, device), initial_memory(fns, len(ids)),
                np.ones(len(ids), bool)))
            wait_ready(stack_steps([extras] * fns.rollout_steps))
        env_ids = global_env_ids(placement)
        finite = in_thread(lambda: jax.jit(all_finite).lower(agent_state).compile())
        compile_seconds = time.perf_counter() - start

        store = ParamStore(config.staleness)
        store.publish(first_iteration, params)
        actors = [
            Actor(thread, env, envs, obs, act, store, actor_key,
                   placement.thread_env_ids(thread), devices[thread],
                   thread_pieces(placement, thread), range(first_iteration, num_iterations),
                   fns.rollout_steps, config, initial_memory(fns, obs.shape[0]))
            for thread, (envs, obs) in enumerate(started)
        ]
        train_start = time.perf_counter()
        for actor in actors:
            actor.start()

        history: list[ChunkSummary] = []
        chunk_metrics: list[dict] = []
        learner_wait = 0.0
        last_end = train_start  # when the previous chunk's checkpoint (if any) was written
        trained = 0.0  # the chunks' own seconds so far (checkpoints excluded)
        for iteration in range(first_iteration, num_iterations):
            clock = time.perf_counter()
            items = [_next_rollout(actor, actors, env, placement, config) for actor in actors]
            rollout = global_rollout([parts for parts, _ in items], env_ids, placement)
            episodes = {k: sum(sums[k] for _, sums in items) for k in EPISODE_KEYS}
            learner_wait += time.perf_counter() - clock
            agent_state, replay, metrics = learn(
                agent_state, replay, rollout, jax.random.fold_in(learn_key, iteration)
            )
            store.publish(iteration + 1, actor_params(fns, agent_state, set(devices)))
            chunk_metrics.append({**metrics, **episodes})
            if len(chunk_metrics) == iters_per_chunk or iteration == num_iterations - 1:
                chunk = start_chunk + len(history)
                summary = summarize(chunk, len(chunk_metrics), stack_chunk(chunk_metrics))
                summary.state_finite = np.asarray([bool(finite(agent_state))])
                check_finite(summary)  # NonFiniteError before a bad state is checkpointed
                history.append(summary)
                chunk_metrics = []
                end = time.perf_counter()
                summary.seconds, summary.done_at = end - last_end, end
                trained += summary.seconds
                stop = on_chunk is not None and on_chunk(summary, trained)
                last = stop or iteration == num_iterations - 1
                if on_checkpoint is not None and (
                    last or (checkpoint_every > 0 and (chunk + 1) % checkpoint_every == 0)
                ):
                    on_checkpoint(chunk, _carry(agent_state, replay))
                last_end = time.perf_counter()
                if stop:
                    break
        wait_ready(agent_state)
        failed = False
        seconds = {f"actor_{k}": sum(a.seconds[k] for a in actors) / len(actors)
                   for k in actors[0].seconds}
        return TrainResult(_carry(agent_state, replay), history, compile_seconds, trained,
                           {**seconds, "learner_rollout_wait": learner_wait})
    finally:
        shutdown_all(actors, [envs for envs, _ in started], terminate=failed)


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


def _next_rollout(actor: Actor, actors: list[Actor], env: HostEnv, placement: HostPlacement,
                  config: HostLoopConfig) -> tuple[list, dict]:
    """`actor`'s next rollout, or the first failed actor's error as a `HostLoopError`."""
    while True:
        check_interrupt()  # a Ctrl-C that Python dropped (see jaxrl_sys.waiting)
        try:
            return actor.rollouts.get(timeout=POLL_SECONDS)
        except queue.Empty:
            for other in actors:
                if isinstance(other.error, KeyboardInterrupt):  # Ctrl-C reached the workers
                    raise KeyboardInterrupt
            for other in actors:
                if other.error is not None:
                    name = thread_name(env, placement, other.index)
                    raise HostLoopError(
                        describe_env_error(name, other.envs, other.error, config.step_timeout)
                    ) from other.error
            if not actor.is_alive() and actor.rollouts.empty():
                raise HostLoopError(f"env {thread_name(env, placement, actor.index)}: the "
                                    "actor thread stopped early")
