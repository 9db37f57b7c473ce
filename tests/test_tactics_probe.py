"""benchmarks/tactics.py: its classification of positions, checked on hand-built connect-four
positions (a win in one, a forced block)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "tactics.py"
spec = importlib.util.spec_from_file_location("tactics_script", SCRIPT)
tactics = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = tactics
spec.loader.exec_module(tactics)


@pytest.fixture(scope="module")
def env():
    return envs.make("pgx:connect_four")


def position(env, moves):
    """The game state after `moves` (columns) from a fresh game."""
    def play(state, move):
        return env.step(jax.random.PRNGKey(1), state, move)[1], None

    _, state = env.reset(jax.random.PRNGKey(0))
    return jax.jit(lambda s, m: jax.lax.scan(play, s, m)[0])(state, jnp.asarray(moves))


def test_a_win_in_one_and_a_forced_block_are_classified(env):
    # opener: columns 0,0,0; answerer: 1,1,1 -- the opener wins at once in column 0 only,
    # and any other move lets the answerer win in column 1
    win = position(env, (0, 1, 0, 1, 0, 1))
    # opener: 0,0,0; answerer: 1,1 -- the answerer must play column 0
    block = position(env, (0, 1, 0, 1, 0))
    states = jax.tree.map(lambda *x: jnp.stack(x), win, block)
    winning, safe = map(np.asarray, jax.jit(lambda s: tactics.classify(env, s, 7))(states))
    assert winning[0].tolist() == [True] + [False] * 6
    assert not winning[1].any()
    assert safe[1].tolist() == [True] + [False] * 6
    assert safe[0][0] and not safe[0][2:].any()  # the win is safe; 2..6 let column 1 win


def test_env_steps_of_a_chunk_count_a_resumed_runs_repeated_records_once(tmp_path):
    """A run killed after chunk 1's checkpoint and resumed logs chunk 2 twice; chunk 3 is
    still the fourth chunk's steps, not the fourth line's."""
    steps = [100, 200, 300, 300, 400]  # chunk 2 (300) logged before the kill and again after
    (tmp_path / "metrics.jsonl").write_text(
        "".join(f'{{"env_steps": {s}, "loss": 0.5}}\n' for s in steps))
    assert [tactics.env_steps_at(tmp_path, c) for c in range(4)] == [100, 200, 300, 400]


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys):
    assert tactics.main([str(tmp_path / "missing")]) == 2
    assert tactics.main([str(tmp_path), "--chunks", "1,last"]) == 2
    assert tactics.main([str(tmp_path), "--positions"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("error: ") for line in lines), lines
