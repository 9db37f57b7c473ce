"""Checkpoints: a run killed with SIGKILL and resumed ends exactly where an uninterrupted run
does; missing or corrupt checkpoints are one-line errors; the non-finite guard keeps the last
good checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxrl_sys.runtime.checkpoint import Checkpointer

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "scripts" / "train.py"


# the scripts see this process's 8 CPU devices: a program compiled in either is then the
# same compilation-cache entry, and a run here loads what a script compiled (and vice versa)
SCRIPT_ENV = {**os.environ, "JAX_NUM_CPU_DEVICES": str(jax.device_count())}


def train_command(*args: str) -> list[str]:
    return [sys.executable, str(TRAIN), "--no-progress", *args]


def run_train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(train_command(*args), capture_output=True, text=True, timeout=600,
                          env=SCRIPT_ENV)


def train_here(capsys, *args: str) -> tuple[int, str]:
    """train.py's `main` (what the script runs) in this process: (exit code, stderr)."""
    from jaxrl_sys.commands import train as train_script

    capsys.readouterr()
    code = train_script.main(["--no-progress", *args])
    return code, capsys.readouterr().err


def only_run_dir(root: Path) -> Path:
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    return run_dir


def saved_state(run_dir: Path) -> dict:
    checkpointer = Checkpointer(run_dir, create=False)
    try:
        return checkpointer.latest_chunk(), checkpointer.read_raw()
    finally:
        checkpointer.close()


CHUNKS = 5  # killed after the first finished checkpoint: chunks 1-3 are the kill's margin


@pytest.mark.parametrize("agent, steps, extra", [
    ("ppo", CHUNKS * 1024, []), ("dqn", CHUNKS * 512, []),
    ("ppo", CHUNKS * 1024, ["--env", "MemoryChain-bsuite", "--set", "memory=gru"]),  # memory
    ("ars", CHUNKS * 2 * 8 * 20, ["--set", "population=8", "--set", "rollout_steps=20"]),
    ("qmix", CHUNKS * 512, ["--env", "jaxmarl:switch_riddle",  # compiles faster than MPE
                            "--set", "memory=gru", "--set", "burn_in=2", "--set", "seq_length=4",
                            "--set", "num_envs=16", "--set", "rollout_steps=32",
                            "--set", "learning_starts=1024", "--set", "hidden=16",
                            "--set", "batch_size=16"]),  # replayed team sequences
    ("pqn", CHUNKS * 1024, []),
    ("maddpg", CHUNKS * 512, ["--set", "num_envs=8", "--set", "rollout_steps=8",
                              "--set", "batch_size=64", "--set", "buffer_size=1024",
                              "--set", "learning_starts=512", "--set", "hidden=16"]),
], ids=["ppo", "dqn", "ppo-gru", "ars", "qmix-gru", "pqn", "maddpg"])
@pytest.mark.slow
def test_killed_run_resumes_exactly(tmp_path, capsys, agent, steps, extra):
    """Killed with SIGKILL and resumed in a process of its own, the run ends where the same
    run uninterrupted does. That one runs in this process first, and the two processes load
    the programs it compiled: one compilation and two process starts per case."""
    common = ["--agent", agent, "--total-steps", str(steps), "--chunks", str(CHUNKS),
              "--checkpoint-every", "1", "--seed", "3", "--eval-episodes", "0", *extra]
    code, err = train_here(capsys, *common, "--run-root", str(tmp_path / "full"))
    assert code == 0, err[-2000:]

    killed_root = tmp_path / "killed"
    proc = subprocess.Popen(train_command(*common, "--run-root", str(killed_root)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=SCRIPT_ENV)
    deadline = time.monotonic() + 300  # kill once a finished (renamed, not -tmp) one exists
    try:
        while not [p for p in killed_root.glob("*/checkpoints/*") if p.name.isdigit()]:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)  # when the wait fails too: no process left running
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    run_dir = only_run_dir(killed_root)
    killed_at, _ = saved_state(run_dir)
    assert killed_at < CHUNKS - 1, "the run ended before it was killed; nothing was resumed"

    resumed = run_train("--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming {run_dir} after chunk {killed_at}" in resumed.stderr

    chunk_full, state_full = saved_state(only_run_dir(tmp_path / "full"))
    chunk_resumed, state_resumed = saved_state(run_dir)
    assert chunk_full == chunk_resumed == CHUNKS - 1
    jax.tree.map(np.testing.assert_array_equal, state_full, state_resumed)

    # the resumed process's first steps/s counts its own training only (not the steps before
    # the resume, not compilation): its first chunk's steps over the training seconds it
    # reports, which are that chunk's own
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    chunk_steps = steps // CHUNKS
    first = [r for r in records if r["env_steps"] == (killed_at + 2) * chunk_steps][-1]
    ratio = first["steps_per_second"] * first["train_seconds"] / chunk_steps
    assert ratio == pytest.approx(1.0, rel=1e-6), first


def test_missing_run_directory_is_one_line_exit_2(tmp_path):
    result = run_train("--resume", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: no run directory at {tmp_path / 'nope'}"


def test_corrupt_checkpoint_is_one_line_exit_2(tmp_path):
    first = run_train("--total-steps", "4096", "--chunks", "2", "--run-root", str(tmp_path))
    assert first.returncode == 0, first.stderr[-2000:]
    run_dir = only_run_dir(tmp_path)
    for path in (run_dir / "checkpoints").rglob("*"):
        if path.is_file() and "state" in path.parts:
            path.write_bytes(b"\0" * 16)
    result = run_train("--resume", str(run_dir))
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: cannot restore checkpoint"), lines
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_divergence_stops_with_a_resumable_last_good_checkpoint(tmp_path, capsys):
    """DQN with an absurd learning rate: finite until learning starts (chunk 0 is saved),
    then the parameters blow up; the run stops naming the chunk and the metrics. It runs in
    this process (train.py's `main`); the resume is a process of its own."""
    args = ["--agent", "dqn", "--total-steps", "8192", "--chunks", "8", "--checkpoint-every", "1",
            "--eval-episodes", "0", "--set", "learning_rate=1e30", "--set", "learning_starts=2048"]
    code, err = train_here(capsys, *args, "--run-root", str(tmp_path))
    assert code == 1, err[-2000:]
    last = err.strip().splitlines()[-1]
    run_dir = only_run_dir(tmp_path)
    assert last.startswith("error: non-finite parameters or optimiser state in chunk 1 (loss="), last
    assert last.endswith(f"last good checkpoint: chunk 0 (resume with --resume {run_dir})"), last
    chunk, _ = saved_state(run_dir)
    assert chunk == 0

    resumed = run_train("--resume", str(run_dir))
    assert f"resuming {run_dir} after chunk 0" in resumed.stderr
    assert resumed.returncode == 1  # the same config diverges again, from the restored state


def test_state_of_another_layout_is_named_as_such(tmp_path):
    """A checkpoint whose state tree differs from what this version builds (an agent whose
    optimiser state changed shape) is refused with a message that says so."""
    from jaxrl_sys.runtime.checkpoint import CheckpointError

    saved = {"opt_state": {"mu": np.zeros(3, np.float32)}}
    checkpointer = Checkpointer(tmp_path)
    checkpointer.save(0, saved, {})
    checkpointer.close()
    checkpointer = Checkpointer(tmp_path, create=False)
    try:
        with pytest.raises(CheckpointError, match="laid out otherwise than this version"):
            checkpointer.restore({"opt_state": np.zeros(3, np.float32)})
    finally:
        checkpointer.close()
