"""What each chunk of a group's rows adds to the sweep's results (env steps, returns, seconds,
sweep.json saved, a progress line), and forgetting what a resumed run trains again."""

from __future__ import annotations

import sys
from typing import Callable, Sequence

import numpy as np

from jaxrl_sys.runtime.driver import ChunkSummary
from jaxrl_sys.runtime.sweeps.population import MemberHistory
from jaxrl_sys.runtime.sweeps.results import SettingResult, describe_setting, score


def forget_after(start_chunk: int, results: Sequence[SettingResult],
                 histories: Sequence[MemberHistory]) -> None:
    """Drop what was recorded after the checkpoint a run resumes from (trained again)."""
    for r in results:
        del r.env_steps[start_chunk:], r.returns[start_chunk:], r.seconds[start_chunk:]
    for h in histories:
        h.truncate(start_chunk)


def chunk_recorder(members: Sequence[int], seeds: Sequence[int], results: list[SettingResult],
                   steps_per_chunk: int, seconds_before: float, clock: dict,
                   save: Callable[[], None], progress: bool, label: str,
                   num_chunks: int) -> Callable:
    """The driver's `on_chunk` for the rows of `members`: each member's returns (greedy when
    evaluated) appended to its result, sweep.json saved, a progress line."""

    def on_chunk(summary: ChunkSummary, train_seconds: float) -> bool:
        values = summary.eval_returns if summary.eval_returns is not None else summary.returns
        values = np.asarray(values, float).reshape(len(members), len(seeds))
        finite = (np.ones(values.shape, bool) if summary.state_finite is None
                  else np.asarray(summary.state_finite).reshape(values.shape))
        clock["seconds"] = seconds_before + train_seconds
        for member, row, ok in zip(members, values, finite):
            r = results[member]
            r.env_steps.append((summary.chunk + 1) * steps_per_chunk)
            r.returns.append([float(v) for v in row])
            r.seconds.append(clock["seconds"])
            r.finite = r.finite and bool(ok.all())
        save()
        if progress:
            best = max((results[m] for m in members), key=score)
            print(f"{label} chunk {summary.chunk + 1}/{num_chunks}: best so far setting "
                  f"{best.index} ({describe_setting(best.values)}) return "
                  f"{float(np.mean(best.final)):.1f}", file=sys.stderr, flush=True)
        return False

    return on_chunk
