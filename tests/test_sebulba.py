"""The Sebulba host loop: several actor threads, actor and learner devices, many processes.

A fixed seed gives the same parameters whatever the number of actor threads, devices or
processes (every env named by its global id; rollout i of every thread acts with the same
parameter version); bad placements are refused before anything is created.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import dqn, impala, ppo
from jaxrl_sys.commands import train as train_script
from jaxrl_sys.runtime import host
from jaxrl_sys.runtime.execution import PlacementError
from jaxrl_sys.runtime.host import HostLoopConfig, HostLoopError
from jaxrl_sys.runtime.host.placement import HostLayout, place_host

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))  # workers import `host_envs` from here (spawn copies sys.path)

from test_multihost import final_state, free_port  # noqa: E402

ENV = "gymnasium:CartPole-v1"
UPDATES = 3


def _params_after(module, layout: HostLayout, staleness: int, **overrides) -> dict:
    """The learner's parameters after `UPDATES` updates through the host loop."""
    env = envs.make_host(ENV)
    config = dataclasses.replace(module.default_config(ENV), num_envs=layout.num_envs,
                                 **overrides)
    config = dataclasses.replace(config, total_steps=UPDATES * config.steps_per_iteration)
    fns = module.host_fns(module.make(env, config))
    result = host.train(env, fns, seed=3, num_iterations=UPDATES, iters_per_chunk=UPDATES,
                        config=HostLoopConfig(staleness=staleness),
                        placement=place_host(layout))
    return jax.tree.map(np.asarray, result.carry["agent_state"].params)


@pytest.mark.parametrize("module, overrides", [
    (ppo, {"rollout_steps": 16, "num_minibatches": 2}),
    (impala, {"rollout_steps": 16, "num_minibatches": 2}),
    (ppo, {"rollout_steps": 16, "num_minibatches": 2, "memory": "gru", "memory_size": 16}),
], ids=["ppo", "impala", "ppo-gru"])
@pytest.mark.slow
def test_device_and_thread_counts_do_not_change_results(module, overrides):
    """One actor thread per device on 4 devices, and 2 acting + 2 learning devices with 4
    threads, give the parameters of one thread on one device (same global batch)."""
    one = _params_after(module, HostLayout(num_envs=8), staleness=1, **overrides)
    shared = _params_after(module, HostLayout(num_envs=8, devices=4, actor_threads=4),
                           staleness=1, **overrides)
    split = _params_after(module, HostLayout(num_envs=8, devices=4, actor_devices=2,
                                             actor_threads=4), staleness=1, **overrides)
    for other in (shared, split):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                     other, one)
    _assert_moved(one, module, overrides)


@pytest.mark.slow
def test_thread_count_does_not_change_dqn():
    """DQN (replay, Ape-X epsilons by global env id): 4 actor threads on one device give the
    parameters of one. (On several learner devices each samples its own rows of replay, with
    its own key, as in the device loop: another draw, not the same run.)"""
    overrides = {"learning_starts": 32, "buffer_size": 256, "batch_size": 16,
                 "exploration": "apex"}
    one = _params_after(dqn, HostLayout(num_envs=8), staleness=1, **overrides)
    threads = _params_after(dqn, HostLayout(num_envs=8, actor_threads=4), staleness=1,
                            **overrides)
    jax.tree.map(np.testing.assert_array_equal, threads, one)
    _assert_moved(one, dqn, overrides)


def _assert_moved(params: dict, module, overrides: dict) -> None:
    """Training changed the parameters: the comparisons are not between initialisations."""
    moved = jax.tree.map(lambda a, b: float(np.abs(a - np.asarray(b)).max()), params,
                         _initial_params(module, overrides))
    assert max(jax.tree.leaves(moved)) > 0


def _initial_params(module, overrides) -> dict:
    env = envs.make_host(ENV)
    config = dataclasses.replace(module.default_config(ENV), num_envs=8, **overrides)
    fns = module.host_fns(module.make(env, config))
    return host.initial_carry(fns, 3)["agent_state"].params


def test_placement_binds_threads_devices_and_rows():
    placement = place_host(HostLayout(num_envs=12, devices=4, actor_devices=1, actor_threads=2))
    assert placement.layout.learner_devices == 3
    assert [d.id for d in placement.actor_devices] == [0]
    assert [d.id for d in placement.mesh.devices.flat] == [1, 2, 3]
    assert [d.id for d in placement.thread_devices()] == [0, 0]
    placement = place_host(HostLayout(num_envs=8, devices=4, actor_devices=2, actor_threads=4))
    assert [d.id for d in placement.actor_devices] == [0, 1]
    assert [d.id for d in placement.mesh.devices.flat] == [2, 3]
    assert [d.id for d in placement.thread_devices()] == [0, 1, 0, 1]
    np.testing.assert_array_equal(placement.thread_env_ids(3), [6, 7])
    assert [(d.id, a, b) for d, a, b in placement.local_learner_rows()] == [(2, 0, 4), (3, 4, 8)]


@pytest.mark.parametrize("layout, message", [
    (HostLayout(num_envs=8, actor_threads=0), "actor_threads must be >= 1"),
    (HostLayout(num_envs=8, devices=2, actor_devices=3), "does not fit 2 device(s)"),
    (HostLayout(num_envs=8, devices=4, actor_devices=1), "over 3 learner device(s)"),
    (HostLayout(num_envs=8, actor_threads=3), "over 1 process(es) x 3 actor thread(s)"),
    (HostLayout(num_envs=8, devices=3, processes=2), "devices=3 does not divide over 2"),
])
def test_bad_layouts_are_refused(layout, message):
    with pytest.raises(PlacementError) as error:
        layout.check()
    assert message in str(error.value)


@pytest.mark.parametrize("argv, message", [
    (["--actor-threads", "0"], "actor_threads must be >= 1"),
    (["--devices", "2", "--actor-devices", "3"], "actor_devices must be 1 .. devices (2)"),
    (["--devices", "4", "--actor-devices", "1"], "does not divide over 3 learner device(s)"),
    (["--actor-threads", "3"], "does not divide over 1 process(es) x 3 actor thread(s)"),
    (["--staleness", "-1"], "staleness must be >= 0"),
    (["--devices", "16"], "num_envs=8 does not divide over 16 learner device(s)"),
])
def test_bad_host_placement_is_one_line_exit_2(tmp_path, capsys, argv, message):
    code = train_script.main(["--env", ENV, "--run-root", str(tmp_path / "runs"),
                              "--no-progress", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # refused before anything was created


def test_actor_flags_are_refused_for_device_envs(tmp_path, capsys):
    code = train_script.main(["--env", "CartPole-v1", "--actor-threads", "2",
                              "--run-root", str(tmp_path)])
    assert code == 2 and "for host-loop envs" in capsys.readouterr().err


def test_a_dead_worker_names_its_actor_thread():
    env = envs.make_host("gymnasium:host_envs:FailingCartPole-v0", fail_at=3, how="exit",
                         only_seed=5)  # global env 5: thread 2's second env
    config = dataclasses.replace(ppo.default_config(ENV), num_envs=8, total_steps=8 * 32 * 2)
    fns = ppo.host_fns(ppo.make(env, config))
    with pytest.raises(HostLoopError, match=r"\(actor thread 2\): worker 1 died"):
        host.train(env, fns, seed=0, num_iterations=2, iters_per_chunk=1,
                   placement=place_host(HostLayout(num_envs=8, actor_threads=4)))


@pytest.mark.slow
def test_two_processes_equal_one_process(tmp_path):
    """2 processes x 2 devices (each its own actor thread and envs, the learner's gradients
    reduced over all 4 devices) train the parameters of 1 process with 4 devices."""
    command = [sys.executable, str(ROOT / "scripts" / "train.py"), "--agent", "impala",
               "--env", ENV, "--total-steps", "2048", "--chunks", "2", "--devices", "4",
               "--actor-threads", "2", "--no-progress"]
    port = free_port()
    workers = [
        subprocess.Popen(
            [*command[:-3], "--actor-threads", "1", "--no-progress",
             "--run-root", str(tmp_path / "multi"), "--coordinator", f"127.0.0.1:{port}",
             "--num-processes", "2", "--process-id", str(i)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TESTS,
        )
        for i in range(2)
    ]
    outputs = [w.communicate(timeout=600) for w in workers]
    for worker, (out, err) in zip(workers, outputs):
        assert worker.returncode == 0, err[-3000:]
    assert "in 2 processes" in outputs[0][1] and "done:" in outputs[0][0]
    single = subprocess.run([*command, "--run-root", str(tmp_path / "single")],
                            capture_output=True, text=True, timeout=600, cwd=TESTS)
    assert single.returncode == 0, single.stderr[-3000:]
    multi, one = final_state(tmp_path / "multi"), final_state(tmp_path / "single")
    # gloo's cross-process all-reduce sums in another order than XLA's in-process one
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 multi["agent_state"], one["agent_state"])
    # both report the same episodes: the multi-process run adds up every process's
    done = [line for line in outputs[0][0].splitlines() if line.startswith("done:")]
    assert done and done[0].split("final mean return")[1].split(";")[0] == \
        single.stdout.split("final mean return")[1].split(";")[0]
