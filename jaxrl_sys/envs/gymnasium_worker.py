"""The body of each Gymnasium worker process: Gymnasium's own, with Ctrl-C left to the parent.

Ctrl-C in a terminal sends SIGINT to the whole process group. The run handles it and ends its
workers; a worker that also raised KeyboardInterrupt would only print its own traceback over
the run's "interrupted". This module imports nothing heavy (no JAX), so a spawned worker
starts in the time Gymnasium takes to import.
"""

from __future__ import annotations

import signal
from typing import Any


def worker(*args: Any) -> None:
    """Gymnasium's async worker (same arguments) with SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from gymnasium.vector.async_vector_env import _async_worker

    _async_worker(*args)
