"""benchmarks/search_gain.py: its refusals, one line and exit 2 before any run is opened."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "search_gain.py"
spec = importlib.util.spec_from_file_location("search_gain_script", SCRIPT)
search_gain = importlib.util.module_from_spec(spec)
spec.loader.exec_module(search_gain)


@pytest.mark.parametrize("args, words", [
    (["--simulations", "16,many"], "--simulations takes integers"),
    (["--episodes", "0"], "must be at least 1"),
    ([], "no run directory"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, words):
    assert search_gain.main([str(tmp_path / "missing"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
