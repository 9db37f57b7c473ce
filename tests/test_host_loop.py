"""The host loop: Gymnasium envs in worker processes, acting and learning with the agents' own
functions. Learning, determinism, autoreset semantics, faults and clean shutdown."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxrl_sys import agents, envs
from jaxrl_sys.agents import ppo
from jaxrl_sys.envs.child_processes import child_pids, resource_tracker_pid
from jaxrl_sys.core.types import HostFns
from jaxrl_sys.runtime import host
from jaxrl_sys.runtime.host import actors
from jaxrl_sys.runtime.checkpoint import Checkpointer
from jaxrl_sys.runtime.host import HostLoopConfig, HostLoopError

TESTS = Path(__file__).resolve().parent
from jaxrl_sys.commands import train as train_script
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))  # workers import `host_envs` from here (spawn copies sys.path)

from processes import command_line, marked_processes  # noqa: E402


_CHILDREN_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _children_before_the_test():
    """Note this process's children as the test starts: under xdist a worker may hold one
    from another module's test, and each test here checks only what its own run started."""
    _CHILDREN_BEFORE.clear()
    _CHILDREN_BEFORE.update(child_pids(include_zombies=False))
    yield


def _children() -> dict[int, str]:
    """Live (non-zombie) processes started by this test process since the test began, other
    than the stdlib's resource tracker (one per process once `spawn` is used; it exits with
    us): pid to command line, so that a failure names what was left."""
    left = child_pids(include_zombies=False) - _CHILDREN_BEFORE - {resource_tracker_pid()}
    return {pid: command_line(pid) for pid in sorted(left)}


def _ppo(env_name: str, **overrides):
    env = envs.make_host(env_name)
    config = dataclasses.replace(ppo.default_config(env_name), **overrides)
    return env, config, ppo.host_fns(ppo.make(env, config, axis_name=None))


def _train(env, fns, config, staleness=1, **kwargs):
    return host.train(
        env, fns, seed=0, num_iterations=config.num_iterations, iters_per_chunk=5,
        config=HostLoopConfig(staleness=staleness, **kwargs),
    )


# ------------------------------------------------------------------------------------ learning


@pytest.mark.learning
@pytest.mark.two_codegens
@pytest.mark.slow
def test_ppo_learns_gymnasium_cartpole():
    """The default config (8 worker processes) within its 150k steps: training stops at the
    first chunk (20 iterations, 5120 steps) whose finished episodes average >= 475."""
    env, config, fns = _ppo("gymnasium:CartPole-v1")
    result = host.train(
        env, fns, seed=0, num_iterations=config.num_iterations, iters_per_chunk=20,
        on_chunk=lambda summary, seconds: summary.mean_return >= 475.0,
    )
    final = result.history[-1].mean_return
    steps = len(result.history) * 20 * config.steps_per_iteration
    assert final >= 475.0, f"mean return {final:.1f} after {steps} steps"
    assert not _children()


@pytest.mark.learning
@pytest.mark.slow
def test_a2c_learns_in_the_host_loop_with_staleness_as_a3c_does():
    """A2C's shipped defaults through the host loop with staleness 1, A3C's asynchrony (the
    workers act with parameters one update behind the learner's): training stops at the first
    chunk (20 iterations, 1,600 steps) whose finished episodes average 150 or more, 7 times a
    random policy's 22, within 150k steps."""
    env = envs.make_host("gymnasium:CartPole-v1")
    a2c = agents.load("a2c")
    config = dataclasses.replace(a2c.default_config("gymnasium:CartPole-v1"),
                                 total_steps=150_000)
    result = host.train(
        env, a2c.host_fns(a2c.make(env, config, axis_name=None)), seed=0,
        num_iterations=config.num_iterations, iters_per_chunk=20,
        config=HostLoopConfig(staleness=1),
        on_chunk=lambda summary, seconds: summary.mean_return >= 150.0,
    )
    final = result.history[-1].mean_return
    steps = len(result.history) * 20 * config.steps_per_iteration
    assert final >= 150.0, f"mean return {final:.1f} after {steps} steps"
    assert not _children()


@pytest.mark.parametrize("agent, env_name, steps", [
    ("dqn", "gymnasium:CartPole-v1", 2048),
    ("sac", "gymnasium:Pendulum-v1", 1600),
    ("ddpg", "gymnasium:Pendulum-v1", 1600),
])
@pytest.mark.slow
def test_off_policy_agents_run_end_to_end(tmp_path, agent, env_name, steps):
    """DQN, SAC and DDPG (Ape-X's per-env noise, its gymnasium entry) train through the CLI's
    host loop past their warm-up, with finite losses."""
    overrides = ["--set", "learning_starts=800"]
    code = train_script.main(["--agent", agent, "--env", env_name, "--total-steps", str(steps),
                 "--chunks", "4", "--no-progress", "--run-root", str(tmp_path), *overrides])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    loss_key = "loss" if agent == "dqn" else "critic_loss"
    assert rows[-1]["env_steps"] >= steps
    assert rows[-1][loss_key] is not None and np.isfinite(rows[-1][loss_key])
    assert rows[-1]["mean_return"] is not None
    assert not _children()


@pytest.mark.slow
def test_divergence_stops_the_cli_run_with_exit_1_before_saving_it(tmp_path, capsys):
    """The README's non-finite guard holds in the host loop too: chunk 0 (before learning)
    is saved, chunk 1 diverges, and the run stops naming it and the last good checkpoint."""
    code = train_script.main([
        "--agent", "dqn", "--env", "gymnasium:CartPole-v1", "--total-steps", "4096",
        "--chunks", "4", "--checkpoint-every", "1", "--no-progress", "--run-root", str(tmp_path),
        "--set", "learning_rate=1e30", "--set", "learning_starts=1536"])
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("error: non-finite parameters or optimiser state in chunk 1"), last
    assert "last good checkpoint: chunk 0" in last, last
    assert not _children()


# -------------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("staleness", [0, 2])
@pytest.mark.slow
def test_same_seed_same_run(staleness):
    env, config, fns = _ppo("gymnasium:CartPole-v1", num_envs=2, rollout_steps=64, total_steps=512)
    runs = [_train(env, fns, config, staleness=staleness) for _ in range(2)]
    first, second = (jax.device_get(r.carry["agent_state"].params) for r in runs)
    jax.tree.map(np.testing.assert_array_equal, first, second)
    assert runs[0].history[-1].returns.tolist() == runs[1].history[-1].returns.tolist()


# ---------------------------------------------------------------------------------- semantics


def test_rollouts_keep_episodes_apart():
    """SAME_STEP autoreset: no transition crosses an episode boundary; next_obs at an episode's
    end is its last observation; terminated vs truncated kept apart; episode statistics."""
    env = envs.make_host("gymnasium:host_envs:Counter-v0", terminate_at=4)
    steps, num_envs = 12, 2
    fns = HostFns(
        init=None, actor_params=None, learn=None, num_envs=num_envs, rollout_steps=steps,
        # env 0 always takes action 1 (terminates at count 4), env 1 action 0 (truncated at 5)
        act=lambda params, obs, keys, env_steps, env_ids: ((env_ids + 1) % 2, {}),
    )
    vector = env.make_vector(num_envs, "spawn")
    try:
        raw_obs, _ = vector.reset(seed=0)
        device = jax.devices()[0]
        store = actors.ParamStore(staleness=0)
        store.publish(0, {device: {}})
        actor = actors.Actor(0, env, vector, env.encode_obs(raw_obs), actors.act_fn(fns),
                             store, jax.random.PRNGKey(0), np.arange(num_envs, dtype=np.int32),
                             device, [(device, 0, num_envs)], range(1), steps, HostLoopConfig())
        actor.run()  # in this thread: one rollout
        assert actor.error is None
        [(_, rollout)], episodes = actor.rollouts.get_nowait()
    finally:
        vector.close()
    obs, next_obs = np.asarray(rollout.obs)[..., 0], np.asarray(rollout.next_obs)[..., 0]
    terminated, truncated = np.asarray(rollout.terminated), np.asarray(rollout.truncated)
    np.testing.assert_array_equal(next_obs, obs + 1)  # never the next episode's first obs
    np.testing.assert_array_equal(np.asarray(rollout.reward), obs + 1)
    # env 0 ends (terminated) at counts 4, 8, 12; env 1 ends (truncated) at counts 5, 10
    np.testing.assert_array_equal(np.flatnonzero(terminated[:, 0]), [3, 7, 11])
    np.testing.assert_array_equal(np.flatnonzero(truncated[:, 1]), [4, 9])
    assert not terminated[:, 1].any() and not truncated[:, 0].any()
    np.testing.assert_array_equal(obs[:, 0], [0, 1, 2, 3] * 3)
    np.testing.assert_array_equal(obs[:, 1], [0, 1, 2, 3, 4] * 2 + [0, 1])
    assert episodes["episode_count"] == 5
    assert episodes["episode_length_sum"] == 3 * 4 + 2 * 5
    assert episodes["episode_return_sum"] == 3 * (1 + 2 + 3 + 4) + 2 * (1 + 2 + 3 + 4 + 5)


def test_discrete_observations_are_one_hot_and_actions_offset():
    env = envs.make_host("gymnasium:FrozenLake-v1")
    assert env.spec.obs_shape == (16,)
    np.testing.assert_array_equal(env.encode_obs(np.array([0, 5])), np.eye(16)[[0, 5]])
    assert env.decode_actions(np.array([3])).tolist() == [3]


# ------------------------------------------------------------------------------------- faults


@pytest.mark.parametrize("how, expected", [
    ("exit", r"workers 0, 1 died \(exit codes 3, 3\)"),
    ("hang", r"a worker gave no step result within 3 s"),
])
def test_dead_or_hung_worker_stops_the_run(how, expected):
    env = envs.make_host("gymnasium:host_envs:FailingCartPole-v0", fail_at=20, how=how)
    config = dataclasses.replace(ppo.default_config("CartPole-v1"), num_envs=2, rollout_steps=16,
                                 total_steps=2048)
    fns = ppo.host_fns(ppo.make(env, config, axis_name=None))
    with pytest.raises(HostLoopError, match=f"gymnasium:host_envs:FailingCartPole-v0: {expected}"):
        _train(env, fns, config, step_timeout=3.0)
    assert not multiprocessing.active_children()
    assert not _children()


@pytest.mark.slow
def test_env_raising_at_step_k_ends_the_cli_run_without_orphans(tmp_path):
    marker = f"JAXRL_HOST_LOOP_TEST_{uuid.uuid4().hex}"
    env = {**os.environ, marker: "1", "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--agent", "ppo",
         "--env", "gymnasium:host_envs:FailingCartPole-v0", "--set", "env.fail_at=40",
         "--set", "num_envs=2", "--total-steps", "4096", "--no-progress",
         "--run-root", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last == ("error: env gymnasium:host_envs:FailingCartPole-v0: workers 0, 1 "
                    "raised RuntimeError: injected failure at step 40"), last
    assert not marked_processes(marker)


@pytest.mark.slow
def test_ctrl_c_reaps_the_workers(tmp_path):
    """SIGINT to the run's process group (what Ctrl-C in a terminal sends): exit 130, no
    worker left behind."""
    marker = f"JAXRL_HOST_LOOP_TEST_{uuid.uuid4().hex}"
    env = {**os.environ, marker: "1", "PYTHONPATH": str(ROOT)}
    # a shell that starts jobs in the background (as CI may) makes them ignore SIGINT, and
    # the ignore is inherited: the run gets the terminal's default, as Ctrl-C expects, from
    # this process (no Python runs between fork and exec, unlike with preexec_fn)
    previous = signal.getsignal(signal.SIGINT)
    if previous == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "train.py"), "--agent", "ppo",
             "--env", "gymnasium:CartPole-v1", "--set", "num_envs=2", "--set",
             "rollout_steps=32", "--total-steps", "10000000", "--chunks", "100000",
             "--no-progress", "--run-root", str(tmp_path)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )
    finally:
        if previous == signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)
    try:
        deadline = time.monotonic() + 240
        while not list(tmp_path.glob("*/metrics.jsonl")) or not any(
            f.stat().st_size for f in tmp_path.glob("*/metrics.jsonl")
        ):  # training (and so stepping) has begun
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == "interrupted"
    assert "KeyboardInterrupt" not in stderr, stderr[-2000:]  # the workers leave Ctrl-C to the run
    deadline = time.monotonic() + 10
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not marked_processes(marker)


def test_workers_import_gymnasium_only():
    """A worker process imports neither JAX nor this project's packages: it starts in the time
    Gymnasium takes to import (under load, 8 workers took 7.5 s with JAX and 2 s without)."""
    vector = envs.make_host("gymnasium:CartPole-v1").make_vector(2, "spawn")
    try:
        vector.reset(seed=0)
        for process in vector.processes:
            maps = Path(f"/proc/{process.pid}/maps").read_text()
            assert "jaxlib" not in maps and "xla_extension" not in maps
    finally:
        vector.close()


def test_ctrl_c_while_workers_start_leaves_none_behind(monkeypatch):
    """Ctrl-C inside the vector env's constructor, just after a worker was spawned and before
    multiprocessing registered it (the window a Ctrl-C at start-up can hit): every worker
    started, registered or not, is ended. Here they would otherwise sleep for a minute."""
    from multiprocessing import popen_spawn_posix

    launch = popen_spawn_posix.Popen._launch
    launched = []

    def launch_then_interrupt(self, process_obj):
        launch(self, process_obj)
        launched.append(self.pid)
        if len(launched) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(popen_spawn_posix.Popen, "_launch", launch_then_interrupt)
    env = envs.make_host("gymnasium:host_envs:SlowToStartCartPole-v0")
    before = child_pids()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        env.make_vector(3, "spawn")
    assert time.monotonic() - started < 15
    assert len(launched) == 2
    assert not child_pids() - before - {resource_tracker_pid()}


def test_ctrl_c_reaching_a_worker_while_it_imports_leaves_it_working(monkeypatch):
    """Ctrl-C goes to the whole process group, workers still importing Gymnasium included: each
    worker starts with SIGINT blocked (its traceback would otherwise cut into the run's last
    line, and the worker would be gone), and the parent's own mask is as it was."""
    from multiprocessing import popen_spawn_posix

    launch = popen_spawn_posix.Popen._launch

    def launch_then_interrupt(self, process_obj):
        launch(self, process_obj)
        os.kill(self.pid, signal.SIGINT)  # the child is still unpickling, importing gymnasium

    monkeypatch.setattr(popen_spawn_posix.Popen, "_launch", launch_then_interrupt)
    vector = envs.make_host("gymnasium:CartPole-v1").make_vector(2, "spawn")
    try:
        vector.reset(seed=0)
        vector.step(np.zeros(2, dtype=np.int64))
        assert all(process.is_alive() for process in vector.processes)
    finally:
        vector.close()
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


@pytest.mark.parametrize("argv, message", [
    (["--env", "gymnasium:CartPol-v1"], "unknown env 'gymnasium:CartPol-v1'"),
    (["--env", "gymnasium:CartPole-v1", "--set", "env.bogus=1"], "bad param(s) for env"),
    (["--env", "gymnasium:Blackjack-v1"], "observation space Tuple"),
    (["--agent", "muzero", "--env", "gymnasium:CartPole-v1"], "has no host loop"),
    (["--env", "gymnasium:CartPole-v1", "--seeds", "2"], "run one seed"),
    (["--agent", "sac", "--env", "gymnasium:CartPole-v1"], "discrete"),
    (["--env", "gymnasium:CartPole-v1", "--staleness", "-1"], "staleness must be >= 0"),
])
def test_bad_host_loop_input_is_one_line_exit_2(capsys, argv, message):
    assert train_script.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("placement", [[], ["--devices", "2", "--actor-threads", "2"]],
                         ids=["one-thread", "two-devices-two-threads"])
@pytest.mark.slow
def test_host_loop_run_resumes_after_its_checkpoint(tmp_path, capsys, placement):
    """A gymnasium: run resumes like a device run: learner state, replay (split over the
    learner devices) and counters from the checkpoint (the envs restart), training continues
    with the chunks after it."""
    argv = ["--agent", "dqn", "--env", "gymnasium:CartPole-v1", "--total-steps", "2048",
            "--chunks", "4", "--checkpoint-every", "1", "--no-progress",
            "--set", "learning_starts=256", "--run-root", str(tmp_path), *placement]
    assert train_script.main(argv) == 0
    (run_dir,) = tmp_path.iterdir()
    for chunk in (2, 3):  # as if the run had been killed after chunk 1's checkpoint
        shutil.rmtree(run_dir / "checkpoints" / str(chunk))
    capsys.readouterr()
    assert train_script.main(["--resume", str(run_dir), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"resuming {run_dir} after chunk 1" in err, err
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [row["env_steps"] for row in rows]
    assert steps == [512, 1024, 1536, 2048, 1536, 2048], steps
    # each record's steps/s is over its own chunk's time, and train_seconds sums those (a
    # process's own chunks; checkpoint writes in neither): rate x seconds is one chunk's steps
    for process in (rows[:4], rows[4:]):
        seconds = np.diff([0.0] + [row["train_seconds"] for row in process])
        assert all(row["steps_per_second"] * s == pytest.approx(512, rel=1e-6)
                   for row, s in zip(process, seconds)), process
    checkpointer = Checkpointer(run_dir, create=False)
    try:
        saved = checkpointer.read_raw()
    finally:
        checkpointer.close()
    assert checkpointer.latest_chunk() == 3
    assert int(saved["agent_state"]["iteration"]) == 2048 // (8 * 16)  # every iteration learned
    assert set(saved) == {"agent_state", "replay"}
    assert not _children()
