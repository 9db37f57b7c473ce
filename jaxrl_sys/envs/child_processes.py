"""Ending the worker processes that a vector env started but never handed over.

If Ctrl-C (or an error) reaches `AsyncVectorEnv.__init__` while it starts its workers, the
constructor never returns, so no one holds the workers already started, or the one being
started (spawned, not yet registered with multiprocessing). Under a heavy load such a child
spends tens of seconds importing before it finds its parent gone. `ended_on_failure` ends them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Iterator

_GRACE_SECONDS = 5.0


def child_pids(include_zombies: bool = True) -> set[int]:
    """Pids of this process's children, exited but unreaped ones too unless told otherwise
    (read from /proc; multiprocessing's own list of started children where there is none)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return {p.pid for p in multiprocessing.active_children() if p.pid is not None}
    me, found = os.getpid(), set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after it
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me and (include_zombies or fields[0] != "Z"):
            found.add(int(entry.name))
    return found


def resource_tracker_pid() -> int | None:
    """The pid of multiprocessing's resource tracker if this process started one."""
    from multiprocessing import resource_tracker

    return getattr(resource_tracker._resource_tracker, "_pid", None)


def end_processes(pids: set[int]) -> None:
    """Terminate the child processes `pids` and reap them (SIGKILL after a grace period)."""
    registered = {p.pid: p for p in multiprocessing.active_children()}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_SECONDS
    for pid in pids:
        if pid in registered:  # multiprocessing reaps its own: keep its bookkeeping right
            process = registered[pid]
            process.join(timeout=max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(timeout=_GRACE_SECONDS)
            continue
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    time.sleep(0.02)
                    continue
            break
        else:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


@contextlib.contextmanager
def ended_on_failure() -> Iterator[None]:
    """On any exception (KeyboardInterrupt included) out of the block, end the child processes
    the block started, except multiprocessing's resource tracker (shared by the process, it
    frees shared memory when its users are gone), then re-raise."""
    before = child_pids()
    try:
        yield
    except BaseException:
        end_processes(child_pids() - before - {resource_tracker_pid()})
        raise


@contextlib.contextmanager
def sigint_kept_from_children() -> Iterator[None]:
    """Children started in the block begin with SIGINT blocked; this process still gets it.

    A spawned child inherits its starting thread's signal mask across exec, so Ctrl-C cannot
    reach it while it imports, before its own code can ignore SIGINT (its traceback would land
    in the middle of the run's last line). A SIGINT sent meanwhile goes to one of this
    process's other threads, or waits until the block ends: it is never lost.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
