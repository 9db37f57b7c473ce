"""Greedy evaluation of a policy in the host loop's worker processes: returns and lengths of
a number of episodes, spread over the workers so that the set does not favour short ones."""

from __future__ import annotations

from typing import Callable, Union

import jax
import numpy as np

from jaxrl_sys.core.evaluation import stateful
from jaxrl_sys.core.types import PyTree, RecurrentPolicy
from jaxrl_sys.runtime.host.actors import HostEnv
from jaxrl_sys.runtime.host.episodes import EpisodeTracker
from jaxrl_sys.runtime.host.workers import HostLoopError, describe_env_error, shutdown


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
        shutdown(None, envs, terminate=failed)
    flat = [item for worker in results for item in worker]
    return np.array([r for r, _ in flat]), np.array([n for _, n in flat])
