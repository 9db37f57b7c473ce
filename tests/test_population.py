"""Population training over a sweep (jaxrl_sys/runtime/sweeps/population.py, train.py --pbt /
--halving): Tune's exploit and explore rules, traced settings changed between compiled calls
without compiling again, the whole agent state copied, lineage records, successive halving's
rungs, exact resume after SIGKILL, and bad input refused before anything is made."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import RunSpec, agents, envs
from jaxrl_sys.runtime import sweeps
from jaxrl_sys.runtime.checkpoint import Checkpointer
from jaxrl_sys.runtime.execution import copy_agent_rows, place_rows, placement_fns
from jaxrl_sys.runtime.sweeps import population
from jaxrl_sys.runtime.sweeps.results import SettingResult

from test_sweeps import PPO_SMALL, evaluate_script, stopped_and_resumed, train_script

TRAIN = Path(__file__).resolve().parent.parent / "scripts" / "train.py"
SMALL_PBT = dict(PPO_SMALL, chunks=4, checkpoint_every=1, pbt=True, pbt_interval=2,
                 sweep=("learning_rate=log:1e-4:1e-2", "ent_coef=uniform:0:0.02"), samples=4)


def test_the_bottom_quantile_copies_members_of_the_top_one():
    rng = np.random.default_rng(0)
    scores = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0]
    sources = population.exploit_sources(scores, 0.25, rng)
    # top quantile (2 of 8): positions 2 (9.0) and 6 (8.0); bottom: 1 (1.0) and 5 (2.0)
    assert set(sources[[1, 5]]) <= {2, 6}
    kept = [p for p in range(8) if p not in (1, 5)]
    assert list(sources[kept]) == kept
    assert population.quantile_size(8, 0.25) == 2
    assert population.quantile_size(5, 0.25) == 2  # ceil, as Tune
    assert population.quantile_size(3, 0.5) == 1  # at most half
    assert list(population.exploit_sources([1.0, 2.0], 0.25, rng)) == [1, 1]


def test_explore_multiplies_by_tunes_factors_moves_lists_and_draws_afresh():
    rng = np.random.default_rng(1)
    rate = population.Mutation("learning_rate", scale="log", low=1e-4, high=1e-2)
    gamma = population.Mutation("gamma", values=(0.9, 0.95, 0.99))
    seen = set()
    for _ in range(50):
        new = population.explore({"learning_rate": 1e-3, "gamma": 0.95}, [rate, gamma], 0.0,
                                 rng, lambda values: True)
        assert new["learning_rate"] in (1.2e-3, 8e-4)
        assert new["gamma"] in (0.9, 0.99)  # a neighbour in the list
        seen.add(new["learning_rate"])
    assert seen == {1.2e-3, 8e-4}
    for _ in range(50):
        new = population.explore({"learning_rate": 1e-3, "gamma": 0.95}, [rate, gamma], 1.0,
                                 rng, lambda values: True)
        assert 1e-4 <= new["learning_rate"] <= 1e-2 and new["gamma"] in gamma.values
    at_the_end = population.explore({"learning_rate": 1e-3, "gamma": 0.99}, [gamma], 0.0,
                                    np.random.default_rng(3), lambda values: True)
    assert at_the_end["gamma"] in (0.95, 0.99)  # clipped at the list's end
    # a value that makes the config invalid keeps the copied one
    assert population.explore({"gamma": 0.99}, [population.Mutation("gamma", scale="uniform",
                                                                    low=0.9, high=0.999)],
                              0.0, rng, lambda values: values["gamma"] <= 1) in (
        {"gamma": 0.99}, {"gamma": 0.792})


def test_rungs_train_each_survivor_eta_times_as_long_as_the_last():
    assert population.rung_ends(16, 16, 2) == [1, 2, 4, 8, 16]
    assert population.rung_ends(20, 8, 2) == [2, 5, 10, 20]
    assert population.rung_ends(9, 9, 3) == [1, 3, 9]
    assert population.survivors([3.0, 9.0, -np.inf, 7.0, 1.0], 2) == [0, 1, 3]
    result = SettingResult(0, {}, [10], [[1.0, 3.0]], [0.1])
    assert population.member_score(result) == 2.0
    assert population.member_score(dataclasses.replace(result, finite=False)) == -np.inf
    # seed 1 finished no episode in the last chunk (episodes longer than a chunk): its last
    # chunk that had one counts, or the return so far of its episode in progress if larger
    long = SettingResult(0, {}, [10, 20], [[1.0, 3.0], [2.0, np.nan]], [0.1, 0.2])
    assert population.member_score(long) == 2.5
    assert population.member_score(long, np.array([0.0, 5.0])) == 3.5
    never = SettingResult(0, {}, [10], [[np.nan]], [0.1])
    assert population.member_score(never) == -np.inf
    assert population.member_score(never, np.array([4.0])) == 4.0


@pytest.mark.slow
def test_settings_change_between_chunks_without_compiling_again():
    agent_module = agents.load("ppo")
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(agent_module.default_config("CartPole-v1"), num_envs=8,
                                 rollout_steps=16, total_steps=8 * 16 * 4)
    traces = {"n": 0}

    def build(settings):
        traces["n"] += 1
        init_fn, step_fn = placement_fns(agent_module.make(env, dataclasses.replace(
            config, learning_rate=settings["learning_rate"])))
        return init_fn, step_fn, None

    def runner_with(rates):
        return place_rows(build, num_envs=8, iters_per_chunk=2,
                          settings={"learning_rate": np.asarray(rates, np.float32)})

    runner = runner_with([1e-3, 2e-3])
    carry, _ = runner.run_chunk(runner.init(np.array([0, 1])))
    copy = jax.tree.map(jnp.copy, carry)
    compiled_traces = traces["n"]
    runner.run_chunk.set_settings({"learning_rate": np.array([5e-3, 1e-4])})
    changed, _ = runner.run_chunk(carry)
    assert traces["n"] == compiled_traces  # the same program, new values
    fresh = runner_with([5e-3, 1e-4])
    expected, _ = fresh.run_chunk(copy)
    jax.tree.map(np.testing.assert_allclose, changed.agent_state, expected.agent_state)
    with pytest.raises(ValueError, match="keep their names and rows"):
        runner.run_chunk.set_settings({"learning_rate": np.array([1e-3])})

    copied = copy_agent_rows(changed, np.array([1, 1]))  # row 0 takes row 1's whole state
    jax.tree.map(lambda x: np.testing.assert_array_equal(x[0], x[1]), copied.agent_state)
    np.testing.assert_array_equal(copied.key, changed.key)  # keys and envs stay their own


@pytest.mark.slow
def test_pbt_copies_the_whole_state_and_records_each_members_lineage(tmp_path):
    spec = RunSpec(**SMALL_PBT, run_root=str(tmp_path))
    outcome = sweeps.sweep(spec, agents.load, envs)  # the Python API of --pbt
    run_dir = outcome.run_dir
    saved = json.loads((run_dir / "sweep.json").read_text())
    pbt = saved["population"]
    assert pbt["method"] == "pbt" and pbt["interval"] == 2 and pbt["quantile"] == 0.25
    copies = [(m["member"], c) for m in pbt["members"] for c in m["copied"]]
    assert len(copies) == 1  # one exploit step (after chunk 2 of 4), ceil(4 x 0.25) member
    (member, (chunk, source)), = copies
    assert chunk == 1 and source != member
    scores = [s["returns"][chunk] for s in saved["settings"]]
    assert np.mean(scores[source]) >= max(np.mean(s) for s in scores) - 1e-9  # from the top
    assert np.mean(scores[member]) <= min(np.mean(s) for s in scores) + 1e-9  # into the bottom
    history = pbt["members"][member]["schedule"]
    assert history[0] == [0, {k: saved["settings"][member]["values"][k]
                              for k in ("learning_rate", "ent_coef")}]
    assert history[1][0] == 2 and history[1][1] != history[0][1]
    # the checkpoint after the exploit: the member holds its source's whole agent state
    checkpointer = Checkpointer(run_dir / "group-0", create=False)
    state = checkpointer.read_raw(chunk)["agent_state"]
    env_state = checkpointer.read_raw(chunk)["env_state"]
    record = checkpointer.read_record(chunk)
    checkpointer.close()
    jax.tree.map(lambda x: np.testing.assert_array_equal(x[member], x[source]), state)
    assert record["member_values"][member] == history[1][1]
    assert any(not np.array_equal(x[member], x[source]) for x in jax.tree.leaves(env_state))
    text = (run_dir / "sweep.md").read_text()
    assert f"| 2: {source} |" in text and "copied (after chunk: member)" in text
    assert (run_dir / "sweep.png").is_file()


@pytest.mark.slow
def test_halving_keeps_the_best_and_gives_them_the_steps_of_the_rest(tmp_path, monkeypatch,
                                                                     capsys):
    spec = RunSpec(**dict(PPO_SMALL, chunks=4), checkpoint_every=1, halving=2,
                   run_root=str(tmp_path / "whole"),
                   sweep=("learning_rate=1e-4,1e-3,3e-3,1e-2",))
    whole = sweeps.sweep(spec, agents.load, envs)
    steps = {r.index: r.env_steps[-1] for r in whole.results}
    chunk_steps = whole.results[0].env_steps[0]
    assert sorted(steps.values()) == [chunk_steps] * 2 + [2 * chunk_steps, 4 * chunk_steps]
    first = {r.index: np.mean(r.returns[0]) for r in whole.results}
    kept = sorted(first, key=first.get, reverse=True)[:2]
    assert {i for i, s in steps.items() if s > chunk_steps} == set(kept)
    text = (whole.run_dir / "sweep.md").read_text()
    assert text.splitlines()[2].startswith("| 1 |") and f"{4 * chunk_steps:,}" in text

    # the last checkpoint holds the survivor alone: `--setting all` and `--setting N` find it,
    # a setting dropped at a rung is one line, exit 2
    (survivor,) = [i for i, s in steps.items() if s == 4 * chunk_steps]
    capsys.readouterr()
    assert evaluate_script.main([str(whole.run_dir), "--setting", "all", "--episodes", "4"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if "  setting " in line]
    assert len(listed) == 1 and f"setting {survivor} (checkpoint after chunk 3)" in listed[0]
    all_return = float(listed[0].split("return ")[1].split(" ")[0])
    assert evaluate_script.main([str(whole.run_dir), "--setting", str(survivor),
                                 "--episodes", "4"]) == 0
    one = capsys.readouterr().out.splitlines()[-1]
    assert one.startswith(f"return {all_return:.1f} ")
    dropped = min(i for i, s in steps.items() if s == chunk_steps)
    assert evaluate_script.main([str(whole.run_dir), "--setting", str(dropped)]) == 2
    assert "dropped at a halving rung" in capsys.readouterr().err

    # stopped after chunk 2's records: the second rung's end, before its survivors are chosen
    resumed = stopped_and_resumed(spec, tmp_path / "stopped", 2, monkeypatch)
    assert [r.returns for r in resumed.results] == [r.returns for r in whole.results]


@pytest.mark.slow
def test_a_pbt_run_killed_between_two_exploit_steps_resumes_exactly(tmp_path):
    """Killed with SIGKILL and resumed in a process of its own; the same sweep uninterrupted
    runs first in this process (train.py's `main`), and the two processes load what it compiled.
    A chunk is one PPO iteration (32 envs x 32 steps) of every member."""
    flags = ["--agent", "ppo", "--env", "CartPole-v1", "--total-steps", str(9 * 1024),
             "--chunks", "9", "--checkpoint-every", "1", "--eval-episodes", "0", "--no-progress",
             "--sweep", "learning_rate=log:1e-4:1e-2", "--samples", "4", "--pbt",
             "--pbt-interval", "3"]
    common = [sys.executable, str(TRAIN), *flags]
    # the scripts see this process's CPU devices: the same compilation-cache entries
    script_env = {**os.environ, "JAX_NUM_CPU_DEVICES": str(jax.device_count())}
    assert train_script.main([*flags, "--run-root", str(tmp_path / "full")]) == 0

    killed_root = tmp_path / "killed"
    proc = subprocess.Popen([*common, "--run-root", str(killed_root)], env=script_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300  # kill once the checkpoint after chunk 4 is finished
    try:
        while not list(killed_root.glob("*/group-0/checkpoints/3")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)  # when the wait fails too: no process left running
    proc.communicate(timeout=60)
    (run_dir,) = killed_root.iterdir()
    checkpointer = Checkpointer(run_dir / "group-0", create=False)
    killed_at = checkpointer.latest_chunk()
    checkpointer.close()
    # exploits follow chunks 2 and 5 (0-based); a loaded machine may run on past chunk 4 before
    # the kill lands, so any chunk before the last (8) counts: 3, 4, 6, 7 lie between two exploit
    # steps, 5 just after one, and each must resume exactly
    assert 3 <= killed_at < 8, killed_at

    resumed = subprocess.run([sys.executable, str(TRAIN), "--resume",
                              str(run_dir), "--no-progress"], capture_output=True, text=True,
                             timeout=600, env=script_env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming after chunk {killed_at}" in resumed.stderr

    def outcome(root: Path) -> tuple:
        (directory,) = root.iterdir()
        saved = json.loads((directory / "sweep.json").read_text())
        checkpointer = Checkpointer(directory / "group-0", create=False)
        try:
            return saved, checkpointer.read_raw()
        finally:
            checkpointer.close()

    (saved_full, state_full), (saved_resumed, state_resumed) = (
        outcome(tmp_path / "full"), outcome(killed_root))
    assert saved_resumed["population"] == saved_full["population"]
    assert ([s["returns"] for s in saved_resumed["settings"]]
            == [s["returns"] for s in saved_full["settings"]])
    assert sum(len(m["copied"]) for m in saved_full["population"]["members"]) == 2
    jax.tree.map(np.testing.assert_array_equal, state_full, state_resumed)


@pytest.mark.parametrize("argv, message", [
    (["--pbt"], "--pbt needs --sweep"),
    (["--halving", "2"], "--halving needs --sweep"),
    (["--sweep", "learning_rate=1e-3,2e-3", "--pbt", "--pbt-interval", "0"],
     "--pbt-interval must be >= 1"),
    (["--sweep", "learning_rate=1e-3,2e-3", "--pbt", "--pbt-quantile", "0.6"],
     "--pbt-quantile must be in (0, 0.5]"),
    (["--sweep", "learning_rate=1e-3,2e-3", "--pbt", "--pbt-quantile", "0"],
     "--pbt-quantile must be in (0, 0.5]"),
    (["--sweep", "learning_rate=1e-3,2e-3", "--pbt", "--halving", "2"], "pick one"),
    (["--sweep", "learning_rate=1e-3,2e-3", "--halving", "1"], "--halving ETA must be >= 2"),
    (["--sweep", "learning_rate=1e-3,2e-3", "--sweep", "hidden=32/64", "--pbt"],
     "hidden changes array shapes"),
    (["--sweep", "learning_rate=1e-3", "--pbt"], "a population of 2 settings or more"),
    (["--sweep", "learning_rate=1e-3,2e-3", "--pbt", "--pbt-interval", "20"],
     "leaves no exploit step"),
    (["--sweep", "learning_rate=log:1e-4:1e-2", "--samples", "16", "--halving", "2",
      "--chunks", "8"], "needs at least 16 chunks"),
])
def test_bad_population_flags_are_one_line_exit_2_and_create_nothing(tmp_path, capsys, argv,
                                                                     message):
    code = train_script.main([*argv, "--run-root", str(tmp_path), "--no-progress",
                              "--total-steps", "4096"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not any(tmp_path.iterdir())
