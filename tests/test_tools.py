"""scripts/evaluate.py and scripts/plot.py on a short training's run directory;
benchmarks/pendulum_optimum.py on a coarse grid; the refusals of bench_purejaxrl_rnn.py and
bench_purejaxql.py; benchmarks/suite_durations.py on a hand-made JUnit report, and its file's
test ids."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"


def _load(name: str):
    """A command module (jaxrl_sys.commands) or a measuring script of benchmarks/ by name."""
    if (ROOT / "jaxrl_sys" / "commands" / f"{name}.py").is_file():
        return importlib.import_module(f"jaxrl_sys.commands.{name}")
    spec = importlib.util.spec_from_file_location(f"{name}_script", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


train, evaluate, plot = _load("train"), _load("evaluate"), _load("plot")
pendulum_optimum = _load("pendulum_optimum")


@pytest.fixture(scope="module")
def short_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    code = train.main(["--agent", "ppo", "--total-steps", "16384", "--chunks", "4", "--seeds", "2",
                       "--no-progress", "--run-root", str(root)])
    assert code == 0
    (run_dir,) = root.iterdir()
    return run_dir


@pytest.mark.slow
def test_evaluate_prints_mean_and_std_and_renders_a_gif(short_run, tmp_path, capsys):
    gif = tmp_path / "episode.gif"
    assert evaluate.main([str(short_run), "--episodes", "4", "--render", str(gif)]) == 0
    out = capsys.readouterr().out
    assert "checkpoint after chunk 3, 4 greedy episodes x 2 seed(s)" in out
    assert re.search(r"^  seed 1: return \d+\.\d \+- \d+\.\d, length", out, re.M), out
    assert re.search(r"^return \d+\.\d \+- \d+\.\d, length \d+\.\d \+- \d+\.\d$", out, re.M), out
    with Image.open(gif) as image:
        assert image.format == "GIF" and image.n_frames > 1
        assert image.size == (600, 400)


def test_plot_writes_a_png_with_seed_bands(short_run, tmp_path, capsys):
    png = tmp_path / "curves.png"
    assert plot.main([str(short_run), str(short_run), "--out", str(png)]) == 0
    assert "wrote" in capsys.readouterr().out
    with Image.open(png) as image:
        image.verify()
        assert image.format == "PNG"
    run = plot.load_run(short_run, "mean_return")
    assert run["seeds"] == 2 and len(run["steps"]) == 4
    assert (run["low"] <= run["mean"]).all() and (run["mean"] <= run["high"]).all()


def test_plot_draws_a_benchmark_results_file_beside_runs(short_run, tmp_path, capsys):
    """`--results` rows (here the repository's MinAtar results, one env) are curves too."""
    png = tmp_path / "beside.png"
    results = Path(__file__).resolve().parent.parent / "results" / "minatar.json"
    code = plot.main([str(short_run), "--results", str(results), "--env", "Breakout-MinAtar",
                      "--out", str(png)])
    assert code == 0 and "and 1 results file(s)" in capsys.readouterr().out
    curves = plot.load_results(results, "Breakout-MinAtar")
    assert {c["label"].split(" on ")[0] for c in curves} >= {"ppo", "dqn"}
    assert all((c["low"] <= c["mean"]).all() and (c["mean"] <= c["high"]).all() for c in curves)


@pytest.mark.parametrize("tool, argv, message", [
    ("evaluate", ["/no/such/run"], "no run directory at /no/such/run"),
    ("evaluate", ["RUN", "--render", "out.mp4"], "--render must name a .gif file"),
    ("evaluate", ["RUN", "--episodes", "0"], "--episodes must be >= 1"),
    ("plot", ["/no/such/run"], "no run directory at /no/such/run"),
    ("plot", ["RUN", "--out", "curves.jpg"], "--out must end in .png"),
    ("plot", ["--results", "/no/such.json"], "no results file at /no/such.json"),
    ("plot", ["--out", "curves.png"], "name run directories or --results files to plot"),
])
def test_bad_input_is_one_line_exit_2(short_run, capsys, tool, argv, message):
    module = {"evaluate": evaluate, "plot": plot}[tool]
    argv = [str(short_run) if a == "RUN" else a for a in argv]
    assert module.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {message}" or (len(err.splitlines()) == 1 and message in err), err


@pytest.mark.slow
def test_evaluate_a_gymnasium_run_through_the_host_loop(tmp_path, capsys):
    """A host-loop run keeps the learner's checkpoints; evaluate.py plays its greedy episodes
    in worker processes and draws one with Gymnasium's own renderer."""
    root = tmp_path / "runs"
    code = train.main(["--agent", "ppo", "--env", "gymnasium:CartPole-v1", "--set", "num_envs=2",
                       "--total-steps", "1024", "--chunks", "2", "--no-progress",
                       "--run-root", str(root)])
    assert code == 0
    (run_dir,) = root.iterdir()
    gif = tmp_path / "episode.gif"
    capsys.readouterr()
    assert evaluate.main([str(run_dir), "--episodes", "3", "--render", str(gif)]) == 0
    out = capsys.readouterr().out
    assert "gymnasium:CartPole-v1, checkpoint after chunk 1, 3 greedy episodes x 1 seed(s)" in out
    assert re.search(r"^return \d+\.\d \+- \d+\.\d, length", out, re.M), out
    with Image.open(gif) as image:
        assert image.n_frames > 1


def test_pendulum_dp_policy_swings_every_start_up_near_the_optimum():
    returns = pendulum_optimum.dp_policy_returns(60, 61, 9, starts=512, seed=7)
    # the default 720x641 grid gives -136.7 over 4096 starts; left hanging costs ~-1000
    assert -150.0 < float(returns.mean()) < -125.0
    assert float(returns.min()) > -400.0  # even from the bottom, swung up
    assert float(returns.max()) > -1.0  # a start near upright costs almost nothing


def test_pendulum_optimum_refuses_a_bad_grid_in_one_line(capsys):
    assert pendulum_optimum.main(["--grid", "7x3"]) == 2
    assert capsys.readouterr().err.strip() == \
        "pendulum_optimum.py: --grid '7x3': at least 8 points per axis"


@pytest.mark.parametrize("argv, says", [
    ([], "needs --purejaxrl PATH"),
    (["--purejaxrl", "/nonexistent/purejaxrl"], "no purejaxrl/ppo_rnn.py and wrappers.py there"),
])
def test_purejaxrl_side_by_side_says_how_to_get_a_checkout_in_one_line(argv, says):
    """PureJaxRL's code is the user's checkout, never a copy here: without one, one line that
    says how to get it, exit 2."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_purejaxrl_rnn.py"), *argv],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert says in line and "git clone https://github.com/luchris429/purejaxrl" in line


@pytest.mark.parametrize("argv, says", [
    (["--sections", "ppo"], "needs --purejaxrl PATH"),
    (["--sections", "ppo", "--purejaxrl", "/nonexistent"], "no purejaxrl/ppo.py and wrappers.py"),
    (["--sections", "warp"], "sections are ppo, muzero_seeds"),
    (["--table", "/nonexistent.json"], "no such file"),
])
def test_gpu_benchmark_refuses_bad_input_in_one_line(argv, says, tmp_path):
    """benchmarks/gpu.py: bad input is one line and exit 2, before any section runs."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu.py"), *argv, "--out",
                           str(tmp_path / "gpu.json")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert says in line
    assert not (tmp_path / "gpu.json").exists()


@pytest.mark.parametrize("argv, says", [
    ([], "needs --purejaxql PATH"),
    (["--purejaxql", "/nonexistent/purejaxql"], "no purejaxql/pqn_minatar.py there"),
    (["--purejaxql", "/nonexistent", "--env", "CartPole-v1"], "must be a MinAtar game"),
])
def test_purejaxql_side_by_side_refuses_bad_input_in_one_line(argv, says, tmp_path):
    """benchmarks/bench_purejaxql.py: purejaxql is the user's checkout, never a copy here;
    bad input is one line and exit 2, and nothing is written."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_purejaxql.py"), *argv,
                           "--out", str(tmp_path / "pqn.json")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert says in line
    assert "git clone https://github.com/mttga/purejaxql" in line or "MinAtar" in line
    assert not (tmp_path / "pqn.json").exists()


def test_gpu_benchmark_tables_the_saved_h200_run():
    """`--table` renders the saved results/gpu.json: each PPO row's ratio to PureJaxRL, the
    agents' and MuZero seeds' tables, the sections that did not finish."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu.py"), "--table",
                           str(BENCHMARKS.parent / "results" / "gpu.json")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "NVIDIA H200" in done.stdout
    assert "| ours_unroll8 | 19.75M | 1.50 |" in done.stdout
    assert "| 16 | 37.9 | 79,727 | 5.37 |" in done.stdout
    assert "`ops` did not finish" in done.stdout


def test_suite_durations_keeps_the_long_tests_of_a_junit_report_by_node_id(tmp_path, capsys):
    suite_durations = _load("suite_durations")
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_a" name="test_long[x:y[z=1]]" time="80.5"/>'
        '<testcase classname="tests.test_b.TestGroup" name="test_mid" time="6.0"/>'
        '<testcase classname="tests.test_b" name="test_short" time="0.3"/>'
        '</testsuite></testsuites>', encoding="utf-8")
    out = tmp_path / "durations.json"
    assert suite_durations.main([str(report), "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == {"tests/test_a.py::test_long[x:y[z=1]]": 80.5,
                                           "tests/test_b.py::TestGroup::test_mid": 6.0}
    assert suite_durations.main([str(tmp_path / "missing.xml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot read the JUnit report" in err


def test_the_durations_file_names_tests_that_exist():
    """tests/durations.json orders the child-process tests; an id it holds that no longer
    names a test means the file is stale (regenerate it with benchmarks/suite_durations.py)."""
    durations = json.loads((ROOT / "tests" / "durations.json").read_text())
    files = {key.split("::")[0] for key in durations}
    assert all((ROOT / path).is_file() for path in files), sorted(
        path for path in files if not (ROOT / path).is_file())
