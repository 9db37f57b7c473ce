"""Multi-host on one machine: 2 processes x 4 CPU devices joined by jax.distributed train PPO
to the same parameters as 1 process with 8 devices (this one: train.py's `main` here, where
the tests' 8 CPU devices are)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxrl_sys.runtime.checkpoint import Checkpointer

ROOT = Path(__file__).resolve().parent.parent
# two chunks of one PPO iteration each (32 envs x 32 steps): the carry crosses a chunk's end
ARGS = ["--agent", "ppo", "--total-steps", "2048", "--chunks", "2", "--devices", "8",
        "--eval-episodes", "0", "--no-progress"]
TRAIN = [sys.executable, str(ROOT / "scripts" / "train.py"), *ARGS]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def final_state(root: Path) -> dict:
    (run_dir,) = root.iterdir()
    checkpointer = Checkpointer(run_dir, create=False)
    try:
        assert checkpointer.latest_chunk() == 1
        return checkpointer.read_raw()
    finally:
        checkpointer.close()


@pytest.mark.slow
def test_two_processes_equal_one_process(tmp_path, capsys):
    port = free_port()
    start = time.perf_counter()
    workers = [
        subprocess.Popen(
            [*TRAIN, "--run-root", str(tmp_path / "multi"), "--coordinator", f"127.0.0.1:{port}",
             "--num-processes", "2", "--process-id", str(i)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    outputs = [w.communicate(timeout=600) for w in workers]
    seconds = time.perf_counter() - start
    for worker, (out, err) in zip(workers, outputs):
        assert worker.returncode == 0, err[-3000:]
    assert "in 2 processes" in outputs[0][1] and "done:" in outputs[0][0]
    assert "done:" not in outputs[1][0] and "run dir" not in outputs[1][1]  # process 0 reports
    print(f"2 processes x 4 devices: {seconds:.1f} s")

    from jaxrl_sys.commands import train as train_script

    assert jax.device_count() == 8
    capsys.readouterr()
    code = train_script.main([*ARGS, "--run-root", str(tmp_path / "single")])
    assert code == 0, capsys.readouterr().err[-3000:]

    multi, one = final_state(tmp_path / "multi"), final_state(tmp_path / "single")
    # gloo's cross-process all-reduce sums in another order than XLA's in-process one
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 multi["agent_state"], one["agent_state"])
    jax.tree.map(np.testing.assert_array_equal, multi["key"], one["key"])
    assert (tmp_path / "multi").joinpath(next((tmp_path / "multi").iterdir()).name,
                                         "metrics.jsonl").is_file()
