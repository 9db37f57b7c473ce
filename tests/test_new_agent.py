"""Adding an agent is its module plus one registry line, and nothing outside: a small agent
kept in the tests (tests/tiny_agent.py) is registered from here, and the training command, the
learning checks and the benchmark's planning take it as they take the shipped ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxrl_sys import agents, envs
from jaxrl_sys.commands import check_learning, train
from jaxrl_sys.core.types import AgentDef
from jaxrl_sys.tools import benchmark, learning_check

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def registered(monkeypatch):
    """The tiny agent under the name "tiny": one line in the registry."""
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setitem(agents.AGENTS, "tiny", "tiny_agent")
    return agents.load("tiny")


def test_the_registered_agent_keeps_the_contract(registered):
    assert isinstance(registered, AgentDef)
    assert "tiny" in agents.names() and "tiny" in agents.catalog.names()


def test_the_training_command_trains_it(registered, tmp_path):
    code = train.main(["--agent", "tiny", "--env", "CartPole-v1", "--run-root", str(tmp_path),
                       "--no-progress", "--chunks", "2"])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    assert json.loads((run_dir / "run.json").read_text())["agent"] == "tiny"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records and records[-1]["env_steps"] == 2_048


def test_the_learning_checks_and_the_benchmark_take_it(registered):
    assert "tiny:CartPole-v1" in {case.name for case in check_learning.all_cases()}
    case = learning_check.find_case("tiny:CartPole-v1", check_learning.all_cases())
    result = learning_check.run_case(case, registered, envs, [0, 1])
    assert learning_check.judge(result).passed  # a random policy outlasts 15 steps
    entries, skipped = benchmark.plan("classic", ["tiny"], agents.load, envs)
    assert {entry.env for entry in entries} >= {"CartPole-v1", "Acrobot-v1"}
    assert all(entry.agent == "tiny" for entry in entries)
    assert any("tiny needs discrete actions" in line for line in skipped)  # its own refusal
