"""A user's own JAX env by name (`--env module:attr`): a gymnax Environment class or instance, or
a factory of one of our envs, with `--set env.<param>` reaching its constructor and EnvParams;
trained end to end from train.py, and every mistake one line with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from jaxrl_sys import envs
from jaxrl_sys.commands import train as train_script

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_a_gymnax_class_takes_constructor_arguments_and_env_params():
    env = envs.make("custom_env_example:Corridor", length=6, step_cost=0.05,
                    max_steps_in_episode=30)
    assert env.spec.name == "custom_env_example:Corridor"
    assert env.spec.obs_shape == (6,) and env.spec.max_episode_steps == 30
    assert env.unwrapped.gymnax_env.length == 6 and env.unwrapped.params.step_cost == 0.05
    _, state = env.reset(jax.random.key(0))
    _, _, reward, terminated, truncated, _ = env.step(jax.random.key(1), state, 1)
    assert float(reward) == pytest.approx(-0.05) and not bool(terminated) and not bool(truncated)


def test_an_instance_and_a_factory_are_envs_too():
    eight = envs.make("custom_env_example:corridor_of_eight", step_cost=0.1)
    assert eight.spec.obs_shape == (8,) and eight.unwrapped.params.step_cost == 0.1
    endless = envs.make("custom_env_example:make_endless", max_steps=50)
    assert isinstance(endless, envs.EpisodeStatistics) and endless.spec.max_episode_steps == 50


@pytest.mark.parametrize("name, params, message", [
    ("no_such_module:MyEnv", {}, "env 'no_such_module:MyEnv': cannot import no_such_module "
                                 "(No module named 'no_such_module')"),
    ("custom_env_example:Coridor", {}, "custom_env_example has no 'Coridor'; closest: Corridor"),
    ("custom_env_example:Corridor", {"lenght": 3},
     "unknown param(s) lenght for env 'custom_env_example:Corridor'; valid: length, "
     "max_steps_in_episode, step_cost"),
    ("custom_env_example:Corridor", {"length": 0}, "env.length=0 for env "
                                                   "'custom_env_example:Corridor': must be > 0"),
    ("custom_env_example:Corridor", {"step_cost": "high"}, "expected a finite float"),
    ("custom_env_example:corridor_of_eight", {"length": 3}, "unknown param(s) length"),
    ("custom_env_example:make_endless", {"max_steps": 2.5}, "expected an int"),
    ("custom_env_example:Endless", {}, "needs param(s) max_steps: --set env.max_steps=..."),
    ("custom_env_example:NOT_AN_ENV", {}, "is of type int, not an env"),
])
def test_mistakes_are_one_line(name, params, message):
    with pytest.raises(envs.USER_ERRORS) as error:
        envs.make(name, **params)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("argv, message", [
    (["--env", "no_such_module:MyEnv"], "cannot import no_such_module"),
    (["--env", "custom_env_example:Coridor"], "has no 'Coridor'"),
    (["--env", "custom_env_example:Corridor", "--set", "env.size=3"],
     "unknown param(s) size for env 'custom_env_example:Corridor'"),
    (["--env", "custom_env_example:Corridor", "--set", "env.max_steps_in_episode=-1"],
     "must be > 0"),
])
def test_mistakes_on_the_command_line_exit_2_before_anything_is_created(
        tmp_path, capsys, argv, message):
    root = tmp_path / "runs"
    code = train_script.main(["--no-progress", "--run-root", str(root), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not root.exists()


@pytest.mark.slow
def test_train_py_trains_a_users_env_from_the_directory_it_lives_in(tmp_path):
    """`python scripts/train.py --env custom_env_example:Corridor` from the folder holding the
    module (not on the script's path: it is imported from the working directory). PPO walks
    the 6-cell corridor near the best return, 1 - 4 x 0.02 = 0.92."""
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--no-progress",
         "--env", "custom_env_example:Corridor", "--set", "env.length=6",
         "--set", "env.step_cost=0.02", "--total-steps", "8192", "--chunks", "2",
         "--run-root", str(tmp_path)],
        cwd=TESTS, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    final = float(summary.split("final mean return ")[1].split()[0])
    assert final >= 0.8, summary
    (run_dir,) = tmp_path.iterdir()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["env"] == "custom_env_example:Corridor"
    assert record["spec"]["overrides"] == ["env.length=6", "env.step_cost=0.02"]
