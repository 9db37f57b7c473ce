"""What the metrics endpoint reports: requests by route and status, batch sizes, latency."""

from __future__ import annotations

import collections
import time
from typing import Any

import numpy as np


class ServerStats:
    """Counters kept by the server as it answers (the last `window` act latencies kept)."""

    def __init__(self, window: int = 10_000):
        self.started = time.monotonic()
        self.requests: collections.Counter = collections.Counter()
        self.batches = 0
        self.batched_actions = 0
        self.largest_batch = 0
        self.act_latency = collections.deque(maxlen=window)

    def request(self, route: str, status: int) -> None:
        """One answered request."""
        self.requests[f"{route} {status}"] += 1

    def batch(self, size: int) -> None:
        """One device call on `size` requests."""
        self.batches += 1
        self.batched_actions += size
        self.largest_batch = max(self.largest_batch, size)

    def act_done(self, seconds: float) -> None:
        """One act request's time from arrival to answer."""
        self.act_latency.append(seconds)

    def snapshot(self) -> dict[str, Any]:
        """The counters as JSON-ready data."""
        latency = np.asarray(self.act_latency) * 1e3
        percentiles = ({f"p{q}": float(np.percentile(latency, q)) for q in (50, 90, 99)}
                       if latency.size else {})
        return {
            "uptime_s": time.monotonic() - self.started,
            "requests": dict(sorted(self.requests.items())),
            "batches": self.batches,
            "actions": self.batched_actions,
            "mean_batch": self.batched_actions / self.batches if self.batches else 0.0,
            "largest_batch": self.largest_batch,
            "act_latency_ms": percentiles,
        }
