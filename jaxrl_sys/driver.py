"""The training driver: K iterations per compiled call, then back to Python for logging.

The next chunk is dispatched before the previous chunk's metrics are fetched, so the device
never waits for the host's logging.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Callable, Optional

import jax
import numpy as np

from jaxrl_sys.execution import Carry, Runner


@dataclasses.dataclass
class ChunkSummary:
    """Host-side digest of one chunk's metrics, over all seeds."""

    chunk: int
    iterations: int
    returns: np.ndarray  # [seeds] mean return of episodes finished in the chunk (NaN if none)
    lengths: np.ndarray  # [seeds]
    scalars: dict[str, float]  # other metrics, averaged over seeds and iterations
    eval_returns: Optional[np.ndarray] = None  # [seeds] greedy evaluation at the chunk's end

    @property
    def mean_return(self) -> float:
        finite = self.returns[np.isfinite(self.returns)]
        return float(finite.mean()) if finite.size else float("nan")


EPISODE_KEYS = ("episode_return_sum", "episode_length_sum", "episode_count")


def summarize(chunk: int, iterations: int, metrics: dict) -> ChunkSummary:
    """Turn [seeds, K] metric arrays into per-seed episode means and scalar averages."""
    metrics = jax.device_get(metrics)
    count = np.asarray(metrics["episode_count"]).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        returns = np.where(count > 0, metrics["episode_return_sum"].sum(axis=1) / count, np.nan)
        lengths = np.where(count > 0, metrics["episode_length_sum"].sum(axis=1) / count, np.nan)
    with warnings.catch_warnings():  # metrics are NaN in iterations that did not learn
        warnings.simplefilter("ignore", RuntimeWarning)
        scalars = {
            k: float(np.nanmean(v)) for k, v in metrics.items() if k not in EPISODE_KEYS
        }
    eval_returns = np.asarray(metrics["eval_return"]) if "eval_return" in metrics else None
    return ChunkSummary(chunk, iterations, returns, lengths, scalars, eval_returns)


@dataclasses.dataclass
class TrainResult:
    carry: Carry
    history: list[ChunkSummary]
    compile_seconds: float
    train_seconds: float
    # where the host loop's threads spent their time (seconds by activity); empty on device
    pipeline_seconds: dict = dataclasses.field(default_factory=dict)


def train(
    runner: Runner,
    seeds: np.ndarray,
    num_chunks: int,
    on_chunk: Optional[Callable[[ChunkSummary, float], bool]] = None,
) -> TrainResult:
    """Run `num_chunks` chunks for all `seeds`.

    `on_chunk(summary, train_seconds_so_far)` is called for every chunk in order; returning
    True stops training early. Compilation is done ahead of time and timed separately.
    """
    start = time.perf_counter()
    carry = runner.init(seeds)
    run_chunk = runner.run_chunk.lower(carry).compile()
    jax.block_until_ready(carry)
    compile_seconds = time.perf_counter() - start

    history: list[ChunkSummary] = []
    train_start = time.perf_counter()
    pending = None
    stop = False
    for chunk in range(num_chunks + 1):
        if chunk < num_chunks and not stop:
            carry, metrics = run_chunk(carry)
        else:
            metrics = None
        if pending is not None:
            summary = summarize(chunk - 1, runner.iters_per_chunk, pending)
            history.append(summary)
            if on_chunk is not None and on_chunk(summary, time.perf_counter() - train_start):
                stop = True
        if metrics is None:
            break
        pending = metrics
    jax.block_until_ready(carry)
    return TrainResult(carry, history, compile_seconds, time.perf_counter() - train_start)
