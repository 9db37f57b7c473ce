"""Running a `RunSpec`: `run(spec, load_agent, registry)` and the `Session` around learning.

The session does what every run does whichever loop trains: the run directory and its
`run.json`, progress bar, JSONL and TensorBoard, checkpoints, the non-finite guard, resume
and the final summary line. The loop (`jaxrl_sys.runtime.loops`) only trains.

A run in a few lines of Python: build a RunSpec and hand `run` the agent loader and the env
registry (this layer never imports them; scripts/train.py passes `agents.load` and the
`envs` package, README shows the lines).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np

from jaxrl_sys.core.config import ConfigError, config_to_dict
from jaxrl_sys.runtime import distributed, driver
from jaxrl_sys.runtime.checkpoint import CheckpointError, Checkpointer
from jaxrl_sys.runtime.devices import describe, enable_compile_cache, request_devices, \
    set_safe_cpu_flags
from jaxrl_sys.runtime.distributed import DistributedError
from jaxrl_sys.runtime.execution import PlacementError
from jaxrl_sys.runtime.loops import make_loop
from jaxrl_sys.runtime.metrics import RunLogger, make_run_dir
from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun, RunSpec, UsageError, resolve, \
    save_run_file
from jaxrl_sys.runtime.run_spec import load_spec
from jaxrl_sys.runtime.wandb_log import WandbSink
from jaxrl_sys.runtime.warm_start import learner_from

_IMPORTED_AT = time.perf_counter()


class TrainingStopped(RuntimeError):
    """A run stopped by a fault at run time (not bad input): one line, exit code 1."""


def _user_errors() -> tuple[type[BaseException], ...]:
    return (UsageError, ConfigError, PlacementError, CheckpointError, DistributedError)


# errors of the run layer that mean bad input: one line and exit code 2 in the scripts
USER_ERRORS = _user_errors()


@dataclasses.dataclass
class RunOutcome:
    """What a finished run did: its directory, chunk summaries (this process's), timings."""

    run_dir: Path
    history: list[driver.ChunkSummary]
    train_seconds: float
    compile_seconds: float
    summary: str  # the one-line report train.py prints
    carry: Any = None


class _SilentLogger:
    """The logger of processes other than 0: they compute, process 0 writes."""

    def log(self, env_steps: int, metrics: dict, *, seconds: Optional[float] = None,
            at: Optional[float] = None) -> None:
        pass

    def reset_clock(self, env_steps: Optional[int] = None, elapsed: float = 0.0) -> None:
        pass

    def close(self) -> dict:
        return {}


def _extra_sinks(resolved: ResolvedRun, run_dir: Path) -> list[Any]:
    """Metric sinks the spec asks for beyond JSONL and TensorBoard: W&B with `--wandb`."""
    spec = resolved.spec
    if spec.wandb is None:
        return []
    config = {"agent": spec.agent, "env": resolved.env_name, "seeds": resolved.seeds,
              "devices": spec.devices, **config_to_dict(resolved.config)}
    return [WandbSink(run_dir, spec.wandb, config)]


class Session:
    """Logging, checkpoints, the target return and the summary of one run, for any loop."""

    def __init__(self, resolved: ResolvedRun, run_dir: Path, *, iters_per_chunk: int,
                 num_chunks: int, main_process: bool,
                 threshold: Optional[float], process_start: float) -> None:
        spec = resolved.spec
        self.resolved, self.run_dir, self.main_process = resolved, run_dir, main_process
        self.threshold, self.process_start = threshold, process_start
        self.steps_per_chunk = iters_per_chunk * resolved.config.steps_per_iteration  # per seed
        self.solved_at: dict[str, float] = {}
        self.start_chunk = 0
        # created on resume too: a run stopped before it made its checkpoint directory
        self.checkpointer = Checkpointer(run_dir, keep=spec.keep_checkpoints,
                                         save_replay=spec.save_replay, create=True)
        self.logger: Any = _SilentLogger()
        if main_process:
            self.logger = RunLogger(run_dir, total_steps=num_chunks * self.steps_per_chunk
                                    * spec.seeds, progress=spec.progress,
                                    sinks=_extra_sinks(resolved, run_dir))

    def restore(self, template: Callable[[], Any]) -> Any:
        """The latest checkpoint's carry (shaped like `template()`); training goes on after
        it. None for a run stopped before its first checkpoint: it starts again."""
        if self.checkpointer.latest_chunk() is None:
            if self.main_process:
                print(f"no checkpoint in {self.run_dir} yet: starting it from the beginning",
                      file=sys.stderr)
            return None
        carry, record = self.checkpointer.restore(template())
        self.start_chunk = int(record["chunk"]) + 1
        self.solved_at.update(record.get("solved_at", {}))
        if self.main_process:
            print(f"resuming {self.run_dir} after chunk {self.start_chunk - 1}", file=sys.stderr)
        return carry

    def on_checkpoint(self, chunk: int, carry: Any) -> None:
        self.checkpointer.save(chunk, carry, {"solved_at": self.solved_at})

    def on_chunk(self, summary: driver.ChunkSummary, train_seconds: float) -> bool:
        """Log a chunk; True (stop) once the target return is reached, if one was asked."""
        seeds = self.resolved.spec.seeds
        steps_per_seed = (summary.chunk + 1) * self.steps_per_chunk
        if summary.chunk == self.start_chunk:
            # steps/s of this process's training only: not compilation, not a resumed past
            self.logger.reset_clock(self.start_chunk * self.steps_per_chunk * seeds,
                                    elapsed=train_seconds)
        returns = summary.returns[np.isfinite(summary.returns)]
        self.logger.log(steps_per_seed * seeds, {
            "env_steps_per_seed": steps_per_seed,
            "train_seconds": train_seconds,
            "mean_return": summary.mean_return,
            "min_return": float(returns.min()) if returns.size else float("nan"),
            "max_return": float(returns.max()) if returns.size else float("nan"),
            **summary.scalars,
        }, seconds=summary.seconds, at=summary.done_at)
        measured = (float(np.mean(summary.eval_returns)) if summary.eval_returns is not None
                    else summary.mean_return)
        if self.threshold is not None and not self.solved_at and measured >= self.threshold:
            self.solved_at.update(process_seconds=time.perf_counter() - self.process_start,
                                  train_seconds=train_seconds, steps_per_seed=steps_per_seed)
            return self.resolved.spec.target_return is not None
        return False

    def stopped(self, error: driver.NonFiniteError) -> TrainingStopped:
        """The non-finite guard's message: where the last good checkpoint is."""
        last = self.checkpointer.latest_chunk()
        kept = (f"last good checkpoint: chunk {last} (resume with --resume {self.run_dir})"
                if last is not None else "no checkpoint was saved before it")
        return TrainingStopped(f"{error}; {kept}")

    def close(self) -> None:
        self.logger.close()
        self.checkpointer.close()

    def summary(self, result: driver.TrainResult) -> str:
        """The run's one-line report: steps, time, rate, returns, when the threshold fell."""
        spec, eval_episodes = self.resolved.spec, self.resolved.eval_episodes
        if not result.history:
            return f"done: nothing left to run in {self.run_dir}"
        final = result.history[-1]
        steps = len(result.history) * self.steps_per_chunk  # in this process
        rate = steps * spec.seeds / result.train_seconds
        steps += self.start_chunk * self.steps_per_chunk
        solved_at, threshold = self.solved_at, self.threshold
        solved = (
            f"reached {threshold:g} at {solved_at['process_seconds']:.1f} s after start "
            f"({solved_at['train_seconds']:.1f} s training, {solved_at['steps_per_seed']:,} "
            f"steps/seed)" if solved_at else
            (f"did not reach {threshold:g}" if threshold is not None else "no threshold")
        )
        returns, note = final_returns(result)
        per_seed = ", ".join(f"{r:.1f}" if np.isfinite(r) else "-" for r in returns)
        mean = f"{float(np.mean(returns)):.1f}" if np.isfinite(returns).all() else "-"
        greedy = (f"; greedy eval return {float(np.mean(final.eval_returns)):.1f} over "
                  f"{eval_episodes} episodes/seed" if final.eval_returns is not None else "")
        if "eval_win" in final.scalars:
            greedy += " (W/D/L " + "/".join(
                f"{final.scalars[f'eval_{k}']:.0%}" for k in ("win", "draw", "loss")) + ")"
        return (
            f"done: {steps:,} steps/seed x {spec.seeds} seed(s) in {result.train_seconds:.1f} s "
            f"(+{result.compile_seconds:.1f} s compile), {rate:,.0f} env-steps/s; final mean "
            f"return {mean} [{per_seed}]{note}{greedy}; {solved}"
            f"{' (greedy)' if final.eval_returns is not None and solved_at else ''}; "
            f"{self.run_dir}"
        )


def final_returns(result: driver.TrainResult) -> tuple[np.ndarray, str]:
    """The per-seed returns [seeds] the summary reports and a note on what they are: the last
    chunk's training returns; where some seed finished no episode in it (episodes longer than
    a chunk), the loop's stand-in (`driver.FinalReturns`), else each seed's last chunk that
    finished episodes."""
    final = result.history[-1]
    if not result.last_chunk_incomplete:
        return final.returns, ""
    why = "no training episode ended in the last chunk"
    if result.final_returns is not None:
        return result.final_returns.returns, f" ({result.final_returns.what}: {why})"
    by_seed = np.stack([c.returns for c in result.history])  # [chunks, seeds]
    ended = np.isfinite(by_seed)
    if not ended.any(axis=0).all():
        return final.returns, " (no training episode has ended yet for some seed)"
    last = by_seed.shape[0] - 1 - np.argmax(ended[::-1], axis=0)  # [seeds]
    chunks = ", ".join(str(result.history[c].chunk + 1) for c in last)
    return by_seed[last, np.arange(by_seed.shape[1])], (
        f" (of the last chunk in which episodes ended, chunk {chunks}: {why})")


def run(spec: RunSpec, load_agent: Callable[[str], Any], registry: EnvRegistry, *,
        resume: Union[str, Path, None] = None, group: Any = None,
        process_start: Optional[float] = None) -> RunOutcome:
    """Train `spec` (or continue the run in `resume`, whose spec it is); print the summary.

    Everything is checked before any device, directory or process is created. `group` is a
    `jaxrl_sys.runtime.distributed.ProcessGroup` for a multi-process run. Raises the one-line errors
    that train.py reports: exit 2 for bad input, `TrainingStopped` / `HostLoopError` (exit 1)
    for faults at run time.
    """
    multi = group is not None and group.multi
    resolved = resolve(spec, load_agent, registry, saved_run=resume,
                       processes=group.num_processes if multi else 1)
    if multi:
        if spec.init_from is not None:
            raise UsageError("--init-from starts runs in one process (no --coordinator)")
        if spec.devices % group.num_processes:
            raise UsageError(f"--devices {spec.devices} does not divide over "
                             f"{group.num_processes} processes")
        set_safe_cpu_flags()
        distributed.initialize(group, local_cpu_devices=spec.devices // group.num_processes)
    else:
        request_devices(spec.devices)
    enable_compile_cache()
    main_process = distributed.is_main_process()
    loop, _, _ = make_loop(resolved, registry)
    start = None
    if resume is None and spec.init_from is not None:  # before the run directory is made
        start = learner_from(spec.init_from, loop.template())

    if resume is not None:
        run_dir = Path(resume)
    else:
        run_dir = Path()
        if main_process:
            run_dir = make_run_dir(spec.run_root, spec.agent, resolved.env_name)
            save_run_file(run_dir, resolved)
        if multi:  # every process writes its checkpoint shards here
            run_dir = Path(distributed.broadcast_text(str(run_dir) if main_process else ""))
    if main_process:
        where = f" in {group.num_processes} processes" if multi else ""
        print(f"{spec.agent} on {resolved.env_name}: {spec.seeds} seed(s) on {describe()} using "
              f"{spec.devices}{where}, {loop.num_chunks} chunks x {loop.iters_per_chunk} "
              f"iterations x {resolved.config.steps_per_iteration} steps; run dir {run_dir}",
              file=sys.stderr)
    threshold = (spec.target_return if spec.target_return is not None
                 else registry.reward_threshold(resolved.env_name))
    session = Session(resolved, run_dir, iters_per_chunk=loop.iters_per_chunk,
                      num_chunks=loop.num_chunks, main_process=main_process, threshold=threshold,
                      process_start=_IMPORTED_AT if process_start is None else process_start)
    try:
        carry = session.restore(loop.template) if resume is not None else start
        result = loop.train(session.on_chunk, session.on_checkpoint, spec.checkpoint_every,
                            carry=carry, start_chunk=session.start_chunk)
    except driver.NonFiniteError as error:
        raise session.stopped(error) from None
    finally:
        session.close()
    summary = session.summary(result)
    if main_process:
        print(summary)
    return RunOutcome(run_dir, result.history, result.train_seconds, result.compile_seconds,
                      summary, result.carry)


@dataclasses.dataclass
class SavedRun:
    """A run directory's agent rebuilt from its run.json: what evaluate.py and arena.py load."""

    run_dir: Path
    resolved: ResolvedRun
    env: Any
    agent: Any
    loop: Any  # jaxrl_sys.loops.Loop: gives the checkpoint template

    def restore(self, chunk: Optional[int] = None) -> tuple[Any, dict]:
        """The carry saved after `chunk` (default: the latest) and its record."""
        checkpointer = Checkpointer(self.run_dir, create=False)
        try:
            return checkpointer.restore(self.loop.template(), chunk)
        finally:
            checkpointer.close()


def open_run(run_dir: Union[str, Path], load_agent: Callable[[str], Any],
             registry: EnvRegistry, *, set_up_devices: bool = True) -> SavedRun:
    """The run in `run_dir` rebuilt from its spec (nothing restored yet); with
    `set_up_devices`, the run's devices are requested first (before any JAX computation)."""
    resolved = resolve(load_spec(run_dir), load_agent, registry, saved_run=run_dir)
    if set_up_devices:
        request_devices(resolved.spec.devices)
        enable_compile_cache()
    loop, env, agent = make_loop(resolved, registry)
    return SavedRun(Path(run_dir), resolved, env, agent, loop)
