"""Tests for the run logger: JSONL records, TensorBoard events, run directories, summaries."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys.runtime import metrics
from jaxrl_sys.runtime.metrics import RunLogger, format_rate, make_run_dir, read_jsonl


def test_log_writes_jsonl_records(tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = {"lr": 0.1, "sizes": [64, 64]}
    with RunLogger(run, total_steps=300, config=config, progress=False) as logger:
        logger.log(100, {"mean_return": 1.5, "loss": np.float32(0.25), "count": np.int64(3)})
        logger.log(200, {"mean_return": jnp.asarray(2.5), "loss": float("nan"), "grad": np.inf})
        logger.log(300, {"loss": jnp.float32(-0.5), "ok": np.bool_(True)})

    assert json.loads((run / "config.json").read_text()) == config
    records = read_jsonl(run / "metrics.jsonl")
    assert [r["env_steps"] for r in records] == [100, 200, 300]
    assert list(records[0])[:3] == ["env_steps", "wall_time", "steps_per_second"]
    assert records[0]["mean_return"] == 1.5 and records[0]["loss"] == 0.25
    assert records[0]["count"] == 3 and isinstance(records[0]["count"], int)
    assert records[1]["mean_return"] == 2.5
    assert records[1]["loss"] is None and records[1]["grad"] is None  # non-finite -> null
    assert records[2]["loss"] == -0.5 and records[2]["ok"] is True
    assert "mean_return" not in records[2]
    walls = [r["wall_time"] for r in records]
    assert all(w >= 0 for w in walls) and walls == sorted(walls)
    assert all(r["steps_per_second"] > 0 for r in records)
    # The file is strict JSON: no NaN/Infinity tokens.
    assert "NaN" not in (run / "metrics.jsonl").read_text()


def test_steps_per_second_is_measured_between_logs(tmp_path: Path) -> None:
    logger = RunLogger(tmp_path, total_steps=10_000, progress=False, tensorboard=False)
    time.sleep(0.05)
    logger.log(1000, {})
    time.sleep(0.05)
    logger.log(1500, {})
    logger.close()
    first, second = read_jsonl(tmp_path / "metrics.jsonl")
    # First log measures from logger start: 1000 steps in >= 0.05 s.
    assert 0 < first["steps_per_second"] <= 1000 / 0.05
    # Second measures only the 500 new steps since the first log.
    assert 0 < second["steps_per_second"] <= 500 / 0.05
    assert second["steps_per_second"] > 500 / 5.0  # sanity: not counting from start at 0


def test_reset_clock_excludes_compile_time(tmp_path: Path) -> None:
    logger = RunLogger(tmp_path, total_steps=2000, progress=False, tensorboard=False)
    time.sleep(0.3)  # "compilation"
    logger.log(1000, {})
    logger.reset_clock()
    logger.log(2000, {})
    summary = logger.close()
    first, second = read_jsonl(tmp_path / "metrics.jsonl")
    assert first["steps_per_second"] < 1000 / 0.3
    assert second["steps_per_second"] > 1000 / 0.3  # the sleep is not counted
    assert summary["steps_per_second"] > 1000 / 0.3
    assert summary["wall_time"] >= 0.3  # wall time still counts everything


def test_reset_clock_with_steps_for_resume(tmp_path: Path) -> None:
    logger = RunLogger(tmp_path, total_steps=2_000_000, progress=False, tensorboard=False)
    logger.reset_clock(1_000_000)
    time.sleep(0.05)
    logger.log(1_000_100, {})
    logger.close()
    (record,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert record["steps_per_second"] <= 100 / 0.05


def test_tensorboard_events_written(tmp_path: Path) -> None:
    with RunLogger(tmp_path, total_steps=10, progress=False) as logger:
        logger.log(5, {"mean_return": 1.0, "loss": 0.5, "entropy": float("nan")})
    events = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert len(events) == 1 and events[0].stat().st_size > 0
    tags = _read_scalar_tags(events[0])
    assert {"mean_return", "loss", "steps_per_second", "wall_time"} <= tags
    assert "entropy" not in tags  # nothing measured: no point (and no NaN warning)


def _read_scalar_tags(path: Path) -> set[str]:
    """Decode TFRecord framing and Event protos just enough to collect scalar tags."""
    from tensorboardX.proto import event_pb2

    tags: set[str] = set()
    data = path.read_bytes()
    offset = 0
    while offset + 12 <= len(data):
        length = int.from_bytes(data[offset:offset + 8], "little")
        payload = data[offset + 12:offset + 12 + length]
        offset += 12 + length + 4
        event = event_pb2.Event.FromString(payload)
        for value in event.summary.value:
            tags.add(value.tag)
    return tags


def test_no_tensorboard_when_disabled(tmp_path: Path) -> None:
    with RunLogger(tmp_path, total_steps=10, progress=False, tensorboard=False) as logger:
        logger.log(5, {"x": 1.0})
    assert not (tmp_path / "tb").exists()
    assert not (tmp_path / "config.json").exists()


def test_close_summary_and_idempotent(tmp_path: Path) -> None:
    logger = RunLogger(tmp_path, total_steps=100, progress=False)
    logger.log(50, {"mean_return": 3.0, "loss": float("nan")})
    logger.log(100, {"mean_return": 4.0})
    summary = logger.close()
    assert summary["env_steps"] == 100
    assert summary["metrics"] == {"mean_return": 4.0}
    assert summary["wall_time"] > 0 and summary["steps_per_second"] > 0
    assert logger.close()["env_steps"] == 100  # second close is harmless
    with pytest.raises(RuntimeError):
        logger.log(200, {})


def test_reserved_keys_cannot_be_overwritten(tmp_path: Path) -> None:
    with RunLogger(tmp_path, total_steps=10, progress=False, tensorboard=False) as logger:
        logger.log(7, {"env_steps": 999, "y": 2})
    (record,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert record["env_steps"] == 7 and record["y"] == 2


def test_non_scalar_metric_is_rejected(tmp_path: Path) -> None:
    with RunLogger(tmp_path, total_steps=10, progress=False, tensorboard=False) as logger:
        with pytest.raises(TypeError, match="'v'"):
            logger.log(1, {"v": np.zeros(3)})


def test_appends_to_existing_metrics(tmp_path: Path) -> None:
    for steps in (10, 20):
        with RunLogger(tmp_path, total_steps=20, progress=False, tensorboard=False) as logger:
            logger.log(steps, {})
    assert [r["env_steps"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [10, 20]


def test_progress_bar_postfix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunLogger(tmp_path, total_steps=1000, tensorboard=False) as logger:
        time.sleep(0.6)  # past tqdm's mininterval so this update is drawn
        logger.log(500, {"mean_return": 123.456})
        logger.log(1000, {"mean_return": float("nan")})
    err = capsys.readouterr().err
    assert "return=123.5" in err
    assert "/s" in err
    assert "return=nan" not in err
    assert "1k/1k" in err or "1.00k/1.00k" in err


def test_format_rate() -> None:
    assert format_rate(312_000) == "312k/s"
    assert format_rate(1_250_000) == "1.25M/s"
    assert format_rate(850) == "850/s"
    assert format_rate(3e9) == "3G/s"


def test_make_run_dir_unique(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_timestamp", lambda: "20240101-120000")
    dirs = [make_run_dir(tmp_path / "runs", "ppo", "gymnasium:LunarLander-v3") for _ in range(3)]
    assert [d.name for d in dirs] == [
        "ppo_gymnasium-LunarLander-v3_20240101-120000",
        "ppo_gymnasium-LunarLander-v3_20240101-120000-1",
        "ppo_gymnasium-LunarLander-v3_20240101-120000-2",
    ]
    assert all(d.is_dir() and d.parent == tmp_path / "runs" for d in dirs)


def test_make_run_dir_real_timestamp(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path, "dqn", "CartPole-v1")
    agent, env, stamp = path.name.split("_")
    assert (agent, env) == ("dqn", "CartPole-v1")
    time.strptime(stamp[:15], "%Y%m%d-%H%M%S")


def test_read_jsonl_skips_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": ')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    path.write_text('{"a": 1}\n{"a"\n{"a": 2}\n')
    with pytest.raises(ValueError, match=":2:"):
        read_jsonl(path)


def test_nan_metric_value_roundtrip_is_none(tmp_path: Path) -> None:
    with RunLogger(tmp_path, total_steps=1, progress=False, tensorboard=False) as logger:
        logger.log(1, {"x": jnp.float32(jnp.nan), "y": -math.inf})
    (record,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert record["x"] is None and record["y"] is None


# scripts/train.py's entry point with XLA:CPU's async dispatch set first (a flag, not an env var)
TRAIN_WITH_DISPATCH = """
import sys, jax
jax.config.update("jax_cpu_enable_async_dispatch", sys.argv[1] == "async")
from jaxrl_sys.commands.train import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("checkpoint_every, dispatch", [(1, "async"), (2, "inline")])
@pytest.mark.slow
def test_every_chunk_is_timed_from_its_dispatch_to_its_end(
        tmp_path: Path, checkpoint_every: int, dispatch: str) -> None:
    """A short PPO run on CartPole-v1 with checkpoints between chunks: every record's
    steps/s is within 3x of the run's median and wall_time strictly increases. Timed between
    log calls, a chunk whose dispatch ran it before returning (XLA:CPU without async
    dispatch, as here, `inline`) was logged right after its predecessor where a checkpoint
    was due: the same wall_time again, at tens of millions of steps/s."""
    done = subprocess.run(
        [sys.executable, "-c", TRAIN_WITH_DISPATCH, dispatch, "--agent", "ppo", "--env",
         "CartPole-v1", "--no-progress", "--total-steps", "262144", "--chunks", "8",
         "--checkpoint-every", str(checkpoint_every), "--run-root", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = tmp_path.iterdir()
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert len(records) == 8
    rates = [r["steps_per_second"] for r in records]
    median = statistics.median(rates)
    assert all(median / 3 <= rate <= 3 * median for rate in rates), rates
    walls = [r["wall_time"] for r in records]
    assert all(a < b for a, b in zip(walls, walls[1:])), walls
