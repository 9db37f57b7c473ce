"""Timing for benchmarks/bench*.py: medians of repeated calls, compilation left out."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of `fn()` (which must block until its result is ready) over `repeats`
    calls after one warm-up call (compilation and first run)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
