"""scripts/arena.py as a user runs it: results of a trained run, and one-line errors."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARENA = ROOT / "scripts" / "arena.py"
from jaxrl_sys.commands import arena as arena_script


@pytest.fixture(scope="module")
def ttt_run(tmp_path_factory) -> Path:
    """A tiny AlphaZero-mode tic-tac-toe run (its checkpoint is all the arena needs)."""
    root = tmp_path_factory.mktemp("runs")
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--no-progress", "--agent",
         "muzero", "--env", "TicTacToe-v0", "--set", "model=env", "--total-steps", "1024",
         "--chunks", "1", "--eval-episodes", "8", "--set", "num_simulations=4",
         "--set", "learning_starts=512", "--run-root", str(root)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "W/D/L" in result.stdout  # win/draw/loss against the perfect player
    (run_dir,) = root.iterdir()
    return run_dir


def fake_run(tmp_path: Path, source: Path, env: str) -> Path:
    """A run directory whose spec names `env` (no checkpoint: refused before restoring)."""
    record = json.loads((source / "run.json").read_text())
    record["spec"]["env"] = env
    run_dir = tmp_path / env.replace(":", "_")
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


@pytest.mark.slow
def test_arena_prints_a_table_and_json_results(ttt_run, capsys):
    assert arena_script.main([str(ttt_run), "--opponent", "random", "--games", "20",
                              "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    result = json.loads(out[-1])
    assert result["games"] == 20 and result["wins"] + result["draws"] + result["losses"] == 20
    assert any(line.startswith("| first |") for line in out)
    assert arena_script.main([str(ttt_run), "--opponent", str(ttt_run), "--games", "4",
                              "--json"]) == 0  # a checkpoint against a checkpoint
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["games"] == 4


@pytest.mark.slow
def test_bad_input_exits_2_with_one_line(ttt_run, tmp_path, capsys):
    connect_four = fake_run(tmp_path, ttt_run, "pgx:connect_four")
    cartpole = fake_run(tmp_path, ttt_run, "CartPole-v1")
    cases = [
        ([str(ttt_run), "--games", "3"], "--games must be an even number"),
        ([str(ttt_run), "--opponent", "mcts:0"], "needs N >= 1"),
        ([str(ttt_run), "--simulations", "0"], "--simulations must be >= 1"),
        ([str(ttt_run), "--opponent", "grandmaster"], "unknown opponent 'grandmaster'"),
        ([str(tmp_path / "missing")], "no run directory"),
        ([str(connect_four), "--opponent", "perfect"], "no perfect player for pgx:connect_four"),
        ([str(connect_four), "--opponent", str(ttt_run)], "plays TicTacToe-v0, not "
                                                          "pgx:connect_four"),
        ([str(cartpole)], "not of a two-player game"),
    ]
    for args, expected in cases:
        assert arena_script.main(args) == 2, args
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and expected in err[0], (args, err)


@pytest.mark.slow
def test_simulations_sets_the_agents_search_budget(ttt_run, capsys):
    saved = arena_script.open_game_run(str(ttt_run))
    assert saved.agent.config.num_simulations == 4
    assert arena_script.searching_agent(saved, None) is saved.agent
    assert arena_script.searching_agent(saved, 24).config.num_simulations == 24
    assert arena_script.main([str(ttt_run), "--opponent", "perfect", "--games", "4",
                              "--simulations", "24", "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "24 simulations per move" in out[0]
    assert json.loads(out[-1])["games"] == 4
