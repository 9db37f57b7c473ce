"""The host loop's env workers: each actor thread's vector env started with the seeds of
its envs' global ids, a failure named in one line (the env, the workers, the error), and every
worker process reaped on every exit path."""

from __future__ import annotations

import multiprocessing
from typing import Any, Optional

import numpy as np

from jaxrl_sys.runtime.host.actors import Actor, HostEnv, HostLoopConfig
from jaxrl_sys.runtime.host.placement import HostPlacement


class HostLoopError(RuntimeError):
    """An env or worker failed; the message names the env and the error."""


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


def start_envs(env: HostEnv, placement: HostPlacement, seed: int,
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
                    thread_name(env, placement, thread), envs, error, config.step_timeout)
                ) from error
            started[-1] = (envs, env.encode_obs(raw_obs))
    except BaseException:
        for envs, _ in started:
            shutdown(None, envs, terminate=True)
        raise
    return started


def thread_name(env: HostEnv, placement: HostPlacement, thread: int) -> str:
    """The env's name, and the actor thread's where there are several."""
    if placement.layout.actor_threads == 1:
        return env.name
    return f"{env.name} (actor thread {thread})"


def shutdown_all(actors: list[Actor], all_envs: list[Any], terminate: bool) -> None:
    """Stop every actor thread, then reap every vector env's workers."""
    for actor in actors:
        actor.stop.set()
    threads = {id(a.envs): a for a in actors}
    for envs in all_envs:
        shutdown(threads.get(id(envs)), envs, terminate)


def shutdown(actor: Optional[Actor], envs: Any, terminate: bool) -> None:
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
