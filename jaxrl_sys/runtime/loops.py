"""The two training loops behind one small interface, for `jaxrl_sys.runtime.session.run`.

`DeviceLoop` runs chunks of compiled iterations for all seeds (`execution.place` and
`driver.train`); `HostLoop` runs one seed with envs in worker processes (`host_loop.train`).
Both give a checkpoint template, and train from a restored carry and chunk with the same
callbacks, so that the session treats them alike.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Protocol

import numpy as np

from jaxrl_sys.runtime import driver
from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun
from jaxrl_sys.core.types import PyTree
from jaxrl_sys.runtime.waiting import in_thread

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


def chunking(num_iterations: int, chunks: int) -> tuple[int, int]:
    """(iterations per chunk, number of chunks) for about `chunks` chunks."""
    iters_per_chunk = math.ceil(num_iterations / chunks)
    return iters_per_chunk, math.ceil(num_iterations / iters_per_chunk)


class DeviceLoop:
    """All seeds on `spec.devices` devices: `jit(scan(train_step))` per chunk."""

    def __init__(self, resolved: ResolvedRun, env: Any, agent: Any,
                 registry: EnvRegistry) -> None:
        from jaxrl_sys.runtime.execution import place, placement_fns

        spec, config, module = resolved.spec, resolved.config, resolved.module
        self.iters_per_chunk, self.num_chunks = chunking(config.num_iterations, spec.chunks)
        eval_fn = None
        if resolved.eval_episodes:
            from jaxrl_sys.core.evaluation import make_eval_fn

            # the env's evaluation variant: the same game, e.g. against a perfect opponent
            eval_env = registry.make_eval(resolved.env_name, **resolved.env_kwargs)
            eval_fn = make_eval_fn(eval_env, module.greedy_action(agent))
        self.runner = place(
            *placement_fns(agent), num_envs=config.num_envs, num_devices=spec.devices,
            iters_per_chunk=self.iters_per_chunk, eval_fn=eval_fn,
            eval_episodes=resolved.eval_episodes, eval_outcomes=env.spec.num_players == 2,
        )
        self.seeds = np.asarray(resolved.seeds)

    def template(self) -> PyTree:
        return in_thread(lambda: self.runner.init(self.seeds))

    def train(self, on_chunk: OnChunk, on_checkpoint: OnCheckpoint, checkpoint_every: int,
              carry: Optional[PyTree] = None, start_chunk: int = 0) -> driver.TrainResult:
        return driver.train(self.runner, self.seeds, self.num_chunks, on_chunk, carry=carry,
                            start_chunk=start_chunk, checkpoint_every=checkpoint_every,
                            on_checkpoint=on_checkpoint)


class HostLoop:
    """One seed with its envs in worker processes (Gymnasium), learning on the device."""

    def __init__(self, resolved: ResolvedRun, env: Any, agent: Any) -> None:
        from jaxrl_sys.runtime import host_loop

        spec = resolved.spec
        self.env, self.fns, self.seed = env, resolved.module.host_fns(agent), spec.seed
        self.num_iterations = resolved.config.num_iterations
        self.iters_per_chunk, self.num_chunks = chunking(self.num_iterations, spec.chunks)
        self.config = host_loop.HostLoopConfig(staleness=spec.staleness,
                                               step_timeout=spec.step_timeout)

    def template(self) -> PyTree:
        from jaxrl_sys.runtime import host_loop

        return host_loop.initial_carry(self.fns, self.seed)

    def train(self, on_chunk: OnChunk, on_checkpoint: OnCheckpoint, checkpoint_every: int,
              carry: Optional[PyTree] = None, start_chunk: int = 0) -> driver.TrainResult:
        from jaxrl_sys.runtime import host_loop

        return host_loop.train(
            self.env, self.fns, seed=self.seed, num_iterations=self.num_iterations,
            iters_per_chunk=self.iters_per_chunk, config=self.config, on_chunk=on_chunk,
            checkpoint_every=checkpoint_every, on_checkpoint=on_checkpoint, carry=carry,
            start_chunk=start_chunk,
        )


def make_loop(resolved: ResolvedRun, registry: EnvRegistry) -> tuple[Loop, Any, Any]:
    """(loop, env, agent) for a resolved run; devices must already be set up."""
    env, agent = resolved.build(registry)
    if resolved.host:
        return HostLoop(resolved, env, agent), env, agent
    return DeviceLoop(resolved, env, agent, registry), env, agent
