"""The run layer from Python: a RunSpec checked before anything is created, saved as run.json
and read back (older runs' args.json too), and a run in a few lines of a user's script."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import numpy as np
import pytest

from jaxrl_sys import agents
from jaxrl_sys import envs
from jaxrl_sys import RunSpec, UsageError, load_spec, resolve, run
from jaxrl_sys.runtime.checkpoint import CheckpointError
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.runtime.execution import PlacementError
from jaxrl_sys.runtime.run_spec import save_run_file


def test_a_users_script_trains_and_saves_its_spec(tmp_path):
    spec = RunSpec(agent="ppo", env="CartPole-v1", total_steps=2048, seeds=2, chunks=2,
                   run_root=str(tmp_path), progress=False, eval_episodes=0)
    outcome = run(spec, agents.load, envs)
    assert [s.chunk for s in outcome.history] == [0, 1]
    assert outcome.summary.startswith("done: 2,048 steps/seed x 2 seed(s)")
    assert load_spec(outcome.run_dir) == spec
    record = json.loads((outcome.run_dir / "run.json").read_text())
    assert record["env"] == "CartPole-v1" and record["seeds"] == [0, 1]
    assert record["config"]["total_steps"] == 2048


@pytest.mark.parametrize("spec, error, message", [
    (RunSpec(seeds=0), UsageError, "seeds must be >= 1, got 0"),
    (RunSpec(staleness=-1), UsageError, "staleness must be >= 0"),
    (RunSpec(step_timeout=0.0), UsageError, "step_timeout must be > 0"),
    (RunSpec(overrides=("lerning_rate=1",)), ConfigError, "did you mean: learning_rate"),
    (RunSpec(devices=3), PlacementError, "does not divide over 3 devices"),
    (RunSpec(env="gymnasium:CartPole-v1", seeds=2), UsageError, "run one seed through"),
    (RunSpec(agent="ppx"), agents.UnknownAgentError, "unknown agent"),
])
def test_bad_specs_are_refused_before_anything_is_created(tmp_path, spec, error, message):
    spec = dataclasses.replace(spec, run_root=str(tmp_path))
    with pytest.raises(error, match=re.escape(message)):
        run(spec, agents.load, envs)
    assert not any(tmp_path.iterdir())


def test_run_json_round_trips_and_old_args_json_still_loads(tmp_path):
    spec = RunSpec(agent="dqn", overrides=("learning_rate=1e-3", "env.max_steps=10"), seeds=3,
                   total_steps=5000, progress=False, save_replay=False)
    save_run_file(tmp_path, resolve(spec, agents.load, envs))
    assert load_spec(tmp_path) == spec

    old = tmp_path / "old"
    old.mkdir()
    flags = {"agent": "ppo", "env": None, "devices": 2, "seeds": 4, "seed": 1,
             "total_steps": None, "overrides": ["learning_rate=1e-3"], "chunks": 20,
             "eval_episodes": None, "target_return": None, "run_root": "runs",
             "no_progress": True, "checkpoint_every": 5, "keep_checkpoints": 3,
             "no_save_replay": True, "staleness": 1, "step_timeout": 60.0}
    (old / "args.json").write_text(json.dumps(flags))
    loaded = load_spec(old)
    assert (loaded.devices, loaded.seeds, loaded.seed) == (2, 4, 1)
    assert loaded.overrides == ("learning_rate=1e-3",)
    assert not loaded.progress and not loaded.save_replay


def test_a_saved_run_keeps_its_config_when_the_shipped_defaults_change(tmp_path):
    spec = RunSpec(agent="muzero", env="TicTacToe-v0", overrides=("learning_rate=1e-3",),
                   total_steps=5000, progress=False)
    save_run_file(tmp_path, resolve(spec, agents.load, envs))
    record = json.loads((tmp_path / "run.json").read_text())
    # as saved by an older version: other defaults then, a field renamed, one added since
    record["config"].update(hidden=[32, 32], support_bins=11)
    record["config"]["discount"] = record["config"].pop("gamma")
    del record["config"]["rule_heads"]
    (tmp_path / "run.json").write_text(json.dumps(record))

    config = resolve(load_spec(tmp_path), agents.load, envs, saved_run=tmp_path).config
    assert (config.hidden, config.support_bins, config.learning_rate) == ((32, 32), 11, 1e-3)
    assert config.total_steps == 5000 and config.gamma == 1.0
    assert config.rule_heads is False  # added since: the class default, not today's preset
    fresh = resolve(load_spec(tmp_path), agents.load, envs).config  # a new run: today's
    assert fresh.hidden != (32, 32) and fresh.rule_heads is True


def test_a_directory_that_is_not_a_run_is_one_line(tmp_path):
    with pytest.raises(CheckpointError, match="is not a resumable run"):
        load_spec(tmp_path)
    with pytest.raises(CheckpointError, match="no run directory"):
        load_spec(tmp_path / "missing")


@pytest.mark.slow
def test_a_run_stopped_before_its_first_checkpoint_resumes_from_the_start(tmp_path, capsys):
    spec = RunSpec(agent="ppo", total_steps=2048, chunks=2, run_root=str(tmp_path),
                   progress=False, eval_episodes=0)
    first = run(spec, agents.load, envs)
    shutil.rmtree(first.run_dir / "checkpoints")  # as if Ctrl-C came before it was made
    again = run(spec, agents.load, envs, resume=first.run_dir)
    assert "yet: starting it from the beginning" in capsys.readouterr().err
    assert [s.chunk for s in again.history] == [0, 1]
    np.testing.assert_array_equal(again.history[-1].returns, first.history[-1].returns)


AFTER_OWN_JAX_WORK = """
import sys
import jax.numpy as jnp
from jaxrl_sys import RunSpec, run

float(jnp.ones(3).sum())  # the caller's own JAX work starts the backend (one CPU device)
spec = RunSpec(agent="ppo", env="CartPole-v1", total_steps=1024, chunks=1, progress=False,
               eval_episodes=0, run_root=sys.argv[1], devices=int(sys.argv[2]))
try:
    outcome = run(spec)
except Exception as error:
    print(f"{type(error).__name__}: {error}")
else:
    print(outcome.summary)
"""


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.slow
def test_run_after_the_callers_own_jax_work_uses_the_devices_that_exist(tmp_path, devices):
    """One device is there: the run trains. Two are not: one line saying how to get them,
    and nothing created."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XLA_FLAGS": " ".join(
        flag for flag in os.environ.get("XLA_FLAGS", "").split()
        if "xla_force_host_platform_device_count" not in flag)}
    root = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-c", AFTER_OWN_JAX_WORK, str(root), str(devices)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    if devices == 1:
        assert last.startswith("done: 1,024 steps/seed x 1 seed(s)"), done.stdout + done.stderr
    else:
        assert last.startswith("PlacementError: devices=2, but JAX already started with 1 CPU"), last
        assert "before any JAX computation" in last and "jax_num_cpu_devices" in last
        assert "Traceback" not in done.stderr
        assert not root.exists() or not any(root.iterdir())


@pytest.mark.parametrize("max_steps, expected", [
    # bounded episodes: a greedy evaluation of the trained agent, whole episodes of 400 steps
    (400, "final mean return 400.0 [400.0, 400.0] (greedy, 8 episodes/seed after training: "
          "no training episode ended in the last chunk)"),
    # past the evaluation's bound: the return so far, 256 steps into every episode
    (100_000, "final mean return 256.0 [256.0, 256.0] (return so far of the episodes still "
              "running: no training episode ended in the last chunk)"),
])
@pytest.mark.slow
def test_episodes_longer_than_a_chunk_report_a_number_not_nan(tmp_path, max_steps, expected):
    """An env that never terminates (custom_env_example.Endless, reward 1 a step): 32 envs x
    128 steps per chunk end no episode of `max_steps` steps."""
    spec = RunSpec(agent="ppo", env="custom_env_example:make_endless",
                   overrides=(f"env.max_steps={max_steps}",), total_steps=8192, chunks=2,
                   seeds=2, run_root=str(tmp_path), progress=False)
    outcome = run(spec, agents.load, envs)
    assert np.isnan(outcome.history[-1].returns).all()
    assert expected in outcome.summary and "nan" not in outcome.summary


def test_without_a_stand_in_the_last_chunk_that_ended_episodes_is_reported():
    """The host loop's case: no evaluation, no env state to read."""
    from jaxrl_sys.runtime.driver import ChunkSummary, TrainResult
    from jaxrl_sys.runtime.session import final_returns

    def chunk(index, returns):
        return ChunkSummary(index, 1, np.array(returns), np.array(returns), {})

    history = [chunk(0, [5.0, 7.0]), chunk(1, [6.0, np.nan]), chunk(2, [np.nan, np.nan])]
    returns, note = final_returns(TrainResult(None, history, 0.0, 1.0))
    np.testing.assert_array_equal(returns, [6.0, 7.0])
    assert note == (" (of the last chunk in which episodes ended, chunk 2, 1: no training "
                    "episode ended in the last chunk)")
    returns, note = final_returns(TrainResult(None, history[:1], 0.0, 1.0))
    np.testing.assert_array_equal(returns, [5.0, 7.0])
    assert note == ""
