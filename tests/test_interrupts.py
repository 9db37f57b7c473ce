"""Ctrl-C at random moments of a run (start-up, compilation, training, checkpointing) while
every core is busy: the run exits within 10 s with code 130, leaves no worker process, and
what it saved resumes.

The suite interrupts each loop $JAXRL_INTERRUPT_SOAK times (default 1); the soak reported in
issue 15 ran 20 per loop.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from jaxrl_sys.runtime.checkpoint import Checkpointer
from processes import marked_processes
from jaxrl_sys.runtime.run_spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, str(ROOT / "scripts" / "train.py"), "--no-progress",
         "--checkpoint-every", "1"]
TRIALS = int(os.environ.get("JAXRL_INTERRUPT_SOAK", "1"))
EXIT_SECONDS = 10.0
LOOPS = {
    "device": ["--agent", "dqn", "--env", "CartPole-v1", "--total-steps", "5000000",
               "--chunks", "2000", "--eval-episodes", "0"],
    "host": ["--agent", "ppo", "--env", "gymnasium:CartPole-v1", "--set", "num_envs=2",
             "--total-steps", "5000000", "--chunks", "5000"],
}


@pytest.fixture
def busy_cpu():
    """Every core spinning in another process for the test's duration."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 2)]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def _start(argv: list[str], marker: str) -> subprocess.Popen:
    """The run in a session of its own (Ctrl-C goes to its process group), with SIGINT's
    default disposition: a parent that ignores SIGINT would hand the ignore down."""
    previous = signal.getsignal(signal.SIGINT)
    if previous == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, env={**os.environ, marker: "1"}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    finally:
        if previous == signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)


def _interrupt(proc: subprocess.Popen, marker: str) -> tuple[float, str]:
    """SIGINT to the run's process group; (seconds until every marked process was gone,
    stderr)."""
    start = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    while marked_processes(marker) and time.monotonic() - start < 30:
        time.sleep(0.05)
    return time.monotonic() - start, stderr


def _wait_for(proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.slow
def test_ctrl_c_at_random_moments_exits_fast_and_leaves_a_resumable_run(tmp_path, busy_cpu,
                                                                        loop):
    moments = random.Random(loop)  # the same moments every time
    for trial in range(TRIALS):
        root = tmp_path / str(trial)
        marker = f"JAXRL_INTERRUPT_TEST_{uuid.uuid4().hex}"
        proc = _start([*TRAIN, *LOOPS[loop], "--run-root", str(root)], marker)
        moment = moments.uniform(0.5, 40.0)
        _wait_for(proc, moment)
        assert proc.poll() is None, f"the run ended before {moment:.1f} s: {proc.stderr.read()}"
        seconds, stderr = _interrupt(proc, marker)
        where = f"{loop} run interrupted {moment:.1f} s in"
        assert proc.returncode == 130, f"{where}: exit {proc.returncode}: {stderr[-2000:]}"
        # the run's own last word; worker processes that Ctrl-C reached while they were
        # still importing may print their KeyboardInterrupt after it
        assert "interrupted" in stderr.splitlines(), f"{where}: {stderr[-2000:]}"
        assert seconds <= EXIT_SECONDS, f"{where}: took {seconds:.1f} s to exit"
        assert not marked_processes(marker), f"{where}: processes left behind"
        runs = list(root.glob("*")) if root.is_dir() else []
        if not runs:
            continue  # interrupted before the run directory existed: nothing to resume
        (run_dir,) = runs
        load_spec(run_dir)  # run.json is whole
        saved = None
        if (run_dir / "checkpoints").is_dir():  # absent if stopped before the session began
            checkpointer = Checkpointer(run_dir, create=False)
            try:
                saved = checkpointer.latest_chunk()
            finally:
                checkpointer.close()
        # resume it (from its checkpoint, or from the start if it had none) and stop it again
        # once it has restored
        marker = f"JAXRL_INTERRUPT_TEST_{uuid.uuid4().hex}"
        proc = _start([*TRAIN[:2], "--resume", str(run_dir), "--no-progress"], marker)
        expected = (f"resuming {run_dir} after chunk {saved}" if saved is not None
                    else f"no checkpoint in {run_dir} yet")
        lines: list[str] = []
        deadline = time.monotonic() + 240
        while not any(expected in line for line in lines):
            assert proc.poll() is None and time.monotonic() < deadline, \
                f"{where}: resume failed: {''.join(lines)}{proc.stderr.read()}"
            lines.append(proc.stderr.readline())
        _interrupt(proc, marker)


class _DropsInterrupts:
    """An object whose finaliser raises KeyboardInterrupt, as a Ctrl-C landing in JAX's gc
    callback does: Python prints "Exception ignored" and drops it."""

    def __del__(self) -> None:
        raise KeyboardInterrupt


@pytest.fixture
def interrupts_caught():
    """`waiting.catch_interrupts()` for one test, undone afterwards."""
    from jaxrl_sys.runtime import waiting

    previous = signal.getsignal(signal.SIGINT), sys.unraisablehook
    waiting.catch_interrupts()
    yield
    signal.signal(signal.SIGINT, previous[0])
    sys.unraisablehook = previous[1]
    waiting._interrupted.clear()


def test_a_ctrl_c_that_python_drops_is_raised_again(interrupts_caught):
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        dropper = _DropsInterrupts()
        del dropper  # the KeyboardInterrupt is unraisable here ...
        while time.monotonic() - start < 10:  # ... and raised again in this loop
            pass
    assert time.monotonic() - start < 2


def test_an_error_raised_by_a_ctrl_c_inside_an_extension_is_the_interrupt(capsys):
    """tensorstore's import turns a Ctrl-C into ImportError (seen 4.1 s into a host-loop run):
    after a recorded SIGINT any error is exit code 130; without one it stays an error."""
    from jaxrl_sys.runtime import cli, waiting

    def body() -> int:
        raise ImportError("initialization failed")

    with pytest.raises(ImportError):
        cli.guarded(body, (ValueError,))
    waiting._interrupted.set()
    try:
        assert cli.guarded(body, (ValueError,)) == 130
        assert cli.guarded(lambda: int("x"), (ValueError,)) == 130
    finally:
        waiting._interrupted.clear()
    assert cli.guarded(lambda: int("x"), (ValueError,)) == 2
    assert capsys.readouterr().err.splitlines()[-3:] == [
        "interrupted", "interrupted", "error: invalid literal for int() with base 10: 'x'"]
