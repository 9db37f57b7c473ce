"""train.py --wandb: a W&B run in offline mode holds the run's metrics and config; without the
wandb package, or with a sweep, the flag is refused in one line before anything is created."""

import importlib.util
import json

import pytest

from test_cli import run_train, train_script


@pytest.mark.slow
def test_offline_wandb_run_holds_the_metrics_and_config(tmp_path, monkeypatch):
    """In a process of its own: W&B starts a service process and threads that outlive the run
    (until the process exits), which an xdist worker would carry into every later test."""
    pytest.importorskip("wandb", reason="the wandb extra is not installed (CI installs it)")
    monkeypatch.setenv("WANDB_MODE", "offline")  # the script's process inherits it
    root = tmp_path / "runs"
    done = run_train("--total-steps", "4096", "--chunks", "2", "--run-root", str(root),
                     "--wandb", "jaxrl-sys-test")
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = root.iterdir()
    run_id = (run_dir / "wandb_id").read_text().strip()
    (offline,) = (run_dir / "wandb").glob(f"offline-run-*-{run_id}")
    data = (offline / f"run-{run_id}.wandb").read_bytes()  # W&B's record log (protobuf)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for record in records:  # every chunk's values, as the JSONL has them
        for key in ("env_steps", "mean_return", "loss"):
            assert key.encode() in data and _encoded(record[key]) in data, key
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert b"learning_rate" in data and _encoded(config["learning_rate"]) in data


def _encoded(value: float) -> bytes:
    """A number as W&B's record log spells it (JSON; whole floats without '.0')."""
    return json.dumps(int(value) if float(value).is_integer() else value).encode()


@pytest.mark.parametrize("args, expected", [
    (["--wandb", "p"], "--wandb needs the wandb package"),
    (["--wandb", " "], "--wandb needs a project name"),
])
def test_wandb_flag_without_the_package_is_refused(tmp_path, capsys, monkeypatch, args, expected):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real_find_spec(name, *a))
    assert train_script.main(["--no-progress", "--run-root", str(tmp_path / "runs"), *args]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert not (tmp_path / "runs").exists()


def test_wandb_with_a_sweep_is_refused(tmp_path, capsys):
    assert train_script.main(["--no-progress", "--run-root", str(tmp_path / "runs"),
                              "--wandb", "p", "--sweep", "learning_rate=1e-3,2e-3"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--wandb logs single runs" in lines[0], lines
    assert not (tmp_path / "runs").exists()
