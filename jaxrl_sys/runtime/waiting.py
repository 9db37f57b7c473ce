"""Waiting on the device and the compiler so that Ctrl-C still gets through.

A thread blocked inside XLA (fetching a chunk's metrics, compiling) runs no Python, so
SIGINT would wait until the chunk or the compilation ends, minutes on a CPU. These helpers
wait in short sleeps instead, where Python raises KeyboardInterrupt at once.

Python can also lose a KeyboardInterrupt: one raised inside a garbage-collection callback or
a `__del__` (JAX has both) is printed as "Exception ignored" and dropped, and the run goes
on. `catch_interrupts()` raises such a one again at once, in the main thread's next line,
and records every SIGINT, so that the waits here raise KeyboardInterrupt for a recorded one
too. Importing this module imports no JAX, so scripts install it first.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")
_POLL_SECONDS = 0.02  # the longest sleep between polls: how soon Ctrl-C is seen
_FIRST_POLL_SECONDS = 0.0005  # the first: a chunk of a few milliseconds (a GPU's) is not held
_interrupted = threading.Event()


def catch_interrupts() -> None:
    """From now on SIGINT raises KeyboardInterrupt as usual and is also recorded, so that the
    next wait raises it again if it was lost; one that Python drops as unraisable is raised
    again at once (main thread only; for scripts)."""

    def on_sigint(signum: int, frame: Any) -> None:
        _interrupted.set()
        raise KeyboardInterrupt

    previous_hook = sys.unraisablehook

    def on_unraisable(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # raised again from another thread, once this hook has returned: the main thread
            # then runs on_sigint in its own code, where the exception propagates
            threading.Timer(_POLL_SECONDS, _thread.interrupt_main, (signal.SIGINT,)).start()
            return
        previous_hook(unraisable)

    signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = on_unraisable


def was_interrupted() -> bool:
    """Whether a SIGINT was recorded (see `catch_interrupts`)."""
    return _interrupted.is_set()


def check_interrupt() -> None:
    """Raise KeyboardInterrupt if a SIGINT was recorded (see `catch_interrupts`)."""
    if _interrupted.is_set():
        raise KeyboardInterrupt


def wait_ready(tree: Any) -> Any:
    """`tree` once every array in it is computed (interruptible `block_until_ready`)."""
    import jax  # lazy: importing this module imports no JAX (see above)

    pause = _FIRST_POLL_SECONDS
    for leaf in jax.tree.leaves(tree):
        is_ready = getattr(leaf, "is_ready", None)
        while is_ready is not None and not is_ready():
            check_interrupt()
            time.sleep(pause)
            pause = min(2 * pause, _POLL_SECONDS)  # doubling: a long wait costs no CPU
    check_interrupt()
    return tree


def fetch(tree: Any) -> Any:
    """`jax.device_get(tree)`, waiting interruptibly for it to be computed first."""
    import jax  # lazy: importing this module imports no JAX (see above)

    return jax.device_get(wait_ready(tree))


class DoneClock:
    """When a dispatched computation finished: a daemon thread blocks on its outputs and stamps
    `time.perf_counter()` as they become ready, whatever the caller's thread is doing then (a
    checkpoint, logging, or a dispatch that blocks until earlier work is done)."""

    def __init__(self, tree: Any) -> None:
        self._done = threading.Event()
        self._at = 0.0
        threading.Thread(target=self._stamp, args=(tree,), name="jaxrl-done-clock",
                         daemon=True).start()

    def _stamp(self, tree: Any) -> None:
        import jax  # lazy: importing this module imports no JAX (see above)

        try:
            jax.block_until_ready(tree)
        except Exception:  # a failed computation: its error surfaces where the caller fetches
            pass
        self._at = time.perf_counter()
        self._done.set()

    def done_at(self) -> float:
        """The `time.perf_counter()` at which the outputs were ready (waits interruptibly)."""
        while not self._done.wait(_POLL_SECONDS):
            check_interrupt()
        return self._at


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
        check_interrupt()
        thread.join(_POLL_SECONDS * 5)
    check_interrupt()
    if "error" in result:
        raise result["error"]
    return result["value"]
