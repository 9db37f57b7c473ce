"""scripts/check_learning.py: bad input, saved results, the exit code of a failing case."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxrl_sys.tools import learning_check as lc

from jaxrl_sys.commands import check_learning as check_learning


# a worker process's start (`run_worker`): every case is read, then the run's devices asked for
LOAD_EVERY_AGENT_THEN_ASK_FOR_DEVICES = """
from jaxrl_sys import agents
from jaxrl_sys.tools import learning_check as lc
lc.cases(agents.promises())
from jaxrl_sys.runtime.devices import request_devices
request_devices(3)
import jax
print(len(jax.devices()))
"""


def test_loading_every_agent_leaves_the_device_count_to_the_run():
    """`--devices 8` is asked for after the check has read every agent's promises, so no
    agent may compute with JAX when imported (evosax does, and es imported it at the top:
    the worker failed with 1 device)."""
    flags = " ".join(flag for flag in os.environ.get("XLA_FLAGS", "").split()
                     if "device_count" not in flag)
    done = subprocess.run([sys.executable, "-c", LOAD_EVERY_AGENT_THEN_ASK_FOR_DEVICES],
                          capture_output=True, text=True, env=dict(os.environ, XLA_FLAGS=flags))
    assert done.returncode == 0 and done.stdout.split() == ["3"], done.stderr[-2000:]


def test_a_worker_asked_for_more_devices_than_it_has_says_so_in_one_line(tmp_path, capsys):
    """This process's JAX started with 8 CPU devices: a worker for 16 is refused, exit 2."""
    assert len(jax.devices()) == 8  # started here, so the count can no longer change
    argv = ["--worker", "native", "--cases", "ppo:CartPole-v1", "--devices", "16", "--out",
            str(tmp_path / "out.json")]
    assert check_learning.main(argv) == 2
    err = capsys.readouterr().err
    assert "devices=16" in err and err.count("\n") == 1
    assert not (tmp_path / "out.json").exists()


def saved(tmp_path, finals: list[float], setting: str = "native", devices: int = 1) -> str:
    curves = np.array([[400.0] * len(finals), finals])
    result = lc.CaseResult("ppo:CartPole-v1", setting, list(range(len(finals))), 475.0,
                           [1000, 2000], curves, curves, 12.0, devices=devices)
    path = tmp_path / f"{setting}_{devices}.json"
    path.write_text(json.dumps([result.to_json()]))
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (["--cases", "ppo:Nope-v0"], "unknown case"),
    (["--settings", "AVX9"], "unknown setting"),
    (["--seeds", "0"], "--seeds"),
    (["--devices", "0"], "--devices"),
    (["--cases", "ppo:gymnasium:CartPole-v1", "--devices", "2"], "host"),
    (["--load", "/nonexistent.json"], "cannot read"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert check_learning.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_saved_results_print_a_table_per_case(tmp_path, capsys):
    passing = saved(tmp_path, [500.0] * 15 + [300.0])
    failing = saved(tmp_path, [500.0] * 14 + [300.0, 300.0], "AVX")
    markdown = tmp_path / "table.md"
    assert check_learning.main(["--load", passing, "--markdown", str(markdown)]) == 0
    assert check_learning.main(["--load", passing, failing]) == 1
    out = capsys.readouterr().out
    assert "| seed | native | AVX |" in out and "| reached | 15/16 | 14/16 |" in out
    assert "FAILED: ppo:CartPole-v1 [AVX]" in out
    assert "| 15 | 300.0* (300.0) |" in markdown.read_text()


def test_results_on_several_devices_get_a_column_of_their_own(tmp_path, capsys):
    one = saved(tmp_path, [500.0] * 16)
    eight = saved(tmp_path, [500.0] * 16, devices=8)
    assert check_learning.main(["--load", one, eight]) == 0
    assert "| seed | native | native, 8 devices |" in capsys.readouterr().out


def test_a_recorded_dataset_is_made_once_by_processes_sharing_its_root(tmp_path, monkeypatch):
    """Learning tests in two xdist workers may need the same dataset at once: the first to
    lock the root records it, the other waits and reads it, and neither writes it twice."""
    import threading
    import time
    from jaxrl_sys.core.types import DatasetRecipe

    made = []

    def record(recipe, env_name, load_agent, registry, root, name):
        made.append(name)
        time.sleep(0.3)  # a recording takes a while: the other caller arrives meanwhile
        (root / name / "data").mkdir(parents=True)
        return root / name

    monkeypatch.setattr(lc, "_record_dataset", record)
    recipe = DatasetRecipe("ppo", "epsilon:0.3", 20)
    paths = []
    callers = [threading.Thread(target=lambda: paths.append(
        lc.recorded_dataset(recipe, "CartPole-v1", None, None, tmp_path))) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert made == ["cartpole-v1-ppo-epsilon_0_3-20-v0"]
    assert paths == [tmp_path / made[0]] * 2
