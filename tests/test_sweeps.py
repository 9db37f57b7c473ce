"""Hyper-parameter sweeps (jaxrl_sys/runtime/sweeps/, train.py --sweep): settings x seeds as rows of
one compiled program, the same returns as separate runs and on any number of devices, shape
keys in compiled groups, bad input refused before anything is made, resume, evaluate --setting."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxrl_sys import agents
from jaxrl_sys import envs
from jaxrl_sys import RunSpec, resolve, run
from jaxrl_sys.runtime import sweeps
from jaxrl_sys.runtime.sweeps import memory as sweep_memory, run as sweep_run

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str):
    """A command module (jaxrl_sys.commands) or a repository script by name."""
    if (Path(__file__).resolve().parent.parent / "jaxrl_sys" / "commands" / f"{name}.py").is_file():
        return importlib.import_module(f"jaxrl_sys.commands.{name}")
    spec = importlib.util.spec_from_file_location(f"{name}_script",
                                                  Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


train_script, evaluate_script = _script("train"), _script("evaluate")

PPO_SMALL = dict(agent="ppo", env="CartPole-v1", total_steps=4096, chunks=2, progress=False,
                 eval_episodes=0)


def finals(outcome: sweeps.SweepOutcome) -> dict[int, list[float]]:
    return {r.index: r.returns[-1] for r in outcome.results}


def test_grid_expands_to_every_combination_and_ranges_draw_reproducibly():
    config = agents.load("ppo").default_config("CartPole-v1")
    keys = [sweeps.parse_sweep_key("learning_rate=1e-3,3e-3", config),
            sweeps.parse_sweep_key("hidden=64,64/32", config),
            sweeps.parse_sweep_key("ent_coef=uniform:0:0.1", config)]
    assert keys[1].values == ((64, 64), (32,))
    settings = sweeps.expand(keys, samples=3, seed=7)
    assert len(settings) == 2 * 2 * 3
    assert {(s["learning_rate"], s["hidden"]) for s in settings} == {
        (1e-3, (64, 64)), (1e-3, (32,)), (3e-3, (64, 64)), (3e-3, (32,))}
    assert all(0 <= s["ent_coef"] <= 0.1 for s in settings)
    assert settings == sweeps.expand(keys, samples=3, seed=7)  # a resumed sweep draws the same
    log = sweeps.expand([sweeps.parse_sweep_key("learning_rate=log:1e-4:1e-2", config)], 200)
    rates = np.array([s["learning_rate"] for s in log])
    assert rates.min() >= 1e-4 and rates.max() <= 1e-2
    assert (rates < 1e-3).mean() == pytest.approx(0.5, abs=0.15)  # even in log space


@pytest.mark.parametrize("argv, message", [
    (["--sweep", "lerning_rate=1e-3,2e-3"], "unknown key 'lerning_rate'"),
    (["--sweep", "learning_rate=fast,slow"], "expected values that are a float"),
    (["--sweep", "learning_rate="], "the list of values is empty"),
    (["--sweep", "learning_rate=log:1e-2:1e-4", "--samples", "4"], "needs LO < HI"),
    (["--sweep", "learning_rate=log:0:1e-2", "--samples", "4"], "log ranges need LO > 0"),
    (["--sweep", "learning_rate=log:1e-4:1e-2"], "give --samples K"),
    (["--sweep", "learning_rate=1e-3", "--samples", "4"], "--samples needs a range"),
    (["--sweep", "gamma=0.9", "--sweep", "gamma=0.99"], "names gamma more than once"),
    (["--sweep", "gamma=0.9,1.5"], "setting 1 (gamma=1.5): gamma must be in [0, 1]"),
    (["--sweep", "learning_rate=1e-3,2e-3,3e-3", "--devices", "2"], "do not divide over 2"),
    (["--sweep", "learning_rate=1e-3", "--env", "gymnasium:CartPole-v1"], "pure-JAX env"),
])
def test_bad_sweeps_are_one_line_exit_2_and_create_nothing(tmp_path, capsys, argv, message):
    code = train_script.main([*argv, "--run-root", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not any(tmp_path.iterdir())


def test_a_sweep_too_large_for_memory_is_refused_before_compiling(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_memory, "available_bytes", lambda: 1000)
    spec = RunSpec(**PPO_SMALL, run_root=str(tmp_path), sweep=("learning_rate=1e-3,2e-3",))
    with pytest.raises(sweeps.SweepError, match=r"rows need about .* GiB"):
        sweeps.sweep(spec, agents.load, envs)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_a_sweep_gives_each_setting_the_returns_of_its_own_run(tmp_path):
    spec = RunSpec(**PPO_SMALL, seeds=2, run_root=str(tmp_path),
                   sweep=("learning_rate=1e-3,5e-3", "ent_coef=0,0.01"))
    outcome = sweeps.sweep(spec, agents.load, envs)
    assert len(outcome.results) == 4
    for result in outcome.results:
        overrides = tuple(f"{k}={v}" for k, v in result.values.items())
        alone = run(dataclasses.replace(spec, sweep=(), overrides=overrides), agents.load, envs)
        assert result.returns[-1] == [float(r) for r in alone.history[-1].returns], result.values
    table = outcome.table()
    assert [row["rank"] for row in table] == [1, 2, 3, 4]
    means = [row["final_mean"] for row in table]
    assert means == sorted(means, reverse=True)
    for name in ("sweep.json", "sweep.md", "sweep.png", "run.json"):
        assert (outcome.run_dir / name).is_file()
    saved = json.loads((outcome.run_dir / "sweep.json").read_text())
    assert saved["traced"] == ["learning_rate", "ent_coef"] and saved["done_groups"] == [0]


@pytest.mark.slow
def test_four_devices_give_the_table_of_one(tmp_path):
    spec = RunSpec(**PPO_SMALL, run_root=str(tmp_path),
                   sweep=("learning_rate=1e-3,2.5e-3,5e-3,1e-2",))
    one = sweeps.sweep(spec, agents.load, envs)
    four = sweeps.sweep(dataclasses.replace(spec, devices=4), agents.load, envs)
    assert finals(one) == finals(four)


@pytest.mark.parametrize("agent, env, keys, traced, groups", [
    ("dqn", "CartPole-v1", ("learning_rate=1e-3,3e-3", "hidden=32/64,64"), ["learning_rate"], 2),
    ("sac", "Pendulum-v1", ("tau=0.005,0.02", "gamma=0.95,0.99"), ["tau", "gamma"], 1),
])
@pytest.mark.slow
def test_dqn_and_sac_sweep_through_the_same_flags(tmp_path, capsys, agent, env, keys, traced,
                                                  groups):
    argv = ["--agent", agent, "--env", env, "--total-steps", "1000", "--chunks", "2",
            "--run-root", str(tmp_path), "--no-progress"]
    for key in keys:
        argv += ["--sweep", key]
    assert train_script.main(argv) == 0
    out = capsys.readouterr().out
    assert "| rank | setting |" in out and "done: 4 settings x 1 seeds" in out
    (run_dir,) = tmp_path.iterdir()
    saved = json.loads((run_dir / "sweep.json").read_text())
    assert saved["traced"] == traced and len(saved["groups"]) == groups
    assert all(np.isfinite(s["returns"][-1]).all() for s in saved["settings"])


def stopped_and_resumed(spec: RunSpec, root: Path, saves: int,
                        monkeypatch) -> sweeps.SweepOutcome:
    """`spec` trained under `root` until its `saves`-th write of sweep.json (after a chunk's
    records), stopped there as Ctrl-C stops it, then resumed to the end."""
    count = {"n": 0}
    real_save = sweep_run.save_outcome

    def stop_after(run_dir, data):
        real_save(run_dir, data)
        count["n"] += 1
        if count["n"] == saves:
            raise KeyboardInterrupt

    monkeypatch.setattr(sweep_run, "save_outcome", stop_after)
    stopped = dataclasses.replace(spec, run_root=str(root))
    with pytest.raises(KeyboardInterrupt):
        sweeps.sweep(stopped, agents.load, envs)
    monkeypatch.setattr(sweep_run, "save_outcome", real_save)
    (run_dir,) = root.iterdir()
    return sweeps.sweep(stopped, agents.load, envs, resume=run_dir)


@pytest.mark.slow
def test_a_stopped_sweep_resumes_to_the_table_of_an_uninterrupted_one(tmp_path, monkeypatch):
    spec = RunSpec(**dict(PPO_SMALL, chunks=4), run_root=str(tmp_path / "whole"),
                   checkpoint_every=1, sweep=("learning_rate=1e-3,5e-3",))
    whole = sweeps.sweep(spec, agents.load, envs)
    resumed = stopped_and_resumed(spec, tmp_path / "stopped", 2, monkeypatch)
    assert [r.returns for r in resumed.results] == [r.returns for r in whole.results]


@pytest.mark.slow
def test_evaluate_picks_a_setting_of_a_sweep(tmp_path, capsys):
    spec = RunSpec(**PPO_SMALL, seeds=2, run_root=str(tmp_path),
                   sweep=("learning_rate=1e-3,5e-3",))
    outcome = sweeps.sweep(spec, agents.load, envs)
    capsys.readouterr()
    assert evaluate_script.main([str(outcome.run_dir), "--setting", "1", "--episodes", "4"]) == 0
    out = capsys.readouterr().out
    assert "seed 0:" in out and "seed 1:" in out and "4 greedy episodes x 2 seed(s)" in out
    for argv, message in (([], "is a sweep: pick a setting"), (["--setting", "2"], "settings 0..1")):
        assert evaluate_script.main([str(outcome.run_dir), *argv]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.slow
def test_a_float_the_agent_branches_on_is_found_and_kept_static():
    # MuZero branches on q_range (> 0: a fixed Q scale) in Python: it cannot be traced
    spec = RunSpec(agent="muzero", env="CartPole-v1", total_steps=2048,
                   sweep=("learning_rate=1e-3,3e-3", "q_range=0,10"))
    resolved = resolve(spec, agents.load, envs)
    plan = sweeps.plan_sweep(resolved)
    traced = sweeps.traceable_keys(plan, resolved.module, envs.make("CartPole-v1"))
    assert traced == ("learning_rate",)
    groups = sweeps.group_settings(plan, traced)
    assert [g.members for g in groups] == [(0, 2), (1, 3)]  # one program per q_range


@pytest.mark.slow
def test_arena_plays_a_setting_of_a_game_sweep(tmp_path, capsys):
    arena_script = _script("arena")
    argv = ["--agent", "muzero", "--env", "TicTacToe-v0", "--set", "model=env",
            "--set", "num_simulations=4", "--total-steps", "256", "--chunks", "1",
            "--eval-episodes", "0", "--sweep", "learning_rate=1e-3,3e-3",
            "--run-root", str(tmp_path), "--no-progress"]
    assert train_script.main(argv) == 0
    (run_dir,) = tmp_path.iterdir()
    capsys.readouterr()
    assert arena_script.main([str(run_dir), "--setting", "1", "--opponent", "random",
                              "--games", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["games"] == 4 and result["wins"] + result["draws"] + result["losses"] == 4
    assert arena_script.main([str(run_dir), "--opponent", "random"]) == 2
    assert "is a sweep: pick a setting" in capsys.readouterr().err
