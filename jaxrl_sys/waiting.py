"""Waiting on the device and the compiler so that Ctrl-C still gets through.

A thread blocked inside XLA (fetching a chunk's metrics, compiling) runs no Python, so
SIGINT would wait until the chunk or the compilation ends, minutes on a CPU. These helpers
wait in short sleeps instead, where Python raises KeyboardInterrupt at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, TypeVar

import jax

from jaxrl_sys.types import PyTree

T = TypeVar("T")
_POLL_SECONDS = 0.02


def wait_ready(tree: PyTree) -> PyTree:
    """`tree` once every array in it is computed (interruptible `block_until_ready`)."""
    for leaf in jax.tree.leaves(tree):
        is_ready = getattr(leaf, "is_ready", None)
        while is_ready is not None and not is_ready():
            time.sleep(_POLL_SECONDS)
    return tree


def fetch(tree: PyTree) -> Any:
    """`jax.device_get(tree)`, waiting interruptibly for it to be computed first."""
    return jax.device_get(wait_ready(tree))


def in_thread(fn: Callable[[], T]) -> T:
    """`fn()` run in a daemon thread while this one waits interruptibly (for compilation:
    on Ctrl-C the process leaves without waiting for the compiler)."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as error:  # handed to the waiting thread
            result["error"] = error

    thread = threading.Thread(target=target, name="jaxrl-compile", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(_POLL_SECONDS * 5)
    if "error" in result:
        raise result["error"]
    return result["value"]
