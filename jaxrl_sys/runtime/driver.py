"""The training driver: K iterations per compiled call, then back to Python for logging.

The next chunk is dispatched before the previous chunk's metrics are fetched, so the device
never waits for the host's logging. Each chunk is timed from its own start (its dispatch, or
the previous chunk's end if it queued behind it) to its own end, stamped as its outputs become
ready: when the host fetches a chunk's metrics says nothing of how long the chunk took.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, Callable, Optional

import jax
import numpy as np

from jaxrl_sys.core.types import PyTree
from jaxrl_sys.runtime.execution import STATE_FINITE, Carry, Runner
from jaxrl_sys.runtime.waiting import DoneClock, fetch, in_thread, wait_ready


@dataclasses.dataclass
class ChunkSummary:
    """Host-side digest of one chunk's metrics, over all seeds."""

    chunk: int
    iterations: int
    returns: np.ndarray  # [seeds] mean return of episodes finished in the chunk (NaN if none)
    lengths: np.ndarray  # [seeds]
    scalars: dict[str, float]  # other metrics, averaged over seeds and iterations
    eval_returns: Optional[np.ndarray] = None  # [seeds] greedy evaluation at the chunk's end
    state_finite: Optional[np.ndarray] = None  # [seeds] every float in the agent state finite
    final_values: dict = dataclasses.field(default_factory=dict)  # metric -> [seeds], last iteration
    seconds: Optional[float] = None  # the chunk's own time, from its start to its end
    done_at: Optional[float] = None  # time.perf_counter() when the chunk ended

    @property
    def mean_return(self) -> float:
        finite = self.returns[np.isfinite(self.returns)]
        return float(finite.mean()) if finite.size else float("nan")


EPISODE_KEYS = ("episode_return_sum", "episode_length_sum", "episode_count")


class NonFiniteError(RuntimeError):
    """Training produced non-finite parameters or metrics; the message names chunk and metric."""


def check_finite(summary: ChunkSummary) -> None:
    """Raise `NonFiniteError` if the agent state went non-finite or a metric is infinite.

    NaN metrics alone are not an error: agents report NaN for iterations that did not learn
    (e.g. before a replay warm-up ends).
    """
    bad_state = summary.state_finite is not None and not bool(np.all(summary.state_finite))
    infinite = [k for k, v in summary.final_values.items() if np.isinf(v).any()]
    if not bad_state and not infinite:
        return
    shown = [
        f"{k}={float(np.asarray(v).reshape(-1)[0]):g}"
        for k, v in sorted(summary.final_values.items()) if not np.isfinite(v).all()
    ]
    what = "parameters or optimiser state" if bad_state else "metrics"
    detail = f" ({', '.join(shown)})" if shown else ""
    raise NonFiniteError(f"non-finite {what} in chunk {summary.chunk}{detail}")


def summarize(chunk: int, iterations: int, metrics: dict) -> ChunkSummary:
    """Turn [seeds, K] metric arrays into per-seed episode means and scalar averages."""
    metrics = dict(fetch(metrics))
    state_finite = metrics.pop(STATE_FINITE, None)
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
    final_values = {
        k: np.asarray(v)[:, -1] for k, v in metrics.items()
        if k not in EPISODE_KEYS and np.ndim(v) == 2
    }
    return ChunkSummary(chunk, iterations, returns, lengths, scalars, eval_returns,
                        None if state_finite is None else np.asarray(state_finite), final_values)


@dataclasses.dataclass(frozen=True)
class FinalReturns:
    """Returns that stand in for the last chunk's where a seed finished no episode in it
    (episodes longer than a chunk): what they are says the summary line."""

    returns: np.ndarray  # [seeds]
    what: str  # e.g. "greedy, 8 episodes/seed after training"


@dataclasses.dataclass
class TrainResult:
    carry: Carry
    history: list[ChunkSummary]
    compile_seconds: float
    train_seconds: float
    # where the host loop's threads spent their time (seconds by activity); empty on device
    pipeline_seconds: dict = dataclasses.field(default_factory=dict)
    final_returns: Optional[FinalReturns] = None  # see FinalReturns; None when not needed

    @property
    def last_chunk_incomplete(self) -> bool:
        """Whether some seed finished no episode in the last chunk (its return is NaN)."""
        return bool(self.history) and not np.isfinite(self.history[-1].returns).all()


def running_returns(env_state: PyTree) -> Optional[np.ndarray]:
    """Mean return so far of the episodes in progress, per seed [seeds], read from the
    episode statistics (`episode_return` [seeds, envs]) in a carry's env state; None if the
    env state keeps none."""
    def is_stats(node: Any) -> bool:
        return hasattr(node, "episode_return") and hasattr(node, "episode_length")

    found = [n for n in jax.tree.leaves(env_state, is_leaf=is_stats) if is_stats(n)]
    if not found:
        return None
    returns = np.asarray(fetch(found[0].episode_return), np.float64)
    return returns.reshape(returns.shape[0], -1).mean(axis=1)


def train(
    runner: Runner,
    seeds: np.ndarray,
    num_chunks: int,
    on_chunk: Optional[Callable[[ChunkSummary, float], bool]] = None,
    *,
    carry: Optional[Carry] = None,
    start_chunk: int = 0,
    checkpoint_every: int = 0,
    on_checkpoint: Optional[Callable[[int, Carry], None]] = None,
    check: Callable[[ChunkSummary], None] = check_finite,
    adapt: Optional[Callable[[int, Carry], Carry]] = None,
    adapt_every: int = 0,
    run_ahead: bool = True,
) -> TrainResult:
    """Run chunks `start_chunk .. num_chunks-1` for all `seeds`, from `carry` if given (a
    restored run) or a fresh `runner.init(seeds)`.

    `on_chunk(summary, train_seconds_so_far)` is called for every chunk in order, with the sum
    of this call's chunk `seconds` so far (training only: no compilation, no checkpoints, no
    chunks run before a resume); returning True stops training early.
    `on_checkpoint(chunk, carry)` is called after every `checkpoint_every`-th chunk and after
    the last one, once that chunk has passed the non-finite check (`check`: `NonFiniteError`
    stops the run before a bad state is saved; a sweep, whose diverging settings are results,
    passes one that lets them go on).
    `adapt(chunk, carry) -> carry` (population training) runs after every `adapt_every`-th
    chunk but the last, once that chunk's `on_chunk` has run, and before its checkpoint.
    Chunk c+1 is dispatched before chunk c's metrics are fetched, except where a checkpoint
    or an adaptation is due, or `run_ahead` is False (a caller that stops on a chunk's
    result, such as a learning test stopping at its threshold, then trains no chunk past it).
    Compilation is done ahead of time and timed separately. Each summary's `seconds` is its
    chunk's own time: from the later of its dispatch and the previous chunk's end to its own
    end, so a checkpoint between chunks is in neither.
    """
    start = time.perf_counter()
    carry = in_thread(lambda: runner.init(seeds)) if carry is None else carry
    run_chunk = in_thread(lambda: runner.run_chunk.lower(carry).compile())
    wait_ready(carry)
    compile_seconds = time.perf_counter() - start

    history: list[ChunkSummary] = []
    train_start = time.perf_counter()
    last_end = train_start  # when the previous chunk ended
    trained = 0.0  # the chunks' own seconds so far

    def handle(chunk: int, metrics: dict, dispatched: float, clock: DoneClock) -> bool:
        nonlocal last_end, trained
        summary = summarize(chunk, runner.iters_per_chunk, metrics)
        end = clock.done_at()
        summary.seconds, summary.done_at = end - max(dispatched, last_end), end
        last_end = end
        trained += summary.seconds
        check(summary)
        history.append(summary)
        return on_chunk is not None and on_chunk(summary, trained)

    pending = None
    stop = False
    for chunk in range(start_chunk, num_chunks):
        dispatched = time.perf_counter()
        carry, metrics = run_chunk(carry)
        clock = DoneClock(metrics)
        if pending is not None:
            stop = handle(*pending)
        pending = (chunk, metrics, dispatched, clock)
        due = on_checkpoint is not None and (
            (checkpoint_every > 0 and (chunk + 1) % checkpoint_every == 0)
            or chunk == num_chunks - 1 or stop
        )
        adapting = (adapt is not None and adapt_every > 0 and (chunk + 1) % adapt_every == 0
                    and chunk < num_chunks - 1)
        if due or stop or adapting or chunk == num_chunks - 1 or not run_ahead:
            stop = handle(*pending) or stop
            pending = None
            if adapting and not stop:
                carry = adapt(chunk, carry)
            if on_checkpoint is not None and due:
                on_checkpoint(chunk, carry)
            if stop:
                break
    wait_ready(carry)
    return TrainResult(carry, history, compile_seconds, time.perf_counter() - train_start)
