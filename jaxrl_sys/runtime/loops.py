"""The two training loops behind one small interface, for `jaxrl_sys.runtime.session.run`.

`DeviceLoop` runs chunks of compiled iterations for all seeds (`execution.place` and
`driver.train`); `HostLoop` runs one seed with envs in worker processes (`host_loop.train`).
Both give a checkpoint template, and train from a restored carry and chunk with the same
callbacks, so that the session treats them alike.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.core.evaluation import make_eval_fn
from jaxrl_sys.runtime import driver
from jaxrl_sys.runtime import host as host_loop
from jaxrl_sys.runtime.execution import place, placement_fns
from jaxrl_sys.runtime.host.placement import place_host
from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun, host_layout
from jaxrl_sys.core.types import PyTree
from jaxrl_sys.runtime.waiting import fetch, in_thread

OnChunk = Callable[[driver.ChunkSummary, float], bool]
OnCheckpoint = Callable[[int, PyTree], None]


class Loop(Protocol):
    """What a session needs of a training loop."""

    iters_per_chunk: int
    num_chunks: int

    def template(self) -> PyTree:
        """A fresh carry: what a checkpoint is restored into."""

    def train(self, on_chunk: OnChunk, on_checkpoint: OnCheckpoint, checkpoint_every: int,
              carry: Optional[PyTree] = None, start_chunk: int = 0) -> driver.TrainResult:
        """Chunks `start_chunk ..` from `carry` (a restored run) or from the start."""


# Where a last chunk ends with no finished episode for some seed, the summary reports a greedy
# evaluation of this many episodes per seed, for episodes bounded by at most this many steps
# (it runs the whole bound); past it, the return so far of the episodes still running.
FINAL_EVAL_EPISODES = 8
FINAL_EVAL_MAX_STEPS = 10_000
FINAL_EVAL_SALT = 0xF17A1  # the evaluation's key: the run's key folded with this


def chunking(num_iterations: int, chunks: int) -> tuple[int, int]:
    """(iterations per chunk, number of chunks) for about `chunks` chunks."""
    iters_per_chunk = math.ceil(num_iterations / chunks)
    return iters_per_chunk, math.ceil(num_iterations / iters_per_chunk)


class DeviceLoop:
    """All seeds on `spec.devices` devices: `jit(scan(train_step))` per chunk."""

    def __init__(self, resolved: ResolvedRun, env: Any, agent: Any,
                 registry: EnvRegistry) -> None:
        spec, config, module = resolved.spec, resolved.config, resolved.module
        self.iters_per_chunk, self.num_chunks = chunking(config.num_iterations, spec.chunks)
        eval_fn = None
        if resolved.eval_episodes:
            # the env's evaluation variant: the same game, e.g. against a perfect opponent
            eval_env = resolved.make_eval_env(registry)
            eval_fn = make_eval_fn(eval_env, module.greedy_action(agent))
        self.runner = place(
            *placement_fns(agent), num_envs=config.num_envs, num_devices=spec.devices,
            iters_per_chunk=self.iters_per_chunk, eval_fn=eval_fn,
            eval_episodes=resolved.eval_episodes, eval_outcomes=env.spec.num_players == 2,
        )
        self.seeds = np.asarray(resolved.seeds)
        self.resolved, self.env, self.agent, self.registry = resolved, env, agent, registry

    def template(self) -> PyTree:
        return in_thread(lambda: self.runner.init(self.seeds))

    def train(self, on_chunk: OnChunk, on_checkpoint: OnCheckpoint, checkpoint_every: int,
              carry: Optional[PyTree] = None, start_chunk: int = 0) -> driver.TrainResult:
        """`driver.train`, then returns standing in for a last chunk in which some seed
        finished no episode (see `final_returns`)."""
        result = driver.train(self.runner, self.seeds, self.num_chunks, on_chunk, carry=carry,
                              start_chunk=start_chunk, checkpoint_every=checkpoint_every,
                              on_checkpoint=on_checkpoint)
        if result.last_chunk_incomplete:
            result.final_returns = self.final_returns(result)
        return result

    def final_returns(self, result: driver.TrainResult) -> Optional[driver.FinalReturns]:
        """What the summary reports when episodes outlast the last chunk: the chunk's own
        greedy evaluation if it had one, else a greedy evaluation of the trained agent where
        episodes are bounded by at most `FINAL_EVAL_MAX_STEPS` steps, else the return so far
        of the episodes still running. None in a multi-process run (the last finished
        episodes are reported there)."""
        final = result.history[-1]
        if final.eval_returns is not None:
            return driver.FinalReturns(np.asarray(final.eval_returns),
                                       "greedy eval at the end of the last chunk")
        if jax.process_count() > 1:
            return None
        bounded = 0 < self.env.spec.max_episode_steps <= FINAL_EVAL_MAX_STEPS
        if bounded and hasattr(self.resolved.module, "greedy_action"):
            returns = in_thread(lambda: self._greedy_returns(result.carry))
            return driver.FinalReturns(
                returns, f"greedy, {FINAL_EVAL_EPISODES} episodes/seed after training")
        running = driver.running_returns(result.carry.env_state)
        if running is None:
            return None
        return driver.FinalReturns(running, "return so far of the episodes still running")

    def _greedy_returns(self, carry: PyTree) -> np.ndarray:
        """Mean return of `FINAL_EVAL_EPISODES` greedy episodes per seed [seeds] of the
        trained agent in `carry`, on the env's evaluation variant."""
        eval_env = self.resolved.make_eval_env(self.registry)
        eval_fn = make_eval_fn(eval_env, self.resolved.module.greedy_action(self.agent))
        ids = jnp.arange(FINAL_EVAL_EPISODES, dtype=jnp.int32)

        def one_seed(agent_state: PyTree, key: jax.Array) -> jax.Array:
            returns, _ = eval_fn(agent_state, jax.random.fold_in(key, FINAL_EVAL_SALT), ids)
            return jnp.mean(returns)

        return np.asarray(fetch(jax.jit(jax.vmap(one_seed))(carry.agent_state, carry.key)))


class HostLoop:
    """One seed with its envs in worker processes or envpool threads (Sebulba: actor threads
    on actor devices, a learner data-parallel over the learner devices of every process)."""

    def __init__(self, resolved: ResolvedRun, env: Any, agent: Any) -> None:
        spec = resolved.spec
        self.env, self.fns, self.seed = env, resolved.module.host_fns(agent), spec.seed
        self.num_iterations = resolved.config.num_iterations
        self.iters_per_chunk, self.num_chunks = chunking(self.num_iterations, spec.chunks)
        self.config = host_loop.HostLoopConfig(staleness=spec.staleness,
                                               step_timeout=spec.step_timeout)
        self.placement = place_host(host_layout(spec, resolved.config, jax.process_count()))

    def template(self) -> PyTree:
        return host_loop.initial_carry(self.fns, self.seed, self.placement)

    def train(self, on_chunk: OnChunk, on_checkpoint: OnCheckpoint, checkpoint_every: int,
              carry: Optional[PyTree] = None, start_chunk: int = 0) -> driver.TrainResult:
        return host_loop.train(
            self.env, self.fns, seed=self.seed, num_iterations=self.num_iterations,
            iters_per_chunk=self.iters_per_chunk, config=self.config,
            placement=self.placement, on_chunk=on_chunk,
            checkpoint_every=checkpoint_every, on_checkpoint=on_checkpoint, carry=carry,
            start_chunk=start_chunk,
        )


def make_loop(resolved: ResolvedRun, registry: EnvRegistry) -> tuple[Loop, Any, Any]:
    """(loop, env, agent) for a resolved run; devices must already be set up."""
    env, agent = resolved.build(registry)
    if resolved.host:
        return HostLoop(resolved, env, agent), env, agent
    return DeviceLoop(resolved, env, agent, registry), env, agent
