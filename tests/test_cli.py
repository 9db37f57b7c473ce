"""scripts/train.py as a user runs it: bad input exits 2 with one line; a short run logs."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "scripts" / "train.py"
from jaxrl_sys.commands import train as train_script


def run_train(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TRAIN), "--no-progress", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300,
    )


def train_here(capsys, *args: str) -> subprocess.CompletedProcess:
    """train.py's `main` (what the script runs) in this process, which has the 8 CPU devices
    a script asks for: the process start (most of ten seconds of imports) saved. The short
    run above is the real process."""
    capsys.readouterr()
    code = train_script.main(["--no-progress", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["train.py", *args], code, out, err)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--agent", "ppx"], "unknown agent 'ppx'; closest: ppo"),
        (["--env", "CartPol-v1"], "closest: CartPole-v1"),
        (["--set", "lerning_rate=0.1"], "did you mean: learning_rate"),
        (["--set", "learning_rate=abc"], "expected a float"),
        (["--set", "num_envs=1.5"], "expected an int"),
        (["--set", "rollout_steps=30"], "divisible by num_minibatches"),
        (["--set", "env.not_a_param=1"], "unknown param(s) not_a_param"),
        (["--devices", "3"], "num_envs=32 does not divide over 3 devices"),
        (["--seeds", "0"], "seeds must be >= 1"),
        (["--devices", "two"], "invalid int value"),
        (["--no-such-flag"], "unrecognized arguments"),
        (["--agent", "sac", "--env", "CartPole-v1"], "needs a continuous (Box) action space"),
        (["--agent", "dqn", "--env", "Pendulum-v1"], "dqn needs discrete actions"),
        (["--agent", "sac", "--set", "noise_correlation=1"], "must be in [0, 1)"),
        (["--agent", "sac", "--env", "gymnasium:Pendulum-v1", "--set", "noise_correlation=0.5"],
         "noise_correlation runs in the on-device loop only"),
        (["--agent", "dqn", "--devices", "3"], "num_envs=32 does not divide over 3 devices"),
        (["--agent", "dqn", "--set", "gamma=1.5"], "gamma must be in [0, 1]"),
        (["--agent", "dqn", "--set", "torso=grid_cnn"], "torso=grid_cnn needs image observations"),
        (["--agent", "muzero", "--env", "Pendulum-v1"], "muzero needs discrete actions"),
        (["--agent", "alphazero", "--env", "Pendulum-v1"], "alphazero needs discrete actions"),
        (["--agent", "muzero", "--set", "search=alphazero"], "search must be one of"),
        (["--agent", "muzero", "--env", "TicTacToe-v0", "--set", "env.opponent=expert"],
         "opponent"),
        (["--agent", "muzero", "--env", "pgx:no_such_game"], "unknown pgx game"),
        (["--agent", "muzero", "--env", "pgx:2048"], "only two-player games"),
        (["--agent", "muzero", "--set", "model=oracle"], "model must be one of"),
        (["--agent", "muzero", "--env", "pgx:connect_four", "--eval-opponent", "mcts:0"],
         "mcts:N needs N >= 1"),
        (["--agent", "muzero", "--env", "pgx:connect_four", "--eval-opponent", "perfect"],
         "no perfect player for pgx:connect_four"),
        (["--agent", "muzero", "--env", "pgx:connect_four", "--eval-opponent", "expert"],
         "unknown opponent 'expert'"),
        (["--agent", "muzero", "--eval-opponent", "random"], "needs a two-player game"),
        (["--set", "total_steps=1e99"], "total_steps=1e+99 is too large"),
        (["--devices", "100000"], "num_envs=32 does not divide over 100000 devices"),
        (["--agent", "dqn", "--set", "memory=gru"], "cannot take a memory torso"),
        (["--set", "memory=rnn"], "memory must be one of"),
        (["--set", "memory=gru", "--set", "num_envs=16", "--devices", "8"],
         "do not divide into num_minibatches=4"),
        (["--env", "MemoryChain-bsuite", "--set", "env.memory_length=0"], "must be > 0"),
        (["--env", "jaxmarl:MPE_simple_spread_v3"], "is a team of agents; agent 'ppo'"),
        (["--agent", "mappo", "--env", "CartPole-v1"], "learns teams of agents"),
        (["--agent", "mappo", "--env", "jaxmarl:SMAX:9z"], "unknown SMAX map '9z'"),
        (["--agent", "ippo", "--env", "jaxmarl:MPE_spread"], "unknown JaxMARL env"),
        (["--agent", "mappo", "--set", "env.foo=1"], "has no param foo"),
        (["--agent", "mappo", "--set", "critic=global"], "critic must be one of"),
        (["--agent", "mappo", "--env", "jaxmarl:MPE_simple_tag_v3", "--set", "policies=shared"],
         "set policies=by_team"),
        (["--agent", "ippo", "--set", "policies=by_team"], "needs an env of competing teams"),
        (["--agent", "mappo", "--env", "jaxmarl:MPE_simple_tag_v3", "--set", "policies=by_team",
          "--set", "frozen_teams=prey"], "frozen_teams names prey, not a team"),
        (["--agent", "qmix", "--env", "jaxmarl:MPE_simple_tag_v3"], "has teams that compete"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, args, expected):
    """In this process (train.py's `main`, what the script runs): a process per case spent
    most of a minute importing JAX; `test_bad_input_in_a_real_process` keeps one of them."""
    assert train_script.main(["--no-progress", *args]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]
    assert "Traceback" not in captured.err + captured.out


def test_bad_input_in_a_real_process():
    result = run_train("--set", "lerning_rate=0.1")
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: unknown config field 'lerning_rate'; did you mean: learning_rate"] \
        or (len(lines) == 1 and "did you mean: learning_rate" in lines[0]), result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow
def test_short_run_writes_jsonl_tensorboard_and_a_summary(tmp_path):
    result = run_train(
        "--total-steps", "4096", "--chunks", "2", "--devices", "2", "--seeds", "2",
        "--run-root", str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = tmp_path.iterdir()
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2
    assert records[-1]["env_steps_per_seed"] == 4096
    assert records[-1]["env_steps"] == 2 * 4096
    assert records[-1]["mean_return"] > 0
    assert {"loss", "entropy", "approx_kl", "steps_per_second"} <= set(records[-1])
    assert any((run_dir / "tb").iterdir())
    record = json.loads((run_dir / "run.json").read_text())
    assert record["agent"] == "ppo" and record["seeds"] == [0, 1] and record["devices"] == 2
    assert record["spec"]["total_steps"] == 4096 and record["config"]["num_envs"] == 32
    assert result.stdout.startswith("done: 4,096 steps/seed x 2 seed(s)")


@pytest.mark.parametrize("agent, extra", [("dqn", []), ("sac", ["--set", "num_envs=8"])])
@pytest.mark.slow
def test_off_policy_agents_run_on_two_devices_and_two_seeds(tmp_path, capsys, agent, extra):
    result = train_here(capsys,
        "--agent", agent, "--devices", "2", "--seeds", "2", "--total-steps", "4000",
        "--chunks", "2", "--run-root", str(tmp_path), *extra,
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = tmp_path.iterdir()
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and records[-1]["env_steps"] == 2 * records[-1]["env_steps_per_seed"]
    loss_key = "loss" if agent == "dqn" else "critic_loss"
    assert records[-1][loss_key] is not None  # it learned in the second chunk


@pytest.mark.slow
def test_muzero_headline_command_runs_on_eight_devices(tmp_path, capsys):
    """`--agent muzero --devices 8` through the CLI, on the two-player game (self-play with
    legal-move masks, the arena's W/D/L at evaluation). CartPole's 8-device training, the
    headline's default env, is tests/test_muzero.py's 8-devices-equal-one test; one env here
    keeps the suite to one more 8-device MuZero compile."""
    result = train_here(capsys,
        "--agent", "muzero", "--env", "TicTacToe-v0", "--devices", "8", "--total-steps", "2048",
        "--chunks", "2", "--eval-episodes", "8", "--run-root", str(tmp_path),
        "--set", "num_simulations=4", "--set", "learning_starts=512",
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = tmp_path.iterdir()
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and records[-1]["env_steps_per_seed"] >= 2048
    assert np.isfinite(records[-1]["loss"]) and np.isfinite(records[-1]["eval_return"])
    assert "greedy eval return" in result.stdout
